"""diff --vs-torch: an exporter's copy of a parameter (a weight read twice, stored as it is and transposed; a
tied weight's second initializer) with values changed only where the example inputs do not read them passed
the forward diff (exit 0), while the same change in the parameter's own initializer failed it as
'other values' (QA). A copy identified as one parameter's (equal to it, in some layout, in all but a few
values; or a tied parameter's only other initializer of its shape) is now an other-values contradiction
naming the copy and the parameter, in diff_torch's ``other_values`` and in diff --grad's unmatched.
Oracle: the file's values against the module's parameter (numpy), and the inputs' ids. A weight the
exporter computes from a parameter (all its values differ) is not a changed copy: the diff still passes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

torch = pytest.importorskip("torch")

from onnxprobe import api  # noqa: E402
from onnxprobe.match.engine import OTHER_VALUES  # noqa: E402

IDS = [[0, 1, 2, 3, 4], [0, 1, 2, 3, 4]]  # rows 5..10 of the embedding are never read


class ReadTwice(torch.nn.Module):
    """w [d, v] read as it is by the head's MatMul, transposed by the embedding's Gather: both exporters store
    the transpose as a second initializer (legacy 'onnx::Gather_*', dynamo 't')."""

    def __init__(self, v=11, d=6, scale=1.0):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(d, v))
        self.fc = torch.nn.Linear(d, d)
        self.scale = scale

    def forward(self, ids):
        h = torch.nn.functional.embedding(ids, self.w.t() * self.scale if self.scale != 1.0 else self.w.t())
        return torch.tanh(self.fc(h)) @ self.w


class Tied(torch.nn.Module):
    """GPT-2's tie: the head's weight is the embedding's, stored as it is and transposed."""

    def __init__(self, v=11, d=6):
        super().__init__()
        self.emb = torch.nn.Embedding(v, d)
        self.fc = torch.nn.Linear(d, d)
        self.head = torch.nn.Linear(d, v, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids):
        return self.head(torch.tanh(self.fc(self.emb(ids))))


def _export(cls, path, dynamo: bool, **kw):
    if dynamo:
        pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
    torch.manual_seed(0)
    m, args = cls(**kw).eval(), (torch.tensor(IDS),)
    torch.onnx.export(m, args, str(path), dynamo=dynamo, input_names=["ids"], **({} if dynamo else {"opset_version": 17}))
    return m, args


def _edit(path, shape, at, delta) -> str:
    model = onnx.load(str(path))
    t = next(i for i in model.graph.initializer if tuple(i.dims) == shape)
    v = numpy_helper.to_array(t).copy()
    v[at] += delta
    t.CopyFrom(numpy_helper.from_array(v, t.name))
    onnx.save(model, str(path))
    return t.name


@pytest.mark.parametrize("dynamo", [False, True])
def test_a_copy_changed_in_a_row_the_inputs_never_read_fails_naming_it_and_its_parameter(tmp_path, dynamo):
    path = tmp_path / "twice.onnx"
    m, args = _export(ReadTwice, path, dynamo)
    assert api.diff_torch(path, (m, args), introduced=False).verdict()[0] == "pass"
    w = m.w.detach().numpy()
    copy = _edit(path, (11, 6), (9, 0), 0.5)  # row 9: no id reads it
    held = {i.name: numpy_helper.to_array(i) for i in onnx.load(str(path)).graph.initializer}
    assert copy != "w" and np.array_equal(held["w"], w) and (held[copy] != w.T).sum() == 1  # the copy alone changed
    res = api.diff_torch(path, (m, args), introduced=False)
    assert res.other_values == [f"{copy}[w]"], res.other_values
    verdict, why = res.verdict()
    assert verdict == "fail" and copy in why and "w" in why, why
    g = api.diff_grad_torch(path, (m, args), spec=api.GradSpec(loss="sum"))
    bad = {u.obs.name: u.reason for u in g.matching.unmatched_a if u.cause == OTHER_VALUES}
    assert list(bad) == [f"{copy}_grad"] and "w" in bad[f"{copy}_grad"], bad
    verdict, why = g.verdict()
    assert verdict == "fail" and copy in why, why


