"""ONNX test data set folders (``test_data_set_N/`` of onnx's node tests and of model zoo archives:
input_0.pb, ..., output_0.pb, ... TensorProtos named after the model's inputs and outputs): ``--inputs
DIR`` feeds their inputs, ``diff --vs-npz DIR`` compares the model with their expected outputs; bad
folders get one line. And the hint a failed run gets when integer inputs were random."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import OnnxProbeError
from onnxprobe.runtime.arrays import read_arrays

runner = CliRunner()


def _model(path) -> str:
    """y = x * 2 + b; k = Gather(table, idx): a float path and an index input."""
    table = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "table")
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    m = make_model([helper.make_node("Mul", ["x", "two"], ["x2"], name="mul"), helper.make_node("Add", ["x2", "b"], ["y"], name="add"),
                    helper.make_node("Gather", ["table", "idx"], ["k"], name="gather", axis=0)],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]), helper.make_tensor_value_info("b", TensorProto.FLOAT, [3]),
                    helper.make_tensor_value_info("idx", TensorProto.INT64, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]), helper.make_tensor_value_info("k", TensorProto.FLOAT, [2, 3])],
                   [table, two])
    onnx.save(m, str(path))
    return str(path)


def _data_set(folder, inputs: dict, outputs: dict) -> str:
    folder.mkdir()
    for kind, arrays in (("input", inputs), ("output", outputs)):
        for k, (name, v) in enumerate(arrays.items()):
            (folder / f"{kind}_{k}.pb").write_bytes(numpy_helper.from_array(v, name).SerializeToString())
    return str(folder)


X = np.array([[1.0, -2.0, 3.5], [0.25, 0.0, -1.0]], np.float32)
B = np.array([0.5, 1.5, -0.5], np.float32)
IDX = np.array([3, 1], np.int64)


def _expected() -> dict:
    return {"y": X * 2 + B, "k": np.arange(12, dtype=np.float32).reshape(4, 3)[IDX]}


def test_read_arrays_reads_a_test_data_set_by_name_in_numeric_order(tmp_path):
    folder = tmp_path / "ds"
    folder.mkdir()
    for k in range(12):  # input_10 and input_11 come after input_9 (a string sort would put them after input_1)
        (folder / f"input_{k}.pb").write_bytes(numpy_helper.from_array(np.full((2,), k, np.int32), f"t{k}").SerializeToString())
    got = read_arrays(folder)
    assert list(got) == [f"t{k}" for k in range(12)]
    assert all(np.array_equal(v, np.full((2,), k, np.int32)) for k, v in enumerate(got.values()))
    with pytest.raises(OnnxProbeError, match="output_0.pb"):
        read_arrays(folder, "output")  # no output_N.pb in it


@pytest.mark.parametrize("case", ["duplicate", "truncated", "empty folder"])
def test_bad_test_data_sets_get_one_line(case, tmp_path):
    folder = tmp_path / "ds"
    folder.mkdir()
    t = numpy_helper.from_array(np.arange(6, dtype=np.float32), "x").SerializeToString()
    if case == "duplicate":
        (folder / "input_0.pb").write_bytes(t)
        (folder / "input_1.pb").write_bytes(t)
    elif case == "truncated":
        (folder / "input_0.pb").write_bytes(t[: len(t) // 2])
    want = {"duplicate": "second tensor named 'x'", "truncated": "cannot read",
            "empty folder": "not an ONNX test data set"}[case]
    with pytest.raises(OnnxProbeError, match=want):
        read_arrays(folder)
    r = runner.invoke(app, ["layers", _model(tmp_path / "m.onnx"), "--inputs", str(folder)])
    assert r.exit_code != 0 and want.split("'")[0] in r.output and "Traceback" not in r.output


def test_inputs_from_a_test_data_set_feed_the_run(tmp_path):
    m = _model(tmp_path / "m.onnx")
    ds = _data_set(tmp_path / "test_data_set_0", {"x": X, "b": B, "idx": IDX}, _expected())
    res = api.layers(m, api.Selection(all=True), api.RunConfig(device="cpu"), api.input_spec(inputs=ds), save=True)
    for name, want in _expected().items():
        np.testing.assert_array_equal(res.arrays[name], want)  # the oracle: numpy on the same inputs
    r = runner.invoke(app, ["layers", m, "--inputs", ds, "--all", "--json", "-"])
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("agree", [True, False])
def test_diff_against_the_expected_outputs_of_a_test_data_set(agree, tmp_path):
    m = _model(tmp_path / "m.onnx")
    expected = _expected()
    if not agree:
        expected["y"] = expected["y"] + np.float32(0.25)  # an expected output the model does not give
    ds = _data_set(tmp_path / "test_data_set_0", {"x": X, "b": B, "idx": IDX}, expected)
    res = api.diff(m, vs_npz=ds, inputs=api.input_spec(inputs=ds), config=api.RunConfig(device="cpu"))
    by = {r.pair.a.name: r for r in res.results}
    assert set(by) == {"y", "k"}  # the outputs the data set holds, compared
    assert by["k"].metrics.max_abs == 0
    assert by["y"].metrics.max_abs == pytest.approx(0 if agree else 0.25)
    assert res.verdict()[0] == ("pass" if agree else "fail")
    r = runner.invoke(app, ["diff", m, "--vs-npz", ds, "--inputs", ds])
    assert (r.exit_code == 0) == agree, r.output


def test_a_run_failing_on_random_integer_inputs_says_they_were_random(tmp_path):
    m = _model(tmp_path / "m.onnx")
    # indices drawn from 0:100 into a table of 4 rows: onnxruntime refuses them
    r = runner.invoke(app, ["layers", m, "--all", "--int-range", "50:100"])
    assert r.exit_code != 0 and "Traceback" not in r.output
    assert "idx: seeded random data" in r.output and "--input NAME=VALUE" in r.output


def test_diff_against_a_test_data_set_runs_a_on_its_inputs_without_inputs_given(tmp_path):
    """--vs-npz DIR alone: A ran on seeded random data and every pair failed (QA); an .npz holding the
    inputs beside the activations was used already. The folder's input_N.pb are used now, with a note."""
    m = _model(tmp_path / "m.onnx")
    ds = _data_set(tmp_path / "test_data_set_0", {"x": X, "b": B, "idx": IDX}, _expected())
    res = api.diff(m, vs_npz=ds, config=api.RunConfig(device="cpu"))
    by = {r.pair.a.name: r for r in res.results}
    assert by["y"].metrics.max_abs == 0 and by["k"].metrics.max_abs == 0 and res.verdict()[0] == "pass"
    assert any("test_data_set_0" in n and "input" in n for n in res.notes), res.notes
    r = runner.invoke(app, ["diff", m, "--vs-npz", ds])
    assert r.exit_code == 0 and "test_data_set_0" in r.output, r.output


