"""Float8, float4 and 4-bit integer outputs on OpenVINO: it hands them back as their bits (uint8 bytes, the 4-bit
ones packed two to a byte in a flat array), which must be read as the numbers they encode, in the tensor's
shape, as onnxruntime's are. Oracle: ml_dtypes' decoding of the same values."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

from conftest import make_model
from onnxprobe import api

pytest.importorskip("openvino")
pytestmark = pytest.mark.openvino

CASES = [(TensorProto.FLOAT8E4M3FN, ml_dtypes.float8_e4m3fn), (TensorProto.FLOAT8E5M2, ml_dtypes.float8_e5m2),
         (TensorProto.FLOAT4E2M1, ml_dtypes.float4_e2m1fn), (TensorProto.INT4, ml_dtypes.int4),
         (TensorProto.UINT4, ml_dtypes.uint4)]


def _cast(to: int):
    return make_model([helper.make_node("Cast", ["x"], ["y"], name="cast", to=to)],
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 5])],
                      [helper.make_tensor_value_info("y", to, [5, 5])], opset=23, ir=11)


@pytest.mark.parametrize("to,np_type", CASES, ids=[c[1].__name__ for c in CASES])
def test_a_narrow_output_is_read_as_its_values(to, np_type):
    rng = np.random.default_rng(0)
    # values the type holds exactly (an odd count of 4-bit elements: the last byte half used)
    pool = np.unique(np.arange(-8, 16).astype(np_type).astype(np.float32) if np.dtype(np_type).kind in "iu"
                     else (rng.normal(size=400) * 2).astype(np_type).astype(np.float32))
    x = rng.choice(pool[np.isfinite(pool)], size=(5, 5)).astype(np.float32)
    want = x.astype(np_type).astype(np.float64)
    res = api.layers(_cast(to), api.Selection(all=True), inputs={"x": x}, runtime="openvino",
                     runtime_options={"INFERENCE_PRECISION_HINT": "f32"})
    st = res.stats["y"]
    assert res.shapes["y"] == (5, 5)
    assert st.count == 25
    assert (st.min, st.max) == (want.min(), want.max())
    assert st.mean == pytest.approx(want.mean(), rel=1e-6, abs=1e-9)
