"""Values of tensors inside a Loop body are stacked per iteration (a scan output of the Loop), which
onnxruntime refuses when their shape changes between iterations: here a tensor of an If branch inside the
loop, which holds a value on even iterations and an empty placeholder on odd ones. ``layers --save`` said
"please report this" and ``mark`` wrote a model no runtime could run without a word (QA); now the failure
says what cannot be done and what can, and mark notes it. Statistics of the same tensors work (checked
against numpy)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app

runner = CliRunner()
F = TensorProto.FLOAT


def _model(path) -> str:
    """Loop of N steps over v: on even steps v * 2 (then: tb), on odd ones v - 1e4 (else: eb)."""
    vi = helper.make_tensor_value_info
    then = helper.make_graph([helper.make_node("Mul", ["v_in", "two"], ["tb"], name="then_mul")], "then", [], [vi("tb", F, ["a", "b"])])
    other = helper.make_graph([helper.make_node("Sub", ["v_in", "big"], ["eb"], name="else_sub")], "else", [], [vi("eb", F, ["a", "b"])])
    body = helper.make_graph(
        [helper.make_node("Mod", ["i", "two_i"], ["r"], name="mod"), helper.make_node("Equal", ["r", "zero_i"], ["even"], name="eq"),
         helper.make_node("If", ["even"], ["v_out"], then_branch=then, else_branch=other, name="b_if"),
         helper.make_node("Identity", ["c_in"], ["c_out"], name="keep")], "body",
        [vi("i", TensorProto.INT64, []), vi("c_in", TensorProto.BOOL, []), vi("v_in", F, ["a", "b"])],
        [vi("c_out", TensorProto.BOOL, []), vi("v_out", F, ["a", "b"])],
        [numpy_helper.from_array(np.array(2, np.int64), "two_i"), numpy_helper.from_array(np.array(0, np.int64), "zero_i")])
    g = helper.make_graph([helper.make_node("Loop", ["N", "cond", "x"], ["vf"], body=body, name="loop")], "g",
                          [vi("x", F, ["a", "b"]), vi("N", TensorProto.INT64, [])], [vi("vf", F, ["a", "b"])],
                          [numpy_helper.from_array(np.array(True), "cond"), numpy_helper.from_array(np.array(2, np.float32), "two"),
                           numpy_helper.from_array(np.array(1e4, np.float32), "big")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


def _inputs(tmp_path) -> str:
    np.savez(tmp_path / "in.npz", x=np.ones((3, 4), np.float32), N=np.array(3, np.int64))
    return str(tmp_path / "in.npz")


def test_saving_values_that_cannot_be_stacked_says_why_and_what_works(tmp_path):
    m, feeds = _model(tmp_path / "m.onnx"), _inputs(tmp_path)
    r = runner.invoke(app, ["layers", m, "--name", "tb", "--inputs", feeds, "--save", str(tmp_path / "out.npz")])
    assert r.exit_code == 1 and "please report" not in r.stderr, r.stderr
    assert "'tb'" in r.stderr and "per iteration" in r.stderr and "drop --save" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    # the statistics of the same tensor: iterations 0 and 2 ran the then branch (v*2: 2, then (2-1e4)*2)
    r = runner.invoke(app, ["layers", m, "--name", "tb", "--inputs", feeds, "--format", "json"])
    assert r.exit_code == 0, r.output
    import json

    (row,) = json.loads(r.stdout)
    vals = np.concatenate([np.full(12, 2.0), np.full(12, (2.0 - 1e4) * 2)])
    assert row["min"] == vals.min() and row["max"] == vals.max() and abs(row["mean"] - vals.mean()) <= 1e-9 * abs(vals.mean())


def test_mark_notes_values_a_runtime_may_not_stack(tmp_path):
    m = _model(tmp_path / "m.onnx")
    # one iteration: the branch is taken in each, the copy runs, and the note says what may not stack elsewhere
    r = runner.invoke(app, ["mark", m, "--name", "tb", "--input", "N=1", "-o", str(tmp_path / "marked.onnx")])
    assert r.exit_code == 0 and "'tb'" in r.stderr and "stacked one per iteration" in r.stderr, r.stderr
    # iterations that alternate the branches: the copy would not run (its Loop cannot stack 'tb'), so none is
    # written, and the line says --stats marks it (a copy that no runtime runs was written, exit 0)
    r = runner.invoke(app, ["mark", m, "--name", "tb", "--input", "N=4", "-o", str(tmp_path / "marked4.onnx")])
    assert r.exit_code == 1 and "tb" in r.stderr and "--stats marks them" in r.stderr, r.stderr
    assert not (tmp_path / "marked4.onnx").exists()
    r = runner.invoke(app, ["mark", m, "--name", "tb", "--stats", "-o", str(tmp_path / "stats.onnx")])
    assert r.exit_code == 0 and "stacked" not in r.stderr, r.stderr


def test_the_failed_save_names_only_the_values_that_may_not_stack(tmp_path):
    """The loop's condition and counter keep their shape each iteration and stack fine: only the If
    branch's tensors are named (QA: the message listed 'cond_out' and others first)."""
    m, feeds = _model(tmp_path / "m.onnx"), _inputs(tmp_path)
    r = runner.invoke(app, ["layers", m, "--all", "--inputs", feeds, "--save", str(tmp_path / "out.npz")])
    assert r.exit_code == 1 and "'tb'" in r.stderr and "'eb'" in r.stderr, r.stderr
    assert "'c_out'" not in r.stderr and "'r'" not in r.stderr and "'even'" not in r.stderr, r.stderr
