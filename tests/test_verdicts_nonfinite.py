"""A verdict over NaN, Inf and empty tensors is earned: a pair with no finite value to compare is not
compared (never "exact", never a pass), NaN/Inf on one side only fails and the report says so, and
NaN/Inf alike on both sides is left out of the metrics out loud. Expected values come from numpy here."""

from __future__ import annotations

import json
import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model, sample_path
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.stats.metrics import METRICS, Tolerance
from onnxprobe.stats.host_sums import pair_sums
from onnxprobe.stats.pooled import PairSums

runner = CliRunner()
X = np.array([[0.2, 0.9, 0.4, 0.7], [0.6, 0.1, 0.8, 0.3]], np.float32)  # 4 below 0.5, 4 above


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def log_model(shift: float, absolute: bool = False) -> onnx.ModelProto:
    """y = Log(x - shift) (or Log(|x - shift|)): NaN where x < shift, unless ``absolute``."""
    nodes = [helper.make_node("Sub", ["x", "s"], ["d"], name="sub")]
    if absolute:
        nodes.append(helper.make_node("Abs", ["d"], ["d2"], name="abs"))
    nodes.append(helper.make_node("Log", ["d2" if absolute else "d"], ["y"], name="log"))
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
                      [numpy_helper.from_array(np.array(shift, np.float32), "s")])


def save(tmp_path, name, m) -> str:
    p = tmp_path / f"{name}.onnx"
    onnx.save(m, str(p))
    return str(p)


def run_json(tmp_path, *args):
    np.save(tmp_path / "x.npy", X)
    r = invoke("diff", *args, "--input", f"x={tmp_path / 'x.npy'}", "--json", "-")
    return r, (json.loads(r.stdout) if r.stdout.strip().startswith("{") else None)


@pytest.mark.parametrize("extra", [[], ["--separate-runs"], ["--metric", "sqnr"], ["--metric", "cosine"]])
def test_all_nan_on_both_sides_is_not_compared_and_not_a_pass(tmp_path, extra):
    m = save(tmp_path, "nan", log_model(2.0))  # every x < 2: Log of a negative everywhere
    r, d = run_json(tmp_path, m, m, *extra)
    assert r.exit_code == 1, r.output
    assert d["verdict"] == "error" and "nothing was compared" in d["verdict_reason"] and d["compared"] == 0
    y = d["pairs"][0]
    assert y["passed"] is None and y["exact"] is False and y["count"] == 0 and y["nonfinite_same"] == 8
    assert y["max_abs"] is None and y["cosine"] is None and y["sqnr_db"] is None
    assert "NaN/Inf on both sides" in y["problem"]


def test_all_nan_table_shows_no_metrics_and_says_why(tmp_path):
    m = save(tmp_path, "nan", log_model(2.0))
    np.save(tmp_path / "x.npy", X)
    r = invoke("diff", m, m, "--input", f"x={tmp_path / 'x.npy'}")
    assert r.exit_code == 1
    row = next(line for line in r.stdout.splitlines() if " y " in line and "Log" in line)
    assert "exact" not in row and "1.000000" not in row and " ok" not in row and "n/a" in row
    assert "not compared" in r.stdout and "outputs pass" not in r.stdout


def test_one_side_nan_fails_and_the_row_says_why(tmp_path):
    a = save(tmp_path, "a", log_model(0.5))  # NaN where x < 0.5
    b = save(tmp_path, "b", log_model(0.5, absolute=True))  # finite everywhere
    r, d = run_json(tmp_path, a, b)
    assert r.exit_code == 1 and d["verdict"] == "fail"
    y = d["pairs"][0]
    want_mismatch = int((X < 0.5).sum())
    assert y["passed"] is False and y["nonfinite_mismatch"] == want_mismatch and y["count"] == 8 - want_mismatch
    np.save(tmp_path / "x.npy", X)
    text = invoke("diff", a, b, "--input", f"x={tmp_path / 'x.npy'}").stdout
    assert "FAIL NaN/Inf" in text and f"NaN/Inf mismatch at {want_mismatch} position(s)" in text


@pytest.mark.parametrize("extra", [[], ["--separate-runs"]])
def test_nan_against_minus_inf_fails_and_the_row_says_both_sides_are_non_finite(tmp_path, extra):
    """NaN on A where B has -inf (Log of a negative, Log of 0): both sides non-finite, not alike; the line under
    the table does not call it NaN/Inf on one side only."""
    a = save(tmp_path, "a", log_model(0.5))  # NaN where x < 0.5
    relu = log_model(0.5)
    relu.graph.node.insert(1, helper.make_node("Relu", ["d"], ["r"], name="relu"))
    relu.graph.node[2].input[0] = "r"  # -inf where x < 0.5: Log(0)
    b = save(tmp_path, "b", relu)
    with np.errstate(all="ignore"):
        ya, yb = np.log(X.astype(np.float64) - 0.5), np.log(np.maximum(X.astype(np.float64) - 0.5, 0))
    want = int(np.sum(~np.isfinite(ya) & ~np.isfinite(yb) & ~((np.isnan(ya) & np.isnan(yb)) | (ya == yb))))
    assert want == 4  # the oracle: NaN against -inf at every x < 0.5
    r, d = run_json(tmp_path, a, b, *extra)
    assert r.exit_code == 1 and d["verdict"] == "fail", r.output
    y = d["pairs"][0]
    assert y["passed"] is False and y["nonfinite_mismatch"] == want and y["count"] == 8 - want
    np.save(tmp_path / "x.npy", X)
    text = " ".join(invoke("diff", a, b, "--input", f"x={tmp_path / 'x.npy'}", *extra).stdout.split())
    assert f"NaN/Inf mismatch at {want} position(s)" in text and "a different one on each" in text, text


