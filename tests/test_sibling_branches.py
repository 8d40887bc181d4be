"""Tensors of the same name in sibling bodies (valid ONNX: two If nodes whose branches each name their
output 'o', one If whose two branches both do) are tensors of their own: each gets its own row with its
own numbers (numpy float64 the oracle), the branch that did not run says so, `--save` keeps each, and
`mark --all` exposes each under a distinct output that plain onnxruntime returns (onnx.reference the oracle)."""

from __future__ import annotations

import json
import shlex

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as H
from onnx.reference import ReferenceEvaluator
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.cli.main import app

OPS = {"Relu": lambda x: np.maximum(x, 0), "Neg": np.negative, "Abs": np.abs, "Exp": np.exp}


def _branch(op: str, tag: str) -> onnx.GraphProto:
    return H.make_graph([H.make_node(op, ["x"], ["o"], name="n")], tag, [],
                        [H.make_tensor_value_info("o", T.FLOAT, [3])])


def two_ifs(path, names=("if1", "if2")) -> None:
    g = H.make_graph(
        [H.make_node("If", ["c"], ["y1"], name=names[0], then_branch=_branch("Relu", "t1"), else_branch=_branch("Neg", "e1")),
         H.make_node("If", ["c"], ["y2"], name=names[1], then_branch=_branch("Abs", "t2"), else_branch=_branch("Exp", "e2")),
         H.make_node("Add", ["y1", "y2"], ["y"], name="add")],
        "g", [H.make_tensor_value_info("x", T.FLOAT, [3]), H.make_tensor_value_info("c", T.BOOL, [])],
        [H.make_tensor_value_info("y", T.FLOAT, [3])])
    onnx.save(H.make_model(g, opset_imports=[H.make_opsetid("", 17)]), path)


X = np.array([-1.0, 2.0, -3.0], np.float32)


@pytest.mark.parametrize("names", [("if1", "if2"), ("", "")], ids=["named", "unnamed"])
@pytest.mark.parametrize("cond", [True, False])
def test_each_branch_tensor_has_its_own_numbers(tmp_path, cond, names):
    """Unnamed If nodes: both branches' scopes read 'If/then_branch', so the second If's tensors were taken for
    the first's and dropped from the report, silently. An unnamed node's scope is its listed name ('If_2')."""
    path = tmp_path / "two_if.onnx"
    two_ifs(path, names)
    feeds = {"x": X, "c": np.array(cond)}
    res = api.layers(path, api.Selection(all=True), api.RunConfig(device="cpu"), save=True,
                     inputs=api.InputSpec(arrays=feeds))
    rows = [(ref, st) for ref, st in res.rows() if ref.name == "o"]
    assert len(rows) == 4, [r.key for r, _ in rows]
    assert len({r.key for r, _ in rows}) == 4
    x = X.astype(np.float64)
    for ref, st in rows:
        ran = ref.scope[-1].endswith("then_branch") == cond
        if not ran:
            assert st.count == 0, f"{ref.key}: its branch did not run"
            assert ref.key not in res.arrays
            continue
        want = OPS[ref.op_type](x)
        assert st.count == 3 and st.min == pytest.approx(want.min()) and st.max == pytest.approx(want.max())
        assert st.mean == pytest.approx(want.mean()) and st.std == pytest.approx(want.std())
        np.testing.assert_allclose(res.arrays[ref.key], want, rtol=1e-6)


def test_mark_all_exposes_each_under_its_own_output(tmp_path):
    path, out = tmp_path / "two_if.onnx", tmp_path / "m.onnx"
    two_ifs(path)
    r = CliRunner().invoke(app, ["mark", str(path), "-o", str(out), "--all"])
    assert r.exit_code == 0, r.output
    m = onnx.load(str(out))
    exposed = json.loads({p.key: p.value for p in m.metadata_props}["onnxprobe.exposed"])
    feeds = {"x": X, "c": np.array(True)}
    s = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    got = dict(zip(names, s.run(names, feeds)))
    ref = ReferenceEvaluator(str(out))
    oracle = dict(zip(ref.output_names, ref.run(None, feeds)))
    # the metadata tells the four 'o' apart by their scope
    assert sorted(v for v in exposed["outputs"].values() if v.endswith("/o")) == [
        "if1/else_branch/o", "if1/then_branch/o", "if2/else_branch/o", "if2/then_branch/o"]
    assert len(names) == 7 and len(set(names)) == 7  # y, y1, y2 and four o's
    x = X.astype(np.float64)
    taken = [n for n in names if got[n].size and n not in ("y", "y1", "y2")]
    assert len(taken) == 2
    np.testing.assert_allclose(sorted(got[n].tolist() for n in taken), sorted([np.abs(x).tolist(), np.maximum(x, 0).tolist()]))
    for n in names:
        np.testing.assert_allclose(got[n], oracle[n], rtol=1e-6)


