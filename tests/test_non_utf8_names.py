"""ONNX strings are UTF-8; a file whose names or texts are not (protobuf then gives bytes, not str) made every
command fail with 'internal error: TypeError ... str and bytes' or a UnicodeDecodeError, wherever it first
touched the field. It is refused on load as a broken model, in one line that says which field."""

from __future__ import annotations

import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

runner = CliRunner()


def _broken(tmp_path, marker: str, **kw):
    vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [4])  # noqa: E731
    names = {"out": "a", "node": "n1", "doc": "", "prop": "k"}
    names.update({kw["field"]: marker})
    m = make_model([helper.make_node("Relu", ["x"], [names["out"]], name=names["node"], doc_string=names["doc"]),
                    helper.make_node("Neg", [names["out"]], ["y"], name="n2")], [vi("x")], [vi("y")])
    helper.set_model_props(m, {names["prop"]: "v"})
    data = m.SerializeToString()
    assert data.count(marker.encode()) >= 1
    path = tmp_path / "m.onnx"
    path.write_bytes(data.replace(marker.encode(), marker.encode()[:-2] + b"\xff\xfe"))  # same length: still valid protobuf
    return path


@pytest.mark.parametrize("field, where", [("out", "graph.node[0].output[0]"), ("node", "graph.node[0].name"),
                                          ("doc", "graph.node[0].doc_string"), ("prop", "metadata_props[0].key")])
@pytest.mark.parametrize("command", [["layers", "--all"], ["inspect"]])
def test_a_name_or_text_that_is_not_utf8_is_refused_in_one_line(tmp_path, field, where, command):
    path = _broken(tmp_path, "MARKERXYZ", field=field)
    r = runner.invoke(app, [command[0], str(path), *command[1:]])
    assert r.exit_code == 1, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("onnxprobe: error: ") and "internal error" not in r.output, r.output
    assert where in lines[0] and "not UTF-8" in lines[0], lines[0]


def _bad(text: str) -> bytes:
    return text.encode()[:-2] + b"\xff\xfe"


def _swap(m, marker: str):
    """``m`` read back with ``marker``'s last two bytes made invalid UTF-8 (same length: valid protobuf)."""
    import onnx

    data = m.SerializeToString()
    assert data.count(marker.encode()) == 1
    return onnx.load_from_string(data.replace(marker.encode(), _bad(marker)))


def test_not_utf8_names_the_field_path():
    """The path of the first non-UTF-8 field, through repeated messages, subgraphs and repeated strings;
    None for a clean model (the field path is only built for the field reported)."""
    from onnxprobe.graph.io import not_utf8

    vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [4])  # noqa: E731
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t_out"], name="THENNODEX")], "then", [], [vi("t_out")])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e_out"])], "else", [], [vi("e_out")])
    cond = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other),
             helper.make_node("Sum", ["a", "SUMINPUTX"], ["z"], doc_string="DOCSTRINGX")]
    m = helper.make_model(helper.make_graph(nodes, "g", [vi("x"), cond], [vi("y"), vi("z")]))
    assert not_utf8(m) is None
    assert not_utf8(_swap(m, "THENNODEX")) == ("graph.node[1].attribute[1].g.node[0].name", _bad("THENNODEX"))
    assert not_utf8(_swap(m, "DOCSTRINGX")) == ("graph.node[2].doc_string", _bad("DOCSTRINGX"))
    assert not_utf8(_swap(m, "SUMINPUTX")) == ("graph.node[2].input[1]", _bad("SUMINPUTX"))
    long = "L" * 60 + "LONGX"
    m.producer_name = long
    assert not_utf8(_swap(m, long)) == ("producer_name", long.encode()[:40])
