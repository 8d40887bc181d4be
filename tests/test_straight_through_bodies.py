"""grad --check and a QuantizeLinear inside an If / Loop / Scan body: only the tensors whose gradient reaches
the rounding inside the body are 'cannot check' (straight-through); a tensor the node reads whose way to the
loss stays in floats is checked as any. Before, one rounding anywhere in a body marked every tensor the
node read (its inputs and the outer-scope weights its body reads), so their gradients went unchecked.

Oracle of the end-to-end test: the check itself (finite differences) agrees on the float path, and numpy
float64 gives the gradient of the weight on the float path (d sum(y) / d b = the count of b's uses)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxprobe import api
from onnxprobe.autodiff.straight_through import behind_rounding

F = TensorProto.FLOAT
CPU = api.RunConfig(device="cpu", cache=False)
X = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
QUANT = ("QuantizeLinear", "quant")


def _qdq(src: str, out: str) -> list:
    return [helper.make_node("QuantizeLinear", [src, "sq"], ["q"], name="quant"),
            helper.make_node("DequantizeLinear", ["q", "sq"], [out], name="dequant")]


def _model(nodes, inits, outputs=("y",)) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [2, 3])],
                          [helper.make_tensor_value_info(o, F, None) for o in outputs],
                          [numpy_helper.from_array(np.array(0.05, np.float32), "sq")] + inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _if_model() -> onnx.ModelProto:
    """y = If(c): then DQ(Q(a)) + b, else a + b; a = x * wa, b = x * wb.
    In the then branch only a is rounded: b (and wb, x through b) stay in floats."""
    out = [helper.make_tensor_value_info("r", F, None)]
    then = helper.make_graph(_qdq("a", "aq") + [helper.make_node("Add", ["aq", "b"], ["r"], name="then_add")], "then", [], out)
    other = helper.make_graph([helper.make_node("Add", ["a", "b"], ["r"], name="else_add")], "else", [], out)
    nodes = [helper.make_node("Mul", ["x", "wa"], ["a"], name="mul_a"), helper.make_node("Mul", ["x", "wb"], ["b"], name="mul_b"),
             helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then, else_branch=other)]
    inits = [numpy_helper.from_array(np.array(True), "c"), numpy_helper.from_array(np.full((2, 3), 0.7, np.float32), "wa"),
             numpy_helper.from_array(np.full((2, 3), 1.3, np.float32), "wb")]
    return _model(nodes, inits)


def _loop_model(mixed: bool) -> onnx.ModelProto:
    """Two carried states over 2 iterations: u' = DQ(Q(u)) * 1 (rounded), v' = v * wb (+ u when ``mixed``:
    then v's next value depends on the rounded u, and u's initial value reaches the loss through the
    rounding; v's initial value never does). y = u_final + v_final."""
    vi = [helper.make_tensor_value_info(n, t, s) for n, t, s in (("i", TensorProto.INT64, []), ("cond", TensorProto.BOOL, []),
                                                                  ("u", F, [2, 3]), ("v", F, [2, 3]))]
    body_nodes = _qdq("u", "u2") + [helper.make_node("Identity", ["cond"], ["cond_out"], name="keep"),
                                    helper.make_node("Mul", ["v", "wb"], ["vw"], name="mul_v")]
    body_nodes.append(helper.make_node("Add", ["vw", "u"], ["v2"], name="mix") if mixed else
                      helper.make_node("Identity", ["vw"], ["v2"], name="pass"))
    body = helper.make_graph(body_nodes, "body", vi, [helper.make_tensor_value_info(n, t, s) for n, t, s in
                                                      (("cond_out", TensorProto.BOOL, []), ("u2", F, [2, 3]), ("v2", F, [2, 3]))])
    nodes = [helper.make_node("Mul", ["x", "wa"], ["u0"], name="mul_u"), helper.make_node("Mul", ["x", "wc"], ["v0"], name="mul_v0"),
             helper.make_node("Loop", ["n", "", "u0", "v0"], ["uf", "vf"], name="loop", body=body),
             helper.make_node("Add", ["uf", "vf"], ["y"], name="sum")]
    inits = [numpy_helper.from_array(np.array(2, np.int64), "n")] + [
        numpy_helper.from_array(np.full((2, 3), v, np.float32), k) for k, v in (("wa", 0.7), ("wb", 1.1), ("wc", 0.9))]
    return _model(nodes, inits)


def test_an_if_branch_rounds_only_what_it_rounds():
    m = _if_model()
    behind = behind_rounding(list(m.graph.node), "y")
    assert {k for k, v in behind.items() if v == QUANT} >= {"a", "wa"}
    assert not {"b", "wb"} & set(behind), behind
    assert behind["x"] == QUANT  # x reaches the loss both ways: through a, rounded


def test_a_loop_state_that_never_meets_the_rounding_stays_in_floats():
    m = _loop_model(mixed=False)
    behind = behind_rounding(list(m.graph.node), "y")
    assert behind.get("u0") == QUANT and behind.get("wa") == QUANT
    assert not {"v0", "wc", "wb"} & set(behind), behind


def test_a_state_mixed_in_from_a_rounded_one_over_the_iterations():
    """v's next value reads u: u0 reaches the loss through the rounding (u1 = Q(u0) feeds v2); v0 never
    passes a rounding, nor does wb (v is never quantized)."""
    m = _loop_model(mixed=True)
    behind = behind_rounding(list(m.graph.node), "y")
    assert behind.get("u0") == QUANT
    assert not {"v0", "wc", "wb"} & set(behind), behind


def test_grad_check_checks_the_float_path_of_a_loop(tmp_path):
    path = tmp_path / "loop.onnx"
    onnx.save(_loop_model(mixed=False), path)
    res = api.grad(path, api.Selection(names=["wa", "wc", "wb"]), CPU, inputs={"x": X}, check=True, save=True)
    rows = {r.name: r for r in res.rows}
    assert rows["wa"].check["ok"] is None and "straight-through" in rows["wa"].check["unresolved"], rows["wa"].check
    for name in ("wc", "wb"):
        assert rows[name].check["ok"] is True, (name, rows[name].check)
    # numpy float64: y = ... + v0 wb^2 with v0 = x wc; d sum(y) / d wc = x wb^2
    x = X.astype(np.float64)
    np.testing.assert_allclose(res.arrays["wc"], x * 1.1 ** 2, rtol=1e-5)
