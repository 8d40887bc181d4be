"""`grad --check --html`: the page's verdict read 'pass' ("check (float32): 0 failed") where the check compared
nothing (every gradient 'cannot check': taken through a QuantizeLinear's straight-through estimator, or not
resolvable by finite differences), while the command said '--check checked nothing' with exit code 1. The
page's verdict is the command's: a check that compared nothing is no pass."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from test_grad_check_straight_through import DY, _minimal, _tailed
from typer.testing import CliRunner

from onnxprobe.cli.main import app


def _verdict(page: Path) -> tuple[str, str]:
    facts = {k: (cls, text) for k, cls, text in re.findall(r"<dt>([^<]*)</dt><dd class=\"([^\"]*)\">([^<]*)</dd>", page.read_text())}
    return facts["verdict"]


def test_a_check_that_compared_nothing_is_no_pass_in_the_page(tmp_path):
    np.save(tmp_path / "dy.npy", DY)
    page = tmp_path / "g.html"
    r = CliRunner().invoke(app, ["grad", str(_minimal(tmp_path / "q.onnx")), "--wrt", "W", "--check", "--device", "cpu",
                                 "--output-grad", str(tmp_path / "dy.npy"), "--html", str(page)])
    assert r.exit_code == 1 and "checked nothing" in r.stderr, r.output
    cls, text = _verdict(page)
    assert cls == "fail" and "checked nothing" in text and "1 not checked" in text, (cls, text)


def test_a_check_with_verdicts_passes_in_the_page(tmp_path):
    page = tmp_path / "g.html"
    r = CliRunner().invoke(app, ["grad", str(_tailed(tmp_path / "t.onnx")), "--all", "--check", "--device", "cpu",
                                 "--html", str(page)])
    assert r.exit_code == 0, r.output
    cls, text = _verdict(page)
    assert cls == "pass" and "5 ok, 0 failed, 3 not checked" in text, (cls, text)
