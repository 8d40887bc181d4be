"""Input feeds: seeded random data by dtype, symbolic dimensions shared across inputs, overrides."""

from __future__ import annotations

import shlex

import numpy as np
import pytest
from onnx import TensorProto, helper

from conftest import make_model
from onnxprobe.errors import UsageError
from onnxprobe.runtime.feeds import make_feeds as _make
from onnxprobe.runtime.input_flags import parse_shape_overrides
from onnxprobe.types import InputSpec


def make_feeds(model, notes=None, **kw):
    fs = _make(model, InputSpec(**kw))
    if notes is not None:
        notes.extend(fs.notes)
    return fs.values


def two_input_model():
    return make_model(
        [helper.make_node("Cast", ["ids"], ["idsf"], to=TensorProto.FLOAT, name="c"),
         helper.make_node("Add", ["idsf", "x"], ["y"], name="a")],
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq"]),
         helper.make_tensor_value_info("mask", TensorProto.BOOL, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq"])],
    )


def test_symbolic_dims_are_shared_and_overrides_propagate():
    notes = []
    f = make_feeds(two_input_model(), shapes=parse_shape_overrides(["x=2x7"]), notes=notes)
    assert f["ids"].shape == (2, 7) and f["x"].shape == (2, 7) and f["mask"].shape == (2, 4)
    assert notes == []


def test_defaults_are_one_and_noted():
    notes = []
    f = make_feeds(two_input_model(), notes=notes)
    assert f["ids"].shape == (1, 1)
    assert len(notes) == 1 and "dimensions 'batch' and 'seq' unknown, set to 1" in notes[0], notes  # one note per input


def test_dtypes_and_ranges():
    f = make_feeds(two_input_model(), seed=5, int_range=(3, 6), shapes={"x": (64, 64)})
    assert f["ids"].dtype == np.int64 and f["ids"].min() >= 3 and f["ids"].max() <= 5
    assert f["x"].dtype == np.float32 and 0 <= f["x"].min() and f["x"].max() < 1
    assert f["mask"].dtype == np.bool_
    again = make_feeds(two_input_model(), seed=5, int_range=(3, 6), shapes={"x": (64, 64)})
    assert all(np.array_equal(f[k], again[k]) for k in f)


def test_a_uint64_range_past_int64_s_is_drawn():
    """--int-range 0:10^19 on a uint64 input was an internal error (numpy draws int64 by default: 'high is out of
    bounds for int64'); the values lie in the range asked, within uint64's."""
    m = make_model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.DOUBLE, name="c")],
                   [helper.make_tensor_value_info("x", TensorProto.UINT64, [4096])],
                   [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [4096])])
    for lo, hi in ((0, 10 ** 19), (2 ** 63 - 1000, 2 ** 64 + 5)):
        x = make_feeds(m, int_range=(lo, hi))["x"]
        assert x.dtype == np.uint64 and int(x.min()) >= lo and int(x.max()) < min(hi, 2 ** 64)
        assert int(x.max()) > 2 ** 63  # the upper part of the range is drawn too (4096 draws)


def test_int_range_says_it_draws_nothing_where_only_bools_are_drawn():
    """Booleans take no range: --int-range with only a bool input drawn was silent, as if it had been used."""
    m = make_model([helper.make_node("Not", ["b"], ["y"], name="n")], [helper.make_tensor_value_info("b", TensorProto.BOOL, [4])],
                   [helper.make_tensor_value_info("y", TensorProto.BOOL, [4])])
    notes = []
    make_feeds(m, notes=notes, int_range=(0, 2))
    assert any("--int-range 0:2 draws nothing" in n for n in notes), notes


def test_an_index_past_its_table_is_told_the_range_it_was_drawn_from():
    """Token ids drawn in [0, 100) for a table of 50: the hint named --input and --inputs, never --int-range, the one
    flag that fixes it."""
    from onnxprobe.errors import ExecutionError
    from onnxprobe.runtime.feeds import make_feeds as feeds_of

    m = two_input_model()
    told = feeds_of(m, InputSpec(shapes={"x": (2, 3)}, int_range=(5, 60))).explained(ExecutionError("idx out of bounds"))
    assert "integers drawn in [5, 60): set the range with --int-range LOW:HIGH" in told.cli_message, told.cli_message
    assert "integer or bool inputs ids, mask" in told.cli_message, told.cli_message


