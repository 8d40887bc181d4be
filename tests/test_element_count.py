"""One element count of a shape (``onnxprobe.types.element_count``), exact for every caller: no int64
wrap-around (2**32 x 2**32 once counted 0 elements, so a 16 EiB tensor fit any memory budget), no float
rounding, None for a dim that is not known."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnxprobe.graph import constants, summary
from onnxprobe.graph.extents import dims_nbytes
from onnxprobe.graph.shapes import concrete_sizes, shape_bytes
from onnxprobe.runtime.budget import nbytes
from onnxprobe.types import element_count


@pytest.mark.parametrize("dims, want", [
    ((), 1),  # a scalar
    ((0,), 0),
    ((3, 0, 5), 0),
    ((2, 3, 4), 24),
    ((1,), 1),
    ([np.int64(7), np.int32(6)], 42),  # numpy ints, as shapes and TensorProto dims hold them
    ((2**20, 2**20, 2**20), 2**60),
    ((2**40, 2**40), 2**80),  # past int64: exact, not wrapped
    ((3**40, 7), 3**40 * 7),  # past float64's 53 bits: exact, not rounded
    ((1, "batch", 3), None),  # a symbolic dim
    ((1, None, 3), None),  # an unknown dim
    ((0, "batch"), None),  # unknown as written: callers decide
    ((2.0, 3), None),  # not a whole number of elements
    ((True, 3), None),
])
def test_element_count(dims, want):
    got = element_count(dims)
    assert got == want and (got is None or type(got) is int)


def test_tensor_proto_dims():
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2**32, 2**32])
    assert element_count(t.dims) == 2**64
    assert dims_nbytes(t) == 2**66


def _typed(dtype: int) -> onnx.TypeProto:
    return helper.make_tensor_type_proto(dtype, None)


def test_shape_bytes_does_not_wrap():
    assert shape_bytes(_typed(TensorProto.FLOAT), (2**32, 2**32)) == 2**66
    assert shape_bytes(_typed(TensorProto.FLOAT16), (0, 5)) == 0
    assert shape_bytes(_typed(TensorProto.DOUBLE), ()) == 8
    assert shape_bytes(_typed(TensorProto.FLOAT), (2, "n")) is None


def test_budget_nbytes_does_not_wrap():
    assert nbytes((2**32, 2**32), "float32") == 2**66
    assert nbytes((), "float64") == 8
    assert nbytes(None, "float32") == 0
    assert nbytes((2, 3), "float32", count=5) == 20
    assert nbytes((3, 0), "float32") == 0


def test_concrete_sizes_of_huge_shapes():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["a", "b"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    m = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
                          opset_imports=[helper.make_opsetid("", 17)])
    sizes = concrete_sizes(m, {"x": (2**32, 2**32)})
    assert sizes["x"] == sizes["y"] == 2**66


def test_constant_arrays_skip_huge_dims():
    """A constant whose dims multiply past int64 is not 'small' (it counted 0 elements and was read)."""
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2**32, 2**32])
    small = helper.make_tensor("s", TensorProto.FLOAT, [2], [1.0, 2.0])
    g = helper.make_graph([], "g", [], [], initializer=[t, small])
    assert list(constants.constant_arrays(g, 16)) == ["s"]


def test_summary_counts_sparse_and_dense_elements():
    dense = helper.make_tensor("w", TensorProto.FLOAT, [3, 0], [])
    values = helper.make_tensor("sv", TensorProto.FLOAT, [2], [1.0, 2.0])
    indices = helper.make_tensor("si", TensorProto.INT64, [2], [0, 5])
    sparse = helper.make_sparse_tensor(values, indices, [2**33, 2**33])
    w2 = helper.make_tensor("w2", TensorProto.FLOAT, [4, 5], np.zeros(20, np.float32))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 5])
    m = helper.make_model(helper.make_graph([helper.make_node("Add", ["x", "w2"], ["y"])], "g", [x], [y],
                                            initializer=[dense, w2], sparse_initializer=[sparse]),
                          opset_imports=[helper.make_opsetid("", 17)])
    init, _ = summary._weights(m)
    assert init.elements == 0 + 20 + 2**66


def test_weights_of_huge_constant_of_shape():
    """match.weights: a ConstantOfShape of a shape past int64 is a huge weight, not an empty scalar one
    (its size wrapped to 0: 's:' evidence and size 0)."""
    from onnxprobe.match.weights import code_sizes, float_constants

    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [2**32, 2**32])
    fill = helper.make_node("ConstantOfShape", ["shape"], ["w"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5]))
    codes = helper.make_tensor("q", TensorProto.INT8, [3, 0, 2], [])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    m = helper.make_model(helper.make_graph([fill, helper.make_node("Add", ["x", "w"], ["y"])], "g", [x], [y],
                                            initializer=[shape, codes]), opset_imports=[helper.make_opsetid("", 17)])
    w = float_constants(m)["w"]
    assert w.size == 2**64 and not w.digest.startswith("s:") and w.sample == (0.5,) * 16
    assert code_sizes(m) == {"q": 0}
