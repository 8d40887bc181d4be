"""grad --check earns its verdicts: a gradient is FAILed only where finite differences resolve the loss's
slope (halving the step leaves the difference quotient as it is); where the loss is not linear over any
step tried (a Softmax of logits ~1e12: a step function at every step) the gradient is 'cannot check',
not FAIL. Oracles: the gradients derived by hand in float64."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.autodiff.check import CheckItem, check_gradients
from onnxprobe.cli.main import app

runner = CliRunner()
RNG = np.random.default_rng(11)
DY = RNG.standard_normal(6)


def _softmax(z):
    e = np.exp(z - z.max())
    return e / e.sum()


def _softmax_loss(t):
    """L(t + delta) = <dy, softmax(t + delta)>, and its true gradient at t (float64)."""
    p = _softmax(t)
    return (lambda name, delta: float(DY @ _softmax(t + delta))), p * (DY - p @ DY)


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_a_right_gradient_the_loss_is_too_curved_to_check_is_not_failed(precision):
    """Logits ~1e12, near-tied: the steps (1e-6 .. 1e-3 of the RMS, and smaller) are >= 1e3, over which the
    Softmax jumps; the gradient (the true one) is 'cannot check', with the reason."""
    t = 1e12 + RNG.standard_normal(6)
    loss, g = _softmax_loss(t)
    res = check_gradients([CheckItem("z", g, t, float(np.sqrt(np.mean(t * t))))], loss, precision)["z"]
    assert res["ok"] is None and "not linear" in res["unresolved"], res


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_a_wrong_gradient_of_a_smooth_loss_still_fails(precision):
    """Logits ~1: the same loss is smooth over the steps, so a gradient 1.5x too large is a FAIL (ok False,
    not 'cannot check'), and the true one passes. The loss is shifted to 0 at t: float32's noise floor
    (50 eps |L| / h) would otherwise count the smallest steps' differences as 0 and pass anything."""
    t = RNG.standard_normal(6)
    loss0, g = _softmax_loss(t)
    base = loss0("z", np.zeros(6))
    loss = (lambda name, delta: loss0(name, delta) - base)
    item = (lambda grad: CheckItem("z", grad, t, float(np.sqrt(np.mean(t * t)))))
    assert check_gradients([item(g)], loss, precision)["z"]["ok"] is True
    assert check_gradients([item(1.5 * g)], loss, precision)["z"]["ok"] is False


def test_a_loss_that_does_not_move_fails_a_nonzero_gradient():
    """A flat loss resolves to a slope of 0 at every step: a nonzero gradient there is a FAIL (a rule that
    invents a gradient), not 'cannot check'."""
    t = RNG.standard_normal(6)
    res = check_gradients([CheckItem("z", np.ones(6), t, 1.0)], lambda name, delta: 3.0, "float64")["z"]
    assert res["ok"] is False and "unresolved" not in res and res["flat"]


