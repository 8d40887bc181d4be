"""The one-run diff's in-graph pair rows (``graph.pair_nodes``) against numpy float64 on the same float32
values, on hostile distributions (near-constant differences, whose float32 sums drift the most; a large
offset; one element; a scalar) and on rows whose length only the input shapes tell (a symbolic last dim:
the graph is built for the given shapes, and rows past BLOCK_MAX elements are summed in float64)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxprobe import api
from onnxprobe.graph.stats_nodes import BLOCK_MAX
from onnxprobe.runtime.runners import base as base_runner


def _model(path, w: float, c: float) -> str:
    """y = x * w + c; z = Relu(y); s = ReduceSum(y) (a scalar): x is [1, n] with n symbolic."""
    inits = [numpy_helper.from_array(np.array(w, np.float32), "w"), numpy_helper.from_array(np.array(c, np.float32), "c")]
    nodes = [helper.make_node("Mul", ["x", "w"], ["xw"], name="mul"), helper.make_node("Add", ["xw", "c"], ["y"], name="add"),
             helper.make_node("Relu", ["y"], ["z"], name="relu"),
             helper.make_node("ReduceSum", ["y"], ["s"], name="sum", keepdims=0)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "n"])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("s", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


def _values(path: str, x: np.ndarray) -> dict[str, np.ndarray]:
    m = onnx.load(path)
    m.graph.output.extend(onnx.ValueInfoProto(name=n) for n in ("xw", "y"))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, {"x": x})))


def _oracle(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    d = a - b
    return {"max_abs": np.abs(d).max(), "mean_abs": np.abs(d).mean(), "rmse": np.sqrt((d * d).mean()),
            "cosine": (a @ b) / np.sqrt((a @ a) * (b @ b)), "b_absmax": np.abs(b).max(),
            "max_rel": (np.abs(d) / np.maximum(np.abs(b), 1e-45)).max()}  # float32 tensors: its smallest subnormal


CASES = {  # name -> (n, x)
    "near-constant 3000": (3000, lambda r, n: (0.1 + 1e-4 * r.standard_normal((1, n)))),
    "near-constant past BLOCK_MAX": (BLOCK_MAX * 3 // 2, lambda r, n: (0.1 + 1e-4 * r.standard_normal((1, n)))),
    "large offset": (5000, lambda r, n: 1e4 + r.standard_normal((1, n))),
    "one element": (1, lambda r, n: r.standard_normal((1, n))),
}


@pytest.mark.parametrize("case", list(CASES))
def test_in_graph_pair_rows_equal_numpy_float64(case, tmp_path, monkeypatch):
    monkeypatch.setattr(base_runner, "SMALL_PAIRS_ON_HOST", (0, 0))  # every float pair through a row
    n, make = CASES[case]
    x = make(np.random.default_rng(0), n).astype(np.float32)
    a, b = _model(tmp_path / "a.onnx", 1.001, 0.5002), _model(tmp_path / "b.onnx", 1.0, 0.5)
    res = api.diff(a, b, selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False),
                   inputs=api.InputSpec(arrays={"x": x}))
    assert not any("one-run diff failed" in note for note in res.notes), res.notes
    va, vb = _values(a, x), _values(b, x)
    by_name = {r.pair.b.name: r for r in res.results}
    assert {"xw", "y", "z", "s"} <= set(by_name)
    assert res.in_graph >= 4  # measured by the rows, not on the host
    # float32 partial sums: within their drift (a near-constant row of 3000: ~4e-6); past BLOCK_MAX the
    # rows are float64 (float32 would drift ~3e-5 there, past this bound)
    rel = 1e-6 if n > BLOCK_MAX else 2e-5
    for t in ("xw", "y", "z", "s"):
        m, want = by_name[t].metrics, _oracle(va[t], vb[t])
        for k, v in want.items():
            tol = 1e-12 if k in ("max_abs", "b_absmax", "max_rel") else rel  # maxima: exact in float32
            assert getattr(m, k) == pytest.approx(v, rel=max(tol, 1e-7), abs=1e-30), (case, t, k)
        intro = by_name[t].introduced
        if t in ("y", "z", "s"):  # B's node on A's inputs: its own error, measured in the graph too
            assert intro is not None, t


LEAN = {  # name -> (declared shape, run shape)
    "static": ((3, 5, 40), (3, 5, 40)),
    "scalar": ((), ()),
    "symbolic, empty at run time": ((2, "n"), (2, 0)),
    "symbolic": ((2, "n"), (2, 33)),
}


@pytest.mark.parametrize("light", [False, True], ids=["pair", "introduced"])
@pytest.mark.parametrize("case", list(LEAN))
def test_row_without_extras_equals_numpy_float64_and_holds_no_view_of_the_tensors(case, light):
    """A row without extras (``api.diff(extras=False)``): max |d| by a ReduceMax (no ArgMax, no index),
    no Σ|d|; its maxima keep the tensors' rank, so no Reshape views them (flat views of the big tensors
    raised PP-OCRv4 det's diff --all peak by 24 MB): only where the size may be 0 is |d| flattened, to pad
    it with a 0. Values against numpy float64; a pair's excess with rtol 1e-3."""
    from onnxprobe.graph.pair_nodes import PairBuilder

    declared, run = LEAN[case]
    rng = np.random.default_rng(3)
    a = np.asarray(rng.standard_normal(run) + 10, np.float32)
    b = np.asarray(a + 1e-2 * rng.standard_normal(run), np.float32)
    g = helper.make_graph([], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(declared)) for n in "ab"], [])
    pb = PairBuilder(g, 17, {"a", "b"})
    head = pb.row_head("a", "b", declared, 1e-3, "p", light=light, extras=False)
    mx, arg, sums = head.maxima, head.argmax, pb.row_sums(head)
    assert arg is None
    ops = [n.op_type for n in g.node]
    assert "ArgMax" not in ops and "Gather" not in ops and "Div" not in ops
    flat_inputs = {n.input[0] for n in g.node if n.op_type == "Reshape"}
    viewed = {"a", "b", "p.ad", "p.d"} & {t.split("/")[-1] for t in flat_inputs}
    if case == "static":
        assert not viewed, flat_inputs
    g.output.extend(onnx.ValueInfoProto(name=o) for o in (mx, sums))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    got_max, got_sums = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run([mx, sums], {"a": a, "b": b})
    a64, b64 = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    d = np.abs(a64 - b64)
    if not d.size:  # the run goes through, max |d| 0 (the pad); the reader leaves an empty pair to the host
        assert float(np.ravel(got_max)[0]) == 0.0 and not np.ravel(got_sums).any()
        return
    want_max = [d.max()] if light else [d.max(), np.abs(b64).max(), (d - 1e-3 * np.abs(b64)).max()]
    np.testing.assert_allclose(np.ravel(got_max), want_max, rtol=1e-6, atol=0)
    np.testing.assert_allclose(np.ravel(got_sums), [(d * d).sum(), (b64 * b64).sum(), (a64 * a64).sum()], rtol=1e-6)


