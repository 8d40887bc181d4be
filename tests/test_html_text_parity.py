"""The HTML page says what the text report says: the --profile summary (its 'between kernels' part among
it), diff --fp32-sensitivity's lines, and diff's verdict words ('outputs pass · weights FAIL': see
test_torch_weight_values). Each page is opened in headless Chromium and its facts and sections are read
from the DOM, against the lines the command printed."""

from __future__ import annotations

import html
import re

import pytest
from typer.testing import CliRunner

from browser import CHROMIUM, SKIP_REASON, dump_dom, element
from conftest import sample_path
from onnxprobe.cli.main import app

pytest.importorskip("plotly", reason="the HTML report needs the html extra (plotly)")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)
runner = CliRunner()


def _text(fragment: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def _fact(dom: str, label: str) -> str | None:
    m = re.search(rf"<dt>{re.escape(label)}</dt><dd[^>]*>(.*?)</dd>", element(dom, "dl", "facts"), re.S)
    return _text(m.group(1)) if m else None


def _printed(output: str, start: str) -> str:
    """The text report's paragraph that starts with ``start``, its lines joined."""
    lines = output.splitlines()
    k = next(i for i, ln in enumerate(lines) if ln.startswith(start))
    out = [lines[k]]
    for ln in lines[k + 1:]:
        if not ln.strip() or ln.startswith(("slowest", "keeping")) or ln[:1] != " " and not ln[:1].islower():
            break
        out.append(ln)
    return " ".join(" ".join(out).split())


@pytest.mark.parametrize("command", ["layers", "diff"])
def test_the_page_says_the_profile_summary(tmp_path, command):
    """layers/diff --profile printed a summary (the run, model kernels, probes, between kernels) that the page
    left out: the page said nothing of where the time went."""
    cnn = str(sample_path("cnn"))
    page = tmp_path / "p.html"
    argv = ["layers", cnn, "--profile"] if command == "layers" else ["diff", cnn, cnn, "--profile"]
    r = runner.invoke(app, [*argv, "--html", str(page)], env={"COLUMNS": "400"})
    assert r.exit_code == 0, r.output
    line = _printed(r.output, "profile")
    assert "between kernels" in line
    assert _fact(dump_dom(page), "profile") == line.removeprefix("profile").strip()


def test_the_page_says_the_fp32_sensitivity(tmp_path):
    """diff --fp32-sensitivity's lines (each layer's intro SQNR and the output's gain in fp32, "inf" where
    the output turns exact) were printed only: the page had no word of them."""
    pytest.importorskip("onnxruntime.quantization")
    from quantize_fixtures import quantize

    qdq = quantize("cnn", "qdq", tmp_path)
    page = tmp_path / "s.html"
    r = runner.invoke(app, ["diff", str(qdq), str(sample_path("cnn")), "--fp32-sensitivity", "2", "--html", str(page)],
                      env={"COLUMNS": "400"})
    assert r.exit_code in (0, 1) and page.is_file(), r.output
    printed = [" ".join(ln.split()) for ln in r.output.splitlines()]
    k = next(i for i, ln in enumerate(printed) if ln.startswith("keeping one layer in fp32"))
    want = printed[k:k + 3]
    assert len(want) == 3 and all("dB" in w for w in want)
    got = [_text(li) for li in re.findall(r"<li>(.*?)</li>", element(dump_dom(page), "ul", "sensitivity"), re.S)]
    assert got == want


def test_the_page_says_an_error_verdict_as_the_footer_does(tmp_path):
    """An error verdict after some outputs were compared: the footer says 'outputs pass, but 1 not compared', the
    page said 'not compared: ...' as if nothing had been."""
    import onnx
    from onnx import TensorProto, helper

    vi = (lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]))
    op = [helper.make_opsetid("", 17)]
    a = helper.make_graph([helper.make_node("Relu", ["x"], ["y1"], name="r"), helper.make_node("Neg", ["x"], ["y2"], name="n")],
                          "a", [vi("x")], [vi("y1"), vi("y2")])
    b = helper.make_graph([helper.make_node("Relu", ["x"], ["y1"], name="r")], "b", [vi("x")], [vi("y1")])
    onnx.save(helper.make_model(a, opset_imports=op), str(tmp_path / "a.onnx"))
    onnx.save(helper.make_model(b, opset_imports=op), str(tmp_path / "b.onnx"))
    page = tmp_path / "p.html"
    r = runner.invoke(app, ["diff", str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), "--html", str(page)])
    assert "outputs pass, but 1 not compared" in r.stdout, r.output
    verdict = _fact(dump_dom(page), "verdict")
    assert verdict.startswith("outputs pass, but 1 not compared: "), verdict
