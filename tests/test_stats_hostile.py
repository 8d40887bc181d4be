"""Statistics that are right on any distribution: the in-graph rows (layers, and mark --stats with its
self-contained If), the host's from_array, and dataset merging, each against numpy float64 over the same
float32 (or float16) values. Hostile on purpose: large offsets, values near 1e20 and 1e-30, attention-mask
fills of -3.4e38, float16, single elements, constants, subnormals, NaN and Inf mixed in."""

from __future__ import annotations

import json
import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.stats.tensor_stats import ROW, TensorStats

runner = CliRunner()
rng = np.random.default_rng(0)
U = rng.random(10_000)


def _fills() -> np.ndarray:
    x = rng.normal(size=(8, 1250)).astype(np.float32)
    x[:, ::3] = np.float32(-3.4e38)  # an attention mask: a third of the scores filled with the lowest float
    return x


def _skewed() -> np.ndarray:
    x = (1e-7 * (1 + rng.random((240, 240)))).astype(np.float32)
    x.flat[rng.choice(x.size, 6, replace=False)] = 1.0
    return x


DISTRIBUTIONS = {
    "large_offset": (1000 + 0.001 * U).astype(np.float32),
    "near_1e20": (1e20 * (1 + U)).astype(np.float32),
    "signed_1e20": (1e20 * (U - 0.5)).astype(np.float32),
    "near_1e-30": (1e-30 * (1 + U)).astype(np.float32),
    "mask_fills": _fills(),
    "float16": rng.normal(3.0, 2.0, size=(40, 250)).astype(np.float16),
    "float16_offset": (np.float16(200) + rng.random(5000).astype(np.float16)),
    "single": np.array([3.25], np.float32),
    "single_large": np.array([1e30], np.float32),
    "constant": np.full((64, 64), 7.1, np.float32),
    "subnormal": (np.float32(1e-40) * (1 + U[:2000])).astype(np.float32),
    "near_max": np.array([3.4e38, -3.4e38, 3.3e38, 1.0], np.float32),
    "nan_inf_mixed": np.concatenate([rng.normal(5, 1, 1000), [np.nan] * 7, [np.inf] * 3, [-np.inf] * 2]).astype(np.float32),
    "all_nan": np.full((10,), np.nan, np.float32),
    "zeros_and_ones": (U > 0.5).astype(np.float32),
    "many_large_offset": (1e4 + rng.normal(size=300_000)).astype(np.float32),  # past numpy's pairwise blocks
    "float16_near_max": np.array([65504, -65504, 60000, 0.5, -0.0], np.float16),
    # a sigmoid map: ~1e-7 almost everywhere, a few 1s; the midpoint shift is ~100 std from the mean, so
    # the moments about it cancel by 1e4 (float32 block sums of them left the std 1.7% off)
    "skewed_sparse": _skewed(),
    # one value repeated along rows of a prime length (no block row fits the size): float32 partial sums
    # of |x| over 16381 elements drift by 3e-5 on a constant (each addition rounds the same way)
    "constant_long_rows": np.full((61, 16381), 0.9979855, np.float32),
}


def _relu_large() -> np.ndarray:
    x = np.maximum(rng.normal(size=(4, 256, 300)), 0).astype(np.float32)  # ReLU's zeros, in many blocks
    x.flat[rng.choice(x.size, 500, replace=False)] = np.float32(-0.0)  # zeros too
    x.flat[rng.choice(x.size, 500, replace=False)] = np.float32(1e-42)  # subnormals: not zeros
    return x


DISTRIBUTIONS["relu_large"] = _relu_large()


def oracle(x: np.ndarray) -> dict:
    v = x.astype(np.float64).ravel()
    f = v[np.isfinite(v)]
    return {"count": v.size, "nan": int(np.isnan(v).sum()), "inf": int(np.isinf(v).sum()),
            "zeros": int((v == 0).sum()),
            "min": f.min() if f.size else None, "max": f.max() if f.size else None,
            "mean": f.mean() if f.size else None, "std": f.std() if f.size else None,
            "abs_mean": np.abs(f).mean() if f.size else None}


