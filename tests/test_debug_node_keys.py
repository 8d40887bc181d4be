"""The debugger's node arguments (goto, node, where's cursor, --range) in a model whose nodes are named
with numbers: an index is never looked up again as a name, `#N` is always an index, and a bare number
that is both an index and another node's name is refused as ambiguous, as `--range` refuses it."""

from __future__ import annotations

import re
import shlex

import numpy as np
import onnx
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
OPS = [("Relu", "r"), ("Neg", "n"), ("Abs", "0"), ("Sigmoid", "1")]  # x -> a -> b -> c -> y


def numbered_model(path) -> None:
    names = ["x", "a", "b", "c", "y"]
    nodes = [helper.make_node(op, [names[i]], [names[i + 1]], name=nm) for i, (op, nm) in enumerate(OPS)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def session(tmp_path, lines):
    m = tmp_path / "numnames.onnx"
    numbered_model(m)
    np.save(tmp_path / "x.npy", np.array([-1.0, 0.5, 2.0], np.float32))
    f = tmp_path / "s.txt"
    f.write_text("\n".join([f"input x {tmp_path / 'x.npy'}", *lines]) + "\n")
    r = runner.invoke(app, ["debug", str(m), "--script", str(f)], env=ENV)
    assert "Traceback" not in r.output
    return r


def headers(text: str) -> list[tuple[int, str, str]]:
    """The node views shown, in order: (index, name, op)."""
    return [(int(i), n, op) for i, n, op in re.findall(r"^#(\d+)/3 (\S+)\s+(\w+)\s*$", text, re.M)]


def test_goto_node_and_where_move_to_the_node_asked_for(tmp_path):
    r = session(tmp_path, ["goto r", "goto #1", "node #0", "goto #2", "goto 3", "goto n", "node #3", "where absmax>=0"])
    assert r.exit_code == 0, r.output
    want = [(i, OPS[i][1], OPS[i][0]) for i in (0, 1, 0, 2, 3, 1, 3, 0)]
    assert headers(r.stdout) == want, r.stdout


def test_a_bare_number_that_is_an_index_and_another_nodes_name_is_refused(tmp_path):
    for line, i, named in (("goto 0", 0, 2), ("node 1", 1, 3)):
        r = session(tmp_path, [line])
        assert r.exit_code != 0 and "Traceback" not in r.output
        err = r.stderr.strip().splitlines()
        assert len(err) == 1 and f"'{i}' is both node index {i} and the name of node #{named}" in err[0], r.output
        assert headers(r.stdout) == []


def test_a_range_in_the_debugger_refuses_the_same_ambiguity(tmp_path):
    r = session(tmp_path, ["stats --range 0:1"])
    assert r.exit_code != 0 and "is both node index 0 and the name of node #2" in r.stderr, r.output
    r = session(tmp_path, ["stats --range #1:#2"])
    assert r.exit_code == 0, r.output
    assert re.search(r"^\s*1\s+n\s+Neg\s", r.stdout, re.M) and re.search(r"^\s*2\s+0\s+Abs\s", r.stdout, re.M), r.stdout


def test_show_and_save_refuse_a_node_name_several_nodes_bear(tmp_path):
    """Two Constant nodes named 'dup' (a model's duplicate names, which onnxruntime runs: silero-vad's
    openvino export names 15 'F0::anon'): `goto dup` is refused as ambiguous, and so are `show dup` and
    `save dup`, which took the first one's output as if it were the one named; `#N` picks one."""
    nodes = [helper.make_node("Constant", [], ["c1"], name="dup", value=helper.make_tensor("v1", TensorProto.FLOAT, [3], [1, 2, 3])),
             helper.make_node("Constant", [], ["c2"], name="dup", value=helper.make_tensor("v2", TensorProto.FLOAT, [3], [-1, 2, -3])),
             helper.make_node("Add", ["x", "c1"], ["a"], name="add"), helper.make_node("Mul", ["a", "c2"], ["y"], name="mul")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    m = tmp_path / "dup.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(m))
    script = tmp_path / "s.txt"
    script.write_text(f"input x [1, -2, 3]\nshow dup\nsave dup {shlex.quote(str(tmp_path / 'd.npy'))}\nshow #1\n")
    r = runner.invoke(app, ["debug", str(m), "--script", str(script)], env=ENV)
    assert r.exit_code == 1 and "Traceback" not in r.output, r.output
    errors = [line for line in r.stderr.splitlines() if "error:" in line]
    assert len(errors) == 2 and all("2 nodes are named 'dup'" in e and "#0, #1" in e for e in errors), errors
    assert not (tmp_path / "d.npy").exists()
    assert "c2  from node dup (Constant)" in r.stdout and re.search(r"\[-1\s+2\s+-3\]", r.stdout)  # #1: the second's output