# rows past BLOCK_MAX (float64 sums from the start) and an odd number of partial sums per term: onnxruntime's
# float64 ReduceSum along a row of odd length rounds by where the row starts in its buffer (the vectorised sum
# peels an unaligned first element), so a term's sum moved one row up (Σ|d| left out before it) read other last bits
WIDE = {"3 rows past BLOCK_MAX": (3, BLOCK_MAX + 1), "3 rows of 17000": (3, 17000), "5 rows of 20000": (5, 1, 20000),
        "symbolic": (3, "n")}


@pytest.mark.parametrize("light", [False, True], ids=["pair", "introduced"])
@pytest.mark.parametrize("case", list(WIDE))
def test_row_without_extras_sums_bit_for_bit_the_full_rows(case, light):
    """A row without extras sums Σd², Σb² and Σa² to the same float64 bits as the full row (the promise of a
    light diff: every number it reports is the full diff's), whatever the rows' layout; both against numpy."""
    from onnxprobe.graph.pair_nodes import PairBuilder

    declared = WIDE[case]
    shape = tuple(17000 if d == "n" else d for d in declared)
    rng = np.random.default_rng(0)
    b = np.asarray(rng.standard_normal(shape) * 3, np.float32)
    a = np.asarray(b * np.float32(1.001) + np.float32(0.01), np.float32)
    got = {}
    for extras in (True, False):
        g = helper.make_graph([], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(declared)) for n in "ab"], [])
        pb = PairBuilder(g, 17, {"a", "b"})
        sums = pb.row_sums(pb.row_head("a", "b", declared, 1e-3, "p", light=light, extras=extras, sizes=shape))
        g.output.extend([onnx.ValueInfoProto(name=sums)])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        got[extras] = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run([sums], {"a": a, "b": b})[0]
    full, lean = np.ravel(got[True]).tolist(), np.ravel(got[False]).tolist()
    a64, b64 = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    d = a64 - b64
    np.testing.assert_allclose(full, [d @ d, b64 @ b64, a64 @ a64, np.abs(d).sum()], rtol=1e-9)
    assert lean == full[:3], (lean, full)  # Σd², Σb², Σa²: the full row's bits


