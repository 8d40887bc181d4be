"""`diff` inside If branches on a real model: silero VAD (its whole network sits in the two branches of one
If on the sample rate) against a copy with every float weight perturbed, branch Constants included.

The oracle: the same two models with that If replaced by the nodes of the branch the diff says ran
(spliced into the main graph), run by plain onnxruntime with the branch's tensors as outputs, and the
metrics taken in numpy float64. Opt-in: ONNXPROBE_MODELS=DIR, as for tests/test_real_models.py."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from onnxprobe import api

MODELS = Path(os.environ["ONNXPROBE_MODELS"]) if os.environ.get("ONNXPROBE_MODELS") else None
pytestmark = pytest.mark.skipif(MODELS is None or not MODELS.is_dir(),
                                reason="real models not fetched: run ../shared/models/fetch_models.sh DIR and set ONNXPROBE_MODELS=DIR")
SILERO = "pip/silero-vad-6.2.3/silero_vad.onnx"


def _perturbed(src: Path, dst: Path) -> Path:
    """Every float weight of more than 16 elements x (1 + 1e-3 N(0, 1)), in bodies too."""
    m = onnx.load(str(src))
    rng = np.random.default_rng(0)

    def new(t: onnx.TensorProto) -> onnx.TensorProto:
        a = numpy_helper.to_array(t)
        return numpy_helper.from_array((a * (1 + 1e-3 * rng.standard_normal(a.shape))).astype(np.float32), t.name)

    def visit(g: onnx.GraphProto) -> None:
        for t in g.initializer:
            if t.data_type == onnx.TensorProto.FLOAT and np.prod(t.dims) > 16:
                t.CopyFrom(new(t))
        for n in g.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    visit(a.g)
                elif n.op_type == "Constant" and a.name == "value" and a.t.data_type == onnx.TensorProto.FLOAT and np.prod(a.t.dims) > 16:
                    a.t.CopyFrom(new(a.t))

    visit(m.graph)
    onnx.save(m, str(dst))
    return dst


def _spliced(path: Path, if_name: str, branch: str, outputs: list[str]) -> onnx.ModelProto:
    """The model with the top-level If ``if_name`` replaced by its ``branch``'s nodes (its outputs passed
    on by Identity), ``outputs`` added as graph outputs: the oracle's own plain graph."""
    m = onnx.load(str(path))
    g = m.graph
    k, node = next((k, n) for k, n in enumerate(g.node) if n.name == if_name)
    body = next(a.g for a in node.attribute if a.name == branch)
    spliced = list(body.node) + [onnx.helper.make_node("Identity", [o.name], [y]) for o, y in zip(body.output, node.output)]
    nodes = list(g.node[:k]) + spliced + list(g.node[k + 1:])
    del g.node[:]
    g.node.extend(nodes)
    g.initializer.extend(body.initializer)
    have = {o.name for o in g.output}
    g.output.extend(onnx.ValueInfoProto(name=o) for o in outputs if o not in have)
    return m


def test_diff_localises_the_error_inside_the_branch_that_ran(tmp_path):
    src = MODELS / SILERO
    pert = _perturbed(src, tmp_path / "pert.onnx")
    feeds = {"input": np.random.default_rng(1).standard_normal((1, 512)).astype(np.float32),
             "state": np.zeros((2, 1, 128), np.float32), "sr": np.array(16000, np.int64)}
    res = api.diff(pert, src, selection=api.Selection(all=True), config=api.RunConfig(device="cpu"),
                   inputs=api.InputSpec(arrays=feeds))
    top = next(n for n in onnx.load(str(src)).graph.node if n.op_type == "If")
    ran = [r for r in res.results if r.pair.a.scope and r.metrics is not None]
    idle = [r for r in res.results if r.pair.a.scope and r.metrics is None]
    assert len(ran) >= 40 and len(idle) >= 40  # one branch compared, the other "not run"
    assert all("did not run" in r.problem and r.passed is None for r in idle)
    branch = {r.pair.a.scope.split("/")[1] for r in ran}
    assert len(branch) == 1 and all(r.pair.a.scope.startswith(f"{top.name}/") for r in ran)
    assert res.first_failure is not None and res.first_failure.pair.a.scope  # the error starts inside the branch
    # the oracle, on the tensors of the branch itself (not of Ifs nested in it)
    (b,) = branch
    direct = [r for r in ran if r.pair.a.scope == f"{top.name}/{b}"]
    names = [r.pair.a.name for r in direct]
    assert len(names) >= 20
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    values = []
    for p in (pert, src):
        sess = ort.InferenceSession(_spliced(p, top.name, b, names).SerializeToString(), so, providers=["CPUExecutionProvider"])
        values.append(dict(zip(names, sess.run(names, feeds))))
    for r in direct:
        va, vb = (v[r.pair.a.name].astype(np.float64) for v in values)
        d = va - vb
        assert r.metrics.max_abs == pytest.approx(np.abs(d).max(), rel=1e-6, abs=1e-30), r.pair.a.name
        assert r.metrics.rmse == pytest.approx(np.sqrt((d * d).mean()), rel=1e-6, abs=1e-30), r.pair.a.name