def test_cli_says_cannot_check_instead_of_fail(tmp_path):
    """grad --check on Softmax(x + 1e12) with --output-grad: the gradient of the logits is the float32
    model's (all logits round to 1e12: p uniform, dL/dz = (dy - mean dy) / 6, the oracle), and the check
    says it cannot be checked (exit 1: nothing was checked), not that it failed."""
    big = numpy_helper.from_array(np.full((1, 6), 1e12, np.float32), "big")
    m = make_model([helper.make_node("Add", ["x", "big"], ["z"]), helper.make_node("Softmax", ["z"], ["y"], axis=1)],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6])], [big])
    onnx.save(m, tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", RNG.standard_normal((1, 6)).astype(np.float32))
    np.save(tmp_path / "dy.npy", DY.astype(np.float32)[None])
    r = runner.invoke(app, ["grad", str(tmp_path / "m.onnx"), "--input", f"x={tmp_path / 'x.npy'}", "--output-grad",
                            str(tmp_path / "dy.npy"), "--wrt", "z", "--check", "--device", "cpu", "--json",
                            str(tmp_path / "r.json"), "--save-grads", str(tmp_path / "g.npz")])
    assert r.exit_code == 1, r.output
    assert "failed the finite-difference check" not in r.stderr and "not resolvable: z" in r.stderr, r.stderr
    (row,) = json.loads((tmp_path / "r.json").read_text())["gradients"]
    assert row["check"]["ok"] is None and row["check"]["unresolved"]
    np.testing.assert_allclose(np.load(tmp_path / "g.npz")["z"].ravel(), (DY - DY.mean()) / 6, rtol=1e-5, atol=1e-7)


def _f32_loss(fn):
    """A loss evaluated in float32, as the float32 check runs the model: its rounding is float32's."""
    return lambda name, delta: float(fn(np.float32(1) * delta.astype(np.float32)))


def test_a_wrong_gradient_under_a_large_loss_is_not_passed_by_rounding():
    """L = 10 + <a, t + delta> in float32 and a gradient 8% off: at the step 1e-3 RMS the differences
    measure the slope and disagree; at the smallest steps the loss's rounding (50 eps |L| / h) swamps both
    sides, which once counted as agreement (QA: AveragePool + 10, fd 8.43 vs 7.83 read 'ok')."""
    a = RNG.standard_normal(36)
    t = RNG.standard_normal(36)
    loss = _f32_loss(lambda d: np.float32(10) + np.sum((a * (t + d)).astype(np.float32), dtype=np.float32))
    item = (lambda grad: CheckItem("t", grad, t, float(np.sqrt(np.mean(t * t)))))
    assert check_gradients([item(a)], loss, "float32")["t"]["ok"] is True
    assert check_gradients([item(1.08 * a)], loss, "float32")["t"]["ok"] is False


def test_a_loss_whose_rounding_swamps_every_step_is_cannot_check():
    """L = 1e9 + 1e-3 <a, t + delta> in float32: its change over every step tried is below its rounding, so
    no step says anything about the gradient, right or wrong: 'cannot check', never ok."""
    a = RNG.standard_normal(8)
    t = RNG.standard_normal(8)
    loss = _f32_loss(lambda d: np.float32(1e9) + np.float32(1e-3) * np.sum(a * (t + d), dtype=np.float32))
    for grad in (1e-3 * a, 2e-3 * a):
        res = check_gradients([CheckItem("t", grad, t, float(np.sqrt(np.mean(t * t))))], loss, "float32")["t"]
        assert res["ok"] is None and "rounding" in res["unresolved"], res


@pytest.mark.parametrize("scale", [1e-36, 1.0, 1e30])
def test_the_step_is_relative_to_the_tensor(scale):
    """L = sum(tanh(w x)) with w ~ scale, x ~ 1/scale (QA: Conv weights ~1e-36, inputs ~1e36): the step is
    1e-3 x RMS(w) as the README says, so the check passes the true gradient x (1 - tanh^2) at any scale
    (an absolute floor of 1e-4 on the step saturated tanh: 'cannot check')."""
    x = RNG.uniform(0.5, 1.5, 9) / scale
    w = RNG.uniform(-1.0, 1.0, 9) * scale
    loss = _f32_loss(lambda d: np.sum(np.tanh((w + d) * x).astype(np.float32), dtype=np.float32))
    g = x * (1 - np.tanh(w * x) ** 2)
    res = check_gradients([CheckItem("w", g, w, float(np.sqrt(np.mean(w * w))))], loss, "float32")["w"]
    assert res["ok"] is True, res


def test_a_tensor_of_zeros_still_gets_a_step():
    """RMS 0 has no scale: the step falls back to 1e-3 x 0.1, and the true gradient of sum(tanh(t + 1)) passes."""
    t = np.zeros(5)
    loss = _f32_loss(lambda d: np.sum(np.tanh((t + d + 1).astype(np.float32)), dtype=np.float32))
    res = check_gradients([CheckItem("t", 1 - np.tanh(t + 1) ** 2, t, 0.0)], loss, "float32")["t"]
    assert res["ok"] is True, res


def test_a_slope_under_the_rounding_of_cancelling_terms_is_not_failed_on_float32_rounding():
    """float32: a loss summed over terms that cancel rounds far above eps |L|, so a bias whose true slope is
    ~1e-7 measured 'fd -1e-7 against 1.6e-7' and FAILed (silero-vad). The floor the forward pass gives
    (``rounding``: eps x sqrt(sum (dL/dx * x)^2) over the terms x, dL/dx = 1, computed here from the terms themselves)
    makes it 'cannot check' with the reason, naming the terms; the big one is still checked and passes, a wrong big
    one still fails, and the tiny one's verdict is the same checked alone (it once depended on the selection)."""
    big_w = np.linspace(0.5, 1.5, 8)
    terms = np.float32(1e2) * np.array([1, -1] * 32, np.float32)  # cancel: |L| 0, its rounding not

    def loss(name, delta):
        d = np.asarray(delta, np.float64).reshape(-1)
        x = terms.copy()
        if name == "big":
            x[0] += np.float32(np.dot(big_w, d))
        else:  # the tiny tensor moves the loss by ~1e-7 per unit step: under the terms' rounding
            x[1] += np.float32(1e-7 * d.sum())
        return float(np.sum(x, dtype=np.float32))

    floor = float(np.finfo(np.float32).eps) * float(np.sqrt(np.sum(np.square(terms, dtype=np.float64))))
    rounding = {"big": (floor, "x"), "tiny": (floor, "x")}
    tiny = CheckItem("tiny", np.full(4, 3e-7), np.ones(4), 1.0)
    for wrong, want in ((1.0, True), (1.5, False)):
        out = check_gradients([CheckItem("big", big_w * wrong, np.ones(8), 1.0), tiny], loss, "float32", rounding=rounding)
        assert out["big"]["ok"] is want, out["big"]
        assert out["tiny"]["ok"] is None and out["tiny"].get("unresolved"), out["tiny"]
        assert out["tiny"]["rounded_by"] == "x" and "'x'" in out["tiny"]["unresolved"], out["tiny"]
    alone = check_gradients([tiny], loss, "float32", rounding=rounding)["tiny"]
    assert alone["ok"] is None and alone["rounded_by"] == "x", alone


def _cancelling_model(path) -> str:
    """y = Conv1x1(x * w + b * 1e-7) summed, x = +-100 alternating (the terms cancel: L ~ 0, its rounding
    eps x 6400), w = 1: dL/dw = x, dL/db = 1e-7 (silero-vad's bias gradients under sum(y * dy)). The 1x1 Conv has
    no double kernel: the check runs in float32."""
    inits = [numpy_helper.from_array(np.ones((1, 64), np.float32), "w"),
             numpy_helper.from_array(RNG.uniform(0.5, 1.5, (1, 64)).astype(np.float32), "b"),
             numpy_helper.from_array(np.array(1e-7, np.float32), "s"),
             numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32), "K"),
             numpy_helper.from_array(np.array([1, 1, 1, 64], np.int64), "shape")]
    nodes = [helper.make_node("Mul", ["x", "w"], ["xw"]), helper.make_node("Mul", ["b", "s"], ["bs"]),
             helper.make_node("Add", ["xw", "bs"], ["z"]), helper.make_node("Reshape", ["z", "shape"], ["r"]),
             helper.make_node("Conv", ["r", "K"], ["y"])]
    m = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 1, 64])], inits)
    onnx.save(m, path)
    return str(path)


