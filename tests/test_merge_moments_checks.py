"""`merge-stats` refuses shards whose moments no values could have (Σx² below Σx²/n, a mean outside
[min, max], Σ|x| below |Σx|, zeros outside [min, max]) and says what is wrong with malformed ones in
words (not 'list indices must be integers', '-inf + inf in fsum' or 'exp must be an integer' for an
integer): one line naming the shard, the tensor and the inconsistency. Real shards, spiky and offset
data included, stay accepted within their rounding."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app
from onnxprobe.stats.moments import Moments
from onnxprobe.stats.tensor_stats import TensorStats

runner = CliRunner()


def shards(tmp_path):
    out = []
    for k in range(2):
        d = tmp_path / f"d{k}"
        d.mkdir()
        np.savez(d / "b.npz", image=np.random.default_rng(k).normal(0.5, 0.3, (1, 3, 32, 32)).astype(np.float32))
        out.append(tmp_path / f"s{k}.json")
        r = runner.invoke(app, ["layers", str(sample_path("cnn")), "--inputs-dir", str(d), "--json", str(out[-1])])
        assert r.exit_code == 0, r.output
    return out


def edit(path, change) -> str:
    """``change`` the tensor whose mean is farthest from 0 beside its magnitude (a Σx² too small for its Σx is
    then beyond rounding: near a zero mean, Σx²/n ~ 0 and any small Σx² is possible)."""
    d = json.loads(path.read_text())

    def lean(t):
        m = t["moments"]
        return abs(m["sum"][0]) / m["count"] / max(abs(m["min"]), abs(m["max"]))

    t = max(d["tensors"], key=lean)
    change(t, t["moments"])
    path.write_text(json.dumps(d))
    return t["name"]


CASES = [
    ("sumsq below sum^2/n", lambda t, m: m.update(sumsq=[m["sum"][0] ** 2 / m["count"] / 2]), "is no sum of squares"),
    ("mean outside [min, max]", lambda t, m: m.update(sum=[m["sum"][0] + 100 * m["count"] * max(abs(m["min"]), abs(m["max"]))]),
     "lies outside"),
    ("sumabs below |sum|", lambda t, m: m.update(sumabs=[abs(m["sum"][0]) / 2]), "is no sum of"),
    ("zeros outside [min, max]", lambda t, m: m.update(min=abs(m["max"]) / 2 + 1, max=abs(m["max"]) + 1, zeros=1), "zeros"),
    ("moments a list", lambda t, m: t.update(moments=[1, 2]), "not an object"),
    ("sum past float64", lambda t, m: m.update(sum=[1e308, 1e308]), "past float64's range"),
    ("exp out of range", lambda t, m: m.update(exp=10**6), "exp 1000000"),
    ("a key missing", lambda t, m: m.pop("sumsq"), "no 'sumsq'"),
    # null is an overflowed sum: values float64 sums hold have none (the merge wrote a null mean, exit 0)
    ("sum unknown", lambda t, m: m.update(sum=[None]), "sum is unknown (null)"),
    ("sumsq unknown", lambda t, m: m.update(sumsq=[None]), "sumsq is unknown (null)"),
    ("sumabs unknown", lambda t, m: m.update(sumabs=[None]), "sumabs is unknown (null)"),
    # an empty histogram beside finite values: the merged percentiles came from the other shards alone
    ("histogram empty", lambda t, m: t.update(histogram={**t["histogram"], "codes": [], "counts": []}), "histogram holds 0 values"),
    # a negative count is an integer: it was refused as 'codes and counts must be integers'
    ("histogram count negative", lambda t, m: t.update(histogram={**t["histogram"], "counts": [-5] + t["histogram"]["counts"][1:]}),
     "a histogram count of -5: counts are never negative"),
    ("histogram of zero counts", lambda t, m: t.update(histogram={**t["histogram"], "codes": [t["histogram"]["codes"][0]],
                                                                  "counts": [0]}), "histogram holds 0 values"),
]


@pytest.mark.parametrize("case, change, want", CASES, ids=[c[0] for c in CASES])
def test_impossible_or_malformed_moments_are_one_line_naming_shard_tensor_and_problem(tmp_path, case, change, want):
    a, b = shards(tmp_path)
    name = edit(b, change)
    r = runner.invoke(app, ["merge-stats", str(a), str(b)])
    err = r.stderr.strip().splitlines()
    assert r.exit_code == 2 and len(err) == 1 and "Traceback" not in r.output, r.output
    assert b.name in err[0] and repr(name) in err[0] and want in err[0], err[0]
    for junk in ("list indices", "in fsum", "must be an integer"):
        assert junk not in err[0]


@pytest.mark.parametrize("x", [
    np.r_[np.ones(1023), 100.0],                      # one spike among ones (float32 rows' worst case)
    1e4 + np.random.default_rng(0).standard_normal(5000),  # offset: a variance tiny beside the mean's square
    np.r_[np.zeros(4096), 1e-30, -3.4e38],            # sparse, and a -FLT_MAX fill
    np.full(7, -2.5),                                 # constant: variance 0, the mean at min and max
], ids=["spike", "offset", "sparse-fill", "constant"])
def test_moments_of_real_values_pass_the_checks(x):
    for dtype in (np.float32, np.float64):
        v = x.astype(dtype)
        m = Moments.from_dict(json.loads(json.dumps(Moments.from_stats(TensorStats.from_array(v)).to_dict())))
        st = m.stats()
        f = v.astype(np.float64)
        assert st.mean == pytest.approx(f.mean(), rel=1e-6, abs=1e-6 * np.abs(f).max())


@pytest.mark.parametrize("change", [
    lambda t, m: m.update(count=0, zeros=0),                # count 0, its sums and extremes kept
    lambda t, m: m.update(nan=m["count"], zeros=0),         # every value NaN, yet sums of finite values
    lambda t, m: m.update(count=0, zeros=0, min=None, max=None),  # no extremes either: only the sums say
], ids=["count-0", "all-nan", "count-0-no-extremes"])
def test_sums_or_extremes_of_no_finite_values_are_refused(tmp_path, change):
    """A shard whose moments count no finite value but hold sums (or a min and max) of some: merged, its sums
    moved the pooled mean, std and abs_mean (and its extremes min and max) while its count added nothing: a
    silently wrong number. Without a histogram nothing else caught it."""
    a, b = shards(tmp_path)

    def drop_histogram_too(t, m):
        change(t, m)
        t["histogram"] = None

    name = edit(b, drop_histogram_too)
    r = runner.invoke(app, ["merge-stats", str(a), str(b)])
    err = r.stderr.strip().splitlines()
    assert r.exit_code == 2 and len(err) == 1 and "Traceback" not in r.output, r.output
    assert b.name in err[0] and repr(name) in err[0] and "no finite value" in err[0], err[0]


@pytest.mark.parametrize("x", [np.zeros(0), np.full(5, np.nan), np.r_[np.nan, np.inf, -np.inf]],
                         ids=["empty", "all-nan", "nan-and-inf"])
def test_moments_of_no_finite_values_pass_the_checks(x):
    for dtype in (np.float16, np.float32, np.float64):
        d = json.loads(json.dumps(Moments.from_stats(TensorStats.from_array(x.astype(dtype))).to_dict()))
        m = Moments.from_dict(d)
        assert (m.count, m.nan + m.inf) == (x.size, x.size)


def test_an_overflowed_sum_is_still_read():
    """The one case onnxprobe writes a sum unknown (null): float64 values whose sum passes float64's range."""
    v = np.full(4, 1.5e308)
    d = json.loads(json.dumps(Moments.from_stats(TensorStats.from_array(v)).to_dict()))
    m = Moments.from_dict(d)
    assert m.count == 4 and m.stats().max == 1.5e308


