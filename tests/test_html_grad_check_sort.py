"""The `check` column of `grad --check --html` sorted by the check's error number: 'noise', '-' and
'cannot check' (no number) tied at the bottom in any order, and a FAIL with a small error below an ok with a
larger one. It sorts by what the cell shows, FAIL, ok, noise, cannot check, - (FAIL first on the first
click; by the error within FAIL and within ok), the other way on the second (headless Chromium)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from browser import CHROMIUM, SKIP_REASON
from onnxprobe.cli.main import app
from onnxprobe.report.grad import grad_table
from onnxprobe.report.html import html_report
from test_grad_check_straight_through import _tailed
from test_html_names import _drive

pytest.importorskip("plotly", reason="the HTML report needs the html extra (plotly)")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)


def test_the_check_column_sorts_by_what_it_shows(tmp_path):
    js = tmp_path / "g.json"
    r = CliRunner().invoke(app, ["grad", str(_tailed(tmp_path / "t.onnx")), "--all", "--check", "--device", "cpu",
                                 "--json", str(js)])
    assert js.is_file(), r.output
    d = json.loads(js.read_text())
    rows = d["gradients"]
    assert len(rows) >= 6, [g["name"] for g in rows]
    # the five verdicts a row can show, set on rows out of their order (raw errors that sorted them otherwise:
    # the FAIL's error below the oks')
    states = [({"error": None, "ok": None}, None),  # cannot check
              ({"error": 3e-3, "ok": True}, None),  # ok
              (None, None),  # -
              ({"error": 1e-4, "ok": False}, None),  # FAIL
              ({"error": 2e-3, "ok": True}, "the loss is constant in it"),  # noise
              ({"error": 1e-9, "ok": True}, None)]  # ok
    for g, (check, unjudged) in zip(rows, states):
        g["check"], g["unjudged"] = check, unjudged
    d["gradients"] = rows[:len(states)]
    page = tmp_path / "p.html"
    page.write_text(html_report("grad", d, grad_table(d)[0]), encoding="utf-8")  # the page --html writes of d
    out = _drive(tmp_path, page, """
  const th = Array.from(doc.querySelectorAll('#table th')).find(th => th.textContent === 'check');
  th.click(); out.asc = shown('check'); th.click(); out.desc = shown('check');""")
    want = ["0.0001 FAIL", "1e-09 ok", "0.003 ok", "noise", "cannot check", "-"]
    assert out["asc"] == want and out["desc"] == want[::-1], out