def check(st: TensorStats, want: dict, label: str, rel: float = 2e-6) -> None:
    assert (st.count, st.nan, st.inf, st.zeros) == (want["count"], want["nan"], want["inf"], want["zeros"]), label
    d = st.to_dict()
    for k in ("min", "max"):
        assert d[k] == want[k], (label, k)
    for k in ("mean", "abs_mean"):
        if want[k] is None:
            assert d[k] is None, (label, k)
        else:
            scale = max(abs(want[k]), want["std"] or 0.0, 1e-300)
            assert d[k] is not None and abs(d[k] - want[k]) <= rel * scale, (label, k, d[k], want[k])
    if want["std"] is None:
        assert d["std"] is None, label
    elif want["std"] == 0:
        assert d["std"] == 0, (label, d["std"])
    else:
        assert d["std"] is not None and d["std"] == pytest.approx(want["std"], rel=max(rel * 10, 2e-5), abs=0), (label, d["std"], want["std"])


def identity_model(x: np.ndarray) -> onnx.ModelProto:
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    return make_model([helper.make_node("Identity", ["x"], ["y"], name="id")],
                      [helper.make_tensor_value_info("x", elem, list(x.shape))],
                      [helper.make_tensor_value_info("y", elem, list(x.shape))])


@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
def test_host_statistics_match_numpy(name):
    x = DISTRIBUTIONS[name]
    check(TensorStats.from_array(x), oracle(x), name, rel=1e-9)


@pytest.mark.parametrize("form", ["blocks", "row"])
@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
def test_in_graph_statistics_match_numpy(name, form, tmp_path, monkeypatch):
    """Both in-graph forms: per-block summaries merged on the host (a tensor whose size a row length of
    graph.stats_nodes.BLOCK_ROW divides) and the fast row's pieces (any other), each with its rerun."""
    from onnxprobe.graph import stats_nodes
    from onnxprobe.runtime.runners import base as base_runner

    monkeypatch.setattr(base_runner, "SMALL_ON_HOST", (0, 0))  # the graph's forms, whatever the size
    if form == "row":
        monkeypatch.setattr(stats_nodes, "BLOCK_ROW", (10**9, 10**9))
    x = DISTRIBUTIONS[name]
    p = tmp_path / f"{name}.onnx"
    onnx.save(identity_model(x), p)
    res = api.layers(p, api.Selection(names=("y",)), api.RunConfig(device="cpu", cache=False), api.InputSpec(arrays={"x": x}))
    (probe,) = [q for q in res.plan.probes if q.ref.name == "y"]
    assert probe.stats_block == (stats_nodes.block_size(x.shape) or 0), name
    check(res.stats["y"], oracle(x), name)


@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
def test_self_contained_rows_of_mark_stats_match_numpy(name, tmp_path):
    """mark --stats: the fast row and its If (the careful row when the fast one cannot be trusted), run
    by plain onnxruntime."""
    x = DISTRIBUTIONS[name]
    p, out = tmp_path / "m.onnx", tmp_path / "stats.onnx"
    onnx.save(identity_model(x), p)
    r = runner.invoke(app, ["mark", str(p), "-o", str(out), "--name", "y", "--stats"])
    assert r.exit_code == 0, r.output
    meta = json.loads({q.key: q.value for q in onnx.load(str(out)).metadata_props}["onnxprobe.exposed"])
    assert meta["row"] == list(ROW)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(str(out), so, providers=["CPUExecutionProvider"])
    (row,) = s.run([next(iter(meta["outputs"]))], {"x": x})
    check(TensorStats.from_row(row), oracle(x), name)


def test_merged_dataset_moments_match_numpy_in_any_order(tmp_path):
    """Shards of hostile data (different shifts and magnitudes per shard): the merged report equals numpy
    over the concatenation, and the bytes do not depend on the order of the shards."""
    data = [DISTRIBUTIONS["mask_fills"][:2], DISTRIBUTIONS["mask_fills"][2:5] * np.float32(0.5),
            (rng.normal(size=(3, 1250)) * 1e-3 + 1000).astype(np.float32)]
    p = tmp_path / "m.onnx"
    onnx.save(make_model([helper.make_node("Identity", ["x"], ["y"], name="id")],
                         [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1250])],
                         [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 1250])]), p)
    reports = []
    for k, part in enumerate(data):
        d = tmp_path / f"shard{k}"
        d.mkdir()
        np.savez(d / "b.npz", x=part)
        out = tmp_path / f"shard{k}.json"
        r = runner.invoke(app, ["layers", str(p), "--name", "y", "--inputs-dir", str(d), "--json", str(out)])
        assert r.exit_code == 0, r.output
        reports.append(out)
    merged = []
    for order in (reports, reports[::-1], [reports[1], reports[2], reports[0]]):
        out = tmp_path / "merged.json"
        r = runner.invoke(app, ["merge-stats", *map(str, order), "--json", str(out)])
        assert r.exit_code == 0, r.output
        merged.append(out.read_bytes())
    assert merged[0] == merged[1] == merged[2]
    t = next(t for t in json.loads(merged[0])["tensors"] if t["name"] == "y")
    want = oracle(np.concatenate([x.ravel() for x in data]))
    assert t["count"] == want["count"] and t["min"] == want["min"] and t["max"] == want["max"]
    assert t["mean"] == pytest.approx(want["mean"], rel=1e-6)
    assert t["std"] == pytest.approx(want["std"], rel=1e-5)


