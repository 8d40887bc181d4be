"""The HTML report (--html of layers, diff, grad; the debugger's `save html`) in a real browser: headless
Chromium loads the file, the DOM is read after the scripts ran (one <tr> per row of the JSON report, the
chart drawn, the histograms drawn), a screenshot is taken, and the page fetches nothing by itself."""

from __future__ import annotations

import html
import json
import re
import shlex

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from browser import CHROMIUM, SKIP_REASON, dump_dom, element, remote_fetches
from conftest import make_model, sample_path
from onnxprobe.cli.main import app

pytest.importorskip("plotly", reason="the HTML report needs the html extra (plotly)")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)
runner = CliRunner()
ROWS = {"layers": "tensors", "diff": "pairs", "grad": "gradients"}


@pytest.fixture(scope="module")
def qdq_cnn(tmp_path_factory):
    pytest.importorskip("onnxruntime.quantization")
    from quantize_fixtures import quantize

    return quantize("cnn", "qdq", tmp_path_factory.mktemp("q"))


def _dataset(folder):
    folder.mkdir()
    for i in range(3):
        np.savez(folder / f"b{i}.npz", image=np.random.default_rng(i).normal(0, 1, (1, 3, 32, 32)).astype(np.float32))
    return folder


def _cases(tmp_path, qdq_cnn):
    cnn = sample_path("cnn")
    return {
        "layers": ("layers", ["layers", cnn, "--all"]),
        "layers-dataset": ("layers", ["layers", cnn, "--inputs-dir", _dataset(tmp_path / "data")]),
        "diff": ("diff", ["diff", qdq_cnn, cnn, "--all"]),
        "diff-vs-reference": ("diff", ["diff", sample_path("transformer_block"), "--vs-reference", "--all"]),
        "diff-grad": ("diff", ["diff", "--grad", qdq_cnn, cnn]),
        "grad": ("grad", ["grad", cnn, "--check"]),
    }


def _check_page(page, kind: str, report: dict, png) -> str:
    text = page.read_text(encoding="utf-8")
    assert remote_fetches(text) == []
    dom = dump_dom(page, png=png)
    rows = element(dom, "tbody", "rows")
    assert rows.count("<tr") == len(report[ROWS[kind]]) > 0
    chart = element(dom, "div", "depth-chart")
    assert 'class="main-svg"' in chart, "plotly did not draw the chart"
    assert len(re.findall(r'class="point\b', chart)) + chart.count('class="js-line"') >= 2, "no points or lines drawn"
    hists = element(dom, "div", "histograms")
    assert hists.count('class="main-svg"') >= 1, "no histogram drawn"
    facts = element(dom, "dl", "facts")
    assert "verdict" in facts
    return dom


@pytest.mark.parametrize("case", ["layers", "layers-dataset", "diff", "diff-vs-reference", "diff-grad", "grad"])
def test_report_renders_in_chromium(tmp_path, qdq_cnn, case):
    kind, argv = _cases(tmp_path, qdq_cnn)[case]
    page, js = tmp_path / f"{case}.html", tmp_path / f"{case}.json"
    r = runner.invoke(app, [str(a) for a in argv] + ["--html", str(page), "--json", str(js)])
    assert r.exit_code in (0, 1), r.output  # a diff that fails exits 1 and still writes its report
    assert page.is_file(), r.output
    report = json.loads(js.read_text())
    dom = _check_page(page, kind, report, tmp_path / f"report-{case}.png")
    if kind == "diff" and report["first_failure"]:
        assert "error starts" in element(dom, "div", "depth-chart")


