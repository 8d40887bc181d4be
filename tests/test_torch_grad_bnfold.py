"""`diff --grad --vs-torch` of a Conv-BN-ReLU net: both exporters fold each eval-mode BatchNorm into the Conv
before it, so no initializer holds the Conv's weight and bias or the BatchNorm's gamma and beta. Their
gradients are computed from the folded weight's and bias's (onnxprobe's backward graph) by the chain rule
and compared with torch autograd's; a folded weight or bias changed in one value fails, naming the parameter.

Oracle: torch autograd on the module in float64 (random running statistics, eval mode), the same sum loss.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

torch = pytest.importorskip("torch")
nn = torch.nn

from conftest import torch_grads64  # noqa: E402
from onnxprobe import api  # noqa: E402
from onnxprobe.torch.export import export  # noqa: E402

FOLDED = {"conv1.weight", "bn1.weight", "bn1.bias", "conv2.weight", "conv2.bias", "bn2.weight", "bn2.bias"}


class ConvBNNet(nn.Module):
    """Conv (no bias) - BN - ReLU, Conv (with a bias) - BN - ReLU, Linear."""

    def __init__(self, batchnorm: bool = True):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(3, 4, 3, bias=False), nn.Conv2d(4, 5, 3)
        self.bn1 = nn.BatchNorm2d(4) if batchnorm else nn.Identity()
        self.bn2 = nn.BatchNorm2d(5) if batchnorm else nn.Identity()
        self.fc = nn.Linear(5 * 4 * 4, 3)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.conv2(x)))
        return self.fc(x.flatten(1))


def _random_statistics(*bns) -> None:
    """Running statistics and affine parameters no fresh BatchNorm has (a fold of ones and zeros proves little)."""
    with torch.no_grad():
        for bn in bns:
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.5, 0.5)


def _build(batchnorm: bool = True):
    torch.manual_seed(0)
    m = ConvBNNet(batchnorm)
    if batchnorm:
        _random_statistics(m.bn1, m.bn2)
    return m.eval(), torch.randn(2, 3, 8, 8)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    d, cache = tmp_path_factory.mktemp("bnfold"), {}

    def get(kind: str, batchnorm: bool = True):
        if (kind, batchnorm) not in cache:
            m, x = _build(batchnorm)
            cache[kind, batchnorm] = export(m, (x,), d / f"{kind}_{batchnorm}.onnx", dynamo=kind == "dynamo")
        return cache[kind, batchnorm]

    return get


def _torch64_grads(batchnorm: bool = True) -> dict[str, np.ndarray]:
    """torch autograd in float64: d(sum of the output)/d each parameter, eval mode."""
    m, x = _build(batchnorm)
    m = m.double()
    m.zero_grad()
    m(x.double()).sum().backward()
    return {n: p.grad.numpy() for n, p in m.named_parameters()}


def _folded_inits(path) -> list[tuple[str, str]]:
    """(weight, bias) initializers of each Conv, in order."""
    model = onnx.load(str(path))
    return [(n.input[1], n.input[2]) for n in model.graph.node if n.op_type == "Conv"]


@pytest.mark.parametrize("kind", ["legacy", "dynamo"])
def test_every_folded_parameter_is_compared_by_the_chain_rule(exported, kind):
    m, x = _build()
    res = api.diff_grad_torch(exported(kind), m, example_args=(x,))
    assert res.verdict()[0] == "pass", res.verdict()
    by_param = {r.pair.b.name: r for r in res.results if r.pair.b.op_type == "parameter"}
    assert FOLDED | {"fc.weight", "fc.bias"} == set(by_param), sorted(by_param)
    assert not [u.obs.name for u in res.matching.unmatched_b], [(u.obs.name, u.reason) for u in res.matching.unmatched_b]
    want = _torch64_grads()
    for p in FOLDED:
        r, g = by_param[p], want[p]
        scale = float(np.abs(g).max())
        assert scale > 1e-3, p  # a gradient worth comparing
        # B is torch's float32 gradient: its largest value is float64 autograd's
        assert r.metrics.b_absmax == pytest.approx(scale, rel=1e-5), p
        # A (the chain rule on the folded weights' ONNX gradients) agrees with it
        assert r.metrics.max_abs <= 1e-5 * scale + 1e-7, (p, r.metrics.max_abs, scale)
        assert r.passed, p
    # the folded weights' own gradients: not compared themselves, with the reason
    folded = {u.obs.name: u for u in res.matching.unmatched_a if u.cause == "folded"}
    for w, b in _folded_inits(exported(kind)):
        assert "chain rule" in folded[w + "_grad"].reason and "chain rule" in folded[b + "_grad"].reason
    (note,) = [n for n in res.notes if n.startswith("BatchNorm folds")]
    assert "7 parameters" in note and "conv1.weight" in note


def _one_value_changed(path, name: str, folder):
    """A copy of the export at ``path`` whose initializer ``name`` has one value moved by 0.25."""
    model = onnx.load(str(path))
    (t,) = [t for t in model.graph.initializer if t.name == name]
    v = numpy_helper.to_array(t).copy()
    v.flat[1] += 0.25
    t.CopyFrom(numpy_helper.from_array(v, name))
    broken = folder / "broken.onnx"
    onnx.save(model, str(broken))
    return broken


@pytest.mark.parametrize("kind", ["legacy", "dynamo"])
@pytest.mark.parametrize("what,param", [("weight", "conv1.weight"), ("bias", "bn1.bias")])
def test_a_folded_tensor_changed_in_one_value_fails_naming_the_parameter(exported, tmp_path, kind, what, param):
    """conv1 has no bias of its own: its folded bias is bn1's shift, so a change of it names bn1.bias."""
    path = exported(kind)
    broken = _one_value_changed(path, _folded_inits(path)[0][0 if what == "weight" else 1], tmp_path)
    m, x = _build()
    verdict, why = api.diff_grad_torch(broken, m, example_args=(x,)).verdict()
    assert verdict == "fail" and param in why, (verdict, why)


