"""A model that fails on the inputs onnxprobe made up (dynamic dimensions set to 1) says so under `grad` and
`diff --grad` as under `layers`: the hint that names the guessed dimensions, and `--shape`, follows the error
also when the failing run is the one that learns the shapes the backward graph needs (``grad_plan``), not
only when it is the forward+backward run itself."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T, helper as h, numpy_helper as nh
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import ExecutionError

HINT = "dynamic dimensions were set to 1"


def _reflect_pad_model(path) -> str:
    """x [n, 2] -> Pad reflect of 2 rows each side (fails for n < 3) -> Mul by a weight -> an If whose
    branches return different ranks (its output's rank only a run tells)."""
    then_g = h.make_graph([h.make_node("Unsqueeze", ["p", "ax"], ["yt"])], "then", [],
                          [h.make_tensor_value_info("yt", T.FLOAT, None)])
    else_g = h.make_graph([h.make_node("Identity", ["p"], ["ye"])], "else", [],
                          [h.make_tensor_value_info("ye", T.FLOAT, None)])
    nodes = [h.make_node("Pad", ["x", "pads"], ["p0"], mode="reflect"),
             h.make_node("Mul", ["p0", "w"], ["p"]),
             h.make_node("ReduceSum", ["p"], ["s"], keepdims=0),
             h.make_node("Greater", ["s", "zero"], ["c"]),
             h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["n", 2])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [nh.from_array(np.array([2, 0, 2, 0], np.int64), "pads"),
                      nh.from_array(np.array(0, np.float32), "zero"), nh.from_array(np.array([0], np.int64), "ax"),
                      nh.from_array(np.array([1.5, 2.0], np.float32), "w")])
    out = str(path / "pad.onnx")
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), out)
    return out


def test_diff_grad_says_the_dimensions_were_guessed(tmp_path):
    m = _reflect_pad_model(tmp_path)
    with pytest.raises(ExecutionError, match=HINT):
        api.diff_grad(m, m)
    r = CliRunner().invoke(app, ["diff", "--grad", m, m])
    assert r.exit_code == 1 and HINT in r.output and "Traceback" not in r.output


def test_grad_says_the_dimensions_were_guessed(tmp_path):
    m = _reflect_pad_model(tmp_path)
    with pytest.raises(ExecutionError, match=HINT):
        api.grad(m)


def test_real_sizes_run(tmp_path):
    m = _reflect_pad_model(tmp_path)
    res = api.grad(m, inputs={"x": np.ones((5, 2), np.float32)})
    # d sum(1.5 / 2 * pad(x)) / dw: the column sums of the padded x, 9 rows of ones
    w = [r for r in res.rows if r.name == "w"][0]
    assert np.isclose(w.norm, np.linalg.norm([9.0, 9.0]))


def test_the_hint_keeps_the_errors_side_and_class(tmp_path):
    """diff --grad's hint about made-up inputs was added by building a new ExecutionError: its message kept
    the side's name, its ``side`` (and any other attribute, and a subclass) were lost."""
    m = _reflect_pad_model(tmp_path)
    with pytest.raises(ExecutionError, match=HINT) as e:
        api.diff_grad(m, m)
    assert str(e.value).startswith(f"A ({m}): onnxruntime: ")
    assert e.value.side == f"A ({m})"
    assert e.value.cli_message.startswith(f"A ({m}): onnxruntime: ") and "--shape" in e.value.cli_message
