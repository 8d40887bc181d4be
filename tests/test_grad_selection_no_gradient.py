"""A grad selection that leaves no tensor with a gradient is no report: `grad --op Shape` (only integer
tensors), `--name` of an integer tensor, or `--op MatMul` where the loss reads the MatMul only through its
Shape, printed an empty table and exited 0. Now one error line says why (integer values carry no gradient;
the notes say why the others get none), exit 2 for a selection of integer tensors only, 1 where the
selected float tensors get no gradient (as --wrt of such tensors already did)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import UsageError

runner = CliRunner()
V = helper.make_tensor_value_info


def _shape_model(tmp_path) -> str:
    """m = x @ W; y = Relu(x * sum(float(Shape(m)))): m reaches the loss only through its shape."""
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32), "W")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"),
             helper.make_node("Shape", ["m"], ["s"], name="shp"),
             helper.make_node("Cast", ["s"], ["sf"], to=TensorProto.FLOAT, name="cast"),
             helper.make_node("ReduceSum", ["sf"], ["c"], keepdims=0, name="rs"),
             helper.make_node("Mul", ["x", "c"], ["y0"], name="mul"),
             helper.make_node("Relu", ["y0"], ["y"], name="relu")]
    path = tmp_path / "shape.onnx"
    onnx.save(make_model(nodes, [V("x", TensorProto.FLOAT, [2, 4])], [V("y", TensorProto.FLOAT, [2, 4])], [w]), path)
    return str(path)


@pytest.mark.parametrize("flags", [["--op", "Shape"], ["--name", "s"], ["--op", "Shape", "--check"]])
def test_a_selection_of_integer_tensors_only_is_refused(tmp_path, flags):
    r = runner.invoke(app, ["grad", _shape_model(tmp_path), "--device", "cpu", *flags])
    err = r.stderr.strip().splitlines()
    assert r.exit_code == 2 and r.stdout.strip() == "", r.output
    assert len(err) == 1 and "no tensor that gets a gradient" in err[0] and "'s' (int64)" in err[0], r.stderr
    assert "Traceback" not in r.output


def test_the_api_refuses_it_too(tmp_path):
    with pytest.raises(UsageError, match="no tensor that gets a gradient"):
        api.grad(_shape_model(tmp_path), api.Selection(ops=("Shape",)), api.RunConfig(device="cpu"))


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_selected_float_tensors_without_gradient_print_no_empty_table(tmp_path, fmt):
    r = runner.invoke(app, ["grad", _shape_model(tmp_path), "--device", "cpu", "--op", "MatMul", "--format", fmt])
    assert r.exit_code == 1 and r.stdout.strip() == "", r.output
    assert "does not depend" in r.stderr and "none of the selected tensors gets a gradient" in r.stderr, r.stderr


def test_a_selection_with_gradients_still_runs(tmp_path):
    r = runner.invoke(app, ["grad", _shape_model(tmp_path), "--device", "cpu", "--op", "Cast"])
    assert r.exit_code == 0 and " sf " in r.stdout, r.output


@pytest.mark.parametrize("flags,code", [(["--op", "Shape"], 2), (["--name", "s"], 2), (["--op", "MatMul"], 1)])
def test_diff_grad_says_the_selection_holds_no_gradient(tmp_path, flags, code):
    """diff --grad printed the header and an empty table, then 'no tensor of A could be paired with one of B
    (0 unmatched in A, 0 in B)': pairing was not what failed."""
    m = _shape_model(tmp_path)
    r = runner.invoke(app, ["diff", "--grad", m, m, "--device", "cpu", *flags])
    err = [e for e in r.stderr.strip().splitlines() if not e.startswith("onnxprobe: note:")]
    assert r.exit_code == code and r.stdout.strip() == "", r.output
    assert len(err) == 1 and "holds no gradient of either model" in err[0] and "could be paired" not in err[0], r.stderr
    assert ("'s' (int64)" in err[0]) == (code == 2), err[0]


def test_a_selection_of_loop_body_tensors_only_is_refused(tmp_path):
    """grad's rows are main-graph tensors: --op Tanh matching only a Loop body's Tanh printed an empty table."""
    body = helper.make_graph([helper.make_node("Tanh", ["v"], ["u"], name="b_tanh"),
                              helper.make_node("Identity", ["c"], ["cn"], name="keep")], "body",
                             [V("i", TensorProto.INT64, []), V("c", TensorProto.BOOL, []), V("v", TensorProto.FLOAT, [2])],
                             [V("cn", TensorProto.BOOL, []), V("u", TensorProto.FLOAT, [2])])
    m = make_model([helper.make_node("Loop", ["M", "", "x"], ["y"], body=body, name="loop")],
                   [V("x", TensorProto.FLOAT, [2])], [V("y", TensorProto.FLOAT, [2])],
                   [numpy_helper.from_array(np.array(2, np.int64), "M")])
    onnx.save(m, tmp_path / "loop.onnx")
    r = runner.invoke(app, ["grad", str(tmp_path / "loop.onnx"), "--device", "cpu", "--op", "Tanh"])
    assert r.exit_code == 2 and r.stdout.strip() == "", r.output
    assert "holds no tensor that gets a gradient row" in r.stderr and "inside If/Loop/Scan bodies" in r.stderr, r.stderr


def test_diff_grad_of_body_tensors_only_says_they_get_no_row(tmp_path):
    """diff --grad of a selection inside a Loop body said 'no gradient reaches' them ('the loss does not depend
    on them'), exit 1, where grad says they lie inside a body and get no row (exit 2): the loss depends on them."""
    body = helper.make_graph([helper.make_node("Tanh", ["v"], ["u"], name="b_tanh"),
                              helper.make_node("Identity", ["c"], ["cn"], name="keep")], "body",
                             [V("i", TensorProto.INT64, []), V("c", TensorProto.BOOL, []), V("v", TensorProto.FLOAT, [2])],
                             [V("cn", TensorProto.BOOL, []), V("u", TensorProto.FLOAT, [2])])
    m = make_model([helper.make_node("Loop", ["M", "", "x"], ["y"], body=body, name="loop")],
                   [V("x", TensorProto.FLOAT, [2])], [V("y", TensorProto.FLOAT, [2])],
                   [numpy_helper.from_array(np.array(2, np.int64), "M")])
    path = str(tmp_path / "loop.onnx")
    onnx.save(m, path)
    r = runner.invoke(app, ["diff", "--grad", path, path, "--device", "cpu", "--op", "Tanh"])
    err = [e for e in r.stderr.strip().splitlines() if not e.startswith("onnxprobe: note:")]
    assert r.exit_code == 2 and r.stdout.strip() == "", r.output
    assert len(err) == 1 and "inside If/Loop/Scan bodies" in err[0] and "no gradient reaches" not in err[0], r.stderr
