"""A weight the model also lists as a graph input (an initializer in graph.input: IR < 4 lists every one so,
newer exporters some) is a weight to onnxprobe: it runs with the value stored in the model. `--input W=...`
said "unknown input name 'W'" (QA) of a name the model declares as an input: it now says what W is."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as H
from onnx import numpy_helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app


def _model(path):
    g = H.make_graph([H.make_node("Add", ["x", "w"], ["y"], name="add")], "g",
                     [H.make_tensor_value_info("x", T.FLOAT, [3]), H.make_tensor_value_info("w", T.FLOAT, [3])],
                     [H.make_tensor_value_info("y", T.FLOAT, [3])], [numpy_helper.from_array(np.full(3, 0.5, np.float32), "w")])
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))


def test_a_weight_listed_as_an_input_is_named_as_a_weight(tmp_path):
    _model(tmp_path / "m.onnx")
    np.save(tmp_path / "w.npy", np.ones(3, np.float32))
    for given in (["--input", "w=[1, 1, 1]"], ["--input", f"w={tmp_path / 'w.npy'}"]):
        r = CliRunner().invoke(app, ["layers", str(tmp_path / "m.onnx"), *given])
        assert r.exit_code == 2 and "Traceback" not in r.output, r.output
        assert len(r.stderr.strip().splitlines()) == 1 and "unknown input" not in r.stderr, r.stderr
        assert "'w'" in r.stderr and "weight" in r.stderr and "graph input" in r.stderr, r.stderr
    # the weight's stored value is what runs: y = x + 0.5 (numpy the oracle)
    r = CliRunner().invoke(app, ["layers", str(tmp_path / "m.onnx"), "--input", "x=[1, 2, 3]", "--json", "-"])
    assert r.exit_code == 0, r.output
    import json
    y = next(t for t in json.loads(r.stdout)["tensors"] if t["name"] == "y")
    assert y["min"] == 1.5 and y["max"] == 3.5
