"""Names with control characters are shown escaped (``text.clean``), and the escaping reads back one way: a
tensor named 'a<newline>b' and one named 'a<backslash>nb' printed alike, ``a\\nb``, in the table, CSV and
Markdown. The backslash is doubled too, and the debugger, ``--name`` and ``--range`` take a name as listed."""

from __future__ import annotations

import codecs
import csv
import io

import numpy as np
import onnx
from onnx import TensorProto, helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe import api
from onnxprobe.cli.main import app

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
NEWLINE, BACKSLASH = "a\nb", "a\\nb"
X = np.array([-1.5, 2.0, -3.0, 4.25], np.float32)


def unescape(s: str) -> str:
    """The oracle of reading escapes back: Python's own (the names here are ASCII)."""
    return codecs.decode(s, "unicode_escape")


LISTED = {NEWLINE: "a\\nb", BACKSLASH: "a\\\\nb"}  # as Python's repr escapes them


def _model(tmp_path):
    m = make_model([helper.make_node("Relu", ["x"], [NEWLINE], name="relu"), helper.make_node("Neg", ["x"], [BACKSLASH], name="neg"),
                    helper.make_node("Add", [NEWLINE, BACKSLASH], ["y"], name="add")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    path = tmp_path / "names.onnx"
    onnx.save(m, str(path))
    np.save(tmp_path / "x.npy", X)
    return path, f"x={tmp_path / 'x.npy'}"


def test_clean_is_read_back_by_unclean():
    from onnxprobe.text import clean, unclean

    for s in (NEWLINE, BACKSLASH, "\\", "\\\\n", "t\x1b[31m", "p\u202eq", "c:\\temp\\x1", "plain"):
        assert unclean(clean(s)) == s, s
    assert clean(NEWLINE) != clean(BACKSLASH)


def test_table_csv_and_markdown_tell_the_two_names_apart(tmp_path):
    path, feed = _model(tmp_path)
    outs = {}
    for fmt in ("table", "csv", "markdown"):
        r = runner.invoke(app, ["layers", str(path), "--all", "--input", feed, "--columns", "tensor,max", "--format", fmt], env=ENV)
        assert r.exit_code == 0, r.output
        outs[fmt] = r.stdout
    rows = list(csv.DictReader(io.StringIO(outs["csv"])))
    got = {unescape(r["tensor"]): float(r["max"]) for r in rows}  # the escapes read back to the names
    assert got == {NEWLINE: float(np.maximum(X, 0).max()), BACKSLASH: float((-X).max()), "y": float((np.maximum(X, 0) - X).max())}
    assert "\n" not in "".join(r["tensor"] for r in rows)  # escaped, as on screen: no control reaches a terminal
    table = outs["table"].splitlines()
    assert any(line.split()[:1] == ["a\\nb"] for line in table) and any(line.split()[:1] == ["a\\\\nb"] for line in table)
    md = [line.split("|")[1].strip() for line in outs["markdown"].splitlines()[2:]]
    assert len(set(md)) == 3, md  # Markdown escapes the backslash once more: still three names


def test_names_are_taken_as_listed(tmp_path):
    path, feed = _model(tmp_path)
    for name, want in ((NEWLINE, np.maximum(X, 0)), (BACKSLASH, -X)):
        listed = LISTED[name]
        f = tmp_path / "s.txt"
        f.write_text(f"run\nshow '{listed}'\n")
        r = runner.invoke(app, ["debug", str(path), "--input", feed, "--script", str(f)], env=ENV)
        assert r.exit_code == 0 and "Traceback" not in r.output, r.output
        assert f"{listed}  from node" in r.stdout and f"max {want.astype(np.float64).max():.4g}" in r.stdout, r.stdout
        r = runner.invoke(app, ["layers", str(path), "--name", listed, "--input", feed, "--format", "csv", "--columns", "tensor,max"])
        assert r.exit_code == 0, r.output
        rows = list(csv.DictReader(io.StringIO(r.stdout)))
        assert [unescape(x["tensor"]) for x in rows] == [name], rows


def test_a_repr_in_a_message_keeps_its_own_escapes():
    """clean doubles backslashes (a name's escapes read back one way); a repr has escaped its own already,
    so messages that quote a value's repr escape control characters only (it read b'C:\\\\\\\\x')."""
    import pytest

    from onnxprobe.errors import UsageError

    with pytest.raises(UsageError) as e:
        api.Selection(ops=b"C:\\x")
    assert repr(b"C:\\x") in str(e.value), str(e.value)


def test_shortened_names_are_escaped_once(tmp_path):
    """A table too narrow for its names shortens them; a name holding a newline still reads ``a\\nb``
    (escaped once), never ``a\\\\nb``, which is how the name of a backslash and an n is listed: the
    shortening worked on the cells, already escaped, and escaped them again."""
    long = "/model/encoder/layer.7/attention/self/query/a very long part of the name/MatMul_output_0"
    m = make_model([helper.make_node("Relu", ["x"], [NEWLINE], name="relu"), helper.make_node("Neg", [NEWLINE], [long], name="neg"),
                    helper.make_node("Abs", [long], ["y"], name="abs")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    path = tmp_path / "short.onnx"
    onnx.save(m, str(path))
    for width in ("40", "60", "80"):
        r = runner.invoke(app, ["layers", str(path), "--all", "--columns", "tensor,max"], env={"COLUMNS": width, "NO_COLOR": "1"})
        assert r.exit_code == 0, r.output
        rows = r.stdout.splitlines()
        assert any("…" in line for line in rows), r.stdout  # the long name was shortened: the narrow layout
        assert any(line.split()[:1] == ["a\\nb"] for line in rows), r.stdout
        assert "a\\\\nb" not in r.stdout, r.stdout


def test_profile_tables_escape_names_once(tmp_path):
    """The slowest-nodes table of --profile lists names escaped once, as every other table does."""
    path, feed = _model(tmp_path)
    r = runner.invoke(app, ["layers", str(path), "--all", "--input", feed, "--profile"], env=ENV)
    assert r.exit_code == 0, r.output
    slowest = r.stdout.split("slowest")[1].splitlines()
    assert any(line.split()[:1] == ["a\\nb"] for line in slowest), r.stdout  # the newline
    assert any(line.split()[:1] == ["a\\\\nb"] for line in slowest), r.stdout  # the backslash and the n
    assert not any(line.split()[:1] == ["a\\\\\\\\nb"] for line in slowest), r.stdout
