"""A model of ai.onnx.ml ops alone (skl2onnx's Scaler -> LinearRegressor) imports no ai.onnx opset: its statistics
read 'opset 1', which predates IsNaN, so layers computed them on the host with a note and `mark --stats` was refused
('the model's is 1: convert the model to a newer opset first', which no converter can). The statistics nodes take
an ai.onnx import of their own. Oracle: numpy float64 of the Scaler's formula."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.cli.main import app

OFFSET, SCALE = [0.5, -1.0, 2.0], [2.0, 0.5, 4.0]


def _model(path) -> str:
    nodes = [helper.make_node("Scaler", ["x"], ["s"], name="sc", domain="ai.onnx.ml", offset=OFFSET, scale=SCALE),
             helper.make_node("LinearRegressor", ["s"], ["y"], name="lr", domain="ai.onnx.ml", coefficients=[1.0, 2.0, 3.0],
                              intercepts=[0.5])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("ai.onnx.ml", 3)])
    m.ir_version = 8
    onnx.save(m, path)
    return str(path)


def test_statistics_of_a_model_that_imports_no_onnx_opset(tmp_path):
    path = _model(tmp_path / "ml.onnx")
    x = np.random.default_rng(0).standard_normal((64, 3)).astype(np.float32)
    res = api.layers(path, api.Selection(all=True), inputs=api.InputSpec(arrays={"x": x}))
    assert not any("predates" in n or "opset 1" in n for n in res.notes + res.plan.warnings), res.notes
    s = (x.astype(np.float64) - OFFSET) * SCALE
    st = res.stats["s"]
    assert np.isclose(st.mean, s.mean(), rtol=1e-6) and np.isclose(st.std, s.std(), rtol=1e-5)
    assert np.isclose(st.min, s.min(), rtol=1e-6) and np.isclose(st.max, s.max(), rtol=1e-6)
    out = tmp_path / "marked.onnx"
    r = CliRunner().invoke(app, ["mark", path, "-o", str(out), "--all", "--stats"])
    assert r.exit_code == 0, r.output
    marked = onnx.load(out)
    onnx.checker.check_model(marked, full_check=True)
    assert {(o.domain, o.version) for o in marked.opset_import} >= {("ai.onnx.ml", 3), ("", 17)}
    assert [(o.domain, o.version) for o in onnx.load(path).opset_import] == [("ai.onnx.ml", 3)]  # the model itself untouched