def _diff_json(a, b, cond: bool, *extra: str) -> dict:
    r = CliRunner().invoke(app, ["diff", str(a), str(b), "--all", "--input", "x=[-1,2,-3]", "--input",
                                 f"c={str(cond).lower()}", "--json", "-", *extra])
    assert r.exit_code in (0, 1), r.output
    return json.loads(r.stdout)


def _diff_rows(a, b, cond: bool, *extra: str) -> dict:
    return {p["a"]: p for p in _diff_json(a, b, cond, *extra)["pairs"]}


def _with_op(src, dst, node: str, branch: str, op: str) -> None:
    m = onnx.load(str(src))
    g = next(a.g for n in m.graph.node if n.name == node for a in n.attribute if a.name == branch)
    g.node[0].op_type = op
    onnx.save(m, str(dst))


@pytest.mark.parametrize("cond", [True, False])
@pytest.mark.parametrize("runs", [[], ["--separate-runs"]])
def test_diff_pairs_each_branch_tensor_with_its_own(tmp_path, cond, runs):
    """diff keys each 'o' by its scope: the branches that ran compare their own values, the others read
    'not run' (QA: all four 'o' rows compared 3 values and passed, the untaken Neg and Exp included)."""
    path = tmp_path / "two_if.onnx"
    two_ifs(path)
    rows = _diff_rows(path, path, cond, *runs)
    branch = {k: v for k, v in rows.items() if k.endswith("/o")}
    assert sorted(branch) == ["if1/else_branch/o", "if1/then_branch/o", "if2/else_branch/o", "if2/then_branch/o"]
    for k, p in branch.items():
        ran = k.split("/")[1] == ("then_branch" if cond else "else_branch")
        assert p["scope"] == k.rsplit("/", 1)[0]
        if ran:
            assert p["passed"] is True and p["count"] == 3 and p["exact"], (k, p)
        else:
            assert p["passed"] is None and p["count"] is None and p["problem"].startswith("not run"), (k, p)


@pytest.mark.parametrize("runs", [[], ["--separate-runs"]])
def test_diff_one_branch_changed_fails_that_branch_only(tmp_path, runs):
    """B's if2 then branch computes Neg where A's computes Abs: only that branch's 'o', y2 and y differ,
    by what numpy float64 says (the other If's 'o' of the same name is untouched). That 'o' itself, Abs(x)
    against Neg(x), is never one function of the data: unmatched as such, as a main-graph pair of one name
    would be (a branch tensor records what it reads, the outer x included)."""
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    two_ifs(a)
    _with_op(a, b, "if2", "then_branch", "Neg")
    out = _diff_json(a, b, True, *runs)
    rows = {p["a"]: p for p in out["pairs"]}
    x = X.astype(np.float64)
    want_a = {"if1/then_branch/o": OPS["Relu"](x), "y1": OPS["Relu"](x), "y2": OPS["Abs"](x), "y": OPS["Relu"](x) + OPS["Abs"](x)}
    want_b = {**want_a, "y2": -x, "y": OPS["Relu"](x) - x}
    for k in want_a:
        d = np.abs(want_a[k] - want_b[k])
        ok = bool(np.all(d <= 1e-4 + 1e-3 * np.abs(want_b[k])))
        assert rows[k]["passed"] is ok and rows[k]["max_abs"] == pytest.approx(d.max()), (k, rows[k])
    assert [k for k in want_a if not rows[k]["passed"]] == ["y2", "y"]
    for side in ("unmatched_a", "unmatched_b"):
        assert [(u["name"], u["cause"]) for u in out[side]] == [("if2/then_branch/o", "different-function")], out[side]
    assert all(rows[k]["passed"] is None for k in ("if1/else_branch/o", "if2/else_branch/o"))