@pytest.mark.parametrize("kind", ["legacy", "dynamo"])
def test_a_fold_changed_in_every_value_fails_naming_the_parameter(exported, tmp_path, kind):
    """A folded weight scaled by 1.01 (the module trained on after the export) agreed with no fold at float32's
    rounding: the legacy export raised 'internal error: IndexError' in diff and diff --grad alike. It is that
    parameter's fold, changed: both fail naming it."""
    path = exported(kind)
    weight = _folded_inits(path)[0][0]
    model = onnx.load(str(path))
    (t,) = [t for t in model.graph.initializer if t.name == weight]
    t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t) * np.float32(1.01), weight))
    broken = tmp_path / "scaled.onnx"
    onnx.save(model, str(broken))
    m, x = _build()
    for res in (api.diff_torch(broken, m, example_args=(x,)), api.diff_grad_torch(broken, m, example_args=(x,))):
        verdict, why = res.verdict()
        assert verdict == "fail" and "conv1.weight" in why, (verdict, why)


@pytest.mark.parametrize("conv", [0, 1])
def test_a_changed_fold_under_the_parameters_own_name_is_said_as_one(exported, tmp_path, conv):
    """Dynamo keeps a folded weight under the parameter's name: one value of it changed was said to hold 'other
    values ... and no BatchNorm of the module folds into it', where a BatchNorm does (legacy said it right: the
    exporter's fold of it, changed). The verdict failed either way; the reason now says what the weight is."""
    path = exported("dynamo")
    weight = _folded_inits(path)[conv][0]
    broken = _one_value_changed(path, weight, tmp_path)
    m, x = _build()
    res = api.diff_grad_torch(broken, m, example_args=(x,))
    (u,) = [u for u in res.matching.unmatched_a if u.obs.name == weight + "_grad"]
    n = int(np.prod(dict(m.named_parameters())[f"conv{conv + 1}.weight"].shape))
    assert f"with a BatchNorm of the module folded in but for 1 of its {n} values" in u.reason, u.reason
    assert res.verdict()[0] == "fail"


def test_a_net_without_batchnorm_is_unchanged(exported):
    m, x = _build(batchnorm=False)
    res = api.diff_grad_torch(exported("legacy", batchnorm=False), m, example_args=(x,))
    assert res.verdict()[0] == "pass", res.verdict()
    assert not [n for n in res.notes if n.startswith("BatchNorm folds")]
    want = _torch64_grads(batchnorm=False)
    by_param = {r.pair.b.name: r for r in res.results if r.pair.b.op_type == "parameter"}
    assert set(by_param) == set(want)
    for p, r in by_param.items():  # paired as the initializers they are, not through a fold
        assert r.pair.a.name == p + "_grad" and r.metrics.max_abs <= 1e-5 * float(np.abs(want[p]).max()) + 1e-7, p


def test_a_pruned_conv_weight_is_still_unfolded(tmp_path):
    """conv1's weight mostly zeros (pruned): zeros agree with any BatchNorm's scale, so the fold is judged on the
    other values alone; it is still found and compared."""
    m, x = _build()
    with torch.no_grad():
        m.conv1.weight[torch.rand(m.conv1.weight.shape, generator=torch.Generator().manual_seed(1)) < 0.7] = 0
    path = export(m, (x,), tmp_path / "pruned.onnx", dynamo=False)
    res = api.diff_grad_torch(path, m, example_args=(x,))
    assert res.verdict()[0] == "pass", res.verdict()
    by_param = {r.pair.b.name: r for r in res.results if r.pair.b.op_type == "parameter"}
    assert FOLDED <= set(by_param), sorted(by_param)