def test_nan_alike_on_both_sides_is_left_out_out_loud(tmp_path):
    m = save(tmp_path, "m", log_model(0.5))
    r, d = run_json(tmp_path, m, m)
    assert r.exit_code == 0 and d["verdict"] == "pass"
    y = d["pairs"][0]
    assert y["count"] == int((X >= 0.5).sum()) and y["nonfinite_same"] == int((X < 0.5).sum())
    np.save(tmp_path / "x.npy", X)
    text = invoke("diff", m, m, "--input", f"x={tmp_path / 'x.npy'}").stdout
    assert "NaN/Inf on both sides alike, left out" in text


def test_all_inf_vs_reference_is_not_a_pass(tmp_path):
    inf = make_model([helper.make_node("Div", ["x", "z"], ["y"], name="div")],
                     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
                     [numpy_helper.from_array(np.zeros((), np.float32), "z")])
    m = save(tmp_path, "inf", inf)
    r, d = run_json(tmp_path, m, "--vs-reference")
    assert r.exit_code == 1 and d["verdict"] == "error", r.output
    assert d["pairs"][0]["passed"] is None and d["pairs"][0]["exact"] is False


def test_all_nan_dataset_is_not_a_pass_and_merges_to_no_pass(tmp_path):
    m = save(tmp_path, "nan", log_model(2.0))
    ds = tmp_path / "ds"
    ds.mkdir()
    for i in range(2):
        np.savez(ds / f"s{i}.npz", x=X + i * 0.01)
    out = tmp_path / "d.json"
    r = invoke("diff", m, m, "--inputs-dir", ds, "--json", out)
    assert r.exit_code == 1, r.output
    d = json.loads(out.read_text())
    assert d["verdict"] == "error" and d["pairs"][0]["count"] == 0 and d["pairs"][0]["nonfinite_same"] == 16
    text = invoke("diff", m, m, "--inputs-dir", ds).stdout
    assert "SQNR per sample" not in text and "not compared" in text
    merged = invoke("merge-stats", out, "--json", "-")
    assert merged.exit_code == 1 and json.loads(merged.stdout)["verdict"] != "pass"
    row = json.loads(merged.stdout)["pairs"][0]  # not compared, as in the diff: not a fail of a criterion
    assert row["passed"] is None and "no finite value" in row["problem"] and json.loads(merged.stdout)["compared"] == 0


def test_an_empty_feed_compares_nothing_and_says_so(tmp_path):
    for extra in ([str(sample_path("dynamic_batch"))], ["--vs-reference"]):
        r = invoke("diff", sample_path("dynamic_batch"), *extra, "--shape", "x=0x3x8x8", "--json", "-")
        assert r.exit_code == 1, r.output
        d = json.loads(r.stdout)
        assert d["verdict"] == "error" and d["compared"] == 0 and "nothing was compared" in d["verdict_reason"]
        assert all(p["passed"] is None and p["exact"] is False and "0 elements" in p["problem"] for p in d["pairs"])
        assert not any("one-run diff failed" in n for n in d["notes"]), d["notes"]  # nothing internal leaks


