"""``diff Q --vs-npz q.npz`` where q.npz is ``layers Q --save`` of the same quantized model: the saved
values are Q's own tensors. They were paired with Q's DequantizeLinear views (match ``qdq``, 30-47 dB,
none exact) under the SQNR >= 10 dB criterion of a quantized model against a float one, so a 20% edit of
a saved tensor passed; QOperator and dynamic models compared only their output (QA). Now each saved tensor
pairs with Q's tensor of its name and is judged by the float criterion."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from typer.testing import CliRunner

from conftest import sample_feeds
from onnxprobe import api
from onnxprobe.cli.main import app
from quantize_fixtures import quantize
from test_diff import _run_with_outputs

runner = CliRunner()


@pytest.mark.parametrize("kind", ["qdq", "qoperator", "dynamic"])
def test_a_quantized_model_against_its_own_saved_tensors_is_exact(kind, tmp_path):
    q = quantize("cnn", kind, tmp_path)
    feeds = sample_feeds("cnn")
    np.savez(tmp_path / "in.npz", **feeds)
    npz = tmp_path / "q.npz"
    r = runner.invoke(app, ["layers", str(q), "--inputs", str(tmp_path / "in.npz"), "--save", str(npz)])
    assert r.exit_code == 0, r.output
    with np.load(npz) as z:
        saved = {k: z[k] for k in z.files}
    # the oracle: the saved values are Q's own tensors, as plain onnxruntime computes them
    truth = _run_with_outputs(q, list(saved), feeds)
    assert all(np.array_equal(saved[k], truth[k]) for k in saved)
    res = api.diff(str(q), vs_npz=str(npz), inputs=api.InputSpec(arrays=feeds), config=api.RunConfig(device="cpu"))
    got = {r.pair.a.name: r for r in res.results}
    assert set(got) == set(saved)  # every saved tensor, each with Q's tensor of its own name
    assert all(r.pair.strategy == "name" and r.metrics.max_abs == 0 for r in got.values())
    # (its integer tensors, the codes of a QOperator or dynamic model, are judged exactly: stats.metrics.EXACT_INTEGERS)
    from onnxprobe.stats.metrics import EXACT_INTEGERS

    tol = next(r.tolerance for r in res.results if r.tolerance != EXACT_INTEGERS)
    assert tol.metric != "sqnr" and "own saved tensors" in tol.why
    assert res.verdict()[0] == "pass"
    from onnxprobe.runtime.npz import NpzWriter, npz_source  # keeps the source of q.npz

    # one saved tensor 20% off (a uint8 one rounded and clipped): it fails (it passed the quantized criterion)
    name = next(k for k in saved if k != onnx.load(str(q)).graph.output[0].name)
    v = saved[name]
    lim = np.finfo(v.dtype) if v.dtype.kind == "f" else np.iinfo(v.dtype)
    edited = np.clip(np.rint(v.astype(np.float64) * 1.2) if v.dtype.kind != "f" else v * 1.2, lim.min, lim.max).astype(v.dtype)
    assert not np.array_equal(edited, v)
    with NpzWriter(tmp_path / "edited.npz", source=npz_source(npz)) as w:
        w.add_all({**saved, name: edited})
    res = api.diff(str(q), vs_npz=str(tmp_path / "edited.npz"), inputs=api.InputSpec(arrays=feeds), config=api.RunConfig(device="cpu"))
    assert [r.pair.a.name for r in res.results if not r.passed] == [name]


def test_a_float_models_saved_tensors_keep_the_quantized_views(tmp_path):
    """The float model's activations (np.savez: no source) against its QDQ model: still the QDQ views, under
    the quantized criterion (the names alone say nothing: the QDQ model keeps the float names)."""
    q = quantize("cnn", "qdq", tmp_path)
    feeds = sample_feeds("cnn")
    from conftest import sample_path

    names = [n.output[0] for n in onnx.load(str(sample_path("cnn"))).graph.node]
    np.savez(tmp_path / "f.npz", **_run_with_outputs(sample_path("cnn"), names, feeds))
    res = api.diff(str(q), vs_npz=str(tmp_path / "f.npz"), inputs=api.InputSpec(arrays=feeds), config=api.RunConfig(device="cpu"))
    assert res.results[0].tolerance.metric == "sqnr" and any(r.pair.strategy == "qdq" for r in res.results)


@pytest.mark.parametrize("kind", ["qoperator", "dynamic"])
def test_an_unmarked_snapshot_holding_quantized_integer_tensors_is_the_models_own(kind, tmp_path):
    """An archive without layers --save's mark (written before it, or rewritten with np.savez) that holds a
    uint8/int32 tensor of the model's quantized ones is the model's own: no float model has such a tensor."""
    q = quantize("cnn", kind, tmp_path)
    feeds = sample_feeds("cnn")
    m = onnx.load(str(q))
    quantized = [t for n in m.graph.node for t in n.output if t.endswith("_quantized")]
    names = quantized + [m.graph.output[0].name]
    np.savez(tmp_path / "q.npz", **_run_with_outputs(q, names, feeds))  # the oracle: plain onnxruntime, no mark
    res = api.diff(str(q), vs_npz=str(tmp_path / "q.npz"), inputs=api.InputSpec(arrays=feeds), config=api.RunConfig(device="cpu"),
                   selection=api.Selection(all=True))
    got = {r.pair.a.name: r for r in res.results}
    assert set(got) == set(names) and all(r.pair.strategy == "name" and r.metrics.max_abs == 0 for r in got.values())
    assert res.results[0].tolerance.metric != "sqnr"
