"""`grad`'s table gave min, max and mean 4 significant digits whatever they are: a gradient of 10000.496 .. 10000.504
read "10000 10001 10000" (min, max, mean), the README's own counter-example; `layers` tells such values apart. The
oracle: the gradient, dL/dw = x for y = x * w and the sum loss, read back from the cells."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app


def test_grad_cells_tell_close_values_apart(tmp_path):
    g = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["y"], name="mul")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
                          [numpy_helper.from_array(np.ones(4, np.float32), "w")])
    m = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(m))
    x = np.array([10000.496, 10000.504, 10000.5, 10000.5], np.float32)
    np.save(tmp_path / "x.npy", x)
    r = CliRunner().invoke(app, ["grad", str(m), "--input", f"x={tmp_path / 'x.npy'}"], env={"COLUMNS": "160"})
    assert r.exit_code == 0, r.output
    row = next(ln.split() for ln in r.output.splitlines() if ln.split()[:4] == ["0", "mul", "Mul", "w"])
    lo, hi, mean = (float(v) for v in row[8:11])
    assert lo < hi and abs(lo - float(x.min())) < 1e-3 and abs(hi - float(x.max())) < 1e-3, row
    assert abs(mean - float(x.astype(np.float64).mean())) < 1e-3, row