def test_a_named_dimension_repeated_in_one_input_has_one_size():
    """x [n, n] given 2x3 (by --shape or a file) was taken, another input's n read 2, and onnxruntime failed in MatMul;
    the same conflict across two inputs was one clear line, as it is now within one."""
    m = make_model([helper.make_node("MatMul", ["x", "v"], ["y"], name="mm")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", "n"]),
                    helper.make_tensor_value_info("v", TensorProto.FLOAT, ["n"])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])])
    for kw in ({"shapes": {"x": (2, 3)}}, {"arrays": {"x": np.ones((2, 3), np.float32)}}):
        with pytest.raises(UsageError, match="dimension 'n' is 2 and 3 in input x"):
            make_feeds(m, **kw)
    f = make_feeds(m, shapes={"x": (3, 3)})
    assert f["v"].shape == (3,)


def test_given_arrays_name_the_symbolic_dims():
    f = make_feeds(two_input_model(), arrays={"x": np.zeros((3, 5), np.float32)})
    assert f["ids"].shape == (3, 5) and f["mask"].shape == (3, 4)


@pytest.mark.parametrize("kwargs, needle", [
    ({"shapes": {"x": (2, 7, 1)}}, "expects 2"),
    ({"shapes": {"mask": (1, 5)}}, "fixed to 4"),
    ({"arrays": {"x": np.zeros((2, 2), np.float64)}}, "dtype float64"),
    ({"arrays": {"nope": np.zeros(1)}}, "unknown input name"),
    ({"int_range": (5, 5)}, "LOW must be below HIGH"),
])
def test_errors(kwargs, needle):
    with pytest.raises(UsageError, match=needle):
        make_feeds(two_input_model(), **kwargs)


def typed_inputs_model():
    """One scalar input of each kind a literal can be given for: int64, uint8, float16, bool, float32."""
    kinds = {"i64": TensorProto.INT64, "u8": TensorProto.UINT8, "f16": TensorProto.FLOAT16, "flag": TensorProto.BOOL,
             "f32": TensorProto.FLOAT}
    nodes = [helper.make_node("Identity", [n], [f"{n}_out"], name=f"id_{n}") for n in kinds]
    return make_model(nodes, [helper.make_tensor_value_info(n, t, ["k"]) for n, t in kinds.items()],
                      [helper.make_tensor_value_info(f"{n}_out", t, ["k"]) for n, t in kinds.items()])


@pytest.mark.parametrize("name, text, want", [
    ("i64", "[-2, 2.0, 9007199254740993]", np.array([-2, 2, 9007199254740993], np.int64)),  # exact beyond 2**53
    ("u8", "[0, 255]", np.array([0, 255], np.uint8)),
    ("f16", "[0.1, 65504]", np.array([0.1, 65504], np.float16)),
    ("flag", "[true, false, 1, 0]", np.array([True, False, True, False])),
    ("f32", "[1, -0.5]", np.array([1, -0.5], np.float32)),
])
def test_literals_take_the_inputs_dtype_where_that_keeps_their_value(name, text, want):
    got = make_feeds(typed_inputs_model(), files={name: text})[name]
    assert got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.parametrize("name, text, needle", [
    ("i64", "2.9", "2.9 is not an integer"),
    ("i64", "[1, -2.5]", "-2.5 is not an integer"),
    ("i64", "true", "true is not a number"),
    ("i64", "1e30", "out of range"),
    ("i64", "99999999999999999999999", "out of range"),  # beyond int64: not a 'ragged list'
    ("u8", "[300, 1]", "300 is out of range \\(0..255\\)"),
    ("u8", "-1", "-1 is out of range"),
    ("f16", "70000", "70000 rounds to inf: beyond its range \\(±65504\\)"),
    ("f16", "-65520", "-65520 rounds to -inf"),  # not 'beyond its largest value': the most negative
    ("f16", "1e-8", "1e-08 rounds to 0: below its smallest value"),  # underflow: a value typed is no zero
    ("f32", "1e-50", "rounds to 0"),
    ("flag", "2", "2 is not true, false, 0 or 1"),
    ("flag", "0.5", "not true, false, 0 or 1"),
    ("f32", "[[1, 2], [3]]", "rectangular"),
    ("f32", '["a"]', "only numbers"),
])
def test_literals_the_cast_would_change_are_refused(name, text, needle):
    with pytest.raises(UsageError, match=needle) as e:
        make_feeds(typed_inputs_model(), files={name: text})
    assert "\n" not in str(e.value)