def test_loop_rows_merge_with_their_shifts(tmp_path):
    """A tensor inside a Loop body is summarised over all iterations: per-iteration rows with different
    shifts merge in the graph (Chan et al.) to numpy's numbers over the stacked values."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="c"),
         helper.make_node("Mul", ["s", "k"], ["s_next"], name="mul"),
         helper.make_node("Add", ["s_next", "off"], ["t"], name="add")],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("s", TensorProto.FLOAT, [100])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s_next", TensorProto.FLOAT, [100]),
         helper.make_tensor_value_info("t", TensorProto.FLOAT, [100])],
        [onnx.numpy_helper.from_array(np.array(7.0, np.float32), "k"), onnx.numpy_helper.from_array(np.array(1000.0, np.float32), "off")])
    m = make_model([helper.make_node("Loop", ["n", "cond", "x"], ["y", "ts"], name="loop", body=body)],
                   [helper.make_tensor_value_info("n", TensorProto.INT64, []), helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                    helper.make_tensor_value_info("x", TensorProto.FLOAT, [100])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [100]), helper.make_tensor_value_info("ts", TensorProto.FLOAT, None)])
    p = tmp_path / "loop.onnx"
    onnx.save(m, p)
    x = rng.random(100).astype(np.float32)
    res = api.layers(p, api.Selection(names=("t",)), api.RunConfig(device="cpu"),
                     api.InputSpec(arrays={"x": x, "n": np.array(4, np.int64), "cond": np.array(True)}))
    states, s = [], x
    for _ in range(4):
        s = (s * np.float32(7)).astype(np.float32)
        states.append(s + np.float32(1000))
    check(res.stats["t"], oracle(np.stack(states)), "loop t")
    empty = api.layers(p, api.Selection(names=("t",)), api.RunConfig(device="cpu"),
                       api.InputSpec(arrays={"x": x, "n": np.array(0, np.int64), "cond": np.array(True)}))
    assert empty.stats["t"].count == 0 and math.isnan(empty.stats["t"].mean)


@pytest.mark.parametrize("offset", [0.0, 1e3, 1e20])
def test_pooled_cosine_stays_within_one(offset):
    """Cosine from pooled sums: identical samples give exactly 1 (no difference at all), a nearly equal pair
    stays within [-1, 1] whatever the rounding of the summed partials, and agrees with numpy float64."""
    from onnxprobe.stats.host_sums import pair_sums
    from onnxprobe.stats.pooled import pool

    rng = np.random.default_rng(3)
    xs = [(offset + rng.standard_normal(1000)).astype(np.float32) for _ in range(7)]
    same = pool([pair_sums(x, x, sample=i) for i, x in enumerate(xs)]).metrics()
    assert same.cosine == 1.0
    ys = [np.nextafter(x, np.float32(np.inf)) for x in xs]
    near = pool([pair_sums(x, y, sample=i) for i, (x, y) in enumerate(zip(xs, ys))]).metrics()
    a = np.concatenate(xs).astype(np.float64)
    b = np.concatenate(ys).astype(np.float64)
    oracle = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
    assert -1.0 <= near.cosine <= 1.0
    assert near.cosine == pytest.approx(oracle, abs=1e-12)


def test_rows_of_a_length_not_known_in_the_graph_match_numpy(tmp_path):
    """A tensor whose last dim is symbolic when its statistics nodes are made (mark --stats; layers
    --inputs-dir with batches of two shapes, whose plan is made for any shape): its rows may be 1M long,
    where float32 partial sums of |x| over 1e4 + noise drift by 1e-4."""
    p, out = tmp_path / "m.onnx", tmp_path / "stats.onnx"
    onnx.save(make_model([helper.make_node("Identity", ["x"], ["y"], name="id")],
                         [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "n"])],
                         [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", "n"])]), p)
    xs = [(1e4 + rng.normal(size=(1, 1_000_003))).astype(np.float32), (1e4 + rng.normal(size=(2, 99_991))).astype(np.float32)]
    r = runner.invoke(app, ["mark", str(p), "-o", str(out), "--name", "y", "--stats"])
    assert r.exit_code == 0, r.output
    meta = json.loads({q.key: q.value for q in onnx.load(str(out)).metadata_props}["onnxprobe.exposed"])
    s = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    (row,) = s.run([next(iter(meta["outputs"]))], {"x": xs[0]})
    check(TensorStats.from_row(row), oracle(xs[0]), "mark --stats")
    d = tmp_path / "ds"
    d.mkdir()
    for k, x in enumerate(xs):
        np.savez(d / f"b{k}.npz", x=x)
    ds = api.layers_dataset(p, d, api.Selection(names=("y",)), api.RunConfig(device="cpu", cache=False))
    check(ds.moments["y"].stats(), oracle(np.concatenate([x.ravel() for x in xs])), "layers --inputs-dir")


@pytest.mark.parametrize("x", [np.full((1024, 1024), 1.972496, np.float32), -np.full((512, 1000), 0.4391079, np.float32)],
                         ids=["constant", "negative_constant"])
def test_block_abs_mean_of_one_signed_rows_is_as_exact_as_their_mean(x, tmp_path):
    """Block rows of one sign: Σ|x| is |Σx|, taken from the rows' mean and residual sum as the mean is,
    not from float32 sums of |x| that round the same way at every addition (1.9e-6 off on the constant,
    1.4e-6 on a near-constant DenseNet Conv output, where the mean was right to 1e-8)."""
    from onnxprobe.graph.stats_nodes import block_size

    p = tmp_path / "m.onnx"
    onnx.save(identity_model(x), p)
    res = api.layers(p, api.Selection(names=("y",)), api.RunConfig(device="cpu", cache=False), api.InputSpec(arrays={"x": x}))
    (probe,) = res.plan.probes
    assert probe.stats_block == block_size(x.shape) > 0
    want = oracle(x)
    check(res.stats["y"], want, "y")
    assert res.stats["y"].abs_mean == pytest.approx(want["abs_mean"], rel=1e-7)


@pytest.mark.parametrize("n", [2, 300_000])  # measured on the host, and (rerun on the host) from the graph's sums
def test_a_difference_past_float32s_range_is_measured_not_a_crash(n):
    """a = x, b = -x with x near 3e38: a - b overflows float32 (it crashed the SQNR's log as an internal
    error); the pair is measured in float64 and fails, as numpy float64 says."""
    def scaled(k: float) -> onnx.ModelProto:
        return make_model([helper.make_node("Mul", ["x", "k"], ["y"], name="mul")], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])], [onnx.numpy_helper.from_array(np.array(k, np.float32), "k")])

    x = np.ones(n, np.float32)
    x[0] = 3e38
    res = api.diff(scaled(1.0), scaled(-1.0), inputs={"x": x})
    (r,) = [r for r in res.results if r.pair.a.name == "y"]
    a, b = x.astype(np.float64), -x.astype(np.float64)
    assert r.metrics.max_abs == pytest.approx(np.abs(a - b).max(), rel=1e-6)
    assert r.metrics.sqnr_db == pytest.approx(20 * math.log10(np.linalg.norm(b) / np.linalg.norm(a - b)), abs=1e-6)
    assert r.metrics.cosine == pytest.approx(-1.0, abs=1e-9) and r.passed is False


def test_float64_values_near_its_limit_keep_their_moments():
    """float64 values near 1.8e308: Σ(x - c) overflowed float64 and the mean read unknown (earlier still,
    the data's extreme); the sums are kept in a unit near the values (``TensorStats.unit``), so mean, std
    and abs_mean match numpy on the data scaled by a power of two; min, max and counts stay exact."""
    x = np.random.default_rng(18).choice([1e300, -1e300, 1.7e308, -1.7e308], 1000)
    st = TensorStats.from_array(x)
    assert st.min == x.min() and st.max == x.max() and st.count == 1000
    y = x / 2.0 ** 1000
    assert st.mean == pytest.approx(y.mean() * 2.0 ** 1000, rel=1e-9)
    assert st.std == pytest.approx(y.std() * 2.0 ** 1000, rel=1e-12)
    assert st.to_dict()["abs_mean"] == pytest.approx(np.abs(y).mean() * 2.0 ** 1000, rel=1e-12)


def test_pair_sums_of_opposite_infinities_raise_no_numpy_warning():
    """+Inf against -Inf (and +Inf, -Inf in one tensor): numpy's 'invalid value encountered' reached the
    user's stderr from diff; the positions are mismatches, counted, and nothing is printed."""
    import warnings

    from onnxprobe.stats.host_sums import pair_sums

    a = np.array([np.inf, -np.inf, 1, 2], np.float32)
    b = np.array([np.inf, np.inf, 1, 3], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = pair_sums(a, b)
    assert s.mismatch == 1 and s.count == 2


@pytest.mark.parametrize("values", [[1.7e308, 1.7e308, -1.7e308], [-1.7976931348623157e308, 1.7976931348623157e308],
                                    [1.7976931348623157e308] * 3, [1e308], [3.0]])
def test_float64_ranges_past_its_limits_are_reported_not_a_crash(values, tmp_path):
    """A float64 tensor whose max - min overflows (or a single value near float64's limit): every table
    format and the HTML report's histogram give the row (each was an "internal error": log10(0) of the
    digits to show, numpy's bins of infinite width). Oracle: numpy's own min/max, each value in its bin."""
    from onnxprobe.stats.histogram import binned

    x = np.array(values, np.float64)
    m = make_model([helper.make_node("Identity", ["x"], ["y"], name="n")],
                   [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [x.size])],
                   [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)])
    p = tmp_path / "f64.onnx"
    onnx.save(m, p)
    np.save(tmp_path / "x.npy", x)
    for fmt in ("table", "csv", "markdown"):
        r = runner.invoke(app, ["layers", str(p), "--all", "--input", f"x={tmp_path / 'x.npy'}", "--format", fmt])
        assert r.exit_code == 0 and "internal error" not in r.output, r.output
    r = runner.invoke(app, ["layers", str(p), "--all", "--input", f"x={tmp_path / 'x.npy'}", "--format", "csv"])
    row = r.stdout.splitlines()[1].split(",")
    assert float(row[6]) == x.min() and float(row[7]) == x.max()
    r = runner.invoke(app, ["layers", str(p), "--all", "--input", f"x={tmp_path / 'x.npy'}", "--html", str(tmp_path / "r.html")])
    assert r.exit_code == 0 and (tmp_path / "r.html").stat().st_size > 0, r.output
    h = binned(x, 8)
    edges = np.array(h["edges"])
    assert np.all(np.isfinite(edges)) and np.all(np.diff(edges) > 0) and sum(h["counts"]) == x.size
    assert edges[0] <= x.min() and x.max() <= edges[-1]
    inner = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, len(h["counts"]) - 1)
    assert np.bincount(inner, minlength=len(h["counts"])).tolist() == h["counts"]


