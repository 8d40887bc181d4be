"""The introduced error (B's node fed with A's matched inputs, against A's tensor) as an IntroducedError:
the magnitudes the reports show, checked against numpy float64, on the one-run diff and on the host path;
its light in-graph row; and the light PairSums behind it (merging, JSON, what it refuses)."""

from __future__ import annotations

import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxprobe import api
from onnxprobe.graph.pair_nodes import PairBuilder
from onnxprobe.runtime.runners import base as base_runner
from onnxprobe.stats.host_sums import pair_sums
from onnxprobe.stats.pooled import LIGHT_FIELDS, PairSums


def _two_layers(path, w1: np.ndarray, w2: np.ndarray) -> str:
    """x -> MatMul(w1) -> Relu -> MatMul(w2) -> y."""
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"), helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w2"], ["y"], name="mm2")]
    g = helper.make_graph(nodes, "two", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, w1.shape[0]])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, w2.shape[1]])],
                          initializer=[numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(m, str(path))
    return str(path)


def _oracle(a: np.ndarray, c: np.ndarray) -> dict:
    """The introduced error's magnitudes in numpy float64 (``stats.metrics``' definitions)."""
    a, c = a.astype(np.float64).reshape(-1), c.astype(np.float64).reshape(-1)
    d = a - c
    return {"max_abs": np.abs(d).max(), "mean_abs": np.abs(d).mean(), "rmse": math.sqrt((d * d).mean()),
            "cosine": float(a @ c / (np.linalg.norm(a) * np.linalg.norm(c))),
            "sqnr_db": 20 * math.log10(np.linalg.norm(c) / np.linalg.norm(d)), "worst": int(np.abs(d).argmax())}


@pytest.mark.parametrize("offset", [0.0, 1e3], ids=["centred", "offset-1e3"])
@pytest.mark.parametrize("mode", ["fused-small-on-host", "fused-in-graph", "host"])
def test_introduced_error_equals_numpy_float64(tmp_path, monkeypatch, mode, offset):
    """B differs from A only in the second layer: there the introduced error is that layer's alone
    (B's MatMul on A's Relu output, against A's), the first layer's is exact."""
    if mode == "fused-in-graph":
        monkeypatch.setattr(base_runner, "SMALL_PAIRS_ON_HOST", (0, 0))
    rng = np.random.default_rng(3)
    w1 = rng.standard_normal((16, 32)).astype(np.float32)
    w2 = rng.standard_normal((32, 24)).astype(np.float32)
    w2b = (w2 * (1 + 0.05 * rng.standard_normal(w2.shape))).astype(np.float32)
    a = _two_layers(tmp_path / "a.onnx", w1, w2)
    b = _two_layers(tmp_path / "b.onnx", w1, w2b)
    x = (rng.standard_normal((4, 16)) + offset).astype(np.float32)
    res = api.diff(a, b, selection=api.Selection(all=True), config=api.RunConfig(device="cpu"),
                   inputs=api.InputSpec(arrays={"x": x}), fuse=mode != "host")
    assert (res.in_graph > 0) == (mode != "host")
    by = {r.pair.a.name: r for r in res.results}
    # the oracle: numpy float64 from A's Relu output (onnxruntime's, as both sides see it)
    r_a = ort.InferenceSession(_expose(a, "r"), providers=["CPUExecutionProvider"]).run(["r"], {"x": x})[0]
    want = _oracle(r_a.astype(np.float64) @ w2.astype(np.float64), r_a.astype(np.float64) @ w2b.astype(np.float64))
    got = by["y"].introduced
    assert isinstance(got, api.IntroducedError) and not hasattr(got, "max_rel")
    for k in ("max_abs", "mean_abs", "rmse"):
        assert getattr(got, k) == pytest.approx(want[k], rel=1e-4), k
    assert got.cosine == pytest.approx(want["cosine"], abs=1e-6)
    assert got.sqnr_db == pytest.approx(want["sqnr_db"], abs=1e-3)
    assert np.ravel_multi_index(got.worst, (4, 24)) == want["worst"]
    assert not got.exact
    assert by["h"].introduced.exact and by["r"].introduced.exact  # the first layer is the same on both sides
    assert by["y"].metrics.max_rel > 0  # the accumulated metrics keep every field


def _expose(path: str, name: str) -> bytes:
    m = onnx.load(path)
    m.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    return m.SerializeToString()


def test_one_run_and_host_introduced_errors_agree(tmp_path):
    rng = np.random.default_rng(5)
    w1, w2 = rng.standard_normal((16, 32)).astype(np.float32), rng.standard_normal((32, 24)).astype(np.float32)
    a = _two_layers(tmp_path / "a.onnx", (w1 * 1.01).astype(np.float32), w2)
    b = _two_layers(tmp_path / "b.onnx", w1, (w2 * 0.98).astype(np.float32))
    kw = dict(selection=api.Selection(all=True), config=api.RunConfig(device="cpu"), inputs=api.InputSpec(seed=1))
    host, fused = api.diff(a, b, fuse=False, **kw), api.diff(a, b, fuse=True, **kw)
    for r1, r2 in zip(host.results, fused.results):
        assert r1.pair.a.name == r2.pair.a.name and (r1.introduced is None) == (r2.introduced is None)
        if r1.introduced is not None:
            assert r2.introduced.sqnr_db == pytest.approx(r1.introduced.sqnr_db, abs=1e-4)
            assert r2.introduced.max_abs == pytest.approx(r1.introduced.max_abs, rel=1e-6)
            assert r2.introduced.worst == r1.introduced.worst


HOSTILE = {
    "offset-1e4": lambda r, s: (r.standard_normal(s) + 1e4, r.standard_normal(s) * 1e-2),
    "small": lambda r, s: (r.standard_normal(s) * 1e-15, r.standard_normal(s) * 1e-16),  # squares ~1e-30: normal
    "one-element": lambda r, s: (np.full((1,), 3.0), np.full((1,), -0.5)),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_light_row_equals_numpy_float64(case):
    """The introduced error's in-graph row (``row_head(light=True)`` and ``row_sums``): max |d|, its argmax and the float64
    sums, against numpy float64; it reads b only for b - a and Σb² (no |b|, no division)."""
    rng = np.random.default_rng(7)
    shape = (3, 5, 40) if case != "one-element" else (1,)
    base, delta = HOSTILE[case](rng, shape)
    a = np.asarray(base, np.float32)
    b = np.asarray(base + delta, np.float32)
    g = helper.make_graph([], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(shape)) for n in "ab"], [])
    pb = PairBuilder(g, 17, {"a", "b"})
    head = pb.row_head("a", "b", shape, 1e-3, "p", light=True)
    outs = (head.maxima, head.argmax, pb.row_sums(head))
    g.output.extend(onnx.ValueInfoProto(name=o) for o in outs)
    ops = [n.op_type for n in g.node]
    assert "Div" not in ops and sum(1 for n in g.node if n.op_type == "Abs") == 1  # |a - b| only
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    mx, arg, sums = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(outs, {"a": a, "b": b})
    d = a.astype(np.float64) - b.astype(np.float64)
    assert np.asarray(mx).size == 1 and float(np.ravel(mx)[0]) == pytest.approx(np.abs(d).max(), rel=1e-6, abs=0)
    assert int(np.ravel(arg)[0]) == int(np.abs(d).reshape(-1).argmax())
    want = [(d * d).sum(), (b.astype(np.float64) ** 2).sum(), (a.astype(np.float64) ** 2).sum(), np.abs(d).sum()]
    np.testing.assert_allclose(np.ravel(sums), want, rtol=1e-5)


