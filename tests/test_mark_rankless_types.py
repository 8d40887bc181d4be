"""A model holding a custom op no runtime loads: com.microsoft ops' outputs have an element type (onnxruntime's schemas:
``graph.contrib_types``, which inspect shows) and no rank, which a graph output must declare, and the run that would
tell it cannot happen. mark left them out saying 'neither shape inference nor the run tells their type', extract
refused them with 'shape inference does not know it': both say what is known and what is missing."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from typer.testing import CliRunner

from onnxprobe.cli.main import app

runner = CliRunner()


def _model(path) -> str:
    nodes = [h.make_node("Relu", ["x"], ["r"], name="relu"),
             h.make_node("Gelu", ["r"], ["g"], domain="com.microsoft", name="gelu"),
             h.make_node("FusedMatMul", ["g", "W"], ["fm"], domain="com.microsoft", alpha=0.5, name="fmm"),
             h.make_node("Tanh", ["fm"], ["t"], name="tanh"),
             h.make_node("Frobnicate", ["t"], ["f"], domain="my.domain", name="frob"),
             h.make_node("Sigmoid", ["t"], ["s"], name="sig")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 4])],
                     [h.make_tensor_value_info("f", T.FLOAT, [2, 3]), h.make_tensor_value_info("s", T.FLOAT, [2, 3])],
                     [nh.from_array(np.ones((4, 3), np.float32), "W")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("com.microsoft", 1), h.make_opsetid("my.domain", 1)],
                     ir_version=9)
    onnx.save(m, path)
    return str(path)


def test_rankless_outputs_are_said_as_such(tmp_path):
    m = _model(tmp_path / "m.onnx")
    r = runner.invoke(app, ["inspect", m, "--nodes", "--json", "-"])
    types = {o["name"]: o["dtype"] for n in json.loads(r.stdout)["nodes"] for o in n["outputs"]}
    assert types["g"] == types["fm"] == types["t"] == "float32"  # what inspect knows of them
    r = runner.invoke(app, ["mark", m, "-o", str(tmp_path / "o.onnx"), "--all"])
    assert r.exit_code == 0, r.output
    said = " ".join(r.stderr.split())
    assert "3 tensor(s) left out: their element type is known but not their rank" in said and "g, fm, t" in said
    assert "neither shape inference nor the run" not in said
    r = runner.invoke(app, ["extract", m, "-o", str(tmp_path / "e.onnx"), "--from", "fm", "--to", "s"])
    assert r.exit_code == 1 and "its element type is known but not its rank" in r.stderr, r.output
    assert len(r.stderr.strip().splitlines()) == 1
