"""Shared fixtures: the bundled sample models, small builders for test-only models, the CLI runner."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_models"
SAMPLE_NAMES = ["cnn", "transformer_block", "mlp", "control_flow", "dynamic_batch", "external_data"]


def bench_models():
    """bench/models.py (the benchmark's model builders: resnet18, materialized, perturbed), imported from its
    folder, which is not a package."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("onnxprobe_bench_models", ROOT / "bench" / "models.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(params=SAMPLE_NAMES)
def sample(request) -> Path:
    return SAMPLES / f"{request.param}.onnx"


def sample_path(name: str) -> Path:
    return SAMPLES / f"{name}.onnx"


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def sample_feeds(name: str, seed: int = 3) -> dict[str, np.ndarray]:
    """Inputs for the sample models, made here independently of onnxprobe's own feed code."""
    rng = np.random.default_rng(seed)
    if name == "control_flow":
        return {"x": rng.random((2, 4), dtype=np.float32), "n": np.array(3, np.int64), "cond": np.array(True)}
    m = onnx.load(str(sample_path(name)), load_external_data=False)
    feeds = {}
    for vi in m.graph.input:
        dims = [d.dim_value if d.HasField("dim_value") else 2 for d in vi.type.tensor_type.shape.dim]
        feeds[vi.name] = rng.random(dims, dtype=np.float32)
    return feeds


def make_model(nodes, inputs, outputs, initializers=(), opset=17, ir=8) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "test", inputs, outputs, initializer=list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="onnxprobe-tests")
    m.ir_version = ir
    return m


def ort_session(m: onnx.ModelProto | str | Path):
    """onnxruntime's CPU session of ``m`` (a model or its path), its log quiet; None where it refuses the model:
    the oracle of the load checks."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 4
    try:
        return ort.InferenceSession(m.SerializeToString() if isinstance(m, onnx.ModelProto) else str(m), so,
                                    providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - any refusal
        return None


def saved_and_ort_copy(graph: onnx.GraphProto, folder: Path, level: str = "basic", opset: int = 17) -> tuple[str, str]:
    """(A, B): B the model of ``graph`` saved in ``folder``, A onnxruntime's own optimized copy of it at ``level``
    (basic, extended: what ``SessionOptions.optimized_model_filepath`` writes, quant_pre_process's first step)."""
    import onnxruntime as ort

    b, a = str(folder / "b.onnx"), str(folder / "a.onnx")
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, b)
    so = ort.SessionOptions()
    so.graph_optimization_level = {"basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
                                   "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED}[level]
    so.optimized_model_filepath = a
    ort.InferenceSession(b, so, providers=["CPUExecutionProvider"])
    return a, b


def ort_loads(m: onnx.ModelProto | str | Path) -> bool:
    """Whether onnxruntime's CPU provider builds a session of ``m``."""
    return ort_session(m) is not None


def load_check_agrees_with_ort(m: onnx.ModelProto, refused: tuple[str, ...] | None = None) -> None:
    """onnxprobe's load checks (``graph.node_check.model_problem``) against onnxruntime as the oracle: with
    ``refused`` None, onnxruntime loads ``m`` and the checks take it; else onnxruntime refuses it and the checks
    say so in one line that holds each of the words ``refused``."""
    from onnxprobe.graph.node_check import model_problem

    line = model_problem(m)
    if refused is None:
        assert ort_loads(m), "the oracle: onnxruntime loads it"
        assert line is None, line
    else:
        assert not ort_loads(m), "the oracle: onnxruntime refuses it"
        assert line is not None and "\n" not in line and all(w in line for w in refused), line


def legacy_export_of_source(folder, source: str) -> tuple[Path, str]:
    """``source`` (a module's text defining ``build() -> (module, args)``) written to FOLDER/make.py and its
    module exported with the legacy exporter (opset 17, input "x") to FOLDER/m.onnx: (the model's path, the
    ``--vs-torch`` argument "FOLDER/make.py:build")."""
    import torch

    src = Path(folder) / "make.py"
    src.write_text(source)
    ns: dict = {}
    exec(source, ns)
    m, args = ns["build"]()
    path = Path(folder) / "m.onnx"
    torch.onnx.export(m, args, str(path), dynamo=False, input_names=["x"], opset_version=17)
    return path, f"{src}:build"


def mm_relu_softmax(folder) -> str:
    """A small saved model, MatMul (weight w) -> Relu -> Softmax, for tests of settings and messages: its path."""
    vi = helper.make_tensor_value_info
    w = helper.make_tensor("w", TensorProto.FLOAT, [3, 3], [0.1 * i for i in range(9)])
    m = make_model([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"), helper.make_node("Relu", ["h"], ["r"], name="relu"),
                    helper.make_node("Softmax", ["r"], ["y"], name="sm", axis=-1)],
                   [vi("x", TensorProto.FLOAT, [2, 3])], [vi("y", TensorProto.FLOAT, [2, 3])], [w])
    path = Path(folder) / "m.onnx"
    onnx.save(m, path)
    return str(path)


def reference_node(op, inputs, nout=1, opset=13, consts=None, **attrs):
    """One ``op`` node at ``opset`` through onnxprobe's reference runner: its outputs. ``inputs``: name -> array
    (None: an optional input left out); ``consts``: name -> array, given as initializers after the inputs (a name
    "": an optional input left out)."""
    from onnx import numpy_helper

    from onnxprobe.runtime.runners.reference import ReferenceRunner

    consts = consts or {}
    outs = [f"y{i}" for i in range(nout)]
    names = [n if a is not None else "" for n, a in inputs.items()] + list(consts)
    node = helper.make_node(op, names, outs, name="n", **attrs)
    vi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in inputs.items()
          if a is not None]
    m = make_model([node], vi, [helper.make_empty_tensor_value_info(o) for o in outs],
                   [numpy_helper.from_array(a, n) for n, a in consts.items() if n], opset=opset, ir=7)
    res, _ = ReferenceRunner(m).execute(m, {n: a for n, a in inputs.items() if a is not None}, outs)
    return [res[o] for o in outs]


