"""`seed 99999999999999999999999` in the debugger, and `--seed` of that size on the command line, were taken.
Seeds are refused outside 0..2**32 - 1 (the range numpy's np.random.seed and RandomState take, so that the
seed given here can be given to them too), in one line naming the seed as it was given; the largest one
draws what numpy's default_rng draws from it."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import UsageError

ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
MLP = str(sample_path("mlp"))
TOP = 2**32 - 1
HUGE = "99999999999999999999999"


def test_numpy_takes_the_largest_seed_and_refuses_the_next():
    np.random.RandomState(TOP)
    with pytest.raises(ValueError):
        np.random.RandomState(TOP + 1)


@pytest.mark.parametrize("seed", [str(TOP + 1), HUGE])
def test_the_command_line_refuses_a_seed_out_of_range(seed):
    r = CliRunner().invoke(app, ["layers", MLP, "--seed", seed], env=ENV)
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"onnxprobe: error: --seed {seed}: seeds are integers from 0 to {TOP}"), r.stderr


def test_the_debugger_refuses_it_in_its_words_and_keeps_its_seed(tmp_path):
    f = tmp_path / "session.txt"
    f.write_text(f"seed {HUGE}\nseed\n")
    r = CliRunner().invoke(app, ["debug", MLP, "--script", str(f)], env=ENV)
    assert r.exit_code == 1 and "Traceback" not in r.output, r.output
    assert r.stderr.startswith(f"onnxprobe: error: line 1: seed {HUGE}: seeds are integers from 0 to {TOP}"), r.stderr
    assert r.stdout.startswith("seed 0 "), r.stdout
    r = CliRunner().invoke(app, ["debug", MLP, "--seed", HUGE, "--script", str(f)], env=ENV)
    assert r.exit_code == 2 and r.stderr.startswith(f"onnxprobe: error: --seed {HUGE}: "), r.output


def test_the_api_refuses_it_and_the_largest_seed_draws_numpys_values():
    with pytest.raises(UsageError, match=rf"^seed \(--seed\) {TOP + 1}: seeds are integers from 0 to {TOP}"):
        api.feeds(MLP, api.InputSpec(seed=TOP + 1))
    x = api.feeds(MLP, api.InputSpec(seed=TOP)).values["x"]
    expected = np.random.default_rng(TOP).random(x.size, dtype=np.float64).astype(x.dtype).reshape(x.shape)
    np.testing.assert_array_equal(x, expected)


def test_negative_seeds_are_still_said_as_before():
    r = CliRunner().invoke(app, ["layers", MLP, "--seed", "-1"], env=ENV)
    assert r.exit_code == 2 and r.stderr.startswith("onnxprobe: error: --seed -1: seeds are non-negative integers"), r.output
