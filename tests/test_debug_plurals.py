"""The debugger counts in words that agree with the count: '1 probe', 'saved 1 tensor', '1 pair'
('1 probes', 'saved 1 tensors' and '1 pairs' were written)."""

from __future__ import annotations

import re
import shlex

import onnx
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def test_one_of_a_thing_is_singular(tmp_path):
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    m = tmp_path / "one.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(m))
    f = tmp_path / "s.txt"
    f.write_text("\n".join(["probe clear", "probe add --name y", "probe list", "info", f"save all {shlex.quote(str(tmp_path / 'a.npz'))}",
                            "where absmax>1e30", "probe add --all", "probe list"]) + "\n")
    r = runner.invoke(app, ["debug", str(m), "--script", str(f)], env=ENV)
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert re.search(r"\b1 probe\b", out) and "1 probes" not in out, out
    assert "saved 1 tensor (" in out and "1 tensors" not in out, out
    assert re.search(r"\(2 tensors searched", out), out  # x and y: plural stays plural
