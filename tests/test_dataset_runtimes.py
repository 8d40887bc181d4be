"""Dataset mode on another runtime: `diff --inputs-dir --vs-runtime openvino` and `layers --inputs-dir
--runtime openvino` pool the same numbers as OpenVINO and onnxruntime called directly on every sample
(tests/openvino_oracle.py), in numpy float64 over the concatenated samples. Skipped without openvino."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest
from typer.testing import CliRunner

from conftest import sample_feeds, sample_path
from onnxprobe.cli.main import app
from openvino_oracle import openvino_values, ort_values

pytest.importorskip("openvino")
pytestmark = pytest.mark.openvino
runner = CliRunner()


def _run(*args, code=(0,)):
    r = runner.invoke(app, [str(a) for a in args])
    assert r.exit_code in code, r.output
    return r


def _folder(path, name: str, n: int = 3) -> list[dict]:
    feeds = sample_feeds(name)
    rng = np.random.default_rng(3)
    path.mkdir()
    samples = []
    for i in range(n):
        s = {k: (rng.standard_normal(v.shape) * (1 + i)).astype(v.dtype) for k, v in feeds.items()}
        np.savez(path / f"b{i}.npz", **s)
        samples.append(s)
    return samples


def test_diff_over_a_dataset_against_openvino_pools_what_both_runtimes_compute(tmp_path):
    samples = _folder(tmp_path / "ds", "mlp")
    out = tmp_path / "d.json"
    _run("diff", sample_path("mlp"), "--vs-runtime", "openvino", "--inputs-dir", tmp_path / "ds", "--all", "--json", out,
         code=(0, 1))
    d = json.loads(out.read_text())
    assert d["samples"] == 3 and [s["runtime"] for s in d["sides"].values()] == ["onnxruntime", "openvino"]
    pairs = [p for p in d["pairs"] if p["sqnr_db"] is not None and p["strategy"] == "name"]
    assert len(pairs) >= 2
    names = [p["a"] for p in pairs]
    va = [ort_values(sample_path("mlp"), names, s) for s in samples]
    vb = [openvino_values(sample_path("mlp"), names, s) for s in samples]
    for p in pairs:
        a = np.concatenate([np.asarray(v[p["a"]], np.float64).ravel() for v in va])
        b = np.concatenate([np.asarray(v[p["a"]], np.float64).ravel() for v in vb])
        noise = float(np.sum((a - b) ** 2))
        want = math.inf if noise == 0 else 10 * math.log10(float(np.sum(b * b)) / noise)
        if p["exact"]:
            assert noise == 0, p["a"]
        else:
            assert abs(p["sqnr_db"] - want) <= 0.5, (p["a"], p["sqnr_db"], want)


def test_layers_over_a_dataset_on_openvino_has_openvinos_moments(tmp_path):
    samples = _folder(tmp_path / "ds", "mlp")
    out = tmp_path / "l.json"
    _run("layers", sample_path("mlp"), "--runtime", "openvino", "--inputs-dir", tmp_path / "ds", "--all", "--json", out)
    d = json.loads(out.read_text())
    assert d["batches"] == 3 and d["runtime"] == "openvino" and d["device"] == "CPU"
    rows = [t for t in d["tensors"] if t.get("count") and t["node"]]
    assert rows
    names = [t["name"] for t in rows]
    direct = [openvino_values(sample_path("mlp"), names, s) for s in samples]
    for t in rows:
        x = np.concatenate([np.asarray(v[t["name"]], np.float64).ravel() for v in direct])
        assert t["count"] == x.size and t["min"] == x.min() and t["max"] == x.max(), t["name"]
        assert t["mean"] == pytest.approx(x.mean(), rel=1e-9, abs=1e-12), t["name"]


@pytest.mark.ray
def test_ray_workers_run_the_same_runtimes_and_give_the_same_json(tmp_path):
    pytest.importorskip("ray", reason="ray is not installed: pip install 'onnxprobe[ray]'")
    from test_ray import _under

    _folder(tmp_path / "ds", "mlp")
    args = ["diff", sample_path("mlp"), "--vs-runtime", "openvino", "--inputs-dir", tmp_path / "ds", "--all"]
    _run(*args, "--json", tmp_path / "local.json", code=(0, 1))
    _run(*args, "--ray", "--ray-workers", "1", "--json", tmp_path / "ray.json", code=(0, 1))
    local, ray = (json.loads((tmp_path / f).read_text()) for f in ("local.json", "ray.json"))
    # the sides as a single-input diff gives them, the providers too (a session's, where the workers ran them)
    assert ray["executor"] == {"engine": "ray", "workers": 1} and ray["sides"] == local["sides"]
    assert [p["sums"] for p in ray["pairs"]] == [p["sums"] for p in local["pairs"]]
    assert not [c for c in _under(os.getpid()).values() if "ray" in c or "openvino" in c]


def test_layers_over_a_dataset_on_openvino_infers_shapes_once_per_shape(tmp_path, monkeypatch):
    """The chunks' sizes (shape inference on a copy of the model) are worked out once for 3 samples of one
    shape, again for a sample of another."""
    from onnxprobe import api
    from onnxprobe.runtime.runners import host_stats

    rng = np.random.default_rng(0)
    (tmp_path / "ds").mkdir()
    for i, batch in enumerate([2, 2, 2, 1]):
        np.savez(tmp_path / "ds" / f"b{i}.npz", x=rng.random((batch, 3, 8, 8), dtype=np.float32))
    seen = []
    real = host_stats.concrete_sizes
    monkeypatch.setattr(host_stats, "concrete_sizes", lambda m, shapes: seen.append(dict(shapes)) or real(m, shapes))
    res = api.layers_dataset(sample_path("dynamic_batch"), tmp_path / "ds", api.Selection(all=True), runtime="openvino")
    assert res.batches == 4 and res.moments
    assert seen == [{"x": (2, 3, 8, 8)}, {"x": (1, 3, 8, 8)}]


def _rank_unknown_conv(path):
    """A Conv whose input has no declared rank: OpenVINO reads it only with the inputs' shapes fixed."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from conftest import make_model

    rng = np.random.default_rng(5)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    x = onnx.ValueInfoProto(name="x")
    x.type.tensor_type.elem_type = TensorProto.FLOAT
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), helper.make_node("Relu", ["c"], ["y"], name="relu")]
    onnx.save(make_model(nodes, [x], [y], [w]), str(path))
    return path