X100 = np.float32(100) * np.array([[1, -1] * 32], np.float32)


@pytest.mark.parametrize("wrt", [("w", "b"), ("b",)])
def test_tiny_bias_gradients_under_cancelling_terms_are_cannot_check_on_a_model(tmp_path, wrt):
    """The model above through api.grad --check: b's true gradient (1e-7, the oracle) is 'cannot check', the
    rounding of the terms named; w's (x) passes; the same whichever tensors are selected."""
    from onnxprobe import api

    path = _cancelling_model(tmp_path / "m.onnx")
    res = api.grad(path, None, api.RunConfig(device="cpu"), api.GradSpec(wrt=wrt), inputs={"x": X100}, check=True, save=True)
    assert res.check_mode == "float32"
    rows = {r.name: r for r in res.rows}
    np.testing.assert_allclose(res.arrays["b"], np.full((1, 64), 1e-7), rtol=1e-6)
    c = rows["b"].check
    assert c["ok"] is None and c["rounded_by"] in ("z", "r", "y") and c["unresolved"], c
    if "w" in wrt:
        np.testing.assert_allclose(res.arrays["w"], X100, rtol=1e-6)
        assert rows["w"].check["ok"] is True, rows["w"].check
    assert not res.failed_checks


def test_a_wrong_rule_under_cancelling_terms_still_fails(tmp_path, monkeypatch):
    """The floor does not swallow a real error: the Mul rule's gradients 10% too large FAIL w (whose slope,
    x = +-100, is far above the terms' rounding)."""
    import dataclasses

    from onnxprobe import api
    from onnxprobe.autodiff import registry

    rule = registry.RULES["Mul"]
    monkeypatch.setitem(registry.RULES, "Mul", dataclasses.replace(
        rule, fn=lambda g: [g.Mul(d, g.scalar(1.1)) if d else d for d in rule.fn(g)]))
    path = _cancelling_model(tmp_path / "m.onnx")
    res = api.grad(path, None, api.RunConfig(device="cpu"), api.GradSpec(wrt=("w", "b")), inputs={"x": X100}, check=True)
    rows = {r.name: r for r in res.rows}
    assert rows["w"].check["ok"] is False, rows["w"].check
    assert rows["b"].check["ok"] is None, rows["b"].check


@pytest.mark.parametrize("wrong", [1.0, 1.5])
def test_a_tiny_loss_is_checked_relative_to_itself(wrong):
    """L = sum(tanh(w x)) with w ~1e-40 (float64): L ~1e-40 and its slope x (1 - tanh^2) ~1 are resolved at
    steps ~1e-46; a floor clamped at |L| >= 1e-30 swamped every step ('cannot check', QA: fd and <g, v>
    agreeing to 11 digits). The true gradient passes, one 1.5x too large fails."""
    x = RNG.uniform(0.5, 1.5, 9)
    w = RNG.uniform(-1.0, 1.0, 9) * 1e-40
    loss = (lambda name, delta: float(np.sum(np.tanh((w + delta) * x))))
    g = x * (1 - np.tanh(w * x) ** 2)
    res = check_gradients([CheckItem("w", wrong * g, w, float(np.sqrt(np.mean(w * w))))], loss, "float64")["w"]
    assert res["ok"] is (wrong == 1.0), res