def matmul_relu(path, w: np.ndarray, mid: str = "c", tail: bool = False) -> str:
    """A [2, 4] model x @ w -> ``mid`` -> Relu (-> h -> Neg -> y with ``tail``, else -> y), saved at ``path``."""
    out = "h" if tail else "y"
    nodes = [helper.make_node("MatMul", ["x", "w"], [mid], name="mm"), helper.make_node("Relu", [mid], [out], name="relu")]
    if tail:
        nodes.append(helper.make_node("Neg", ["h"], ["y"], name="neg"))
    onnx.save(make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
                         [numpy_helper.from_array(np.asarray(w, np.float32), "w")]), str(path))
    return str(path)


def relu_n4(path, name: str) -> str:
    """A Relu of one input ``name`` of shape [N, 4] (N symbolic) to y, saved at ``path``."""
    vi = helper.make_tensor_value_info
    onnx.save(make_model([helper.make_node("Relu", [name], ["y"], name="r")], [vi(name, TensorProto.FLOAT, ["N", 4])],
                         [vi("y", TensorProto.FLOAT, ["N", 4])]), str(path))
    return str(path)


def fold_bn1(m: onnx.ModelProto, w: dict[str, np.ndarray], names: tuple[str, str]) -> None:
    """The sample CNN ``m`` with bn1 folded into conv1, in place, as exporters and optimizers fold it: the
    folded weight and bias (computed from ``w``, the CNN's weights in the dtype the caller chose) under
    ``names``, conv1 writing bn1's output, the node names kept."""
    k = w["bn1.scale"] / np.sqrt(w["bn1.var"] + 1e-5)
    folded = {names[0]: (w["conv1.weight"] * k[:, None, None, None]).astype(np.float32),
              names[1]: ((w["conv1.bias"] - w["bn1.mean"]) * k + w["bn1.bias"]).astype(np.float32)}
    nodes = [n for n in m.graph.node if n.name != "bn1"]
    for n in nodes:
        if n.name == "conv1":
            n.input[1:] = list(names)
            n.output[0] = "bn1_out"
    keep = [i for i in m.graph.initializer if not i.name.startswith(("bn1.", "conv1."))]
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    del m.graph.initializer[:]
    m.graph.initializer.extend(keep + [numpy_helper.from_array(v, k_) for k_, v in folded.items()])
    del m.graph.value_info[:]


def scale_weight_row(m: onnx.ModelProto, name: str, row: int, factor: float) -> onnx.ModelProto:
    """``m`` with row ``row`` of initializer ``name`` multiplied by ``factor`` (in place; returned): a model
    whose forward differs from the original's in one layer, by a known amount."""
    for init in m.graph.initializer:
        if init.name == name:
            a = numpy_helper.to_array(init).copy()
            a[row] *= factor
            init.CopyFrom(numpy_helper.from_array(a, init.name))
            return m
    raise KeyError(name)


def grads_for_output_grad(tmp_path, model: onnx.ModelProto, vals: dict[str, np.ndarray], dy: np.ndarray):
    """``onnxprobe grad`` of ``model`` on the inputs ``vals`` with dL/dy = ``dy`` (the CLI, every input a
    --wrt): the saved gradients, by input name."""
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    onnx.save(model, tmp_path / "m.onnx")
    args = ["grad", str(tmp_path / "m.onnx"), "--output-grad", str(tmp_path / "dy.npy"), "--device", "cpu",
            "--save-grads", str(tmp_path / "g.npz")]
    for n, a in vals.items():
        np.save(tmp_path / f"{n}.npy", a)
        args += ["--input", f"{n}={tmp_path / f'{n}.npy'}", "--wrt", n]
    np.save(tmp_path / "dy.npy", dy)
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    return np.load(tmp_path / "g.npz")