def _full(sample: int, rng) -> PairSums:
    a = rng.standard_normal((6, 7)).astype(np.float32)
    return pair_sums(a, (a + 0.1 * rng.standard_normal(a.shape)).astype(np.float32), 1e-3, sample)


def test_light_sums_merge_serialise_and_refuse_what_they_lack():
    rng = np.random.default_rng(11)
    full0, full1 = _full(0, rng), _full(1, rng)
    light0, light1 = full0.as_introduced(), full1.as_introduced()
    assert light0.light and not full0.light and light0.as_introduced() is light0
    # the same numbers as the full sums where they overlap
    assert light0.introduced() == full0.introduced()
    assert light0.introduced().sqnr_db == full0.metrics().sqnr_db
    # light merged with full is light, in either order, and equals light merged with light
    assert full0.merge(light1) == light0.merge(light1) == light1.merge(full0).merge(PairSums())
    assert light0.merge(light1).introduced() == full0.merge(full1).introduced()
    with pytest.raises(ValueError, match="introduced"):
        light0.metrics()
    moved = light0.shifted(5)  # shards laid end to end stay light, their left-out fields at the identities
    assert moved.light and moved.max_rel_sample == 0 and moved.worst[0] == 5 and list(moved.per_sample) == [5]
    d = light0.merge(light1).to_dict()
    assert d["light"] is True and not set(LIGHT_FIELDS) & set(d)
    assert PairSums.from_dict(d) == light0.merge(light1)
    assert "light" not in full0.to_dict() and PairSums.from_dict(full0.to_dict()) == full0
    with pytest.raises(ValueError, match="light"):
        PairSums.from_dict({**d, "light": "yes"})
    # pair_sums(light=True) gives the light sums of pair_sums
    a = rng.standard_normal((9,)).astype(np.float32)
    b = (a * 1.1).astype(np.float32)
    assert pair_sums(a, b, 1e-3, 2, light=True) == pair_sums(a, b, 1e-3, 2).as_introduced()
    bad = a.copy()
    bad[3] = np.nan  # the masked path
    assert pair_sums(bad, b, 1e-3, 2, light=True) == pair_sums(bad, b, 1e-3, 2).as_introduced()


