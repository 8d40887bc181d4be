"""A model onnxruntime cannot build a session for (here a FusedGemm whose LeakyRelu lacks the
activation_alpha its kernel requires), where shape inference also knows nothing of the op's output:
`grad` said "cannot sum the gradient back to the shape of 'b': its rank is unknown (input shapes given
with --shape ... often let shape inference tell it)", which sends the user after shapes they had given.
The run that was to tell the shapes failed; that failure is what is said, in one line."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app


def test_grad_says_onnxruntime_cannot_run_the_model(tmp_path):
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("FusedGemm", ["x", "w", "b"], ["y"], domain="com.microsoft", activation="LeakyRelu", transB=1)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5])],
                          [numpy_helper.from_array(rng.standard_normal((5, 4)).astype(np.float32), "w"),
                           numpy_helper.from_array(rng.standard_normal(5).astype(np.float32), "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "m.onnx")
    r = CliRunner().invoke(app, ["grad", str(tmp_path / "m.onnx"), "--device", "cpu"])
    assert r.exit_code == 1, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("onnxprobe: error")]
    assert len(lines) == 1 and "Traceback" not in r.output, r.output
    assert "onnxruntime" in lines[0] and "rank is unknown" not in lines[0], lines[0]
