"""A diff that compared nothing (every pair an empty tensor) wrote its Model Explorer overlay as ``{}``: no
graph, no legend, nothing saying why it is empty. It now holds the main graph (an id the ONNX adapter gives)
with no results, the usual SQNR colours, and a legend that says the verdict, as the command's error line and
the Netron attachment do; the command still says nothing was compared (exit 1). Any overlay with no value
(a layers run of no tensor with values) keeps its graph and legend the same way."""

from __future__ import annotations

import json

import onnx
from onnx import TensorProto, helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app
from test_overlay import adapter_ids

runner = CliRunner()
V = helper.make_tensor_value_info


def _empty(tmp_path):
    m = make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [V("x", TensorProto.FLOAT, [0, 4])],
                   [V("y", TensorProto.FLOAT, [0, 4])])
    path = tmp_path / "e.onnx"
    onnx.save(m, path)
    return path


def test_an_overlay_of_nothing_compared_keeps_its_graph_and_legend(tmp_path):
    model = _empty(tmp_path)
    out, nt, js = tmp_path / "nd.json", tmp_path / "n.json", tmp_path / "d.json"
    r = runner.invoke(app, ["diff", str(model), str(model), "--overlay", str(out), "--netron", str(nt), "--json", str(js)])
    assert r.exit_code == 1 and "nothing was compared" in r.stderr, r.output
    assert json.loads(js.read_text())["verdict"] == "error"
    data = json.loads(out.read_text())
    theirs = adapter_ids(model)
    assert list(data) == [next(iter(theirs))], (data, list(theirs))  # the main graph, by the adapter's id
    g = data[next(iter(theirs))]
    # Model Explorer reads results as an object (Object.keys(results)): present, empty
    assert g["results"] == {} and [t["bgColor"] for t in g["thresholds"]] == ["#e53935", "#fb8c00", "#fdd835", "#43a047"]
    assert g["name"].startswith("onnxprobe diff: introduced SQNR dB") and "nothing was compared" in g["name"], g["name"]
    netron = json.loads(nt.read_text())
    assert any("nothing was compared" in m["value"] for m in netron["metadata"])  # as the attachment says it


def test_a_diff_that_compared_something_says_no_verdict_in_its_legend(tmp_path):
    m = make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [V("x", TensorProto.FLOAT, [4])], [V("y", TensorProto.FLOAT, [4])])
    path, out = tmp_path / "m.onnx", tmp_path / "nd.json"
    onnx.save(m, path)
    r = runner.invoke(app, ["diff", str(path), str(path), "--overlay", str(out)])
    assert r.exit_code == 0, r.output
    (g,) = json.loads(out.read_text()).values()
    assert g["results"] and "verdict" not in g["name"], g
