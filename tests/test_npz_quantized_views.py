"""``diff FLOAT.onnx --vs-npz q.npz`` where q.npz holds a QDQ model's saved tensors (``layers Q --save``): A's x is
compared with the quantized value the file holds beside x, DequantizeLinear(QuantizeLinear(x)), found by value, under
the criterion of a float model against a quantized one, as ``diff FLOAT.onnx Q.onnx`` compares them. It was compared
with Q's raw x before QuantizeLinear by the float criterion (FAIL at 54 dB where the two-model diff passed), and the
quantized values were listed as having no counterpart."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from typer.testing import CliRunner

from conftest import SAMPLES, sample_feeds
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.compare.npz_views import quantized_views
from quantize_fixtures import quantize


def _all_tensors(path, feeds) -> dict:
    """Every node output of the model at ``path``, run by plain onnxruntime with them as outputs (the oracle)."""
    m = onnx.load(str(path))
    have = {o.name for o in m.graph.output}
    m.graph.output.extend([onnx.ValueInfoProto(name=t) for n in m.graph.node for t in n.output if t and t not in have])
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))


@pytest.mark.parametrize("name", ["cnn", "transformer_block"])
def test_a_float_model_against_its_quantized_models_saved_tensors(name, tmp_path):
    q = quantize(name, "qdq", tmp_path)
    feeds = sample_feeds(name)
    np.savez(tmp_path / "in.npz", **feeds)
    npz = tmp_path / "q.npz"
    r = CliRunner().invoke(app, ["layers", str(q), "--all", "--inputs", str(tmp_path / "in.npz"), "--save", str(npz)])
    assert r.exit_code == 0, r.output
    f = str(SAMPLES / f"{name}.onnx")
    cfg, spec = api.RunConfig(device="cpu", cache=False), api.InputSpec(arrays=feeds)
    saved = api.diff(f, vs_npz=str(npz), inputs=spec, config=cfg, selection=api.Selection(all=True))
    live = api.diff(f, str(q), inputs=spec, config=cfg, selection=api.Selection(all=True))
    assert saved.results[0].tolerance.metric == "sqnr" and saved.results[0].tolerance.min_sqnr == 10.0
    assert saved.verdict()[0] == live.verdict()[0]
    views = {r.pair.a.name: r for r in saved.results if r.pair.strategy == "qdq"}
    assert views  # A's tensors compared with the file's quantized values
    # the oracle: A's tensors and Q's DequantizeLinear outputs from plain onnxruntime runs, SQNR in numpy float64
    ta, tq = _all_tensors(f, feeds), _all_tensors(q, feeds)
    for a_name, res in views.items():
        a64, b64 = ta[a_name].astype(np.float64), tq[res.pair.b.name].astype(np.float64)
        assert not np.array_equal(tq[a_name], tq[res.pair.b.name])  # the raw x and its quantized value differ
        want = 10 * np.log10(np.sum(b64 ** 2) / np.sum((a64 - b64) ** 2))
        assert abs(res.metrics.sqnr_db - want) < 1e-3, a_name
    # every pair as the two-model diff measures it
    by_a = {r.pair.a.name: r for r in live.results if r.metrics is not None}
    for r in saved.results:
        if r.metrics is not None and r.pair.a.name in by_a:
            assert abs(r.metrics.sqnr_db - by_a[r.pair.a.name].metrics.sqnr_db) < 1e-6 or r.metrics.sqnr_db == by_a[r.pair.a.name].metrics.sqnr_db
    # the views and their codes are no 'no counterpart'
    gone = {u.obs.name for u in saved.matching.unmatched_b}
    assert not gone & {r.pair.b.name for r in views.values()}


def test_copies_and_float_arrays_are_no_views():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    step = np.float32(0.05)
    view = (np.clip(np.rint(x / step), -128, 127) * step).astype(np.float32)
    codes = (np.rint(view / step) + 3).astype(np.int8)  # zero point 3
    found = quantized_views({"x": x, "x_view": view, "x_codes": codes}, {"x"})
    assert found == ({"x": "x_view"}, {"x_codes": "x_view"})
    # a copy of x under another name (an Identity's), a float array near x not on a grid, a mask on its grid: none
    assert quantized_views({"x": x, "copy": x.copy()}, {"x"}) == ({}, {})
    assert quantized_views({"x": x, "near": x + np.float32(1e-3) * rng.standard_normal(x.shape).astype(np.float32)}, {"x"}) == ({}, {})
    mask = (x > 0).astype(np.float32)
    assert quantized_views({"m": mask, "m2": mask.copy()}, {"m"}) == ({}, {})
    # NaN, a single element, float16: no error, no view where none is
    assert quantized_views({"x": np.full((3,), np.nan, np.float32), "y": np.zeros(3, np.float32)}, {"x"}) == ({}, {})
    assert quantized_views({"x": np.ones(1, np.float32), "y": np.ones(1, np.float32)}, {"x"}) == ({}, {})
    h = x.astype(np.float16)
    assert quantized_views({"h": h, "hv": view.astype(np.float16)}, {"h"})[0] == {"h": "hv"}
    # the range clips x: still its view; a Relu'd view is the Relu output's (it clips nothing there), not x's
    r = np.maximum(x, 0)
    rv = (np.clip(np.rint(r / step), 0, 255) * step).astype(np.float32)
    assert quantized_views({"x": x, "r": r, "rv": rv}, {"x", "r"})[0] == {"r": "rv"}


@pytest.mark.parametrize("name", ["cnn"])
def test_the_default_selection_of_a_quantized_model_saved_is_judged_as_quantized(name, tmp_path):
    """``layers Q --save`` of the default selection holds Q's layers as float values only (no DequantizeLinear view,
    no codes): nothing in the file says "quantized" but its zip comment, which says so (``npz_origin``). The float
    model against it is judged as against Q (SQNR >= 10 dB), not by allclose, which failed pairs the two-model diff
    passes; a float model's own archive does not say it."""
    from onnxprobe.runtime.npz import npz_origin

    q = quantize(name, "qdq", tmp_path)
    feeds = sample_feeds(name)
    np.savez(tmp_path / "in.npz", **feeds)
    npz, fnpz = tmp_path / "q.npz", tmp_path / "f.npz"
    f = str(SAMPLES / f"{name}.onnx")
    for model, out in ((q, npz), (f, fnpz)):
        r = CliRunner().invoke(app, ["layers", str(model), "--inputs", str(tmp_path / "in.npz"), "--save", str(out)])
        assert r.exit_code == 0, r.output
    assert npz_origin(npz).quantized and not npz_origin(fnpz).quantized
    with np.load(npz) as z:
        assert all(z[k].dtype == np.float32 for k in z.files if k not in feeds)  # float values only
    cfg, spec = api.RunConfig(device="cpu", cache=False), api.InputSpec(arrays=feeds)
    saved = api.diff(f, vs_npz=str(npz), inputs=spec, config=cfg)
    tol = saved.results[0].tolerance
    assert tol.metric == "sqnr" and tol.min_sqnr == 10.0 and "quantized" in tol.why
    # the oracle: Q's tensors by plain onnxruntime, A's too, SQNR in numpy float64 against the 10 dB the diff applies
    ta, tq = _all_tensors(f, feeds), _all_tensors(q, feeds)
    compared = [r for r in saved.results if r.metrics is not None]
    assert compared
    for r in compared:
        a64, b64 = ta[r.pair.a.name].astype(np.float64), tq[r.pair.b.name].astype(np.float64)
        want = 10 * np.log10(np.sum(b64 ** 2) / np.sum((a64 - b64) ** 2))
        assert abs(r.metrics.sqnr_db - want) < 1e-3 and r.passed == (want >= 10.0)
    assert saved.verdict()[0] == ("pass" if all(r.passed for r in compared) else "fail")
    fres = api.diff(f, vs_npz=str(fnpz), inputs=spec, config=cfg)  # a float model's own: exact, as before
    assert fres.results[0].tolerance.metric == "allclose"
