"""`mark` and `extract` without their required -o/--output said "onnxprobe: error: -o/--output: " and nothing more (a
missing option went through the bad-value path, which has no words for it); `--range foo:1` named no value where its
sibling errors do (`--range 99:100: ...`)."""

from __future__ import annotations

from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app


def test_a_missing_output_is_said_and_a_bad_range_names_its_value(tmp_path):
    m = str(sample_path("mlp"))
    for args in (["mark", m], ["extract", m, "--to", "x"]):
        r = CliRunner().invoke(app, args)
        assert r.exit_code == 2, r.output
        line = r.output.strip().splitlines()[-1]
        assert "Missing option" in line and "--output" in line and not line.rstrip().endswith("--output:"), line
    r = CliRunner().invoke(app, ["layers", m, "--range", "foo:1"])
    assert r.exit_code == 2 and "--range foo:1: no node named 'foo'" in r.output, r.output
