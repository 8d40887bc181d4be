"""``diff`` inside If branches: a branch runs once or not at all, so its tensors are paired (by name) and
compared when it ran, against numpy on the same inputs, in the one-run diff and in separate runs alike;
a branch that did not run gives "not run", never a comparison of placeholders (a scalar's included),
and no verdict. Loop/Scan bodies stay out, with their note."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api

X = np.array([1.0, 2.0, 3.0, 4.0], np.float32)


def _model(path, w: float) -> str:
    """x = Relu(x0); If c: then xw = x * w, s = ReduceSum(xw) (a scalar), t_out = xw * s;
    else n = -x, e_s = ReduceMax(n) (a scalar), e_out = n + e_s."""
    then = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["xw"], name="mw"),
                              helper.make_node("ReduceSum", ["xw"], ["s"], keepdims=0, name="rs"),
                              helper.make_node("Mul", ["xw", "s"], ["t_out"], name="m1")],
                             "then", [], [helper.make_tensor_value_info("t_out", TensorProto.FLOAT, [4])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["n"], name="neg"),
                               helper.make_node("ReduceMax", ["n"], ["e_s"], keepdims=0, name="rm"),
                               helper.make_node("Add", ["n", "e_s"], ["e_out"], name="a1")],
                              "else", [], [helper.make_tensor_value_info("e_out", TensorProto.FLOAT, [4])])
    m = make_model([helper.make_node("Relu", ["x0"], ["x"], name="relu"),
                    helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)],
                   [helper.make_tensor_value_info("c", TensorProto.BOOL, []), helper.make_tensor_value_info("x0", TensorProto.FLOAT, [4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [numpy_helper.from_array(np.array([w], np.float32), "w")])
    onnx.save(m, str(path))
    return str(path)


def _expected(w: float, cond: bool) -> dict[str, np.ndarray]:
    """The oracle: numpy float32, as the model computes."""
    x = np.maximum(X, 0)
    if cond:
        xw = x * np.float32(w)
        s = xw.sum(dtype=np.float32)
        return {"x": x, "xw": xw, "s": np.asarray(s), "t_out": xw * s, "y": xw * s}
    n = -x
    return {"x": x, "n": n, "e_s": np.asarray(n.max()), "e_out": n + n.max(), "y": n + n.max()}


BRANCH = {True: ("xw", "s", "t_out"), False: ("n", "e_s", "e_out")}


@pytest.mark.parametrize("fuse", [True, False], ids=["one-run", "separate-runs"])
@pytest.mark.parametrize("cond", [True, False])
def test_diff_compares_the_branch_that_ran_and_says_which_did_not(cond, fuse, tmp_path):
    a, b = _model(tmp_path / "a.onnx", 1.01), _model(tmp_path / "b.onnx", 1.0)
    res = api.diff(a, b, selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False), fuse=fuse,
                   inputs=api.InputSpec(arrays={"c": np.array(cond), "x0": X}))
    assert not any("failed" in n for n in res.notes), res.notes
    by = {r.pair.a.name: r for r in res.results}
    assert set(BRANCH[True] + BRANCH[False]) <= set(by)  # both branches' tensors are paired, by name
    ea, eb = _expected(1.01, cond), _expected(1.0, cond)
    for t in BRANCH[cond]:  # ran: compared, against numpy
        r = by[t]
        assert r.pair.a.scope.endswith("then_branch" if cond else "else_branch") and r.problem is None
        d = ea[t].astype(np.float64) - eb[t].astype(np.float64)
        assert r.metrics.max_abs == pytest.approx(np.abs(d).max(), rel=1e-6, abs=1e-12), t
        assert r.metrics.rmse == pytest.approx(np.sqrt((d * d).mean()), rel=1e-6, abs=1e-12), t
        assert r.passed == (np.abs(d).max() <= 1e-4 + 1e-3 * np.abs(eb[t]).max()), t
    for t in BRANCH[not cond]:  # did not run: no value on either side, so no comparison and no verdict
        r = by[t]
        assert r.metrics is None and r.passed is None and "did not run" in r.problem, (t, r.problem)
    verdict = res.verdict()[0]
    if cond:  # w differs only on the then branch: the error starts there, inside it
        assert res.first_failure is not None and res.first_failure.pair.a.name == "xw" and verdict == "fail"
    else:
        assert verdict == "pass" and all(by[t].metrics.exact for t in BRANCH[False])


def test_a_scalar_of_a_branch_that_did_not_run_has_no_value(tmp_path):
    """The placeholder a lifted scalar gets when its branch does not run is empty ([0]), not a 0 that
    would pass for a value (``graph.expose``); layers' saved values and diff's runs leave it out."""
    m = _model(tmp_path / "m.onnx", 1.0)
    res = api.layers(m, api.Selection(all=True), api.RunConfig(device="cpu", cache=False),
                     api.InputSpec(arrays={"c": np.array(False), "x0": X}), save=True)
    assert "s" not in res.arrays and "xw" not in res.arrays and res.stats["s"].count == 0
    np.testing.assert_array_equal(res.arrays["e_s"], _expected(1.0, False)["e_s"])  # the scalar that ran
    assert res.arrays["e_s"].shape == ()


def test_diff_still_leaves_loop_bodies_out_with_a_note(tmp_path):
    body = helper.make_graph([helper.make_node("Identity", ["cond_in"], ["cond_out"]),
                              helper.make_node("Add", ["acc_in", "one"], ["acc_out"], name="inc")], "body",
                             [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [2])],
                             [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [2])])
    m = make_model([helper.make_node("Loop", ["n", "", "x"], ["y"], name="loop", body=body)],
                   [helper.make_tensor_value_info("n", TensorProto.INT64, []), helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], [numpy_helper.from_array(np.ones(2, np.float32), "one")])
    p = tmp_path / "loop.onnx"
    onnx.save(m, p)
    res = api.diff(p, p, selection=api.Selection(all=True), config=api.RunConfig(device="cpu"),
                   inputs=api.InputSpec(arrays={"n": np.array(3), "x": np.zeros(2, np.float32)}))
    assert "acc_out" not in {r.pair.a.name for r in res.results}
    assert any("Loop/Scan bodies" in n and "acc_out" in n for n in res.notes), res.notes


def test_the_table_marks_branch_tensors_and_says_which_did_not_run(tmp_path):
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    a, b = _model(tmp_path / "a.onnx", 1.01), _model(tmp_path / "b.onnx", 1.0)
    r = CliRunner().invoke(app, ["diff", a, b, "--all", "--input", "c=true", "--input", "x0=[1,2,3,4]"])
    assert r.exit_code == 1, r.output  # the output differs: a failing verdict
    rows = {line.split()[1] if line.split()[1] != "↳" else line.split()[2]: line for line in r.stdout.splitlines()
            if line.strip() and line.split()[0].lstrip("▶").isdigit()}
    assert "↳ xw" in rows["xw"] and "↳" not in rows["y"] and rows["xw"].lstrip().startswith("▶")
    assert "n: not compared: not run: its If branch (if/else_branch) did not run" in r.output


@pytest.mark.parametrize("cond", [True, False])
def test_a_marked_branch_scalar_is_empty_when_its_branch_did_not_run(cond, tmp_path):
    """``mark`` writes a scalar of an If branch as [1] (its value) when its branch ran and [0] when it did
    not, typed as rank 1 of no fixed size: no declared shape the run contradicts (onnxruntime would warn
    at every run), and no 0 that would pass for a value."""
    import onnxruntime as ort

    m, out = _model(tmp_path / "m.onnx", 1.0), tmp_path / "marked.onnx"
    api.mark(m, out, api.Selection(names=("s", "e_s")))
    written = onnx.load(str(out))
    lifted = [vi for vi in written.graph.output if vi.name not in ("y",)]
    dims = [[d.HasField("dim_value") for d in vi.type.tensor_type.shape.dim] for vi in lifted]
    assert len(lifted) == 2 and dims == [[False], [False]]
    so = ort.SessionOptions()
    so.log_severity_level = 1  # warnings on: a declared shape the run contradicts would be logged
    sess = ort.InferenceSession(written.SerializeToString(), so, providers=["CPUExecutionProvider"])
    got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {"c": np.array(cond), "x0": X})))
    ran, idle = ("s", "e_s") if cond else ("e_s", "s")
    want = _expected(1.0, cond)[ran]
    (ran_out,) = [v for k, v in got.items() if k.startswith(ran)]
    (idle_out,) = [v for k, v in got.items() if k.startswith(idle)]
    np.testing.assert_array_equal(ran_out, want.reshape(1))
    assert idle_out.shape == (0,)


@pytest.mark.parametrize("if_name", ["if", "another_if"])
def test_structural_alignment_pairs_branch_tensors_of_the_same_if_only(if_name, tmp_path):
    """Branch tensors renamed in B: aligned by op order and shape inside the same If's branch, the If known
    by its paired output where its node has another name (never across two If nodes whose outputs are not
    one another's: a branch runs only sometimes)."""
    a = _model(tmp_path / "a.onnx", 1.0)
    m = onnx.load(a)
    rename = {t: f"{t}_renamed" for t in ("xw", "s", "n", "e_s")}
    iff = next(n for n in m.graph.node if n.op_type == "If")
    iff.name = if_name
    for attr in iff.attribute:
        for n in attr.g.node:  # tensors and nodes renamed: neither name nor node-name matching pairs them
            n.name = f"{n.name}_renamed"
            n.input[:] = [rename.get(x, x) for x in n.input]
            n.output[:] = [rename.get(x, x) for x in n.output]
    onnx.save(m, str(tmp_path / "b.onnx"))
    res = api.diff(a, str(tmp_path / "b.onnx"), selection=api.Selection(all=True), config=api.RunConfig(device="cpu"),
                   inputs=api.InputSpec(arrays={"c": np.array(True), "x0": X}))
    structural = {r.pair.a.name: r.pair.b.name for r in res.results if r.pair.strategy == "structural"}
    # the If node renamed too: its output y pairs by name, so its branches are one another's (they were left
    # unmatched as another If's)
    assert structural.get("xw") == "xw_renamed" and res.verdict()[0] == "pass"
    assert next(r for r in res.results if r.pair.a.name == "xw").metrics.exact


def test_branch_tensors_pair_where_the_if_nodes_have_other_names(tmp_path):
    """A renamed copy (every tensor and node): a branch tensor's scope names its If node, so no branch
    tensor paired (QA: a renamed silero-vad paired 5 of 185). The If outputs paired by structure say which
    If is which; the branches are aligned again in each other's names."""
    a = _model(tmp_path / "a.onnx", 1.0)
    m = onnx.load(a)
    names: dict[str, str] = {}

    def nm(x: str) -> str:
        return x if not x or x in ("c", "x0", "y", "w") else names.setdefault(x, f"v{len(names)}")

    def rename(g) -> None:
        for n in g.node:
            n.name = "n_" + nm(n.name)
            n.input[:] = [nm(i) for i in n.input]
            n.output[:] = [nm(o) for o in n.output]
            for at in n.attribute:
                if at.type == onnx.AttributeProto.GRAPH:
                    rename(at.g)
        for o in g.output:
            o.name = nm(o.name)

    rename(m.graph)
    onnx.save(m, str(tmp_path / "b.onnx"))
    for cond in (True, False):
        res = api.diff(a, str(tmp_path / "b.onnx"), selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False),
                       inputs=api.InputSpec(arrays={"c": np.array(cond), "x0": X}))
        got = {r.pair.a.name: r.pair.b.name for r in res.results}
        for t in BRANCH[True] + BRANCH[False]:
            assert got.get(t) == names[t], (t, got)