def _scaled(path, sign) -> str:
    from onnx import numpy_helper

    m = make_model([helper.make_node("Mul", ["x", "s"], ["y"], name="mul")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
                   [numpy_helper.from_array(np.array(sign, np.float32), "s")])
    onnx.save(m, path)
    return str(path)


@pytest.mark.parametrize("scale", [1e-12, 1e-20, 1e-30, 1e-40])
@pytest.mark.parametrize("fuse", [True, False])
def test_sqnr_of_tiny_tensors_is_their_ratio(tmp_path, scale, fuse):
    """Both norms under float64's epsilon were floored to it (onnxruntime's qdq_loss_debug does so): any
    pair of tensors near 1e-20, or of subnormals, read 0 dB whatever their difference. The ratio is the
    ratio, as numpy float64 says; B all zeros against an A that is not is -inf."""
    a = _scaled(tmp_path / "a.onnx", [1, -1, 1, 0.5])
    b = _scaled(tmp_path / "b.onnx", [1, 1, 1, 1])
    zero = _scaled(tmp_path / "z.onnx", [0, 0, 0, 0])
    x = np.full(4, scale, np.float32)
    kw = dict(inputs=api.InputSpec(arrays={"x": x}), tolerance=api.Tolerance.from_flags("sqnr"), fuse=fuse)
    va, vb = (x * np.array([1, -1, 1, 0.5], np.float32)).astype(np.float64), x.astype(np.float64)
    want = 10 * math.log10(float(np.sum(vb * vb)) / float(np.sum((va - vb) ** 2)))
    (r,) = [r for r in api.diff(a, b, **kw).results if r.pair.a.name == "y"]
    assert r.metrics.sqnr_db == pytest.approx(want, abs=0.05), (scale, r.metrics.sqnr_db, want)
    (r,) = [r for r in api.diff(a, zero, **kw).results if r.pair.a.name == "y"]
    assert r.metrics.sqnr_db == -math.inf and r.passed is False


def test_the_table_says_minus_inf_where_b_is_all_zeros(tmp_path):
    """JSON holds null for an infinite SQNR; the table read "inf" (no error) for B all zeros as well."""
    a, zero = _scaled(tmp_path / "a.onnx", [1, -1, 1, 0.5]), _scaled(tmp_path / "z.onnx", [0, 0, 0, 0])
    r = CliRunner().invoke(app, ["diff", a, zero, "--metric", "sqnr"], env={"COLUMNS": "120"})
    (row,) = [ln for ln in r.stdout.splitlines() if ln.startswith("▶0")]
    assert r.exit_code == 1 and "-inf" in row.split() and "FAIL" in row, r.stdout


@pytest.mark.parametrize("scale, offset", [(1e-6, 1e4), (1.0, 0.0)])
def test_cosine_where_a_is_far_smaller_than_b_or_orthogonal(tmp_path, scale, offset):
    """Σab was derived as (Σa² + Σb² - Σ(a-b)²) / 2 from float32 partial sums in the one-run diff: with
    A = 1e-6 B on values of 1e4 it cancelled to a cosine of 0.976 (FAIL) where float64 says 1. Checked
    against numpy float64, and against the two-run diff; a near-orthogonal pair too."""
    from onnx import numpy_helper

    rng = np.random.default_rng(0)
    x = (offset + rng.standard_normal((512, 256))).astype(np.float32)  # past SMALL_PAIRS_ON_HOST: in the graph
    if offset == 0.0:  # B is x, A its sign-flipped copy on half the columns: cosine near 0
        flip = np.where(np.arange(256) % 2 == 0, 1.0, -1.0).astype(np.float32)
    else:
        flip = np.full(256, scale, np.float32)
    paths = []
    for name, s in (("a", flip), ("b", np.ones(256, np.float32))):
        m = make_model([helper.make_node("Mul", ["x", "s"], ["y"], name="mul")],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [512, 256])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [512, 256])], [numpy_helper.from_array(s, "s")])
        onnx.save(m, tmp_path / f"{name}.onnx")
        paths.append(str(tmp_path / f"{name}.onnx"))
    va, vb = (x * flip).astype(np.float64).ravel(), x.astype(np.float64).ravel()
    want = float(va @ vb / np.sqrt((va @ va) * (vb @ vb)))
    for fuse in (True, False):
        (r,) = [r for r in api.diff(*paths, inputs=api.InputSpec(arrays={"x": x}), fuse=fuse).results if r.pair.a.name == "y"]
        assert r.metrics.cosine == pytest.approx(want, rel=1e-5, abs=1e-7), (fuse, r.metrics.cosine, want)


