"""Loop (and Scan) through the reference runner (runners.reference_control): onnx.reference 1.23 joins a
Loop's scan outputs with np.vstack instead of stacking them ([3, 2, 3] came out [6, 3], a scalar's [3] as
[3, 1]) and fails on a Loop of no iteration with scan outputs, so ``diff --vs-reference`` compared no such
Loop. Checked against a numpy float64 oracle of the specification and against onnxruntime, with the Loop
in the main graph, in an If branch and inside another Loop's body."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app
from onnxprobe.errors import ExecutionError
from onnxprobe.runtime.runners.reference import ReferenceRunner

V = helper.make_tensor_value_info
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
cli = CliRunner()


def _body(shape, name="body", cond_out=None):
    """v <- v + x * i; scan output s = v * v (after the update); the condition passed through (or
    ``cond_out``: a node computing 'cn' from i)."""
    nodes = [helper.make_node("Cast", ["i"], [f"{name}_fi"], to=F), helper.make_node("Mul", ["x", f"{name}_fi"], [f"{name}_xi"]),
             helper.make_node("Add", ["v", f"{name}_xi"], ["vn"]), helper.make_node("Mul", ["vn", "vn"], ["s"])]
    nodes += cond_out or [helper.make_node("Identity", ["c"], ["cn"])]
    return helper.make_graph(nodes, name, [V("i", I64, []), V("c", B, []), V("v", F, shape)],
                             [V("cn", B, []), V("vn", F, shape), V("s", F, shape)])


def _loop_model(shape, cond: str = "cond", body=None, opset=17) -> onnx.ModelProto:
    node = helper.make_node("Loop", ["M", cond, "v0"], ["vf", "ss"], body=body or _body(shape), name="loop")
    inits = [numpy_helper.from_array(np.array(True), "cond")] if cond else []
    return make_model([node], [V("x", F, shape), V("v0", F, shape), V("M", I64, [])],
                      [V("vf", F, shape), V("ss", F, [None, *shape])], inits, opset=opset)


def _oracle(x, v0, trips):
    """The specification in float64: the carried value after ``trips`` iterations and the stacked scan output."""
    v, ss = v0.astype(np.float64), []
    for i in range(trips):
        v = v + x.astype(np.float64) * i
        ss.append(v * v)
    return v, np.stack(ss) if ss else np.zeros((0, *x.shape))


def _both(m, feeds, names):
    ref, _ = ReferenceRunner(m).execute(m, feeds, names)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return ref, dict(zip(names, sess.run(names, feeds)))


@pytest.mark.parametrize("shape", [[], [3], [2, 3], [2, 1, 2]])
@pytest.mark.parametrize("trips", [0, 1, 3])
def test_loop_scan_outputs_are_stacked(shape, trips):
    rng = np.random.default_rng(len(shape) + trips)
    x = np.asarray(rng.standard_normal(shape) * 100 + 1e4, np.float32)
    v0 = np.asarray(rng.standard_normal(shape), np.float32)
    feeds = {"x": x, "v0": v0, "M": np.array(trips, np.int64)}
    ref, rt = _both(_loop_model(shape), feeds, ["vf", "ss"])
    vf, ss = _oracle(x, v0, trips)
    assert ref["ss"].shape == (trips, *shape) == rt["ss"].shape, (ref["ss"].shape, rt["ss"].shape)
    assert ref["ss"].dtype == np.float32 and ref["vf"].shape == tuple(shape)
    np.testing.assert_allclose(ref["ss"], ss, rtol=1e-6)
    np.testing.assert_allclose(ref["vf"], vf, rtol=1e-6)
    np.testing.assert_allclose(rt["ss"], ss, rtol=1e-6)


def test_loop_in_an_if_branch_and_a_loop_in_a_loop():
    """An If whose then branch is the Loop; an outer Loop whose body runs the inner Loop (trip count 2) and
    scans its stacked output: [outer trips, 2, 2, 3] (the inner Loop has no condition input: a trip count of 2).
    The bodies' ops are the corrected ones too."""
    shape = [2, 3]
    inner = helper.make_node("Loop", ["two", "", "v"], ["vn", "inner_ss"], body=_body(shape, "inner"), name="inner_loop")
    outer_body = helper.make_graph(
        [inner, helper.make_node("Identity", ["c"], ["cn"])], "outer",
        [V("i", I64, []), V("c", B, []), V("v", F, shape)], [V("cn", B, []), V("vn", F, shape), V("inner_ss", F, [2, *shape])])
    nested = helper.make_node("Loop", ["M", "cond", "v0"], ["nf", "nss"], body=outer_body, name="outer_loop")
    then = helper.make_graph([helper.make_node("Loop", ["M", "cond", "v0"], ["tf", "tss"], body=_body(shape, "then_body"), name="then_loop")],
                             "then", [], [V("tf", F, shape), V("tss", F, [None, *shape])])
    other = helper.make_graph([helper.make_node("Identity", ["v0"], ["ef"]), helper.make_node("Unsqueeze", ["v0", "zero"], ["ess"])],
                              "else", [], [V("ef", F, shape), V("ess", F, [None, *shape])])
    branch = helper.make_node("If", ["p"], ["bf", "bss"], then_branch=then, else_branch=other, name="if")
    inits = [numpy_helper.from_array(np.array(True), "cond"), numpy_helper.from_array(np.array(2, np.int64), "two"),
             numpy_helper.from_array(np.array([0], np.int64), "zero")]
    m = make_model([nested, branch], [V("x", F, shape), V("v0", F, shape), V("M", I64, []), V("p", B, [])],
                   [V("nf", F, shape), V("nss", F, [None, 2, *shape]), V("bf", F, shape), V("bss", F, [None, *shape])], inits)
    rng = np.random.default_rng(3)
    x, v0 = rng.standard_normal(shape).astype(np.float32), rng.standard_normal(shape).astype(np.float32)
    feeds = {"x": x, "v0": v0, "M": np.array(3, np.int64), "p": np.array(True)}
    ref, rt = _both(m, feeds, ["nf", "nss", "bf", "bss"])
    v, want = v0.astype(np.float64), []
    for _ in range(3):
        v, ss = _oracle(x, v, 2)  # the inner loop's counter restarts at 0 each outer iteration
        want.append(ss)
    assert ref["nss"].shape == (3, 2, 2, 3) == rt["nss"].shape
    np.testing.assert_allclose(ref["nss"], np.stack(want), rtol=1e-6)
    np.testing.assert_allclose(ref["nf"], v, rtol=1e-6)
    bf, bss = _oracle(x, v0, 3)
    np.testing.assert_allclose(ref["bss"], bss, rtol=1e-6)
    np.testing.assert_allclose(ref["bf"], bf, rtol=1e-6)
    for k in ref:
        np.testing.assert_allclose(ref[k], rt[k], rtol=1e-5)


