"""A notebook gives its own arrays to the API and fills them with its next batch. A result keeps the feed its run
was made on (``ProbeResult.feed``, a diff's too): it was the caller's array itself, so histograms, the HTML page,
``save_tensors`` and ``profile_layers`` asked of an older result ran on the new values (a histogram up to 11.7 for a
row whose max is 2.34). And the notes of the API name its settings in its words: they said "(--seed 0)" and "give the
--seed or --input", and "saved in the activations given with the activations" of arrays handed over in a dict."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.cli.main import app


def _model(path, scale=1.0, extra_input=False):
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 3], (np.arange(12, dtype=np.float32) / 7 - 0.6) * scale)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"]), helper.make_node("Relu", ["mm"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])]
    if extra_input:
        nodes.append(helper.make_node("Identity", ["i"], ["i_out"]))
        inputs.append(helper.make_tensor_value_info("i", TensorProto.INT64, [3]))
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])]
    if extra_input:
        outputs.append(helper.make_tensor_value_info("i_out", TensorProto.INT64, [3]))
    g = helper.make_graph(nodes, "g", inputs, outputs, [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def _mm(x, scale=1.0):  # the oracle: numpy float64
    w = (np.arange(12, dtype=np.float32) / 7 - 0.6) * scale
    return x.astype(np.float64) @ w.astype(np.float64).reshape(4, 3)


def test_a_result_keeps_the_values_it_ran_on_when_the_callers_array_is_refilled(tmp_path):
    m = _model(tmp_path / "m.onnx")
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    first = x.copy()
    res = api.layers(m, api.Selection(all=True), inputs={"x": x})
    x[:] = 5.0  # the notebook's next batch, in the same buffer
    assert np.array_equal(res.feed["x"], first)
    edges = api.layers_histograms(res, ["mm"])["mm"]["values"]["edges"]
    want = _mm(first)
    assert abs(edges[0] - want.min()) < 1e-6 and abs(edges[-1] - want.max()) < 1e-6
    npz = tmp_path / "s.npz"
    api.save_tensors(m, res, res.feed, npz)
    with np.load(npz) as z:
        assert np.allclose(z["mm"], want, atol=1e-6)


def test_a_diffs_histograms_describe_its_own_run_after_the_array_is_refilled(tmp_path):
    a, b = _model(tmp_path / "a.onnx", 1.01), _model(tmp_path / "b.onnx")
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    first = x.copy()
    d = api.diff(a, b, inputs={"x": x})
    x[:] = 5.0
    h = api.diff_histograms(d, ["mm"])["mm"]
    err = _mm(first, 1.01) - _mm(first)
    assert abs(h["error"]["edges"][0] - err.min()) < 1e-5 and abs(h["error"]["edges"][-1] - err.max()) < 1e-5


def test_the_apis_notes_name_the_seed_in_its_words_and_the_command_line_in_its_own(tmp_path):
    m = _model(tmp_path / "m.onnx", extra_input=True)
    res = api.layers(m, inputs={"x": np.ones((2, 4), np.float32)})
    note = next(n for n in res.notes if "seeded random data" in n)
    assert "(seed (--seed) 0)" in note and "(--seed 0)" not in note, note
    np.savez(tmp_path / "x.npz", x=np.ones((2, 4), np.float32))
    r = CliRunner().invoke(app, ["layers", m, "--inputs", str(tmp_path / "x.npz")])
    assert r.exit_code == 0 and "so seeded random data (--seed 0)" in r.output, r.output


def test_inputs_handed_over_with_activations_in_a_dict_are_said_so_once(tmp_path):
    m = _model(tmp_path / "m.onnx")
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    res = api.diff(m, vs_npz={"x": x, "mm": _mm(x).astype(np.float32)})
    note = next(n for n in res.notes if "A runs on the input" in n)
    assert note == "A runs on the input(s) given with the activations: x", note
    # the output y is not among them: not compared (said where it is missing), and no verdict earned
    assert res.verdict()[0] == "error" and [u.reason for u in res.unmatched_in("a") if u.obs.name == "y"] == ["not in the activations given"]
    res = api.diff(m, vs_npz={"mm": _mm(x).astype(np.float32)})  # without x: random data, in the API's words
    note = next(n for n in res.notes if "seeded random data" in n)
    assert "give the seed or the input arrays" in note and "--input " not in note, note


def test_a_bad_sort_is_named_as_the_function_called_takes_it(tmp_path):
    """``api.text(res, sort=...)`` of a layers result said "report sort=...", a function the caller never called."""
    import pytest

    res = api.layers(_model(tmp_path / "m.onnx"))
    for call in (lambda: api.text(res, sort="introduced"), lambda: api.html(res, tmp_path / "r.html", sort="introduced"),
                 lambda: api.report(res, sort="introduced")):
        with pytest.raises(api.UsageError) as e:
            call()
        assert str(e.value).startswith("sort='introduced': ") and "report" not in str(e.value), e.value
    assert not (tmp_path / "r.html").exists()
