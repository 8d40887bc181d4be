"""Parallel branches that differ only in their weights' sizes (a 1x1 Conv and a 3x3 Conv of one output
shape, as in SqueezeNet's fire modules and Inception's blocks), in a copy whose names are all new, whose
branches are listed in the other order and whose weights moved a little (so no weight is shared by
value): a tensor reading a weight of a size the other reads none of computes another function, and is
never paired with it (alignment by order crossed them: a renamed, reordered, perturbed SqueezeNet had 20
of 67 pairs wrong, each a false FAIL). The renaming is the oracle."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api

RNG = np.random.default_rng(5)
W = {"w1": RNG.standard_normal((4, 4, 1, 1)).astype(np.float32), "w3": 0.3 * RNG.standard_normal((4, 4, 3, 3)).astype(np.float32),
     "w5": 0.2 * RNG.standard_normal((4, 8, 1, 1)).astype(np.float32)}


def _model(rename: bool, reorder: bool, scale: float) -> onnx.ModelProto:
    """x -> c0 = Conv1x1(x) -> [a = Relu(Conv1x1(c0)), b = Relu(Conv3x3(c0))] -> cat -> y = Conv1x1(cat)."""
    new: dict[str, str] = {}
    nm = (lambda s: new.setdefault(s, f"t{(len(new) * 37) % 101:03d}")) if rename else (lambda s: s)
    stem = [helper.make_node("Conv", ["x", nm("w0")], [nm("c0")], name=nm("conv0"))]
    one = [helper.make_node("Conv", [nm("c0"), nm("w1")], [nm("p1")], name=nm("conv1")),
           helper.make_node("Relu", [nm("p1")], [nm("a")], name=nm("relu1"))]
    three = [helper.make_node("Conv", [nm("c0"), nm("w3")], [nm("p3")], name=nm("conv3"), pads=[1, 1, 1, 1]),
             helper.make_node("Relu", [nm("p3")], [nm("b")], name=nm("relu3"))]
    tail = [helper.make_node("Concat", [nm("a"), nm("b")], [nm("cat")], name=nm("cat"), axis=1),
            helper.make_node("Conv", [nm("cat"), nm("w5")], ["y"], name=nm("conv5"))]
    nodes = stem + (three + one if reorder else one + three) + tail
    w0 = np.eye(4, dtype=np.float32).reshape(4, 4, 1, 1)
    inits = [numpy_helper.from_array(w0, nm("w0"))] + [
        numpy_helper.from_array((v * np.float32(scale)).astype(np.float32), nm(k)) for k, v in W.items()]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6])], inits)


def _diff_copies(tmp_path, build):
    """``build(rename, reorder, scale)``'s model against its renamed, reordered copy with every weight moved
    by 0.1 %: (the pairs made, the true ones by the renaming, the result)."""
    a, b = build(False, False, 1.0), build(True, True, 1.001)
    onnx.save(a, str(tmp_path / "a.onnx"))
    onnx.save(b, str(tmp_path / "b.onnx"))
    truth = {n.output[0]: m.output[0] for n, m in zip(a.graph.node, build(True, False, 1.0).graph.node)}
    res = api.diff(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), selection=api.Selection(all=True),
                   config=api.RunConfig(device="cpu", cache=False),
                   inputs=api.InputSpec(arrays={"x": RNG.standard_normal((1, 4, 6, 6)).astype(np.float32)}))
    return {r.pair.a.name: r.pair.b.name for r in res.results}, truth, res


def test_branches_of_other_weight_sizes_are_not_crossed(tmp_path):
    got, truth, res = _diff_copies(tmp_path, _model)
    assert {k: truth[k] for k in got} == got  # every pair made is right
    assert {"p1", "p3", "a", "b"} <= set(got)
    # each compared pair is one function with weights 0.1 % apart: close, never a crossed branch's error
    assert all(r.metrics.cosine > 0.999 for r in res.results if r.metrics is not None)


def _same_size_branches(rename: bool, reorder: bool, scale: float) -> onnx.ModelProto:
    """x -> c0 -> [p = Conv1x1(c0, wp), q = Conv1x1(c0, wq)] -> y = p - q: two branches of one op, one shape
    and one weight size, told apart by their weights' values only."""
    new: dict[str, str] = {}
    nm = (lambda s: new.setdefault(s, f"t{(len(new) * 37) % 101:03d}")) if rename else (lambda s: s)
    stem = [helper.make_node("Conv", ["x", nm("w0")], [nm("c0")], name=nm("conv0"))]
    p = [helper.make_node("Conv", [nm("c0"), nm("wp")], [nm("p")], name=nm("convp"))]
    q = [helper.make_node("Conv", [nm("c0"), nm("wq")], [nm("q")], name=nm("convq"))]
    tail = [helper.make_node("Sub", [nm("p"), nm("q")], ["y"], name=nm("sub"))]
    nodes = stem + (q + p if reorder else p + q) + tail
    rng = np.random.default_rng(11)
    w = {k: rng.standard_normal((4, 4, 1, 1)).astype(np.float32) for k in ("w0", "wp", "wq")}
    inits = [numpy_helper.from_array((v * (np.float32(scale) if k != "w0" else 1)).astype(np.float32), nm(k)) for k, v in w.items()]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6])], inits)