def test_unnamed_tensors_of_a_test_data_set_bind_by_position(tmp_path):
    """ONNX's test runner binds input_N.pb / output_N.pb to the model's input / output N; older data sets
    leave the names empty, which was refused (QA). By position they feed and compare as named ones do."""
    m = _model(tmp_path / "m.onnx")
    expected = _expected()
    folder = tmp_path / "test_data_set_0"
    folder.mkdir()
    for kind, arrays in (("input", [X, B, IDX]), ("output", [expected["y"], expected["k"]])):
        for k, v in enumerate(arrays):
            (folder / f"{kind}_{k}.pb").write_bytes(numpy_helper.from_array(v).SerializeToString())  # no names
    res = api.diff(m, vs_npz=str(folder), config=api.RunConfig(device="cpu"))
    by = {r.pair.a.name: r for r in res.results}
    assert set(by) == {"y", "k"} and all(r.metrics.max_abs == 0 for r in by.values()) and res.verdict()[0] == "pass"
    r = runner.invoke(app, ["layers", m, "--inputs", str(folder), "--format", "json"])
    assert r.exit_code == 0, r.output
    (folder / "input_5.pb").write_bytes(numpy_helper.from_array(X).SerializeToString())  # the model has 3 inputs
    r = runner.invoke(app, ["layers", m, "--inputs", str(folder)])
    assert r.exit_code == 2 and "position 5" in r.output and "Traceback" not in r.output, r.output