def test_diff_vs_reference_compares_a_loops_scan_output(tmp_path):
    path = tmp_path / "loop.onnx"
    onnx.save(_loop_model([2, 3]), path)
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "in.npz", x=rng.standard_normal((2, 3)).astype(np.float32),
             v0=rng.standard_normal((2, 3)).astype(np.float32), M=np.array(3, np.int64))
    r = cli.invoke(app, ["diff", str(path), "--vs-reference", "--inputs", str(tmp_path / "in.npz"), "--format", "json"])
    assert r.exit_code == 0, r.output
    import json

    rows = {row["tensor"]: row for row in json.loads(r.stdout)}
    assert rows["ss"]["pass"] is True and rows["ss"]["problem"] is None and rows["ss"]["shape"] == [3, 2, 3], rows["ss"]


def _counted(m_input: str, cond_input: str, limit: int) -> onnx.ModelProto:
    """A Loop whose body's condition is i < ``limit``; scan outputs: the condition the body read (as float)
    and the iteration number; carried: v + 1."""
    body = helper.make_graph(
        [helper.make_node("Less", ["i", "lim"], ["cn"]), helper.make_node("Cast", ["c"], ["seen"], to=F),
         helper.make_node("Add", ["v", "one"], ["vn"]), helper.make_node("Identity", ["i"], ["it"])], "body",
        [V("i", I64, []), V("c", B, []), V("v", F, [])], [V("cn", B, []), V("vn", F, []), V("seen", F, []), V("it", I64, [])])
    node = helper.make_node("Loop", [m_input, cond_input, "v0"], ["vf", "seen_all", "its"], body=body, name="loop")
    inits = [numpy_helper.from_array(np.array(limit, np.int64), "lim"), numpy_helper.from_array(np.array(1, np.float32), "one"),
             numpy_helper.from_array(np.array(True), "cond"), numpy_helper.from_array(np.array(0, np.float32), "v0"),
             numpy_helper.from_array(np.array(4, np.int64), "M")]
    return make_model([node], [], [V("vf", F, []), V("seen_all", F, [None]), V("its", I64, [None])], inits)