def test_sorting_and_filtering_work(tmp_path):
    """The page's own controls, driven from a wrapper page: the filter hides the rows that do not match
    (and counts the rest), a click on a header sorts the rows by that column's values."""
    page, js = tmp_path / "r.html", tmp_path / "r.json"
    r = runner.invoke(app, ["layers", str(sample_path("cnn")), "--all", "--html", str(page), "--json", str(js)])
    assert r.exit_code == 0, r.output
    tensors = json.loads(js.read_text())["tensors"]
    wrapper = tmp_path / "wrap.html"
    wrapper.write_text(f"""<!doctype html><html><body><pre id="out"></pre>
<iframe id="f" src="{page.name}" width="1200" height="800"></iframe>
<script>document.getElementById('f').onload = () => {{
  const doc = document.getElementById('f').contentDocument, out = {{}};
  const filter = doc.getElementById('filter');
  filter.value = 'conv'; filter.dispatchEvent(new Event('input'));
  out.visible = Array.from(doc.getElementById('rows').rows).filter(tr => !tr.hidden).map(tr => tr.cells[3].textContent);
  out.shown = doc.getElementById('shown').textContent;
  filter.value = ''; filter.dispatchEvent(new Event('input'));
  const th = Array.from(doc.querySelectorAll('#table th')).find(th => th.textContent === 'max');
  th.click(); th.click();
  out.max_desc = Array.from(doc.getElementById('rows').rows).map(tr => tr.cells[3].textContent);
  document.getElementById('out').textContent = JSON.stringify(out);
}};</script></body></html>""")
    dom = dump_dom(wrapper, "--allow-file-access-from-files")
    out = json.loads(element(dom, "pre", "out").replace("&quot;", '"').replace("&amp;", "&"))
    want = [t["name"] for t in tensors if "conv" in (t["name"] + t["node"] + t["op_type"]).lower()]
    assert sorted(out["visible"]) == sorted(want) and out["shown"] == str(len(want)) and 0 < len(want) < len(tensors)
    order = sorted(tensors, key=lambda t: -t["max"])  # two clicks: descending
    assert [t["name"] for t in order] == out["max_desc"]


