"""Statistics and pair metrics of values float64 cannot square (past ~1.3e154, down to subnormals) and of
int64 values float64 cannot hold (past 2^53): every number against numpy float64 on the data scaled by
a power of two (exact), or against Python integers; never a RuntimeWarning on the way."""

from __future__ import annotations

import json
import math
import warnings
from fractions import Fraction

import numpy as np
import onnxruntime as ort
import pytest
from conftest import make_model
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app
from onnxprobe.stats.moments import Moments
from onnxprobe.stats.host_sums import pair_sums
from onnxprobe.stats.pooled import PairSums
from onnxprobe.stats.tensor_stats import TensorStats

runner = CliRunner()

EXTREME = {
    "1e160": np.array([1e160, 2e160, -3e160, 7e159, 2.5e160]),
    "near-max": np.array([1.7e308, -1.7e308, 1e308, 1.79e308, -5e307]),
    "1e-170": np.array([1e-170, 3e-170, -2e-170, 5e-171]),
    "subnormal": np.array([5e-324, 1e-323, 2e-323, 0.0, 4e-323]),
}


def oracle(x: np.ndarray) -> dict:
    """mean, std, abs_mean, norm by numpy float64 on x scaled to about 1 by a power of two."""
    k = math.frexp(float(np.abs(x).max()))[1]
    y = _scaled(x, k)
    back = (lambda v: math.ldexp(float(v), k))
    return {"mean": back(y.mean()), "std": back(y.std()), "abs_mean": back(np.abs(y).mean()),
            "norm": back(np.linalg.norm(y)) if k < 1023 else math.inf}


def close(got: float, want: float, scale: float, rel: float = 1e-12) -> bool:
    return got == want or abs(got - want) <= rel * scale


def check(st: TensorStats, x: np.ndarray, rel: float = 1e-12) -> None:
    want, scale = oracle(x), float(np.abs(x).max())
    for k in ("mean", "std", "abs_mean"):
        assert close(getattr(st, k), want[k], scale, rel), (k, getattr(st, k), want[k])
    assert st.to_dict()["std"] is not None and st.to_dict()["abs_mean"] is not None


@pytest.mark.parametrize("name", sorted(EXTREME))
def test_host_statistics_of_extreme_float64(name):
    """std read null (empty in CSV) past ~1.3e154: s2 was kept as Σ((x-c)/h)²·h², h² overflowing."""
    x = EXTREME[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        st = TensorStats.from_array(x)
        check(st, x)
        whole = st.merge(TensorStats.from_array(x[:2]))  # Chan's merge, moving both to a common unit
        check(whole, np.concatenate([x, x[:2]]))
        tiny = st.merge(TensorStats.from_array(np.array([1.0, 2.0])))  # units 2^k and 1 meet
        check(tiny, np.concatenate([x, [1.0, 2.0]]))


@pytest.mark.parametrize("name", sorted(EXTREME))
def test_dataset_moments_of_extreme_float64(name):
    """layers --inputs-dir (Moments, exact partials) left mean and std empty: Σx² overflowed its partials."""
    x = EXTREME[name]
    m = Moments.from_stats(TensorStats.from_array(x)).merge(Moments.from_stats(TensorStats.from_array(x[1:])))
    m = Moments.from_dict(json.loads(json.dumps(m.to_dict())))  # what merge-stats reads back
    check(m.stats(), np.concatenate([x, x[1:]]))
    if m.exp == 0:  # reports before units: no exp, sums in units of 1 (sums in other units read so are no values' sums)
        assert Moments.from_dict({k: v for k, v in m.to_dict().items() if k != "exp"}).to_dict() == m.to_dict()


def _f64_model():
    x = helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["a", "b"])
    y = helper.make_tensor_value_info("y", TensorProto.DOUBLE, ["a", "b"])
    return make_model([helper.make_node("Mul", ["x", "w"], ["m"], name="mul"), helper.make_node("Identity", ["m"], ["y"], name="out")],
                      [x], [y], [numpy_helper.from_array(np.array(1.0), "w")], opset=17)


@pytest.mark.parametrize("name", sorted(EXTREME))
def test_in_graph_rows_of_extreme_float64(tmp_path, name):
    """mark --stats: the careful row scaled Σ((x-c)/h)² back by h² (sumsq_d = inf)."""
    import onnx

    src, out = tmp_path / "m.onnx", tmp_path / "s.onnx"
    onnx.save(_f64_model(), src)
    r = runner.invoke(app, ["mark", str(src), "--all", "--stats", "-o", str(out)])
    assert r.exit_code == 0, r.output
    x = EXTREME[name]
    s = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    rows = [v for o, v in zip(s.get_outputs(), s.run(None, {"x": x.reshape(1, -1)})) if o.name.startswith("onnxprobe.stats:")]
    assert rows
    for row in rows:
        assert np.isfinite(row).all()
        check(TensorStats.from_row(row), x)


