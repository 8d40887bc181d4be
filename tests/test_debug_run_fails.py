"""The debugger on a model that does not run on its inputs (a Gather whose seeded random int64 indices fall
outside its table): `grad` printed "backward graph attached: 2 gradients" with the run's failure as a note,
and the script's exit code was 0; `run` failed without the hint `onnxprobe layers` gives (the integer inputs
are seeded random data: give real values). Now `grad` is an error (the backward graph is not attached, the
exit code is 1) and both say the hint, in the debugger's words (`input NAME VALUE`, `inputs FILE.npz`), not
the command line's flags."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T, helper as h, numpy_helper as nh
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.cli.main import app

ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
ROWS = 5


@pytest.fixture
def gather(tmp_path) -> str:
    """y = Relu(W[idx]), W of ROWS rows, idx int64 [3]: seeded random indices in [0, 100) fall outside W."""
    w = nh.from_array(np.arange(ROWS * 4, dtype=np.float32).reshape(ROWS, 4), "W")
    g = h.make_graph([h.make_node("Gather", ["W", "idx"], ["g"], name="gather"), h.make_node("Relu", ["g"], ["y"], name="relu")],
                     "g", [h.make_tensor_value_info("idx", T.INT64, [3])], [h.make_tensor_value_info("y", T.FLOAT, [3, 4])], [w])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    path = str(tmp_path / "gather.onnx")
    onnx.save(m, path)
    # the oracle: the seeded random indices are out of range, and onnxruntime itself refuses them
    idx = api.feeds(path, api.InputSpec()).values["idx"]
    assert (idx >= ROWS).any(), idx
    with pytest.raises(Exception, match="out of data bounds|indices"):
        ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"idx": idx})
    return path


def _script(tmp_path, model, lines):
    f = tmp_path / "session.txt"
    f.write_text("\n".join(lines) + "\n")
    r = CliRunner().invoke(app, ["debug", model, "--script", str(f)], env=ENV)
    assert "Traceback" not in r.output, r.output
    return r


def _error(r, n: int) -> str:
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith(f"onnxprobe: error: line {n}: ")]
    assert len(lines) == 1, r.output
    return lines[0]


def test_grad_on_a_model_that_does_not_run_is_an_error(tmp_path, gather):
    r = _script(tmp_path, gather, ["grad", "info"])
    assert r.exit_code == 1, r.output
    said = _error(r, 1)
    assert "out of data bounds" in said, said
    assert "backward graph attached" not in r.stdout, r.stdout
    assert "idx_grad" not in r.stdout and "W_grad" not in r.stdout  # nothing attached: the model's own outputs


def test_grad_and_run_say_the_random_integers_hint_in_the_debuggers_words(tmp_path, gather):
    r = _script(tmp_path, gather, ["run", "grad"])
    assert r.exit_code == 1, r.output
    for n in (1, 2):
        said = _error(r, n)
        assert "integer input idx: seeded random data" in said, said
        assert "input NAME VALUE" in said and "inputs FILE.npz" in said, said
        # (the range, which the debugger takes when it starts: an index past a table is told how to draw within it)
        assert "integers drawn in [0, 100): set the range with `onnxprobe debug --int-range` LOW:HIGH" in said, said
        assert "--input" not in said and "--inputs" not in said, said


def test_grad_works_once_the_indices_are_real(tmp_path, gather):
    out = tmp_path / "w_grad.npy"
    r = _script(tmp_path, gather, ["input idx [0, 4, 2]", "grad", f"save W_grad {out}"])
    assert r.exit_code == 0, r.output
    assert "backward graph attached" in r.stdout
    # the oracle: d sum(relu(W[idx])) / dW counts the rows gathered where W > 0 (row 0's first entry is 0)
    expected = np.zeros((ROWS, 4))
    for i in (0, 4, 2):
        expected[i] += np.arange(i * 4, i * 4 + 4) > 0
    np.testing.assert_array_equal(np.load(out), expected)


def test_the_command_line_says_the_hint_in_flags(tmp_path, gather):
    r = CliRunner().invoke(app, ["layers", gather], env=ENV)
    assert r.exit_code == 1 and "--input NAME=VALUE or --inputs FILE.npz" in r.stderr, r.output


def test_guessed_dimensions_are_said_in_the_debuggers_words(tmp_path):
    from test_grad_feed_hint import _reflect_pad_model

    m = _reflect_pad_model(tmp_path)  # x [n, 2] reflect-padded by 2 rows: fails for n = 1, the guess
    r = _script(tmp_path, m, ["run", "grad", "input x random 4x2", "run"])
    assert r.exit_code == 1, r.output
    for n in (1, 2):
        said = _error(r, n)
        assert "dynamic dimensions were set to 1: give real sizes with input x random DIMS" in said, said
        assert "--shape" not in said, said
    assert "line 3" not in r.stderr and "line 4" not in r.stderr, r.stderr