def test_names_from_the_model_cannot_break_out(tmp_path):
    """A tensor named like markup stays text: the page has one table row per tensor and no element the
    name would have made."""
    evil = '</script><img src=x onerror="document.title=1"><b>"&amp;'
    m = make_model([helper.make_node("Relu", ["x"], [evil], name=evil), helper.make_node("Neg", [evil], ["y"], name="neg")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    path = tmp_path / "evil.onnx"
    onnx.save(m, str(path))
    page = tmp_path / "evil.html"
    r = runner.invoke(app, ["layers", str(path), "--all", "--html", str(page)])
    assert r.exit_code == 0, r.output
    dom = dump_dom(page)
    assert "<img" not in dom and "<b>" not in element(dom, "tbody", "rows")
    assert element(dom, "tbody", "rows").count("<tr") == 2
    assert "&lt;/script&gt;&lt;img" in element(dom, "tbody", "rows")


def test_debugger_save_html(tmp_path):
    cnn = sample_path("cnn")
    script = tmp_path / "s.txt"
    layers_page, diff_page = tmp_path / "l.html", tmp_path / "d.html"
    script.write_text(f"probe add --all\nrun\nsave html {shlex.quote(str(layers_page))}\ndiff --all\nsave html {shlex.quote(str(diff_page))}\n")
    r = runner.invoke(app, ["debug", str(cnn), str(cnn), "--script", str(script)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "wrote the report of" in r.output and "wrote the report of the last diff (--all: " in r.output
    js = tmp_path / "l.json"
    assert runner.invoke(app, ["layers", str(cnn), "--all", "--json", str(js)]).exit_code == 0
    n = len(json.loads(js.read_text())["tensors"])
    dom = dump_dom(layers_page, png=tmp_path / "report-debug-layers.png")
    assert element(dom, "tbody", "rows").count("<tr") == n
    assert 'class="main-svg"' in element(dom, "div", "depth-chart")
    dom = dump_dom(diff_page)
    assert 'class="main-svg"' in element(dom, "div", "depth-chart")
    assert element(dom, "tbody", "rows").count("<tr") >= 1


def _measured(tmp_path, m: onnx.ModelProto, size: tuple[int, int], expression: str):
    """The value of the JavaScript ``expression`` (over ``doc``, the page) once the `layers --all --html` page of
    ``m`` has loaded in a frame of ``size`` pixels."""
    onnx.save(m, tmp_path / "m.onnx")
    page = tmp_path / "r.html"
    r = runner.invoke(app, ["layers", str(tmp_path / "m.onnx"), "--all", "--html", str(page)])
    assert r.exit_code == 0, r.output
    wrapper = tmp_path / "wrap.html"
    wrapper.write_text(f"""<!doctype html><html><body style="margin:0"><pre id="out"></pre>
<iframe id="f" src="{page.name}" width="{size[0]}" height="{size[1]}" style="border:0"></iframe>
<script>document.getElementById('f').onload = () => {{
  const doc = document.getElementById('f').contentDocument;
  document.getElementById('out').textContent = JSON.stringify({expression});
}};</script></body></html>""")
    dom = dump_dom(wrapper, "--allow-file-access-from-files")
    return json.loads(element(dom, "pre", "out").replace("&quot;", '"'))


def test_a_long_name_wraps_so_the_metric_columns_stay_in_view(tmp_path):
    """A 200-character tensor name pushed every metric column off the page (cells never wrapped): name cells
    wrap, and the table fits a 1200-pixel window."""
    long = "encoder/" * 25 + "out"
    m = make_model([helper.make_node("Relu", ["x"], [long], name="relu"), helper.make_node("Neg", [long], ["y"], name="neg")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    out = _measured(tmp_path, m, (1200, 800), "({width: doc.getElementById('table').getBoundingClientRect().right})")
    assert out["width"] <= 1200, out


def test_a_long_name_keeps_its_histogram_card_and_its_neighbours_short(tmp_path):
    """A 3,000-character tensor name was its histogram card's whole title, about 90 lines, and every card of its
    row stretched to that height: the title holds three lines (the name whole in its tooltip), and each card
    is as tall as its own content."""
    long = "L" * 3000
    nodes = [helper.make_node("Relu", ["x"], ["t1"], name="r1"), helper.make_node("Neg", ["t1"], [long], name="n1"),
             helper.make_node("Relu", [long], ["t3"], name="r2"), helper.make_node("Neg", ["t3"], ["y"], name="n2")]
    m = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64])])
    cards = _measured(tmp_path, m, (1400, 900), "[...doc.querySelectorAll('#histograms .hist')].map(c => ({"
                      "h: c.getBoundingClientRect().height, title: c.querySelector('.name').title.length}))")
    assert len(cards) >= 2 and any(c["title"] == 3000 for c in cards), cards
    short = [c["h"] for c in cards if c["title"] < 10]
    assert max(c["h"] for c in cards) < 1.3 * min(short), cards  # the long one barely taller, its neighbours unmoved


def test_names_are_no_markup_in_the_charts_and_nothing_can_be_sent_away(tmp_path):
    """plotly reads a subset of HTML in its texts: a node named <a href=...>CLICK</a> drew a live link in the
    'error starts' annotation and the hover labels; a right-to-left override reordered a name in the table;
    the modebar had plotly's "Share chart" button, which posts the figure (names, numbers) to its servers."""
    from onnx import numpy_helper

    link = '<a href="https://example.com/pwn">CLICK</a><b>bold</b>'
    rtl = "report\u202egnp.exe"
    paths = []
    for name, k in (("a", 2.0), ("b", 1.0)):
        m = make_model([helper.make_node("Mul", ["x", "k"], [link], name=link), helper.make_node("Relu", [link], [rtl], name="r"),
                        helper.make_node("Neg", [rtl], ["y"], name="n")],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
                       [numpy_helper.from_array(np.array(k, np.float32), "k")])
        onnx.save(m, tmp_path / f"{name}.onnx")
        paths.append(str(tmp_path / f"{name}.onnx"))
    page = tmp_path / "d.html"
    r = runner.invoke(app, ["diff", *paths, "--all", "--html", str(page)])
    assert r.exit_code == 1 and page.is_file(), r.output
    text = page.read_text(encoding="utf-8")
    assert "\u202e" not in text and "\\u202e" in text  # escaped as on a terminal, in the table and the charts
    assert "showSendToCloud: false" in text
    dom = dump_dom(page)
    assert not re.search(r'<a\b[^>]*href="https://example\.com', dom)  # no link element the name made
    assert "error starts: &lt;a href=" in dom.replace("&amp;lt;", "&lt;")  # the annotation shows the name as text
    assert 'data-title="Share chart' not in dom


def test_a_datasets_histograms_are_said_to_be_approximate(tmp_path):
    """A dataset report's histograms come from the mergeable log2 histogram: a bar's count and the outer
    edges are not the data's exactly (64 values fell outside the drawn range), which the page now says."""
    page = tmp_path / "d.html"
    r = runner.invoke(app, ["layers", str(sample_path("cnn")), "--inputs-dir", str(_dataset(tmp_path / "data")), "--html", str(page)])
    assert r.exit_code == 0, r.output
    assert "redrawn from the mergeable log2 histogram" in page.read_text(encoding="utf-8")
    page2 = tmp_path / "one.html"
    runner.invoke(app, ["layers", str(sample_path("cnn")), "--html", str(page2)])
    assert "redrawn from the mergeable" not in page2.read_text(encoding="utf-8")


def test_infinities_in_the_inputs_print_no_numpy_warning(tmp_path):
    """±Inf in the inputs: diff --html (api.diff_histograms) printed numpy's 'invalid value encountered in
    subtract' (Inf - Inf) on stderr. The error histogram counts positions infinite on both sides as NaN,
    and its finite differences match numpy's float64 a - b there."""
    import os
    import subprocess
    import sys
    import warnings

    from onnx import numpy_helper

    from onnxprobe import api
    from onnxprobe.graph.select import Selection
    from onnxprobe.types import InputSpec

    def model(path, c):
        onnx.save(make_model([helper.make_node("Add", ["x", "c"], ["y0"], name="add"), helper.make_node("Identity", ["y0"], ["y"], name="out")],
                             [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                             [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
                             [numpy_helper.from_array(np.array(c, np.float32), "c")]), path)

    model(tmp_path / "a.onnx", 1e-3)
    model(tmp_path / "b.onnx", 0)
    x = np.array([[np.inf, -np.inf, 1.0, 2.0]], np.float32)
    np.savez(tmp_path / "x.npz", x=x)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-m", "onnxprobe", "diff", str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), "--all",
                        "--inputs", str(tmp_path / "x.npz"), "--html", str(tmp_path / "r.html"), "--no-cache"],
                       capture_output=True, text=True, env=env, check=False)
    assert r.returncode in (0, 1) and (tmp_path / "r.html").exists(), r.stderr
    assert r.stderr == f"onnxprobe: note: wrote {tmp_path / 'r.html'}: the HTML report\n", r.stderr  # no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = api.diff(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), selection=Selection(all=True),
                       inputs=InputSpec(arrays={"x": x}))
        h = api.diff_histograms(res, ["y0"])
    err = h["y0"]["error"]
    a, b = x + np.float32(1e-3), x
    assert err["nan"] == 2 and err["count"] == 2 and err["inf"] == 0
    d = a.astype(np.float64)[0, 2:] - b.astype(np.float64)[0, 2:]
    assert err["edges"][0] == pytest.approx(d.min()) and err["edges"][-1] == pytest.approx(d.max(), abs=1e-6)


def _sum_models(tmp_path):
    """A: t1=x*0.5, t3=x*1.01; B: t1=x*0 (all zeros: -inf dB), t3=x*1.0; t2=x+1 the same (exact)."""
    paths = []
    for side, wa, c in (("A", 0.5, 1.01), ("B", 0.0, 1.0)):
        inits = [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in (("wa", wa), ("one", 1.0), ("c", c))]
        nodes = [helper.make_node("Mul", ["x", "wa"], ["t1"], name="m1"), helper.make_node("Add", ["x", "one"], ["t2"], name="a2"),
                 helper.make_node("Mul", ["x", "c"], ["t3"], name="m3"), helper.make_node("Add", ["t1", "t2"], ["s"], name="s1"),
                 helper.make_node("Add", ["s", "t3"], ["y"], name="s2")]
        path = tmp_path / f"s{side}.onnx"
        onnx.save(make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                             [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], inits), str(path))
        paths.append(path)
    return paths


