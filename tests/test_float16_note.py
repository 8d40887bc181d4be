"""onnxruntime's CPU provider skips float16 rounding between ops it runs in float32 (its Cast-pair removal):
the statistics of float16 tensors are then of values float16 cannot hold, and ``layers`` says so."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model, sample_path
from onnxprobe import api


def fp16_overflow(path) -> str:
    n = [helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16, name="to16"),
         helper.make_node("Mul", ["h", "big"], ["ovf"], name="mul"),
         helper.make_node("Cast", ["ovf"], ["y"], to=TensorProto.FLOAT, name="to32")]
    m = make_model(n, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1024, 512])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1024, 512])],
                   [numpy_helper.from_array(np.array(60000, np.float16), "big")])
    onnx.save(m, path)
    return str(path)


def test_float16_tensors_past_its_range_are_named(tmp_path):
    x = np.linspace(-4, 4, 1024 * 512, dtype=np.float32).reshape(1024, 512)
    r = api.layers(fp16_overflow(tmp_path / "m.onnx"), api.Selection(all=True), api.RunConfig(device="cpu", cache=False),
                   api.InputSpec(arrays={"x": x}))
    (note,) = [n for n in r.notes if "float16 ops" in n]
    st = r.stats["ovf"]
    assert st.max > 65504 or st.inf > 0
    if st.max > 65504:  # onnxruntime skipped the rounding: the note names the tensor
        assert "ovf" in note and "65504" in note
    else:  # a runtime that rounds: float16's Inf is counted
        assert st.inf > 0


def test_no_such_note_without_float16(tmp_path):
    r = api.layers(sample_path("cnn"), api.Selection(all=True), api.RunConfig(device="cpu", cache=False))
    assert not [n for n in r.notes if "float16" in n]


def test_the_note_is_given_once_when_some_tensors_are_summarised_again(tmp_path):
    """A float16 Add that overflows to Inf is summarised again with masks (one more run over just it):
    the note counts the float16 tensors once (it came twice, "1" and then "3" tensors). Oracle: numpy's
    float16 arithmetic for the Inf count."""
    x = np.full((1, 1, 3, 3), 40000, np.float16)
    x.flat[0] = 1
    f16 = (lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT16, [1, 1, 3, 3]))
    m = make_model([helper.make_node("Add", ["x", "x"], ["a"], name="add"), helper.make_node("Relu", ["a"], ["r"], name="relu"),
                    helper.make_node("Identity", ["r"], ["y"], name="id")], [f16("x")], [f16("y")])
    onnx.save(m, tmp_path / "m.onnx")
    r = api.layers(str(tmp_path / "m.onnx"), api.Selection(all=True), api.RunConfig(device="cpu", cache=False),
                   api.InputSpec(arrays={"x": x}))
    notes = [n for n in r.notes if "float16 ops" in n]
    # a and r (the model output y is read from the float16 values the run returns: not of those the note means)
    assert len(notes) == 1 and "of 2 float16 tensor(s)" in notes[0], notes
    with np.errstate(over="ignore"):
        assert r.stats["a"].inf == int(np.isinf(x + x).sum()) == r.stats["y"].inf


def test_a_probe_that_changes_the_models_output_is_said(tmp_path):
    """x (float16) + 3000, cast to int64, squared: plain, onnxruntime's CPU provider keeps the sum in float32
    (68504 for 65504); probed, the float16 sum is a graph output, rounds to Inf, and the cast gives another
    value. The statistics are of the probed run: a note says the output changed, by name, and only then.
    Oracle: onnxruntime's plain run of the model."""
    import onnxruntime as ort

    g = helper.make_graph([helper.make_node("Add", ["x", "k"], ["xo"], name="addk"),
                           helper.make_node("Cast", ["xo"], ["xi"], name="toint", to=TensorProto.INT64),
                           helper.make_node("Mul", ["xi", "xi"], ["sq"], name="sq")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [3])],
                          [helper.make_tensor_value_info("sq", TensorProto.INT64, [3])],
                          [numpy_helper.from_array(np.array(3000, np.float16), "k")])
    p = tmp_path / "h16.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), p)
    x = np.array([65504, -1000, 2], np.float16)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    (plain,) = ort.InferenceSession(str(p), so, providers=["CPUExecutionProvider"]).run(["sq"], {"x": x})
    cfg = api.RunConfig(device="cpu", cache=False)
    r = api.layers(str(p), api.Selection(all=True), cfg, api.InputSpec(arrays={"x": x}))
    if r.stats["sq"].max != float(plain.max()):  # the probe changed what onnxruntime computes: said
        assert any("probing changed the model's output sq" in n for n in r.notes), r.notes
    one = api.layers(str(p), api.Selection(ops=("Mul",)), cfg, api.InputSpec(arrays={"x": x}))
    assert one.stats["sq"].max == float(plain.max())
    assert not any("probing changed" in n for n in one.notes)


def test_dataset_mode_keeps_the_runtimes_notes(tmp_path):
    """layers --inputs-dir dropped the runtime's notes (the float16 one here, OpenVINO's bf16 and what it
    cannot observe elsewhere): a dataset report says what a one-input report says."""
    g = helper.make_graph([helper.make_node("Add", ["x", "x"], ["a"], name="add"), helper.make_node("Relu", ["a"], ["y"], name="relu")],
                          "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [4])])
    p = tmp_path / "h.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
    (tmp_path / "ds").mkdir()
    for k in range(2):
        np.savez(tmp_path / "ds" / f"s{k}.npz", x=np.full(4, 1.5 + k, np.float16))
    res = api.layers_dataset(str(p), tmp_path / "ds", api.Selection(all=True), api.RunConfig(device="cpu", cache=False))
    assert any("float16 ops" in n for n in res.notes), res.notes


def test_no_note_for_float16_ops_with_a_float16_kernel(tmp_path):
    """The note fired on every float16 model, two Identity nodes too, whose float16 kernels round nothing
    differently: it counts only the tensors of ops onnxruntime runs in float32 (no float16 kernel) and what
    depends on them. Oracle: the values of the Identity chain are the input's, exactly."""
    f16 = (lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT16, [4]))
    m = make_model([helper.make_node("Identity", ["x"], ["a"], name="id1"), helper.make_node("Identity", ["a"], ["y"], name="id2")],
                   [f16("x")], [f16("y")])
    onnx.save(m, tmp_path / "id.onnx")
    x = np.array([1, 2, 3, 60000], np.float16)
    r = api.layers(str(tmp_path / "id.onnx"), api.Selection(all=True), api.RunConfig(device="cpu", cache=False),
                   api.InputSpec(arrays={"x": x}))
    assert not [n for n in r.notes if "float16 ops" in n], r.notes
    assert r.stats["a"].max == float(x.max()) and r.stats["y"].min == float(x.min())
    # an Add after them: its output is counted, not the first two, nor the Identity that reads it, a model output
    # read from the float16 values the run returns (check_statistics)
    m = make_model([helper.make_node("Identity", ["x"], ["a"], name="id1"), helper.make_node("Add", ["a", "a"], ["s"], name="add"),
                    helper.make_node("Identity", ["s"], ["y"], name="id2")], [f16("x")], [f16("y")])
    onnx.save(m, tmp_path / "add.onnx")
    r = api.layers(str(tmp_path / "add.onnx"), api.Selection(all=True), api.RunConfig(device="cpu", cache=False),
                   api.InputSpec(arrays={"x": x}))
    (note,) = [n for n in r.notes if "float16 ops" in n]
    assert "of 1 float16 tensor(s)" in note, note
