"""The debugger, on what its users found: `where max==4611686018427387905` "found" a tensor of max 2^62 (int64
statistics compared in float64), and `where max>4611686018427387900` went past it; `where` searched no model output
computed from constants (0 tensors of a model without inputs, right after `run` pointed to `where`) and `step`
passed over every node of such a model; `inputs FILE --model b` said "the model expects" model a's shape;
`show --bins 50` of 100 values drew 11 bins without a word; `nodes --op T --name G` was refused ("give one GLOB
or op:TYPE"). The oracle: Python's integers, numpy, and the graphs as built."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

ENV = {"COLUMNS": "200", "NO_COLOR": "1", "ONNXPROBE_NO_CACHE": "1"}


def _debug(tmp_path, args: list[str], lines) -> tuple[int, str]:
    f = tmp_path / "s.txt"
    f.write_text("\n".join(lines) + "\n")
    r = CliRunner().invoke(app, ["debug", *args, "--script", str(f)], env=ENV)
    assert "Traceback" not in r.output and "internal error" not in r.output, r.output
    return r.exit_code, r.output


def _int64_model(path) -> str:
    nodes = [h.make_node("Cast", ["x"], ["xi"], to=T.INT64, name="casti"), h.make_node("Mul", ["xi", "big"], ["t2"], name="muli"),
             h.make_node("Add", ["t2", "t2"], ["t6"], name="addi")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [4])], [h.make_tensor_value_info("t6", T.INT64, [4])],
                     [nh.from_array(np.array(2**60, np.int64), "big")])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(path))
    return str(path)


def test_where_compares_int64_statistics_exactly(tmp_path):
    m = _int64_model(tmp_path / "m.onnx")
    t2_max = 4 * 2**60  # x = [1, 2, 3, 4]: t2 = x * 2^60, its max 2^62; t6 = 2 t2, its max 2^63
    rc, out = _debug(tmp_path, [m, "--input", "x=[1, 2, 3, 4]"],
                     [f"where max=={t2_max + 1}", f"where max=={t2_max}", f"where max>{t2_max - 4}"])
    lines = [ln for ln in out.splitlines() if "where max" in ln]
    assert lines[0].startswith(f"no tensor where max=={t2_max + 1}"), out  # 2^62 + 1 rounds to 2^62 in float64
    assert f"first tensor where max=={t2_max}: t2" in lines[1] and f"max {t2_max} == {t2_max}" in out, out
    assert f"first tensor where max>{t2_max - 4}: t2" in lines[2], out  # was skipped: 2^62 - 4 is 2^62 in float64


def test_where_searches_outputs_computed_from_constants_and_step_stops_at_them(tmp_path):
    c = nh.from_array(np.array([[0, 1, 2], [3, 4, 5]], np.float32))
    nodes = [h.make_node("Constant", [], ["k"], value=c, name="const"), h.make_node("Relu", ["k"], ["r"], name="relu"),
             h.make_node("Log", ["r"], ["lg"], name="log")]
    m = str(tmp_path / "noinput.onnx")
    onnx.save(make_model(nodes, [], [h.make_tensor_value_info("lg", T.FLOAT, [2, 3])]), m)
    rc, out = _debug(tmp_path, [m], ["run", "where inf", "goto #0", "step"])
    assert "first tensor where inf: lg" in out and "1 Inf in 6 values" in out, out  # log(0) = -inf: the oracle
    assert "already at the last node" not in out and out.count("#2/2 log") >= 2, out


def test_inputs_for_model_b_that_model_a_refuses_names_model_a(tmp_path):
    vi = h.make_tensor_value_info
    a, b = str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx")
    onnx.save(make_model([h.make_node("Relu", ["x"], ["y"])], [vi("x", T.FLOAT, [2, 3, 4])], [vi("y", T.FLOAT, [2, 3, 4])]), a)
    onnx.save(make_model([h.make_node("Relu", ["x"], ["y"])], [vi("x", T.FLOAT, [2, 4])], [vi("y", T.FLOAT, [2, 4])]), b)
    np.savez(tmp_path / "x24.npz", x=np.zeros((2, 4), np.float32))
    rc, out = _debug(tmp_path, [a, b], [f"inputs {tmp_path / 'x24.npz'} --model b"])
    assert rc != 0 and "model a (" in out and "a.onnx" in out and "the other model shares" in out, out


def test_show_says_when_it_draws_fewer_bins_than_asked(tmp_path):
    vi = h.make_tensor_value_info
    m = str(tmp_path / "m.onnx")
    onnx.save(make_model([h.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", T.FLOAT, [100])], [vi("y", T.FLOAT, [100])]), m)
    rc, out = _debug(tmp_path, [m], ["show x --bins 50", "show x --bins 5"])
    drawn = [ln for ln in out.splitlines() if "│" in ln]
    assert len(drawn) == 11 + 5, out  # at most sqrt(100) + 1 = 11 of the 50 asked
    assert "11 bins, not 50" in out and "not 5:" not in out, out


def test_nodes_takes_an_op_type_and_a_name_glob_together(tmp_path):
    vi = h.make_tensor_value_info
    nodes = [h.make_node("Relu", ["x"], ["a"], name="Relu_1"), h.make_node("Relu", ["a"], ["b"], name="Relu_2"),
             h.make_node("Sigmoid", ["b"], ["c"], name="Sig_1"), h.make_node("Relu", ["c"], ["y"], name="Relu_10")]
    m = str(tmp_path / "m.onnx")
    onnx.save(make_model(nodes, [vi("x", T.FLOAT, [4])], [vi("y", T.FLOAT, [4])]), m)
    rc, out = _debug(tmp_path, [m], ["nodes --op Relu --name '*_1*'", "nodes --name 'Relu_2' --name 'Sig*'", "nodes op:Sigmoid --name 'Relu*'"])
    counts = [ln for ln in out.splitlines() if " of 4 nodes" in ln]
    assert counts[:2] == ["2 of 4 nodes", "2 of 4 nodes"], out  # Relu_1, Relu_10; Relu_2, Sig_1
    assert "nothing matches 'Relu*' and 'op:Sigmoid'" in out, out


def _loop(path) -> str:
    body = h.make_graph([h.make_node("Identity", ["cin"], ["cout"], name="idc"),
                         h.make_node("Concat", ["vin", "vin"], ["vout"], axis=0, name="cat"),
                         h.make_node("ReduceSum", ["vout"], ["s"], keepdims=1, name="rsum")], "body",
                        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cin", T.BOOL, []),
                         h.make_tensor_value_info("vin", T.FLOAT, ["d"])],
                        [h.make_tensor_value_info("cout", T.BOOL, []), h.make_tensor_value_info("vout", T.FLOAT, ["d"]),
                         h.make_tensor_value_info("s", T.FLOAT, ["d"])])
    g = h.make_graph([h.make_node("Loop", ["n", "c", "v0"], ["vf", "ss"], body=body, name="loop")], "g",
                     [h.make_tensor_value_info("n", T.INT64, []), h.make_tensor_value_info("c", T.BOOL, []),
                      h.make_tensor_value_info("v0", T.FLOAT, [2])],
                     [h.make_tensor_value_info("vf", T.FLOAT, ["d"]), h.make_tensor_value_info("ss", T.FLOAT, ["k", "d"])])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(path))
    return str(path)


def test_a_loop_of_no_iteration_did_not_run_and_unstackable_values_get_the_debuggers_advice(tmp_path):
    """A Loop of no iteration: its body's tensors did not run (as `stats` says); `show` printed them as run and empty,
    of an invented shape [0x0], `save` wrote that array and `save all` stored it. A body tensor whose shape changes
    between iterations cannot be stacked: the advice named the command line's flags, not the debugger's `stats`."""
    m = _loop(tmp_path / "loop.onnx")
    out_npz = tmp_path / "all.npz"
    rc, out = _debug(tmp_path, [m], ["input n 0", "input c true", "input v0 [1, 2]", "show vout", f"save vout {tmp_path / 'v.npy'}",
                                     "probe add vout", f"save all {out_npz}"])
    assert out.count("vout: not run on these inputs") == 2 and "[0x0]" not in out, out
    assert not (tmp_path / "v.npy").exists()
    with np.load(out_npz) as z:
        assert "vout" not in z.files and "vf" in z.files
    rc, out = _debug(tmp_path, [m], ["input n 2", "input c true", "input v0 [1, 2]", "show vout"])
    assert "`stats` of them" in out and "--save" not in out, out
    r = CliRunner().invoke(app, ["layers", m, "--all", "--input", "n=2", "--input", "c=true", "--input", "v0=[1, 2]",
                                 "--save", str(tmp_path / "s.npz")], env=ENV)
    assert r.exit_code == 1 and "drop --save, or mark --stats" in r.output, r.output


def test_where_says_the_statistic_in_digits_that_keep_the_comparison_true(tmp_path):
    """'min -6.55e+04 < -65503' of a float16 min of -65504 read false; the node table wrote int64 extremes
    9223372036854775805 and ...807 as two equal floats beside a std of 0.83. Oracle: the values as built."""
    f16 = lambda n: h.make_tensor_value_info(n, T.FLOAT16, [3])  # noqa: E731
    m = make_model([h.make_node("Identity", ["x"], ["y"], name="i")], [f16("x")], [f16("y")])
    onnx.save(m, tmp_path / "h.onnx")
    np.save(tmp_path / "x.npy", np.array([-65504, 0.5, 65504], np.float16))
    code, out = _debug(tmp_path, [str(tmp_path / "h.onnx"), "--input", f"x={tmp_path / 'x.npy'}"],
                       ["where min<-65503", "where absmax>65000", "where mean<0.16667"])
    assert code == 0, out
    assert "min -65504 < -65503" in out and "absmax 65504 > 65000" in out, out
    assert "mean 0.166667 < 0.16667" in out, out  # (-65504 + 0.5 + 65504) / 3: 0.1667 would read false
    i64 = lambda n: h.make_tensor_value_info(n, T.INT64, [3])  # noqa: E731
    m = make_model([h.make_node("Identity", ["x"], ["y"], name="i")], [i64("x")], [i64("y")])
    onnx.save(m, tmp_path / "i.onnx")
    np.save(tmp_path / "k.npy", np.array([2 ** 63 - 1, 2 ** 63 - 2, 2 ** 63 - 3], np.int64))
    code, out = _debug(tmp_path, [str(tmp_path / "i.onnx"), "--input", f"x={tmp_path / 'k.npy'}"],
                       ["where max>9223372036854775806"])
    assert code == 0, out
    table = out.split("from / to", 1)[1]
    assert "9223372036854775805" in table and "9223372036854775807" in table, out


def test_run_points_to_the_condition_that_finds_what_it_found(tmp_path):
    """Tensors of Inf and no NaN: `run` said "`where nan` finds the first of all tensors", and `where nan` then found
    nothing. It names `where inf` (NaN alone: `where nan`; both: `where nonfinite`), which finds it."""
    f = lambda n: h.make_tensor_value_info(n, T.FLOAT, [4])  # noqa: E731
    m = make_model([h.make_node("Relu", ["x"], ["r"], name="re"), h.make_node("Log", ["r"], ["l"], name="lg"),
                    h.make_node("Neg", ["l"], ["y"], name="ng")], [f("x")], [f("y")])
    onnx.save(m, tmp_path / "m.onnx")
    for x, cond in (("[1, -1, 2, 0]", "inf"), ("[1, 2, 3, 4]", None)):
        code, out = _debug(tmp_path, [str(tmp_path / "m.onnx")], [f"input x {x}", "run"])
        assert code == 0, out
        if cond is None:
            assert "where" not in out, out
            continue
        said = out.split("`where ", 1)[1].split("`", 1)[0]
        assert said == cond, out
        code, out = _debug(tmp_path, [str(tmp_path / "m.onnx")], [f"input x {x}", "run", f"where {said}"])
        assert code == 0 and "first tensor where" in out, out