def test_arrays_that_lack_an_input_say_so_and_a_dataset_batch_must_hold_them_all():
    notes = []
    x = np.zeros((2, 3), np.float32)
    f = make_feeds(two_input_model(), arrays={"x": x}, arrays_from="--inputs b.npz", notes=notes)
    assert f["ids"].shape == (2, 3) and np.array_equal(f["x"], x)
    assert sum("not in --inputs b.npz, so seeded random data" in n for n in notes) == 1  # ids
    assert sum("1 input no node reads not in --inputs b.npz ('mask'): fed zeros" in n for n in notes) == 1  # mask, unread
    notes.clear()
    make_feeds(two_input_model(), arrays={"x": x}, files={"ids": "[[1, 2, 3], [4, 5, 6]]"}, notes=notes)
    assert [n for n in notes if "seeded random" in n] == []  # mask: no node reads it, fed zeros
    with pytest.raises(UsageError, match="input ids: not in the dataset, which holds x; every input"):
        make_feeds(two_input_model(), arrays={"x": x}, arrays_from="the dataset", arrays_complete=True)


def test_literal_values_take_nan_and_inf_and_name_a_broken_list():
    """--input x=nan / x=inf are values (they were read as file names: "no such input file"); '[1,2' is a
    list that does not parse, said so; 1e400 is refused, not read as inf; an infinity fits any float type."""
    import math

    from onnxprobe.runtime.arrays import literal, literal_as

    assert math.isnan(literal("nan").item()) and literal("-inf").item() == -math.inf and literal("Inf").item() == math.inf
    assert literal_as(literal("inf"), np.float16).item() == np.inf
    with pytest.raises(UsageError, match="not a list of numbers"):
        literal("[1,2")
    with pytest.raises(UsageError, match="beyond float64's range"):
        literal("[1e400]")
    with pytest.raises(UsageError, match="rounds to inf"):
        literal_as(literal("1e39"), np.float32)
    # float16 rounds 65505..65519 to its largest value, as any float rounds what it cannot hold exactly
    assert literal_as(literal("65510"), np.float16).item() == 65504
    assert literal_as(literal("[0.1, -6e-8]"), np.float16).tolist() == [np.float16(0.1), np.float16(-6e-8)]
    assert literal("model.onnx") is None  # not a value: a file name
    with pytest.raises(UsageError, match="^files \\(--input\\) f32=1e400: value 1e400: beyond"):  # the setting too
        make_feeds(typed_inputs_model(), files={"f32": "1e400"})