@pytest.mark.parametrize("dynamo", [False, True])
def test_a_tied_weights_transposed_copy_changed_a_little_fails_under_a_loose_criterion(tmp_path, dynamo):
    path = tmp_path / "tied.onnx"
    m, args = _export(Tied, path, dynamo)
    copy = _edit(path, (6, 11), (0, 9), 1e-4)
    loose = api.Tolerance(rtol=1e-2, atol=1e-3)  # the outputs agree under it
    res = api.diff_torch(path, (m, args), introduced=False, tolerance=loose)
    assert not res.outputs_failed
    assert res.other_values == [f"{copy}[emb.weight]"], res.other_values
    assert res.verdict()[0] == "fail", res.verdict()


@pytest.mark.parametrize("dynamo", [False, True])
def test_a_weight_computed_from_a_parameter_is_no_changed_copy(tmp_path, dynamo):
    """w.t() * 3 folded into a constant by the exporter: every value differs from the parameter's, no copy."""
    path = tmp_path / "scaled.onnx"
    m, args = _export(ReadTwice, path, dynamo, scale=3.0)
    res = api.diff_torch(path, (m, args), introduced=False)
    assert res.other_values == [] and res.verdict()[0] == "pass", res.verdict()


class ReadTwiceThrough(ReadTwice):
    """The embedding reads a function of w the module computes itself (a few values masked or clamped),
    which the exporter may fold into a constant: it differs from w in a few values, as an edited copy would."""

    def __init__(self, how="mask"):
        super().__init__()
        self.how = how
        with torch.no_grad():
            self.w[0, 0], self.w[1, 1] = 5.0, -5.0  # past the clamp's bounds, the rest of N(0, 1) within them (seed 0)

    def forward(self, ids):
        if self.how == "mask":
            keep = torch.ones_like(self.w)
            keep[0, :2] = 0.0
            table = (self.w * keep).t()
        else:
            table = self.w.clamp(-4.5, 4.5).t()
        h = torch.nn.functional.embedding(ids, table)
        return torch.tanh(self.fc(h)) @ self.w


@pytest.mark.parametrize("how", ["mask", "clamp"])
@pytest.mark.parametrize("dynamo", [False, True])
def test_a_masked_or_clamped_parameter_the_module_computes_is_no_changed_copy(tmp_path, dynamo, how):
    """w * mask or w.clamp(lo, hi) folded into a constant differs from w in a few values only: it is the module's
    own function of w (the differing values are zeros, or at the copy's bound where w is past it), no edit."""
    path = tmp_path / f"{how}.onnx"
    m, args = _export(ReadTwiceThrough, path, dynamo, how=how)
    w = m.w.detach().numpy()
    held = [numpy_helper.to_array(i) for i in onnx.load(str(path)).graph.initializer]
    folded = [v for v in held if v.shape == (11, 6) and 1 <= (v != w.T).sum() <= 6]
    res = api.diff_torch(path, (m, args), introduced=False)
    assert res.other_values == [] and res.verdict()[0] == "pass", (res.other_values, res.verdict(), len(folded))


