"""Models that declare what another input shape made of them, and graphs that other models' quirks break:
- value_info written at export for one input size (dynamic inputs, run at another): ``layers`` and
  ``diff`` ignore the contradicted declarations (a note says so) and their numbers equal numpy float64
  over plain onnxruntime's values; ``graph.stale_shapes`` never touches its input;
- two unnamed nodes of one op inside one introduced-error cone (onnxruntime refuses duplicate names);
- an IR 3 model with an initializer no node reads (the merged graph of the one-run diff must still load)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api
from onnxprobe.graph.shapes import concrete_shapes
from onnxprobe.graph.stale_shapes import stale_shapes, without_shapes
from onnxprobe.runtime.runners import base as base_runner
from test_stats_hostile import check, oracle


def _stale_model(seed: int = 0, channels: int = 4) -> onnx.ModelProto:
    """x [1, 3, h, w] -> Conv 3x3 -> c -> Relu -> y, with value_info of c and y for a 32x32 input.
    ``channels`` 200: a weight big enough that the probed copy is made over a skeleton (graph.skeleton)."""
    w = np.random.default_rng(seed).standard_normal((channels, 3, 3, 3)).astype(np.float32)
    m = make_model([helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), helper.make_node("Relu", ["c"], ["y"], name="relu")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "h", "w"])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels, 30, 30])],
                   [numpy_helper.from_array(w, "w")])
    m.graph.value_info.append(helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, channels, 30, 30]))
    return m


def _plain(m: onnx.ModelProto, x: np.ndarray) -> dict[str, np.ndarray]:
    """Plain onnxruntime on a copy without value_info, with c as an output (the oracle's own way)."""
    c = onnx.ModelProto()
    c.CopyFrom(m)
    del c.graph.value_info[:]
    c.graph.output[0].type.tensor_type.ClearField("shape")
    c.graph.output.append(onnx.ValueInfoProto(name="c"))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # as onnxprobe's default --opt-level off
    sess = ort.InferenceSession(c.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return dict(zip(["y", "c"], sess.run(["y", "c"], {"x": x})))


X = np.random.default_rng(1).standard_normal((1, 3, 21, 19)).astype(np.float32) + 100.0  # large offset


def test_stale_shapes_found_and_dropped_without_touching_the_model():
    m = _stale_model()
    before = m.SerializeToString()
    stale = stale_shapes(m, concrete_shapes(m, {"x": X.shape}))
    assert stale == {"c": ((1, 4, 30, 30), (1, 4, 19, 17)), "y": ((1, 4, 30, 30), (1, 4, 19, 17))}
    out = without_shapes(m, stale)
    assert m.SerializeToString() == before  # a copy: the input model is not changed
    shapes = {vi.name: [d.HasField("dim_value") for d in vi.type.tensor_type.shape.dim] for vi in (*out.graph.value_info, *out.graph.output)}
    assert shapes == {"c": [False] * 4, "y": [False] * 4}  # the rank kept, no dim
    assert stale_shapes(m, concrete_shapes(m, {"x": (1, 3, 32, 32)})) == {}  # the size it was exported for


@pytest.mark.parametrize("channels", [4, 200], ids=["small-weights", "skeleton"])
@pytest.mark.parametrize("on_host", [True, False], ids=["host", "graph"])
def test_layers_ignores_declared_shapes_the_inputs_contradict(tmp_path, monkeypatch, on_host, channels):
    monkeypatch.setattr(base_runner, "SMALL_ON_HOST", (2**24, 2**26) if on_host else (0, 0))
    p = tmp_path / "m.onnx"
    onnx.save(_stale_model(channels=channels), p)
    res = api.layers(p, api.Selection(all=True), api.RunConfig(device="cpu", cache=False), api.InputSpec(arrays={"x": X}))
    assert any("contradict" in n and "'c'" in n for n in res.notes + res.plan.warnings), (res.notes, res.plan.warnings)
    want = _plain(_stale_model(channels=channels), X)
    for t in ("c", "y"):
        assert res.shapes[t] == want[t].shape
        # on the host: float64 over the values; the model's own output y is always summarised in the graph
        check(res.stats[t], oracle(want[t]), t, rel=1e-9 if on_host and t == "c" else 2e-6)


@pytest.mark.parametrize("fuse", [True, False], ids=["one-run", "separate-runs"])
def test_diff_ignores_declared_shapes_the_inputs_contradict(tmp_path, monkeypatch, fuse):
    monkeypatch.setattr(base_runner, "SMALL_PAIRS_ON_HOST", (0, 0))
    pa, pb = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(_stale_model(0), pa)
    b = _stale_model(0)  # the same weights, 1 % larger: tensors alike enough that the one run measures them (two
    w = b.graph.initializer[0]  # random weights' outputs are near orthogonal: their cosine is measured on the host)
    w.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(w) * np.float32(1.01), w.name))
    onnx.save(b, pb)
    res = api.diff(pa, pb, selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False),
                   inputs=api.InputSpec(arrays={"x": X}), fuse=fuse)
    assert not any("one-run diff failed" in n for n in res.notes), res.notes
    assert any("contradict" in n for n in res.notes), res.notes
    va, vb = _plain(_stale_model(0), X), _plain(b, X)
    by = {r.pair.b.name: r for r in res.results}
    for t in ("c", "y"):
        d = va[t].astype(np.float64) - vb[t].astype(np.float64)
        assert by[t].metrics.max_abs == pytest.approx(np.abs(d).max(), rel=1e-6)
        assert by[t].metrics.rmse == pytest.approx(np.sqrt((d * d).mean()), rel=1e-6)
    assert res.in_graph >= (2 if fuse else 0)