def test_debugger_names_each_branch_tensor_by_its_scope(tmp_path):
    """The debugger's index keys each 'o' by its scope: `show`/`save`/`goto` take 'if1/then_branch/o' as
    layers prints it and give that branch's own values (numpy the oracle), a bare 'o' is refused as
    ambiguous with the four choices, and `where` names the branch tensor it stops at (QA: `show o` showed
    whichever branch the index met first, and `stats o` gave four rows of one branch)."""
    path = tmp_path / "two_if.onnx"
    two_ifs(path)
    keys = ["if1/else_branch/o", "if1/then_branch/o", "if2/else_branch/o", "if2/then_branch/o"]
    lines = ["run", "show o", "goto o", "save o " + shlex.quote(str(tmp_path / "o.npy")), "show if1/else_branch/o", "where max>2.5"]
    lines += [f"save {k} {shlex.quote(str(tmp_path / k.replace('/', '_')) + '.npy')}" for k in keys if "then" in k]
    lines += ["goto if2/then_branch/o", "stats o"]
    f = tmp_path / "s.txt"
    f.write_text("\n".join(lines) + "\n")
    r = CliRunner().invoke(app, ["debug", str(path), "--input", "x=[-1,2,-3]", "--input", "c=true", "--script", str(f)],
                           env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert r.exit_code == 1 and "Traceback" not in r.output, r.output
    errors = r.stderr.strip().splitlines()
    for n in (2, 3, 4):  # show o, goto o, save o: one line each, the four choices named
        line = next(e for e in errors if f"line {n}:" in e)
        assert "ambiguous" in line and all(k in line for k in keys), line
    assert any("line 5:" in e and "not run" in e for e in errors)
    assert not (tmp_path / "o.npy").exists()
    x = X.astype(np.float64)
    np.testing.assert_allclose(np.load(tmp_path / "if1_then_branch_o.npy"), OPS["Relu"](x))
    np.testing.assert_allclose(np.load(tmp_path / "if2_then_branch_o.npy"), OPS["Abs"](x))
    # in topological order the Relu branch's max (2) is under 2.5, the Abs branch's (3) over it
    assert OPS["Relu"](x).max() < 2.5 < OPS["Abs"](x).max()
    assert "first tensor where max>2.5: if2/then_branch/o" in r.stdout, r.stdout
    assert "#4/6 n  Abs  in if2/then_branch" in r.stdout
    # `stats o` (a selection by name glob) lists each branch's own row: the two that ran with their own max
    rows = [ln.split() for ln in r.stdout.splitlines() if ln.split()[:2] in (["0", "↳"], ["1", "↳"], ["3", "↳"], ["4", "↳"])]
    got = {c[3]: c for c in rows}
    assert set(got) == {"Neg", "Relu", "Exp", "Abs"} and got["Neg"][7] == "not" and got["Exp"][7] == "not"
    assert float(got["Relu"][8]) == OPS["Relu"](x).max() and float(got["Abs"][8]) == OPS["Abs"](x).max()


def _loop_body(op: str) -> onnx.GraphProto:
    return H.make_graph([H.make_node(op, ["v"], ["o"], name="n"), H.make_node("Identity", ["cond"], ["co"], name="c")], "b",
                        [H.make_tensor_value_info("i", T.INT64, []), H.make_tensor_value_info("cond", T.BOOL, []),
                         H.make_tensor_value_info("v", T.FLOAT, [3])],
                        [H.make_tensor_value_info("co", T.BOOL, []), H.make_tensor_value_info("o", T.FLOAT, [3])])


def test_diff_note_counts_each_loop_body_tensor_of_a_shared_name(tmp_path):
    """Two Loops whose bodies each name 'o' and 'co': diff's note on the body tensors it leaves out counts
    and names all four by their scope (it said 2, one 'o' and one 'co', the other body's hidden)."""
    path = tmp_path / "two_loop.onnx"
    g = H.make_graph([H.make_node("Loop", ["n", "", "x"], ["y1"], name="loop1", body=_loop_body("Neg")),
                      H.make_node("Loop", ["n", "", "x"], ["y2"], name="loop2", body=_loop_body("Abs")),
                      H.make_node("Add", ["y1", "y2"], ["y"], name="add")],
                     "g", [H.make_tensor_value_info("x", T.FLOAT, [3])], [H.make_tensor_value_info("y", T.FLOAT, [3])],
                     [H.make_tensor("n", T.INT64, [], [2])])
    onnx.save(H.make_model(g, opset_imports=[H.make_opsetid("", 17)]), path)
    r = CliRunner().invoke(app, ["diff", str(path), str(path), "--all", "--input", "x=[-1,2,-3]", "--json", "-"])
    assert r.exit_code == 0, r.output
    note = next(n for n in json.loads(r.stdout)["notes"] if "inside Loop/Scan bodies" in n)
    assert note.startswith("4 selected tensor(s)"), note
    assert all(f"{lp}/body/{t} ({lp}/body)" in note for lp in ("loop1", "loop2") for t in ("o", "co")), note


def test_diff_takes_a_branch_tensor_by_its_scope(tmp_path):
    """--name and --atol take 'if2/then_branch/o' as diff prints it; a bare 'o' in --atol or --map is one
    line naming the four keys to give instead (it said only that no model observes 'o')."""
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    two_ifs(a)
    _with_op(a, b, "if2", "then_branch", "Identity")  # a move, which Abs may be written as: paired (Neg is not)
    rows = _diff_rows(a, b, True, "--name", "if2/then_branch/o")
    assert [k for k in rows if k.endswith("/o")] == ["if2/then_branch/o"]
    x = X.astype(np.float64)
    d = np.abs(OPS["Abs"](x) - x).max()  # A's Abs against B's Identity
    assert rows["if2/then_branch/o"]["max_abs"] == pytest.approx(d) and rows["if2/then_branch/o"]["passed"] is False
    rows = _diff_rows(a, b, True, "--atol", f"if2/then_branch/o:{d + 1}")
    assert rows["if2/then_branch/o"]["passed"] is True and rows["y2"]["passed"] is False
    keys = "if1/else_branch/o, if1/then_branch/o, if2/else_branch/o, if2/then_branch/o"
    (tmp_path / "map.json").write_text('{"o": "o"}')
    for extra in (["--atol", "o:1"], ["--map", str(tmp_path / "map.json")]):
        r = CliRunner().invoke(app, ["diff", str(a), str(b), "--all", "--input", "x=[-1,2,-3]", "--input", "c=true", *extra])
        assert r.exit_code == 2 and "Traceback" not in r.output, r.output
        assert keys in r.output and len(r.output.strip().splitlines()) == 1, r.output


def test_a_node_name_sibling_bodies_share_is_ambiguous_in_range_and_goto(tmp_path):
    """The four branch nodes are all named 'n': `--range n:n` took the last silently and the debugger's
    `goto n` / `node n` the first (QA). Both name the nodes and ask for a path (or an index); a path
    reaches its own node."""
    path = tmp_path / "two_if.onnx"
    two_ifs(path)
    r = CliRunner().invoke(app, ["layers", str(path), "--range", "n:n", "--input", "x=[-1,2,-3]", "--input", "c=true"])
    assert r.exit_code == 2 and "4 nodes are named 'n'" in r.output and "if2/then_branch/n" in r.output, r.output
    f = tmp_path / "s.txt"
    f.write_text("goto n\nnode n\ngoto if2/then_branch/n\n")
    r = CliRunner().invoke(app, ["debug", str(path), "--input", "x=[-1,2,-3]", "--input", "c=true", "--script", str(f)],
                           env={"COLUMNS": "200", "NO_COLOR": "1"})
    errors = r.stderr.strip().splitlines()
    assert r.exit_code == 1 and [e for e in errors if "line 1:" in e or "line 2:" in e] and \
        all("4 nodes are named 'n'" in e for e in errors), r.output
    assert "Abs" in r.stdout and "if2/then_branch" in r.stdout, r.stdout


@pytest.mark.parametrize("cond", [True, False])
def test_csv_and_json_rows_name_each_branch_tensor_by_its_key(tmp_path, cond):
    """`layers --format csv/json` and the debugger's `stats --format csv/json` named all four just 'o'."""
    import csv
    import io

    path = tmp_path / "two_if.onnx"
    two_ifs(path)
    np.savez(tmp_path / "in.npz", x=X, c=np.array(cond))
    keys = ["if1/else_branch/o", "if1/then_branch/o", "if2/else_branch/o", "if2/then_branch/o"]
    x = X.astype(np.float64)
    env = {"COLUMNS": "200", "NO_COLOR": "1"}
    r = CliRunner().invoke(app, ["layers", str(path), "--all", "--inputs", str(tmp_path / "in.npz"), "--format", "csv"], env=env)
    assert r.exit_code == 0, r.output
    rows = {x["tensor"]: x for x in csv.DictReader(io.StringIO(r.stdout))}
    assert sorted(k for k in rows if k.endswith("/o")) == keys
    for k, op in zip(keys, ("Neg", "Relu", "Exp", "Abs")):
        ran = k.split("/")[1] == ("then_branch" if cond else "else_branch")
        assert rows[k]["status"] == ("ran" if ran else "not run")
        if ran:
            assert float(rows[k]["mean"]) == pytest.approx(OPS[op](x).mean())
    f = tmp_path / "s.txt"
    f.write_text(f"inputs {shlex.quote(str(tmp_path / 'in.npz'))}\nstats --all --format json\n")
    r = CliRunner().invoke(app, ["debug", str(path), "--script", str(f)], env=env)
    assert r.exit_code == 0, r.output
    out = r.stdout[r.stdout.index("["):]
    assert sorted(t["tensor"] for t in json.loads(out) if t["tensor"].endswith("/o")) == keys