def test_the_one_run_diff_of_tensors_whose_squares_are_subnormal(tmp_path):
    """Tensors near 1e-21 measured in the one-run graph: their float32 squares fall among the subnormals,
    which keep fewer digits, and the SQNR read 62.4 dB where float64 says 60 (a 61 dB criterion passed).
    Such pairs are measured on the host: the SQNR is numpy's."""
    from onnx import numpy_helper

    rng = np.random.default_rng(0)
    w = rng.standard_normal((256, 512)).astype(np.float32)
    x = rng.standard_normal((128, 256)).astype(np.float32)
    paths = []
    for name, ww in (("a", w), ("b", (w * (1 + 1e-3 * rng.standard_normal(w.shape))).astype(np.float32))):
        m = make_model([helper.make_node("MatMul", ["x", "W"], ["mm"]), helper.make_node("Mul", ["mm", "k"], ["y"])],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [128, 256])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [128, 512])],
                       [numpy_helper.from_array(ww, "W"), numpy_helper.from_array(np.array(1e-21, np.float32), "k")])
        onnx.save(m, tmp_path / f"{name}.onnx")
        paths.append(str(tmp_path / f"{name}.onnx"))
    outs = [ort.InferenceSession(p, providers=["CPUExecutionProvider"]).run(["y"], {"x": x})[0].astype(np.float64) for p in paths]
    want = 10 * math.log10(float(np.sum(outs[1] ** 2)) / float(np.sum((outs[0] - outs[1]) ** 2)))
    (r,) = [r for r in api.diff(*paths, inputs=api.InputSpec(arrays={"x": x}), fuse=True).results if r.pair.a.name == "y"]
    assert r.metrics.sqnr_db == pytest.approx(want, abs=0.01), (r.metrics.sqnr_db, want)


