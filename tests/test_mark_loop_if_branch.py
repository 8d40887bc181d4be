"""`mark --all` of a model whose Loop body holds an If, the branch taken changing between iterations: the copy
stacked the branches' tensors one per iteration, which onnxruntime refuses ("Inconsistent shape in loop output"),
so the copy did not run at all (the model's own output neither), the typing run failed with it and the Loop's own
output y was left out, exit 0. Those body tensors are left out, said in a note (--stats marks them), and the copy
runs, the model's outputs as the original's (the oracle: onnxruntime on the original)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h

from onnxprobe import api


def _nest(path):
    then = h.make_graph([h.make_node("Add", ["acc_in", "hh"], ["t_o"], name="then_add")], "thenb", [],
                        [h.make_tensor_value_info("t_o", T.FLOAT, ["n"])])
    other = h.make_graph([h.make_node("Sub", ["acc_in", "hh"], ["e_o"], name="else_sub")], "elseb", [],
                         [h.make_tensor_value_info("e_o", T.FLOAT, ["n"])])
    body = h.make_graph([h.make_node("Identity", ["cin"], ["cout"], name="b_cond"),
                         h.make_node("Cast", ["it"], ["itb"], to=T.BOOL, name="b_cast"),
                         h.make_node("If", ["itb"], ["acc_out"], name="b_if", then_branch=then, else_branch=other)], "body",
                        [h.make_tensor_value_info("it", T.INT64, []), h.make_tensor_value_info("cin", T.BOOL, []),
                         h.make_tensor_value_info("acc_in", T.FLOAT, ["n"])],
                        [h.make_tensor_value_info("cout", T.BOOL, []), h.make_tensor_value_info("acc_out", T.FLOAT, ["n"])])
    g = h.make_graph([h.make_node("Relu", ["x"], ["hh"], name="relu"), h.make_node("Neg", ["x"], ["x0"], name="neg"),
                      h.make_node("Loop", ["trip", "", "x0"], ["y"], name="loop", body=body),
                      h.make_node("Mul", ["y", "y"], ["z"], name="sq")], "nest",
                     [h.make_tensor_value_info("x", T.FLOAT, ["n"]), h.make_tensor_value_info("trip", T.INT64, [])],
                     [h.make_tensor_value_info("z", T.FLOAT, ["n"])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
    m.ir_version = 9
    onnx.save(m, path)
    return path


def test_branch_tensors_the_loop_cannot_stack_are_left_out_and_the_copy_runs(tmp_path):
    src = _nest(tmp_path / "nest.onnx")
    feed = {"x": np.array([-1.5, 0.5, 2.0], np.float32), "trip": np.array(4, np.int64)}
    res = api.mark(src, tmp_path / "out.onnx", api.Selection(all=True), inputs=api.InputSpec(arrays=feed))
    outs = {m.ref.name for m in res.marked}
    assert "y" in outs and not outs & {"t_o", "e_o", "acc_out"}, outs
    assert any("left out" in n and "--stats" in n for n in res.notes), res.notes
    want = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"]).run(None, feed)[0]
    got = ort.InferenceSession(str(tmp_path / "out.onnx"), providers=["CPUExecutionProvider"]).run(None, feed)
    assert np.array_equal(got[0], want)
    stats = api.mark(src, tmp_path / "st.onnx", api.Selection(all=True), stats=True, inputs=api.InputSpec(arrays=feed))
    assert {"t_o", "e_o", "acc_out"} <= {m.ref.name for m in stats.marked}  # what the note offers


def test_a_body_value_that_stacks_is_kept_and_not_said_typed_by_the_run(tmp_path):
    """A Loop body's tensor of a symbolic shape may not stack (so the copy is run once to see): where it does, it
    is kept, and the note of the types taken from a run does not name it (its type was known already)."""
    body = h.make_graph([h.make_node("Identity", ["cin"], ["cout"]), h.make_node("Neg", ["s"], ["t"], name="neg")], "body",
                        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cin", T.BOOL, []),
                         h.make_tensor_value_info("s", T.FLOAT, ["n"])],
                        [h.make_tensor_value_info("cout", T.BOOL, []), h.make_tensor_value_info("t", T.FLOAT, ["n"])])
    g = h.make_graph([h.make_node("Loop", ["trip", "", "x"], ["y"], name="loop", body=body)], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, ["n"]), h.make_tensor_value_info("trip", T.INT64, [])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["n"])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
    m.ir_version = 9
    onnx.save(m, tmp_path / "m.onnx")
    feed = {"x": np.array([1.0, 2.0], np.float32), "trip": np.array(3, np.int64)}
    res = api.mark(tmp_path / "m.onnx", tmp_path / "out.onnx", api.Selection(all=True), inputs=api.InputSpec(arrays=feed))
    assert "t" in {m.ref.name for m in res.marked}
    assert not any("taken from a run" in n and "t.loop_out" in n for n in res.notes), res.notes
    got = ort.InferenceSession(str(tmp_path / "out.onnx"), providers=["CPUExecutionProvider"]).run(None, feed)
    assert np.array_equal(got[0], -feed["x"])  # three Negs of x


def test_the_tensors_left_out_are_named_by_their_scope_where_sibling_bodies_share_a_name(tmp_path):
    """Two If nodes in a Loop body, whose branches each name their outputs 'o' and 'o2': the note said 'o2, o, o2, o',
    four tensors and two names; it names each by its key (as --name takes it and --stats's metadata says it)."""
    from onnx import numpy_helper as nh
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    from onnx import TensorProto, helper

    f, N = TensorProto.FLOAT, helper.make_node
    branch = (lambda op, out, name: helper.make_graph([N(op, ["v", "two"], [out])], name, [],
                                                      [helper.make_tensor_value_info(out, f, [3])]))
    body = helper.make_graph([
        N("Identity", ["cin"], ["cout"]), N("Cast", ["i"], ["fi"], to=f), N("Add", ["vin", "fi"], ["v"]),
        N("Mod", ["i", "twoi"], ["md"]), N("Equal", ["md", "zeroi"], ["even"]),
        N("If", ["even"], ["w"], then_branch=branch("Mul", "o", "t1"), else_branch=branch("Sub", "o2", "e1"), name="if1"),
        N("If", ["even"], ["w2"], then_branch=branch("Add", "o", "t2"), else_branch=branch("Div", "o2", "e2"), name="if2"),
        N("Add", ["w", "w2"], ["vout"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("cin", TensorProto.BOOL, []),
         helper.make_tensor_value_info("vin", f, [3])],
        [helper.make_tensor_value_info("cout", TensorProto.BOOL, []), helper.make_tensor_value_info("vout", f, [3])])
    g = helper.make_graph([N("Loop", ["n", "", "x"], ["y"], body=body, name="loop")], "g",
                          [helper.make_tensor_value_info("x", f, [3]), helper.make_tensor_value_info("n", TensorProto.INT64, [])],
                          [helper.make_tensor_value_info("y", f, [3])],
                          [nh.from_array(np.array(2, np.float32), "two"), nh.from_array(np.array(2, np.int64), "twoi"),
                           nh.from_array(np.array(0, np.int64), "zeroi")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "m.onnx")
    r = CliRunner().invoke(app, ["mark", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "o.onnx"), "--all", "--input", "n=3"],
                           env={"COLUMNS": "400"})
    assert r.exit_code == 0, r.output
    (note,) = [ln for ln in r.stderr.splitlines() if "--stats marks them" in ln]
    listed = note.split("--stats marks them: ")[1].split(", ")
    assert sorted(listed) == ["loop/body/if1/else_branch/o2", "loop/body/if1/then_branch/o", "loop/body/if2/else_branch/o2",
                              "loop/body/if2/then_branch/o"], note
