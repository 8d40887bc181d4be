"""A model's size (whether it passes protobuf's 2 GB and is written with external data, whether sessions are
built from a skeleton) counts a tensor's bytes as its file holds them: one rule, ``graph.extents.dims_nbytes``,
where 4-bit types take half a byte an element. ``graph.skeleton`` had its own copy, which took numpy's one-byte
int4 and counted 1.5 GiB of int4 weights as 3 GiB: past the 2 GB limit."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from onnxprobe.graph.extents import dims_nbytes
from onnxprobe.graph.io import PROTO_LIMIT, is_large, model_size
from onnxprobe.graph.skeleton import weight_bytes


def _external(name: str, dtype: int, n: int) -> TensorProto:
    t = TensorProto(name=name, data_type=dtype, dims=[n], data_location=TensorProto.EXTERNAL)
    e = t.external_data.add()
    e.key, e.value = "location", f"{name}.bin"
    return t


def _model(*inits: TensorProto) -> onnx.ModelProto:
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])], list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


def test_int4_weights_take_half_a_byte_each():
    w = _external("w", TensorProto.INT4, 3 * 2**30)  # 1.5 GiB in the file
    m = _model(w)
    assert weight_bytes(m) == dims_nbytes(w) == 3 * 2**29
    assert model_size(m) < PROTO_LIMIT and not is_large(m)


def test_whole_byte_types_unchanged():
    m = _model(_external("a", TensorProto.FLOAT16, 10), _external("b", TensorProto.INT64, 3),
               _external("c", TensorProto.BOOL, 5))
    assert weight_bytes(m) == 20 + 24 + 5
