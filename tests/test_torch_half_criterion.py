"""`diff --vs-torch` of a float16 export: its default criterion is one of float16 rounding, at each tensor's
own scale. It was an absolute 1e-2 + 1e-2 |b| at every element: a classifier's softmax over 300 classes
(probabilities of ~3e-3) passed whatever the export computed, and a logit scale 1.5x off (the last Gemm's
alpha, an attribute: no weight check sees it) gave "outputs pass", exit 0 (QA). Oracle: the module run in
float64 by torch against the file run by onnxruntime, compared in numpy float64."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

torch = pytest.importorskip("torch")

from onnxprobe import api  # noqa: E402


class Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(16, 32)
        self.act = torch.nn.GELU()
        self.l2 = torch.nn.Linear(32, 300)

    def forward(self, x):
        return torch.softmax(self.l2(self.act(self.l1(x))), -1)


def _export(tmp_path, kind: str, alpha: float):
    if kind == "dynamo":
        pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
    torch.manual_seed(0)
    m, x = Classifier().eval().half(), torch.randn(4, 16).half()
    path = tmp_path / f"{kind}.onnx"
    kwargs = {"opset_version": 17} if kind == "legacy" else {}
    torch.onnx.export(m, (x,), str(path), dynamo=kind == "dynamo", input_names=["x"], **kwargs)
    model = onnx.load(str(path))
    last = [n for n in model.graph.node if n.op_type == "Gemm"][-1]
    del last.attribute[:]  # no alpha/beta/trans kept: what the exporters write is transB=1
    last.attribute.extend([onnx.helper.make_attribute("transB", 1), onnx.helper.make_attribute("alpha", alpha)])
    onnx.save(model, str(path))
    return path, m, x


def _relative_error(path, m, x) -> float:
    """max|onnx - torch| over max|torch| of the output, in float64 (torch's module in float64)."""
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = s.run(None, {"x": x.numpy()})[0].astype(np.float64)
    with torch.no_grad():
        want = Classifier().eval()
        want.load_state_dict({k: v.double() for k, v in m.state_dict().items()})
        want = want.double()(x.double()).numpy()
    return float(np.abs(got - want).max() / np.abs(want).max())


@pytest.mark.parametrize("kind", ["legacy", "dynamo"])
def test_a_float16_export_with_a_wrong_logit_scale_fails(tmp_path, kind):
    path, m, x = _export(tmp_path, kind, 1.5)
    assert _relative_error(path, m, x) > 0.1  # far beyond float16 rounding (~1e-3 of the scale)
    res = api.diff_torch(path, m, example_args=(x,))
    assert res.other_values == []  # every weight is the module's: only the activations can tell
    verdict, why = res.verdict()
    assert verdict == "fail", why
    assert res.outputs_failed and res.first_failure.pair.b.name == "l2"


@pytest.mark.parametrize("kind", ["legacy", "dynamo"])
def test_a_faithful_float16_export_passes(tmp_path, kind):
    path, m, x = _export(tmp_path, kind, 1.0)
    assert _relative_error(path, m, x) < 1e-2  # float16 rounding only
    res = api.diff_torch(path, m, example_args=(x,))
    assert res.verdict()[0] == "pass", res.verdict()
    assert "float16" in res.criterion
