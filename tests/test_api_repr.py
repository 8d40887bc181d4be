"""What a notebook shows of the API's results: a line saying what ran and what came out, not the
model's bytes; and histograms of a result are of the inputs it was computed with."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import sample_path
from onnxprobe import api
from onnxprobe.errors import UsageError
from onnxprobe.stats.histogram import binned

CNN, MLP, TRANSFORMER = str(sample_path("cnn")), str(sample_path("mlp")), str(sample_path("transformer_block"))


def short(obj) -> str:
    text = repr(obj)
    assert len(text) < 300 and "\n" not in text, text[:500]
    return text


def test_probe_result_and_plan_reprs_are_one_line():
    res = api.layers(TRANSFORMER, api.Selection(all=True), save=True)
    text = short(res)
    assert text.startswith("ProbeResult(transformer_block.onnx on onnxruntime cpu:")
    assert f"{len(res.plan.probes)} tensors probed" in text and f"{len(res.arrays)} values kept" in text
    assert short(res.plan) == f"ProbePlan(transformer_block.onnx: {len(res.plan.probes)} probes, {len(res.plan.warnings)} warnings)"
    assert short(api.plan(CNN)).startswith("ProbePlan(cnn.onnx: 3 probes")


def test_grad_reprs_are_one_line():
    res = api.grad(MLP, check=True)
    text = short(res)
    assert text.startswith("GradResult(mlp.onnx: sum loss of 'y' = ")
    assert "10 gradients" in text and "checked in float64: 10 of 10 ok" in text
    assert short(res.plan).startswith("GradPlan(mlp.onnx: sum loss of 'y', 10 gradients")
    spec = api.GradSpec(loss="mse", target=np.zeros((400, 80), np.float32))
    assert short(spec) == "GradSpec(loss='mse', output=None, target [400, 80], wrt=())"


def test_dataset_result_repr_is_one_line(tmp_path):
    rng = np.random.default_rng(0)
    api.save_npz({"image": rng.random((1, 3, 32, 32), dtype=np.float32)}, tmp_path / "a.npz")
    api.save_npz({"image": rng.random((1, 3, 32, 32), dtype=np.float32)}, tmp_path / "b.npz")
    res = api.layers_dataset(CNN, tmp_path)
    assert short(res) == "DatasetResult(cnn.onnx on onnxruntime cpu: 3 tensors over 2 batches)"


@pytest.mark.parametrize("runner", ["layers", "run", "prober"])
def test_layers_histograms_are_of_the_inputs_the_result_was_computed_with(runner):
    m = api.load(CNN)
    arr = np.random.default_rng(7).normal(3.0, 2.0, (1, 3, 32, 32)).astype(np.float32)
    spec = api.InputSpec(arrays={"image": arr})
    if runner == "layers":
        res = api.layers(m, api.Selection(ops="Conv"), None, spec)
    elif runner == "run":
        res = api.run(m, {"image": arr}, None, api.Selection(ops="Conv"))
    else:
        res = api.Prober(m).run({"image": arr}, ["conv1_out", "conv2_out"])
    assert res.feed["image"] is not None and np.array_equal(res.feed["image"], arr)
    saved = api.layers(m, api.Selection(ops="Conv"), None, spec, save=True).arrays
    hists = api.layers_histograms(res, ["conv1_out", "conv2_out"])
    for name in ("conv1_out", "conv2_out"):
        assert hists[name]["values"] == binned(saved[name], 40)
    # inputs given say which inputs to use instead
    other = api.layers_histograms(res, ["conv1_out"], api.InputSpec(seed=1))
    assert other["conv1_out"]["values"] != hists["conv1_out"]["values"]


def test_diff_result_is_one_line_and_its_histograms_use_its_inputs():
    arr = np.random.default_rng(9).normal(1.0, 3.0, (1, 3, 32, 32)).astype(np.float32)
    res = api.diff(CNN, CNN, selection=api.Selection(all=True), inputs={"image": arr})  # a dict of arrays is the inputs
    text = repr(res)
    assert "\n" not in text and len(text) < 400 and "pass" in text and "cnn.onnx" in text
    saved = api.layers(CNN, api.Selection(names=("conv1_out",)), None, api.InputSpec(arrays={"image": arr}), save=True).arrays
    h = api.diff_histograms(res, ["conv1_out"])
    assert h["conv1_out"]["values"] == binned(saved["conv1_out"], 40)
    assert h["conv1_out"]["error"] == binned(np.zeros_like(saved["conv1_out"], np.float64), 40)


@pytest.mark.parametrize("call, needle", [
    (lambda: api.diff(CNN, 5), "b: expected a path"),
    (lambda: api.diff(CNN, CNN, config="cpu"), "config: expected an api.RunConfig"),
    (lambda: api.diff(CNN, CNN, tolerance="sqnr"), "tolerance: expected an api.Tolerance"),
    (lambda: api.diff(CNN, CNN, per_tensor={"logits": 0.5}), "per_tensor['logits']"),
    (lambda: api.diff_grad(MLP, MLP, "sum"), "spec: expected an api.GradSpec"),
], ids=["b", "config", "tolerance", "per_tensor", "grad_spec"])
def test_diff_arguments_of_the_wrong_kind_are_one_usage_error(call, needle):
    with pytest.raises(UsageError) as e:
        call()
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_surgery_results_are_one_line(tmp_path):
    for r in (api.inspect(TRANSFORMER), api.mark(CNN, tmp_path / "m.onnx", api.Selection(all=True)),
              api.extract(MLP, tmp_path / "e.onnx", "relu1_out")):
        text = repr(r)
        assert "\n" not in text and len(text) < 300, text


def test_tensor_stats_read_as_statistics():
    """A notebook showed TensorStats' shifted sums (shift, s1, s2), not its mean and std."""
    import numpy as np

    from onnxprobe.stats.tensor_stats import TensorStats

    x = np.array([1.0, 2.0, 3.5], np.float32)
    text = repr(TensorStats.from_array(x))
    assert f"mean={x.astype(np.float64).mean():.6g}" in text and "std=" in text and "s1" not in text, text
    assert "no finite value" in repr(TensorStats.from_array(np.array([np.nan])))


def test_pairs_and_gradient_rows_are_one_line():
    """A notebook's `d.results[0]` or `d.first_failure` printed every field of both Observables, their
    weights' digests and sample values among them: 4 KB a pair (140 KB for `d.results` of a small CNN)."""
    res = api.diff(CNN, CNN, selection=api.Selection(all=True))
    r = res.results[0]
    text = short(r)
    assert text.startswith("PairResult(") and r.pair.a.name in text and r.pair.strategy in text and "pass" in text, text
    assert short(r.pair).startswith("Pair(") and short(r.pair.a).startswith("Observable(")
    assert r.pair.a.name in short(r.pair.a) and r.pair.a.op_type in short(r.pair.a)
    assert "weight_samples" not in text and len(repr(res.results)) < 300 * len(res.results)
    for u in res.matching.unmatched_a + res.matching.unmatched_b:
        short(u.obs)
    # not compared: the reason, not metrics
    import dataclasses

    assert "no metrics" in short(dataclasses.replace(r, metrics=None, passed=None, problem="shapes differ"))
    g = api.grad(MLP, check=True)
    row = short(g.rows[0])
    assert row.startswith("GradRow(") and g.rows[0].name in row and g.rows[0].target.kind in row and "norm=" in row, row
