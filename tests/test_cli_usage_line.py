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


def test_a_missing_argument_is_named_as_the_usage_line_names_it():
    """QA: `onnxprobe merge-stats` with no files said "Missing argument 'files'." under a usage line of
    FILES...; every command's missing argument is named as its usage line writes it (MODEL, FILES...)."""
    from onnxprobe.cli.main import COMMANDS

    for name, *_ in COMMANDS:
        r = runner.invoke(app, [name], env={"COLUMNS": "200", "NO_COLOR": "1"})
        assert r.exit_code == 2, (name, r.output)
        usage = _usage(name).split("[OPTIONS]", 1)[1].split()
        required = [w for w in usage if not w.startswith("[")]
        assert required, (name, usage)
        assert f"Missing argument '{required[0]}'." in r.output, (name, r.output)
        assert not re.search(r"'[a-z_]+'", r.output), (name, r.output)