@pytest.mark.parametrize("sides", [["--runtime", "openvino", "--vs-runtime", "ort"], ["--vs-runtime", "openvino"]])
def test_diff_over_a_dataset_on_openvino_reads_a_dynamic_model_with_the_samples_shapes(tmp_path, sides):
    """OpenVINO cannot read this model as it is: in dataset mode it was made with no input shapes and
    failed ("OpenVINO cannot read the model"); it gets the first sample's, as the one-input diff gets its
    feeds', and every sample (of two shapes) is compared, as both runtimes compute it called directly."""
    model = _rank_unknown_conv(tmp_path / "m.onnx")
    rng = np.random.default_rng(7)
    (tmp_path / "ds").mkdir()
    samples = [{"x": rng.standard_normal(s).astype(np.float32)} for s in [(1, 3, 8, 8), (1, 3, 8, 8), (2, 3, 6, 6)]]
    for i, s in enumerate(samples):
        np.savez(tmp_path / "ds" / f"b{i}.npz", **s)
    out = tmp_path / "d.json"
    _run("diff", model, *sides, "--inputs-dir", tmp_path / "ds", "--all", "--json", out, code=(0, 1))
    d = json.loads(out.read_text())
    assert d["samples"] == 3 and "openvino" in [s["runtime"] for s in d["sides"].values()]
    pairs = {p["a"]: p for p in d["pairs"] if p["sqnr_db"] is not None}
    assert set(pairs) == {"c", "y"}
    ov = [openvino_values(model, ["c", "y"], s) for s in samples]
    ort = [ort_values(model, ["c", "y"], s) for s in samples]
    a_side, b_side = (ov, ort) if sides[0] == "--runtime" else (ort, ov)
    for name, p in pairs.items():
        a = np.concatenate([np.asarray(v[name], np.float64).ravel() for v in a_side])
        b = np.concatenate([np.asarray(v[name], np.float64).ravel() for v in b_side])
        noise = float(np.sum((a - b) ** 2))
        want = math.inf if noise == 0 else 10 * math.log10(float(np.sum(b * b)) / noise)
        if math.isfinite(want):
            assert abs(p["sqnr_db"] - want) <= 0.5, (name, p["sqnr_db"], want)
        else:
            assert p["exact"], name