def test_diff_refuses_a_test_data_set_input_named_after_no_model_input(tmp_path):
    """An input_N.pb named 'data' for a model whose input is 'x' was dropped by ``diff --vs-npz DIR``: A
    ran on random data and read FAIL, while ``layers --inputs DIR`` refused the folder (QA). Both refuse."""
    m = _model(tmp_path / "m.onnx")
    ds = _data_set(tmp_path / "test_data_set_0", {"data": X, "b": B, "idx": IDX}, _expected())
    with pytest.raises(OnnxProbeError, match="unknown input name 'data'"):
        api.diff(m, vs_npz=ds, config=api.RunConfig(device="cpu"))
    for args in (["layers", m, "--inputs", ds], ["diff", m, "--vs-npz", ds]):
        r = runner.invoke(app, args)
        assert r.exit_code == 2 and "unknown input name 'data'" in r.output and "x float32" in r.output, r.output
        assert "Traceback" not in r.output


@pytest.mark.parametrize("kind", ["input", "output"])
def test_two_unnamed_tensors_of_one_position_are_refused(kind, tmp_path):
    """input_0.pb and input_00.pb, both unnamed, both bound to input 0 and the last silently won (QA):
    which value a run used was a matter of file order. Refused, naming both files; output_N.pb the same."""
    m = _model(tmp_path / "m.onnx")
    expected = _expected()
    folder = tmp_path / "test_data_set_0"
    folder.mkdir()
    for k, v in enumerate([X, B, IDX]):
        (folder / f"input_{k}.pb").write_bytes(numpy_helper.from_array(v).SerializeToString())
    for k, v in enumerate([expected["y"], expected["k"]]):
        (folder / f"output_{k}.pb").write_bytes(numpy_helper.from_array(v).SerializeToString())
    other = -X if kind == "input" else -expected["y"]
    (folder / f"{kind}_00.pb").write_bytes(numpy_helper.from_array(other).SerializeToString())
    want = f"{kind} position 0 given twice ({kind}_0.pb, {kind}_00.pb)"
    with pytest.raises(OnnxProbeError) as e:
        api.diff(m, vs_npz=str(folder), config=api.RunConfig(device="cpu"))
    assert want in str(e.value)
    runs = [["diff", m, "--vs-npz", str(folder)]] + ([["layers", m, "--inputs", str(folder)]] if kind == "input" else [])
    for args in runs:
        r = runner.invoke(app, args)
        assert r.exit_code == 2 and want in r.output and "Traceback" not in r.output, r.output


@pytest.mark.parametrize("agree", [True, False])
@pytest.mark.parametrize("to", ["BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E5M2"])
def test_expected_outputs_of_a_narrow_float_type_are_compared_as_numbers(to, agree, tmp_path):
    """onnx's node tests hold bfloat16 and float8 expected outputs (test_cast_FLOAT_to_BFLOAT16): read as
    ml_dtypes' types, a void dtype to numpy, they were left out as "saved as bfloat16 values, not numbers"
    and the diff compared nothing (QA). They are numbers, widened to float32 exactly, as every bfloat16
    tensor onnxprobe reads back is. Oracle: ml_dtypes' own rounding of the input."""
    import ml_dtypes

    dtype = {"BFLOAT16": ml_dtypes.bfloat16, "FLOAT8E4M3FN": ml_dtypes.float8_e4m3fn, "FLOAT8E5M2": ml_dtypes.float8_e5m2}[to]
    m = make_model([helper.make_node("Cast", ["x"], ["y"], name="cast", to=getattr(TensorProto, to))],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                   [helper.make_tensor_value_info("y", getattr(TensorProto, to), [2, 3])], opset=21, ir=10)
    onnx.save(m, str(tmp_path / "m.onnx"))
    y = X.astype(dtype)
    if not agree:
        y = (X * 4).astype(dtype)
    ds = _data_set(tmp_path / "test_data_set_0", {"x": X}, {"y": y})
    res = api.diff(str(tmp_path / "m.onnx"), vs_npz=ds, inputs=api.input_spec(inputs=ds), config=api.RunConfig(device="cpu"))
    (r,) = [r for r in res.results if r.pair.a.name == "y"]
    want = np.abs(X.astype(dtype).astype(np.float64) - y.astype(np.float64)).max()
    assert r.metrics is not None and r.metrics.max_abs == pytest.approx(want)
    assert res.verdict()[0] == ("pass" if agree else "fail")
    out = runner.invoke(app, ["diff", str(tmp_path / "m.onnx"), "--vs-npz", ds, "--inputs", ds])
    assert out.exit_code == (0 if agree else 1) and "not numbers" not in out.output, out.output