# ConvTranspose and Linear: dynamo folds an eval-mode BatchNorm into the ConvTranspose before it (W' = W * s on
# the weight's second axis, per output channel of each group) and into a Linear's Gemm (W' = W * s per row, per
# output feature); legacy keeps the BatchNormalization (measured, torch 2.13). Neither folds into a MatMul.
FOLDED_T = {f"{m}.{w}" for m in ("ct1", "ct2", "fc1", "fc2", "bn1", "bn2", "bn3", "bn4") for w in ("weight", "bias")} \
    - {"ct2.bias", "fc2.bias"}


class TransposeLinearBNNet(nn.Module):
    """ConvTranspose (groups=2, a bias) - BN - ReLU, ConvTranspose (no bias) - BN - ReLU, Linear (a bias) - BN1d - ReLU,
    Linear (no bias) - BN1d - ReLU, Linear."""

    def __init__(self):
        super().__init__()
        self.ct1, self.ct2 = nn.ConvTranspose2d(4, 6, 3, groups=2), nn.ConvTranspose2d(6, 3, 2, bias=False)
        self.bn1, self.bn2 = nn.BatchNorm2d(6), nn.BatchNorm2d(3)
        self.fc1, self.fc2, self.head = nn.Linear(3 * 7 * 7, 8), nn.Linear(8, 6, bias=False), nn.Linear(6, 2)
        self.bn3, self.bn4 = nn.BatchNorm1d(8), nn.BatchNorm1d(6)

    def forward(self, x):
        x = torch.relu(self.bn2(self.ct2(torch.relu(self.bn1(self.ct1(x))))))
        x = torch.relu(self.bn3(self.fc1(x.flatten(1))))
        return self.head(torch.relu(self.bn4(self.fc2(x))))


def _build_t():
    torch.manual_seed(0)
    m = TransposeLinearBNNet()
    _random_statistics(m.bn1, m.bn2, m.bn3, m.bn4)
    return m.eval(), torch.randn(3, 4, 4, 4)


@pytest.fixture(scope="module")
def exported_t(tmp_path_factory):
    d, cache = tmp_path_factory.mktemp("bnfold_t"), {}

    def get(kind: str):
        if kind not in cache:
            m, x = _build_t()
            cache[kind] = export(m, (x,), d / f"{kind}.onnx", dynamo=kind == "dynamo")
        return cache[kind]

    return get


def _fused(path) -> list[tuple[str, str]]:
    """(weight, bias) initializers of each ConvTranspose and Gemm a BatchNorm was folded into (none left)."""
    model = onnx.load(str(path))
    if any(n.op_type == "BatchNormalization" for n in model.graph.node):
        return []
    return [(n.input[1], n.input[2]) for n in model.graph.node if n.op_type in ("ConvTranspose", "Gemm")][:4]


@pytest.mark.parametrize("kind", ["legacy", "dynamo"])
def test_convtranspose_and_linear_folds_are_compared_by_the_chain_rule(exported_t, kind):
    m, x = _build_t()
    path = exported_t(kind)
    assert bool(_fused(path)) == (kind == "dynamo")  # what each exporter does (legacy keeps the BatchNorms)
    res = api.diff_grad_torch(path, m, example_args=(x,))
    assert res.verdict()[0] == "pass", res.verdict()
    by_param = {r.pair.b.name: r for r in res.results if r.pair.b.op_type == "parameter"}
    assert FOLDED_T | {"head.weight", "head.bias"} == set(by_param), sorted(by_param)
    assert not [u.obs.name for u in res.matching.unmatched_b], [(u.obs.name, u.reason) for u in res.matching.unmatched_b]
    m64 = m.double()
    m64.zero_grad()
    m64(x.double()).sum().backward()
    want = {n: p.grad.numpy() for n, p in m64.named_parameters()}
    for p in FOLDED_T:
        r, g = by_param[p], want[p]
        scale = float(np.abs(g).max())
        assert scale > 1e-3, p
        assert r.metrics.b_absmax == pytest.approx(scale, rel=1e-5), p
        assert r.metrics.max_abs <= 1e-5 * scale + 1e-7, (p, r.metrics.max_abs, scale)
        assert r.passed, p
    notes = [n for n in res.notes if n.startswith("BatchNorm folds")]
    if kind == "dynamo":
        folded = {u.obs.name: u for u in res.matching.unmatched_a if u.cause == "folded"}
        for w, b in _fused(path):
            assert "chain rule" in folded[w + "_grad"].reason and "chain rule" in folded[b + "_grad"].reason
        assert len(notes) == 1 and "14 parameters" in notes[0], notes
    else:
        assert not notes


@pytest.mark.parametrize("which,what,param", [(0, 0, "ct1.weight"), (1, 1, "bn2.bias"), (2, 0, "fc1.weight"),
                                              (3, 1, "bn4.bias")])