def test_a_pipelines_first_sample_read_for_openvinos_shapes_is_still_compared(tmp_path):
    model = _rank_unknown_conv(tmp_path / "m.onnx")
    pipe = tmp_path / "pipe.py"
    pipe.write_text("import numpy as np\n\ndef samples():\n    rng = np.random.default_rng(2)\n"
                    "    for shape in [(1, 3, 8, 8), (2, 3, 6, 6), (1, 3, 7, 7)]:\n"
                    "        yield {'x': rng.standard_normal(shape).astype(np.float32)}\n")
    out = tmp_path / "d.json"
    _run("diff", model, "--vs-runtime", "openvino", "--inputs-from", f"{pipe}:samples", "--json", out, code=(0, 1))
    d = json.loads(out.read_text())
    assert d["samples"] == 3 and d["sample_labels"] == ["item 0", "item 1", "item 2"]


def test_a_runtime_option_openvino_refuses_is_one_error_before_any_batch(tmp_path, monkeypatch):
    """`layers --runtime openvino --runtime-option BAD=1 --inputs-dir DIR`: the options are checked once,
    before the first batch: one line and exit 2, not one failure per batch."""
    import onnx
    from onnx import TensorProto, helper

    from onnxprobe import api
    from onnxprobe.api import core
    from onnxprobe.errors import UsageError

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "tiny",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = tmp_path / "tiny.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    (tmp_path / "ds").mkdir()
    for i in range(3):
        np.savez(tmp_path / "ds" / f"b{i}.npz", x=np.full((2, 3), i - 1.0, np.float32))
    r = _run("layers", model, "--runtime", "openvino", "--runtime-option", "BAD=1", "--inputs-dir", tmp_path / "ds",
             code=(2,))
    assert r.stderr.count("\n") == 1 and "--runtime-option BAD=1: OpenVINO CPU refuses it" in r.stderr, r.stderr
    assert "b0.npz" not in r.stderr and "batches" not in r.stderr, r.stderr

    def no_batches(*a, **kw):
        raise AssertionError("a batch ran")

    monkeypatch.setattr(core, "run_batches", no_batches)
    with pytest.raises(UsageError, match="BAD=1"):
        api.layers_dataset(model, tmp_path / "ds", runtime="openvino", runtime_options={"BAD": "1"})
    monkeypatch.undo()
    res = api.layers_dataset(model, tmp_path / "ds", api.Selection(all=True), runtime="openvino")
    assert res.batches == 3 and res.info.runtime == "openvino" and res.moments["y"].stats().max == 1.0


def _compiled_precision(hint: str) -> str:
    """The precision OpenVINO's CPU plugin compiles a model in when asked for ``hint``."""
    import openvino as ov
    import openvino.opset13 as ops

    p = ops.parameter([1], ov.Type.f32, name="x")
    cm = ov.Core().compile_model(ov.Model([ops.relu(p)], [p], "t"), "CPU", {"INFERENCE_PRECISION_HINT": hint})
    return cm.get_property("INFERENCE_PRECISION_HINT").to_string()  # "f16", "bf16", "f32"


