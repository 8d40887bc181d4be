"""The debugger's `save html FILE` writes the page `layers --html` / `diff --html` write for the same state:
with no run yet (the probes are run for it: the default selection's page), after a `diff` of two models (the
diff's page), and after a `grad` step that made the cached diff stale (the probes' page, and one line saying
why it is not the diff's). The oracle is the command line's own page on the same model and inputs: the
tables' cells, row by row."""

from __future__ import annotations

import html
import re
import shlex

import pytest
from typer.testing import CliRunner

from onnxprobe.cli.main import app
from test_html_report import log_of_scaled_models

pytest.importorskip("plotly", reason="the HTML report needs the html extra (plotly)")
runner = CliRunner()
ENV = {"ONNXPROBE_NO_CACHE": "1", "COLUMNS": "200"}


def rows(page) -> list[list[str]]:
    text = page.read_text(encoding="utf-8")
    out = []
    for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", text, re.S):
        cells = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", tr, re.S)]
        if cells:
            out.append(cells)
    return out


def _debug(tmp_path, models, lines):
    script = tmp_path / "s.txt"
    script.write_text("\n".join(lines) + "\n")
    return runner.invoke(app, ["debug", *models, "--device", "cpu", "--script", str(script)], env=ENV)


def test_no_run_yet_writes_the_layers_page(tmp_path):
    a, _ = log_of_scaled_models(tmp_path)
    mine, cli = tmp_path / "d.html", tmp_path / "c.html"
    r = _debug(tmp_path, [a], [f"save html {shlex.quote(str(mine))}"])
    assert r.exit_code == 0, r.output
    c = runner.invoke(app, ["layers", a, "--device", "cpu", "--html", str(cli)], env=ENV)
    assert c.exit_code == 0, c.output
    assert len(rows(mine)) > 1 and rows(mine) == rows(cli)


def test_after_a_diff_writes_the_diff_page(tmp_path):
    a, b = log_of_scaled_models(tmp_path)
    mine, cli = tmp_path / "d.html", tmp_path / "c.html"
    r = _debug(tmp_path, [a, b], ["diff --all", f"save html {shlex.quote(str(mine))}"])
    assert r.exit_code == 1, r.output  # the diff fails, as the command's below
    c = runner.invoke(app, ["diff", a, b, "--all", "--device", "cpu", "--html", str(cli)], env=ENV)
    assert c.exit_code == 1, c.output  # log 2 apart: the pairs fail
    assert len(rows(mine)) > 1 and rows(mine) == rows(cli)


def test_after_a_grad_step_the_stale_diff_is_not_written_and_the_line_says_why(tmp_path):
    a, b = log_of_scaled_models(tmp_path)
    mine = tmp_path / "d.html"
    r = _debug(tmp_path, [a, b], ["diff --all", "grad", f"save html {shlex.quote(str(mine))}"])
    assert r.exit_code == 1, r.output  # the diff fails
    said = [ln for ln in r.output.splitlines() if "wrote the report" in ln]
    assert len(said) == 1 and "run `diff` first" in said[0], r.output
    heads = rows(mine)[0]
    assert "tensor" in heads and "max|a-b|" not in heads  # the probes' page, gradients among them
    assert any(row[3] == "y_grad" for row in rows(mine)[1:] if len(row) > 3), rows(mine)