def _sqrt_model(tmp_path):
    """x=[0.5,1,2,3]: the gradient of a=x-0.5 through Sqrt is inf at 0, of b=x-2.5 NaN (Sqrt of negatives)."""
    inits = [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in (("c", 0.5), ("d", 2.5), ("w", [1, 2, 3, 4]))]
    nodes = [helper.make_node("Sub", ["x", "c"], ["a"], name="sub_a"), helper.make_node("Sqrt", ["a"], ["r"], name="sqrt_r"),
             helper.make_node("Sub", ["x", "d"], ["b"], name="sub_b"), helper.make_node("Sqrt", ["b"], ["n"], name="sqrt_n"),
             helper.make_node("Mul", ["r", "w"], ["m"], name="mul"), helper.make_node("Add", ["m", "n"], ["y"], name="add")]
    path, x = tmp_path / "sqrt.onnx", tmp_path / "x.npy"
    onnx.save(make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], inits), str(path))
    np.save(x, np.array([0.5, 1, 2, 3], np.float32))
    return path, x


def _sorted_by(tmp_path, page, header: str, name_col: int) -> tuple[list[str], list[str]]:
    """The names of the rows after one click (ascending) and after two (descending) on ``header``."""
    wrapper = tmp_path / f"wrap-{page.stem}.html"
    wrapper.write_text(f"""<!doctype html><html><body><pre id="out"></pre>
<iframe id="f" src="{page.name}" width="1200" height="800"></iframe>
<script>document.getElementById('f').onload = () => {{
  const doc = document.getElementById('f').contentDocument, out = [];
  const th = Array.from(doc.querySelectorAll('#table th')).find(th => th.textContent === {json.dumps(header)});
  for (let k = 0; k < 2; k++) {{ th.click();
    out.push(Array.from(doc.getElementById('rows').rows).map(tr => tr.cells[{name_col}].textContent)); }}
  document.getElementById('out').textContent = JSON.stringify(out);
}};</script></body></html>""")
    dom = dump_dom(wrapper, "--allow-file-access-from-files")
    asc, desc = json.loads(element(dom, "pre", "out").replace("&quot;", '"').replace("&amp;", "&"))
    return asc, desc


