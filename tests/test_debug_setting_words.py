"""The debugger said some settings errors in command-line flag words: `seed -1` was refused as
"--seed -1: seeds are non-negative integers", `input x missing.npy` as "--input missing.npy: no such input
file", `device cuda` without CUDA as "--device cuda: ...", although the user typed debugger commands, not
flags. Inside a debugger command the settings its own commands set (seed, device, input, inputs) are named as
those commands are typed ("seed -1", "input x 1e39", "inputs FILE.npz"); the same settings given as flags when
the debugger starts keep the flags' words, and the flags the debugger's commands take (`grad --loss`) stay
flags."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app

ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def _errors(tmp_path, lines, model=None, *extra):
    f = tmp_path / "session.txt"
    f.write_text("\n".join(lines) + "\n")
    r = CliRunner().invoke(app, ["debug", str(model or sample_path("mlp")), *extra, "--script", str(f)], env=ENV)
    assert "Traceback" not in r.output, r.output
    return [ln for ln in r.stderr.splitlines() if ln.startswith("onnxprobe: error")], r


def _one(tmp_path, line, model=None):
    errors, r = _errors(tmp_path, [line], model)
    assert r.exit_code != 0 and len(errors) == 1, r.output
    assert errors[0].startswith("onnxprobe: error: line 1: ")
    return errors[0].removeprefix("onnxprobe: error: line 1: ")


def test_seed_is_refused_in_the_seed_commands_words(tmp_path):
    said = _one(tmp_path, "seed -1")
    assert said.startswith("seed -1: ") and "--seed" not in said, said


def test_an_input_file_that_is_not_there_is_named_by_the_input_command(tmp_path):
    missing = tmp_path / "missing.npy"
    said = _one(tmp_path, f"input x {missing}")
    assert said.startswith(f"input x {missing}: no such input file") and "--input" not in said, said


def test_an_input_value_out_of_range_is_said_as_typed(tmp_path):
    said = _one(tmp_path, "input x 1e39")  # beyond float32
    assert said.startswith("input x 1e39: ") and "--input" not in said and "x=" not in said, said


def test_an_unsupported_input_file_points_at_the_inputs_command(tmp_path):
    f = tmp_path / "x.txt"
    f.write_text("1 2 3")
    said = _one(tmp_path, f"input x {f}")
    assert said.startswith(f"input x {f}: unsupported file type '.txt'") and "inputs FILE.npz" in said, said
    assert "--" not in said, said


def test_device_cuda_without_cuda_is_named_by_the_device_command(tmp_path):
    from onnxprobe.runtime.ort import cuda_usable

    if cuda_usable():
        pytest.skip("CUDA is usable here: `device cuda` is accepted")
    said = _one(tmp_path, "device cuda")
    assert said.startswith("device cuda: ") and "--device" not in said, said


def test_the_same_settings_given_as_flags_keep_the_flags_words(tmp_path):
    errors, r = _errors(tmp_path, ["info"], None, "--seed", "-1")
    assert r.exit_code == 2 and r.stderr.startswith("onnxprobe: error: --seed -1: "), r.output
    missing = tmp_path / "missing.npy"
    errors, r = _errors(tmp_path, ["info"], None, "--input", f"x={missing}")
    assert r.exit_code == 2 and r.stderr.startswith(f"onnxprobe: error: --input x={missing}: no such input file"), r.output


def test_the_flags_of_the_debuggers_commands_stay_flags(tmp_path):
    said = _one(tmp_path, "grad --loss nope")
    assert said.startswith("--loss nope: choose one of"), said


def test_the_words_hold_in_the_worker_that_runs_a_model():
    """The debugger's runs go through a worker thread (Ctrl-C stops them): a message made there is in the
    words of the command that started it, as one made in the command's own thread."""
    from onnxprobe.errors import Voice, speaking
    from onnxprobe.runtime.interrupt import call_interruptibly
    from onnxprobe.session.commands.table import WORDS

    with speaking(WORDS):
        said = call_interruptibly(lambda: Voice(cli=True)(("seed", "--seed")))
    assert said == "seed"
    assert call_interruptibly(lambda: Voice(cli=True)(("seed", "--seed"))) == "--seed"
