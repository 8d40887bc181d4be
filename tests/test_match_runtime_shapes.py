"""Matching where the models declare no shapes: a Reshape to a shape computed at run time (a Concat of
Shape values, as PP-OCRv4 rec's attention blocks and transformer exports with a dynamic axis do) leaves
every tensor behind it without a static shape, and structure alone pairs nothing of unknown shape. The
shapes these tensors take for the run's inputs decide then (``match.concrete``): a renamed copy pairs
every tensor with its own counterpart (the renaming is the oracle), and a copy whose weights differ is
compared, not listed as unmatched."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api

RNG = np.random.default_rng(3)
W1 = RNG.standard_normal((8, 8)).astype(np.float32)
W2 = RNG.standard_normal((4, 4)).astype(np.float32)


def _model(w2: np.ndarray, rename: bool) -> onnx.ModelProto:
    """x [n, 8] -> h = x W1 -> r = Reshape(h, [n, 2, 4]) (the shape a Slice of Shape(h), with its bounds in
    Constant nodes, concatenated with [2, 4], as PP-OCRv4 rec's exporter writes it) -> t = Transpose(r)
    -> u = Relu(t) -> v = u W2 -> y = Sigmoid(v) + 1. With ``rename`` every name changes but the
    inputs' and outputs'."""
    nm = (lambda s: f"t_{abs(hash(s)) % 9973}_{s[::-1]}") if rename else (lambda s: s)
    nodes = [helper.make_node("MatMul", ["x", nm("W1")], [nm("h")], name=nm("mm1")),
             helper.make_node("Shape", [nm("h")], [nm("sh")], name=nm("shape")),
             *[helper.make_node("Constant", [], [nm(k)], name=nm(f"c_{k}"), value=numpy_helper.from_array(np.array([v], np.int64)))
               for k, v in (("start", 0), ("end", 1), ("axis", 0))],
             helper.make_node("Slice", [nm("sh"), nm("start"), nm("end"), nm("axis")], [nm("sx")], name=nm("slice")),
             helper.make_node("Concat", [nm("sx"), nm("tail")], [nm("target")], name=nm("cat"), axis=0),
             helper.make_node("Reshape", [nm("h"), nm("target")], [nm("r")], name=nm("reshape")),
             helper.make_node("Transpose", [nm("r")], [nm("t")], name=nm("tr"), perm=[0, 2, 1]),
             helper.make_node("Relu", [nm("t")], [nm("u")], name=nm("relu")),
             helper.make_node("Transpose", [nm("u")], [nm("u2")], name=nm("tr2"), perm=[0, 2, 1]),
             helper.make_node("MatMul", [nm("u2"), nm("W2")], [nm("v")], name=nm("mm2")),
             helper.make_node("Sigmoid", [nm("v")], [nm("s")], name=nm("sig")),
             helper.make_node("Add", [nm("s"), nm("one")], ["y"], name=nm("add"))]
    inits = [numpy_helper.from_array(W1, nm("W1")), numpy_helper.from_array(w2, nm("W2")),
             numpy_helper.from_array(np.array([2, 4], np.int64), nm("tail")), numpy_helper.from_array(np.ones(1, np.float32), nm("one"))]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits, opset=12)


LAYERS = ["h", "r", "t", "u", "u2", "v", "s", "y"]


def _diff(tmp_path, b: onnx.ModelProto, **kw):
    onnx.save(_model(W2, False), str(tmp_path / "a.onnx"))
    onnx.save(b, str(tmp_path / "b.onnx"))
    return api.diff(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), selection=api.Selection(all=True),
                    config=api.RunConfig(device="cpu", cache=False),
                    inputs=api.InputSpec(arrays={"x": RNG.standard_normal((3, 8)).astype(np.float32)}), **kw)


def test_the_models_really_leave_the_shapes_behind_the_reshape_unknown(tmp_path):
    """An opset-12 model: onnx's shape inference propagates no Shape values there (data propagation
    needs opset 13), as for PP-OCRv4 rec."""
    from onnxprobe.api.diff import make_sides

    onnx.save(_model(W2, False), str(tmp_path / "a.onnx"))
    shapes = {o.name: o.shape for o in make_sides(str(tmp_path / "a.onnx"), str(tmp_path / "a.onnx"))[1].observation.observables}
    assert shapes["h"] == ("n", 8) and all(shapes[n] is None for n in LAYERS[1:]), shapes


@pytest.mark.parametrize("fuse", [True, False], ids=["one-run", "separate-runs"])
def test_a_renamed_copy_pairs_every_tensor_with_its_own(tmp_path, fuse):
    res = _diff(tmp_path, _model(W2, True), fuse=fuse)
    renamed = _model(W2, True)
    truth = {a: b for a, b in zip([o for n in _model(W2, False).graph.node for o in n.output],
                                  [o for n in renamed.graph.node for o in n.output])}
    got = {r.pair.a.name: r.pair.b.name for r in res.results}
    assert {a: got.get(a) for a in LAYERS} == {a: truth[a] for a in LAYERS}
    assert not res.matching.unmatched_a and not res.matching.unmatched_b
    assert res.verdict()[0] == "pass" and all(r.metrics.max_abs == 0 for r in res.results)


def test_a_copy_with_other_weights_is_compared_where_they_differ(tmp_path):
    res = _diff(tmp_path, _model(W2 * np.float32(1.5), True))
    by = {r.pair.a.name: r for r in res.results}
    assert set(LAYERS) <= set(by) and not res.matching.unmatched_a
    assert all(by[n].metrics.max_abs == 0 for n in ("h", "r", "t", "u", "u2"))  # before W2: the same values
    assert all(by[n].metrics.max_abs > 0 for n in ("v", "s", "y"))
