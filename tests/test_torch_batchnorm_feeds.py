"""`diff --vs-torch` and a BatchNorm folded into a layer: the layer is the one whose output the BatchNorm
reads, not the module that ran just before it. With `a = conv1(x); b = conv2(x); bn(a) + b` legacy folds bn
into conv1, but conv2 ran last before bn: conv2's raw output was compared as bn's (a false FAIL, 'error
starts at bn') and conv1's folded output as conv1's own. torch is the oracle (each pair against its value)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from onnxprobe import api  # noqa: E402

nn = torch.nn


class OneBn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        a = self.conv1(x)
        b = self.conv2(x)
        return self.bn(a) + b


class TwoBn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(3, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)
        self.bn2 = nn.BatchNorm2d(4)

    def forward(self, x):
        a = self.conv1(x)
        b = self.conv2(x)
        return self.bn1(b) + self.bn2(a)


def _built(cls):
    torch.manual_seed(0)
    m = cls().eval()
    for bn in m.modules():
        if isinstance(bn, nn.BatchNorm2d):  # statistics far from the identity: a wrong pairing is far off
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.5, 2)
            bn.weight.data.uniform_(0.5, 1.5)
            bn.bias.data.uniform_(-0.5, 0.5)
    return m, torch.randn(1, 3, 8, 8)


def _export(m, x, path, kind):
    if kind == "dynamo":
        pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
    torch.onnx.export(m, (x,), str(path), dynamo=kind == "dynamo", input_names=["x"], verbose=False)


@pytest.mark.parametrize("kind", ["legacy", "dynamo"])
@pytest.mark.parametrize("cls", [OneBn, TwoBn])
def test_the_batchnorm_pairs_with_the_layer_that_feeds_it(tmp_path, kind, cls):
    m, x = _built(cls)
    path = tmp_path / f"{cls.__name__}_{kind}.onnx"
    _export(m, x, path, kind)
    res = api.diff_torch(path, m, example_args=(x,))
    assert res.verdict()[0] == "pass", res.verdict()
    assert all(r.passed for r in res.results), [(r.pair.a.name, r.pair.b.name, r.metrics.max_abs) for r in res.results]
    assert res.first_failure is None
    paired = {r.pair.b.name for r in res.results}
    bns = ["bn"] if cls is OneBn else ["bn1", "bn2"]
    assert set(bns) <= paired, paired
    assert max(r.metrics.max_abs for r in res.results) < 1e-5
    unmatched = {u.obs.name: u.reason for u in res.matching.unmatched_b}
    # conv1's output is what bn (bn2) reads: conv1 is the layer folded or fused into it, and said so
    into = "bn" if cls is OneBn else "bn2"
    assert "conv1" in unmatched and f" {into} " in unmatched["conv1"] + " ", unmatched
    if cls is OneBn:
        assert "conv2" in paired and "conv2" not in unmatched


def test_inputs_as_a_dict_of_arrays(tmp_path):
    """api.diff_torch and api.diff_grad_torch took inputs as an InputSpec only: a dict of arrays by input name, which
    every other function takes, failed with "AttributeError: 'dict' object has no attribute 'seed'"."""
    m, x = _built(OneBn)
    path = tmp_path / "one.onnx"
    _export(m, x, path, "legacy")
    feed = {"x": x.numpy()}
    res = api.diff_torch(path, m, inputs=feed)
    assert res.verdict()[0] == "pass", res.verdict()
    np = pytest.importorskip("numpy")
    assert np.array_equal(res.feed["x"], feed["x"])  # the arrays given, not seeded ones
    g = api.diff_grad_torch(path, m, inputs=feed)
    assert g.verdict()[0] in ("pass", "fail"), g.verdict()
    assert np.array_equal(g.feed["x"], feed["x"])
