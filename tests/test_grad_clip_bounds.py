"""Clip's min / max inputs get a gradient, as torch.clamp's tensor bounds do (a learnable clamp, PACT's
alpha: torch.clamp(h, min=lo, max=hi) with nn.Parameters, which both exporters write as Clip(h, lo, hi)).
They had none "by design", and diff --grad --vs-torch passed with the two parameters unmatched as "the
loss does not depend on it". dlo = sum of dy where x < lo (< hi), dhi = sum of dy where x > hi or hi < lo
(torch's clamp_backward_min_max). Oracle: central differences of L = sum(dy * clip(x, lo, hi)) in numpy
float64 (L is linear in each bound between kinks; the inputs stay away from them)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model

RNG = np.random.default_rng(3)


def _loss(x, lo, hi, dy):
    return float(np.sum(dy * np.minimum(np.maximum(x, lo), hi)))


@pytest.mark.parametrize("lo,hi", [(-0.3, 0.5), (0.4, -0.2), (None, 0.5), (-0.3, None)])
def test_clip_bounds_get_the_gradient_of_finite_differences(tmp_path, lo, hi):
    from onnxprobe import api

    x = RNG.standard_normal((3, 5)).astype(np.float32)
    x[np.abs(x - (lo or 0)) < 0.05] += 0.1  # away from the kinks
    x[np.abs(x - (hi or 0)) < 0.05] += 0.1
    dy = RNG.standard_normal((3, 5)).astype(np.float32)
    inits = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("lo", lo), ("hi", hi)) if v is not None]
    ins = ["x", "lo" if lo is not None else "", "hi" if hi is not None else ""]
    m = make_model([helper.make_node("Clip", ins, ["y"], name="clip")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5])], inits)
    onnx.save(m, tmp_path / "m.onnx")
    wrt = tuple(n for n, v in (("lo", lo), ("hi", hi)) if v is not None)
    res = api.grad(tmp_path / "m.onnx", spec=api.GradSpec(output_grad=dy, wrt=wrt), inputs={"x": x}, save=True)
    x64, dy64, h = x.astype(np.float64), dy.astype(np.float64), 1e-4
    big = np.inf
    for name, v in (("lo", lo), ("hi", hi)):
        if v is None:
            continue
        at = {"lo": lo if lo is not None else -big, "hi": hi if hi is not None else big}
        up, down = dict(at), dict(at)
        up[name], down[name] = v + h, v - h
        want = (_loss(x64, up["lo"], up["hi"], dy64) - _loss(x64, down["lo"], down["hi"], dy64)) / (2 * h)
        assert name in res.arrays, (name, res.notes)
        assert np.shape(res.arrays[name]) == ()
        np.testing.assert_allclose(float(res.arrays[name]), want, rtol=1e-5, atol=1e-5)


def _clip_model(path, lo: float, hi: float, names=("lo", "hi")) -> None:
    inits = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in zip(names, (lo, hi))]
    m = make_model([helper.make_node("Clip", ["x", *names], ["y"], name="clip")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5])], inits)
    onnx.save(m, path)


@pytest.mark.parametrize("pattern", ["lo", "l*", "[l]o"])
def test_a_glob_names_a_scalar_bound_as_its_exact_name_does(tmp_path, pattern):
    """`--wrt NAME` reached a scalar initializer (torch's legacy export names a learnable clamp's bounds
    'onnx::Clip_9'), but `--wrt 'onnx::Clip_*'` matched nothing: a pattern is the names it matches."""
    from onnxprobe import api

    x = np.array([[-1.0, -0.5, 0.0, 0.7, 1.2]] * 3, np.float32)
    _clip_model(tmp_path / "m.onnx", -0.3, 0.5)
    res = api.grad(tmp_path / "m.onnx", spec=api.GradSpec(wrt=(pattern,)), inputs={"x": x}, save=True)
    assert "lo" in res.arrays and "hi" not in res.arrays, (sorted(res.arrays), res.notes)
    assert float(res.arrays["lo"]) == pytest.approx(float(np.sum(x < -0.3)))  # sum of dy = 1 where x < lo


@pytest.mark.parametrize("flags,want", [
    (dict(all=True), {"lo"}), (dict(ops=("Clip",)), {"lo"}), (dict(names=("clip",)), {"lo"}),
])
def test_a_scalar_bound_named_by_wrt_stays_with_selection_flags(tmp_path, flags, want):
    """--wrt names a scalar bound, which makes it a weight; --all (every tensor) or --op / --name selecting its
    reader kept none of it ("the selection flags leave none of the tensors it names"), and --all --wrt '*' dropped
    both bounds: it is selected as any weight its reader reads."""
    from onnxprobe import api

    x = np.array([[-1.0, -0.5, 0.0, 0.7, 1.2]] * 3, np.float32)
    _clip_model(tmp_path / "m.onnx", -0.3, 0.5)
    res = api.grad(tmp_path / "m.onnx", api.Selection(**flags), spec=api.GradSpec(wrt=("lo",)), inputs={"x": x}, save=True)
    assert set(res.arrays) == want, (sorted(res.arrays), res.notes)
    assert float(res.arrays["lo"]) == pytest.approx(float(np.sum(x < -0.3)))  # sum of dy = 1 where x < lo
    every = api.grad(tmp_path / "m.onnx", api.Selection(all=True), spec=api.GradSpec(wrt=("*",)), inputs={"x": x})
    assert {"lo", "hi", "x", "y"} <= {r.target.ref.name for r in every.rows}


@pytest.mark.parametrize("pattern", ["lo", "l*"])
def test_diff_grad_compares_a_scalar_bound_named_by_wrt(tmp_path, pattern):
    """diff --grad takes grad's --wrt: a scalar bound it names is compared (it was refused, 'no gradient of
    either model matches it', by name or glob), and one changed in B fails."""
    import json

    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    x = np.array([[-1.0, -0.5, 0.0, 0.7, 1.2]] * 3, np.float32)
    np.save(tmp_path / "x.npy", x)
    _clip_model(tmp_path / "a.onnx", -0.3, 0.5)
    # B as dynamo names the bounds ('linear_min'), A as legacy ('onnx::Clip_9'): --wrt names A's, pairs with B's
    for b, lo, code, names in (("same.onnx", -0.3, 0, ("lo", "hi")), ("moved.onnx", -0.6, 1, ("lo", "hi")),
                               ("renamed.onnx", -0.3, 0, ("b_min", "b_max"))):
        _clip_model(tmp_path / b, lo, 0.5, names)
        js = tmp_path / f"{b}.json"
        r = CliRunner().invoke(app, ["diff", "--grad", str(tmp_path / "a.onnx"), str(tmp_path / b), "--input",
                                     f"x={tmp_path / 'x.npy'}", "--wrt", pattern, "--json", str(js)])
        assert r.exit_code == code, r.output
        got = json.loads(js.read_text())
        pairs = {p["a"]: p for p in got["pairs"]}
        assert list(pairs) == ["lo_grad"] and pairs["lo_grad"]["is_output"], r.output
        assert pairs["lo_grad"]["b"] == f"{names[0]}_grad" and pairs["lo_grad"]["passed"] is (code == 0)
