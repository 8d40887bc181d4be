"""A layer changed between two models (a 1x1 Conv in A where B has a 3x3 Conv of the same output shape, and
every name new in B): the two Convs are refused as other functions of the data, and so is what reads them
(Relu(Conv1x1(x)) against Relu(Conv3x3(x)) aligned by op, order and shape, and its pair reported the Conv's
error as the Relu's own, with "error starts at" the Relu). Each unmatched entry says why, naming the
refused candidate; the model outputs, paired by name, are still compared. The construction is the oracle."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api


def _model(k: int, prefix: str) -> onnx.ModelProto:
    """x -> c0 = Conv1x1(x) -> c1 = Conv kxk(c0) -> r1 = Relu(c1) -> y = Conv1x1(r1); names prefixed."""
    w = np.random.default_rng(0)
    w0, w2 = (w.standard_normal((4, 4, 1, 1)).astype(np.float32) for _ in range(2))
    wk = 0.3 * np.random.default_rng(k).standard_normal((4, 4, k, k)).astype(np.float32)
    p = prefix
    nodes = [helper.make_node("Conv", ["x", p + "w0"], [p + "c0"], name=p + "conv0"),
             helper.make_node("Conv", [p + "c0", p + "wk"], [p + "c1"], name=p + "conv1", pads=[k // 2] * 4),
             helper.make_node("Relu", [p + "c1"], [p + "r1"], name=p + "relu1"),
             helper.make_node("Conv", [p + "r1", p + "w2"], ["y"], name=p + "conv2")]
    inits = [numpy_helper.from_array(v, p + n) for n, v in (("w0", w0), ("wk", wk), ("w2", w2))]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6])], inits)


def _diff(tmp_path):
    onnx.save(_model(1, ""), str(tmp_path / "a.onnx"))
    onnx.save(_model(3, "B_"), str(tmp_path / "b.onnx"))
    return api.diff(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), selection=api.Selection(all=True),
                    config=api.RunConfig(device="cpu", cache=False),
                    inputs=api.InputSpec(arrays={"x": np.random.default_rng(1).standard_normal((1, 4, 6, 6)).astype(np.float32)}))


def test_readers_of_a_changed_layer_are_not_paired(tmp_path):
    res = _diff(tmp_path)
    got = {r.pair.a.name: r.pair.b.name for r in res.results}
    assert got == {"c0": "B_c0", "y": "y"}  # the same weights, and the outputs by name
    un_a = {u.obs.name: u for u in res.matching.unmatched_a}
    un_b = {u.obs.name: u for u in res.matching.unmatched_b}
    assert set(un_a) == {"c1", "r1"} and set(un_b) == {"B_c1", "B_r1"}
    assert all(u.cause == "different-function" for u in [*un_a.values(), *un_b.values()])
    # the refused candidate and the weights' sizes (4x4x1x1 = 16, 4x4x3x3 = 144 elements) are said
    assert "B_c1" in un_a["c1"].reason and "16" in un_a["c1"].reason and "144" in un_a["c1"].reason
    assert "c1" in un_b["B_c1"].reason and "144" in un_b["B_c1"].reason
    assert "B_r1" in un_a["r1"].reason and "c1" in un_a["r1"].reason
    # the outputs differ (another layer): a fail, and where the error shows is the output, not the Relu
    assert res.verdict()[0] == "fail" and res.first_failure.pair.a.name == "y"


def test_same_layer_of_one_size_still_pairs(tmp_path):
    """Both 3x3 (the weights moved a little): every tensor pairs, nothing is refused."""
    onnx.save(_model(3, ""), str(tmp_path / "a.onnx"))
    b = _model(3, "B_")
    for t in b.graph.initializer:
        v = numpy_helper.to_array(t) * np.float32(1.001)
        t.CopyFrom(numpy_helper.from_array(v.astype(np.float32), t.name))
    onnx.save(b, str(tmp_path / "b.onnx"))
    res = api.diff(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), selection=api.Selection(all=True),
                   config=api.RunConfig(device="cpu", cache=False),
                   inputs=api.InputSpec(arrays={"x": np.random.default_rng(1).standard_normal((1, 4, 6, 6)).astype(np.float32)}))
    assert {r.pair.a.name: r.pair.b.name for r in res.results} == {"c0": "B_c0", "c1": "B_c1", "r1": "B_r1", "y": "y"}
    assert not res.matching.unmatched_a and not res.matching.unmatched_b


def test_one_name_on_another_layer_is_refused_too(tmp_path):
    """QA: the same 1x1/3x3 change with every name kept: the pair by name 'c1' was compared (a Conv of 16
    weights against one of 144, its Relu blamed for the error); now refused as the structural pair is, and
    its reader 'r1' with it. The outputs, named alike, are still compared."""
    onnx.save(_model(1, ""), str(tmp_path / "a.onnx"))
    onnx.save(_model(3, ""), str(tmp_path / "b.onnx"))
    res = api.diff(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), selection=api.Selection(all=True),
                   config=api.RunConfig(device="cpu", cache=False),
                   inputs=api.InputSpec(arrays={"x": np.random.default_rng(1).standard_normal((1, 4, 6, 6)).astype(np.float32)}))
    assert {r.pair.a.name: r.pair.b.name for r in res.results} == {"c0": "c0", "y": "y"}
    un = {u.obs.name: u for u in res.matching.unmatched_a + res.matching.unmatched_b}
    assert set(un) == {"c1", "r1"} and all(u.cause == "different-function" for u in un.values())
    assert "16" in un["c1"].reason and "144" in un["c1"].reason
    assert res.verdict()[0] == "fail" and res.first_failure.pair.a.name == "y"


def _chain(first: str, second: str) -> onnx.ModelProto:
    nodes = [helper.make_node(first, ["x"], ["t"]), helper.make_node(second, ["t"], ["u"]),
             helper.make_node("Identity", ["u"], ["y"])]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])], [])


def test_one_name_on_other_ops_of_the_same_input_is_refused(tmp_path):
    """QA: t = Relu(x) in A, t = Sigmoid(x) in B: paired by name ("Relu in A stands for Sigmoid in B"), though
    the two read the same tensor with other functions; refused, both entries saying so. The same ops in the
    same order still pair."""
    onnx.save(_chain("Relu", "Sigmoid"), str(tmp_path / "a.onnx"))
    onnx.save(_chain("Sigmoid", "Relu"), str(tmp_path / "b.onnx"))
    onnx.save(_chain("Relu", "Sigmoid"), str(tmp_path / "c.onnx"))
    run = dict(selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False),
               inputs=api.InputSpec(arrays={"x": np.random.default_rng(1).standard_normal((2, 8)).astype(np.float32)}))
    res = api.diff(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), **run)
    assert "t" not in {r.pair.a.name for r in res.results} and "y" in {r.pair.a.name for r in res.results}
    (ua,), (ub,) = [[u for u in side if u.obs.name == "t"] for side in (res.matching.unmatched_a, res.matching.unmatched_b)]
    assert ua.cause == ub.cause == "different-function"
    assert "Sigmoid" in ua.reason and "Relu" in ua.reason and "Relu" in ub.reason and "Sigmoid" in ub.reason
    same = api.diff(str(tmp_path / "a.onnx"), str(tmp_path / "c.onnx"), **run)
    assert {r.pair.a.name for r in same.results} >= {"t", "u", "y"} and not same.matching.unmatched_a


def _one_op(nodes: list, inits: list) -> onnx.ModelProto:
    return make_model([*nodes, helper.make_node("Relu", ["t"], ["y"])], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)


def test_one_name_on_two_ways_of_writing_one_function_still_pairs(tmp_path):
    """Exports write one function with other ops (MatMul against Gemm, Div by 2 against Mul by 0.5, Relu
    against Clip(0), Mul(x, x) against Pow(x, 2), GlobalAveragePool against ReduceMean, Identity against
    Dropout): the refusal of a pair by name over its ops took them all for other functions of the data (QA);
    only ops that are never one function (Relu against Sigmoid above) are refused. Each pair compares
    exact, as numpy says the two compute the same values."""
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32), "W")
    k = lambda v, name="k": numpy_helper.from_array(np.array(v, np.float32), name)  # noqa: E731
    cases = {
        "matmul-gemm": (([helper.make_node("MatMul", ["x", "W"], ["t"])], [w]), ([helper.make_node("Gemm", ["x", "W"], ["t"])], [w])),
        "div-mul": (([helper.make_node("Div", ["x", "k"], ["t"])], [k(2)]), ([helper.make_node("Mul", ["x", "k"], ["t"])], [k(0.5)])),
        "relu-clip": (([helper.make_node("Relu", ["x"], ["t"])], []), ([helper.make_node("Clip", ["x", "k"], ["t"])], [k(0)])),
        "square-pow": (([helper.make_node("Mul", ["x", "x"], ["t"])], []), ([helper.make_node("Pow", ["x", "k"], ["t"])], [k(2)])),
        "identity-dropout": (([helper.make_node("Identity", ["x"], ["t"])], []), ([helper.make_node("Dropout", ["x"], ["t"])], [])),
    }
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    for case, ((na, ia), (nb, ib)) in cases.items():
        onnx.save(_one_op(na, ia), str(tmp_path / "a.onnx"))
        onnx.save(_one_op(nb, ib), str(tmp_path / "b.onnx"))
        res = api.diff(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), selection=api.Selection(all=True),
                       config=api.RunConfig(device="cpu", cache=False), inputs=api.InputSpec(arrays={"x": x}))
        row = next((r for r in res.results if r.pair.a.name == "t"), None)
        assert row is not None, (case, [(u.obs.name, u.reason) for u in res.matching.unmatched_a])
        assert row.metrics.max_abs <= 1e-6 * max(1.0, float(np.abs(x).max())) and row.passed, (case, row.metrics.max_abs)
