"""A model that computes one integer tensor twice (torch's legacy exporter writes a Range per use: BERT's
position ids) against one that computes it once: what reads the copy is the same function as what reads
the original. BERT tiny dynamo against legacy said `unsqueeze_11` "reads arange_2 where /m/Unsqueeze_8
reads /m/Range_2 (another function of the data)", Range_2 being a copy of Range_1, arange_2's partner.

Oracle: onnx.reference.ReferenceEvaluator runs both models; the copy holds the original's values and the
two Unsqueeze outputs are equal."""

import numpy as np
import onnx
from onnx import TensorProto as T, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from onnxprobe.match.engine import match
from onnxprobe.match.observe import observe


def _model(copies: int, p: str = "") -> onnx.ModelProto:
    """x [2, 4] -> s = Shape(x), n = Gather(s, 1); r = Range(start, n, 1) (``copies`` times: B's Unsqueeze reads
    the last copy) -> u = Unsqueeze(r, 0) -> y = x + Cast(u); z = x * Cast(r) (the first copy). ``p``: a prefix
    of the computed tensors' names (two exporters name them apart)."""
    i = lambda n, v: numpy_helper.from_array(np.array(v, np.int64), n)  # noqa: E731
    nodes = [helper.make_node("Shape", ["x"], [p + "s"]), helper.make_node("Gather", [p + "s", "one"], [p + "n"], axis=0)]
    ranges = [p + (f"r{k}" if k else "r") for k in range(copies)]
    nodes += [helper.make_node("Range", ["start", p + "n", "one"], [r]) for r in ranges]
    nodes += [helper.make_node("Unsqueeze", [ranges[-1], "ax"], [p + "u"]), helper.make_node("Cast", [p + "u"], [p + "uf"], to=T.FLOAT),
              helper.make_node("Add", ["x", p + "uf"], ["y"]), helper.make_node("Cast", [ranges[0]], [p + "rf"], to=T.FLOAT),
              helper.make_node("Mul", ["x", p + "rf"], ["z"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [2, 4]), helper.make_tensor_value_info("z", T.FLOAT, [2, 4])],
                          [i("start", 0), i("one", 1), i("ax", [0])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return onnx.shape_inference.infer_shapes(m)


def _run(m, names):
    out = onnx.ModelProto()
    out.CopyFrom(m)
    out.graph.output.extend(helper.make_tensor_value_info(n, T.UNDEFINED, None) for n in names)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    return dict(zip(["y", "z", *names], ReferenceEvaluator(out).run(None, {"x": x})))


def test_what_reads_a_copy_of_a_paired_integer_tensor_is_one_function_with_it():
    a, b = _model(1), _model(2, "b_")
    va, vb = _run(a, ["r", "u"]), _run(b, ["b_r", "b_r1", "b_u"])
    np.testing.assert_array_equal(vb["b_r"], vb["b_r1"])  # the oracle: B's copy holds the original's values
    np.testing.assert_array_equal(va["u"], vb["b_u"])
    m = match(observe(a).observables, observe(b).observables)
    pairs = {(p.a.name, p.b.name) for p in m.pairs}
    assert ("r", "b_r") in pairs and ("u", "b_u") in pairs, (pairs, [(u.obs.name, u.cause, u.reason) for u in m.unmatched_a])


def test_a_copy_made_with_other_constants_is_no_copy():
    """Range(1, n, 1) is not a copy of Range(0, n, 1): what reads it stays another function."""
    a = _model(1)
    b = _model(2, "b_")
    for node in b.graph.node:  # B's last Range starts at 1
        if node.output[0] == "b_r1":
            node.input[0] = "start1"
    b.graph.initializer.append(numpy_helper.from_array(np.array(1, np.int64), "start1"))
    assert np.arange(0, 4).tolist() != np.arange(1, 4).tolist()  # other values (numpy: this B does not run, y's shapes differ)
    m = match(observe(a).observables, observe(b).observables)
    pairs = {(p.a.name, p.b.name) for p in m.pairs}
    assert ("r", "b_r") in pairs and ("u", "b_u") not in pairs, pairs


def test_a_copy_taken_from_another_tensors_shape_cannot_be_told_apart():
    """B's copy of the Range takes its length from the shape of another tensor (BERT legacy: once from the
    embeddings' output, once from attention_mask): the same size at run time or not, so what reads it is
    neither paired nor said to be another function of the data: "cannot tell"."""
    a, b = _model(1), _model(2, "b_")
    b.graph.node.insert(0, helper.make_node("Relu", ["x"], ["b_x2"]))
    at = next(k for k, n in enumerate(b.graph.node) if n.output[0] == "b_r1")
    b.graph.node.insert(at, helper.make_node("Shape", ["b_x2"], ["b_s2"]))
    b.graph.node.insert(at + 1, helper.make_node("Gather", ["b_s2", "one"], ["b_n2"], axis=0))
    b.graph.node[at + 2].input[1] = "b_n2"
    b = onnx.shape_inference.infer_shapes(b)
    vb = _run(b, ["b_r", "b_r1"])
    np.testing.assert_array_equal(vb["b_r"], vb["b_r1"])  # the oracle: here, the same values
    m = match(observe(a).observables, observe(b).observables)
    pairs = {(p.a.name, p.b.name) for p in m.pairs}
    assert ("r", "b_r") in pairs and ("u", "b_u") not in pairs, pairs
    why = {u.obs.name: u for u in m.unmatched_a}
    assert why["u"].cause != "different-function" and "cannot tell" in why["u"].reason, (why["u"].cause, why["u"].reason)


def _size_model(copies: int, p: str = "", other: bool = False) -> onnx.ModelProto:
    """x [8] -> n = Size(x); r = Range(0, n, 1) (``copies`` times) -> u = Unsqueeze(r, 0) -> y = x + Cast(u);
    z = x * Cast(r). ``other``: the last copy's length is the Size of another tensor (Relu(x))."""
    i = lambda n, v: numpy_helper.from_array(np.array(v, np.int64), n)  # noqa: E731
    nodes = [helper.make_node("Relu", ["x"], [p + "x2"]), helper.make_node("Size", ["x"], [p + "n"]),
             helper.make_node("Size", [p + "x2"], [p + "n2"])]
    ranges = [p + (f"r{k}" if k else "r") for k in range(copies)]
    nodes += [helper.make_node("Range", ["start", p + ("n2" if other and k == copies - 1 else "n"), "one"], [r])
              for k, r in enumerate(ranges)]
    nodes += [helper.make_node("Unsqueeze", [ranges[-1], "ax"], [p + "u"]), helper.make_node("Cast", [p + "u"], [p + "uf"], to=T.FLOAT),
              helper.make_node("Add", ["x", p + "uf"], ["y"]), helper.make_node("Cast", [ranges[0]], [p + "rf"], to=T.FLOAT),
              helper.make_node("Mul", ["x", p + "rf"], ["z"]), helper.make_node("Cast", [p + "x2"], [p + "x2c"], to=T.FLOAT),
              helper.make_node("Add", [p + "x2c", "x"], ["w"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [8])],
                          [helper.make_tensor_value_info(o, T.FLOAT, None) for o in ("y", "z", "w")],
                          [i("start", 0), i("one", 1), i("ax", [0])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return onnx.shape_inference.infer_shapes(m)


def test_a_copy_taken_from_another_tensors_size_cannot_be_told_apart():
    """As with Shape: a Size of another tensor (the same count at run time or not) makes what reads the copy
    'cannot tell', not another function of the data."""
    a, b = _size_model(1), _size_model(2, "b_", other=True)
    vb = dict(zip(["y", "z", "w", "b_r", "b_r1"], ReferenceEvaluator(_with_outputs(b, ["b_r", "b_r1"])).run(
        None, {"x": np.arange(8, dtype=np.float32)})))
    np.testing.assert_array_equal(vb["b_r"], vb["b_r1"])  # the oracle: here, the same values
    m = match(observe(a).observables, observe(b).observables)
    pairs = {(p.a.name, p.b.name) for p in m.pairs}
    assert ("r", "b_r") in pairs and ("u", "b_u") not in pairs, pairs
    why = {u.obs.name: u for u in m.unmatched_a}
    assert why["u"].cause != "different-function" and "cannot tell" in why["u"].reason, (why["u"].cause, why["u"].reason)


def _with_outputs(m, names):
    out = onnx.ModelProto()
    out.CopyFrom(m)
    out.graph.output.extend(helper.make_tensor_value_info(n, T.UNDEFINED, None) for n in names)
    return out


def _mask_or_index(boolean: bool, p: str) -> onnx.ModelProto:
    """x [2, 4] -> n = Gather(Shape(x), 1) -> c = Equal(n, 4) (a bool) or Add(n, 4) (an int64) -> e = Expand(c, [2, 4])
    -> y = Where(e, x, 0) or x * Cast(e)."""
    i = lambda n, v: numpy_helper.from_array(np.array(v, np.int64), n)  # noqa: E731
    nodes = [helper.make_node("Shape", ["x"], [p + "s"]), helper.make_node("Gather", [p + "s", "one"], [p + "n"], axis=0),
             helper.make_node("Equal" if boolean else "Add", [p + "n", "four"], [p + "c"]),
             helper.make_node("Expand", [p + "c", "shp"], [p + "e"])]
    if boolean:
        nodes.append(helper.make_node("Where", [p + "e", "x", "zero"], ["y"]))
    else:
        nodes += [helper.make_node("Cast", [p + "e"], [p + "ef"], to=T.FLOAT), helper.make_node("Mul", ["x", p + "ef"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [2, 4])],
                          [i("one", 1), i("four", 4), i("shp", [2, 4]), numpy_helper.from_array(np.array(0, np.float32), "zero")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return onnx.shape_inference.infer_shapes(m)


def test_a_boolean_mask_is_no_function_of_what_an_integer_tensor_is():
    """BERT legacy against dynamo paired /m/Expand_output_0 (a bool mask) with val_44 (an int64 index), and that
    pair, FAIL at -inf dB, was where the error starts. A boolean tensor and an integer one are other functions
    (onnx.reference: their values differ in kind)."""
    a, b = _mask_or_index(True, ""), _mask_or_index(False, "b_")
    ea = ReferenceEvaluator(onnx.ModelProto.FromString(a.SerializeToString())).run(None, {"x": np.ones((2, 4), np.float32)})
    assert ea[0].shape == (2, 4)
    m = match(observe(a).observables, observe(b).observables)
    pairs = {(p.a.name, p.b.name) for p in m.pairs}
    assert ("e", "b_e") not in pairs, pairs
    why = {u.obs.name: u for u in m.unmatched_a}
    assert "e" in why and "booleans" in why["e"].reason, [(u.obs.name, u.cause, u.reason) for u in m.unmatched_a]