def test_a_loop_without_a_condition_input_runs_its_trip_count():
    """(M, ""): the specification's for loop; the body's condition is ignored (onnx.reference ran nothing,
    onnxruntime stops at the first false one). The body reads true first, then its own last condition."""
    ref, _ = ReferenceRunner(m := _counted("M", "", 1)).execute(m, {}, ["vf", "seen_all", "its"])
    assert ref["vf"] == 4 and ref["its"].tolist() == [0, 1, 2, 3], ref
    assert ref["seen_all"].tolist() == [1, 1, 0, 0], ref  # i < 1 is true after iteration 0 only
    # a condition that never turns false: the same as onnxruntime's
    ref, rt = _both(m := _counted("M", "", 10), {}, ["vf", "seen_all", "its"])
    assert ref["vf"] == 4 == rt["vf"] and ref["its"].tolist() == rt["its"].tolist() == [0, 1, 2, 3]
    assert ref["seen_all"].tolist() == rt["seen_all"].tolist() == [1, 1, 1, 1]


@pytest.mark.parametrize("m_input", ["", "M"])
def test_a_loop_with_a_condition_stops_when_the_body_says_so(m_input):
    """("", cond): a while loop, i < 2 false after iteration 2 (3 iterations); (M, cond) the same, below M."""
    ref, rt = _both(_counted(m_input, "cond", 2), {}, ["vf", "seen_all", "its"])
    assert ref["vf"] == 3 == rt["vf"] and ref["its"].tolist() == rt["its"].tolist() == [0, 1, 2]
    assert ref["seen_all"].tolist() == rt["seen_all"].tolist() == [1, 1, 1]


def _scan_body(elem_shape, state_shape):
    """Scan elements of the state's shape: st <- st * 0.5 + x1 - x2; scan output y = x1 * st."""
    nodes = [helper.make_node("Constant", [], ["half"], value=numpy_helper.from_array(np.array(0.5, np.float32))),
             helper.make_node("Mul", ["st", "half"], ["sh"]), helper.make_node("Add", ["sh", "x1"], ["sa"]),
             helper.make_node("Sub", ["sa", "x2"], ["stn"]), helper.make_node("Mul", ["x1", "stn"], ["y"])]
    return helper.make_graph(nodes, "body", [V("st", F, state_shape), V("x1", F, elem_shape), V("x2", F, elem_shape)],
                             [V("stn", F, state_shape), V("y", F, elem_shape)])


def _scan_oracle(st, xs1, xs2):
    """The body over the sequences of elements, in float64: (final state, [y per iteration])."""
    st, ys = st.astype(np.float64), []
    for a, b in zip(xs1, xs2):
        st = st * 0.5 + a.astype(np.float64) - b.astype(np.float64)
        ys.append(a.astype(np.float64) * st)
    return st, ys


