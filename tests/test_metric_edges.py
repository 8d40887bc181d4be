"""Edges of diff's metrics, against numpy float64: the host's allclose excess and max relative error in
float64, max_rel where b is tiny or zero, the threshold of the absolute metrics, no RuntimeWarning from the
metric code, the per-sample SQNR line of a dataset diff and the depth sparkline."""

from __future__ import annotations

import json
import warnings

import numpy as np
import onnx
from conftest import empty_slice_model, make_model
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app
from onnxprobe.stats.metrics import Tolerance
from onnxprobe.stats.host_sums import pair_sums


def _affine(path, w: float, c: float, dtype=TensorProto.FLOAT, np_dt=np.float32, dim="N") -> str:
    """x -> Mul(w) -> Add(c) -> Neg -> out, x of one dynamic dimension (QA's models)."""
    nodes = [helper.make_node("Mul", ["x", "w"], ["m"], name="mul"), helper.make_node("Add", ["m", "c"], ["y"], name="add"),
             helper.make_node("Neg", ["y"], ["out"], name="neg")]
    m = make_model(nodes, [helper.make_tensor_value_info("x", dtype, [dim])], [helper.make_tensor_value_info("out", dtype, [dim])],
                   [numpy_helper.from_array(np.array(w, np_dt), "w"), numpy_helper.from_array(np.array(c, np_dt), "c")])
    onnx.save(m, str(path))
    return str(path)