class Tokens(torch.nn.Module):
    """A Linear on a 3-D input: both exporters store its weight only transposed (legacy 'onnx::MatMul_*', dynamo
    'val_*'), the one initializer that holds the parameter."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 8)

    def forward(self, x):
        return torch.tanh(self.fc(x))


@pytest.mark.parametrize("dynamo", [False, True])
def test_a_parameters_only_initializer_transposed_and_changed_in_one_value_fails_naming_it(tmp_path, dynamo):
    """QA: the copy, of the parameter's shape transposed and its only holder, was refused as 'other values' in
    words but never failed the verdict, so a change within the criterion passed (the same change in an
    initializer named 'fc.weight' fails): it is a changed copy like any other."""
    if dynamo:
        pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
    path = tmp_path / "tokens.onnx"
    torch.manual_seed(0)
    m, args = Tokens().eval(), (torch.randn(2, 5, 6),)
    torch.onnx.export(m, args, str(path), dynamo=dynamo, input_names=["x"], **({} if dynamo else {"opset_version": 17}))
    assert api.diff_torch(path, (m, args), introduced=False).verdict()[0] == "pass"
    w = m.fc.weight.detach().numpy()
    copy = _edit(path, (6, 8), (2, 3), 1e-6)
    held = numpy_helper.to_array(next(i for i in onnx.load(str(path)).graph.initializer if i.name == copy))
    assert (held != w.T).sum() == 1  # the oracle: numpy, one value of the transposed parameter changed
    res = api.diff_torch(path, (m, args), introduced=False)
    assert not res.outputs_failed  # the activations alone cannot tell
    assert res.other_values == [f"{copy}[fc.weight]"], res.other_values
    verdict, why = res.verdict()
    assert verdict == "fail" and copy in why, why
    g = api.diff_grad_torch(path, (m, args), spec=api.GradSpec(loss="sum"))
    bad = {u.obs.name: u.reason for u in g.matching.unmatched_a if u.cause == OTHER_VALUES}
    assert list(bad) == [f"{copy}_grad"] and "fc.weight" in bad[f"{copy}_grad"], bad
    assert g.verdict()[0] == "fail", g.verdict()


def test_grad_names_a_changed_copy_as_the_forward_diff_does(tmp_path):
    """QA: diff --grad --vs-torch's verdict named a changed copy bare ('onnx::Gather_12'), where the forward
    diff says COPY[PARAM]: both now name it the same way, in the verdict and in other_values."""
    path = tmp_path / "twice.onnx"
    m, args = _export(ReadTwice, path, False)
    copy = _edit(path, (11, 6), (9, 0), 0.5)
    said = f"{copy}[w]"
    res = api.diff_torch(path, (m, args), introduced=False)
    assert res.other_values == [said] and said in res.verdict()[1], res.verdict()
    g = api.diff_grad_torch(path, (m, args), spec=api.GradSpec(loss="sum"))
    assert g.other_values == [said], g.other_values
    verdict, why = g.verdict()
    assert verdict == "fail" and said in why, why


class ConvBN(torch.nn.Module):
    """A Conv and the eval-mode BatchNorm after it, which the legacy exporter folds into one Conv weight of its own
    name ('onnx::Conv_*'); dynamo keeps the Conv's name."""

    def __init__(self):
        super().__init__()
        self.block = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1, bias=False), torch.nn.BatchNorm2d(4), torch.nn.ReLU())

    def forward(self, x):
        return self.block(x).mean((2, 3))


@pytest.mark.parametrize("dynamo", [False, True], ids=["legacy", "dynamo"])
def test_a_folded_weight_whose_parameter_changed_fails_the_forward_diff_as_grad_does(tmp_path, dynamo):
    """The module's Conv weight changed in one output channel after the export: diff --grad named the folded copy
    ('onnx::Conv_35[block.0.weight]') as other values, the forward diff said weights_passed true (QA). Oracle: the
    fold W * gamma / sqrt(var + eps) of the module's weight, against the file's initializer, in numpy."""
    torch.manual_seed(0)
    m = ConvBN().eval()
    with torch.no_grad():
        bn = m.block[1]
        bn.running_mean.copy_(torch.randn(4) * 0.3)
        bn.running_var.copy_(torch.rand(4) + 0.5)
        bn.weight.copy_(1 + 0.2 * torch.randn(4))
    x = torch.randn(2, 3, 8, 8)
    p = tmp_path / "m.onnx"
    torch.onnx.export(m, (x,), str(p), input_names=["x"], dynamo=dynamo)
    assert api.diff_torch(str(p), m, example_args=(x,)).other_values == []  # as exported: no weight differs
    with torch.no_grad():
        m.block[0].weight[2] *= 1.2
    inits = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(p), load_external_data=True).graph.initializer}
    w = m.block[0].weight.detach().numpy().astype(np.float64)
    fold = w * (bn.weight.detach().numpy() / np.sqrt(bn.running_var.numpy() + bn.eps)).reshape(-1, 1, 1, 1)
    changed = [n for n, v in inits.items() if v.shape == w.shape and not np.allclose(v, fold, rtol=1e-4, atol=1e-6)]
    assert changed, "the oracle: an initializer of the Conv's shape is no longer the fold of the module's weight"
    res = api.diff_torch(str(p), m, example_args=(x,))
    assert res.other_values and any("block.0.weight" in n or n in changed for n in res.other_values), res.other_values
    assert res.verdict()[0] == "fail"
