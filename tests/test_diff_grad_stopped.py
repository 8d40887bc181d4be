"""diff --grad: a weight both models hold whose gradient one side cannot compute (an op without a gradient
rule, DeformConv, stops it) is not compared, and the verdict says so (QA: an ORT-optimized
copy of a CNN read 'weight gradients pass', exit 0, its convolution weights compared by nobody)."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as H
from onnx import numpy_helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app

RNG = np.random.default_rng(0)
W = RNG.standard_normal((2, 1, 3, 3)).astype(np.float32)
B = RNG.standard_normal(2).astype(np.float32)
W2 = RNG.standard_normal((8, 3)).astype(np.float32)


def _conv(x: str, stopped: bool) -> tuple[onnx.NodeProto, list]:
    """conv.weight's convolution of ``x`` into 'c': a Conv, or (``stopped``) the DeformConv it equals (zero
    offsets), which has no gradient rule; with the extra initializer the DeformConv reads."""
    if not stopped:
        return H.make_node("Conv", [x, "conv.weight", "conv.bias"], ["c"], name="conv"), []
    return (H.make_node("DeformConv", [x, "conv.weight", "offset", "conv.bias"], ["c"], name="conv"),
            [numpy_helper.from_array(np.zeros((1, 18, 2, 2), np.float32), "offset")])


def _save(path, nodes: list, inits: list) -> None:
    g = H.make_graph(nodes, "g", [H.make_tensor_value_info("x", T.FLOAT, [1, 1, 4, 4])],
                     [H.make_tensor_value_info("y", T.FLOAT, [1, 3])], inits)
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 19)])
    m.ir_version = 9
    onnx.save(m, str(path))


def _model(path, fused: bool) -> None:
    conv, extra = _conv("x", fused)
    inits = [numpy_helper.from_array(a, n) for a, n in ((W, "conv.weight"), (B, "conv.bias"), (W2, "fc.weight"))]
    nodes = [conv, H.make_node("Relu", ["c"], ["r"], name="relu")] + [
        H.make_node("Flatten", ["r"], ["f"], name="flat"), H.make_node("MatMul", ["f", "fc.weight"], ["y"], name="fc")]
    _save(path, nodes, inits + extra)


def test_a_weight_whose_gradient_one_side_cannot_compute_is_not_compared(tmp_path):
    a, b, js = tmp_path / "a.onnx", tmp_path / "b.onnx", tmp_path / "d.json"
    _model(a, False)
    _model(b, True)
    r = CliRunner().invoke(app, ["diff", str(a), str(b), "--grad", "--json", str(js)])
    assert r.exit_code == 1, r.output
    d = json.loads(js.read_text())
    assert d["verdict"] == "error", d["verdict_reason"]
    assert "DeformConv conv" in d["verdict_reason"] and "conv.weight" in d["verdict_reason"], d["verdict_reason"]
    stopped = {u["name"]: u for u in d["unmatched_a"] if u["cause"] == "gradient-stopped"}
    assert set(stopped) == {"conv.weight_grad", "conv.bias_grad"}, d["unmatched_a"]
    assert all("DeformConv conv" in u["reason"] for u in stopped.values())
    # what both sides could compute was compared, and passes: fc.weight's gradient (sum loss: f^T 1)
    (fc,) = [p for p in d["pairs"] if p["a"] == "fc.weight_grad"]
    assert fc["passed"] is True
    assert "weight gradients pass, but 2 not compared" in " ".join(r.output.split())


def test_one_tensor_by_its_forward_and_gradient_names_is_given_twice(tmp_path):
    """--atol conv.weight_grad:0.5 --atol conv.weight:0.1 name one tensor: refused as given twice, as
    --atol y:0.1 --atol y:0.5 is (the later silently won); the API's per_tensor likewise."""
    import pytest

    from onnxprobe import api
    from onnxprobe.errors import UsageError

    a = tmp_path / "a.onnx"
    _model(a, False)
    for flags in (["--atol", "conv.weight_grad:0.5", "--atol", "conv.weight:0.1"],
                  ["--rtol", "fc.weight:0.5", "--rtol", "fc.weight_grad:0.1"],
                  ["--atol", "conv.weight_grad:0.5", "--rtol", "conv.weight:0.1"]):
        r = CliRunner().invoke(app, ["diff", str(a), str(a), "--grad", *flags])
        assert r.exit_code == 2 and "Traceback" not in r.output, (flags, r.output)
        assert "given twice" in r.output and len(r.output.strip().splitlines()) == 1, r.output
    r = CliRunner().invoke(app, ["diff", str(a), str(a), "--grad", "--atol", "conv.weight_grad:0.5", "--rtol", "conv.weight_grad:0.1"])
    assert r.exit_code == 0, r.output  # one name, both thresholds
    with pytest.raises(UsageError, match="given twice"):
        api.diff_grad(a, a, per_tensor={"conv.weight": api.Tolerance("max_abs", atol=0.1),
                                        "conv.weight_grad": api.Tolerance("max_abs", atol=0.5)})


