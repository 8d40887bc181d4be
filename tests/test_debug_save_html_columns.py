"""The debugger's `save html FILE --columns a,b` adds the columns asked for to the page, as `--html` with
`--columns` does on the command line (and ``api.html(columns=)``): `save html` took no --columns ("unknown
option"), so a page with `rmse` or `problem`, which the table shows only when asked, could not be saved from the
debugger. A key no table has is one line, and no file is written."""

from __future__ import annotations

import shlex

import pytest
from typer.testing import CliRunner

from onnxprobe.cli.main import app
from test_html_report import log_of_scaled_models, page_headers

pytest.importorskip("plotly", reason="the HTML report needs the html extra (plotly)")
runner = CliRunner()


def _debug(tmp_path, models, lines):
    script = tmp_path / "s.txt"
    script.write_text("\n".join(lines) + "\n")
    return runner.invoke(app, ["debug", *models, "--script", str(script)], env={"COLUMNS": "200"})


def test_save_html_takes_columns(tmp_path):
    a, b = log_of_scaled_models(tmp_path)
    d, d2, lay = tmp_path / "d.html", tmp_path / "d2.html", tmp_path / "l.html"
    r = _debug(tmp_path, [a, b], ["diff --all", f"save html {shlex.quote(str(d))} --columns tensor,rmse,problem",
                                  f"save html {shlex.quote(str(d2))} --columns rmse --columns max_rel"])
    assert r.exit_code == 1 and "error" not in r.stderr, r.output  # the diff fails (log 2 apart); every line ran
    heads = page_headers(d)
    assert {"rmse", "problem", "tensor", "sqnr_db", "pass"} <= set(heads), heads  # every column, and those asked
    assert {"rmse", "max_rel"} <= set(page_headers(d2)), page_headers(d2)
    r = _debug(tmp_path, [a], ["probe add --all", "run", f"save html {shlex.quote(str(lay))} --columns tensor,max,status"])
    assert r.exit_code == 0, r.output
    assert {"status", "tensor", "max", "min", "mean"} <= set(page_headers(lay)), page_headers(lay)


def test_save_html_refuses_an_unknown_column_and_writes_nothing(tmp_path):
    a, b = log_of_scaled_models(tmp_path)
    page = tmp_path / "d.html"
    r = _debug(tmp_path, [a, b], ["diff --all", f"save html {shlex.quote(str(page))} --columns nope"])
    err = [ln for ln in r.output.splitlines() if "onnxprobe: error" in ln]
    assert len(err) == 1 and "nope" in err[0] and "Traceback" not in r.output, r.output
    assert not page.exists()
    r = _debug(tmp_path, [a], ["probe add --all", "run", f"save all {shlex.quote(str(tmp_path / 'x.npz'))} --columns max"])
    assert "--columns" in r.output and not (tmp_path / "x.npz").exists(), r.output  # only the HTML page has columns