def test_shards_of_signed_zeros_merge_to_the_same_bytes_in_any_order(tmp_path):
    """+0 and -0 shards: min(-0.0, 0.0) keeps its first argument, so the merged min and max said 0 or -0 as the
    order fell, where merge-stats promises the same bytes in any order. Oracle: the bytes of both orders."""
    import onnx
    from onnx import TensorProto, helper

    from conftest import make_model

    p = tmp_path / "m.onnx"
    onnx.save(make_model([helper.make_node("Mul", ["x", "z"], ["y"], name="mul")],
                         [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])],
                         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])],
                         [helper.make_tensor("z", TensorProto.FLOAT, [], [0.0])]), p)
    out = []
    for k, x in enumerate((np.full(8, -1.0), np.full(8, 1.0), np.r_[np.ones(4), -np.ones(4)])):
        d = tmp_path / f"d{k}"
        d.mkdir()
        np.savez(d / "b.npz", x=x.astype(np.float32))
        out.append(tmp_path / f"s{k}.json")
        r = runner.invoke(app, ["layers", str(p), "--all", "--inputs-dir", str(d), "--json", str(out[-1])])
        assert r.exit_code == 0, r.output
    merged = []
    for order in ((0, 1, 2), (1, 2, 0), (2, 0, 1)):
        m = tmp_path / f"m{''.join(map(str, order))}.json"
        r = runner.invoke(app, ["merge-stats", *(str(out[k]) for k in order), "--json", str(m)])
        assert r.exit_code == 0, r.output
        merged.append(m.read_bytes())
    assert merged[0] == merged[1] == merged[2]
    y = json.loads(merged[0])["tensors"][0]
    assert (y["min"], y["max"]) == (0, 0)