def torch_grads64(make, module, args) -> dict[str, np.ndarray]:
    """The oracle of ``diff --grad --vs-torch`` tests: torch autograd in float64 of the sum of ``make()``'s output
    (a fresh module of ``module``'s class, given ``module``'s state, in eval mode) on ``args``, per parameter."""
    m64 = make().eval()
    m64.load_state_dict(module.state_dict())
    m64 = m64.double()
    m64(*(a.double() for a in args)).sum().backward()
    return {n: p.grad.numpy() for n, p in m64.named_parameters()}


def empty_slice_model() -> onnx.ModelProto:
    """x -> Relu -> r -> Slice to nothing -> e -> Relu -> y: one pair with values, two empty ones."""
    v = (lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s))
    return make_model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Slice", ["r", "s0", "s1", "ax"], ["e"]),
                       helper.make_node("Relu", ["e"], ["y"])], [v("x", [2, 3])], [v("y", [2, 0])],
                      [numpy_helper.from_array(np.array([0], np.int64), "s0"), numpy_helper.from_array(np.array([0], np.int64), "s1"),
                       numpy_helper.from_array(np.array([1], np.int64), "ax")])


def nan_model() -> onnx.ModelProto:
    """y = Relu(Log(x) * w): Log of a negative input gives NaN, Log(0) gives -inf, so the counts are known."""
    w = numpy_helper.from_array(np.full((4,), 2.0, np.float32), "w")
    return make_model(
        [helper.make_node("Log", ["x"], ["logx"], name="log"),
         helper.make_node("Mul", ["logx", "w"], ["scaled"], name="scale"),
         helper.make_node("Relu", ["scaled"], ["y"], name="relu")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [w],
    )


def transposing_model() -> onnx.ModelProto:
    """x [N, M] -> r = Relu(x) [N, M], t = Transpose(x) [M, N], s = Sigmoid(t): a --map r -> t agrees with the
    static shapes (both ?x?) and differs at run time unless N == M."""
    return make_model(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Transpose", ["x"], ["t"], name="tr", perm=[1, 0]),
         helper.make_node("Sigmoid", ["t"], ["s"], name="sig"),
         helper.make_node("ReduceSum", ["r"], ["y1"], name="sum1", keepdims=0),
         helper.make_node("ReduceSum", ["s"], ["y2"], name="sum2", keepdims=0)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "M"])],
        [helper.make_tensor_value_info("y1", TensorProto.FLOAT, []), helper.make_tensor_value_info("y2", TensorProto.FLOAT, [])])


# --- surgery commands (inspect / mark / extract) --------------------------------------------------------

# settings of the caller's environment that change what onnxprobe prints: the width of its tables and lines
# (a CI or shell may export COLUMNS=40 or 200), colour (FORCE_COLOR, set by many CI systems, coloured the text
# the tests read), whether Rich takes the output for a terminal. The tests run without them; a test of one of
# them sets it itself (CliRunner's env=, monkeypatch.setenv, a subprocess's env).
CALLER_DISPLAY_SETTINGS = ("COLUMNS", "LINES", "JUPYTER_COLUMNS", "JUPYTER_LINES", "FORCE_COLOR", "NO_COLOR",
                           "TTY_COMPATIBLE", "TTY_INTERACTIVE")
