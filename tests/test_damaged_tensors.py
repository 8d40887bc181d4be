"""A model whose own tensors are damaged: a weight holding fewer values than its shape needs (in a typed
field or in raw_data), a weight or an input of a data type onnx does not know. Every command says so in one
line naming the tensor (exit 1), never an internal error from numpy deep inside matching or listing."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import ModelError

runner = CliRunner()


def _add(tmp_path, w: TensorProto, x_type: int = TensorProto.FLOAT, y_type: int = TensorProto.FLOAT):
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")], "g",
                          [helper.make_tensor_value_info("x", x_type, [2, 3])],
                          [helper.make_tensor_value_info("y", y_type, [2, 3])], initializer=[w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    p = tmp_path / "m.onnx"
    p.write_bytes(m.SerializeToString())
    return str(p)


SHORT = {
    "float_data": lambda: TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3], float_data=[1.0, 2.0]),
    "raw_data": lambda: TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3], raw_data=b"abc"),
    "raw_data_whole_values": lambda: TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3], raw_data=b"\0" * 8),
    "unknown_type": lambda: TensorProto(name="w", data_type=999, dims=[2, 3], raw_data=b"\0" * 24),
}


RUNS = [["diff", "{m}", "{m}"], ["layers", "{m}"], ["grad", "{m}"]]
READS = [["inspect", "{m}"], ["mark", "{m}", "--all", "--include-constants", "-o", "{o}"]]  # never read a value: the loader refuses
CASES = [(k, a) for k in SHORT for a in RUNS] + [(k, a) for k in ("float_data", "unknown_type") for a in READS]


@pytest.mark.parametrize("kind, argv", CASES, ids=[f"{k}-{a[0]}" for k, a in CASES])
def test_damaged_weight_is_one_line_naming_it(tmp_path, kind, argv):
    m = _add(tmp_path, SHORT[kind]())
    r = runner.invoke(app, [a.format(m=m, o=tmp_path / "o.onnx") for a in argv], env={"ONNXPROBE_DEBUG": ""})
    assert r.exit_code == 1, r.output
    assert "internal error" not in r.output and "Traceback" not in r.output, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("onnxprobe: error:")]
    assert len(lines) == 1 and "'w'" in lines[0], r.stderr
    assert not (tmp_path / "o.onnx").exists()


def test_api_diff_of_a_damaged_weight_is_a_model_error(tmp_path):
    m = _add(tmp_path, SHORT["float_data"]())
    with pytest.raises(ModelError, match="'w'"):
        api.diff(m, m)


def test_a_whole_weight_is_taken(tmp_path):
    """The check counts values as each field stores them: a float16 weight in int32_data, one per value."""
    w = helper.make_tensor("w", TensorProto.FLOAT16, [2, 3], np.arange(6, dtype=np.float16).view(np.uint16).tolist(), raw=False)
    m = _add(tmp_path, w, TensorProto.FLOAT16, TensorProto.FLOAT16)  # x float16 too: Add takes one type
    r = runner.invoke(app, ["inspect", m], env={"ONNXPROBE_DEBUG": ""})
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("argv", [["inspect", "{m}"], ["inspect", "{m}", "--nodes"], ["extract", "{m}", "--to", "y", "-o", "{o}"],
                                  ["debug", "{m}", "--script", "-"]], ids=lambda a: a[0] + str(len(a)))
def test_input_of_an_unknown_type_is_no_internal_error(tmp_path, argv):
    m = _add(tmp_path, TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3], float_data=[0.0] * 6), x_type=999)
    r = runner.invoke(app, [a.format(m=m, o=tmp_path / "o.onnx") for a in argv], input="quit\n", env={"ONNXPROBE_DEBUG": ""})
    assert "internal error" not in r.output and "Traceback" not in r.output, r.output
    if r.exit_code:
        assert len([ln for ln in r.stderr.splitlines() if ln.startswith("onnxprobe: error:")]) == 1, r.stderr
