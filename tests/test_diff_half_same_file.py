"""``diff m16.onnx m16.onnx`` (one float16 file given twice: one model on one runtime, device and opt level)
was judged by "SQNR >= 20 dB", the rule of one half model run two ways, while two different float16 files
(a copy of it among them) were judged by allclose. The README's rule: a half model against a float32 one,
or one half model run two ways (runtimes, devices, opt levels), gets SQNR; anything else allclose. Now
the same file twice gets allclose as its copy does; run two ways it keeps SQNR. QA.

Oracle: the criterion's rule, and numpy (the two outputs differ by two float16 steps somewhere, which allclose
at 1e-4 tells and SQNR >= 20 dB does not)."""

from __future__ import annotations

import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api

CPU = api.RunConfig(device="cpu")


def _half(path, w: np.ndarray) -> str:
    vi = helper.make_tensor_value_info
    m = make_model([helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")], [vi("x", TensorProto.FLOAT16, [2, 8])],
                   [vi("y", TensorProto.FLOAT16, [2, 8])], [numpy_helper.from_array(w, "W")])
    onnx.save(m, path)
    return str(path)


def test_the_same_half_file_twice_is_judged_as_its_copy(tmp_path):
    w = np.eye(8, dtype=np.float16)
    p = _half(tmp_path / "m16.onnx", w)
    copy = tmp_path / "copy.onnx"
    shutil.copy(p, copy)
    x = api.InputSpec(arrays={"x": np.arange(16, dtype=np.float16).reshape(2, 8)})
    same = api.diff(p, p, config=CPU, inputs=x)
    other = api.diff(p, copy, config=CPU, inputs=x)
    assert same.criterion == other.criterion and same.criterion.startswith("|a-b| <="), (same.criterion, other.criterion)
    assert same.verdict()[0] == "pass"
    # run two ways it is the half rule still
    two = api.diff(p, vs_opt_level="all", config=CPU, inputs=x)
    assert two.criterion.startswith("SQNR >= 20 dB") and "float16" in two.criterion, two.criterion


def test_allclose_tells_a_one_step_change_sqnr_would_pass(tmp_path):
    """The criterion the same-file diff now gets can fail: two half files differing in one weight by two
    float16 steps fail it (y[0, 0] = 8 * w[0, 0] moves by 2e-3 of itself), at an SQNR far above 20 dB."""
    w = np.eye(8, dtype=np.float16)
    w2 = w.copy()
    w2[0, 0] = np.nextafter(np.nextafter(w[0, 0], np.float16(2)), np.float16(2))
    a, b = _half(tmp_path / "a.onnx", w), _half(tmp_path / "b.onnx", w2)
    x = np.full((2, 8), 8, np.float16)
    diff = np.abs(x.astype(np.float64) @ w.astype(np.float64) - x.astype(np.float64) @ w2.astype(np.float64)).max()
    assert diff > 1e-4 + 1e-3 * 8  # numpy: outside allclose
    res = api.diff(a, b, config=CPU, inputs=api.InputSpec(arrays={"x": x}))
    assert res.criterion.startswith("|a-b| <=") and res.verdict()[0] == "fail"