@pytest.mark.parametrize("in_axes,in_dirs,out_axis,out_dir", [
    ([0, 0], [0, 0], 0, 0), ([1, -1], [0, 1], 1, 0), ([0, 2], [1, 0], -1, 1), ([-3, 1], [1, 1], 2, 1)])
def test_scan_axes_and_directions(in_axes, in_dirs, out_axis, out_dir):
    """Scan-16 (negative axes allowed): onnx.reference refused every axis but 0 and every reverse direction."""
    rng = np.random.default_rng(7)
    elem, length = [2, 3], 4
    scans = []
    for ax in in_axes:
        full = list(elem)
        full.insert(ax % 3, length)
        scans.append((rng.standard_normal(full) * 10).astype(np.float32))
    node = helper.make_node("Scan", ["s0", "a", "b"], ["sf", "ys"], body=_scan_body(elem, elem), num_scan_inputs=2,
                            scan_input_axes=in_axes, scan_input_directions=in_dirs, scan_output_axes=[out_axis],
                            scan_output_directions=[out_dir], name="scan")
    m = make_model([node], [V("s0", F, elem), V("a", F, scans[0].shape), V("b", F, scans[1].shape)],
                   [V("sf", F, elem), V("ys", F, None)], opset=16)
    s0 = rng.standard_normal(elem).astype(np.float32)
    feeds = {"s0": s0, "a": scans[0], "b": scans[1]}
    ref, rt = _both(m, feeds, ["sf", "ys"])
    seqs = [[np.take(s, t, axis=ax % 3) for t in (range(length - 1, -1, -1) if d else range(length))]
            for s, ax, d in zip(scans, in_axes, in_dirs)]
    sf, ys = _scan_oracle(s0, *seqs)
    want = np.stack(ys[::-1] if out_dir else ys, axis=out_axis % 3)
    assert ref["ys"].shape == want.shape == rt["ys"].shape, (ref["ys"].shape, rt["ys"].shape)
    np.testing.assert_allclose(ref["ys"], want, rtol=1e-5)
    np.testing.assert_allclose(ref["sf"], sf, rtol=1e-5)
    np.testing.assert_allclose(rt["ys"], want, rtol=1e-5)


def test_scan_of_no_element_keeps_its_state():
    """A sequence of length 0: the state is the initial one, the scan output [0] + the element's shape
    (onnx.reference refused it; onnxruntime 1.32 fails on it too)."""
    node = helper.make_node("Scan", ["s0", "a", "b"], ["sf", "ys"], body=_scan_body([3], [3]), num_scan_inputs=2, name="scan")
    m = make_model([node], [V("s0", F, [3]), V("a", F, [None, 3]), V("b", F, [None, 3])], [V("sf", F, [3]), V("ys", F, [None, 3])])
    s0 = np.arange(3, dtype=np.float32)
    ref, _ = ReferenceRunner(m).execute(m, {"s0": s0, "a": np.zeros((0, 3), np.float32), "b": np.zeros((0, 3), np.float32)}, ["sf", "ys"])
    assert ref["ys"].shape == (0, 3) and ref["ys"].dtype == np.float32
    np.testing.assert_array_equal(ref["sf"], s0)


