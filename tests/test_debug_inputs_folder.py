"""The debugger reads an ONNX test data set folder as `layers --inputs` does: `debug --inputs FOLDER` and the
session's `inputs FOLDER` take its input_N.pb, and a tensor without a name binds to the model's input of its
position (ONNX's test runner's rule). `debug --inputs` refused such a folder ("unknown input name
'input_0.pb'") and `inputs FOLDER` refused every folder (".npz file expected")."""

from __future__ import annotations

import shlex

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
X = np.array([[-2, -1, 0], [1, 2, 3]], np.float32)


def data_set(tmp_path, named: bool):
    model = make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    p = tmp_path / "model.onnx"
    onnx.save(model, p)
    folder = tmp_path / "test_data_set_0"
    folder.mkdir()
    (folder / "input_0.pb").write_bytes(numpy_helper.from_array(X, "x" if named else "").SerializeToString())
    return p, folder


def debug(args: list[str], lines: list[str]):
    return runner.invoke(app, ["debug", *args, "--script", "-"], input="\n".join(lines) + "\n", env=ENV)


def test_debug_inputs_flag_takes_a_test_data_set_of_unnamed_tensors(tmp_path):
    p, folder = data_set(tmp_path, named=False)
    layers = runner.invoke(app, ["layers", str(p), "--inputs", str(folder), "--format", "csv", "--columns", "tensor,max"], env=ENV)
    assert layers.exit_code == 0 and "y,3" in layers.stdout, layers.output
    r = debug([str(p), "--inputs", str(folder)], ["stats --format csv --columns tensor,max"])
    assert r.exit_code == 0, r.output
    assert "y,3" in r.stdout  # the folder's values, not seeded random data


def test_session_inputs_command_takes_a_test_data_set_folder(tmp_path):
    for named in (True, False):
        (tmp_path / str(named)).mkdir()
        p, folder = data_set(tmp_path / str(named), named)
        r = debug([str(p)], [f"inputs {shlex.quote(str(folder))}", "stats --format csv --columns tensor,min,max"])
        assert r.exit_code == 0, r.output
        assert "y,0.0,3.0" in r.stdout, r.output


def test_inputs_say_the_file_or_folder_they_came_from(tmp_path):
    """The inputs table said 'from .npz' of a test data set folder too, and an .npz the model refuses was
    named '(from the arrays given)': each names the file or folder, as layers --inputs does."""
    p, folder = data_set(tmp_path, named=True)
    r = debug([str(p), "--inputs", str(folder)], ["inputs"])
    assert r.exit_code == 0 and "from --inputs test_data_set_0" in r.stdout and ".npz" not in r.stdout, r.output
    bad = tmp_path / "wrong_shape.npz"
    np.savez(bad, x=np.zeros((3, 3), np.float32))
    r = debug([str(p)], [f"inputs {shlex.quote(str(folder))}", "inputs", f"inputs {shlex.quote(str(bad))}"])
    assert f"from {folder}" in r.stdout and ".npz" not in r.stdout.split("wrong_shape")[0], r.output
    assert f"input x (from {bad}): shape [3, 3]" in r.output and "the arrays given" not in r.output, r.output


CONSTANT = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5


def outputs_only(tmp_path):
    """onnx's node test test_constant: a model without inputs, and its test data set, output_0.pb alone."""
    model = make_model([helper.make_node("Constant", [], ["c"], name="const", value=numpy_helper.from_array(CONSTANT)),
                        helper.make_node("Relu", ["c"], ["y"], name="relu")], [],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    p = tmp_path / "constant.onnx"
    onnx.save(model, p)
    folder = tmp_path / "test_data_set_0"
    folder.mkdir()
    (folder / "output_0.pb").write_bytes(numpy_helper.from_array(np.maximum(CONSTANT, 0), "y").SerializeToString())
    return p, folder


def test_session_inputs_command_takes_the_data_set_of_a_model_without_inputs(tmp_path):
    """`inputs FOLDER` refused it as "holds no arrays" where `--inputs FOLDER` reads it as no inputs (QA). Oracle:
    the Constant's own value, through Relu."""
    p, folder = outputs_only(tmp_path)
    want = f"y,{np.maximum(CONSTANT, 0).max()}"
    r = debug([str(p)], [f"inputs {shlex.quote(str(folder))}", "stats --format csv --columns tensor,max"])
    assert r.exit_code == 0 and "holds no arrays" not in r.output, r.output
    assert want in r.stdout, r.output
    r = debug([str(p), "--inputs", str(folder)], ["stats --format csv --columns tensor,max"])
    assert r.exit_code == 0 and want in r.stdout, r.output


def test_a_model_that_takes_inputs_is_refused_that_data_set_naming_the_input(tmp_path):
    """As `layers --inputs FOLDER` refuses it (never seeded random data in place of the inputs): on the command
    line (`debug --inputs`, which took random data without a word) and by `inputs FOLDER`, which leaves the
    session's inputs as they were."""
    p, _ = data_set(tmp_path, named=True)
    (tmp_path / "c").mkdir()
    _, folder = outputs_only(tmp_path / "c")
    layers = runner.invoke(app, ["layers", str(p), "--inputs", str(folder)], env=ENV)
    assert layers.exit_code == 2 and "input x: not in --inputs test_data_set_0" in layers.output, layers.output
    r = debug([str(p), "--inputs", str(folder)], ["stats --format csv --columns tensor,max"])
    assert r.exit_code == 2 and "input x: not in --inputs test_data_set_0" in r.output, r.output
    assert "Traceback" not in r.output and "random" not in r.stdout, r.output
    x = tmp_path / "x.npz"
    np.savez(x, x=X)
    r = debug([str(p)], [f"inputs {shlex.quote(str(x))}", f"inputs {shlex.quote(str(folder))}",
                         "stats --format csv --columns tensor,max"])
    assert r.exit_code == 1 and f"input x: not in {folder}" in r.output, r.output
    assert "y,3" in r.stdout, r.output  # the inputs of x.npz kept (Relu's max: X's)


def test_an_npz_of_no_arrays_is_refused_by_the_session_as_by_the_command_line(tmp_path):
    p, _ = data_set(tmp_path, named=True)
    empty = tmp_path / "empty.npz"
    np.savez(empty)
    layers = runner.invoke(app, ["layers", str(p), "--inputs", str(empty)], env=ENV)
    assert layers.exit_code == 2 and "holds no arrays" in layers.output, layers.output
    r = debug([str(p)], [f"inputs {shlex.quote(str(empty))}"])
    assert r.exit_code == 1 and f"inputs {empty}: holds no arrays" in r.output, r.output
