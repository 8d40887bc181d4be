"""A Scan body's tensor whose rank shape inference cannot tell (a Loop's final value inside the body) cannot be
stacked one per iteration: onnxruntime's Scan needs a shape on every body output. The error and mark's note gave
only "its shape changes between iterations or it lies in an If branch", neither of which is true here; they name
this cause too, and the statistics without the values still work (oracle: numpy over the iterations)."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from typer.testing import CliRunner

from onnxprobe.cli.main import app


def _model(path):
    f = T.FLOAT
    loop_body = h.make_graph([h.make_node("Add", ["cur", "row"], ["cur_next"], name="lb_add"),
                              h.make_node("Identity", ["cond"], ["cond_out"], name="lb_id")], "loop_body",
                             [h.make_tensor_value_info("iter", T.INT64, []), h.make_tensor_value_info("cond", T.BOOL, []),
                              h.make_tensor_value_info("cur", f, [3])],
                             [h.make_tensor_value_info("cond_out", T.BOOL, []), h.make_tensor_value_info("cur_next", f, [3])])
    scan_body = h.make_graph([h.make_node("Loop", ["trip", "tru", "acc"], ["loop_final"], body=loop_body, name="sb_loop"),
                              h.make_node("Mul", ["loop_final", "loop_final"], ["sq"], name="sb_mul"),
                              h.make_node("Identity", ["sq"], ["acc_next"], name="sb_id")], "scan_body",
                             [h.make_tensor_value_info("acc", f, [3]), h.make_tensor_value_info("row", f, [3])],
                             [h.make_tensor_value_info("acc_next", f, [3])])
    g = h.make_graph([h.make_node("Scan", ["init", "x"], ["final"], body=scan_body, num_scan_inputs=1, name="scan")], "g",
                     [h.make_tensor_value_info("x", f, [2, 3]), h.make_tensor_value_info("init", f, [3])],
                     [h.make_tensor_value_info("final", f, [3])],
                     [nh.from_array(np.array(3, np.int64), "trip"), nh.from_array(np.array(True), "tru")])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)], ir_version=7), path)


def test_a_scan_body_tensor_of_unknown_rank_is_refused_for_its_real_cause(tmp_path):
    _model(tmp_path / "m.onnx")
    x = np.array([[1, 2, 3], [0.5, -1, 0]], np.float32)
    init = np.array([0.1, 0.2, 0.3], np.float32)
    np.savez(tmp_path / "in.npz", x=x, init=init)
    base = ["layers", str(tmp_path / "m.onnx"), "--name", "loop_final", "--inputs", str(tmp_path / "in.npz")]
    r = CliRunner().invoke(app, [*base, "--save", str(tmp_path / "s.npz")])
    assert r.exit_code == 1 and "rank of a Scan body's tensor" in r.output, r.output
    r = CliRunner().invoke(app, [*base, "--json", "-"])
    assert r.exit_code == 0, r.output
    row = json.loads(r.stdout)["tensors"][0]
    finals, acc = [], init.astype(np.float64)
    for row_x in x.astype(np.float64):  # the body: loop_final = acc + 3 row; acc = loop_final²
        final = acc + 3 * row_x
        finals.append(final)
        acc = final * final
    v = np.concatenate(finals)
    assert row["count"] == 6  # (float32 against float64: to its rounding)
    assert abs(row["min"] - v.min()) < 1e-6 * abs(v).max() and abs(row["max"] - v.max()) < 1e-6 * abs(v).max()
    assert abs(row["mean"] - v.mean()) < 1e-6 * abs(v).max()
