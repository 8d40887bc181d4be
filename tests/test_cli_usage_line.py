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


def test_help_reads_columns_as_the_tables_do():
    """`COLUMNS=0 onnxprobe layers --help` printed an empty line, COLUMNS=1 or 5 a column of box corners and cut words,
    COLUMNS=99999999 ran for minutes: the help takes $COLUMNS as the tables do (``report.console.env_width``): no width
    dropped, under 20 made 20. Run as a process: the help's Rich console reads the environment itself."""
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for columns, widest in (("0", 200), ("abc", 200), ("99999999", 200), ("1", 20), ("5", 20), ("60", 60)):
        env = {**os.environ, "COLUMNS": columns, "NO_COLOR": "1", "PYTHONPATH": root}
        p = subprocess.run([sys.executable, "-m", "onnxprobe", "layers", "--help"], capture_output=True, text=True, env=env,
                           timeout=60)
        lines = p.stdout.splitlines()
        assert p.returncode == 0 and any("Usage:" in ln for ln in lines), (columns, p.stdout[:300])
        assert max(len(ln) for ln in lines) <= widest, (columns, max(len(ln) for ln in lines))
        assert "--shape" in p.stdout, columns  # the options are there, not cut letter by letter