def test_an_empty_intermediate_beside_a_compared_output_is_not_counted(tmp_path):
    """A Slice that keeps nothing: its pair is not compared (n/a), the output beside it still judged."""
    m = make_model([helper.make_node("Slice", ["x", "st", "en"], ["e"], name="slice"),
                    helper.make_node("Relu", ["x"], ["y"], name="relu"),
                    helper.make_node("Identity", ["e"], ["e_out"], name="id")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
                   [numpy_helper.from_array(np.array([1], np.int64), "st"), numpy_helper.from_array(np.array([1], np.int64), "en")])
    p = save(tmp_path, "slice", m)
    r, d = run_json(tmp_path, p, p, "--all")
    assert r.exit_code == 0 and d["verdict"] == "pass", r.output
    e = next(q for q in d["pairs"] if q["a"] == "e")
    assert e["passed"] is None and e["count"] == 0 and "0 elements" in e["problem"]
    assert d["compared"] == 1 and next(q for q in d["pairs"] if q["a"] == "y")["passed"] is True  # e_out is empty too


def test_metrics_over_no_finite_pair_are_empty_under_every_criterion():
    nan = np.full((2, 3), np.nan, np.float32)
    s = pair_sums(nan, nan)
    m = s.metrics()
    assert s.count == 0 and m.empty and not m.exact
    assert all(not Tolerance(metric=k).passes(m) for k in METRICS)
    d = m.to_dict()
    assert d["max_abs"] is None and d["cosine"] is None and d["sqnr_db"] is None and d["exact"] is False
    # pooled with a finite sample, the finite pairs are measured (numpy float64 oracle)
    a, b = np.array([1.0, 2.0, 3.0], np.float32), np.array([1.5, 2.0, 2.0], np.float32)
    both = PairSums().merge(pair_sums(nan.reshape(-1)[:3], nan.reshape(-1)[:3], sample=0)).merge(pair_sums(a, b, sample=1))
    got = both.metrics()
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert got.count == 3 and not got.empty
    assert math.isclose(got.max_abs, float(np.max(np.abs(a64 - b64))))
    assert math.isclose(got.cosine, float(a64 @ b64 / np.linalg.norm(a64) / np.linalg.norm(b64)), rel_tol=1e-12)


def test_api_verdict_over_all_nan_is_an_error(tmp_path):
    m = save(tmp_path, "nan", log_model(2.0))
    res = api.diff(m, m, inputs=api.InputSpec(arrays={"x": X}))
    verdict, why = res.verdict()
    assert verdict == "error" and res.compared == 0
    assert res.results[0].passed is None and res.results[0].metrics.empty


def test_the_debugger_says_a_pair_was_not_compared(tmp_path):
    m = save(tmp_path, "nan", log_model(2.0))
    np.save(tmp_path / "x.npy", X)
    script = tmp_path / "s.txt"
    script.write_text("match y\n")
    r = invoke("debug", m, m, "--input", f"x={tmp_path / 'x.npy'}", "--script", script)
    assert r.exit_code == 0, r.output
    assert "not compared: no finite value" in r.stdout and "SQNR" not in r.stdout and "pass" not in r.stdout.split("not compared")[1]


def test_merged_shards_judge_an_output_on_the_shard_that_has_values(tmp_path):
    """y = Log(x - 10): all NaN for one shard's inputs (x < 10), finite for the other's. One diff over
    both shards passes; their merge must too (a shard's 'not compared' is a fact of its data, not of the
    matching), and a merge of two all-NaN shards stays an error."""
    m = save(tmp_path, "log10", log_model(10.0))
    reports = []
    for k, base in enumerate((0.0, 20.0, 0.0)):  # NaN, finite, NaN
        ds = tmp_path / f"ds{k}"
        ds.mkdir()
        for i in range(2 + k // 2):  # the third shard has 3 samples: not the first one's statistics again
            np.savez(ds / f"s{i}.npz", x=X + base + i * 0.5 + k * 0.01)
        out = tmp_path / f"d{k}.json"
        invoke("diff", m, m, "--inputs-dir", ds, "--json", out)
        reports.append(out)
    assert json.loads(reports[0].read_text())["verdict"] == "error"
    merged = invoke("merge-stats", reports[0], reports[1], "--json", "-")
    d = json.loads(merged.stdout)
    assert merged.exit_code == 0 and d["verdict"] == "pass", d["verdict_reason"]
    both_nan = invoke("merge-stats", reports[0], reports[2], "--json", "-")
    assert both_nan.exit_code == 1 and json.loads(both_nan.stdout)["verdict"] == "error"


def test_nan_alike_counts_over_samples_of_different_shapes(tmp_path):
    """A dataset whose samples differ in shape: the NaN positions alike on both sides are still counted
    (each sample's sums keep their positions), in the diff and after merge-stats."""
    m = log_model(0.5)
    for t in (*m.graph.input, *m.graph.output):
        t.type.tensor_type.shape.dim[0].dim_param = "n"
    p = save(tmp_path, "dyn", m)
    ds = tmp_path / "ds"
    ds.mkdir()
    samples = [X, np.concatenate([X, X[:1] + 0.05])]  # 2x4 and 3x4
    for i, s in enumerate(samples):
        np.savez(ds / f"s{i}.npz", x=s)
    out = tmp_path / "d.json"
    r = invoke("diff", p, p, "--inputs-dir", ds, "--json", out)
    assert r.exit_code == 0, r.output
    y = next(q for q in json.loads(out.read_text())["pairs"] if q["a"] == "y")
    want_nan = sum(int((s < 0.5).sum()) for s in samples)
    assert y["count"] == sum(s.size for s in samples) - want_nan and y["nonfinite_same"] == want_nan
    merged = invoke("merge-stats", out, "--json", "-")
    assert merged.exit_code == 0, merged.output
    assert next(q for q in json.loads(merged.stdout)["pairs"] if q["a"] == "y")["nonfinite_same"] == want_nan
