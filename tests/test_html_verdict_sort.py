"""The `pass` column of the HTML report sorted by the raw True/False/None: "noise" and "n/a" tied at the bottom
in any order. It sorts by what the cell shows, FAIL, ok, noise, n/a (FAIL first on the first click), the other
way on the second (headless Chromium)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from browser import CHROMIUM, SKIP_REASON
from conftest import make_model
from onnxprobe.cli.main import app
from onnxprobe.report.diff import diff_table
from onnxprobe.report.html import html_report
from test_html_names import _drive

pytest.importorskip("plotly", reason="the HTML report needs the html extra (plotly)")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)
runner = CliRunner()
V = helper.make_tensor_value_info


def _four_pairs(tmp_path) -> dict:
    nodes = [helper.make_node("Mul", ["x", "k"], ["a"], name="a"), helper.make_node("Relu", ["a"], ["b"], name="b"),
             helper.make_node("Neg", ["b"], ["c"], name="c"), helper.make_node("Abs", ["c"], ["y"], name="d")]
    paths = []
    for name, k in (("A", 2.0), ("B", 1.0)):
        m = make_model(nodes, [V("x", TensorProto.FLOAT, [4])], [V("y", TensorProto.FLOAT, [4])],
                       [numpy_helper.from_array(np.array(k, np.float32), "k")])
        paths.append(tmp_path / f"{name}.onnx")
        onnx.save(m, paths[-1])
    js = tmp_path / "d.json"
    r = runner.invoke(app, ["diff", *map(str, paths), "--all", "--json", str(js)])
    assert js.is_file(), r.output
    return json.loads(js.read_text())


def test_the_pass_column_sorts_by_what_it_shows(tmp_path):
    d = _four_pairs(tmp_path)
    pairs = {p["a"]: p for p in d["pairs"]}
    assert {"a", "b", "c", "y"} <= set(pairs), list(pairs)
    # the four verdicts a row can show, set on rows out of their order: noise, n/a, ok, FAIL
    states = {"a": (None, "the loss is constant in it"), "b": (None, None), "c": (True, None), "y": (False, None)}
    for name, (passed, unjudged) in states.items():
        pairs[name]["passed"], pairs[name]["unjudged"] = passed, unjudged
    page = tmp_path / "p.html"
    page.write_text(html_report("diff", d, diff_table(d)), encoding="utf-8")  # the page --html writes of d
    out = _drive(tmp_path, page, """
  const th = Array.from(doc.querySelectorAll('#table th')).find(th => th.textContent === 'pass');
  th.click(); out.asc = shown('pass'); th.click(); out.desc = shown('pass');""")
    assert out["asc"] == ["FAIL", "ok", "noise", "n/a"] and out["desc"] == ["n/a", "noise", "ok", "FAIL"], out