def test_a_weight_written_as_a_constants_list_is_a_weight_the_gradient_stops_before(tmp_path, det_without_rule):
    """A Constant node's value_floats is a weight as its value tensor is (graph.constants): with Det (its rule taken out) between it
    and the loss, the verdict says the backward pass stops there, not 'the model has no weights'."""
    for form in ("value", "value_floats"):
        c = [1.5, 2.0, -1.0, 0.5]
        const = (H.make_node("Constant", [], ["w"], name="cw", value=numpy_helper.from_array(np.array(c, np.float32), "v"))
                 if form == "value" else H.make_node("Constant", [], ["w"], name="cw", value_floats=c))
        nodes = [const, H.make_node("Mul", ["x", "w"], ["m"], name="mul"), H.make_node("Reshape", ["m", "shp"], ["r"], name="rs"),
                 H.make_node("Det", ["r"], ["y"], name="det")]
        g = H.make_graph(nodes, "g", [H.make_tensor_value_info("x", T.FLOAT, [4])], [H.make_tensor_value_info("y", T.FLOAT, [])],
                         [numpy_helper.from_array(np.array([2, 2], np.int64), "shp")])
        path, js = tmp_path / f"{form}.onnx", tmp_path / f"{form}.json"
        onnx.save(H.make_model(g, opset_imports=[H.make_opsetid("", 17)]), str(path))
        r = CliRunner().invoke(app, ["diff", str(path), str(path), "--grad", "--json", str(js), "--no-cache"])
        assert r.exit_code != 0, r.output
        why = json.loads(js.read_text())["verdict_reason"]
        assert "Det" in why and "no weights" not in why, (form, why)


def _residual(path, stopped: bool) -> None:
    """y = (Flatten(F(h)) + Flatten(h) @ skip) @ fc.weight, h = x * w1, where F is DeformConv (no gradient
    rule) in ``stopped`` and the Conv it equals (zero offsets) otherwise: w1's gradient has two ways to the
    loss, and one passes the op without a rule (as BERT's layers reach the loss through the skip connection
    and through onnxruntime's fused Attention)."""
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(a, n) for a, n in (
        (W, "conv.weight"), (B, "conv.bias"), (W2, "fc.weight"), (rng.standard_normal((1, 1, 4, 4)).astype(np.float32), "w1"),
        (rng.standard_normal((16, 8)).astype(np.float32), "skip"))]
    conv, extra = _conv("h", stopped)
    nodes = [H.make_node("Mul", ["x", "w1"], ["h"], name="scale"), conv, H.make_node("Flatten", ["c"], ["f1"], name="flat1"),
             H.make_node("Flatten", ["h"], ["hf"], name="flat2"), H.make_node("MatMul", ["hf", "skip"], ["f2"], name="skipmm"),
             H.make_node("Add", ["f1", "f2"], ["s"], name="add"), H.make_node("MatMul", ["s", "fc.weight"], ["y"], name="fc")]
    _save(path, nodes, inits + extra)


def test_a_gradient_one_side_computes_only_in_part_is_not_compared(tmp_path):
    """w1's gradient in B sums only the ways to the loss that avoid DeformConv: a part of the gradient. It
    was compared with A's whole one and failed, and the verdict said the gradients differ there ('▶ error
    starts at', QA: BERT against its ORT-optimized copy with fused Attention failed on layer 0's weights).
    It is not compared (cause gradient-stopped, its reason naming the op); fc.weight, after the op, is
    compared and passes (the two compute one function)."""
    a, b, js = tmp_path / "a.onnx", tmp_path / "b.onnx", tmp_path / "d.json"
    _residual(a, False)
    _residual(b, True)
    x = RNG.standard_normal((1, 1, 4, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = CliRunner().invoke(app, ["diff", str(a), str(b), "--grad", "--json", str(js), "--input", f"x={tmp_path / 'x.npy'}"])
    d = json.loads(js.read_text())
    assert not [p for p in d["pairs"] if p["passed"] is False], [(p["a"], p["b"]) for p in d["pairs"] if p["passed"] is False]
    stopped = {u["name"]: u for u in d["unmatched_a"] if u["cause"] == "gradient-stopped"}
    assert "w1_grad" in stopped and "DeformConv conv" in stopped["w1_grad"]["reason"], d["unmatched_a"]
    assert "part" in stopped["w1_grad"]["reason"]
    (fc,) = [p for p in d["pairs"] if p["a"] == "fc.weight_grad"]
    assert fc["passed"] is True
    assert d["verdict"] == "error" and r.exit_code == 1, (d["verdict"], r.output)
