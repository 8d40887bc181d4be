"""Declared shapes that the fed VALUES contradict: r = Range(0, lim, 1) -> Sin -> Add 1e4, with value_info
saying r, s and y hold 6 (or 1024, or 2x3) elements, run with lim = 2,000,000. Input shapes say nothing
about such a tensor (``graph.stale_shapes`` cannot see it), so statistics rows are laid out for the declared
dims: Σ|x| of 2M elements summed in float32 as if of 6 read y's abs_mean 9987.4 for a mean of 10000, and the
block form's Reshape to [-1, 1024], or sums over an axis the tensor lacks, failed the run. Every statistic
must equal numpy float64 over plain onnxruntime's values, whatever the declaration."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from conftest import make_model
from onnxprobe import api
from onnxprobe.runtime.runners import base as base_runner
from onnxprobe.runtime.runners.ort import OrtRunner
from onnxprobe.types import TensorRef
from test_stats_hostile import check, oracle

LIM = 2_000_000


def _range_model(dims: list) -> onnx.ModelProto:
    f = TensorProto.FLOAT
    nodes = [helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("zv", f, [], [0.0])),
             helper.make_node("Constant", [], ["one"], value=helper.make_tensor("ov", f, [], [1.0])),
             helper.make_node("Constant", [], ["big"], value=helper.make_tensor("bv", f, [], [1e4])),
             helper.make_node("Range", ["zero", "lim", "one"], ["r"], name="range"),
             helper.make_node("Sin", ["r"], ["s"], name="sin"),
             helper.make_node("Add", ["s", "big"], ["y"], name="add"),
             helper.make_node("Identity", ["y"], ["z"], name="id")]
    m = make_model(nodes, [helper.make_tensor_value_info("lim", f, [])], [helper.make_tensor_value_info("z", f, None)])
    m.graph.value_info.extend(helper.make_tensor_value_info(n, f, dims) for n in ("r", "s", "y"))
    return m


def _plain(m: onnx.ModelProto, feeds: dict) -> dict[str, np.ndarray]:
    """Plain onnxruntime, without the declarations, r, s and y as outputs (the oracle's own values)."""
    c = onnx.ModelProto()
    c.CopyFrom(m)
    del c.graph.value_info[:]
    c.graph.output.extend(onnx.ValueInfoProto(name=n) for n in ("r", "s", "y"))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(c.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return dict(zip("rsyz", sess.run(["r", "s", "y", "z"], feeds)))


DIMS = pytest.mark.parametrize("dims", [[6], [1024], [2, 3]], ids=["six", "blocks", "rank"])


@DIMS
def test_layers_statistics_of_tensors_whose_declared_size_the_values_contradict(tmp_path, monkeypatch, dims):
    monkeypatch.setattr(base_runner, "SMALL_ON_HOST", (0, 0))  # every row in the graph, as for large tensors
    m = _range_model(dims)
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    feeds = {"lim": np.array(LIM, np.float32)}
    res = api.layers(p, api.Selection(all=True), api.RunConfig(device="cpu", cache=False), api.InputSpec(arrays=feeds))
    want = _plain(m, feeds)
    for t in "rsyz":
        assert res.shapes[t] == (LIM,)
        check(res.stats[t], oracle(want[t]), t)


@DIMS
def test_rows_without_runtime_shapes_are_checked_by_their_count(dims):
    m = _range_model(dims)
    feeds = {"lim": np.array(LIM, np.float32)}
    runner = OrtRunner(m, api.RunConfig(device="cpu", cache=False))
    refs = [TensorRef(name=t, node=t, op_type="", index=k, shape=tuple(dims)) for k, t in enumerate("rsy")]
    res = runner.probe(refs, feeds, shapes=False)
    want = _plain(m, feeds)
    for t in "rsy":
        check(res.stats[t], oracle(want[t]), t)