def test_shards_computed_in_other_precisions_are_not_merged(tmp_path):
    """The precision OpenVINO computed in and the runtime options given are part of what a shard
    describes: shards of one model run at f16 and at the device's default were merged into one report
    (pooled errors of two different computations)."""
    _folder(tmp_path / "ds", "mlp", n=2)
    x, y, u, v = (tmp_path / f"{k}.json" for k in "xyuv")
    _run("layers", sample_path("mlp"), "--runtime", "openvino", "--inputs-dir", tmp_path / "ds", "--json", x)
    _run("layers", sample_path("mlp"), "--runtime", "openvino", "--runtime-option", "INFERENCE_PRECISION_HINT=f16",
         "--inputs-dir", tmp_path / "ds", "--json", y)
    dx, dy = json.loads(x.read_text()), json.loads(y.read_text())
    assert dy["runtime_options"] == {"INFERENCE_PRECISION_HINT": "f16"} and dx["runtime_options"] == {}
    # what this CPU compiles the f16 hint into, asked of OpenVINO itself (one without f16 arithmetic: bf16 or f32)
    assert dy["precision"] == _compiled_precision("f16") and dx["precision"] in ("f32", "bf16")
    r = _run("merge-stats", x, y, code=(2,))
    assert "describes" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    _run("diff", sample_path("mlp"), "--vs-runtime", "openvino", "--inputs-dir", tmp_path / "ds", "--json", u, code=(0, 1))
    _run("diff", sample_path("mlp"), "--vs-runtime", "openvino", "--runtime-option", "openvino:INFERENCE_PRECISION_HINT=f16",
         "--inputs-dir", tmp_path / "ds", "--json", v, code=(0, 1))
    sides = json.loads(v.read_text())["sides"]
    assert sides["b"]["precision"] == _compiled_precision("f16") and sides["a"]["precision"] is None, sides
    r = _run("merge-stats", u, v, code=(2,))
    assert "describes" in r.stderr and "precision" in r.stderr


def test_dataset_sides_are_a_single_input_diffs_and_only_onnxruntime_has_an_opt_level(tmp_path):
    """--inputs-dir turned `sides` into a list without model and providers, and gave OpenVINO onnxruntime's
    opt level "off"; layers and RunInfo said "off" for OpenVINO too."""
    from onnxprobe import api

    _folder(tmp_path / "ds", "cnn")
    one, many = tmp_path / "one.json", tmp_path / "many.json"
    _run("diff", sample_path("cnn"), "--vs-runtime", "openvino", "--json", one, code=(0, 1))
    _run("diff", sample_path("cnn"), "--vs-runtime", "openvino", "--inputs-dir", tmp_path / "ds", "--json", many, code=(0, 1))
    single, dataset = json.loads(one.read_text())["sides"], json.loads(many.read_text())["sides"]
    assert set(dataset) == set(single) == {"a", "b"}
    for k in "ab":
        assert set(dataset[k]) == set(single[k]) and dataset[k]["model"] == single[k]["model"] == str(sample_path("cnn"))
    assert dataset["a"]["opt_level"] == "off" and dataset["b"]["opt_level"] is None and dataset["b"]["runtime"] == "openvino"
    for extra in ([], ["--inputs-dir", tmp_path / "ds"]):
        d = json.loads(_run("layers", sample_path("cnn"), "--runtime", "openvino", *extra, "--json", "-").stdout)
        assert d["runtime"] == "openvino" and d["opt_level"] is None
    assert api.RunInfo("CPU", [], "off", 0.0, 0.0, runtime="openvino").opt_level is None
    assert api.RunInfo("cpu", [], "off", 0.0, 0.0).opt_level == "off"