def test_sorting_places_infinities_by_value_and_nan_last(tmp_path):
    """-inf dB (often where the error starts) sorts below every number, exact and +inf above, both ways;
    a NaN gradient norm last both ways (they were all written as no value, always last)."""
    a, b = _sum_models(tmp_path)
    page, js = tmp_path / "s.html", tmp_path / "s.json"
    r = runner.invoke(app, ["diff", str(a), str(b), "--all", "--html", str(page), "--json", str(js)])
    assert page.is_file(), r.output
    finite = [p["b"] for p in sorted(json.loads(js.read_text())["pairs"], key=lambda p: float(p["sqnr_db"] or 0))
              if p["sqnr_db"] is not None and p["b"] not in ("t1", "t2")]  # s, y, t3: the order of their numbers
    asc, desc = _sorted_by(tmp_path, page, "SQNR dB", 1)
    assert asc == ["t1", *finite, "t2"] and desc == ["t2", *reversed(finite), "t1"], (asc, desc)

    model, xin = _sqrt_model(tmp_path)
    page = tmp_path / "g.html"
    r = runner.invoke(app, ["grad", str(model), "--all", "--input", f"x={xin}", "--html", str(page)])
    assert page.is_file(), r.output
    asc, desc = _sorted_by(tmp_path, page, "|grad|", 3)
    # NaN last both ways: b's gradient, and the input x's (--all), the sum of b's NaN and a's inf
    assert set(asc[-2:]) == set(desc[-2:]) == {"b", "x"}, (asc, desc)
    assert desc[0] == "a" and asc[-3] == "a", (asc, desc)  # inf above every number