def test_layers_of_extreme_float64_host_and_graph(tmp_path):
    """The QA repro: layers on [1e160, 2e160, -3e160] (on the host) and on 300,000 such values (in the
    graph, rerun in the careful form)."""
    import onnx

    src = tmp_path / "m.onnx"
    onnx.save(_f64_model(), src)
    for x in (np.array([[1e160, 2e160, -3e160]]), np.tile([1e160, 2e160, -3e160], (1, 100_000))):
        np.savez(tmp_path / "in.npz", x=x)
        r = runner.invoke(app, ["layers", str(src), "--inputs", str(tmp_path / "in.npz"), "--format", "json", "--no-cache"])
        assert r.exit_code == 0, r.output
        rows = json.loads(r.stdout)
        assert rows
        want = oracle(x.ravel())
        for row in rows:
            assert close(row["std"], want["std"], 3e160) and close(row["mean"], want["mean"], 3e160)


def test_pair_sums_of_extreme_float64_match_numpy():
    """diff read cosine 0 and -inf dB for a pair 1e-7 apart at 1e160 (Σa² overflowed; 'overflow encountered
    in dot' printed): the sums are kept in a unit near the values."""
    for name, x in EXTREME.items():
        a, b = x * (2.0 if name == "subnormal" else 1 - 1e-7), x
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            s = pair_sums(a, b)
            m = s.metrics()
        k = math.frexp(float(np.abs(b).max()))[1]
        sa, sb = _scaled(a, k), _scaled(b, k)
        want_cos = float(np.dot(sa, sb) / (np.linalg.norm(sa) * np.linalg.norm(sb)))
        want_sqnr = 10 * math.log10(float(np.dot(sb, sb)) / float(np.dot(sa - sb, sa - sb)))
        assert m.cosine == pytest.approx(want_cos, abs=1e-12), name
        assert m.sqnr_db == pytest.approx(want_sqnr, abs=1e-6), name
        assert m.max_abs == pytest.approx(math.ldexp(float(np.abs(sa - sb).max()), k), rel=1e-9, abs=0), name
        assert m.rmse == pytest.approx(math.ldexp(float(np.sqrt(np.mean((sa - sb) ** 2))), k), rel=1e-9, abs=0), name
        # pooled with an ordinary sample (units 2^k and 1 meet), and through JSON (merge-stats)
        other = pair_sums(np.array([1e-300, 2e-300]), np.array([1e-300, 2e-300]), sample=1)
        p = PairSums.from_dict(json.loads(json.dumps(s.merge(other).to_dict())))
        bs = [Fraction(float(t)) for t in [*b, 1e-300, 2e-300]]
        ds = [Fraction(float(t)) - Fraction(float(q)) for t, q in zip(a, b)]
        pooled = sum(t * t for t in bs) / sum(t * t for t in ds)  # exact, in rationals
        assert p.metrics().sqnr_db == pytest.approx(10 * (math.log10(pooled.numerator) - math.log10(pooled.denominator)),
                                                    abs=1e-6), name


def _scaled(v: np.ndarray, k: int) -> np.ndarray:
    """v·2^-k, exact, in two steps (2^-k alone is past float64's range for subnormals)."""
    return v * 2.0 ** -(k // 2) * 2.0 ** -(k - k // 2)


def test_int64_past_2_53_host_statistics_and_pairs():
    """int64 cast to float64 before subtracting: 2^62 + 1, + 3, + 5 had std 0 and A - B = 2 read exact."""
    rng = np.random.default_rng(5)
    for x in (np.array([2**62 + 1, 2**62 + 3, 2**62 + 5], np.int64), 2**62 + np.arange(300_000, dtype=np.int64),
              rng.integers(-2**63, 2**63 - 1, 1000, dtype=np.int64), np.array([2**64 - 1, 2**64 - 3], np.uint64),
              rng.integers(2**63, 2**64 - 1, 1000, dtype=np.uint64)):
        v = [int(t) for t in x]
        mu = Fraction(sum(v), len(v))
        std = math.sqrt(sum((Fraction(t) - mu) ** 2 for t in v) / len(v))
        st = TensorStats.from_array(x)
        assert st.std == pytest.approx(std, rel=1e-9)
        assert st.mean == pytest.approx(float(mu), rel=1e-15) and st.std > 0
    a = np.array([2**62 + 3, 2**62 + 5, -2**63, 2**63 - 1], np.int64)
    b = np.array([2**62 + 1, 2**62 + 3, 2**63 - 1, -2**63], np.int64)
    s = pair_sums(a, b)
    d = [abs(int(p) - int(q)) for p, q in zip(a, b)]
    assert s.max_abs == float(max(d)) and s.total("sum_abs") == pytest.approx(float(sum(d)), rel=1e-15)
    assert s.total("dd") == pytest.approx(float(sum(t * t for t in d)), rel=1e-15)
    s = pair_sums(np.array([2**64 - 1, 5], np.uint64), np.array([2**64 - 3, 9], np.uint64))
    assert s.max_abs == 4.0 and s.total("dd") == 20.0


def _i64_model(path, c: int):
    import onnx

    x = helper.make_tensor_value_info("x", TensorProto.INT64, ["a", "b"])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, ["a", "b"])
    onnx.save(make_model([helper.make_node("Add", ["x", "c"], ["y0"], name="add"), helper.make_node("Identity", ["y0"], ["y"], name="out")],
                         [x], [y], [numpy_helper.from_array(np.array(c, np.int64), "c")], opset=17), path)


