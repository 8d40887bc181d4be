"""Tables with names in wide characters (CJK, emoji: two terminal cells each): laid out in cells, so that
no line is wider than the terminal (Rich cropped such lines: NaN and Inf columns gone) and no row is
shifted off its header."""

from __future__ import annotations

import json
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from rich.cells import cell_len
from typer.testing import CliRunner

from onnxprobe.cli.main import app
from onnxprobe.report.format import shorten
from onnxprobe.report.names import shorten_names, shorten_path
from onnxprobe.report.table import Column, Table

runner = CliRunner()
WIDTHS = (40, 60, 82, 90, 120)
OUTS = ["模型/编码器/第3层/注意力/查询/矩阵乘法_输出_0", "模型/编码器/第3层/激活🔥/Relu_输出_0", "模型/解码器/😀😀😀/取反/输出"]


def run(args, width):
    r = runner.invoke(app, [str(a) for a in args], env={"COLUMNS": str(width), "NO_COLOR": "1"})
    assert r.exit_code == 0, r.output
    return r.stdout


@pytest.fixture(scope="module")
def wide_model(tmp_path_factory):
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3) / 10, "权重🎯")
    nodes = [helper.make_node("MatMul", ["x", "权重🎯"], [OUTS[0]], name="模型/编码器/第3层/注意力/查询/矩阵乘法"),
             helper.make_node("Relu", [OUTS[0]], [OUTS[1]], name="模型/编码器/第3层/激活🔥/Relu"),
             helper.make_node("Neg", [OUTS[1]], [OUTS[2]], name="模型/解码器/😀😀😀/取反"),
             helper.make_node("ReduceSum", [OUTS[2]], ["y"], name="求和", keepdims=0)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path_factory.mktemp("wide") / "wide.onnx"
    onnx.save(m, path)
    return path


def _blocks(text: str) -> dict[str, list[str]]:
    """Row index -> the whitespace-separated words of its lines (a row starts with its index, or '#index',
    then two spaces; the lines below it are indented)."""
    blocks, current = {}, None
    for ln in text.splitlines():
        m = re.match(r"[#]?(\d+)  ", ln)
        if m:
            current = m.group(1)
            blocks.setdefault(current, []).extend(ln.split()[1:])
        elif current is not None and ln.startswith(" "):
            blocks[current].extend(ln.split())
        else:
            current = None
    return blocks


def check(text: str, width: int, t: Table) -> None:
    """No line wider than ``width`` in cells; every header there; each row's cells of the columns that are
    never shortened (all but the index and names) there, in order, on that row's own lines."""
    lines = text.splitlines()
    assert all(cell_len(ln) <= width for ln in lines), [ln for ln in lines if cell_len(ln) > width]
    for c in t.columns:
        if c.header:
            assert c.header in text, (c.header, width)
    blocks = _blocks(text)
    want: dict[str, list[str]] = {}
    for r in t.rows:
        want.setdefault(r.cells[0], []).extend(w for c, cell in zip(t.columns[1:], r.cells[1:]) if not c.name
                                                for w in cell.split())
    for index, words in want.items():
        got = iter(blocks[index])
        assert all(w in got for w in words), (width, index, words, blocks[index])  # in order, none missing


@pytest.mark.parametrize("width", WIDTHS)
def test_every_table_command_fits_in_cells(wide_model, width):
    from onnxprobe.report.diff import diff_table
    from onnxprobe.report.grad import grad_table
    from onnxprobe.report.layers import layers_table

    d = json.loads(run(["layers", wide_model, "--all", "--json", "-"], width))
    check(run(["layers", wide_model, "--all"], width), width, layers_table(d)[0])
    d = json.loads(run(["diff", wide_model, wide_model, "--all", "--json", "-"], width))
    check(run(["diff", wide_model, wide_model, "--all"], width), width, diff_table(d))
    d = json.loads(run(["grad", wide_model, "--check", "--json", "-"], width))
    check(run(["grad", wide_model, "--check"], width), width, grad_table(d)[0])
    for args in (["inspect", wide_model, "--nodes"], ["mark", wide_model, "-o", wide_model.with_name("m.onnx"), "--all"]):
        text = run(args, width)
        assert all(cell_len(ln) <= width for ln in text.splitlines()), [ln for ln in text.splitlines() if cell_len(ln) > width]
        for word in ("node", "op", "MatMul", "Relu", "Neg"):
            assert word in text, (args[0], word, width)


def test_a_row_with_wide_characters_lines_up_with_its_header():
    """Column k starts at the same cell on the header and on every row."""
    t = Table([Column("index", "#", "right"), Column("node", "node", name=True), Column("nan", "NaN", "right"),
               Column("inf", "Inf", "right")])
    t.add_row(["0", "卷积", "0", "0"])
    t.add_row(["1", "neg", "12", "3"])
    lines = [ln for ln, _ in t.lines(80)]
    ends = {cell_len(ln) for ln in lines[:1] + lines[2:]}  # the header and the rows end in the same cell
    assert ends == {cell_len(lines[0])}, lines


@pytest.mark.parametrize("width", range(20, 61, 4))  # 20: the narrowest a table gets (env_width)
def test_layouts_and_records_keep_wide_names_within_the_width(width):
    name = "特征图/" + "卷积层一二三四五六七八九十" * 3 + "/输出🔥"
    t = Table([Column("index", "#", "right", head=True), Column("tensor", "tensor", name=True),
               Column("shape", "shape", head=True), Column("nan", "NaN", "right"), Column("inf", "Inf", "right")])
    for i in range(3):
        t.add_row([str(i), name + str(i), "1x3x224x224", "7", "9"])
    lines = [ln for ln, _ in t.lines(width)]
    assert all(cell_len(ln) <= width for ln in lines), [ln for ln in lines if cell_len(ln) > width]
    text = "\n".join(lines)
    assert text.count("7") >= 3 and text.count("9") >= 3 and text.count("1x3x224x224") == 3


@pytest.mark.parametrize("width", [6, 10, 15, 20, 30])
def test_shortened_wide_names_fit_in_cells(width):
    names = ["模型/编码器/第3层/注意力/查询/矩阵乘法_输出_0", "模型/编码器/第4层/注意力/查询/矩阵乘法_输出_0", "😀" * 30]
    for s in shorten_names(names, width) + [shorten_path(n, width) for n in names] + [shorten(n, width) for n in names]:
        assert cell_len(s) <= width, (s, width)
    short = shorten_names(names[:2], 30)
    assert len(set(short)) == 2 and all(s.endswith("矩阵乘法_输出_0") for s in short)