def test_branches_of_one_weight_size_are_told_apart_by_near_weights(tmp_path):
    """Renamed, reordered and with every weight moved by 0.1 % (a float16 or fine-tuned copy): no weight is
    shared by value, and alignment by order crossed the two branches (Inception v2 had 30 of 308 pairs
    crossed). Weights near each other's are evidence (``match.weights``)."""
    got, truth, res = _diff_copies(tmp_path, _same_size_branches)
    assert got.get("p") == truth["p"] and got.get("q") == truth["q"], got
    assert all(r.metrics.cosine > 0.999 for r in res.results if r.metrics is not None)


def test_weights_of_other_values_are_not_near():
    from onnxprobe.match.weights import near

    x = tuple(float(v) for v in np.random.default_rng(1).standard_normal(16))
    assert near(((16, x),), ((16, tuple(v * 1.001 for v in x)),))
    assert near(((16, x),), ((16, tuple(float(np.float16(v)) for v in x)),))  # a float16 copy
    assert not near(((16, x),), ((16, tuple(np.random.default_rng(2).standard_normal(16).tolist())),))
    assert not near(((16, x),), ((32, x),)) and not near((), ())


def _branches_dq(order: bool, dq: bool, p: str) -> onnx.ModelProto:
    """x -> [Relu(Conv1x1(x)), Relu(Conv3x3(x))] -> y = their sum; with ``dq`` each weight int8 behind a
    DequantizeLinear (a weight-quantized model), the branches listed in ``order``, names prefixed ``p``."""
    rng = np.random.default_rng(0)
    w1, w3 = rng.standard_normal((4, 4, 1, 1)).astype(np.float32), rng.standard_normal((4, 4, 3, 3)).astype(np.float32)
    nodes, inits = [], []
    for w, nm in ((w1, p + "w1"), (w3, p + "w3")):
        if dq:
            s = np.float32(np.abs(w).max() / 127)
            inits += [numpy_helper.from_array(np.round(w / s).astype(np.int8), nm + "_q"), numpy_helper.from_array(np.array(s, np.float32), nm + "_s")]
            nodes.append(helper.make_node("DequantizeLinear", [nm + "_q", nm + "_s"], [nm]))
        else:
            inits.append(numpy_helper.from_array(w, nm))
    n1 = [helper.make_node("Conv", ["x", p + "w1"], [p + "c1"]), helper.make_node("Relu", [p + "c1"], [p + "r1"])]
    n3 = [helper.make_node("Conv", ["x", p + "w3"], [p + "c3"], pads=[1] * 4), helper.make_node("Relu", [p + "c3"], [p + "r3"])]
    nodes += (n1 + n3 if order else n3 + n1) + [helper.make_node("Add", [p + "r1", p + "r3"], ["y"])]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], inits)