@pytest.mark.parametrize("n", [3, 300_000])  # on the host, and in the graph (past SMALL_ON_HOST)
def test_int64_past_2_53_layers_and_diff(tmp_path, n):
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    _i64_model(a, 2)
    _i64_model(b, 0)
    x = (2**62 + 1 + 2 * np.arange(n, dtype=np.int64)).reshape(1, -1)
    np.savez(tmp_path / "in.npz", x=x)
    v = [int(t) for t in x.ravel()]
    mu = Fraction(sum(v), n)
    std = math.sqrt(sum((Fraction(t) - mu) ** 2 for t in v) / n)
    r = runner.invoke(app, ["layers", str(b), "--inputs", str(tmp_path / "in.npz"), "--format", "csv", "--no-cache"])
    assert r.exit_code == 0, r.output
    lines = r.stdout.strip().splitlines()
    head = lines[0].split(",")
    row = dict(zip(head, lines[-1].split(",")))
    assert float(row["std"]) == pytest.approx(std, rel=1e-9)
    # the mean of |x| (one sign: the mean; a plain float64 sum in onnxruntime read 4.5e-7 low at 2^60)
    r = runner.invoke(app, ["layers", str(b), "--inputs", str(tmp_path / "in.npz"), "--json", "-", "--no-cache"])
    assert r.exit_code == 0, r.output
    (out,) = [t for t in json.loads(r.stdout)["tensors"] if t["name"] == "y"]
    assert out["abs_mean"] == pytest.approx(float(mu), rel=1e-15)
    r = runner.invoke(app, ["diff", str(a), str(b), "--all", "--inputs", str(tmp_path / "in.npz"), "--format", "json",
                            "--columns", "tensor,max_abs,sqnr_db,introduced_sqnr_db", "--no-cache"])
    assert r.exit_code == 1, r.output  # integers are judged exactly: 2^62 + 3 is not 2^62 + 1 (stats.metrics.EXACT_INTEGERS)
    pairs = {p["tensor"]: p for p in json.loads(r.stdout)}
    # every element differs by 2: SQNR 10 log10(Σb² / (4 n)), from Python integers
    want = 10 * math.log10(sum(t * t for t in v) / (4 * n))
    for name in ("y0", "y"):
        assert pairs[name]["max_abs"] == 2.0 and pairs[name]["sqnr_db"] == pytest.approx(want, abs=1e-9)
    assert pairs["y0"]["introduced_sqnr_db"] == pytest.approx(want, abs=1e-9)


