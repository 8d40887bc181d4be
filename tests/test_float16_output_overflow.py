"""A float16 model output that onnxruntime returns all +Inf (60000 + 60000 overflows float16) read finite in
`layers` (min 120000, "0 with NaN/Inf") once the tensor was large enough to be summarised in the graph: onnxruntime's
CPU provider keeps float32 between ops without a float16 kernel, and the statistics nodes read that. A model output
is what the run returns, rounded to float16: its statistics are of those values. The oracle: onnxruntime's own
output of the plain model."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from onnxprobe import api


def test_a_float16_output_that_overflows_reads_inf_as_onnxruntime_returns_it(tmp_path):
    h = TensorProto.FLOAT16
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "r"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", h, [300000])], [helper.make_tensor_value_info("y", h, [300000])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "m.onnx")
    x = np.linspace(60000, 65000, 300000).astype(np.float16)
    y = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.isinf(y).all()
    for sel in (api.Selection(), api.Selection(all=True)):
        res = api.layers(tmp_path / "m.onnx", sel, inputs=api.InputSpec(arrays={"x": x}))
        st = res.stats["y"]
        assert st.inf == int(np.isinf(y).sum()) == st.count, st  # every element Inf, as returned
        r = res.stats.get("r")
        if r is not None:  # an intermediate keeps onnxruntime's own values (here float16 holds them)
            assert r.inf == 0 and r.max == float(x.max())
