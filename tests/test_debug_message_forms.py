"""The debugger's errors say names and settings as its listings and its commands spell them (QA): a name typed
as listed (``a\\\\b``) was said with its backslashes doubled again; a long name's length counted the quotes
around it; a script was told "(Tab completes names)", which only the prompt does; ``device tpu`` said
``device 'tpu'`` where ``device cuda`` says ``device cuda: ...``."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import OnnxProbeError
from onnxprobe.session import commands as C
from onnxprobe.session.state import State

runner = CliRunner()


def _errors(tmp_path, lines: list[str]) -> list[str]:
    """The error lines of `onnxprobe debug mlp --script FILE` running ``lines``, one per line, in order."""
    f = tmp_path / "s.txt"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    r = runner.invoke(app, ["debug", str(sample_path("mlp")), "--script", str(f)], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert r.exit_code == 1 and "Traceback" not in r.output, r.output
    got = r.stderr.strip().splitlines()
    assert len(got) == len(lines), r.stderr
    return got


def test_an_unknown_name_is_said_as_it_was_typed(tmp_path):
    """`show a\\\\b\\\\c` (a name a\\b\\c, typed as listings spell it) said "no tensor named 'a\\\\\\\\b\\\\\\\\c'"."""
    typed = "a\\\\b\\\\c"  # two backslashes each, as typed
    [show, goto] = _errors(tmp_path, [f"show {typed}", f"goto {typed}"])
    assert f"no tensor named '{typed}'" in show, show
    assert f"named '{typed}'" in goto, goto


def test_a_long_name_is_counted_without_its_quotes(tmp_path):
    """A 100,000-character name was said '(100002 chars)'."""
    [line] = _errors(tmp_path, ["show " + "q" * 100_000])
    assert "(100000 chars)" in line, line


def test_a_script_is_not_told_to_press_tab(tmp_path):
    """In --script mode the advice said "(Tab completes names)"; the prompt's still does."""
    lines = _errors(tmp_path, ["show nosuch_tensor", "show", "node", "goto", "goto nosuch_node"])
    for line in lines:
        assert "Tab" not in line, line
    assert "`nodes`" in lines[0] and "`nodes`" in lines[-1], lines
    env = C.Env(State([api.load(str(sample_path("mlp")))]), 120)  # the prompt's Env
    for cmd in ("show nosuch_tensor", "goto nosuch_node"):
        with pytest.raises(OnnxProbeError) as e:
            C.execute(env, cmd)
        assert "Tab completes" in (e.value.cli_message or str(e.value)), e.value


def test_device_names_its_value_as_typed(tmp_path):
    """`device tpu` said "device 'tpu': choose one of ..." where README's form is `device cuda: ...`."""
    [line] = _errors(tmp_path, ["device tpu"])
    assert line.endswith("device tpu: choose one of auto, cpu, cuda"), line
    r = runner.invoke(app, ["layers", str(sample_path("mlp")), "--device", "tpu"])
    assert r.exit_code == 2 and r.stderr.strip().endswith("--device tpu: choose one of auto, cpu, cuda"), r.output


def test_every_choice_names_its_value_as_typed(tmp_path):
    """QA: `--device tpu: choose one of ...` but `--runtime 'tpu'`, `--opt-level 'bogus'`, `--metric`, `--loss`, the
    debugger's `--model` quoted the value: one form (text.as_word) everywhere."""
    [info] = _errors(tmp_path, ["info --model z"])
    assert "--model z: choose a" in info, info
    with pytest.raises(OnnxProbeError) as e:
        State([api.load(str(sample_path("mlp")))], opt_level="bogus")
    assert str(e.value).startswith("--opt-level bogus: choose one of"), e.value
    mlp = str(sample_path("mlp"))
    for args, said in ((["layers", mlp, "--runtime", "tpu"], "--runtime tpu: choose one of"),
                       (["layers", mlp, "--opt-level", "bogus"], "--opt-level bogus: choose one of"),
                       (["diff", mlp, "--vs-reference", "--metric", "nope"], "--metric nope: choose one of"),
                       (["grad", mlp, "--loss", "foo"], "--loss foo: choose one of"),
                       (["layers", mlp, "--opt-level", "two words"], "--opt-level 'two words': choose one of")):
        r = runner.invoke(app, args)
        assert r.exit_code == 2 and said in r.stderr, (args, r.output)