@pytest.mark.parametrize("dtype, values", [
    (np.int8, [127, -128, 0, 1, 5, -5, 100, -100]), (np.int16, [32767, -32768, 0, 1, 5, -5, 1000, -1000]),
    (np.int32, [2 ** 31 - 1, -2 ** 31, 0, 1, 5, -5, 2 ** 30, -2 ** 30]), (np.float32, [3.0, -4.0, 0.5, 0.5])])
def test_the_mean_of_values_whose_sum_is_zero_is_zero(tmp_path, dtype, values):
    """The mean of int8 [127, -128, 0, 1, 5, -5, 100, -100] read -4.441e-16 (int32's -2.9e-11): the sums were taken
    of (x - c) / h, whose quotients round, and scaled back. Oracle: numpy float64 (0.0 exactly)."""
    from onnxprobe.stats.tensor_stats import TensorStats

    x = np.array(values, dtype)
    s = TensorStats.from_array(x)
    want = x.astype(np.float64)
    assert s.mean == want.mean() == 0.0
    assert s.std == pytest.approx(want.std(), rel=1e-15)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    m = make_model([helper.make_node("Identity", ["x"], ["y"], name="i")],
                   [helper.make_tensor_value_info("x", elem, [len(values)])], [helper.make_tensor_value_info("y", elem, [len(values)])])
    onnx.save(m, tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", x)
    r = CliRunner().invoke(app, ["layers", str(tmp_path / "m.onnx"), "--all", "--input", f"x={tmp_path / 'x.npy'}", "--json", "-"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["tensors"][0]["mean"] == 0


@pytest.mark.parametrize("value, scale, shape", [(1e4, 0.01, (100, 1000)), (6.0, 0.05, (64, 4096)), (-1e4, 0.05, (64, 4096)),
                                                 (1e4, 0.2, (8, 1000))])
def test_cosine_of_a_pair_pointing_the_same_way_over_long_rows(tmp_path, value, scale, shape):
    """A = k B on a constant B, rows of 1000-4096 elements: the float32 partial sums of squares drift by 2e-9 an
    element (Σb² 1.7e-6 off), and the cosine, taken from them, read 0.999874 where float64 says 1: a false FAIL
    of --metric cosine --min-cosine 0.9999. Oracle: numpy float64."""
    from onnx import numpy_helper

    x = np.full(shape, value, np.float32)
    paths = []
    for name, s in (("a", scale), ("b", 1.0)):
        m = make_model([helper.make_node("Mul", ["x", "s"], ["y"], name="mul")],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))],
                       [numpy_helper.from_array(np.array(s, np.float32), "s")])
        onnx.save(m, tmp_path / f"{name}.onnx")
        paths.append(str(tmp_path / f"{name}.onnx"))
    va, vb = (x * np.float32(scale)).astype(np.float64).ravel(), x.astype(np.float64).ravel()
    want = float(va @ vb / np.sqrt((va @ va) * (vb @ vb)))
    tol = api.Tolerance(metric="cosine", min_cosine=0.9999)
    (r,) = api.diff(*paths, inputs=api.InputSpec(arrays={"x": x}), tolerance=tol).results
    assert r.metrics.cosine == pytest.approx(want, abs=5e-6) and r.passed, (r.metrics.cosine, want)
