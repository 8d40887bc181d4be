"""A model converted to float16 that keeps float32 inputs and outputs, its weights in Constant nodes (as
onnxruntime.transformers' float16 converter writes it with keep_io_types), against its float32 original:
it is judged by the half-precision default (it was taken for a float32 model: 403 of 425 pairs of PP-OCRv4
rec failed allclose), and its tensors are measured as it computes them alone: onnxruntime's CPU runs
float16 ops it has no kernel for in float32 and drops the Casts that meet, differently in a merged graph,
so the one-run diff read other values (a Relu 'introduced' 73.8 dB). The oracle: the model run by
onnxruntime with its tensors as outputs, compared in numpy float64."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxprobe import api

RNG = np.random.default_rng(0)
W = RNG.normal(size=(8, 4, 3, 3)).astype(np.float32)
W2 = RNG.normal(size=(4, 8, 3, 3)).astype(np.float32)
X = RNG.normal(size=(1, 4, 16, 16)).astype(np.float32)
NAMES = ["c", "r", "c2", "y"]


def _model(half: bool) -> onnx.ModelProto:
    dt = np.float16 if half else np.float32
    consts = [helper.make_node("Constant", [], [k], name=f"const_{k}", value=numpy_helper.from_array(v.astype(dt), k))
              for k, v in (("W", W), ("W2", W2))]
    first = helper.make_node("Cast", ["x"], ["xh"], to=TensorProto.FLOAT16) if half else helper.make_node("Identity", ["x"], ["xh"])
    last = helper.make_node("Cast", ["c2"], ["y"], to=TensorProto.FLOAT) if half else helper.make_node("Identity", ["c2"], ["y"])
    nodes = consts + [first, helper.make_node("Conv", ["xh", "W"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
                      helper.make_node("Conv", ["r", "W2"], ["c2"], pads=[1, 1, 1, 1]), last]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16, 16])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _values(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    known = {o.name for o in m.graph.output}
    m.graph.output.extend(helper.make_empty_tensor_value_info(n) for n in NAMES if n not in known)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, {"x": X})))


@pytest.mark.parametrize("fuse", [True, False], ids=["default", "separate-runs"])
def test_a_float16_model_with_float32_io_is_judged_and_measured_as_it_computes(tmp_path, fuse):
    onnx.save(_model(True), str(tmp_path / "half.onnx"))
    onnx.save(_model(False), str(tmp_path / "full.onnx"))
    res = api.diff(str(tmp_path / "half.onnx"), str(tmp_path / "full.onnx"), selection=api.Selection(all=True), fuse=fuse,
                   config=api.RunConfig(device="cpu", cache=False), inputs=api.InputSpec(arrays={"x": X}))
    assert res.results[0].tolerance.metric == "sqnr" and "float16" in (res.results[0].tolerance.why or "")
    a, b = _values(_model(True)), _values(_model(False))
    # the outputs' rows, which the verdict judges, as the models compute them with nothing else probed (exposing c
    # and c2 rounds them to float16 where the plain model keeps float32: compare.plain_outputs)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # as diff's default --opt-level off
    plain = lambda m: ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(["y"], {"x": X})[0]  # noqa: E731
    a["y"], b["y"] = plain(_model(True)), plain(_model(False))
    by = {r.pair.a.name: r for r in res.results}
    for n in NAMES:
        x, y = a[n].astype(np.float64), b[n].astype(np.float64)
        want = 10 * np.log10((y ** 2).sum() / ((x - y) ** 2).sum())
        assert by[n].metrics.sqnr_db == pytest.approx(want, abs=0.01), n
    # Relu and the output Cast add nothing of their own: the values they read are A's
    assert by["r"].introduced.exact and by["y"].introduced.exact


def test_values_past_float16s_range_fed_to_a_float16_node_raise_no_numpy_warning(tmp_path):
    """A float32 model against its float16 copy: A's values past 65504 become inf when B's node is fed them
    (as a Cast in the model makes them); numpy's 'overflow encountered in cast' reached stderr (QA)."""
    import warnings

    def model(half: bool) -> onnx.ModelProto:
        dt = np.float16 if half else np.float32
        nodes = [helper.make_node("Cast", ["x"], ["xh"], to=TensorProto.FLOAT16) if half else helper.make_node("Identity", ["x"], ["xh"]),
                 helper.make_node("Mul", ["xh", "big"], ["m"]), helper.make_node("Mul", ["m", "small"], ["s"]),
                 helper.make_node("Cast", ["s"], ["y"], to=TensorProto.FLOAT) if half else helper.make_node("Identity", ["s"], ["y"])]
        inits = [numpy_helper.from_array(np.array(300, dt), "big"), numpy_helper.from_array(np.array(1e-3, dt), "small")]
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        return m

    onnx.save(model(False), str(tmp_path / "a.onnx"))
    onnx.save(model(True), str(tmp_path / "b.onnx"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        res = api.diff(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), selection=api.Selection(all=True),
                       config=api.RunConfig(device="cpu", cache=False), fuse=False,
                       inputs=api.InputSpec(arrays={"x": np.array([1000.0, 2.0, -3.0, 0.5], np.float32)}))
    by = {r.pair.a.name: r for r in res.results}
    assert by["s"].introduced is not None  # measured: the warning, made an error here, did not stop it