def test_pairs_whose_squares_underflow_in_float32_are_measured_on_the_host(tmp_path, monkeypatch):
    """Activations near 1e-25: their float32 squares are nothing, so the in-graph sums cannot be trusted
    (Σ(a-b)² would read 0 beside a non-zero max |a-b|: an SQNR of +inf, "exact", where float64 says about
    40 dB, the 1 % change of the weights); the one-run diff leaves such pairs to the host's float64."""
    monkeypatch.setattr(base_runner, "SMALL_PAIRS_ON_HOST", (0, 0))  # every pair in the graph's rows, none on the host
    rng = np.random.default_rng(13)
    w1 = (rng.standard_normal((16, 32)) * 1e-13).astype(np.float32)
    w2 = rng.standard_normal((32, 24)).astype(np.float32)
    a = _two_layers(tmp_path / "a.onnx", w1, w2)
    b = _two_layers(tmp_path / "b.onnx", (w1 * (1 + 0.01 * rng.standard_normal(w1.shape))).astype(np.float32), w2)
    x = (rng.standard_normal((4, 16)) * 1e-12).astype(np.float32)
    kw = dict(selection=api.Selection(all=True), config=api.RunConfig(device="cpu"), inputs=api.InputSpec(arrays={"x": x}),
              tolerance=api.Tolerance.from_flags("sqnr"))
    host, fused = api.diff(a, b, fuse=False, **kw), api.diff(a, b, fuse=True, **kw)
    assert fused.in_graph == 0  # every pair left the one run for the host
    for r1, r2 in zip(host.results, fused.results):
        m1, m2 = r1.metrics, r2.metrics
        assert m1.max_abs > 0 and 25 < m1.sqnr_db < 60, (r1.pair.a.name, m1.sqnr_db)
        assert m2.sqnr_db == pytest.approx(m1.sqnr_db, abs=1e-6) and m2.rmse == pytest.approx(m1.rmse, rel=1e-6, abs=0)
        assert m2.cosine == pytest.approx(m1.cosine, abs=1e-9) and r2.passed == r1.passed


def _runtime_reshapes(path, pairs: int, scale: float = 1.0) -> str:
    """``pairs`` chains x -> Reshape(x, shape) -> Mul, where ``shape`` is a graph input of unknown length:
    no shape inference can tell the rank or size of a Reshape's output (as a dynamic export's attention
    reshapes to sizes computed at run time)."""
    nodes, prev = [], "x"
    w = numpy_helper.from_array(np.array(scale, np.float32), "w")
    for i in range(pairs):
        nodes += [helper.make_node("Reshape", [prev, "shape"], [f"r{i}"], name=f"reshape{i}"),
                  helper.make_node("Mul", [f"r{i}", "w"], [f"m{i}"], name=f"mul{i}"),
                  helper.make_node("Reshape", [f"m{i}", "back"], [f"y{i}"], name=f"back{i}")]
        prev = f"y{i}"
    g = helper.make_graph(nodes, "runtime_reshapes",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 64]),
                           helper.make_tensor_value_info("shape", TensorProto.INT64, ["n"]),
                           helper.make_tensor_value_info("back", TensorProto.INT64, [2])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


