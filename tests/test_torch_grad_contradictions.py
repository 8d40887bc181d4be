"""`diff --grad --vs-torch` on a model that is not the module's export as it is now: a weight named as a
torch parameter but holding other values that no BatchNorm fold explains (decided per weight, by value),
or a forward pass whose loss differs, fails the verdict with the weight named; never 'weight gradients
pass' on the gradients of the weights that still agree."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

torch = pytest.importorskip("torch")

import torch_models as tm  # noqa: E402  (needs torch)
from test_torch_reference import exports  # noqa: E402,F401,F811  (its module-scoped fixture of exports)

from onnxprobe import api  # noqa: E402

FILE = Path(__file__).with_name("torch_models.py")


def _changed(path: Path, out: Path, name: str, change) -> Path:
    m = onnx.load(str(path))
    (t,) = [t for t in m.graph.initializer if t.name == name]
    t.CopyFrom(numpy_helper.from_array(change(numpy_helper.to_array(t).copy()), name))
    onnx.save(m, str(out))
    return out


def _bump_first_row(v: np.ndarray) -> np.ndarray:
    v[0] = v[0] * 1.2 + 0.5
    return v


@pytest.mark.parametrize("kind", ["legacy", "dynamo"])
def test_a_changed_bias_in_a_module_with_batchnorms_elsewhere_fails_naming_it(exports, tmp_path, kind):
    """cnn's fc.bias +0.5 in the ONNX file: no BatchNorm follows fc (the module's BatchNorms follow its
    Convs), so the bias contradicts the module; every gradient still agrees (fc is last, the loss a sum),
    which read 'weight gradients pass' with the bias left out as 'folded'."""
    broken = _changed(exports("cnn", kind), tmp_path / "broken.onnx", "fc.bias", lambda v: v + 0.5)
    res = api.diff_grad_torch(broken, f"{FILE}:cnn")
    verdict, why = res.verdict()
    assert verdict == "fail" and "fc.bias" in why, (verdict, why)
    (u,) = [u for u in res.matching.unmatched_a if u.obs.name == "fc.bias_grad"]
    assert u.cause == "other-values" and "folded" not in u.reason and "not an export" in u.reason, u.reason
    assert all(r.passed for r in res.results if r.metrics is not None)  # the gradients alone would pass


def test_a_changed_weight_with_a_batchnorm_folded_into_it_fails_and_clean_folds_pass(exports, tmp_path):
    """dynamo folds each BatchNorm into the Conv before it under the Conv weight's own name: a clean export's
    folded weights are listed as folds (checked by value: weight * gamma / sqrt(var + eps)) and pass; the
    same weight with one output channel changed is no fold of any BatchNorm and fails."""
    path = exports("cnn", "dynamo")
    clean = api.diff_grad_torch(path, f"{FILE}:cnn")
    assert clean.verdict()[0] == "pass", clean.verdict()
    folded = {u.obs.name: u for u in clean.matching.unmatched_a if u.obs.name == "features.0.conv.weight_grad"}
    assert folded and "folded a BatchNormalization" in folded["features.0.conv.weight_grad"].reason

    module, _ = tm.build("cnn")
    conv, bn = module.features[0].conv, module.features[0].bn
    scale = (bn.weight / torch.sqrt(bn.running_var + bn.eps)).detach().double().numpy()
    onnx_w = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer}["features.0.conv.weight"]
    # the oracle of the fold (float64): the ONNX weight is the Conv's scaled by its BatchNorm, per channel
    np.testing.assert_allclose(onnx_w, conv.weight.detach().double().numpy() * scale[:, None, None, None], rtol=1e-5, atol=1e-7)

    broken = _changed(path, tmp_path / "broken.onnx", "features.0.conv.weight", _bump_first_row)
    verdict, why = api.diff_grad_torch(broken, f"{FILE}:cnn").verdict()
    assert verdict == "fail" and "features.0.conv.weight" in why, (verdict, why)


@pytest.mark.parametrize("kind", ["legacy", "dynamo"])
def test_a_conv_weight_a_batchnorm_folded_into_is_folded_in_both_exports(exports, kind):
    """The same fold, the same cause: legacy writes cnn's Conv weight with its BatchNorm folded in under a name
    of its own (onnx::Conv_*), dynamo under the Conv weight's name; both are what the exporter derived (cause
    'folded', as the README says), not 'different-function' for one exporter and 'folded' for the other."""
    res = api.diff_grad_torch(exports("cnn", kind), f"{FILE}:cnn")
    assert res.verdict()[0] == "pass", res.verdict()
    module, _ = tm.build("cnn")
    conv, bn = module.features[0].conv, module.features[0].bn
    scale = (bn.weight / torch.sqrt(bn.running_var + bn.eps)).detach().double().numpy()
    want = conv.weight.detach().double().numpy() * scale[:, None, None, None]  # the oracle of the fold (float64)
    inits = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(exports("cnn", kind))).graph.initializer}
    (held,) = [n for n, v in inits.items() if v.shape == want.shape and np.allclose(v, want, rtol=1e-5, atol=1e-7)]
    (u,) = [u for u in res.matching.unmatched_a if u.obs.name == held + "_grad"]
    assert u.cause == "folded", (held, u.cause, u.reason)


def test_losses_that_differ_never_pass(exports):
    """tanhmlp's export against the module whose forward adds 0.001 after fc3: every weight and every
    gradient agree (the constant changes no gradient), but the losses differ: the forward passes disagree,
    so the verdict fails, saying so."""
    res = api.diff_grad_torch(exports("tanhmlp", "legacy"), f"{FILE}:tanhmlp_shifted")
    module, (x,) = tm.build("tanhmlp")
    with torch.no_grad():
        want = float((module(x).double() + 0.001).sum())  # the oracle: torch's loss, in float64
    assert res.grad["loss_b"] == pytest.approx(want, rel=1e-6)
    assert abs(res.grad["loss_a"] - want) == pytest.approx(0.001 * x.shape[0] * 3, rel=1e-3)
    assert all(r.passed for r in res.results if r.metrics is not None)
    verdict, why = res.verdict()
    assert verdict == "fail" and "the losses differ" in why, (verdict, why)


def test_a_weight_of_other_values_marks_no_backward_step_where_the_losses_barely_move(exports, tmp_path):
    """One Conv output channel 0.1 % off: the losses differ by less than their rounding allows (no 'losses differ'
    note), yet the forward passes disagree, which the weight's other values say: a gradient after it (the fc's) was
    marked as where the error starts, a backward step that is right. None is marked; a note says why."""
    def nudge(v: np.ndarray) -> np.ndarray:
        v[0] = v[0] * 1.001
        return v

    broken = _changed(exports("cnn", "dynamo"), tmp_path / "broken.onnx", "features.0.conv.weight", nudge)
    res = api.diff_grad_torch(broken, f"{FILE}:cnn")
    assert not res.grad["forward_differs"] and res.grad["weights_differ"], res.grad  # the losses within rounding
    assert res.verdict()[0] == "fail" and any(r.passed is False for r in res.results), res.verdict()
    assert res.first_failure is None
    assert any("weights hold other values than the torch parameters" in n and "features.0.conv.weight" in n for n in res.notes), res.notes
