"""A name the debugger suggests or completes is one the user can type back: `show` of a near miss of a name holding
both kinds of quotes suggested 'w 2 'quoted' "dq"', which its own reader split otherwise. Oracle: the model's own
names, read back by the session's parser and by a second `show`."""

from __future__ import annotations

import re

import onnx
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app
from onnxprobe.session.parse import split, typable
from onnxprobe.text import as_typed

HOSTILE = ["w 2 'quoted' \"dq\"", "it's", 'say "hi"', "new\nline", "a#b", "x;y", "'\"", "back\\slash q'\"", "plain"]


@pytest.mark.parametrize("bare", [True, False])
@pytest.mark.parametrize("name", HOSTILE)
def test_a_typable_name_reads_back_as_itself(name, bare):
    words = split(typable(name, bare))
    assert len(words) == 1 and as_typed(words[0], {name}) == name, (typable(name, bare), words)


def test_the_near_miss_hint_can_be_typed_back(tmp_path):
    name = "w 2 'quoted' \"dq\""
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], [name], name="r"), helper.make_node("Neg", [name], ["y"], name="n")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])]), opset_imports=[helper.make_opsetid("", 18)],
        ir_version=9)
    onnx.save(m, tmp_path / "m.onnx")
    (tmp_path / "s1.txt").write_text("show 'w 2 quoted dq'\n")
    r = CliRunner().invoke(app, ["debug", str(tmp_path / "m.onnx"), "--script", str(tmp_path / "s1.txt")],
                           env={"COLUMNS": "200"})
    hint = re.search(r"did you mean (.*)\?$", r.stderr.strip().splitlines()[-1])
    assert r.exit_code != 0 and hint, r.output
    (tmp_path / "s2.txt").write_text(f"show {hint.group(1)}\n")
    r = CliRunner().invoke(app, ["debug", str(tmp_path / "m.onnx"), "--script", str(tmp_path / "s2.txt"), "--seed", "3"],
                           env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "quoted" in r.stdout and "Relu" in r.stdout, r.stdout