def test_many_pairs_of_unknown_shape_are_measured_in_the_one_run(tmp_path, monkeypatch):
    """Pairs that no row can measure (no known rank) come out of diff's one run raw, within the budget for
    them (runners.base.SMALL_PAIRS_ON_HOST, counted at its per-tensor size); 120 such pairs (360 tensors with B's
    recomputed ones) fit, so no second run of either whole model is made, and every pair has its metrics
    and its introduced error, as separate runs measure them."""
    import onnxprobe.runtime.runners.ort as ort_runner
    from test_diff import assert_same_metrics

    a, b = _runtime_reshapes(tmp_path / "a.onnx", 60, 1.001), _runtime_reshapes(tmp_path / "b.onnx", 60)
    x = np.random.default_rng(3).standard_normal((64, 64)).astype(np.float32)
    inputs = api.InputSpec(arrays={"x": x, "shape": np.array([16, 16, 16], np.int64), "back": np.array([64, 64], np.int64)})
    kw = dict(selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False), inputs=inputs)
    sessions, real = [], ort_runner.create_session
    monkeypatch.setattr(ort_runner, "create_session", lambda *s, **k: sessions.append(1) or real(*s, **k))
    one = api.diff(a, b, fuse=True, **kw)
    assert len(sessions) == 1, f"{len(sessions)} sessions: pairs of unknown shape were measured in runs of their own"
    assert one.in_graph == len(one.results)
    muls = [r for r in one.results if r.pair.a.op_type == "Mul"]
    assert len(muls) == 60 and all(r.introduced is not None and r.metrics is not None for r in muls)
    assert_same_metrics(api.diff(a, b, fuse=False, **kw), one)


def _old_opset_flatten(path, scale: float) -> str:
    """x [4, 64, 1, 512] -> Mul -> a -> Reshape(a, Concat(Slice(Shape(a), 0, 2), [-1])) -> t [4, 64, 512] -> Mul -> y,
    at opset 12: onnx's inference propagates no values through Slice-11 and Concat-11, so only the version
    converter's reading (graph.shapes.concrete_shapes) tells t's rank; t (512 KiB) is too big to leave the
    run raw."""
    c = (lambda name, v: helper.make_node("Constant", [], [name], name=f"c_{name}", value=numpy_helper.from_array(np.array(v, np.int64), name)))
    nodes = [helper.make_node("Mul", ["x", "w"], ["a"], name="scale"), helper.make_node("Shape", ["a"], ["sh"], name="shape"),
             c("zero", [0]), c("two", [2]), c("minus1", [-1]),
             helper.make_node("Slice", ["sh", "zero", "two"], ["lead"], name="slice"),
             helper.make_node("Concat", ["lead", "minus1"], ["target"], name="concat", axis=0),
             helper.make_node("Reshape", ["a", "target"], ["t"], name="flatten"),
             helper.make_node("Mul", ["t", "w"], ["y"], name="out")]
    g = helper.make_graph(nodes, "flatten", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 64, 1, 512])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(np.array(scale, np.float32), "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 12)])
    m.ir_version = 7
    onnx.save(m, str(path))
    return str(path)


def test_pairs_whose_rank_only_the_version_converter_tells_get_rows_in_the_one_run(tmp_path, monkeypatch):
    import onnxprobe.runtime.runners.ort as ort_runner
    from test_diff import assert_same_metrics

    a, b = _old_opset_flatten(tmp_path / "a.onnx", 1.001), _old_opset_flatten(tmp_path / "b.onnx", 1.0)
    x = np.random.default_rng(5).standard_normal((4, 64, 1, 512)).astype(np.float32)
    kw = dict(selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False), inputs=api.InputSpec(arrays={"x": x}))
    sessions, real = [], ort_runner.create_session
    monkeypatch.setattr(ort_runner, "create_session", lambda *s, **k: sessions.append(1) or real(*s, **k))
    one = api.diff(a, b, fuse=True, **kw)
    assert len(sessions) == 1, f"{len(sessions)} sessions: a pair the one run could measure took runs of its own"
    assert one.in_graph == len(one.results) and {"t", "y"} <= {r.pair.a.name for r in one.results}
    assert_same_metrics(api.diff(a, b, fuse=False, **kw), one)


def test_the_raw_budget_goes_first_to_pairs_no_row_can_measure(tmp_path, monkeypatch):
    """Small pairs of known shape come first in the report, pairs of unknown rank after them: the budget for
    pairs taken raw out of the one run goes to the latter first (a row can measure the former), so a budget
    with room for both unknown pairs and one small one keeps everything in one run."""
    import onnxprobe.runtime.runners.ort as ort_runner

    def model(path, scale):
        nodes = [helper.make_node("Relu", ["x"], ["p0"], name="relu0"), helper.make_node("Relu", ["p0"], ["p1"], name="relu1"),
                 helper.make_node("Mul", ["p1", "w"], ["p2"], name="mul0"),
                 helper.make_node("Reshape", ["p2", "shape"], ["r0"], name="reshape"),
                 helper.make_node("Mul", ["r0", "w"], ["m0"], name="mul1"), helper.make_node("Reshape", ["m0", "back"], ["y"], name="back")]
        g = helper.make_graph(nodes, "mixed", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 64]),
                                               helper.make_tensor_value_info("shape", TensorProto.INT64, ["n"]),
                                               helper.make_tensor_value_info("back", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [numpy_helper.from_array(np.array(scale, np.float32), "w")])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.save(m, str(path))
        return str(path)

    each = 64 * 1024  # unknown pairs count 2 x each, and each more for B's recomputed tensor
    monkeypatch.setattr(base_runner, "SMALL_PAIRS_ON_HOST", (each, 7 * each))
    a, b = model(tmp_path / "a.onnx", 1.001), model(tmp_path / "b.onnx", 1.0)
    inputs = api.InputSpec(arrays={"x": np.random.default_rng(1).standard_normal((64, 64)).astype(np.float32),
                                   "shape": np.array([16, 256], np.int64), "back": np.array([64, 64], np.int64)})
    sessions, real = [], ort_runner.create_session
    monkeypatch.setattr(ort_runner, "create_session", lambda *s, **k: sessions.append(1) or real(*s, **k))
    one = api.diff(a, b, fuse=True, selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False), inputs=inputs)
    assert {"r0", "m0"} <= {r.pair.a.name for r in one.results}
    assert len(sessions) == 1 and one.in_graph == len(one.results), (len(sessions), one.in_graph, len(one.results))


