"""--vs-npz with the model's inputs saved beside the activations: a saved input the model refuses was said to come
"from --inputs", a flag never given; and --inputs given for an input the file holds replaced the saved one (from
which the activations were computed) without a word, every pair then failing."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import sample_path
from onnxprobe import api
from onnxprobe.errors import UsageError


def test_a_saved_input_the_model_refuses_is_said_to_come_from_the_file(tmp_path):
    np.savez(tmp_path / "acts.npz", x=np.zeros((4, 16), np.float64), y=np.zeros((4, 8), np.float32))
    with pytest.raises(UsageError) as e:
        api.diff(sample_path("mlp"), vs_npz=tmp_path / "acts.npz")
    assert "(from acts.npz, saved with the activations)" in str(e.value) and "--inputs" not in str(e.value), str(e.value)


def test_an_input_given_over_a_saved_one_is_said(tmp_path):
    res = api.layers(sample_path("mlp"), api.Selection(all=True), save=True)
    arrays = {**{k: np.asarray(v) for k, v in res.arrays.items()}, "x": res.feed["x"]}
    np.savez(tmp_path / "acts.npz", **{k.replace("/", "_"): v for k, v in arrays.items()})
    other = api.InputSpec(arrays={"x": np.ones((4, 16), np.float32)})
    d = api.diff(sample_path("mlp"), vs_npz=tmp_path / "acts.npz", inputs=other)
    assert any("not on the one saved in acts.npz" in n for n in d.notes), d.notes
    same = api.diff(sample_path("mlp"), vs_npz=tmp_path / "acts.npz")
    assert not any("not on the one saved" in n for n in same.notes) and same.verdict()[0] == "pass", same.verdict()


def test_the_saved_input_given_again_is_no_other_input(tmp_path):
    """The README's `--vs-npz test_data_set_0/ --inputs test_data_set_0/` (one input named twice) was told A ran on
    another input than the saved one; the same values given again are that input (a file too, a copy in float64 not)."""
    res = api.layers(sample_path("mlp"), api.Selection(all=True), save=True)
    arrays = {**{k: np.asarray(v) for k, v in res.arrays.items()}, "x": res.feed["x"]}
    np.savez(tmp_path / "acts.npz", **{k.replace("/", "_"): v for k, v in arrays.items()})
    np.save(tmp_path / "x.npy", res.feed["x"])
    for given in (api.InputSpec(arrays={"x": res.feed["x"].copy()}), api.InputSpec(files={"x": str(tmp_path / "x.npy")})):
        d = api.diff(sample_path("mlp"), vs_npz=tmp_path / "acts.npz", inputs=given)
        assert not any("not on the one saved" in n for n in d.notes), d.notes
        assert d.verdict()[0] == "pass", d.verdict()
    nudged = res.feed["x"].copy()
    nudged.flat[0] = np.nextafter(nudged.flat[0], np.float32(np.inf))
    d = api.diff(sample_path("mlp"), vs_npz=tmp_path / "acts.npz", inputs=api.InputSpec(arrays={"x": nudged}))
    assert any("not on the one saved in acts.npz" in n for n in d.notes), d.notes


def test_a_pair_with_saved_values_names_no_op_of_theirs(tmp_path):
    """A quantized model against a float model's saved tensors: the reason said 'Conv in A stands for ? in B', the
    saved file holding no graph to name an op by."""
    from quantize_fixtures import quantize

    qop = quantize(sample_path("cnn"), "qop", tmp_path)
    x = np.random.default_rng(0).random((1, 3, 32, 32), dtype=np.float32)
    res = api.layers(sample_path("cnn"), api.Selection(all=True), inputs=api.InputSpec(arrays={"image": x}), save=True)
    np.savez(tmp_path / "acts.npz", image=x, **{k: np.asarray(v) for k, v in res.arrays.items()})
    d = api.diff(qop, vs_npz=tmp_path / "acts.npz", inputs=api.InputSpec(arrays={"image": x}))
    reasons = [r.pair.reason for r in d.results]
    assert reasons and not [r for r in reasons if "?" in r], reasons


def test_a_relu_folded_into_a_quantized_range_pairs_with_the_saved_relu_output(tmp_path):
    """A QOperator model folds each Conv's Relu into its quantization range, keeping the Conv's name: against the
    float model it pairs with the Relu's output, but against that model's saved tensors it paired with the Conv's
    (Relu(x) against x). The saved Relu output is found by its values, max(x, 0). Oracle: the two-model diff's pairs."""
    from quantize_fixtures import quantize

    qop = quantize(sample_path("cnn"), "qop", tmp_path)
    x = np.random.default_rng(0).random((1, 3, 32, 32), dtype=np.float32)
    inputs = api.InputSpec(arrays={"image": x})
    res = api.layers(sample_path("cnn"), api.Selection(all=True), inputs=inputs, save=True)
    np.savez(tmp_path / "acts.npz", image=x, **{k: np.asarray(v) for k, v in res.arrays.items()})
    two = {r.pair.a.name: r.pair.b.name for r in api.diff(qop, sample_path("cnn"), inputs=inputs).results}
    saved = {r.pair.a.name: r.pair.b.name for r in api.diff(qop, vs_npz=tmp_path / "acts.npz", inputs=inputs).results}
    folded = {a: b for a, b in two.items() if "relu" in b}
    assert folded and all(saved.get(a) == b for a, b in folded.items()), (folded, saved)
