"""`onnxprobe debug --echo` at a terminal without --script: --echo prints each command of a script before its
output, and an interactive session has none, so the flag did nothing and said nothing. It is refused in one line
naming it, as other conflicting flags are (exit 2, before the model is loaded); with commands piped in (a
script read from stdin) it still echoes them."""

from __future__ import annotations

import importlib
import types

import numpy as np
from onnx import TensorProto, helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

runner = CliRunner()


def _model(tmp_path) -> str:
    vi = helper.make_tensor_value_info
    m = make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [vi("x", TensorProto.FLOAT, [2])],
                   [vi("y", TensorProto.FLOAT, [2])])
    p = tmp_path / "m.onnx"
    p.write_bytes(m.SerializeToString())
    return str(p)


class _Terminal:
    def isatty(self) -> bool:
        return True


def test_echo_without_script_at_a_terminal_is_one_line(tmp_path, monkeypatch):
    mod = importlib.import_module("onnxprobe.cli.debug")
    monkeypatch.setattr(mod, "sys", types.SimpleNamespace(stdin=_Terminal()))
    started = []
    monkeypatch.setattr("onnxprobe.session.repl.repl", lambda state: started.append(state))
    r = runner.invoke(app, ["debug", _model(tmp_path), "--echo"])
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("onnxprobe: error: --echo") and "--script" in lines[0], r.stderr
    assert "Traceback" not in r.output and not started


def test_echo_with_piped_commands_still_echoes(tmp_path):
    r = runner.invoke(app, ["debug", _model(tmp_path), "--echo", "--input", "x=[-1, 2]"], input="show y\n")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == "> show y", r.stdout  # the command, echoed before its output
    want = np.maximum(np.array([-1.0, 2.0]), 0)  # relu, in float64
    shown = lines[lines.index("values:") + 1]  # the values `show y` prints, as the tables write numbers: [0 2]
    assert [float(v) for v in shown.strip("[]").split()] == want.tolist(), r.stdout