def test_an_introduced_sqnr_of_minus_inf_reads_minus_inf(tmp_path):
    """B all zeros, A's Add adding 1e-3: y0's introduced SQNR is -inf (all of its error is its own), and it
    read '-' (CSV empty, JSON null), as if not measured; the depth line said 'every pair exact (1)' with
    two of three pairs at -inf. Oracle: 10 log10(Σb² / Σ(a-b)²) with Σb² = 0 and Σ(a-b)² > 0."""
    import json

    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    def model(path, c):
        g = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["m"], name="mul"), helper.make_node("Add", ["m", "c"], ["y0"], name="add"),
                               helper.make_node("Identity", ["y0"], ["y"], name="out")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["a", "b"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])],
                              [numpy_helper.from_array(np.array(1, np.float32), "w"), numpy_helper.from_array(np.array(c, np.float32), "c")])
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)

    model(tmp_path / "a.onnx", 1e-3)
    model(tmp_path / "b.onnx", 0)
    np.savez(tmp_path / "z.npz", x=np.zeros((3, 3), np.float32))
    a, b = np.zeros(9) + np.float32(1e-3), np.zeros(9)
    with np.errstate(divide="ignore"):
        want = 10 * np.log10(np.sum(b * b) / np.sum((a - b) ** 2))
    assert want == -math.inf
    args = ["diff", str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), "--all", "--inputs", str(tmp_path / "z.npz"),
            "--columns", "tensor,max_abs,sqnr_db,introduced_sqnr_db,pass", "--no-cache"]
    run = CliRunner().invoke
    rows = {r["tensor"]: r for r in json.loads(run(app, [*args, "--format", "json"]).stdout)}
    assert rows["y0"]["sqnr_db"] == "-inf" and rows["y0"]["introduced_sqnr_db"] == "-inf"
    assert rows["y"]["introduced_sqnr_db"] == "exact" and rows["m"]["introduced_sqnr_db"] == "exact"
    csv = run(app, [*args, "--format", "csv"]).stdout.splitlines()
    assert "y0,0.0010000000474974513,-inf,-inf,false" in csv
    table = run(app, args).stdout
    (y0,) = [ln for ln in table.splitlines() if ln.startswith("y0 ")]
    assert y0.split()[2:4] == ["-inf", "-inf"]
    assert "every pair exact" not in table and "2 at -inf dB" in table
    # --json says -inf as max_rel says inf: the string, never null (not measured) nor a bare -Infinity (jq)
    text = run(app, [*args[:-3], "--json", "-"]).stdout
    full = json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in --json"))
    (p,) = [p for p in full["pairs"] if p["a"] == "y0"]
    assert p["sqnr_db"] == "-inf" and p["max_rel"] == "inf"
    assert p["introduced_sqnr_db"] == "-inf" and p["introduced_count"] == 9 and p["introduced_max_abs"] > 0
    # every reader of that JSON takes the word: the table made again from it, Netron's values, the HTML page
    from onnxprobe.report.diff import diff_table
    from onnxprobe.report.overlay import _netron_value
    again = diff_table(full)
    keys = [c.key for c in again.columns]
    (row,) = [r for r in again.rows if r.values[keys.index("tensor")] == "y0"]
    for k in ("sqnr_db", "introduced_sqnr_db"):
        assert row.cells[keys.index(k)] == "-inf" and row.values[keys.index(k)] == -math.inf, k
    assert _netron_value(p, "sqnr_db") == "-inf" and _netron_value(p, "introduced_sqnr_db") == "-inf"
