"""diff --vs-torch: a weight-normed Conv (``torch.nn.utils.parametrizations.weight_norm``, wav2vec2's
positional conv) exported by the legacy exporter, which folds ``g * v / ||v||`` into one initializer. At
init g = ||v||, so that weight equals ``v`` up to float rounding in a tenth of its values: the export was
failed as "1 weight(s) hold other values than the torch parameter they stand for (…original1)", though it
is exactly what torch computes. The weight torch's parametrization computes now explains it (derived from
several parameters, not compared); an initializer changed by more than rounding still fails the verdict.
Oracle: torch's own parametrized ``conv.weight`` (its value, not ours), and the ONNX model changed by hand."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

torch = pytest.importorskip("torch")

from onnxprobe import api  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(8, 8, 5, padding=2, groups=2), dim=2)
        self.fc = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(torch.nn.functional.gelu(self.conv(x)).transpose(1, 2))


def _build():
    torch.manual_seed(0)
    return Net().eval(), (torch.randn(1, 8, 12),)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    m, args = _build()
    path = tmp_path_factory.mktemp("wn") / "wn.onnx"
    torch.onnx.export(m, args, str(path), dynamo=False, opset_version=17)
    return path


def _conv_weight(path):
    model = onnx.load(str(path))
    conv = next(n for n in model.graph.node if n.op_type == "Conv")
    return model, next(t for t in model.graph.initializer if t.name == conv.input[1])


def test_a_weight_normed_conv_folded_by_the_exporter_is_derived_not_other_values(exported):
    m, args = _build()
    model, t = _conv_weight(exported)
    w = numpy_helper.to_array(t)
    with torch.no_grad():
        torch_w = m.conv.weight.numpy()
    v = m.conv.parametrizations.weight.original1.detach().numpy()
    assert np.allclose(w, torch_w, rtol=1e-6, atol=0) and not np.array_equal(w, v)  # the case: v up to rounding
    res = api.diff_torch(exported, (m, args))
    assert res.verdict()[0] == "pass", res.verdict()
    assert not res.other_values, res.other_values
    said = {u.obs.name: u.reason for u in res.matching.unmatched_b}
    assert "conv" not in said or "other values" not in said["conv"]


def test_the_folded_weight_changed_beyond_rounding_still_fails(exported, tmp_path):
    m, args = _build()
    model, t = _conv_weight(exported)
    w = numpy_helper.to_array(t).copy()
    w[0, 0, :] *= 1.05
    t.CopyFrom(numpy_helper.from_array(w, t.name))
    broken = tmp_path / "broken.onnx"
    onnx.save(model, str(broken))
    res = api.diff_torch(broken, (m, args))
    assert res.verdict()[0] == "fail", res.verdict()
    assert any(t.name in n for n in res.other_values), res.other_values