def _unnamed_cone_model(w: float) -> onnx.ModelProto:
    """y = Sum(Relu(x), k1, k2), where k1 and k2 come from two unnamed ConstantOfShape nodes (weights made
    in the graph, as some exporters write them: not compared, so B's cone of y copies both)."""
    shape = numpy_helper.from_array(np.array([64], np.int64), "shape")
    nodes = [helper.make_node("ConstantOfShape", ["shape"], [f"k{i}"], value=numpy_helper.from_array(np.array([v], np.float32)))
             for i, v in enumerate((w, 2 * w), 1)]
    nodes += [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Sum", ["r", "k1", "k2"], ["y"], name="sum")]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 64])], [shape])


def test_one_run_diff_with_unnamed_nodes_in_a_cone(tmp_path, monkeypatch):
    monkeypatch.setattr(base_runner, "SMALL_PAIRS_ON_HOST", (0, 0))
    pa, pb = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(_unnamed_cone_model(1.0), pa)
    onnx.save(_unnamed_cone_model(1.001), pb)
    res = api.diff(pa, pb, selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False))
    assert not any("failed" in n or "not computed" in n for n in res.notes), res.notes
    (r,) = [r for r in res.results if r.pair.b.name == "y"]
    assert r.metrics is not None and r.introduced is not None and res.in_graph >= 1


def test_one_run_diff_of_an_ir3_model_with_an_unused_initializer(tmp_path, monkeypatch):
    monkeypatch.setattr(base_runner, "SMALL_PAIRS_ON_HOST", (0, 0))
    paths = []
    for k, s in enumerate((1.0, 1.001)):
        w = numpy_helper.from_array(np.full((16,), s, np.float32), "w")
        unused = numpy_helper.from_array(np.zeros(3, np.float32), "unused")
        m = make_model([helper.make_node("Mul", ["x", "w"], ["t"], name="mul"), helper.make_node("Relu", ["t"], ["y"], name="relu")],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16]),
                        helper.make_tensor_value_info("w", TensorProto.FLOAT, [16]),
                        helper.make_tensor_value_info("unused", TensorProto.FLOAT, [3])],  # IR 3: initializers are inputs
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])], [w, unused], opset=9, ir=3)
        paths.append(tmp_path / f"m{k}.onnx")
        onnx.save(m, paths[-1])
    res = api.diff(*paths, selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False))
    assert not any("failed" in n for n in res.notes), res.notes
    assert res.in_graph >= 2