@pytest.mark.parametrize("case", ["3 rows past BLOCK_MAX", "5 rows of 20000", "symbolic"])
def test_a_pair_and_its_introduced_error_share_one_sums_tail(case):
    """row_sums(head, intro): the pair's row and its introduced error's (a against c, B's node recomputed)
    sum in one tail (one Concat, Cast, Reshape and ReduceSum: four nodes fewer than two rows), in tail_order's
    order: every sum against numpy float64; without extras, the full rows' bits; the reader (compare.fused._rows)
    gives each row its own sums, the introduced error Σa² from the pair's."""
    from onnxprobe.compare.fused import ROW_PREFIX, _rows
    from onnxprobe.graph.pair_nodes import PairBuilder, tail_order

    declared = WIDE[case]
    shape = tuple(17000 if d == "n" else d for d in declared)
    rng = np.random.default_rng(1)
    b = np.asarray(rng.standard_normal(shape) * 3, np.float32)
    a = np.asarray(b * np.float32(1.001) + np.float32(0.01), np.float32)
    c = np.asarray(a + np.float32(1e-3) * rng.standard_normal(shape).astype(np.float32), np.float32)
    got, counts = {}, {}
    for extras in (True, False):
        g = helper.make_graph([], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(declared)) for n in "abc"], [])
        pb = PairBuilder(g, 17, {"a", "b", "c"})
        head = pb.row_head("a", "b", declared, 1e-3, "p", extras=extras, sizes=shape)
        intro = pb.row_head("a", "c", declared, 1e-3, "i", light=True, extras=extras, sizes=shape)
        outs = [head.maxima, head.argmax, pb.row_sums(head, intro), intro.maxima, intro.argmax]
        assert (outs[1] is None) == (outs[4] is None) == (not extras)
        counts[extras] = sum(1 for n in g.node if n.op_type == "Concat" and n.name.endswith(".parts"))
        names = dict(zip(["max", "arg", "sum", "i.max", "i.arg"], outs))
        g.output.extend([onnx.ValueInfoProto(name=o) for o in outs if o is not None])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        vals = dict(zip([k for k, o in names.items() if o is not None], sess.run([o for o in outs if o is not None], {"a": a, "b": b, "c": c})))
        got[extras] = vals
    assert counts == {True: 1, False: 1}  # one tail for both rows
    a64, b64, c64 = (v.astype(np.float64).ravel() for v in (a, b, c))
    d, di = a64 - b64, a64 - c64
    want = {("", "dd"): d @ d, ("", "bb"): b64 @ b64, ("", "aa"): a64 @ a64, ("i", "dd"): di @ di, ("i", "bb"): c64 @ c64,
            ("", "sum_abs"): np.abs(d).sum(), ("i", "sum_abs"): np.abs(di).sum()}
    full, lean = np.ravel(got[True]["sum"]).tolist(), np.ravel(got[False]["sum"]).tolist()
    np.testing.assert_allclose(full, [want[k] for k in tail_order(True, True, True)], rtol=1e-9)
    assert lean == full[:5], (lean, full)  # the squares: the full rows' bits
    for extras in (True, False):  # the reader splits the tail back into the two rows
        v = got[extras]
        outputs = {f"{ROW_PREFIX}0.max": v["max"], f"{ROW_PREFIX}0.sum": v["sum"], f"{ROW_PREFIX}0i.max": v["i.max"]}
        if extras:
            outputs.update({f"{ROW_PREFIX}0.arg": v["arg"], f"{ROW_PREFIX}0i.arg": v["i.arg"]})
        r, ri = _rows(outputs, f"{ROW_PREFIX}0", extras=extras)
        assert ri["aa"] == r["aa"] and ri["max_abs"] == pytest.approx(np.abs(di).max(), rel=1e-7)
        for row, w in (("", r), ("i", ri)):
            for s in ("dd", "bb") + (("sum_abs",) if extras else ()):
                assert w[s] == pytest.approx(want[(row, s)], rel=1e-9), (row, s)
        if extras:
            assert ri["argmax"] == int(np.argmax(np.abs(np.float32(a) - np.float32(c)).ravel()))


@pytest.mark.parametrize("free", [2**15, 0], ids=["free share", "none"])
def test_small_pairs_past_the_raw_total_leave_the_run_raw(free, tmp_path, monkeypatch):
    """SMALL_PAIRS_ON_HOST's third number: a pair of two tensors of at most that many bytes leaves the one run raw
    (summed on the host) even past the total, instead of through a row's 29 nodes or more; without it they take
    rows. Either way the metrics are numpy float64's of the same values."""
    from onnxprobe.graph.pair_nodes import PairBuilder

    rows, real = [], PairBuilder.row_head
    monkeypatch.setattr(PairBuilder, "row_head", lambda self, *a, **k: rows.append(a[0]) or real(self, *a, **k))
    monkeypatch.setattr(base_runner, "SMALL_PAIRS_ON_HOST", (2**16, 1, free))  # a total that holds no pair
    n = 3000  # 12 KB a tensor
    x = (1e4 + np.random.default_rng(1).standard_normal((1, n))).astype(np.float32)
    a, b = _model(tmp_path / "a.onnx", 1.001, 0.5002), _model(tmp_path / "b.onnx", 1.0, 0.5)
    res = api.diff(a, b, selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False),
                   inputs=api.InputSpec(arrays={"x": x}))
    by_name = {r.pair.b.name: r for r in res.results}
    assert {"xw", "y", "z", "s"} <= set(by_name) and res.in_graph >= 4
    assert (not rows) if free else len(rows) >= 4, rows
    va, vb = _values(a, x), _values(b, x)
    for t in ("xw", "y", "z", "s"):
        m, want = by_name[t].metrics, _oracle(va[t], vb[t])
        for k, v in want.items():
            assert getattr(m, k) == pytest.approx(v, rel=1e-9 if free else 2e-5, abs=1e-30), (t, k)
