"""The HTML report shows a name as it is, in headless Chromium.

- A name holding a backslash read `back\\\\slash` in the page (the terminal's escape, which doubles backslashes
  so that its escapes read back one way), and the filter matched that form only: the page shows the name with
  one backslash and the filter matches it as shown. A control character is still escaped (`\\n`, `\\x1b`), in a
  mark of its own (``<span class="ctl">``), so that a newline reads apart from a backslash and an n.
"""

from __future__ import annotations

import html
import json

import onnx
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

from browser import CHROMIUM, SKIP_REASON, dump_dom, element
from conftest import make_model
from onnxprobe.cli.main import app

pytest.importorskip("plotly", reason="the HTML report needs the html extra (plotly)")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)
runner = CliRunner()
V = helper.make_tensor_value_info
NAMES = ["back\\slash", "new\nline", "lit\\nline", "esc\x1b[31m"]


def _drive(tmp_path, page, script: str) -> dict:
    """Runs ``script`` (JS with ``doc``, the page's document, and ``out``, a dict) on the loaded page."""
    wrapper = tmp_path / f"wrap-{page.stem}.html"
    wrapper.write_text(f"""<!doctype html><html><body><pre id="out"></pre>
<iframe id="f" src="{page.name}" width="1200" height="800"></iframe>
<script>document.getElementById('f').onload = () => {{
  const doc = document.getElementById('f').contentDocument, out = {{}};
  const col = h => Array.from(doc.querySelectorAll('#table th')).findIndex(th => th.textContent === h);
  const shown = h => Array.from(doc.getElementById('rows').rows).filter(tr => !tr.hidden).map(tr => tr.cells[col(h)].textContent);
  const typed = q => {{ const f = doc.getElementById('filter'); f.value = q; f.dispatchEvent(new Event('input')); }};
  {script}
  document.getElementById('out').textContent = JSON.stringify(out);
}};</script></body></html>""")
    dom = dump_dom(wrapper, "--allow-file-access-from-files")
    return json.loads(html.unescape(element(dom, "pre", "out")))


def test_names_show_as_they_are_and_the_filter_matches_what_is_shown(tmp_path):
    nodes, prev = [], "x"
    for k, name in enumerate(NAMES):
        nodes.append(helper.make_node("Relu", [prev], [name], name=f"n{k}"))
        prev = name
    nodes.append(helper.make_node("Neg", [prev], ["y"], name="neg"))
    path, page = tmp_path / "m.onnx", tmp_path / "m.html"
    onnx.save(make_model(nodes, [V("x", TensorProto.FLOAT, [4])], [V("y", TensorProto.FLOAT, [4])]), path)
    r = runner.invoke(app, ["layers", str(path), "--all", "--html", str(page)])
    assert r.exit_code == 0, r.output
    text = page.read_text(encoding="utf-8")
    assert "\x1b" not in text and "new\nline" not in text  # still escaped: no control reaches the page
    out = _drive(tmp_path, page, """
  out.all = shown('tensor');
  out.marks = Array.from(doc.querySelectorAll('#rows td .ctl')).map(s => s.textContent);
  typed('back\\\\slash'); out.back = shown('tensor'); out.count = doc.getElementById('shown').textContent;
  typed('back\\\\\\\\slash'); out.doubled = shown('tensor');
  typed('\\\\nline'); out.lit = shown('tensor');
  typed('[31m'); out.esc = shown('tensor');
  out.hist = Array.from(doc.querySelectorAll('#histograms .name')).map(d => [d.textContent, d.querySelectorAll('.ctl').length]);""")
    assert out["all"][:4] == ["back\\slash", "new\\nline", "lit\\nline", "esc\\x1b[31m"], out["all"]
    # the escapes of controls, and only they, are marked: 'lit\nline' (a backslash and an n) has no mark
    assert sorted(out["marks"]) == ["\\n", "\\x1b"], out["marks"]
    assert out["back"] == ["back\\slash"] and out["count"] == "1" and out["doubled"] == [], out
    assert sorted(out["lit"]) == ["lit\\nline", "new\\nline"], out  # both read '\\nline', marks aside
    assert out["esc"] == ["esc\\x1b[31m"], out
    hists = dict(out["hist"])
    assert hists.get("back\\slash") == 0 and hists.get("new\\nline") == 1 and hists.get("lit\\nline") == 0, out["hist"]
