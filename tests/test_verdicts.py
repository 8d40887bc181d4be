"""Verdicts that are earned: comparing nothing is not a pass, an exact match passes under every metric,
thresholds say what they mean, and the default criterion fits what is compared."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model, sample_path
from onnxprobe import api
from onnxprobe.cli.main import app
from quantize_fixtures import quantize

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def zeros_model() -> onnx.ModelProto:
    """y = relu(-(x*x)) * 0: every intermediate after the Neg is exactly 0 in any runtime."""
    return make_model(
        [helper.make_node("Mul", ["x", "x"], ["sq"], name="sq"), helper.make_node("Neg", ["sq"], ["neg"], name="neg"),
         helper.make_node("Relu", ["neg"], ["zero"], name="relu"), helper.make_node("MatMul", ["zero", "w"], ["y"], name="mm")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(np.ones((4, 3), np.float32), "w")])


def test_comparing_nothing_is_an_error_and_lists_every_key(tmp_path):
    npz = tmp_path / "acts.npz"
    np.savez(npz, unrelated_a=np.zeros(3, np.float32), unrelated_b=np.ones(2, np.float32))
    out = tmp_path / "d.json"
    r = invoke("diff", sample_path("mlp"), "--vs-npz", npz, "--json", out)
    assert r.exit_code == 1 and "nothing was compared" in r.stderr, r.output
    d = json.loads(out.read_text())
    assert d["verdict"] == "error" and d["compared"] == 0 and not d["outputs_passed"]
    assert {u["name"] for u in d["unmatched_b"]} == {"unrelated_a", "unrelated_b"}
    assert all("no counterpart" in u["reason"] for u in d["unmatched_b"])
    assert {u["name"] for u in d["unmatched_a"]} >= {"y"} and all("not in the .npz" in u["reason"] for u in d["unmatched_a"])


def test_an_output_with_no_counterpart_fails_the_verdict(tmp_path):
    feeds = {"x": np.random.default_rng(0).random((4, 16), dtype=np.float32)}
    np.save(tmp_path / "x.npy", feeds["x"])
    res = api.layers(sample_path("mlp"), api.Selection(all=True), api.RunConfig(device="cpu"), api.InputSpec(arrays=feeds), save=True)
    acts = {k: v for k, v in res.arrays.items() if k != "y"}  # everything but the model output
    npz = tmp_path / "acts.npz"
    np.savez(npz, **acts)
    r = invoke("diff", sample_path("mlp"), "--vs-npz", npz, "--input", f"x={tmp_path / 'x.npy'}", "--all")
    assert r.exit_code == 1 and "could not be compared" in r.stderr and "'y'" in r.stderr, r.output
    # with the output there, the same comparison passes, and --map pairs a renamed key
    acts["renamed_y"] = res.arrays["y"]
    np.savez(npz, **acts)
    (tmp_path / "map.json").write_text(json.dumps({"y": "renamed_y"}))
    r = invoke("diff", sample_path("mlp"), "--vs-npz", npz, "--input", f"x={tmp_path / 'x.npy'}", "--all",
               "--map", tmp_path / "map.json", "--json", "-")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["verdict"] == "pass" and any(p["a"] == "y" and p["b"] == "renamed_y" and p["strategy"] == "map" for p in d["pairs"])


@pytest.mark.parametrize("metric", ["allclose", "max_abs", "mean_abs", "rmse", "max_rel", "cosine", "sqnr"])
def test_an_exact_match_passes_under_every_metric(tmp_path, metric):
    p = tmp_path / "zeros.onnx"
    onnx.save(zeros_model(), p)
    r = invoke("diff", p, "--vs-reference", "--all", "--metric", metric, "--json", "-")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    zero = next(x for x in d["pairs"] if x["b"] == "zero")
    assert zero["exact"] and zero["passed"] and zero["max_abs"] == 0
    assert zero["sqnr_db"] is None  # +inf: JSON says exact instead of a number
    r = invoke("diff", p, "--vs-reference", "--all", "--metric", metric, "--sort", "introduced")
    lines = [ln for ln in r.stdout.splitlines() if ln.split() and ln.split()[0].lstrip("▶").isdigit()]
    assert "exact" in next(ln for ln in lines if " zero " in ln) and "FAIL" not in r.stdout


def test_sort_introduced_puts_exact_pairs_last(tmp_path):
    p = tmp_path / "zeros.onnx"
    onnx.save(zeros_model(), p)
    res = api.diff(p, vs_reference=True, selection=api.Selection(all=True), config=api.RunConfig(device="cpu"))
    order = [r.pair.b.name for r in api.sort_results(res.results, "introduced")]
    exact = [r.pair.b.name for r in res.results if r.introduced is not None and r.introduced.exact]
    assert exact and order[-len(exact):] == [n for n in order if n in exact]


@pytest.mark.parametrize("flags, metric, text", [
    (["--min-sqnr", "25"], "sqnr", "SQNR >= 25 dB"),
    (["--min-cosine", "0.9999"], "cosine", "cosine >= 0.9999"),
    (["--metric", "cosine", "--min-cosine", "0.5"], "cosine", "cosine >= 0.5"),
    (["--atol", "0.01"], "allclose", "|a-b| <= 0.01"),
    (["--metric", "max_rel", "--rtol", "0.2"], "max_rel", "max rel <= 0.2"),
])
def test_a_threshold_implies_its_metric(flags, metric, text):
    r = invoke("diff", sample_path("mlp"), "--vs-reference", *flags, "--json", "-")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["criterion"].startswith(text)


@pytest.mark.parametrize("flags, needle", [
    (["--metric", "cosine", "--min-sqnr", "20"], "--min-sqnr is a threshold of --metric sqnr"),
    (["--min-sqnr", "20", "--min-cosine", "0.9"], "different criteria"),
    (["--metric", "sqnr", "--atol", "0.1"], "not of --metric sqnr"),
    (["--metric", "nope"], "choose one of"),
    (["--min-cosine", "-1"], "non-negative"),
    (["--min-cosine", "2"], "--min-cosine 2.0: a cosine similarity is at most 1"),
])
def test_conflicting_criteria_are_refused(flags, needle):
    r = invoke("diff", sample_path("mlp"), "--vs-reference", *flags)
    assert r.exit_code == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_quantized_against_float_defaults_to_sqnr_and_says_so(tmp_path):
    q = quantize("cnn", "qdq", tmp_path)
    r = invoke("diff", q, sample_path("cnn"), "--json", "-")
    d = json.loads(r.stdout)
    assert d["criterion"].startswith("SQNR >= 10 dB") and "quantized model against a float one" in d["criterion"]
    assert r.exit_code == 0 and d["verdict"] == "pass", (d["verdict_reason"], r.stderr)
    # allclose, the float default, would have failed the healthy int8 model's layers
    r = invoke("diff", q, sample_path("cnn"), "--metric", "allclose", "--json", "-")
    assert sum(not p["passed"] for p in json.loads(r.stdout)["pairs"]) > 0
    float_d = json.loads(invoke("diff", sample_path("cnn"), sample_path("cnn"), "--json", "-").stdout)
    assert float_d["criterion"].startswith("|a-b| <= 0.0001 + 0.001*|b|")
    # one float model on two runtimes: SQNR with an absolute floor (tests/test_openvino.py measures why)
    runtimes_d = json.loads(invoke("diff", sample_path("cnn"), "--vs-reference", "--json", "-").stdout)
    assert runtimes_d["criterion"].startswith("SQNR >= 60 dB or max|a-b| <= 1e-06") and "two runtimes" in runtimes_d["criterion"]


def test_a_criterion_with_an_absolute_floor_survives_its_json_round_trip():
    """merge-stats re-judges dataset pairs from the criterion in the report: the cross-runtime default
    (SQNR >= 60 dB or max|a-b| <= floor) must come back with its floor, or a near-silent pair the run
    passed would fail when merged."""
    from onnxprobe.stats.metrics import Tolerance, from_sums

    tol = Tolerance(metric="sqnr", min_sqnr=60.0, abs_floor=1e-6)
    back = Tolerance.from_dict(json.loads(json.dumps(tol.to_dict())))
    assert back == tol
    quiet = from_sums(max_abs=5e-7, argmax=0, sum_abs=5e-7, dd=2.5e-13, aa=1e-12, bb=1e-12, ab=1e-12 - 1.25e-13,
                      b_absmax=1e-6, excess=5e-7, max_rel=0.5, shape=(1,))
    assert tol.passes(quiet) and back.passes(quiet)
    assert Tolerance.from_dict({**tol.to_dict(), "abs_floor": None}).abs_floor is None
    with pytest.raises(ValueError):
        Tolerance.from_dict({**tol.to_dict(), "abs_floor": "tiny"})


def test_per_tensor_criteria_are_in_the_header_and_flags_say_why(tmp_path):
    """--atol logits:V judged logits by V while the header (table, JSON, HTML) said only the overall rule, so
    a row beyond it read 'ok'; and --metric mean_abs --atol 0.01 printed its rule without why. Each named
    tensor's rule is now in the header and JSON's per_tensor; the logits verdict is checked against numpy
    on onnx.reference's outputs for the same input."""
    from html import unescape

    from onnx.reference import ReferenceEvaluator

    m = onnx.load(str(sample_path("cnn")))
    w = next(t for t in m.graph.initializer if t.name == "fc.weight")
    w.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(w) * np.float32(1.05), "fc.weight"))
    a = tmp_path / "a.onnx"
    onnx.save(m, a)
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    la, lb = (ReferenceEvaluator(str(p)).run(["logits"], {"image": x})[0].astype(np.float64) for p in (a, sample_path("cnn")))
    err = float(np.max(np.abs(la - lb) - 1e-3 * np.abs(lb)))
    atol = round(err * 2, 6)  # logits pass by their own atol, and fail the default 1e-4
    assert err > 1e-4
    html = tmp_path / "r.html"
    r = invoke("diff", a, sample_path("cnn"), "--input", f"image={tmp_path / 'x.npy'}", "--atol", f"logits:{atol}",
               "--json", tmp_path / "d.json", "--html", html)
    assert r.exit_code == 0, r.output
    d = json.loads((tmp_path / "d.json").read_text())
    rule = f"'logits' |a-b| <= {atol:g} + 0.001*|b|"
    assert d["criterion"].startswith("|a-b| <= 0.0001 + 0.001*|b|") and rule in d["criterion"], d["criterion"]
    assert d["per_tensor"] == {"logits": {"metric": "allclose", "atol": atol, "rtol": 1e-3, "min_sqnr": 30.0, "min_cosine": 0.999}}
    assert [p["passed"] for p in d["pairs"] if p["b"] == "logits"] == [True]
    table = invoke("diff", a, sample_path("cnn"), "--input", f"image={tmp_path / 'x.npy'}", "--atol", f"logits:{atol}")
    assert rule in " ".join(table.stdout.split()), table.stdout  # the header, however it wraps
    assert rule in unescape(html.read_text())
    r = invoke("diff", a, sample_path("cnn"), "--metric", "mean_abs", "--atol", "0.01", "--json", "-")
    # --atol alone is an absolute metric's threshold: no default rtol added (tests/test_metric_edges.py)
    assert json.loads(r.stdout)["criterion"] == "mean|a-b| <= 0.01 (given: --metric mean_abs --atol 0.01)"
    # a threshold alone implies its metric, which the line does not say was given (it read '--metric sqnr --min-sqnr 25')
    r = invoke("diff", a, sample_path("cnn"), "--min-sqnr", "25", "--json", "-")
    assert json.loads(r.stdout)["criterion"] == "SQNR >= 25 dB (given: --min-sqnr 25)", r.stdout[:300]