def _oracle(a: np.ndarray, b: np.ndarray, rtol: float) -> tuple[float, float]:
    """numpy float64: max(|a-b| - rtol |b|), and max |a-b| / |b| (0 where both are 0, inf where only b is)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    d, absb = np.abs(a64 - b64), np.abs(b64)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(d == 0, 0.0, d / absb)
    return float((d - rtol * absb).max()), float(rel.max())


def test_host_excess_and_max_rel_are_float64():
    # a pair 2^-10 apart at b = 1: one float64 ulp-ish over rtol, which float32(rtol) rounds up to 2^-10
    rtol = 0.0009765624999
    b = np.ones(8, np.float32)
    a = b + np.float32(2.0 ** -10)
    s = pair_sums(a, b, rtol)
    m = s.metrics(rtol)
    want_excess, want_rel = _oracle(a, b, rtol)
    assert want_excess > 0 and m.allclose_excess == want_excess
    assert not Tolerance("allclose", atol=0.0, rtol=rtol).passes(m)
    rng = np.random.default_rng(0)
    b = rng.normal(size=5000).astype(np.float32)
    a = (b * (1 + rng.normal(scale=1e-3, size=5000))).astype(np.float32)
    m = pair_sums(a, b, 1e-3).metrics(1e-3)
    want_excess, want_rel = _oracle(a, b, 1e-3)
    assert m.allclose_excess == want_excess and m.max_rel == want_rel  # float64 exactly, not float32's rounding


def test_host_path_diff_judges_in_float64(tmp_path):
    # A = 1 + 2^-10 where B = 1 (x = 0): allclose with atol 0 and rtol just under 2^-10 fails
    a = _affine(tmp_path / "a.onnx", 1.0, 1.0 + 2.0 ** -10)
    b = _affine(tmp_path / "b.onnx", 1.0, 1.0)
    np.savez(tmp_path / "s.npz", x=np.zeros(4, np.float32))
    out = tmp_path / "r.json"
    r = CliRunner().invoke(app, ["diff", a, b, "--inputs-dir", str(tmp_path / "s.npz"), "--atol", "0",
                                 "--rtol", "0.0009765624999", "--separate-runs", "--json", str(out)])
    d = json.loads(out.read_text())
    assert d["pairs"][-1]["passed"] is False and r.exit_code == 1, r.output


def test_one_sample_is_said_in_the_singular(tmp_path):
    a = _affine(tmp_path / "a.onnx", 2.0, 0.5)
    b = _affine(tmp_path / "b.onnx", 2.0, 0.0)
    (tmp_path / "ds").mkdir()
    np.savez(tmp_path / "ds" / "s0.npz", x=np.full(5, 3.0, np.float32))
    r = CliRunner().invoke(app, ["diff", a, b, "--inputs-dir", str(tmp_path / "ds")])
    assert "pooled over 1 sample:" in r.output, r.output


def _max_rel_run(tmp_path, wa: float, wb: float, *flags, dtype=TensorProto.FLOAT, np_dt=np.float32) -> dict:
    a = _affine(tmp_path / "a.onnx", wa, 0.0, dtype, np_dt)
    b = _affine(tmp_path / "b.onnx", wb, 0.0, dtype, np_dt)
    out = tmp_path / "r.json"
    r = CliRunner().invoke(app, ["diff", a, b, "--all", "--metric", "max_rel", "--rtol", "1e-6", *flags, "--json", str(out)])
    assert r.exit_code == 1 and "internal error" not in r.output, r.output
    return json.loads(out.read_text())


def test_max_rel_of_subnormal_references(tmp_path):
    # A = 1.5 B with B subnormal: max_rel 0.5 (numpy float64 of the very tensors), where |b| + 1e-30 read 2e-10
    for w, dt, np_dt in ((1e-40, TensorProto.FLOAT, np.float32), (1e-310, TensorProto.DOUBLE, np.float64)):
        x = np.ones(4, np_dt)
        for flags in ((), ("--separate-runs",)):
            d = _max_rel_run(tmp_path, 1.5 * w, w, "--input", "x=[1,1,1,1]", *flags, dtype=dt, np_dt=np_dt)
            want = _oracle(x * np_dt(1.5 * w), x * np_dt(w), 0.0)[1]
            for p in d["pairs"]:
                assert abs(p["max_rel"] - want) <= 1e-12 * want and p["passed"] is False, (flags, p)


def test_max_rel_where_the_reference_is_zero(tmp_path):
    # b = 0, a = 1e-35: huge (|a-b| over float32's smallest subnormal), never 1e-5 passing --rtol 1e-6
    for flags in (("--shape", "x=20000"), ("--input", "x=[1,1,1,1]"), ("--shape", "x=20000", "--separate-runs")):
        d = _max_rel_run(tmp_path, 1e-35, 0.0, *flags)
        assert all(p["max_rel"] == "inf" or p["max_rel"] > 1e9 for p in d["pairs"]), (flags, d["pairs"])
        assert all(p["passed"] is False for p in d["pairs"])
    # |a - b| = 1e9 over 0 overflows: "inf" in JSON (README's word for a non-finite number), not null
    for flags in (("--shape", "x=20000"), ("--input", "x=[1,1,1,1]")):
        d = _max_rel_run(tmp_path, 1e9, 0.0, *flags)
        assert [p["max_rel"] for p in d["pairs"]] == ["inf"] * 3
        assert d["in_graph"] == 3  # one run: 20000 elements (80 KB) in the graph's rows, 4 summed on the host
    # 0 against 0: no relative error
    s = pair_sums(np.zeros(3, np.float32), np.zeros(3, np.float32))
    assert s.metrics().max_rel == 0.0 and pair_sums(np.zeros(3), np.zeros(3)).metrics().max_rel == 0.0


def test_max_rel_pooled_and_merged():
    # pooled samples: the max over them, inf kept through the JSON sums
    from onnxprobe.stats.pooled import PairSums, pool
    b = np.array([1e-40, 2.0, 0.0], np.float32)
    a = np.array([1.5e-40, 2.0, 0.0], np.float32)
    s0, s1 = pair_sums(a, b, sample=0), pair_sums(np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 3.0]), sample=1)
    assert abs(s0.metrics().max_rel - _oracle(a, b, 0.0)[1]) < 1e-12
    merged = pool([s0, s1])
    assert merged.metrics().max_rel == np.inf and merged.max_rel_sample == 1
    back = PairSums.from_dict(json.loads(json.dumps(merged.to_dict())))
    assert back.metrics().max_rel == np.inf and back.metrics().to_dict()["max_rel"] == "inf"


def test_no_runtime_warning_leaves_the_metric_code(tmp_path):
    # values near float32's and float64's ends, zeros against large values, NaN/Inf: every path of pair_sums
    # (float32 fast, masked float64, light) and sqnr_db, with RuntimeWarnings as errors
    import itertools

    from onnxprobe.stats.metrics import sqnr_db

    grid = {np.float32: [0.0, 1e-45, 1e-40, 1.0, 1e9, 3.3e38, -3.3e38, np.inf, -np.inf, np.nan],
            np.float64: [0.0, 5e-324, 1.0, 1e154, 1.7e308, -1.7e308, np.inf, np.nan],
            np.float16: [0.0, 6e-8, 1.0, 65000.0, -65000.0, np.inf, np.nan]}
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for dt, vals in grid.items():
            for x, y in itertools.product(vals, repeat=2):
                for n, rtol in itertools.product((1, 3), (0.0, 1e-3, 2.0, 1e300)):
                    a, b = np.full(n, x, dt), np.full(n, y, dt)
                    a[0] = b[0] = 1 if n > 1 else a[0]
                    s = pair_sums(a, b, rtol)
                    s.metrics(rtol).to_dict(), s.to_dict(), s.spread(), pair_sums(a, b, light=True).introduced()
                    sqnr_db(a, b)
    # the CLI's host path on QA's repro (b = 0 against a = 1e9; values near 3.3e38 with --rtol 2)
    a, b = _affine(tmp_path / "a.onnx", 1e9, 0.0), _affine(tmp_path / "b.onnx", 0.0, 0.0)
    big, neg = _affine(tmp_path / "big.onnx", 3.3e38, 0.0), _affine(tmp_path / "neg.onnx", -3.3e38, 0.0)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for x, y, flags in ((a, b, ()), (a, b, ("--separate-runs",)), (big, neg, ("--rtol", "2")),
                            (big, neg, ("--rtol", "2", "--separate-runs"))):
            r = CliRunner().invoke(app, ["diff", x, y, "--all", "--input", "x=[1,1,1,1]", *flags])
            assert r.exit_code in (0, 1), r.output
    assert not [w for w in seen if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in seen]


def test_atol_alone_is_the_threshold_of_the_absolute_metrics(tmp_path):
    # max|a-b| = 5 against |b| ~ 1e4: --metric max_abs --atol 0.5 fails (0.5 + 0.001 * 1e4 let it pass)
    a = _affine(tmp_path / "a.onnx", 1.0, 10005.0)
    b = _affine(tmp_path / "b.onnx", 1.0, 10000.0)
    x = np.zeros(4, np.float32)
    err = np.abs((x + 10005.0).astype(np.float64) - (x + 10000.0))  # numpy float64: the errors, all 5
    for metric, value in (("max_abs", err.max()), ("mean_abs", err.mean()), ("rmse", np.sqrt((err ** 2).mean()))):
        out = tmp_path / "r.json"
        r = CliRunner().invoke(app, ["diff", a, b, "--input", "x=[0,0,0,0]", "--metric", metric, "--atol", "0.5",
                                     "--json", str(out)])
        d = json.loads(out.read_text())
        assert value > 0.5 and r.exit_code == 1 and d["pairs"][-1]["passed"] is False, (metric, r.output)
        assert d["criterion"].startswith(f"{'rmse' if metric == 'rmse' else metric.replace('_abs', '|a-b|')} <= 0.5 (given")
        # with --rtol too, both: 0.5 + 0.001 * max|b| (10) passes the 5
        r = CliRunner().invoke(app, ["diff", a, b, "--input", "x=[0,0,0,0]", "--metric", metric, "--atol", "0.5",
                                     "--rtol", "0.001"])
        assert r.exit_code == 0, r.output
    t = Tolerance.from_flags("max_abs", atol=0.5)
    assert (t.atol, t.rtol, t.rule) == (0.5, 0.0, "max|a-b| <= 0.5") and "default" not in t.why
    assert Tolerance.from_flags("max_abs").rtol == 1e-3  # neither given: both defaults


def test_sqnr_per_sample_keeps_minus_inf_and_leaves_out_samples_without_one(tmp_path):
    # QA's repro: B all zeros where A is not in s0 (SQNR -inf), 21.6 dB in s1, and an empty s2
    a = _affine(tmp_path / "a.onnx", 2.0, 0.5)
    b = _affine(tmp_path / "b.onnx", 2.0, 0.0)
    ds = tmp_path / "ds"
    ds.mkdir()
    xs = [np.zeros(5, np.float32), np.full(5, 3.0, np.float32), np.zeros(0, np.float32)]
    for k, x in enumerate(xs):
        np.savez(ds / f"s{k}.npz", x=x)
    out = tmp_path / "r.json"
    for flags in ((), ("--separate-runs",)):
        r = CliRunner().invoke(app, ["diff", a, b, "--inputs-dir", str(ds), "--json", str(out), *flags])
        sp = json.loads(out.read_text())["pairs"][-1]["sqnr_per_sample"]
        bb = float(np.sum((-(xs[1].astype(np.float64) * 2.0)) ** 2))  # numpy float64: s1's own SQNR
        want = 10 * np.log10(bb / (0.5 ** 2 * 5))
        assert sp["min"] == "-inf" and sp["min_sample"] == "s0.npz" and sp["not_compared"] == 1 and sp["nonfinite"] == 0, sp
        assert sp["p5"] == "-inf" and sp["median"] == "-inf"  # two ranked samples: the inverted CDF's lower one
        line = next(x for x in r.output.splitlines() if "SQNR per sample" in x)
        assert "min -inf dB (s0.npz)" in line and "exact" not in line and "1 with nothing compared" in line, line
    from onnxprobe.stats.pooled import PairSums, pool
    s = pool([pair_sums(np.full(5, 0.5, np.float32), np.zeros(5, np.float32), sample=0),
              pair_sums(np.full(5, 6.5, np.float32), np.full(5, 6.0, np.float32), sample=1),
              pair_sums(np.zeros(0, np.float32), np.zeros(0, np.float32), sample=2)])
    assert abs(s.per_sample[1] - want) < 1e-9 and s.per_sample[2] is None
    # NaN/Inf on one side beside finite pairs that agree: not an exact sample, left out and counted
    s = pool([s, pair_sums(np.array([1.0, np.nan], np.float32), np.array([1.0, 2.0], np.float32), sample=3)])
    back = PairSums.from_dict(json.loads(json.dumps(s.to_dict())))  # merge-stats reads them back
    for x in (s, back):
        sp = x.spread()
        assert (sp["min"], sp["not_compared"], sp["nonfinite"]) == ("-inf", 1, 1), sp
        assert sp["median"] == "-inf" and x.per_sample[3] != np.inf


def test_the_depth_sparkline_draws_exact_pairs_full_and_noise_as_equal(tmp_path):
    from onnxprobe.report.diff import SPARK, sparkline

    full, low = SPARK[-1], SPARK[0]
    # exact pairs are drawn at the cap: full blocks, also where every value is there or the rest are blanks
    assert sparkline([140.0, 140.0, 140.0]) == full * 3 and sparkline([140.0, None, -np.inf]) == full + "  "
    # 2e-7 dB apart is rounding noise, not a step from the lowest block to the highest
    assert sparkline([30.37086749, 30.37086729]) == low * 2
    assert sparkline([20.0, 140.0]) == low + full and sparkline([10.0, 20.0, 30.0, 40.0], room=2) == low + full
    # the best pair at or past the 140 dB cap: pairs ~1 dB below it are as good, not a step down (█▁█, QA:
    # exact, 139.08 and 140.20 dB with the cap at 140.20); more than 3 dB below is scaled as before
    assert sparkline([140.2, 139.08, 140.2], cap=140.2) == full * 3
    assert sparkline([140.2, 120.0, 60.0], cap=140.2)[1:] == SPARK[round(60 / 80.2 * (len(SPARK) - 1))] + low
    # one exact pair, two not compared (empty tensors): "every compared pair exact", never "every pair exact"
    m = empty_slice_model()
    onnx.save(m, str(tmp_path / "a.onnx"))
    r = CliRunner().invoke(app, ["diff", str(tmp_path / "a.onnx"), str(tmp_path / "a.onnx"), "--all"], env={"COLUMNS": "200"})
    (line,) = [x for x in r.output.splitlines() if x.startswith("SQNR along depth")]
    assert line == "SQNR along depth: every compared pair exact (1 of 3; 2 not compared)", r.output


def test_one_run_diff_judges_allclose_and_max_rel_as_float64_does(tmp_path):
    # the same boundary pairs as above, large enough to be measured in the one-run graph, whose excess
    # and quotient are float32: one rounded past the threshold must not decide the verdict (QA)
    x = tmp_path / "x.npy"
    np.save(x, np.zeros(100_000, np.float32))
    a = _affine(tmp_path / "a.onnx", 1.0, 1.0 + 2.0 ** -10)
    b = _affine(tmp_path / "b.onnx", 1.0, 1.0)
    out = tmp_path / "r.json"
    r = CliRunner().invoke(app, ["diff", a, b, "--input", f"x={x}", "--atol", "0", "--rtol", "0.0009765624999", "--json", str(out)])
    d = json.loads(out.read_text())
    assert d["pairs"][-1]["passed"] is False and r.exit_code == 1, r.output
    # max_rel: 2^-9 / 3, a quotient float32 rounds; a threshold between the two flips a float32 verdict
    q = 2.0 ** -9 / 3
    rtol = (q + float(np.float32(q))) / 2
    a = _affine(tmp_path / "a3.onnx", 1.0, 3.0 + 2.0 ** -9)
    b = _affine(tmp_path / "b3.onnx", 1.0, 3.0)
    r = CliRunner().invoke(app, ["diff", a, b, "--input", f"x={x}", "--metric", "max_rel", "--rtol", repr(rtol),
                                 "--json", str(out)])
    d = json.loads(out.read_text())
    assert d["pairs"][-1]["passed"] is (q <= rtol) and r.exit_code == (0 if q <= rtol else 1), r.output
    assert d["pairs"][-1]["max_rel"] == q


def test_device_metrics_judge_allclose_and_max_rel_as_float64_does():
    # the metrics model that runs where the tensors are (CUDA; OrtValues on the CPU here) takes the excess
    # and the quotient in float32 too: near the threshold the host's float64 numbers decide
    import onnxruntime as ort

    from onnxprobe.compare.measure import sums_of

    q = 2.0 ** -9 / 3
    for a, b, tol, want in ((1.0 + 2.0 ** -10, 1.0, Tolerance("allclose", atol=0.0, rtol=0.0009765624999), False),
                            (3.0 + 2.0 ** -9, 3.0, Tolerance("max_rel", rtol=(q + float(np.float32(q))) / 2), True)):
        va, vb = (ort.OrtValue.ortvalue_from_numpy(np.full(64, v, np.float32)) for v in (a, b))
        s = sums_of(va, vb, tol.measured_rtol, tolerance=tol)
        assert tol.passes(s.metrics(tol.measured_rtol)) is want, (tol, s)
