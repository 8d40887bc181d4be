"""`--version` is an option of onnxprobe itself, and a user who types it after a command wants the same
answer: `onnxprobe layers --version` said 'No such option: --version (Possible options: --json, --netron)',
click's guess at a command option. After any command it prints the version, as before one, and exits 0."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from onnxprobe.cli.main import COMMANDS, app, app_for

NAMES = [entry[0] for entry in COMMANDS]


def _top() -> str:
    r = CliRunner().invoke(app, ["--version"])
    assert r.exit_code == 0 and r.stdout.startswith("onnxprobe "), r.output
    return r.stdout


@pytest.mark.parametrize("flag", ["--version", "-V"])
@pytest.mark.parametrize("name", NAMES)
def test_version_after_every_command(name, flag):
    want = _top()
    for one in (app, app_for([name, flag])):  # the whole app, and the app of that command alone that `run` builds
        r = CliRunner().invoke(one, [name, flag])
        assert r.exit_code == 0 and r.stdout == want and not r.stderr, (name, flag, r.output)


def test_version_after_a_command_and_its_arguments_does_nothing_else(tmp_path):
    """As --help: the version, at once, whatever else the line holds (no model read, no output written)."""
    out = tmp_path / "out.onnx"
    r = subprocess.run([sys.executable, "-m", "onnxprobe", "mark", str(tmp_path / "missing.onnx"), "-o", str(out),
                        "--all", "--version"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout == _top() and r.stderr == "", (r.stdout, r.stderr)
    assert not out.exists()


@pytest.mark.parametrize("name", NAMES)
def test_version_is_not_in_a_commands_help(name):
    """It stays the app's option: each command's help lists its own."""
    r = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert r.exit_code == 0 and "--version" not in r.stdout, r.stdout


def test_an_unknown_flag_is_offered_visible_flags_only():
    """click's "Possible options" of a mistyped flag offered the hidden --version (`mark --json`, `layers --verbose`)
    and --help (`inspect --shape`): neither is what was meant. A real near miss is still offered."""
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    runner = CliRunner()
    for argv, bad in ((["mark", "m.onnx", "-o", "x.onnx", "--json", "-"], "--json"), (["layers", "m.onnx", "--verbose"], "--verbose"),
                      (["inspect", "m.onnx", "--shape", "x=1"], "--shape")):
        r = runner.invoke(app, argv, env={"COLUMNS": "200", "NO_COLOR": "1"})
        assert r.exit_code == 2 and f"No such option: {bad}" in r.output, r.output
        assert "--version" not in r.output and "--help)" not in r.output.split("(see")[0], r.output
    r = runner.invoke(app, ["layers", "m.onnx", "--shap", "x=1"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert "Possible options: --shape" in r.output, r.output  # (--save, alike only with the dashes, is not offered)


def test_an_unknown_flag_of_another_command_is_said_to_be_its():
    """`mark --json` was offered --op, `diff --reduce` --device (click's near misses, alike by their dashes): a flag of
    other commands is said to be theirs; one of none gets no suggestion."""
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    runner = CliRunner()
    for argv, said in ((["mark", "m.onnx", "-o", "x.onnx", "--json", "-"], "--json is an option of layers, diff"),
                       (["diff", "a.onnx", "b.onnx", "--grad", "--reduce", "mean"], "--reduce is an option of grad, not of diff"),
                       (["layers", "m.onnx", "--frobnicate"], None),
                       # another command's flag that looks like one of this command's: what was meant, not the look-alike
                       (["diff", "a.onnx", "b.onnx", "--save", "x.npz"], "--save is an option of layers, not of diff"),
                       (["layers", "m.onnx", "--sort", "sqnr"], "--sort is an option of diff, not of layers"),
                       (["grad", "m.onnx", "--runtime", "ort"], "--runtime is an option of layers, diff, not of grad")):
        r = runner.invoke(app, argv, env={"COLUMNS": "200", "NO_COLOR": "1"})
        assert r.exit_code == 2 and "Possible options" not in r.output, r.output
        assert (said in r.output) if said else " is an option of " not in r.output, r.output