def test_loss_with_the_terminals_digits_and_the_graph_counts_said(tmp_path):
    """The loss read 'sum(y) = 41.54230880737305' where the terminal says 4 significant digits (6 for
    diff --grad's A and B); the forward node count, larger than the model's, says what else it holds."""
    a, b = _sum_models(tmp_path)
    feed = np.array([[1, 2, 3, 4], [0.5, 1.5, 2.5, 3.25]], np.float32)
    np.save(tmp_path / "x.npy", feed)
    x = feed.astype(np.float64)
    loss_a, loss_b = float(np.sum(0.5 * x + x + 1 + 1.01 * x)), float(np.sum(x + 1 + x))  # the oracle, in float64
    page = tmp_path / "g.html"
    r = runner.invoke(app, ["grad", str(a), "--all", "--input", f"x={tmp_path / 'x.npy'}", "--html", str(page)])
    assert r.exit_code == 0, r.output
    facts = dict(re.findall(r"<dt>([^<]*)</dt><dd[^>]*>([^<]*)</dd>", page.read_text()))
    assert facts["loss"] == f"sum(y) = {loss_a:.4g}"
    assert re.fullmatch(r"\d+ forward nodes \(the model&#x27;s the gradients need, with the loss&#x27;s and its seed\) "
                        r"\+ \d+ backward nodes", facts["graph"]), facts["graph"]
    page = tmp_path / "d.html"
    r = runner.invoke(app, ["diff", "--grad", str(a), str(b), "--input", f"x={tmp_path / 'x.npy'}", "--html", str(page)])
    assert page.is_file(), r.output
    facts = dict(re.findall(r"<dt>([^<]*)</dt><dd[^>]*>([^<]*)</dd>", page.read_text()))
    assert facts["loss"] == f"sum: A {loss_a:.6g}, B {loss_b:.6g}"


def test_float64_values_near_its_limits_are_drawn_and_the_table_still_sorts_and_filters(tmp_path):
    """A float64 tensor from -1.7e308 to 1.7e308, or of subnormal values: plotly.js threw on its histogram's
    axis (an x of null where (a + b) / 2 overflowed; an axis past 1e300, or of a span below 1e-300), which
    ended the page's script there: the histograms after it were missing and the table neither sorted nor
    filtered. Every histogram is drawn, and the filter works."""
    D = TensorProto.DOUBLE
    m = make_model([helper.make_node("Mul", ["x", "big"], ["huge"], name="huge"), helper.make_node("Mul", ["x", "tiny"], ["sub"], name="sub"),
                    helper.make_node("Add", ["huge", "sub"], ["y"], name="y")],
                   [helper.make_tensor_value_info("x", D, [6])], [helper.make_tensor_value_info("y", D, [6])],
                   [numpy_helper.from_array(np.array(1.7e308), "big"), numpy_helper.from_array(np.array(1e-320), "tiny")])
    onnx.save(m, tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.array([-1, -0.5, 0, 0.25, 0.9, 1.0]))
    page = tmp_path / "r.html"
    r = runner.invoke(app, ["layers", str(tmp_path / "m.onnx"), "--all", "--input", f"x={tmp_path / 'x.npy'}", "--html", str(page)])
    assert r.exit_code == 0, r.output
    wrapper = tmp_path / "wrap.html"
    wrapper.write_text(f"""<!doctype html><html><body><pre id="out"></pre>
<iframe id="f" src="{page.name}" width="1200" height="800"></iframe>
<script>document.getElementById('f').onload = () => {{
  const doc = document.getElementById('f').contentDocument, filter = doc.getElementById('filter');
  filter.value = 'sub'; filter.dispatchEvent(new Event('input'));
  const cards = Array.from(doc.querySelectorAll('#histograms .hist'));
  document.getElementById('out').textContent = JSON.stringify({{shown: doc.getElementById('shown').textContent,
    cards: cards.length, drawn: cards.filter(c => c.querySelector('.main-svg .bars .point')).length}});
}};</script></body></html>""")
    dom = dump_dom(wrapper, "--allow-file-access-from-files")
    out = json.loads(element(dom, "pre", "out").replace("&quot;", '"'))
    assert out == {"shown": "1", "cards": 3, "drawn": 3}, out


