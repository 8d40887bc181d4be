"""What grad says of requested tensors that get no gradient: --wrt naming only such tensors is one error
line after the notes, with no empty table before it; --all names every float input the loss does not
depend on (one read by no node as well as one read only by a Shape); an input that reaches the loss only
through integer values (Cast to int64, then Gather's indices) is said to, not blamed on a missing rule."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

runner = CliRunner()
V = helper.make_tensor_value_info
W = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32), "W")


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def _save(tmp_path, name: str, nodes, inputs, outputs) -> str:
    path = tmp_path / f"{name}.onnx"
    onnx.save(make_model(nodes, inputs, outputs, [W]), path)
    return str(path)


def _unused(tmp_path) -> str:
    """y = x @ W; u is an input no node reads."""
    return _save(tmp_path, "unused", [helper.make_node("MatMul", ["x", "W"], ["y"])],
                 [V("x", TensorProto.FLOAT, [2, 4]), V("u", TensorProto.FLOAT, [3])], [V("y", TensorProto.FLOAT, [2, 4])])


def test_wrt_of_a_tensor_without_gradient_prints_no_table(tmp_path):
    m = _unused(tmp_path)
    for fmt in ("table", "json", "csv"):
        r = invoke("grad", m, "--wrt", "u", "--device", "cpu", "--format", fmt)
        assert r.exit_code == 1, r.output
        assert r.stdout.strip() == "", (fmt, r.stdout)
        assert "does not depend" in r.stderr and "none of the tensors --wrt asks for gets a gradient" in r.stderr
        assert "Traceback" not in r.output


def test_all_names_every_input_the_loss_does_not_depend_on(tmp_path):
    """u read by no node got no row and no note; s read only by a Shape got the note: both get it."""
    unused = _unused(tmp_path)
    shaped = _save(tmp_path, "shaped", [helper.make_node("Shape", ["s"], ["sh"]), helper.make_node("MatMul", ["x", "W"], ["h"]),
                                        helper.make_node("Reshape", ["h", "sh"], ["y"])],
                   [V("x", TensorProto.FLOAT, [2, 4]), V("s", TensorProto.FLOAT, [8])], [V("y", TensorProto.FLOAT, [8])])
    for m, name in ((unused, "u"), (shaped, "s")):
        r = invoke("grad", m, "--all", "--device", "cpu")
        assert r.exit_code == 0, r.output
        notes = [line for line in r.stderr.splitlines() if "does not depend" in line]
        assert len(notes) == 1 and notes[0].endswith(f": {name}"), r.stderr
        assert "x  " in r.stdout and f" {name} " not in r.stdout


def test_an_input_reaching_the_loss_through_integers_only_is_said_to(tmp_path):
    """s -> Cast(int64) -> Gather's indices: the note blamed 'no gradient rule' at Gather input 1; s has no
    gradient by nature (integer values carry none). Pad's constant value keeps its 'no gradient rule' note
    (a Clip bound did, until Clip's bounds got their gradient: tests/test_grad_clip_bounds.py)."""
    m = _save(tmp_path, "int", [helper.make_node("Cast", ["s"], ["si"], to=TensorProto.INT64, name="to_int"),
                                helper.make_node("MatMul", ["x", "W"], ["h"]),
                                helper.make_node("Gather", ["h", "si"], ["y"], axis=1, name="g")],
              [V("x", TensorProto.FLOAT, [2, 4]), V("s", TensorProto.FLOAT, [3])], [V("y", TensorProto.FLOAT, [2, 3])])
    np.save(tmp_path / "s.npy", np.array([0, 2, 1], np.float32))
    r = invoke("grad", m, "--all", "--input", f"s={tmp_path / 's.npy'}", "--device", "cpu")
    assert r.exit_code == 0, r.output
    assert "no gradient rule" not in r.stderr and "does not depend" not in r.stderr, r.stderr
    assert "reach the loss only through integer values" in r.stderr and "s (through Cast 'to_int')" in r.stderr, r.stderr
    r = invoke("grad", m, "--wrt", "s", "--input", f"s={tmp_path / 's.npy'}", "--device", "cpu")
    assert r.exit_code == 1 and "reach the loss only through integer values" in r.stderr, r.output
    pad = _save(tmp_path, "pad", [helper.make_node("Constant", [], ["pads"], name="pads",
                                                   value=numpy_helper.from_array(np.array([0, 1, 0, 1], np.int64))),
                                  helper.make_node("Pad", ["x", "pads", "v"], ["y"], name="pad")],
                [V("x", TensorProto.FLOAT, [2, 4]), V("v", TensorProto.FLOAT, [])], [V("y", TensorProto.FLOAT, [2, 6])])
    r = invoke("grad", pad, "--all", "--device", "cpu")
    assert r.exit_code == 0 and "Pad 'pad' (input 2)" in r.stderr and "integer" not in r.stderr, r.output


def test_a_tensor_read_through_argmax_or_floor_is_not_said_to_be_unread(tmp_path):
    """h -> ArgMax -> Cast -> Mul, or h -> Floor -> Mul: the loss depends on h (piecewise constant), and the
    note said 'the loss does not depend on' it; it now says which op without a gradient lies on its way.
    A tensor read only by a Shape keeps 'does not depend' (its values are never read)."""
    am = _save(tmp_path, "am", [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
                                helper.make_node("ArgMax", ["h"], ["a"], axis=1, keepdims=1, name="amax"),
                                helper.make_node("Cast", ["a"], ["af"], to=TensorProto.FLOAT, name="tof"),
                                helper.make_node("Mul", ["af", "x"], ["y"], name="mul")],
               [V("x", TensorProto.FLOAT, [2, 4])], [V("y", TensorProto.FLOAT, [2, 4])])
    fl = _save(tmp_path, "fl", [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
                                helper.make_node("Floor", ["h"], ["f"], name="floor"),
                                helper.make_node("Mul", ["f", "x"], ["y"], name="mul")],
               [V("x", TensorProto.FLOAT, [2, 4])], [V("y", TensorProto.FLOAT, [2, 4])])
    for m, via in ((am, "ArgMax 'amax'"), (fl, "Floor 'floor'")):
        r = invoke("grad", m, "--all", "--device", "cpu")
        assert r.exit_code == 0, r.output
        assert "does not depend" not in r.stderr, r.stderr
        assert f"h (through {via})" in r.stderr and f"W (through {via})" in r.stderr, r.stderr
