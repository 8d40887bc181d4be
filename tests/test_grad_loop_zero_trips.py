"""A Loop that runs zero times: its outputs are its initial values, so dL/dh0 = dy and the weights its
body reads get 0; the backward Scan over zero slices crashed in onnxruntime ('Invalid dim0_offset of 0').
Oracle: central finite differences in float64 of the loop written in numpy (h <- tanh(h w), M times)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

runner = CliRunner()
RNG = np.random.default_rng(4)
V = helper.make_tensor_value_info


@pytest.mark.parametrize("trips", [0, 1, 3])
def test_loop_gradients_for_any_trip_count(tmp_path, trips):
    body = helper.make_graph([helper.make_node("Mul", ["h", "w"], ["hw"]), helper.make_node("Tanh", ["hw"], ["hn"]),
                              helper.make_node("Identity", ["cin"], ["cout"])], "body",
                             [V("i", TensorProto.INT64, []), V("cin", TensorProto.BOOL, []), V("h", TensorProto.FLOAT, [2, 3])],
                             [V("cout", TensorProto.BOOL, []), V("hn", TensorProto.FLOAT, [2, 3])])
    w = RNG.standard_normal((2, 3)).astype(np.float32)
    m = make_model([helper.make_node("Loop", ["M", "", "h0"], ["y"], body=body)],
                   [V("M", TensorProto.INT64, []), V("h0", TensorProto.FLOAT, [2, 3])], [V("y", TensorProto.FLOAT, [2, 3])],
                   [numpy_helper.from_array(w, "w")])
    onnx.save(m, tmp_path / "m.onnx")
    h0 = RNG.standard_normal((2, 3)).astype(np.float32)
    dy = RNG.standard_normal((2, 3)).astype(np.float32)
    np.save(tmp_path / "M.npy", np.array(trips, np.int64))
    np.save(tmp_path / "h0.npy", h0)
    np.save(tmp_path / "dy.npy", dy)
    r = runner.invoke(app, ["grad", str(tmp_path / "m.onnx"), "--input", f"M={tmp_path / 'M.npy'}", "--input",
                            f"h0={tmp_path / 'h0.npy'}", "--output-grad", str(tmp_path / "dy.npy"), "--wrt", "h0",
                            "--wrt", "w", "--device", "cpu", "--save-grads", str(tmp_path / "g.npz")])
    assert r.exit_code == 0, r.output
    got = np.load(tmp_path / "g.npz")

    def L(d):
        h = d["h0"]
        for _ in range(trips):
            h = np.tanh(h * d["w"])
        return float(np.sum(h * dy))

    x64 = {"h0": h0.astype(np.float64), "w": w.astype(np.float64)}
    for n in x64:
        want = np.zeros((2, 3))
        for i in np.ndindex(2, 3):
            plus, minus = {**x64, n: x64[n].copy()}, {**x64, n: x64[n].copy()}
            plus[n][i] += 1e-6
            minus[n][i] -= 1e-6
            want[i] = (L(plus) - L(minus)) / 2e-6
        np.testing.assert_allclose(got[n], want, rtol=1e-4, atol=1e-5, err_msg=n)