def test_a_changed_convtranspose_or_gemm_fold_fails_naming_the_parameter(exported_t, tmp_path, which, what, param):
    """ct2 and fc2 have no bias of their own: their folded bias is the BatchNorm's shift (named by its bias)."""
    path = exported_t("dynamo")
    broken = _one_value_changed(path, _fused(path)[which][what], tmp_path)
    m, x = _build_t()
    verdict, why = api.diff_grad_torch(broken, m, example_args=(x,)).verdict()
    assert verdict == "fail" and param in why, (verdict, why)


class FreshTwins(nn.Module):
    """Two Conv-BN-ReLU stages of the same width whose BatchNorms are fresh (the README's worked example): their
    statistics are the same, so a folded weight's values fit either BatchNorm."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.block = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(self.block(self.stem(x)).mean((2, 3)))


@pytest.mark.parametrize("kind", ["legacy", "dynamo"])
def test_batchnorms_of_the_same_statistics_are_each_the_one_after_its_layer(tmp_path, kind):
    """Every fold was skipped as a tie between the two BatchNorms: 8 of 10 parameters uncompared, and the verdict
    'weight gradients pass' of the head alone. The tie goes to the BatchNorm registered after the layer's module,
    and each parameter's chain-rule gradient agrees with torch autograd (float64) of its own."""
    torch.manual_seed(0)
    m, x = FreshTwins().eval(), torch.randn(1, 3, 8, 8)
    path = export(m, (x,), tmp_path / f"{kind}.onnx", dynamo=kind == "dynamo")
    res = api.diff_grad_torch(path, m, example_args=(x,))
    by_param = {r.pair.b.name: r for r in res.results if r.pair.b.op_type == "parameter"}
    assert set(by_param) == {n for n, _ in m.named_parameters()}, sorted(by_param)
    assert res.verdict()[0] == "pass", res.verdict()
    for name, g in torch_grads64(FreshTwins, m, (x,)).items():
        r = by_param[name]
        assert r.metrics.max_abs <= 1e-5 * float(np.abs(g).max()) + 1e-7, (name, r.metrics.max_abs)
        assert r.metrics.b_absmax == pytest.approx(float(np.abs(g).max()), rel=1e-4, abs=1e-9), name


class TwoBlocks(nn.Module):
    """Two fresh Conv(bias=False) + BatchNorm + ReLU blocks: every folded bias is zeros, which the legacy exporter
    keeps as one initializer that the second Conv reads through an Identity."""

    def __init__(self):
        super().__init__()
        self.a = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.b = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        return self.head(self.b(self.a(x)).mean((2, 3)))


@pytest.mark.parametrize("kind, said", [
    # legacy keeps one initializer of zeros that the second Conv reads through an Identity: its gradient (the sum over
    # both Convs) was compared with a.1.bias's alone and FAILed a faithful export, the second fold not found
    ("legacy", "one initializer that 2 folded layers read"),
    # dynamo drops the bias from both Convs (two inputs): no fold was found, and 'weight gradients pass' compared the
    # head alone, every Conv weight and BatchNorm parameter uncompared
    ("dynamo", "a bias of zeros, which the exporter dropped"),
])
def test_folds_of_fresh_blocks_whose_zero_bias_is_shared_or_dropped(tmp_path, kind, said):
    """Fresh Conv(bias=False) + BatchNorm blocks fold to a bias of zeros. Both folds are found now: the weights and
    gammas compare by the chain rule (b - mean is 0), the BatchNorm biases, whose own gradient no tensor holds, are
    said. Oracle: torch autograd in float64."""
    torch.manual_seed(0)
    m, x = TwoBlocks().eval(), torch.randn(2, 3, 8, 8)
    path = export(m, (x,), tmp_path / f"{kind}.onnx", dynamo=kind == "dynamo")
    g = onnx.load(str(path)).graph
    if kind == "legacy":
        assert any(n.op_type == "Identity" for n in g.node)  # the merged bias, read through an Identity
    else:
        assert all(len(n.input) == 2 for n in g.node if n.op_type == "Conv")  # the bias dropped
    res = api.diff_grad_torch(path, m, example_args=(x,))
    assert res.verdict()[0] == "pass", res.verdict()
    want = torch_grads64(TwoBlocks, m, (x,))
    got = {r.pair.b.name: r for r in res.results if r.pair.b.op_type == "parameter"}
    for p in ("a.0.weight", "a.1.weight", "b.0.weight", "b.1.weight", "head.weight"):
        assert p in got, sorted(got)
        assert got[p].metrics.max_abs <= 1e-5 * float(np.abs(want[p]).max()) + 1e-7, p
    unused = {u.obs.name: u.reason for u in res.matching.unmatched_b}
    for p in ("a.1.bias", "b.1.bias"):
        assert said in unused[p], unused