def test_quantized_weights_behind_dequantize_count_by_their_size(tmp_path):
    """The int8 weights a DequantizeLinear reads had no size as evidence: a weight-quantized model's 1x1
    branch paired with the float model's 3x3 one when the branches were listed in the other order (QA)."""
    onnx.save(_branches_dq(True, True, "A_"), str(tmp_path / "a.onnx"))
    onnx.save(_branches_dq(False, False, "B_"), str(tmp_path / "b.onnx"))
    res = api.diff(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), selection=api.Selection(all=True),
                   config=api.RunConfig(device="cpu", cache=False),
                   inputs=api.InputSpec(arrays={"x": RNG.standard_normal((1, 4, 8, 8)).astype(np.float32)}))
    got = {r.pair.a.name: r.pair.b.name for r in res.results}
    assert all(b == "B_" + a[2:] for a, b in got.items() if a.startswith("A_")), got
    assert {"A_c1", "A_c3"} <= set(got)


def _filled_fire(prefix: str, swap: bool) -> onnx.ModelProto:
    """A fire module whose weights are ConstantOfShape outputs (as every onnx-light model holds them): x ->
    squeeze 1x1 -> [Relu(Conv1x1), Relu(Conv3x3)] -> Concat; ``swap`` lists the 3x3 branch first."""
    sizes = {"ws": [8, 4, 1, 1], "w1": [8, 8, 1, 1], "w3": [8, 8, 3, 3]}
    nodes, inits = [], []
    for k, v in sizes.items():
        inits.append(numpy_helper.from_array(np.array(v, np.int64), prefix + k + "_shape"))
        nodes.append(helper.make_node("ConstantOfShape", [prefix + k + "_shape"], [prefix + k],
                                      value=numpy_helper.from_array(np.array([0.02], np.float32))))
    nodes.append(helper.make_node("Conv", ["x", prefix + "ws"], [prefix + "s"], name=prefix + "sq"))
    one = [helper.make_node("Conv", [prefix + "s", prefix + "w1"], [prefix + "e1"], name=prefix + "c1"),
           helper.make_node("Relu", [prefix + "e1"], [prefix + "r1"], name=prefix + "rr1")]
    three = [helper.make_node("Conv", [prefix + "s", prefix + "w3"], [prefix + "e3"], pads=[1, 1, 1, 1], name=prefix + "c3"),
             helper.make_node("Relu", [prefix + "e3"], [prefix + "r3"], name=prefix + "rr3")]
    nodes += three + one if swap else one + three
    nodes.append(helper.make_node("Concat", [prefix + "r1", prefix + "r3"], ["y"], axis=1, name=prefix + "cat"))
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 6, 6])], inits)


def test_weights_made_by_constant_of_shape_have_their_sizes(tmp_path):
    """Renamed and reordered copies of one model: the 1x1 branch was paired with the 3x3 branch (their
    ConstantOfShape weights had no size), four false FAILs on a model compared with itself."""
    onnx.save(_filled_fire("a_", True), str(tmp_path / "a.onnx"))
    onnx.save(_filled_fire("b_", False), str(tmp_path / "b.onnx"))
    res = api.diff(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), selection=api.Selection(all=True),
                   config=api.RunConfig(device="cpu", cache=False),
                   inputs=api.InputSpec(arrays={"x": RNG.standard_normal((1, 4, 6, 6)).astype(np.float32)}))
    got = {r.pair.a.name: r.pair.b.name for r in res.results}
    assert all(k[2:] == v[2:] for k, v in got.items() if k != "y"), got  # a_e1 with b_e1, never with b_e3
    assert {"a_e1", "a_e3"} <= set(got)
    assert all(r.metrics.exact for r in res.results)
