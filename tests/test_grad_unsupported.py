"""An op that still has no gradient rule stops `grad` with one message that names the op, the node and
where it lies (the body of an If, Loop or Scan, nested as deep as it is), never with a wrong gradient;
a piecewise-constant op (Floor) passes no gradient, and a tensor behind it only gets none, with a note.
The op without a rule is Det, its rule taken out of the table (conftest.det_without_rule)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from conftest import NO_RULE_CLI
from onnxprobe import api
from onnxprobe.errors import ModelError

F = TensorProto.FLOAT


def _model(nodes, inputs=("x",), opset=17):
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info(i, F, [3, 3]) for i in inputs],
                          [helper.make_tensor_value_info("y", F, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _plan(m, tmp_path):
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    return api.grad_plan(api.load(p), api.GradSpec(wrt=("x",)), feed={"x": np.ones((3, 3), np.float32)})


def _branch(nodes, out):
    return helper.make_graph(nodes, "b", [], [helper.make_tensor_value_info(out, F, None)])


DET = helper.make_node("Det", ["x"], ["d"], name="the_det")


@pytest.mark.parametrize("where, nodes", [
    ("", [DET, helper.make_node("Identity", ["d"], ["y"])]),
    ("in the then branch of If 'outer'",
     [helper.make_node("If", ["c"], ["y"], name="outer", then_branch=_branch([DET], "d"),
                       else_branch=_branch([helper.make_node("Neg", ["x"], ["n"])], "n"))]),
    ("in the else branch of If 'inner'",
     [helper.make_node("If", ["c"], ["y"], name="outer",
                       then_branch=_branch([helper.make_node("If", ["c"], ["i"], name="inner",
                                                             then_branch=_branch([helper.make_node("Neg", ["x"], ["n"])], "n"),
                                                             else_branch=_branch([DET], "d"))], "i"),
                       else_branch=_branch([helper.make_node("Neg", ["x"], ["n2"])], "n2"))]),
])
def test_an_op_without_a_rule_stops_with_its_name_and_place(where, nodes, tmp_path, det_without_rule):
    c = [helper.make_node("Constant", [], ["c"], value=helper.make_tensor("c", TensorProto.BOOL, [], [True]))]
    with pytest.raises(ModelError) as e:
        _plan(_model(c + nodes), tmp_path)
    msg = str(e.value)
    assert msg.startswith("cannot differentiate op Det at node 'the_det'"), msg
    assert "no gradient rule for it" in msg and "'x'" in msg
    assert where in msg


def test_the_message_names_the_wanted_tensor_not_the_ops_input(tmp_path, det_without_rule):
    """--wrt w through x*w -> Det named the Det's input 'xw', a tensor the user never asked for, and told them
    to use --wrt, which they had: the wanted tensor leads, the input it reaches the op by follows."""
    w = onnx.numpy_helper.from_array(np.eye(3, dtype=np.float32), "w")
    m = _model([helper.make_node("Mul", ["x", "w"], ["xw"]), helper.make_node("Det", ["xw"], ["d"], name="the_det"),
                helper.make_node("Identity", ["d"], ["y"])])
    m.graph.initializer.append(w)
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    for wrt, said in [(("w",), "between the loss and 'w' (through its input 'xw')"),
                      (("x", "w"), "between the loss and 'w', 'x' (through its input 'xw')"),  # weights first
                      (("xw",), "between the loss and 'xw'. Use")]:
        with pytest.raises(ModelError) as e:
            api.grad_plan(api.load(p), api.GradSpec(wrt=wrt), feed={"x": np.ones((3, 3), np.float32)})
        assert said in str(e.value), str(e.value)
    from onnxprobe.autodiff.engine import attach_backward  # the engine's own refusal says the same
    with pytest.raises(ModelError) as e:
        attach_backward(m, {"y": "y"}, ["w"])
    assert "between the loss and 'w' (through its input 'xw')" in str(e.value)


def test_a_non_differentiable_op_on_the_way_says_so(tmp_path):
    m = _model([helper.make_node("Floor", ["x"], ["f"], name="floor"), helper.make_node("Mul", ["f", "x"], ["y"])])
    gp = _plan(m, tmp_path)  # Floor cuts its path; the gradient through Mul's other input is still exact
    assert gp.grads == {"x": gp.grads["x"]}
    m2 = _model([helper.make_node("Floor", ["x"], ["y"], name="floor")])
    p = tmp_path / "m2.onnx"
    onnx.save(m2, p)
    gp = api.grad_plan(api.load(p), api.GradSpec(wrt=("x",)), feed={"x": np.ones((3, 3), np.float32)})
    # zero, said so: through the Floor (the loss depends on x, piecewise constantly: not "does not depend on")
    assert not gp.grads and any("x (through Floor 'floor')" in w for w in gp.warnings), gp.warnings


def test_cli_prints_one_line_and_exits_1(tmp_path):
    p = tmp_path / "det.onnx"
    onnx.save(_model([DET, helper.make_node("Identity", ["d"], ["y"])]), p)
    r = subprocess.run([sys.executable, "-c", NO_RULE_CLI, "grad", str(p), "--wrt", "x"], capture_output=True, text=True)
    assert r.returncode == 1
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("onnxprobe: error: cannot differentiate op Det at node 'the_det'")


def test_diff_grad_of_weights_behind_an_op_without_a_rule_says_so_not_no_weights(det_without_rule):
    """y = Det(x @ W): W gets no gradient (Det without its rule). diff --grad judged nothing and said "the model
    has no weights"; it says no weight receives a gradient, and the notes name the Det."""
    m = helper.make_model(helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"), helper.make_node("Det", ["m"], ["y"], name="the_det")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])],
        [onnx.numpy_helper.from_array(np.array([[1.0, 2.0], [3.0, 5.0]], np.float32), "W")]),
        opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    res = api.diff_grad(m, m)
    kind, why = res.verdict()
    assert kind == "error" and "no weight receives a gradient" in why and "has no weights" not in why, why
    assert any("Det" in n and "W" in n for n in res.notes), res.notes