def _shapes_model():
    """Reshapes of x[6] to 2x3, 3x2, 6x1, 1x6; a scalar sum; a 12 Concat; an If whose branch not taken declares
    u of shape p x q (unknown to onnxprobe: '?x?', and uu = -u after it)."""
    vi = helper.make_tensor_value_info
    inits = [numpy_helper.from_array(np.array(s, np.int64), f"s{k}") for k, s in enumerate(([2, 3], [3, 2], [6, 1], [1, 6]))]
    inits.append(numpy_helper.from_array(np.array([0], np.int64), "ax"))
    nodes = [helper.make_node("Reshape", ["x", f"s{k}"], [n], name=f"r_{n}") for k, n in enumerate(("a23", "b32", "c61", "d16"))]
    nodes += [helper.make_node("ReduceSum", ["x"], ["sc"], keepdims=0, name="sum"),
              helper.make_node("Concat", ["x", "x"], ["cat"], axis=0, name="cat")]
    skipped = helper.make_graph([helper.make_node("Unsqueeze", ["x", "ax"], ["u"], name="unsq"),
                                 helper.make_node("Neg", ["u"], ["uu"], name="neg_u")], "e", [],
                                [vi("uu", TensorProto.FLOAT, None)], value_info=[vi("u", TensorProto.FLOAT, ["p", "q"])])
    taken = helper.make_graph([helper.make_node("Neg", ["x"], ["t"], name="neg")], "t", [], [vi("t", TensorProto.FLOAT, None)])
    nodes.append(helper.make_node("If", ["cond"], ["y"], name="gate", then_branch=taken, else_branch=skipped))
    return make_model(nodes, [vi("x", TensorProto.FLOAT, [6]), vi("cond", TensorProto.BOOL, [])], [vi("y", TensorProto.FLOAT, None)], inits)


def test_shapes_sort_by_their_numbers_and_unknown_ones_last(tmp_path):
    """A shape sorts by its element count, then rank, then dims (numbers, not strings: '12' sorted before '2x3'),
    one with an unknown dim last either way; its sort value is what the cell shows ('?x?', not 'NonexNone')."""
    path, page = tmp_path / "shapes.onnx", tmp_path / "shapes.html"
    onnx.save(_shapes_model(), str(path))
    r = runner.invoke(app, ["layers", str(path), "--all", "--input", "cond=1", "--html", str(page)])
    assert r.exit_code == 0, r.output
    cells = re.findall(r'data-v="([^"]*)"[^>]*>([^<]*x[^<]*)<', page.read_text())
    assert ("?x?", "?x?") in cells and all(v == shown for v, shown in cells), cells
    known = {"sc": (), "t": (6,), "y": (6,), "d16": (1, 6), "a23": (2, 3), "b32": (3, 2), "c61": (6, 1), "cat": (12,)}
    order = sorted(known, key=lambda n: (int(np.prod(known[n])), len(known[n]), known[n]))  # stable: t before y
    asc, desc = _sorted_by(tmp_path, page, "shape", 3)
    assert asc == [*order, "u", "uu"], asc
    desc_known = sorted(order, key=lambda n: (int(np.prod(known[n])), len(known[n]), known[n]), reverse=True)
    assert desc[-2:] == ["u", "uu"] and [n for n in desc if n in ("t", "y")] == ["t", "y"], desc
    assert [n for n in desc[:-2] if n != "y"] == [n for n in desc_known if n != "y"], desc


def page_headers(page) -> list[str]:
    """The keys of the page's table columns (each <th>'s title)."""
    return re.findall(r'<th class="[^"]*" title="([^"]*)">', page.read_text(encoding="utf-8"))


def log_of_scaled_models(tmp_path) -> list[str]:
    """Two models y = log(k x), A with k = 2 and B with k = 1 (a.onnx, b.onnx): every pair differs by log 2."""
    paths = []
    for name, k in (("a", 2.0), ("b", 1.0)):
        m = make_model([helper.make_node("Mul", ["x", "k"], ["m"], name="mul"), helper.make_node("Log", ["m"], ["y"], name="log")],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
                       [numpy_helper.from_array(np.array(k, np.float32), "k")])
        onnx.save(m, tmp_path / f"{name}.onnx")
        paths.append(str(tmp_path / f"{name}.onnx"))
    return paths


