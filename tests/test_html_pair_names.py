"""A diff's HTML page names each pair as its table row and the terminal do (``report.diff.pair_label``): B's name for a
quantized view. The header's "error starts at", the chart's line and points, and the histogram cards used A's tensor
(``conv_out_DequantizeLinear_Output``), a name no row of the table holds, which the page's filter did not find."""

from __future__ import annotations

import html as htmllib
import json
import re

from typer.testing import CliRunner

from conftest import SAMPLES
from onnxprobe.cli.main import app
from quantize_fixtures import quantize


def test_the_page_names_the_pairs_as_the_table_does(tmp_path):
    q = quantize("cnn", "qdq", tmp_path)
    page, js = tmp_path / "r.html", tmp_path / "r.json"
    r = CliRunner().invoke(app, ["diff", str(q), str(SAMPLES / "cnn.onnx"), "--min-sqnr", "200", "--html", str(page),
                                 "--json", str(js), "--no-cache"])
    assert r.exit_code == 1, r.output  # every pair fails 200 dB: the error starts at the first
    d = json.loads(js.read_text())
    views = [p for p in d["pairs"] if p["strategy"] == "qdq"]
    assert views and any(p["a"] != p["b"] for p in views)  # A's names are its DequantizeLinear views
    first = next(p for p in d["pairs"] if p["a"] == d["first_failure"])
    assert first["a"] != first["b"]
    text = page.read_text("utf-8")
    header = re.search(r"<dt>error starts at</dt><dd[^>]*>(.*?)</dd>", text, re.S).group(1)
    assert htmllib.unescape(re.sub(r"<[^>]+>", "", header)) == first["b"]
    fig = json.loads(re.search(r'<script[^>]*id="figure"[^>]*>(.*?)</script>', text, re.S).group(1))
    notes = [a["text"] for a in fig["layout"].get("annotations", [])]
    assert any(first["b"] in n for n in notes) and not any(first["a"] in n for n in notes)
    hists = json.loads(re.search(r'<script[^>]*id="hists"[^>]*>(.*?)</script>', text, re.S).group(1))
    names = ["".join(part[0] for part in h["name"]) for h in hists]
    rows = {p["b"] if p["strategy"] == "qdq" or p["a"] == p["b"] else f"{p['a']} ↔ {p['b']}" for p in d["pairs"]}
    assert names and set(names) <= rows