def _qoperator_model():
    """y = DequantizeLinear(QLinearMatMul(QuantizeLinear(x), QuantizeLinear(W))): a float weight W that the
    loss reads through an integer layer with no gradient rule, as every weight of a QOperator model is."""
    u8, i8 = TensorProto.UINT8, TensorProto.INT8
    inits = [onnx.numpy_helper.from_array(np.arange(9, dtype=np.float32).reshape(3, 3) / 9, "W"),
             helper.make_tensor("s", F, [], [0.01]), helper.make_tensor("z", u8, [], [0]),
             helper.make_tensor("ws", F, [], [0.01]), helper.make_tensor("wz", i8, [], [0])]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="qx"),
             helper.make_node("QuantizeLinear", ["W", "ws", "wz"], ["wq"], name="qw"),
             helper.make_node("QLinearMatMul", ["xq", "s", "z", "wq", "ws", "wz", "s", "z"], ["yq"], name="the_qmm"),
             helper.make_node("DequantizeLinear", ["yq", "s", "z"], ["y"], name="dq")]
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", F, [3, 3])],
                          [helper.make_tensor_value_info("y", F, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_a_weight_behind_a_quantized_layer_is_not_said_independent_of_the_loss(tmp_path):
    """`grad` on a QOperator model said "the loss does not depend on" its weights: it does, through
    QLinearMatMul, which has no gradient rule; the note names the op where the gradient stops."""
    p = tmp_path / "q.onnx"
    onnx.save(_qoperator_model(), p)
    gp = api.grad_plan(api.load(p), api.GradSpec(), feed={"x": np.full((3, 3), 0.5, np.float32)})
    assert "W" not in gp.grads
    assert not any("does not depend on" in w and "W" in w for w in gp.warnings), gp.warnings
    assert any("get no gradient" in w and "W: at QLinearMatMul 'the_qmm'" in w for w in gp.warnings), gp.warnings


def test_an_op_of_another_domain_is_named_with_its_domain(tmp_path):
    """An op of another domain with no rule was named without its domain: "cannot differentiate op Attention
    ... no gradient rule for it" (com.microsoft:Attention, before it had a rule), while the README lists a
    rule for Attention (the ONNX op). com.microsoft:GridSample, onnxruntime's older GridSample, has none:
    the message names its domain, as the table of rules does."""
    x = helper.make_tensor_value_info("x", F, [1, 1, 3, 3])
    grid = onnx.numpy_helper.from_array(np.zeros((1, 2, 2, 2), np.float32), "grid")
    gs = helper.make_node("GridSample", ["x", "grid"], ["y"], name="the_gs", domain="com.microsoft")
    g = helper.make_graph([gs], "m", [x], [helper.make_tensor_value_info("y", F, None)], [grid])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    with pytest.raises(ModelError) as e:
        api.grad_plan(api.load(p), api.GradSpec(wrt=("x",)), feed={"x": np.ones((1, 1, 3, 3), np.float32)})
    assert str(e.value).startswith("cannot differentiate op com.microsoft:GridSample at node 'the_gs'"), str(e.value)


def _other_domain_only(node, domain, version, inputs):
    """A model that imports only ``domain`` (no default-domain opset: onnxprobe takes it for opset 1, too old
    for the loss's ReduceSum, and onnx's version converter cannot convert the domain)."""
    g = helper.make_graph([node], "m", [helper.make_tensor_value_info(n, d, s) for n, d, s in inputs],
                          [helper.make_tensor_value_info(o, F, None) for o in node.output])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid(domain, version)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("model, feed, op", [
    (_other_domain_only(helper.make_node("Binarizer", ["X"], ["Y"], name="the_bin", domain="ai.onnx.ml", threshold=0.5),
                        "ai.onnx.ml", 1, [("X", F, [3, 4])]),
     {"X": np.linspace(0, 1, 12, dtype=np.float32).reshape(3, 4)}, "ai.onnx.ml:Binarizer"),
    (_other_domain_only(helper.make_node("Momentum", ["R", "T", "X", "G", "V"], ["X_new", "V_new"], name="the_momentum",
                                         domain="ai.onnx.preview.training", alpha=0.95, beta=0.1, epsilon=0.0,
                                         mode="standard", norm_coefficient=0.001),
                        "ai.onnx.preview.training", 1,
                        [("R", F, []), ("T", TensorProto.INT64, []), ("X", F, [2]), ("G", F, [2]), ("V", F, [2])]),
     {"R": np.array(0.1, np.float32), "T": np.array(0, np.int64), "X": np.array([1.2, 2.8], np.float32),
      "G": np.array([-0.94, -2.5], np.float32), "V": np.array([1.7, 3.6], np.float32)},
     "ai.onnx.preview.training:Momentum"),
])
def test_an_op_without_a_rule_is_named_before_the_opset_conversion(model, feed, op, tmp_path):
    """The opset-1 ai.onnx.preview.training and ai.onnx.ml node tests (Adagrad, Momentum, TreeEnsemble...) said
    "ReduceSum needs opset 7 ...; converting the model from opset 1 to 17 failed: .../convert.h:96:
    assertInVersionRange ...": the conversion the loss needed, not the op without a gradient rule. The op is
    named (with its domain and node) before any conversion is tried."""
    p = tmp_path / "m.onnx"
    onnx.save(model, p)
    with pytest.raises(ModelError) as e:
        api.grad_plan(api.load(p), api.GradSpec(wrt=("X",)), feed=feed)
    msg = str(e.value)
    assert msg.startswith(f"cannot differentiate op {op} at node 'the_"), msg
    assert "no gradient rule for it" in msg and "ReduceSum" not in msg and "convert" not in msg, msg
    npz = tmp_path / "in.npz"
    np.savez(npz, **feed)
    r = subprocess.run([sys.executable, "-m", "onnxprobe", "grad", str(p), "--all", "--inputs", str(npz)],
                       capture_output=True, text=True)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 1 and len(lines) == 1 and f"cannot differentiate op {op}" in lines[0], r.stderr


def test_a_model_without_the_onnx_domain_gets_the_loss_ops_without_a_conversion(tmp_path):
    """An ai.onnx.ml-only model (onnx's Binarizer node test), its output's gradient asked for: the loss's
    ReduceSum needs the ONNX domain, which the model does not import; onnx's version converter, asked to add
    it, failed on the ml domain ('convert.h:96: assertInVersionRange'). With no ONNX op to convert, the copy
    only imports the domain. Oracle: L = sum(Y), dL/dY = 1."""
    m = _other_domain_only(helper.make_node("Binarizer", ["X"], ["Y"], name="the_bin", domain="ai.onnx.ml", threshold=0.5),
                           "ai.onnx.ml", 1, [("X", F, [3, 4])])
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    res = api.grad(str(p), inputs={"X": np.linspace(0, 1, 12, dtype=np.float32).reshape(3, 4)}, save=True)
    np.testing.assert_array_equal(res.arrays["Y"], np.ones((3, 4), np.float32))
    # the note says what happened: the copy imports the ONNX domain, no "model opset 1" converted (it has none)
    note = next((n for n in res.plan.warnings if "opset" in n), "")
    assert "imports no ONNX domain (it has ai.onnx.ml)" in note and "model opset" not in note, res.plan.warnings
