"""The benchmark's ResNet-18 (bench/models.py, 224x224): every weight gradient of the full-size model against
torch.autograd in float64 on the same graph. At this size the backward graph takes the formulations chosen
for speed that small rule cases only reach with lowered thresholds: dense weight gradients by one GEMM
per kernel offset (early layers), im2col GEMMs (late layers), and Conv -> BatchNormalization pairs left
unfolded where the weights outnumber the outputs."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort

from conftest import bench_models
from onnxprobe import api
from onnxprobe.autodiff.select import weight_value


def test_resnet18_weight_gradients_match_torch(tmp_path):
    from test_autodiff_torchref import in_worker

    path = bench_models().resnet18(tmp_path / "resnet18.onnx")
    model = api.load(path)
    feed = api.feeds(model, api.InputSpec(shapes={}, int_range=(0, 100))).values
    out = model.proto.graph.output[0].name
    y = ort.InferenceSession(model.proto.SerializeToString(), providers=["CPUExecutionProvider"]).run([out], feed)[0]
    dy = np.random.default_rng(0).standard_normal(y.shape).astype(np.float32)
    r = api.grad(path, None, api.RunConfig(device="cpu"), api.GradSpec(loss="output-grad", output_grad=dy),
                 save=True, inputs=api.InputSpec(arrays=feed))
    w = {row.name: weight_value(model.proto, row.name) for row in r.rows if row.target.kind == "weight"}
    assert len(w) > 60  # conv, BatchNormalization and Gemm parameters

    gp = api.grad_plan(model, api.GradSpec(loss="output-grad", output_grad=dy, wrt=tuple(w)), feed=feed)
    ops = [n.op_type for n in gp.backward.model.graph.node]
    assert "BatchNormalization" in ops  # late layers keep theirs
    assert ops.count("Gemm") >= 9 + 1  # one layer's nine per-offset GEMMs at least, and the classifier's

    f64 = {k: v.astype(np.float64) for k, v in w.items()}
    tg = in_worker([{"kind": "grads", "model": model.proto.SerializeToString(),
                     "feeds": {k: np.asarray(v, np.float64) for k, v in feed.items()}, "wrt": f64,
                     "outputs": [(out, dy.astype(np.float64))]}])[0]
    for name in w:
        scale = max(float(np.abs(tg[name]).max()), 1e-12)
        np.testing.assert_allclose(r.arrays[name], tg[name], rtol=0, atol=1e-4 * scale, err_msg=name)
