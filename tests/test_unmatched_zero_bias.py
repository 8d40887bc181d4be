"""An optimizer that drops an Add of a bias of zeros (onnxslim on a freshly initialised BERT), the MatMul before it
taking the Add's name: the other model's Add output was listed 'different-function' ('another layer, whatever the
values'), though it holds the values of the MatMul output that is compared. It is a copy, said as such. The oracle:
the two tensors' values from onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from conftest import make_model
from onnxprobe import api
from onnxprobe.types import COPY
from test_diff import _run_with_outputs

RNG = np.random.default_rng(0)
W = RNG.standard_normal((16, 16)).astype(np.float32)
X = RNG.standard_normal((4, 16)).astype(np.float32)


def test_a_dropped_zero_bias_add_is_a_copy(tmp_path):
    vi = (lambda n: h.make_tensor_value_info(n, T.FLOAT, [4, 16]))
    b = make_model([h.make_node("MatMul", ["x", "W"], ["mm"]), h.make_node("Add", ["mm", "bias"], ["lin"]),
                    h.make_node("Relu", ["lin"], ["y"])], [vi("x")], [vi("y")],
                   [nh.from_array(W, "W"), nh.from_array(np.zeros(16, np.float32), "bias")])
    a = make_model([h.make_node("MatMul", ["x", "W"], ["lin"]), h.make_node("Relu", ["lin"], ["y"])], [vi("x")], [vi("y")],
                   [nh.from_array(W, "W")])
    onnx.save(a, tmp_path / "a.onnx")
    onnx.save(b, tmp_path / "b.onnx")
    vb = _run_with_outputs(tmp_path / "b.onnx", ["mm", "lin"], {"x": X})
    assert np.array_equal(vb["mm"], vb["lin"])  # the oracle: the Add keeps the MatMul's values
    res = api.diff(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), selection=api.Selection(all=True),
                   inputs=api.InputSpec(arrays={"x": X}), config=api.RunConfig(device="cpu", cache=False))
    assert ("lin", "mm") in {(r.pair.a.name, r.pair.b.name) for r in res.results}
    lin = next(u for u in res.matching.unmatched_b if u.obs.name == "lin")
    assert lin.cause == COPY and "'mm'" in lin.reason and "another layer" not in lin.reason
