"""The debugger's ``input NAME``: NAME is typed as ``inputs`` lists it (``text.as_typed``: a backslash doubled,
a newline as \\n), as ``show`` and ``stats`` take it; and a name no model takes is refused for what it is
(it was 'no second model' with one model loaded, and a listed name was no input)."""

from __future__ import annotations

from typer.testing import CliRunner

from conftest import relu_n4
from onnxprobe.cli.main import app

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def _relu(path, name: str) -> str:
    return relu_n4(path, name)


def _debug(tmp_path, model: str, lines: list[str]):
    f = tmp_path / "s.txt"
    f.write_text("\n".join(lines) + "\n")
    r = runner.invoke(app, ["debug", model, "--script", str(f)], env=ENV)
    assert "Traceback" not in r.output
    return r


def test_an_input_name_no_model_takes_is_refused_as_such(tmp_path):
    r = _debug(tmp_path, _relu(tmp_path / "m.onnx", "x"), ["input nosuch"])
    assert r.exit_code == 1, r.output
    err = [ln for ln in r.stderr.splitlines() if "error:" in ln]
    assert len(err) == 1 and "unknown input name 'nosuch'" in err[0] and "second model" not in err[0], r.stderr


def test_input_takes_a_name_as_inputs_lists_it(tmp_path):
    model = _relu(tmp_path / "m.onnx", "in\\put")
    r = _debug(tmp_path, model, ["inputs", "input in\\\\put", "input in\\\\put random 2x4", "inputs"])
    assert r.exit_code == 0, r.output
    assert "in\\\\put" in r.stdout.split("\n")[2]  # the `inputs` table lists it with its backslash doubled
    assert "input in\\\\put ← random (seed 0): float32 [1x4]" in r.stdout, r.stdout
    assert "input in\\\\put ← random (seed 0, shape 2x4): float32 [2x4]" in r.stdout, r.stdout
