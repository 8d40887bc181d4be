"""The debugger over If/Loop/Scan bodies: `where` moves to the reader of a graph input that ran (not one in an
If branch not taken), and the node view labels body inputs and outputs as what they are."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
F, B = TensorProto.FLOAT, TensorProto.BOOL


def debug(path, lines: list[str]) -> str:
    r = runner.invoke(app, ["debug", str(path), "--script", "-"], input="\n".join(lines) + "\n", env=ENV)
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    return r.stdout


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def if_model(else_reads_x: bool = True) -> onnx.ModelProto:
    """y = If(c, then: Relu(x), else: Neg(x) or Neg(z)). onnx sorts a node's attributes by name, so the
    else branch comes first in the walk, as in the exported models where `where` went wrong (silero-vad)."""
    def branch(op, name, src, out):
        return helper.make_graph([helper.make_node(op, [src], [out], name=name)], name, [], [vi(out, F, [2])])

    node = helper.make_node("If", ["c"], ["y"], name="if", then_branch=branch("Relu", "then_relu", "x", "t_out"),
                            else_branch=branch("Neg", "else_neg", "x" if else_reads_x else "z", "e_out"))
    return make_model([node], [vi("x", F, [2]), vi("z", F, [2]), vi("c", B, [])], [vi("y", F, [2])])


@pytest.mark.parametrize("cond", [True, False])
def test_where_on_a_graph_input_moves_to_the_reader_that_ran(tmp_path, cond):
    """The graph input's first reader in the walk is in the else branch; with c true the then branch runs
    (onnx.reference says which branch's value y is), and `where` goes to its reader."""
    p = tmp_path / "if.onnx"
    onnx.save(if_model(), p)
    x = np.array([3, -1], np.float32)
    y = ReferenceEvaluator(onnx.load(str(p))).run(None, {"x": x, "z": x, "c": np.array(cond)})[0]
    ran = "then_relu" if np.array_equal(y, np.maximum(x, 0)) else "else_neg"
    assert ran == ("then_relu" if cond else "else_neg")
    out = " ".join(debug(p, ["input x [3,-1]", "input z [0,0]", f"input c {str(cond).lower()}", "where absmax>2"]).split())
    assert f"a graph input, read first by node {ran} " in out and "did not run" not in out
    assert f"#{1 if cond else 0}/" in out  # the cursor is at that node


def test_where_on_a_graph_input_whose_readers_did_not_run_says_so(tmp_path):
    p = tmp_path / "if.onnx"
    onnx.save(if_model(else_reads_x=False), p)
    out = " ".join(debug(p, ["input x [0,0]", "input z [3,-1]", "input c true", "where absmax>2"]).split())
    assert "z (tensor" in out and "read first by node else_neg (Neg, #0), which did not run on these inputs" in out


def loop_model() -> onnx.ModelProto:
    """a = Relu(x); Loop(3, true, v0) whose body computes v_out = v_in + a, scan_out = v_out * a,
    cond_out = Identity(cond_in); y = Neg(vf)."""
    body = helper.make_graph(
        [helper.make_node("Add", ["v_in", "a"], ["v_out"], name="b_add"),
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="b_id"),
         helper.make_node("Mul", ["v_out", "a"], ["scan_out"], name="b_mul")], "body",
        [vi("i", TensorProto.INT64, []), vi("cond_in", B, []), vi("v_in", F, [2])],
        [vi("cond_out", B, []), vi("v_out", F, [2]), vi("scan_out", F, [2])])
    trip = helper.make_tensor("trip", TensorProto.INT64, [], [3])
    cond = helper.make_tensor("cond", B, [], [True])
    return make_model(
        [helper.make_node("Relu", ["x"], ["a"], name="relu"),
         helper.make_node("Loop", ["trip", "cond", "v0"], ["vf", "scans"], body=body, name="loop"),
         helper.make_node("Neg", ["vf"], ["y"], name="neg")],
        [vi("x", F, [2]), vi("v0", F, [2])], [vi("y", F, [2]), vi("scans", F, [None, 2])], [trip, cond], opset=16)


