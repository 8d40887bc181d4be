"""A layer whose inputs A holds exactly introduces exactly its accumulated error: B's node fed its own
inputs gives B's tensor. Measured through a cone it did not: onnxruntime runs a float16 model's nodes that
have no float16 kernel in float32 and keeps float32 between them, so the float16 values it exposes are not
what the next node read; a float16 copy of the sample MLP compared with itself read intro dB 65-72 on
every layer, every pair exact. The oracle: two identical models, and a model against one with a perturbed
last layer (only that layer introduces error; the others' intro is exact)."""

from __future__ import annotations

import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import sample_path
from onnxprobe import api

CPU = api.RunConfig(device="cpu", cache=False)


def _half_mlp(path):
    """The sample MLP with float16 weights, a Cast to float16 at its start and back to float32 at its end."""
    m = onnx.load(str(sample_path("mlp")))
    g = m.graph
    for t in g.initializer:
        t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))
    del g.value_info[:]
    (x,), (y,) = [i.name for i in g.input], [o.name for o in g.output]
    for n in g.node:
        n.input[:] = [f"{x}_h" if i == x else i for i in n.input]
        n.output[:] = [f"{y}_h" if o == y else o for o in n.output]
    nodes = [helper.make_node("Cast", [x], [f"{x}_h"], to=TensorProto.FLOAT16), *g.node,
             helper.make_node("Cast", [f"{y}_h"], [y], to=TensorProto.FLOAT)]
    del g.node[:]
    g.node.extend(nodes)
    onnx.save(m, str(path))
    return m


def test_a_half_model_against_its_copy_introduces_nothing(tmp_path):
    _half_mlp(tmp_path / "a.onnx")
    shutil.copy(tmp_path / "a.onnx", tmp_path / "b.onnx")
    res = api.diff(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), selection=api.Selection(all=True), config=CPU)
    assert res.results and all(r.metrics.exact for r in res.results)
    assert all(r.introduced is not None and r.introduced.exact for r in res.results), [
        (r.pair.a.name, r.introduced and r.introduced.sqnr_db) for r in res.results]


def test_only_the_changed_layer_introduces_error(tmp_path):
    m = _half_mlp(tmp_path / "a.onnx")
    last = [n for n in m.graph.node if n.op_type in ("Gemm", "MatMul")][-1]
    w = next(t for t in m.graph.initializer if t.name == last.input[1])
    w.CopyFrom(numpy_helper.from_array((numpy_helper.to_array(w) * np.float16(1.5)).astype(np.float16), w.name))
    onnx.save(m, str(tmp_path / "b.onnx"))
    res = api.diff(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), selection=api.Selection(all=True), config=CPU)
    changed = next(r for r in res.results if r.pair.a.name == last.output[0])
    assert not changed.metrics.exact and changed.introduced is not None and not changed.introduced.exact
    # the changed layer's inputs are exact: what it introduces is all its error
    assert changed.introduced.sqnr_db == changed.metrics.sqnr_db
    before = [r for r in res.results if r.pair.a.index < changed.pair.a.index]
    assert before and all(r.metrics.exact and r.introduced.exact for r in before)


def _reference_intro_db(model_a, model_b, node_b, image):
    """The oracle: B's node run by onnx.reference on A's own value of its input, against A's value of its
    output (float64 SQNR; inf when equal)."""
    from onnx.reference import ReferenceEvaluator

    def values(m):
        g = onnx.ModelProto()
        g.CopyFrom(m)
        del g.graph.output[:]
        g.graph.output.extend([helper.make_empty_tensor_value_info(t) for t in (node_b.input[0], node_b.output[0])])
        return ReferenceEvaluator(g).run(None, {"image": image})

    a_in, a_out = values(model_a)
    (b_out,) = ReferenceEvaluator(helper.make_model(
        helper.make_graph([node_b], "one", [helper.make_empty_tensor_value_info(node_b.input[0])],
                          [helper.make_empty_tensor_value_info(node_b.output[0])]),
        opset_imports=list(model_b.opset_import))).run(None, {node_b.input[0]: a_in})
    noise = float(np.sum((a_out.astype(np.float64) - b_out.astype(np.float64)) ** 2))
    return np.inf if noise == 0 else 10 * np.log10(float(np.sum(b_out.astype(np.float64) ** 2)) / noise)


def test_a_layers_intro_does_not_change_with_the_selection(tmp_path):
    """QA: conv1's weights scaled by 1.05 in A; the MaxPool after it introduces nothing (B's MaxPool on A's
    input gives A's output), and --all said 'exact', but --range 3:8 or --op MaxPool reported its
    accumulated 26.7 dB: the exactness check walked B's cone back to the graph input past every matched
    tensor that was not shown, and found only inputs A holds exactly."""
    a = onnx.load(str(sample_path("cnn")))
    w = next(t for t in a.graph.initializer if t.name == "conv1.weight")
    w.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(w) * np.float32(1.05), w.name))
    onnx.save(a, str(tmp_path / "a.onnx"))
    b = onnx.load(str(sample_path("cnn")))
    pool = next(n for n in b.graph.node if n.op_type == "MaxPool")
    image = np.random.default_rng(0).random((1, 3, 32, 32), dtype=np.float32)
    assert tuple(d.dim_value for d in b.graph.input[0].type.tensor_type.shape.dim) == image.shape
    oracle = _reference_intro_db(a, b, pool, image)
    run = dict(config=CPU, inputs=api.InputSpec(arrays={"image": image}))
    intro = {}
    for sel in (api.Selection(all=True), api.Selection(range="3:8"), api.Selection(ops=("MaxPool",)),
                api.Selection(names=(pool.output[0],))):
        res = api.diff(str(tmp_path / "a.onnx"), str(sample_path("cnn")), selection=sel, **run)
        row = next(r for r in res.results if r.pair.b.name == pool.output[0])
        assert not row.metrics.exact  # what it inherited from conv1
        intro[str(sel)] = row.introduced.sqnr_db
    assert all(v == oracle for v in intro.values()), (oracle, intro)