def test_a_failing_output_fails_the_verdict_even_where_another_could_not_be_compared(tmp_path):
    """A compared output that disagrees is a finding: an output not compared beside it does not turn the
    verdict into an error (which says "compare more", and hid the failure), it is added to the fail's line."""
    m = make_model([helper.make_node("Relu", ["x"], ["y1"], name="relu"), helper.make_node("Neg", ["x"], ["y2"], name="neg")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                   [helper.make_tensor_value_info("y1", TensorProto.FLOAT, [2, 3]),
                    helper.make_tensor_value_info("y2", TensorProto.FLOAT, [2, 3])])
    onnx.save(m, tmp_path / "m.onnx")
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.savez(tmp_path / "acts.npz", y1=np.maximum(x, 0) + 1)  # y1 wrong by 1 everywhere, y2 absent
    out = tmp_path / "d.json"
    r = invoke("diff", tmp_path / "m.onnx", "--vs-npz", tmp_path / "acts.npz", "--input", f"x={tmp_path / 'x.npy'}", "--json", out)
    d = json.loads(out.read_text())
    assert r.exit_code == 1 and d["verdict"] == "fail", (d["verdict"], d["verdict_reason"])
    assert "1 of the outputs fail the criterion" in d["verdict_reason"] and "could not be compared" in d["verdict_reason"]
    assert "'y2'" in d["verdict_reason"]
    np.savez(tmp_path / "acts.npz", y1=np.maximum(x, 0))  # y1 right: only the uncompared y2 is left, an error
    r = invoke("diff", tmp_path / "m.onnx", "--vs-npz", tmp_path / "acts.npz", "--input", f"x={tmp_path / 'x.npy'}", "--json", out)
    d = json.loads(out.read_text())
    assert r.exit_code == 1 and d["verdict"] == "error" and "could not be compared" in d["verdict_reason"], d["verdict_reason"]
