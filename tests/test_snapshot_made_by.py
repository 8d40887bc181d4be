"""``diff M --vs-npz s.npz`` where s.npz is ``layers M --save`` of the same model, but computed by another runtime
or precision (OpenVINO in bf16 against onnxruntime in float32, either way round): not one computation. The archive
says what computed it (``runtime.npz.npz_origin``), and the criterion is that of one model on two runtimes or in
reduced precision, as ``--vs-runtime`` judges the same numbers (it was allclose 1e-4/1e-3: every layer FAILed at
32-53 dB where the live comparison passed). Saved by the same runtime, it stays exact."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import SAMPLES, sample_feeds
from onnxprobe import api
from onnxprobe.runtime.npz import NpzWriter, graph_fingerprint, npz_origin


def _saved(tmp_path):
    model = str(SAMPLES / "cnn.onnx")
    feeds = sample_feeds("cnn")
    npz = tmp_path / "s.npz"
    api.layers(model, api.Selection(all=True), api.RunConfig(device="cpu"), api.InputSpec(arrays=feeds), save_to=npz)
    with np.load(npz) as z:
        saved = {k: z[k] for k in z.files if k not in feeds}
    return model, feeds, npz, saved


def _diff(model, feeds, npz):
    res = api.diff(model, vs_npz=str(npz), inputs=api.InputSpec(arrays=feeds), config=api.RunConfig(device="cpu"))
    return res, res.results[0].tolerance


def test_the_archive_says_what_computed_it_and_the_same_runtime_is_exact(tmp_path):
    model, feeds, npz, _ = _saved(tmp_path)
    assert npz_origin(npz)[1] == ("onnxruntime", "cpu", None)
    res, tol = _diff(model, feeds, npz)
    assert tol.metric == "allclose" and "own saved tensors" in tol.why
    assert res.verdict()[0] == "pass" and all(r.metrics.max_abs == 0 for r in res.results)


@pytest.mark.parametrize("made_by, metric_floor", [(("openvino", "cpu", "bf16"), 20.0), (("openvino", "cpu", "f32"), 60.0)])
def test_values_another_runtime_computed_are_judged_as_two_runtimes(made_by, metric_floor, tmp_path):
    model, feeds, npz, saved = _saved(tmp_path)
    # the other runtime's values: every float element 0.4% off (48 dB: no allclose 1e-4 + 1e-3|b| holds them)
    other = {k: (v * np.where(np.arange(v.size).reshape(v.shape) % 2, 1.004, 0.996).astype(v.dtype) if v.dtype.kind == "f" else v)
             for k, v in saved.items()}
    sqnr = {k: 10 * np.log10(np.sum(np.float64(other[k]) ** 2) / np.sum((np.float64(other[k]) - np.float64(saved[k])) ** 2))
            for k in saved if saved[k].dtype.kind == "f" and np.any(saved[k])}
    assert all(47 < s < 49 for s in sqnr.values())  # the oracle: numpy float64
    out = tmp_path / "other.npz"
    with NpzWriter(out, source=graph_fingerprint(api.load(model).proto), made_by=made_by) as w:
        w.add_all(other)
    assert npz_origin(out)[:2] == (graph_fingerprint(api.load(model).proto), made_by)
    res, tol = _diff(model, feeds, out)
    assert tol.metric == "sqnr" and tol.min_sqnr == metric_floor and "openvino" in tol.why
    got = {r.pair.a.name: r for r in res.results if r.pair.a.name in sqnr}
    assert got and all(abs(r.metrics.sqnr_db - sqnr[k]) < 0.01 for k, r in got.items())
    # bf16 (20 dB) passes what float32 on another runtime (60 dB) does not
    assert res.verdict()[0] == ("pass" if metric_floor == 20.0 else "fail")


def test_an_archive_without_the_record_stays_exact_and_a_bf16_run_against_it_is_not(tmp_path):
    model, feeds, npz, saved = _saved(tmp_path)
    old = tmp_path / "old.npz"
    with NpzWriter(old, source=graph_fingerprint(api.load(model).proto)) as w:  # as onnxprobe wrote them before
        w.add_all(saved)
    assert npz_origin(old)[1] is None
    res, tol = _diff(model, feeds, old)
    assert tol.metric == "allclose" and res.verdict()[0] == "pass"
