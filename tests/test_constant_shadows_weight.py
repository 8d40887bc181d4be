"""A main-graph Constant node writing a name that is also an initializer, a graph input or another Constant's
output: onnxruntime makes each main-graph Constant an initializer when it loads the model, after the model's
own, and runs with the last of one name ("Duplicate initializer (dense, sparse or ConstantNode) ... the model
will use the latest encountered initializer"; a graph input of that name is no longer an input). ``inspect``,
``extract`` and ``mark`` refused such a model ("is written by node #0 ... and is also a graph input or
initializer: onnxruntime will not load the model") while ``layers`` ran it (QA fuzzing, round 4). Oracle:
onnxruntime's own outputs and numpy float64."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as H
from onnx import numpy_helper
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.cli.main import app

runner = CliRunner()
INIT = np.array([[1, 2, 0.5], [3, -4, 1]], np.float32)
CONST = np.array([[10, -20, 5], [30, 40, -2]], np.float32)
LATER = np.array([[-1, 2, 3], [4, 5, -6]], np.float32)
X = np.array([[1, 0.5], [-0.25, 2]], np.float32)


def model(path, case) -> str:
    def const(v, name):
        return H.make_node("Constant", [], ["W"], name=name, value=numpy_helper.from_array(v, "v"))
    nodes = [H.make_node("MatMul", ["x", "W"], ["mm"], name="mm"), H.make_node("Relu", ["mm"], ["y"], name="relu")]
    inputs = [H.make_tensor_value_info("x", T.FLOAT, [2, 2])]
    inits = []
    if case in ("initializer", "listed initializer"):
        inits = [numpy_helper.from_array(INIT, "W")]
    if case in ("graph input", "listed initializer"):
        inputs.append(H.make_tensor_value_info("W", T.FLOAT, [2, 3]))
    nodes = [const(CONST, "c")] + nodes + ([const(LATER, "c2")] if case == "two constants" else [])
    g = H.make_graph(nodes, "g", inputs, [H.make_tensor_value_info("y", T.FLOAT, [2, 3])], inits)
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


def ort_session(path):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


CASES = ["initializer", "graph input", "listed initializer", "two constants"]


def want(case):
    w = LATER if case == "two constants" else CONST
    return np.maximum(X.astype(np.float64) @ w, 0)


@pytest.mark.parametrize("case", CASES)
def test_onnxruntime_runs_the_constants_value(tmp_path, case):
    """What the rest stands on, measured (if onnxruntime changes, so must onnxprobe)."""
    s = ort_session(model(tmp_path / "m.onnx", case))
    assert [i.name for i in s.get_inputs()] == ["x"]
    np.testing.assert_allclose(s.run(None, {"x": X})[0], want(case), rtol=1e-6)


@pytest.mark.parametrize("case", CASES)
def test_inspect_loads_it_with_one_note(tmp_path, case):
    p = model(tmp_path / "m.onnx", case)
    r = runner.invoke(app, ["inspect", p, "--json", "-"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert [i["name"] for i in out["inputs"]] == ["x"], out["inputs"]
    assert sum("Constant" in n for n in out["notes"]) == 1, out["notes"]


@pytest.mark.parametrize("case", CASES)
def test_layers_gives_onnxruntimes_values(tmp_path, case):
    p = model(tmp_path / "m.onnx", case)
    res = api.layers(p, inputs={"x": X}, selection=api.Selection(all=True))
    assert res.stats["y"].max == pytest.approx(want(case).max()) and res.stats["y"].mean == pytest.approx(want(case).mean())


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("argv", [["extract", "--to", "mm"], ["mark", "--op", "MatMul"]])
def test_the_written_copy_runs_as_the_model_does(tmp_path, case, argv):
    p = model(tmp_path / "m.onnx", case)
    out = tmp_path / "o.onnx"
    r = runner.invoke(app, [argv[0], p, "-o", str(out), *argv[1:]])
    assert r.exit_code == 0, r.output
    s = ort_session(out)
    np.testing.assert_allclose(s.run(["mm"], {"x": X})[0], X.astype(np.float64) @ (LATER if case == "two constants" else CONST), rtol=1e-6)


def _odd(path, init=None, inp=None):
    """W = Constant(CONST) read by an Identity, the name also an initializer of ``init`` (shape, dtype) or a
    graph input declared ``inp`` (elem type, dims)."""
    nodes = [H.make_node("Constant", [], ["W"], name="c", value=numpy_helper.from_array(CONST, "v")), H.make_node("Identity", ["W"], ["y"], name="id")]
    inputs = [H.make_tensor_value_info("x", T.FLOAT, [2, 2])] + ([H.make_tensor_value_info("W", *inp)] if inp else [])
    inits = [numpy_helper.from_array(np.zeros(init[0], init[1]), "W")] if init else []
    g = H.make_graph(nodes, "g", inputs, [H.make_tensor_value_info("y", T.FLOAT, None)], inits)
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


@pytest.mark.parametrize("kw", [dict(init=([5], np.float32)), dict(init=([2, 3], np.int64)), dict(inp=(T.FLOAT, [5])),
                                dict(inp=(T.INT64, [2, 3]))])
def test_a_constant_of_another_type_than_what_it_shadows_is_refused_as_onnxruntime_refuses_it(tmp_path, kw):
    """onnxruntime refuses it ("Shape of initializer W does not match"): so does layers, in one line (the
    Constant kept alone, it ran the model)."""
    p = _odd(tmp_path / "m.onnx", **kw)
    with pytest.raises(Exception):
        ort_session(p)
    r = runner.invoke(app, ["layers", p])
    assert r.exit_code != 0 and len(r.stderr.strip().splitlines()) == 1, r.output


@pytest.mark.parametrize("inp", [(T.FLOAT, ["n", 3]), (T.FLOAT, None)])
def test_a_graph_input_of_no_contrary_shape_gives_way(tmp_path, inp):
    p = _odd(tmp_path / "m.onnx", inp=inp)
    assert [i.name for i in ort_session(p).get_inputs()] == ["x"]
    res = api.layers(p, inputs={"x": X}, selection=api.Selection(all=True))
    assert res.stats["y"].max == CONST.max() and res.stats["y"].min == CONST.min()
