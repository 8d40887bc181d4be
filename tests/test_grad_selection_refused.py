"""`grad --op Conv --name GLOB` with a GLOB that matches nothing ran on the Conv weights alone, silently
(the debugger's `grad op:Conv extra` too); `layers`, `probe add` and `stats` refuse such a glob."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import UsageError

runner = CliRunner()


def test_grad_refuses_a_name_glob_that_matches_nothing():
    r = runner.invoke(app, ["grad", str(sample_path("cnn")), "--op", "Conv", "--name", "extra"])
    err = r.stderr.strip().splitlines()
    assert r.exit_code == 2 and len(err) == 1 and "--name 'extra': matches no" in err[0], r.output
    r = runner.invoke(app, ["debug", str(sample_path("cnn")), "--script", "-"], input="grad op:Conv extra\n")
    assert r.exit_code == 1 and "--name 'extra': matches no" in r.stderr and "backward graph attached" not in r.stdout, r.output
    with pytest.raises(UsageError, match=r"ops \(--op\) Nope"):
        api.grad_plan(str(sample_path("cnn")), api.GradSpec(), api.Selection(ops=("Nope",)))
    r = runner.invoke(app, ["grad", str(sample_path("cnn")), "--op", "Conv", "--name", "conv1*"])
    assert r.exit_code == 0, r.output  # a glob that matches still selects