def test_a_dimension_the_model_fixes_at_zero_is_kept():
    """x: float [0, 4] is an empty input the model asks for: it was generated as 1x4 (a 0 read as dynamic),
    which onnxruntime refused, the message blaming dynamic dimensions."""
    from onnx import TensorProto, helper

    from onnxprobe.runtime.feeds import make_feeds
    from onnxprobe.types import InputSpec

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [0, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [0, 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    assert make_feeds(m, InputSpec()).values["x"].shape == (0, 4)


def test_a_seed_or_int_range_that_draws_nothing_is_said():
    """--seed 5 with every input given changed nothing, silently (the output was byte-identical)."""
    m = two_input_model()
    given = {i.name: np.zeros([d.dim_value or 1 for d in i.type.tensor_type.shape.dim],
                              helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type)) for i in m.graph.input}
    notes: list[str] = []
    make_feeds(m, notes, seed=5, int_range=(0, 5), arrays=given)
    assert any("--seed 5 draws nothing" in n for n in notes) and any("--int-range 0:5 draws nothing" in n for n in notes)
    notes = []
    make_feeds(m, notes, seed=5)
    assert not any("draws nothing" in n for n in notes)


def test_unnamed_unknown_dimensions_are_said_by_index_in_one_note():
    """PaddlePaddle exports write '?' for every unknown dimension: the notes read "dimension 0 unknown" and
    "dimension '?' unknown", the second standing for two dimensions. One note names them by index."""
    m = make_model([helper.make_node("Relu", ["x"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["?", 3, "?", "?"])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    notes: list[str] = []
    assert make_feeds(m, notes)["x"].shape == (1, 3, 1, 1)
    assert notes == ["input x: axes 0, 2 and 3 unknown, set to 1 (use shapes (--shape) x=...)"], notes
    from onnxprobe.errors import cli_words  # the API's words; the command line prints its own

    assert cli_words(notes[0]) == "input x: axes 0, 2 and 3 unknown, set to 1 (use --shape x=...)"


def test_an_unnamed_dimension_among_named_ones_is_said_as_an_axis():
    """PP-OCRv4 rec's input is ['p2o.DynamicDimension.0', 3, '?', 'p2o.DynamicDimension.1']: the note read
    "dimensions 'p2o.DynamicDimension.0', 2 and 'p2o.DynamicDimension.1'", its '2' a bare index in a list of
    names. An unnamed dimension is said by its axis."""
    m = make_model([helper.make_node("Relu", ["x"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "?", "w"])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    notes: list[str] = []
    make_feeds(m, notes)
    assert notes == ["input x: dimensions 'n', axis 2 and 'w' unknown, set to 1 (use shapes (--shape) x=...)"], notes
    m = make_model([helper.make_node("Relu", ["x"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, "?"])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    notes = []
    make_feeds(m, notes)
    assert notes == ["input x: axis 1 unknown, set to 1 (use shapes (--shape) x=...)"], notes


def test_an_inputs_file_with_no_arrays_is_an_error_not_silent_random_data(tmp_path):
    """An .npz with no arrays would feed every input seeded random data without a word: most likely the wrong file."""
    from typer.testing import CliRunner

    from conftest import sample_path
    from onnxprobe.cli.main import app

    np.savez(tmp_path / "none.npz")
    r = CliRunner().invoke(app, ["layers", str(sample_path("mlp")), "--inputs", str(tmp_path / "none.npz")])
    assert r.exit_code == 2 and "none.npz" in r.output and "no arrays" in r.output, r.output
    (tmp_path / "s.txt").write_text(f"inputs {shlex.quote(str(tmp_path / 'none.npz'))}\n")
    r = CliRunner().invoke(app, ["debug", str(sample_path("mlp")), "--script", str(tmp_path / "s.txt")])
    assert r.exit_code == 1 and "no arrays" in r.output, r.output
    with pytest.raises(UsageError, match="no arrays"):
        from onnxprobe import api

        api.input_spec(inputs=tmp_path / "none.npz")


def test_an_npz_given_to_input_without_a_name_points_at_inputs():
    """`--input data.npz` (no NAME=): the line says what --input expects and that a .npz goes to --inputs."""
    from onnxprobe.runtime.input_flags import parse_input_files

    with pytest.raises(UsageError, match=r"expected NAME=FILE.*--inputs FILE\.npz"):
        parse_input_files(["batch.NPZ"])
    with pytest.raises(UsageError) as e:
        parse_input_files(["batch.npy"])
    assert "--inputs" not in str(e.value)


def test_a_dataset_batch_need_not_hold_an_input_no_node_reads():
    """'mask' is declared, no node reads it: a batch holding ids and x is complete; mask gets zeros, said once."""
    notes = []
    x, ids = np.ones((2, 3), np.float32), np.ones((2, 3), np.int64)
    f = make_feeds(two_input_model(), arrays={"x": x, "ids": ids}, arrays_from="the dataset", arrays_complete=True, notes=notes)
    assert f["mask"].dtype == np.bool_ and f["mask"].shape == (1, 4) and not f["mask"].any()
    assert notes == ["1 input no node reads not in the dataset ('mask'): fed zeros"]


def test_explained_keeps_the_errors_class_and_attributes():
    """Feeds.explained appends its hint to the error itself: a subclass, ``side`` and ``cli_message`` kept."""
    from onnxprobe.errors import ExecutionError
    from onnxprobe.runtime.feeds import Feeds

    class Mine(ExecutionError):
        pass

    e = Mine("B (b.onnx): onnxruntime: boom")
    e.side, e.cli_message, e.about = "B (b.onnx)", "B (b.onnx): onnxruntime: boom!", "x.npz"
    fs = Feeds({"x": np.ones((1, 2), np.float32)}, defaulted={"x": ["n"]})
    told = fs.explained(e)
    assert type(told) is Mine and told.side == "B (b.onnx)" and told.about == "x.npz"
    assert str(told) == "B (b.onnx): onnxruntime: boom" + fs.hint()
    assert told.cli_message.startswith("B (b.onnx): onnxruntime: boom! (") and "--shape" in told.cli_message
    assert str(e) == "B (b.onnx): onnxruntime: boom"  # the original, the cause of the one raised, as it was


def test_a_dimension_declared_0_is_fixed_as_any_other():
    """An input declared [0, 3] took a [1, 3] array or `--shape X=4x3` unchecked (a dimension was compared only when
    it was > 0), and onnxruntime's refusal then blamed the model, exit 1; -1, some exporters' 'dynamic', is no size."""
    from onnxprobe.runtime.feeds import check_shape, model_inputs

    m = make_model([helper.make_node("Relu", ["x"], ["y"])], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [0, 3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [0, 3])])
    with pytest.raises(UsageError, match=r"dimension 0 must be 0"):
        make_feeds(m, arrays={"x": np.ones((1, 3), np.float32)})
    spec = model_inputs(m)[0]
    with pytest.raises(UsageError, match=r"dimension 0 is fixed to 0 in the model, got 4"):
        check_shape(spec, (4, 3), ("shapes", "--shape x"))
    assert make_feeds(m)["x"].shape == (0, 3)  # its own shape, empty
    assert make_feeds(m, arrays={"x": np.ones((0, 3), np.float32)})["x"].shape == (0, 3)