def scan_model() -> onnx.ModelProto:
    """Scan over xs [3, 2] with state s: s_out = s_in + x_t, y_t = Relu(s_out)."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"], name="s_add"),
         helper.make_node("Relu", ["s_out"], ["y_t"], name="s_relu")], "body",
        [vi("s_in", F, [2]), vi("x_t", F, [2])], [vi("s_out", F, [2]), vi("y_t", F, [2])])
    return make_model([helper.make_node("Scan", ["s0", "xs"], ["s_final", "ys"], body=body, num_scan_inputs=1, name="scan")],
                      [vi("s0", F, [2]), vi("xs", F, [3, 2])], [vi("s_final", F, [2]), vi("ys", F, [3, 2])])


def rows(text: str) -> dict[str, str]:
    """Node-view rows, 'in 0 v_in' -> the rest of the line, spaces squeezed."""
    out = {}
    for line in text.splitlines():
        cells = line.split()
        if len(cells) > 3 and cells[0] in ("in", "out") and cells[1].isdigit():
            out[f"{cells[0]} {cells[1]} {cells[2]}"] = " ".join(cells[3:])
    return out


def test_loop_body_inputs_and_outputs_are_labelled_as_the_loops(tmp_path):
    """The node view read v_in and cond_in (the body's own inputs) as 'outer scope' with no type, and
    scan_out and cond_out (handed to the Loop) as '(unused)', as if dead code."""
    p = tmp_path / "loop.onnx"
    onnx.save(loop_model(), p)
    x = np.array([-1, 1], np.float32)
    np.save(tmp_path / "x.npy", x)
    scans = ReferenceEvaluator(onnx.load(str(p))).run(["scans"], {"x": x, "v0": x})[0]
    assert scans.shape == (3, 2)  # the body ran: its rows have values
    out = debug(p, [f"input x {tmp_path / 'x.npy'}", f"input v0 {tmp_path / 'x.npy'}", "run",
                    "goto b_add", "goto b_id", "goto b_mul"])
    got = rows(out)
    assert "(unused)" not in out and "outer scope" not in out
    assert got["in 0 v_in"].startswith("2 float32") and got["in 0 v_in"].endswith("loop body input: carried, from v0")
    assert got["in 0 cond_in"].startswith("scalar bool") and got["in 0 cond_in"].endswith("loop body input: condition")
    assert got["out 0 v_out"].endswith("→ b_mul · loop body output: carried → vf")
    assert got["out 0 cond_out"].endswith("loop body output: condition of the next iteration")
    assert got["out 0 scan_out"].endswith("loop body output: scan → scans")
    assert got["in 0 v_out"].endswith("← b_add") and got["in 1 a"].endswith("← relu")


def test_scan_body_and_if_branch_outputs_are_labelled(tmp_path):
    p = tmp_path / "scan.onnx"
    onnx.save(scan_model(), p)
    got = rows(debug(p, ["goto s_add", "goto s_relu"]))
    assert got["in 0 s_in"].endswith("scan body input: state, from s0")
    assert got["in 1 x_t"].startswith("2 float32") and got["in 1 x_t"].endswith("scan body input: slice of xs")
    assert got["out 0 s_out"].endswith("→ s_relu · scan body output: state → s_final")
    assert got["out 0 y_t"].endswith("scan body output: scan → ys")
    p = tmp_path / "if.onnx"
    onnx.save(if_model(), p)
    got = rows(debug(p, ["goto then_relu", "goto else_neg"]))
    assert got["out 0 t_out"].endswith("if branch output: → y") and got["out 0 e_out"].endswith("if branch output: → y")
    assert got["in 0 x"].endswith("graph input")


def test_show_of_a_body_input_says_what_it_is_not_another_tensor(tmp_path):
    """`show v_in` (a Loop body's carried input) said "no tensor named 'v_in'; did you mean 'v_out'?"."""
    path = tmp_path / "loop.onnx"
    onnx.save(loop_model(), str(path))
    for name, what in (("v_in", "carried, from v0"), ("cond_in", "condition")):
        r = runner.invoke(app, ["debug", str(path), "--script", "-"], input=f"show {name}\n", env=ENV)
        err = r.stderr.strip().splitlines()
        assert r.exit_code == 1 and len(err) == 1 and "Traceback" not in r.output, r.output
        assert f"'{name}' (loop body input: {what}) is a body's own input" in err[0] and "did you mean" not in err[0], err[0]


def test_node_view_of_a_branch_not_taken_counts_no_nan_or_inf(tmp_path):
    """A tensor of an If branch that did not run has no values to count NaN or Inf among: the node view
    shows '-' there, as the `layers` table does, not a clean 0 0 that reads as checked."""
    p = tmp_path / "if.onnx"
    onnx.save(if_model(), p)
    out = debug(p, ["input x [3,-1]", "input z [0,0]", "input c true", "run", "goto else_neg"])
    row = next(line for line in out.splitlines() if line.startswith("out 0")).split()
    cells = row[row.index("float32") + 1:][:7]  # min max mean std NaN Inf: 'not run' - - - NaN Inf
    assert cells[:2] == ["not", "run"] and cells[5:7] == ["-", "-"], row
    out = debug(p, ["input x [3,-1]", "input z [0,0]", "input c true", "run", "goto then_relu"])
    row = next(line for line in out.splitlines() if line.startswith("out 0")).split()
    assert row[row.index("float32") + 1:][4:6] == ["0", "0"], row


def empty_in_then_model() -> onnx.ModelProto:
    """y = If(c, then: Relu(x) beside an empty Slice of x, else: Neg(x)): a tensor that runs empty (count 0, shape
    [0]) in one branch, tensors of count 0 that did not run in the other."""
    ints = (lambda name, v: helper.make_node("Constant", [], [name], value=helper.make_tensor(name, TensorProto.INT64, [1], v)))
    then = helper.make_graph([ints("t_s", [0]), ints("t_e", [0]), helper.make_node("Slice", ["x", "t_s", "t_e"], ["t_empty"]),
                              helper.make_node("Relu", ["x"], ["t_out"], name="then_relu")],
                             "then_body", [], [vi("t_out", F, [2])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e_out"], name="else_neg")], "else_body", [], [vi("e_out", F, [2])])
    node = helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)
    return make_model([node], [vi("x", F, [2]), vi("c", B, [])], [vi("y", F, [2])])


@pytest.mark.parametrize("cond", [True, False])
def test_where_count_0_finds_a_tensor_that_ran_empty_never_one_that_did_not_run(tmp_path, cond):
    """A tensor of the branch not taken has a count of 0 and no runtime shape: `where count==0` (and the API's
    where, on a result of api.layers) matched it as if it were empty, the Constant of a branch not taken too."""
    from onnxprobe import api

    p = tmp_path / "if.onnx"
    onnx.save(empty_in_then_model(), p)
    ran = ReferenceEvaluator(onnx.load(str(p))).run(None, {"x": np.array([3, -1], np.float32), "c": np.array(cond)})[0]
    assert np.array_equal(ran, [3, 0] if cond else [-3, 1])
    feed = ["input x [3,-1]", f"input c {str(cond).lower()}"]
    for extra in ("", " --weights"):
        out = " ".join(debug(p, feed + [f"where count==0{extra}", "where count<1 --weights"]).split())
        if cond:
            assert out.count("first tensor where count") == 2 and "t_empty" in out and "e_out" not in out
        else:
            assert "first tensor" not in out and "no tensor where count==0" in out, out
    res = api.layers(str(p), selection=api.Selection(all=True, include_constants=True),
                     inputs=api.InputSpec(arrays={"x": np.array([3, -1], np.float32), "c": np.array(cond)}))
    hit = api.where(res, "count==0")
    assert (hit[0].name if hit else None) == ("t_empty" if cond else None)


def test_where_next_goes_on_after_the_tensor_found_not_after_its_readers_node():
    """A hit on a graph input moves the cursor to its reader; `where --next` searched after that node and skipped
    its outputs (cnn: conv1_out, absmax 1.65, after `image`)."""
    from conftest import sample_path

    out = debug(sample_path("cnn"), ["where absmax>0", "where absmax>0 --next", "where absmax>0 --next"])
    hits = [ln.split(":")[1].split("(")[0].strip() for ln in out.splitlines() if ln.startswith("first tensor")]
    assert hits == ["image", "conv1_out", "bn1_out"], out
    assert "first tensor after image where" in out


def test_nodes_takes_an_op_type_qualified_by_its_domain(tmp_path):
    """`nodes op:com.microsoft.FusedConv` found nothing (exit 1) though `inspect` writes op types so and every
    selection (`probe add`, `stats --op`, `layers --op`) takes them."""
    x = vi("x", F, [1, 2, 4, 4])
    w = helper.make_tensor("w", F, [2, 2, 1, 1], [1.0, 0.0, 0.0, 1.0])
    nodes = [helper.make_node("FusedConv", ["x", "w"], ["c"], name="fc", domain="com.microsoft", activation="Relu"),
             helper.make_node("Relu", ["c"], ["y"], name="r")]
    m = make_model(nodes, [x], [vi("y", F, [1, 2, 4, 4])], [w])
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    p = tmp_path / "fused.onnx"
    onnx.save(m, p)
    for line in ("nodes op:com.microsoft.FusedConv", "nodes --op com.microsoft.FusedConv", "nodes op:com.microsoft.Fused*"):
        out = debug(p, [line])
        assert " fc " in out and "FusedConv" in out and " r " not in out, (line, out)


def test_match_takes_model_as_every_two_model_command_does(tmp_path):
    """`match TENSOR --model b` was refused ("unknown option '--model'") though README says --model b works everywhere
    with a second model; it looks the name up in that model (the other's same name is not taken)."""
    from conftest import sample_path

    cnn = str(sample_path("cnn"))
    r = runner.invoke(app, ["debug", cnn, cnn, "--script", "-"], input="match conv1_out --model b\nmatch nope --model b\n",
                      env=ENV)
    assert "conv1_out (a: node conv1, Conv)" in r.stdout and "matched by name" in r.stdout, r.output
    assert "is not a compared tensor of model b" in r.output and "unknown option" not in r.output
