"""The count of zeros that the in-graph statistics take (graph.stats_nodes: Equal(x, 0) from opset 11, the
cast of x to bool before it), in the block form (``block_parts``) and the fast row, against numpy: -0.0 is a
zero, subnormals and large values are not."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from onnxprobe import api
from onnxprobe.runtime.runners import base as base_runner


def _model(opset: int, shape: list) -> bytes:
    # y = x * 1 + 0 keeps every value (and its sign) as is; the probe of y is in-graph
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    zero = helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])
    g = helper.make_graph([helper.make_node("Mul", ["x", "one"], ["m"]), helper.make_node("Add", ["m", "zero"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], [one, zero])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=7).SerializeToString()


@pytest.mark.parametrize("opset", [10, 17])
@pytest.mark.parametrize("shape", [[4, 512], [3, 7, 11]], ids=["blocks", "fast-row"])
def test_zeros_are_counted_exactly_in_graph(tmp_path, monkeypatch, opset, shape):
    monkeypatch.setattr(base_runner, "SMALL_ON_HOST", (0, 0))  # every probe in the graph
    rng = np.random.default_rng(7)
    x = rng.normal(size=shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[rng.choice(flat.size, flat.size // 3, replace=False)] = 0.0
    flat[:4] = [-0.0, np.float32(1.4e-45), -np.float32(1.4e-45), 1e12]  # squares within float32: no careful rerun
    flat[-1] = -1e12
    path = tmp_path / f"zeros{opset}.onnx"
    path.write_bytes(_model(opset, shape))
    res = api.layers(path, api.Selection(all=True), api.RunConfig(device="cpu", cache=False),
                     inputs=api.InputSpec(arrays={"x": x}))
    blocks = {p.ref.name: p.stats_block for p in res.plan.probes}
    assert all((blocks[t] > 0) == (shape == [4, 512]) for t in ("m", "y")), blocks
    x64 = x.astype(np.float64)
    for t in ("m", "y"):
        st = res.stats[t]
        assert st.count == x.size and st.zeros == int((x64 == 0).sum()), (t, st.zeros)
        assert st.min == x64.min() and st.max == x64.max()
