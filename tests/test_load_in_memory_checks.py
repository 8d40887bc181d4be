"""A model handed to the Python API as an onnx.ModelProto is checked as a file of it is: both take
``graph.io.check_graph``. One of no ir_version field, which onnxruntime refuses ("Missing model IR version"),
was refused from a file and run from Python (api.layers(proto) returned statistics; api.inspect named a
temporary copy's path). The oracle: onnxruntime refuses each model here, from its bytes; and the file and
the proto are refused with the same words."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T, helper as h, numpy_helper as nh

from conftest import ort_loads, sample_path
from onnxprobe import api
from onnxprobe.errors import ModelError
from onnxprobe.graph.io import load_model
from onnxprobe.graph.model import as_model

vi = h.make_tensor_value_info


def _no_ir_version() -> onnx.ModelProto:
    m = onnx.load(str(sample_path("mlp")))
    m.ClearField("ir_version")
    return m


def _unlisted_ir3() -> onnx.ModelProto:
    """IR 3, an If branch reading a weight that is no graph input."""
    w = nh.from_array(np.ones(2, np.float32), "W")
    then = h.make_graph([h.make_node("Add", ["x", "W"], ["t"])], "then", [], [vi("t", T.FLOAT, None)])
    els = h.make_graph([h.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", T.FLOAT, None)])
    g = h.make_graph([h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=els)], "g",
                     [vi("c", T.BOOL, []), vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, None)], [w])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 11)], ir_version=3)


def _no_opset() -> onnx.ModelProto:
    m = onnx.load(str(sample_path("mlp")))
    m.ClearField("opset_import")
    return m


CASES = {"no_ir_version": (_no_ir_version, "no IR version"), "ir3_unlisted_weight": (_unlisted_ir3, "'W'"),
         "no_opset": (_no_opset, "opset")}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_proto_is_refused_as_its_file_is(tmp_path, name):
    build, words = CASES[name]
    m = build()
    assert not ort_loads(m), "the oracle: onnxruntime refuses it"
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    with pytest.raises(ModelError) as from_file:
        load_model(path)
    with pytest.raises(ModelError) as from_proto:
        as_model(m)
    said_file, said_proto = str(from_file.value), str(from_proto.value)
    assert said_file == f"{path}: {said_proto.split(': ', 1)[1]}" and words in said_file, (said_file, said_proto)


@pytest.mark.parametrize("call", ["layers", "inspect", "grad"])
def test_the_api_refuses_a_proto_of_no_ir_version(call):
    m = _no_ir_version()
    with pytest.raises(ModelError, match=r"^<in-memory model>: the model gives no IR version"):
        getattr(api, call)(m)


def test_a_proto_onnxruntime_loads_is_taken():
    m = onnx.load(str(sample_path("mlp")))
    assert ort_loads(m)
    assert as_model(m).proto.ir_version == m.ir_version