def test_every_column_the_terminal_shows_is_in_the_page_too(tmp_path):
    """`diff --columns tensor,rmse,max_rel,problem --html` printed RMSE, max rel and problem in the terminal,
    and the page, which keeps every column, had none of them: a column --columns adds (a metric no criterion
    judges, a CSV/JSON-only field) is in the page as well, beside all of its own, and sorts like the others."""
    paths = log_of_scaled_models(tmp_path)
    x = np.array([0.5, 1.0, 2.0, 3.0], np.float32)
    np.save(tmp_path / "x.npy", x)
    page = tmp_path / "d.html"
    asked = ["tensor", "rmse", "max_rel", "problem"]
    r = runner.invoke(app, ["diff", *paths, "--all", "--input", f"x={tmp_path / 'x.npy'}", "--columns", ",".join(asked),
                            "--html", str(page)])
    assert r.exit_code == 1 and page.is_file(), r.output
    heads = page_headers(page)
    assert set(asked) <= set(heads) and {"sqnr_db", "introduced_sqnr_db", "pass"} <= set(heads), heads
    rows = re.findall(r"<tr id=.*?</tr>", element(dump_dom(page), "tbody", "rows"))
    at = heads.index("rmse")
    rmse = {html.unescape(re.findall(r"<td[^>]*>([^<]*)</td>", tr)[heads.index("tensor")]):
            float(re.findall(r'data-v="([^"]*)"', tr)[at]) for tr in rows}
    x64 = x.astype(np.float64)  # the oracle: A's m is 2x and B's x, A's y log(2x) and B's log(x)
    assert rmse["m"] == pytest.approx(np.sqrt(np.mean(x64 ** 2)), rel=1e-6)
    assert rmse["y"] == pytest.approx(np.log(2.0), rel=1e-5)
    layers_page = tmp_path / "l.html"
    r = runner.invoke(app, ["layers", paths[0], "--all", "--columns", "tensor,max,status", "--html", str(layers_page)])
    assert r.exit_code == 0, r.output
    heads = page_headers(layers_page)
    assert {"tensor", "max", "status", "min", "mean"} <= set(heads), heads


@pytest.mark.parametrize("case", ["layers", "diff", "grad"])
def test_a_click_on_the_chart_marks_and_scrolls_to_its_row(tmp_path, qdq_cnn, case):
    """Every <tr> had the id "r" (the row's number was overwritten by a shape's sort key in the loop that writes
    the cells), so a click on a point of the chart found no row. Each point's click handler now marks the row
    of its tensor: the row's '#' cell is the point's node index (x), and the rows' ids are all distinct."""
    kind, argv = _cases(tmp_path, qdq_cnn)[case]
    page = tmp_path / f"{case}.html"
    r = runner.invoke(app, [str(a) for a in argv] + ["--html", str(page)])
    assert r.exit_code in (0, 1) and page.is_file(), r.output
    ids = re.findall(r'<tr id="([^"]*)"', page.read_text(encoding="utf-8"))
    assert len(ids) == len(set(ids)) > 1, ids[:5]
    wrapper = tmp_path / "wrap.html"
    wrapper.write_text(f"""<!doctype html><html><body><pre id="out"></pre>
<iframe id="f" src="{page.name}" width="1200" height="800"></iframe>
<script>document.getElementById('f').onload = () => {{
  const doc = document.getElementById('f').contentDocument, out = [];
  const chart = doc.getElementById('depth-chart');
  for (const trace of chart.data) (trace.customdata || []).forEach((c, j) => {{
    chart.emit('plotly_click', {{points: [{{customdata: c}}]}});
    const hl = Array.from(doc.querySelectorAll('tr.hl'));
    out.push([trace.x[j], hl.map(tr => tr.cells[0].dataset.v)]); }});
  document.getElementById('out').textContent = JSON.stringify(out);
}};</script></body></html>""")
    out = json.loads(html.unescape(element(dump_dom(wrapper, "--allow-file-access-from-files"), "pre", "out")))
    assert len(out) >= 2
    for x, marked in out:
        assert marked == [str(x)], (x, marked)
