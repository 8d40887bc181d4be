"""QA: `onnxprobe merge-stats --help` wrote its argument as `{files}...` (Typer's braces around a required
argument's lower-case name); every command's usage line names its arguments as README writes them: MODEL,
[REFERENCE] for an optional one, FILES... for several."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from onnxprobe.cli.main import app

runner = CliRunner()


def _usage(*command: str) -> str:
    r = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert r.exit_code == 0, r.output
    [line] = [ln for ln in r.output.splitlines() if "Usage:" in ln]
    return re.sub(r"\s+", " ", line.split("Usage:", 1)[1]).strip()


def test_merge_stats_names_its_files():
    assert _usage("merge-stats").endswith("merge-stats [OPTIONS] FILES..."), _usage("merge-stats")


def test_arguments_are_named_in_capitals_without_braces():
    assert _usage("diff").endswith("diff [OPTIONS] MODEL [REFERENCE]"), _usage("diff")
    assert _usage("layers").endswith("layers [OPTIONS] MODEL"), _usage("layers")
    for command in ("inspect", "mark", "extract", "grad", "debug", "merge-stats"):
        assert "{" not in _usage(command), _usage(command)