def test_a_test_data_set_of_a_model_without_inputs_holds_outputs_only(tmp_path):
    """onnx's node test test_constant: a model without inputs, its test_data_set_0 holding output_0.pb alone.
    `--inputs DIR` refused it as "a folder without input_0.pb...: not an ONNX test data set" (QA); it is one,
    of no inputs. A model that takes inputs is still refused such a folder, naming the input (no random data
    in their place). Oracle: the Constant's own value."""
    value = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    m = make_model([helper.make_node("Constant", [], ["c"], name="const", value=numpy_helper.from_array(value)),
                    helper.make_node("Relu", ["c"], ["y"], name="relu")], [],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    onnx.save(m, str(tmp_path / "m.onnx"))
    for agree in (True, False):
        ds = _data_set(tmp_path / f"test_data_set_{int(agree)}", {}, {"y": np.maximum(value, 0) + (0 if agree else 1)})
        r = runner.invoke(app, ["diff", str(tmp_path / "m.onnx"), "--vs-npz", ds, "--inputs", ds])
        assert r.exit_code == (0 if agree else 1) and "not an ONNX test data set" not in r.output, r.output
        res = api.diff(str(tmp_path / "m.onnx"), vs_npz=ds, inputs=api.input_spec(inputs=ds), config=api.RunConfig(device="cpu"))
        (y,) = [p for p in res.results if p.pair.a.name == "y"]
        assert y.metrics.max_abs == (0 if agree else 1)
    r = runner.invoke(app, ["layers", str(tmp_path / "m.onnx"), "--all", "--inputs", ds, "--json", "-"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["layers", _model(tmp_path / "x.onnx"), "--inputs", ds])
    assert r.exit_code == 2 and "input x: not in --inputs test_data_set_0" in r.output and "Traceback" not in r.output, r.output


def test_the_readme_s_vs_npz_with_inputs_of_the_same_unnamed_data_set(tmp_path):
    """`diff M --vs-npz DS/ --inputs DS/` (the README's line) was refused with "input 'x': given both by name and by
    position" wherever DS's input_N.pb carry no name (every pytorch-converted model of onnx's backend tests): the
    saved value was added beside the positional one. Another unnamed folder given to --inputs is said to be what A
    runs on, and the comparison fails (its outputs were computed from other inputs). Oracle: numpy."""
    m = _model(tmp_path / "m.onnx")
    ds = _unnamed(_data_set(tmp_path / "ds", {"x": X, "b": B, "idx": IDX}, _expected()))
    r = runner.invoke(app, ["diff", m, "--vs-npz", ds, "--inputs", ds])
    assert r.exit_code == 0 and "2 pairs · 0 failing" in r.stdout, r.output
    other = _unnamed(_data_set(tmp_path / "other", {"x": X + 1, "b": B, "idx": IDX}, _expected()))
    r = runner.invoke(app, ["diff", m, "--vs-npz", ds, "--inputs", other])
    assert r.exit_code == 1 and "A runs on the input given for 'x'" in r.stderr, r.output
    assert "FAIL" in r.stdout


def _unnamed(folder: str) -> str:
    """The data set's tensors with their names cleared (as onnx's pytorch-converted tests ship them)."""
    from pathlib import Path

    for f in sorted(Path(folder).glob("*.pb")):
        t = onnx.load_tensor(str(f))
        t.name = ""
        f.write_bytes(t.SerializeToString())
    return folder