@pytest.mark.parametrize("directions", [[0, 0], [0, 1], [1, 1]])
@pytest.mark.parametrize("lens", [None, [3, 1, 2, 2]])
def test_scan8_batches_and_sequence_lengths(directions, lens):
    """Scan-8 (opset 8): axis 0 the batch (states too), axis 1 the sequence, sequence_lens per batch entry,
    reverse directions within each entry's own length, scan outputs padded with zeros (onnxruntime's). onnx.reference
    ran it as Scan-9 and failed ('x and y have different dtype')."""
    rng = np.random.default_rng(11)
    nb, longest, elem = 4, 3, [2]
    a = rng.standard_normal((nb, longest, *elem)).astype(np.float32)
    b = rng.standard_normal((nb, longest, *elem)).astype(np.float32)
    s0 = rng.standard_normal((nb, *elem)).astype(np.float32)
    node = helper.make_node("Scan", ["L" if lens else "", "s0", "a", "b"], ["sf", "ys"], body=_scan_body(elem, elem),
                            num_scan_inputs=2, directions=directions, name="scan")
    m = make_model([node], [V("s0", F, [nb, *elem]), V("a", F, a.shape), V("b", F, b.shape)] + ([V("L", I64, [nb])] if lens else []),
                   [V("sf", F, [nb, *elem]), V("ys", F, [nb, longest, *elem])], opset=8, ir=3)
    feeds = {"s0": s0, "a": a, "b": b} | ({"L": np.array(lens, np.int64)} if lens else {})
    ref, rt = _both(m, feeds, ["sf", "ys"])
    want_sf, want_ys = [], np.zeros((nb, longest, *elem))
    for n in range(nb):
        k = longest if lens is None else lens[n]
        seqs = [[x[n, t] for t in (range(k - 1, -1, -1) if d else range(k))] for x, d in zip((a, b), directions)]
        sf, ys = _scan_oracle(s0[n], *seqs)
        want_sf.append(sf)
        want_ys[n, :k] = np.stack(ys) if ys else 0
    assert ref["ys"].shape == want_ys.shape == rt["ys"].shape and ref["sf"].shape == (nb, *elem)
    np.testing.assert_allclose(ref["ys"], want_ys, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ref["sf"], np.stack(want_sf), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rt["ys"], want_ys, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rt["sf"], np.stack(want_sf), rtol=1e-5, atol=1e-6)


def test_diff_vs_reference_runs_a_scan8_model(tmp_path):
    node = helper.make_node("Scan", ["", "s0", "a", "b"], ["sf", "ys"], body=_scan_body([2], [2]), num_scan_inputs=2, name="scan")
    m = make_model([node], [V("s0", F, [1, 2]), V("a", F, [1, 3, 2]), V("b", F, [1, 3, 2])],
                   [V("sf", F, [1, 2]), V("ys", F, [1, 3, 2])], opset=8, ir=3)
    onnx.save(m, tmp_path / "scan8.onnx")
    r = cli.invoke(app, ["diff", str(tmp_path / "scan8.onnx"), "--vs-reference"])
    assert r.exit_code == 0 and "2 pairs · 0 failing" in r.stdout, r.output


def test_scan8_sequence_lengths_beyond_the_sequence_are_an_error():
    node = helper.make_node("Scan", ["L", "s0", "a", "b"], ["sf", "ys"], body=_scan_body([2], [2]), num_scan_inputs=2, name="scan")
    m = make_model([node], [V("L", I64, [1]), V("s0", F, [1, 2]), V("a", F, [1, 3, 2]), V("b", F, [1, 3, 2])],
                   [V("sf", F, [1, 2]), V("ys", F, [1, 3, 2])], opset=8, ir=3)
    z = np.zeros((1, 3, 2), np.float32)
    with pytest.raises(ExecutionError, match="sequence_lens"):
        ReferenceRunner(m).execute(m, {"L": np.array([4], np.int64), "s0": z[:, 0], "a": z, "b": z}, ["ys"])


@pytest.mark.parametrize("attr,value", [("scan_input_axes", [2, 0]), ("scan_input_axes", [0, -3]), ("scan_output_axes", [2])])
def test_scan_axes_out_of_range_are_an_error(attr, value):
    """An axis outside [-r, r - 1] is refused, not wrapped round to another axis."""
    node = helper.make_node("Scan", ["s0", "a", "b"], ["sf", "ys"], body=_scan_body([3], [3]), num_scan_inputs=2, name="scan",
                            **{attr: value})
    m = make_model([node], [V("s0", F, [3]), V("a", F, [3, 3]), V("b", F, [3, 3])], [V("sf", F, [3]), V("ys", F, None)], opset=16)
    z = np.zeros((3, 3), np.float32)
    with pytest.raises(ExecutionError, match="out of range"):
        ReferenceRunner(m).execute(m, {"s0": z[0], "a": z, "b": z}, ["ys"])
