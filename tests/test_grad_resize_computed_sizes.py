"""Resize whose sizes are computed from a shape, as torch's legacy exporter writes
``F.interpolate(x, size=(7, 9), mode="bilinear")`` (Concat(Slice(Shape(x), 0, 2), [7, 9])): grad refused it
("Resize with runtime scales/sizes is not supported") though the sizes are known wherever the shapes are.
The gradient now takes the resized sizes from the output's shape. Oracle: y is linear in x, so
dL/dx_i = <dy, y(e_i)>, each y run by onnxruntime itself (float64 sums)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model

RNG = np.random.default_rng(11)


def _model(mode: str, ctm: str, batch="1") -> onnx.ModelProto:
    c = numpy_helper.from_array
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Slice", ["s", "zero", "two", "zero"], ["nc"]),
             helper.make_node("Concat", ["nc", "hw"], ["sizes"], axis=0),
             helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode=mode, coordinate_transformation_mode=ctm)]
    inits = [c(np.array([0], np.int64), "zero"), c(np.array([2], np.int64), "two"), c(np.array([7, 9], np.int64), "hw")]
    dims = [int(batch) if batch.isdigit() else batch, 2, 4, 5]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)


def _oracle(m: onnx.ModelProto, x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    want = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = 1
        want[i] = float(np.sum(dy.astype(np.float64) * sess.run(None, {"x": e})[0].astype(np.float64)))
    return want


@pytest.mark.parametrize("mode,ctm", [("linear", "align_corners"), ("linear", "half_pixel"), ("nearest", "asymmetric")])
def test_resize_to_computed_sizes(tmp_path, mode, ctm):
    import onnxruntime as ort

    from onnxprobe import api

    m = _model(mode, ctm)
    onnx.save(m, tmp_path / "m.onnx")
    x = RNG.standard_normal((1, 2, 4, 5)).astype(np.float32)
    dy = RNG.standard_normal((1, 2, 7, 9)).astype(np.float32)
    want = _oracle(m, x, dy)
    res = api.grad(tmp_path / "m.onnx", api.Selection(names=("x",)), spec=api.GradSpec(output_grad=dy),
                   inputs={"x": x}, save=True)
    np.testing.assert_allclose(res.arrays["x"], want, rtol=1e-5, atol=1e-5)
    api.export_backward(tmp_path / "m.onnx", tmp_path / "bw.onnx", spec=api.GradSpec(output_grad=dy),
                        selection=api.Selection(names=("x",)))
    sess = ort.InferenceSession(str(tmp_path / "bw.onnx"), providers=["CPUExecutionProvider"])
    got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {"x": x, "output_grad": dy})))
    np.testing.assert_allclose(got["x_grad"], want, rtol=1e-5, atol=1e-5)


def test_resize_to_computed_sizes_with_a_dynamic_batch(tmp_path):
    """The batch, copied from the input's shape, stays dynamic in the export; the resized sizes are known."""
    import onnxruntime as ort

    from onnxprobe import api

    onnx.save(_model("linear", "align_corners", batch="N"), tmp_path / "m.onnx")
    api.export_backward(tmp_path / "m.onnx", tmp_path / "bw.onnx", selection=api.Selection(names=("x",)))
    sess = ort.InferenceSession(str(tmp_path / "bw.onnx"), providers=["CPUExecutionProvider"])
    x = RNG.standard_normal((3, 2, 4, 5)).astype(np.float32)
    got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {"x": x})))["x_grad"]
    want = _oracle(_model("linear", "align_corners"), x[:1], np.ones((1, 2, 7, 9), np.float32))
    for i in range(3):
        np.testing.assert_allclose(got[i:i + 1], want, rtol=1e-5, atol=1e-5)


def test_resize_to_sizes_nothing_tells_is_refused_by_name(tmp_path):
    """Spatial sizes that neither the graph nor the shapes tell (a dynamic input's, exported): one line
    naming the op and the node."""
    from onnxprobe import api
    from onnxprobe.errors import ModelError

    m = _model("linear", "align_corners")
    m.graph.node[2].input[1] = "hw_in"
    m.graph.input.append(helper.make_tensor_value_info("hw_in", TensorProto.INT64, [2]))
    del m.graph.initializer[2]
    onnx.save(m, tmp_path / "m.onnx")
    with pytest.raises(ModelError, match="Resize node"):
        api.export_backward(tmp_path / "m.onnx", tmp_path / "bw.onnx", selection=api.Selection(names=("x",)))