# onnxprobe's settings the test run itself reads: where the third-party models are, where to keep screenshots
TEST_RUN_SETTINGS = ("ONNXPROBE_MODELS", "ONNXPROBE_SCREENSHOTS")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: writes and runs a model over 2 GB (about a minute); part of the default run")
    import os
    import signal
    import tempfile

    # Ctrl-C as a terminal delivers it, also where the run was started in the background of a shell without job
    # control (`pytest &` in a script), which starts it with SIGINT ignored, a disposition every subprocess
    # inherits: the tests that interrupt a command (one sends SIGINT to its child) hung until their timeout. A
    # Python handler is not inherited across exec: the children start with the default, as from a terminal.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)

    for name in list(os.environ):
        # the user's own onnxprobe settings (ONNXPROBE_DEBUG=1 printed tracebacks where the tests want one line;
        # ONNXPROBE_NO_CACHE, ONNXPROBE_CACHE_SIZE, ONNXPROBE_HISTORY...) are not the tests' to inherit either
        if name in CALLER_DISPLAY_SETTINGS or (name.startswith("ONNXPROBE_") and name not in TEST_RUN_SETTINGS):
            del os.environ[name]
    # a folder of this run, removed at its end, for what would otherwise land in the user's home folder:
    # the probed-copy cache (runtime.plan_cache; not a folder the user's ONNXPROBE_CACHE_DIR names either: its
    # entries would be read back by the tests), and HOME itself, for what the libraries the tests call write
    # there (onnxruntime's telemetry under ~/.cache/Microsoft when a test imports it before onnxprobe, Ray's
    # ~/.ray, OpenVINO's ~/intel, Chromium's profile); the XDG folders go back to their defaults under it.
    # Python's user site (pip install --user) stays where it was for the tests' subprocesses.
    import site

    global _RUN_DIR
    _RUN_DIR = tempfile.mkdtemp(prefix="onnxprobe-test-run-")
    os.environ.setdefault("PYTHONUSERBASE", site.getuserbase())
    for name in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        os.environ.pop(name, None)
    for name, sub in (("ONNXPROBE_CACHE_DIR", "cache"), ("HOME", "home")):
        os.environ[name] = os.path.join(_RUN_DIR, sub)
        os.mkdir(os.environ[name])


_RUN_DIR = None


def pytest_unconfigure(config):
    import shutil

    if _RUN_DIR:
        shutil.rmtree(_RUN_DIR, ignore_errors=True)


BIG_N = 200_000_000  # float32 elements per initializer: 800 MB each, 2.4 GB in all


def big_value(k: int, idx: np.ndarray) -> np.ndarray:
    """Element ``idx`` of the big model's initializer ``w{k}``: (idx % 1000) * (k + 1), exact in float32."""
    return ((np.asarray(idx) % 1000) * (k + 1)).astype(np.float32)


@pytest.fixture(scope="session")
def big_model():
    """A model over 2 GB: three 800 MB float32 initializers in big.onnx.data, written in 64 MB chunks
    (peak memory stays low). y = (Gather(w0, x) + Gather(w1, x)) * Gather(w2, x), x int64 [4].
    Lives in its own temporary folder, removed at the end of the session (pytest's tmp_path folders
    are kept for a few runs, which 5+ GB of weights should not be)."""
    import os
    import shutil
    import tempfile

    for old in Path(tempfile.gettempdir()).glob("onnxprobe-big-*"):  # left by a run that was killed
        try:
            os.kill(int((old / "owner.pid").read_text()), 0)
        except ProcessLookupError:
            shutil.rmtree(old, ignore_errors=True)
        except (OSError, ValueError):
            pass
    d = Path(tempfile.mkdtemp(prefix="onnxprobe-big-"))
    (d / "owner.pid").write_text(str(os.getpid()))
    try:
        src = d / "src"
        src.mkdir()
        chunk = 16_000_000
        inits = []
        with open(src / "big.onnx.data", "wb") as f:
            for k in range(3):
                offset = f.tell()
                for start in range(0, BIG_N, chunk):
                    f.write(big_value(k, np.arange(start, min(start + chunk, BIG_N), dtype=np.int64)).tobytes())
                t = TensorProto(name=f"w{k}", data_type=TensorProto.FLOAT, dims=[BIG_N])
                t.data_location = TensorProto.EXTERNAL
                for key, val in (("location", "big.onnx.data"), ("offset", str(offset)), ("length", str(BIG_N * 4))):
                    e = t.external_data.add()
                    e.key, e.value = key, val
                inits.append(t)
        nodes = [helper.make_node("Gather", [f"w{k}", "x"], [f"g{k}"], name=f"gather{k}") for k in range(3)]
        nodes += [helper.make_node("Add", ["g0", "g1"], ["s"], name="add"), helper.make_node("Mul", ["s", "g2"], ["y"], name="mul")]
        m = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.INT64, [4])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], inits)
        onnx.save(m, str(src / "big.onnx"))
        yield src / "big.onnx"
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def det_without_rule(monkeypatch):
    """Det with its gradient rule taken out of the table: the tests of what an op without a rule does (the
    one-line error naming it and where it lies, the notes, diff --grad's verdict) use Det as that op, as they
    did before it had a rule. ``NO_RULE_CLI`` runs the CLI in a subprocess the same way."""
    from onnxprobe.autodiff import registry

    registry.load()
    monkeypatch.delitem(registry.RULES, "Det")


# ``python -c NO_RULE_CLI ARGS...``: the onnxprobe command with Det's gradient rule taken out of the table
NO_RULE_CLI = ("import sys; from onnxprobe.autodiff import registry; registry.load(); del registry.RULES['Det']; "
               "sys.argv[0] = 'onnxprobe'; from onnxprobe.cli.main import run; run()")
