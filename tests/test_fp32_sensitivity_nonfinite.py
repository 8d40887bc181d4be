"""diff --fp32-sensitivity where keeping a layer in fp32 makes the output exact: the output's SQNR with that
layer in fp32 is +inf, and so is the gain. The JSON report said 'internal error: Out of range float values are
not JSON compliant: inf'; it now writes "inf" as every other non-finite metric (text.json_word), and the table,
the merge's shard check and the gain's order read it back."""

from __future__ import annotations

import json
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app
from onnxprobe.stats.shard_fields import SENSITIVITY, check_fields

runner = CliRunner()


def _models(tmp_path):
    """B: y = (x @ W1) @ W2, integer weights; A: its QDQ copy, x and the weights exact on the int8 grid of scale
    1, t = x @ W1 quantized at scale 2 (odd values rounded). With t in float, A computes B's y exactly."""
    rng = np.random.default_rng(0)
    w1, w2 = (rng.integers(-3, 4, (4, 4)).astype(np.float32) for _ in range(2))
    x = rng.integers(-5, 6, (2, 4)).astype(np.float32)
    assert ((x @ w1) % 2).any()  # t loses something to its scale of 2
    vi = (lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 4]))
    op = [helper.make_opsetid("", 17)]
    b = helper.make_model(helper.make_graph(
        [helper.make_node("MatMul", ["x", "W1"], ["t"], name="mm1"), helper.make_node("MatMul", ["t", "W2"], ["y"], name="mm2")],
        "b", [vi("x")], [vi("y")], [numpy_helper.from_array(w1, "W1"), numpy_helper.from_array(w2, "W2")]), opset_imports=op)
    c = (lambda v, n, dt=np.float32: numpy_helper.from_array(np.array(v, dt), n))
    q = (lambda i, s, o: helper.make_node("QuantizeLinear", [i, s, "z"], [o]))
    dq = (lambda i, s, o: helper.make_node("DequantizeLinear", [i, s, "z"], [o]))
    a = helper.make_model(helper.make_graph(
        [q("x", "s1", "xq"), dq("xq", "s1", "xd"), dq("W1q", "s1", "W1d"), helper.make_node("MatMul", ["xd", "W1d"], ["t"], name="mm1"),
         q("t", "s2", "tq"), dq("tq", "s2", "td"), dq("W2q", "s1", "W2d"), helper.make_node("MatMul", ["td", "W2d"], ["y"], name="mm2")],
        "a", [vi("x")], [vi("y")], [numpy_helper.from_array(w1.astype(np.int8), "W1q"), numpy_helper.from_array(w2.astype(np.int8), "W2q"),
                                    c(1.0, "s1"), c(0, "z", np.int8), c(2.0, "s2")]), opset_imports=op)
    pa, pb, feed = tmp_path / "a.onnx", tmp_path / "b.onnx", tmp_path / "in.npz"
    onnx.save(a, str(pa))
    onnx.save(b, str(pb))
    np.savez(feed, x=x)
    # the oracle: A with t unrounded is B, exactly; as quantized it is not
    t = x @ w1
    assert np.array_equal(t @ w2, (x @ w1) @ w2) and not np.array_equal(np.round(t / 2) * 2 @ w2, t @ w2)
    return pa, pb, feed


def test_a_layer_that_makes_the_output_exact_is_written_as_inf(tmp_path):
    pa, pb, feed = _models(tmp_path)
    out = tmp_path / "d.json"
    r = runner.invoke(app, ["diff", str(pa), str(pb), "--inputs", str(feed), "--fp32-sensitivity", "3", "--json", str(out)])
    assert r.exit_code == 0, r.output
    assert "internal error" not in r.output
    d = json.loads(out.read_text(), parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))  # no bare Infinity
    (s,) = d["fp32_sensitivity"]
    assert s["layer"] == "t" and s["output_sqnr_db_fp32_layer"] == "inf" and s["gain_db"] == "inf"
    assert math.isfinite(s["output_sqnr_db"]) and math.isfinite(s["introduced_sqnr_db"])
    check_fields(s, SENSITIVITY, "shard")  # a merge reads it as a written report
    r = runner.invoke(app, ["diff", str(pa), str(pb), "--inputs", str(feed), "--fp32-sensitivity", "3"])
    assert r.exit_code == 0 and "output   inf dB (+inf)" in r.output, r.output


def test_the_table_orders_and_says_words_of_a_saved_report():
    from onnxprobe.report.diff import sensitivity_lines

    rows = [{"layer": "a", "op_type": "Conv", "output": "y", "introduced_sqnr_db": 20.0, "output_sqnr_db": 10.0,
             "output_sqnr_db_fp32_layer": 11.0, "gain_db": 1.0},
            {"layer": "b", "op_type": "Conv", "output": "y", "introduced_sqnr_db": 30.0, "output_sqnr_db": 10.0,
             "output_sqnr_db_fp32_layer": "inf", "gain_db": "inf"}]
    text = "\n".join(t.plain for t in sensitivity_lines(rows, 100))
    assert text.index("b  ") < text.index("a  ") and "(+inf)" in text and "(+1.00)" in text, text
