"""mark and extract say their advice in the command line's words on the command line (flags), in the API's
through the API: a failed run that types the tensors read 'shapes (--shape)', 'int_range (--int-range)' and
'arrays (a dict of arrays)' on the command line (layers said '--shape')."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.cli.main import app


def _model(path):
    """x [1, n] -> Pad (reflect, 2 each side: fails where n is 1) -> Reshape by s [m] (rank unknown) -> Relu."""
    nodes = [helper.make_node("Pad", ["x", "pads"], ["p"], name="pad", mode="reflect"),
             helper.make_node("Reshape", ["p", "s"], ["r"], name="rs"), helper.make_node("Relu", ["r"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "n"]),
                                       helper.make_tensor_value_info("s", TensorProto.INT64, ["m"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [onnx.numpy_helper.from_array(np.array([0, 2, 0, 2], np.int64), "pads")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), path)
    return path


@pytest.mark.parametrize("command", ["mark", "extract"])
def test_a_failed_typing_run_advises_in_the_readers_words(tmp_path, command):
    m = str(_model(tmp_path / "m.onnx"))
    args = ["mark", m, "-o", str(tmp_path / "o.onnx"), "--name", "r"] if command == "mark" else \
        ["extract", m, "-o", str(tmp_path / "o.onnx"), "--from", "x, s", "--to", "r"]
    r = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
    assert r.exit_code == 1 and "--shape NAME=DIMS" in r.stderr and "--int-range LOW:HIGH" in r.stderr, r.output
    assert "(--shape)" not in r.stderr and "int_range" not in r.stderr and "a dict of arrays" not in r.stderr, r.stderr
    with pytest.raises(api.ModelError) as e:
        if command == "mark":
            api.mark(m, tmp_path / "o2.onnx", api.Selection(names=["r"]))
        else:
            api.extract(m, tmp_path / "o2.onnx", ["x", "s"], ["r"])
    assert "shapes (--shape)" in str(e.value) and "int_range (--int-range)" in str(e.value), str(e.value)
