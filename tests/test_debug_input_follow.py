"""The debugger's `input NAME ...` and a named dimension two inputs share ('seq' of input_ids and
attention_mask): the other inputs of seeded random data follow the new size, redrawn (a note says which),
as the command line draws a random input at the size a given one fixes; an input the user gave (a file,
a value, `inputs FILE.npz`) is not changed behind their back: the refusal says how to change it too."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def model(tmp_path):
    p = tmp_path / "two.onnx"
    g = helper.make_graph([helper.make_node("Add", ["x", "m"], ["y"], name="add")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "seq"]),
                           helper.make_tensor_value_info("m", TensorProto.FLOAT, ["b", "seq"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", "seq"])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(p))
    return p


def session(tmp_path, lines, *flags):
    f = tmp_path / "s.txt"
    f.write_text("\n".join(lines) + "\n")
    r = runner.invoke(app, ["debug", str(model(tmp_path)), "--script", str(f), *flags], env=ENV)
    assert "Traceback" not in r.output
    return r


def listed(out: str) -> dict[str, str]:
    """input -> its shape, from the last `inputs` table."""
    rows = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) > 2 and parts[0] in ("x", "m") and parts[2] == "float32":
            rows[parts[0]] = parts[1]
    return rows


def test_random_input_with_own_shape_follows(tmp_path):
    r = session(tmp_path, ["input m random 2x3", "input x random 2x8", "inputs"])
    assert r.exit_code == 0, r.output
    assert listed(r.output) == {"x": "2x8", "m": "2x8"}
    assert "input m: redrawn at 2x8" in r.output and "'seq'" in r.output


def test_random_input_follows_a_file(tmp_path):
    ids = tmp_path / "x8.npy"
    np.save(ids, np.arange(8, dtype=np.float32).reshape(1, 8))
    r = session(tmp_path, ["input m random 1x3", f"input x {ids}", "inputs"])
    assert r.exit_code == 0, r.output
    assert listed(r.output) == {"x": "1x8", "m": "1x8"}
    assert "input m: redrawn at 1x8" in r.output


def test_shapes_from_the_command_line_follow_too(tmp_path):
    r = session(tmp_path, ["input x random 1x8", "inputs"], "--shape", "x=1x3", "--shape", "m=1x3")
    assert r.exit_code == 0, r.output
    assert listed(r.output) == {"x": "1x8", "m": "1x8"}


def test_only_the_changed_dimension_follows(tmp_path):
    # m's batch of 2 is the user's and x's new shape keeps it: only seq moves
    r = session(tmp_path, ["input m random 2x3", "input x random 2x5", "inputs"])
    assert listed(r.output) == {"x": "2x5", "m": "2x5"}


def test_random_draw_is_the_command_lines(tmp_path):
    """The redrawn m holds what `layers --input x=FILE` draws for it (the same seeded random data)."""
    ids = tmp_path / "x8.npy"
    np.save(ids, np.arange(8, dtype=np.float32).reshape(1, 8))
    out = tmp_path / "m.npy"
    r = session(tmp_path, ["input m random 1x3", f"input x {ids}", f"save m {out}"])
    assert r.exit_code == 0, r.output
    from onnxprobe import api
    want = api.feeds(api.load(str(model(tmp_path))), api.InputSpec(files={"x": str(ids)})).values["m"]
    got = np.load(out)
    assert got.shape == (1, 8) and np.array_equal(got, want)


def test_a_given_input_is_not_changed_and_the_refusal_says_how(tmp_path):
    mask = tmp_path / "m3.npy"
    np.save(mask, np.ones((1, 3), np.float32))
    r = session(tmp_path, [f"input m {mask}", "input x random 1x8", "inputs"])
    assert r.exit_code == 1
    err = [line for line in r.output.splitlines() if "line 2" in line]
    assert len(err) == 1, r.output
    assert "'seq'" in err[0] and "input m" in err[0] and "inputs FILE.npz" in err[0]
    assert listed(r.output) == {"x": "1x3", "m": "1x3"}  # left as they were


def test_a_given_input_of_the_new_size_stays(tmp_path):
    mask = tmp_path / "m8.npy"
    np.save(mask, np.ones((1, 8), np.float32))
    r = session(tmp_path, [f"input m {mask}", "input x random 1x8", "inputs"])
    assert r.exit_code == 0, r.output
    assert listed(r.output) == {"x": "1x8", "m": "1x8"}
    assert "input m: redrawn" not in r.output and "input x: redrawn at 1x8" in r.output  # x: 1x1 as it was