def test_error_histogram_differences_are_exact_for_int64():
    """diff's error histogram (stats.histogram.difference) cast int64 to float64 before subtracting."""
    from onnxprobe.stats.histogram import difference

    a = np.array([2**62 + 3, -2**63, 2**63 - 1, 7], np.int64)
    b = np.array([2**62 + 1, 2**63 - 1, -2**63, 9], np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = difference(a, b)
        u = difference(np.array([2**64 - 3, 5], np.uint64), np.array([2**64 - 1, 2], np.uint64))
    assert got.tolist() == [float(int(p) - int(q)) for p, q in zip(a, b)] and u.tolist() == [-2.0, 3.0]


@pytest.mark.parametrize("n", [3, 300_000])  # on the host, and in the graph (past SMALL_ON_HOST)
def test_uint64_layers_past_2_63(tmp_path, n):
    """A uint64 tensor (onnxruntime has no uint64 ReduceMin/Max: the probed copy failed to run), with values
    past 2^63, against Python integers."""
    import onnx

    path = tmp_path / "u.onnx"
    x = helper.make_tensor_value_info("x", TensorProto.UINT64, [1, None])
    y = helper.make_tensor_value_info("y", TensorProto.UINT64, [1, None])
    onnx.save(make_model([helper.make_node("Identity", ["x"], ["y0"], name="id"), helper.make_node("Identity", ["y0"], ["y"], name="out")],
                         [x], [y], [], opset=17), path)
    v = (2**63 + 7 + 3 * np.arange(n, dtype=np.uint64)).reshape(1, -1)
    v[0, 0] = 5  # and one small value: the extremes 5 and 2^63 + 7 + 3 (n - 1)
    np.savez(tmp_path / "in.npz", x=v)
    ints = [int(t) for t in v.ravel()]
    mu = Fraction(sum(ints), n)
    std = math.sqrt(sum((Fraction(t) - mu) ** 2 for t in ints) / n)
    r = runner.invoke(app, ["layers", str(path), "--all", "--inputs", str(tmp_path / "in.npz"), "--format", "csv", "--no-cache"])
    assert r.exit_code == 0, r.output
    lines = r.stdout.strip().splitlines()
    rows = [dict(zip(lines[0].split(","), ln.split(","))) for ln in lines[1:]]
    assert [row["tensor"] for row in rows] == ["y0", "y"]
    for row in rows:
        assert float(row["min"]) == 5.0 and float(row["max"]) == float(max(ints))
        assert float(row["mean"]) == pytest.approx(float(mu), rel=1e-12)
        assert float(row["std"]) == pytest.approx(std, rel=1e-9)


def test_small_int64_outputs_are_summarised_exactly_as_other_tensors(tmp_path):
    """A small model output took the in-graph float64 row while the tensor before it was summarised on the
    host: its max read 2^62 + 1024, past every element, beside the exact row of the same values."""
    path = tmp_path / "i.onnx"
    _i64_model(path, 0)
    x = (2**62 + np.arange(1000, dtype=np.int64)).reshape(1, -1)
    np.savez(tmp_path / "in.npz", x=x)
    r = runner.invoke(app, ["layers", str(path), "--all", "--inputs", str(tmp_path / "in.npz"), "--json", "-", "--no-cache"])
    assert r.exit_code == 0, r.output
    rows = {t["name"]: t for t in json.loads(r.stdout)["tensors"]}
    lo, hi = int(x.min()), int(x.max())
    for name in ("y0", "y"):
        assert rows[name]["is_output"] == (name == "y")
        assert (rows[name]["min"], rows[name]["max"]) == (lo, hi), (name, rows[name]["min"], rows[name]["max"])


@pytest.mark.parametrize("big, small, diffs", [(1e200, 2.0, (0.5,)), (1e160, 2.0, (0.5, 1e-3)), (1e300, 2.0, (0.25,)),
                                               (1e100, 1e-190, (1e-200,)), (1e-10, 1e-290, (1e-300,))],
                         ids=["1e200", "1e160", "1e300", "e0-unit", "tiny-gap"])
def test_differences_far_below_the_largest_value_are_not_lost(big, small, diffs):
    """[1e200, 1, 2] against [1e200, 1, 2.5]: Σ(a-b)² in the values' unit underflowed to 0, so RMSE read 0 and
    SQNR inf beside max |a-b| 0.5 (a false pass of --metric rmse --atol 0.1 and --min-sqnr 5000); at 1e160 RMSE
    was 5e-4 off. The sums move to a unit between the values' and the differences'. Oracle: exact rationals."""
    b = np.array([big, 1.0, *[small * (k + 1) for k in range(len(diffs))]])
    a = b.copy()
    a[-len(diffs):] += np.array(diffs)
    assert (a != b).sum() == len(diffs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = pair_sums(a, b).metrics()
    fa, fb = [Fraction(float(x)) for x in a], [Fraction(float(x)) for x in b]
    d = [x - y for x, y in zip(fa, fb)]
    dd, bb = sum(x * x for x in d), sum(y * y for y in fb)
    assert dd > 0
    want_rmse = math.sqrt(dd / len(d))
    log10 = lambda q: math.log10(q.numerator) - math.log10(q.denominator)  # noqa: E731
    assert m.rmse == pytest.approx(want_rmse, rel=1e-12)
    assert m.sqnr_db == pytest.approx(10 * log10(bb / dd), abs=1e-9)
    assert m.max_abs == float(max(abs(x) for x in d)) and not m.exact
    assert m.mean_abs == pytest.approx(float(sum(abs(x) for x in d) / len(d)), rel=1e-12)
