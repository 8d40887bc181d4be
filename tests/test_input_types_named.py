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


@pytest.mark.parametrize("kind", ["sequence", "optional"])
def test_a_sequence_or_optional_input_is_a_model_problem_as_float8_is(tmp_path, kind):
    """A sequence or optional graph input was refused as a usage error (exit 2) and a float8 one as a model
    problem (exit 1) (QA): neither is anything a flag can change (onnxprobe feeds tensors only), so both are
    the model's problem, exit 1, as the README's exit codes say, and ``api.ModelError`` in Python."""
    from onnxprobe import api

    elem = helper.make_tensor_type_proto(TensorProto.FLOAT, [2])
    t = helper.make_sequence_type_proto(elem) if kind == "sequence" else helper.make_optional_type_proto(elem)
    op = "SequenceLength" if kind == "sequence" else "OptionalHasElement"
    g = helper.make_graph([helper.make_node(op, ["q"], ["n"], name="n")], "g", [helper.make_value_info("q", t)],
                          [helper.make_value_info("n", helper.make_tensor_type_proto(
                              TensorProto.INT64 if kind == "sequence" else TensorProto.BOOL, []))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, str(tmp_path / "m.onnx"))
    _cast_model(tmp_path / "f8.onnx", TensorProto.FLOAT8E4M3FN, 19)
    codes = {}
    for name in ("m", "f8"):
        r = runner.invoke(app, ["layers", str(tmp_path / f"{name}.onnx")])
        assert len(r.stderr.strip().splitlines()) == 1 and "input 'q'" in r.stderr or name == "f8", r.output
        codes[name] = r.exit_code
    assert codes == {"m": 1, "f8": 1}, codes
    with pytest.raises(api.ModelError, match=f"not a tensor \\(an? {kind}"):
        api.layers(str(tmp_path / "m.onnx"))