def test_cli_checks_a_model_whose_loss_is_1e_40(tmp_path):
    """grad --check on y = tanh(x @ W), W ~1e-40: the loss sum(y) ~1e-40 is checked (exit 0, the gradients of
    W, a and y all ok; a and y were 'cannot check'), and dL/dW = x^T (1 - y^2) is numpy's."""
    x = RNG.uniform(0.5, 1.5, (2, 4)).astype(np.float32)
    w = (RNG.uniform(-1.0, 1.0, (4, 4)) * 1e-40).astype(np.float32)
    m = make_model([helper.make_node("MatMul", ["x", "W"], ["a"]), helper.make_node("Tanh", ["a"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [numpy_helper.from_array(w, "W")])
    onnx.save(m, tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", x)
    r = runner.invoke(app, ["grad", str(tmp_path / "m.onnx"), "--input", f"x={tmp_path / 'x.npy'}", "--check",
                            "--device", "cpu", "--json", str(tmp_path / "r.json"), "--save-grads", str(tmp_path / "g.npz")])
    assert r.exit_code == 0, r.output
    rows = json.loads((tmp_path / "r.json").read_text())["gradients"]
    assert len(rows) == 3 and all(row["check"]["ok"] is True for row in rows), rows
    y = np.tanh(x.astype(np.float64) @ w.astype(np.float64))
    np.testing.assert_allclose(np.load(tmp_path / "g.npz")["W"], x.astype(np.float64).T @ (1 - y * y), rtol=1e-6)


@pytest.mark.parametrize("precision", ["float64", "float32"])
@pytest.mark.parametrize("grad", [0.3, 1.2, -0.6])
def test_a_subgradient_at_a_real_kink_passes(precision, grad):
    """L = 0.3 x + |x| at x = 0: one-sided slopes 1.3 and -0.7 at every step; any gradient between passes."""
    loss = (lambda name, delta: float(0.3 * delta[0] + abs(delta[0])))
    res = check_gradients([CheckItem("x", np.array([grad]), None, 1.0)], loss, precision)["x"]
    assert res["ok"] is True and (res["kink"] or grad == 0.3), res  # 0.3: the central difference itself


def test_check_runs_in_float64_through_layer_norm_statistics(tmp_path):
    """LayerNormalization -> (o, mean, isd), y = o + isd: the float64 copy writes the Mean and InvStdDev
    outputs out in float64 too (they stayed float32, the stash type: Add(float, double) forced a float32
    check), so --check runs in float64; the x gradient against the float64 formula's (numpy, by hand)."""
    s, b = RNG.standard_normal(4), RNG.standard_normal(4)
    m = make_model([helper.make_node("LayerNormalization", ["x", "s", "b"], ["o", "mean", "isd"]),
                    helper.make_node("Add", ["o", "isd"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
                   [numpy_helper.from_array(s.astype(np.float32), "s"), numpy_helper.from_array(b.astype(np.float32), "b")])
    onnx.save(m, tmp_path / "m.onnx")
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = runner.invoke(app, ["grad", str(tmp_path / "m.onnx"), "--input", f"x={tmp_path / 'x.npy'}", "--wrt", "x",
                            "--check", "--device", "cpu", "--json", str(tmp_path / "r.json"), "--save-grads",
                            str(tmp_path / "g.npz")])
    assert r.exit_code == 0, r.output
    (row,) = json.loads((tmp_path / "r.json").read_text())["gradients"]
    assert row["check"]["ok"] is True and row["check"]["precision"] == "float64", row["check"]
    # L = sum(o) + sum(isd) = sum(b) + sum_i isd_i... sum(o) = sum(b) + sum(s * xhat): dL/dx by hand
    xd = x.astype(np.float64)
    xc = xd - xd.mean(-1, keepdims=True)
    r_ = 1 / np.sqrt((xc ** 2).mean(-1, keepdims=True) + 1e-5)
    xhat = xc * r_
    n = 4
    gs = np.broadcast_to(s, xd.shape)
    dx = r_ * (gs - gs.mean(-1, keepdims=True) - xhat * (gs * xhat).mean(-1, keepdims=True))
    dx += 4 * (-r_ ** 2 * xhat / n)  # isd broadcast over the 4 outputs of its row: dL/d isd = 4
    np.testing.assert_allclose(np.load(tmp_path / "g.npz")["x"], dx, rtol=1e-4, atol=1e-4 * np.abs(dx).max())
