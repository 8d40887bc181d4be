"""Inputs onnxprobe cannot feed are named with what they are: a float8 or int4 input read "a string
tensor", one with no type or of element type UNDEFINED "not a tensor (a sequence, map or optional ...)"
(QA). float8 and int4 have numpy types (ml_dtypes) that onnxruntime's Python API takes no array of:
a model problem for onnxprobe, exit 1, as an input with no type is."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app

runner = CliRunner()


def _cast_model(path, elem_type, opset, typed=True):
    vi = helper.make_tensor_value_info("x", elem_type, [2]) if typed else onnx.ValueInfoProto(name="x")
    g = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)], "g", [vi],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    onnx.save(m, str(path))
    return m


@pytest.mark.parametrize("elem_type, opset", [(TensorProto.FLOAT8E4M3FN, 19), (TensorProto.FLOAT8E5M2, 19),
                                              (TensorProto.INT4, 21), (TensorProto.UINT4, 21)])
def test_float8_and_int4_inputs_are_named_by_their_type(tmp_path, elem_type, opset):
    m = _cast_model(tmp_path / "m.onnx", elem_type, opset)
    x = np.zeros(2, np.float32).astype(helper.tensor_dtype_to_np_dtype(elem_type))
    with pytest.raises(Exception, match="can't be converted"):  # the fact the refusal rests on
        ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    name = TensorProto.DataType.Name(elem_type)
    for extra in ([], ["--input", "x=1"]):
        r = runner.invoke(app, ["layers", str(tmp_path / "m.onnx"), *extra])
        assert r.exit_code == 1, r.output
        assert r.stderr.strip().splitlines() == [r.stderr.strip()] and f"input 'x': element type {name}," in r.stderr
        assert "string" not in r.stderr


@pytest.mark.parametrize("typed, words", [(False, "input 'x': declares no type"),
                                          (True, "input 'x': a tensor of element type UNDEFINED")])
def test_an_input_without_a_type_is_a_model_problem(tmp_path, typed, words):
    _cast_model(tmp_path / "m.onnx", TensorProto.UNDEFINED, 17, typed)
    r = runner.invoke(app, ["layers", str(tmp_path / "m.onnx")])
    assert r.exit_code == 1 and words in r.stderr and "sequence" not in r.stderr, r.output
