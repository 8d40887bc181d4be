"""Gradients of the sampling ops (GridSample, Col2Im, RoiAlign) beyond the rule table's cases
(tests/test_autodiff_rules.py checks their values against finite differences and torch): modes a rule does
not support stop `grad` with one line naming them; the exported backward graph loads in onnxruntime and,
with dynamic dimensions, gives at two sizes what the graph built for each static size gives."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxprobe import api

F = TensorProto.FLOAT


def _save(tmp_path, nodes, inputs, inits=(), opset=20, name="m.onnx"):
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info(k, F, s) for k, s in inputs.items()],
                          [helper.make_tensor_value_info("y", F, None)], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    p = tmp_path / name
    onnx.save(m, p)
    return p


def _grid_model(tmp_path, dims, name="m.onnx", **attrs):
    rng = np.random.default_rng(3)
    grid = numpy_helper.from_array(rng.uniform(-1.1, 1.1, (1, 4, 3, 2)).astype(np.float32), "warp.grid")
    return _save(tmp_path, [helper.make_node("GridSample", ["x", "warp.grid"], ["y"], name="warp", **attrs)],
                 {"x": dims}, [grid], name=name)


def _one_line_error(path, *args):
    r = subprocess.run([sys.executable, "-m", "onnxprobe", "grad", str(path), *args], capture_output=True, text=True)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 1 and len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    return lines[0]


@pytest.mark.parametrize("attrs, said", [
    (dict(mode="cubic"), "mode=cubic is not supported"),
    (dict(mode="linear", padding_mode="reflection"), "padding_mode=reflection is not supported"),
])
def test_an_unsupported_grid_sample_mode_is_refused_in_one_line(attrs, said, tmp_path):
    line = _one_line_error(_grid_model(tmp_path, [1, 2, 5, 6], **attrs))
    assert line.startswith("onnxprobe: error: cannot differentiate GridSample node 'warp'") and said in line, line


def _grads(path, feed, spec):
    gp = api.grad_plan(api.load(path), spec, feed=feed)
    sess = ort.InferenceSession(gp.backward.model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = list(gp.grads.values())
    return dict(zip(gp.grads, sess.run(names, feed)))


@pytest.mark.parametrize("attrs", [dict(mode="linear"), dict(mode="linear", padding_mode="border", align_corners=1),
                                   dict(mode="nearest")])
def test_grid_sample_backward_with_dynamic_dims_exports_and_runs(attrs, tmp_path):
    """The backward graph of a GridSample whose image has dynamic dimensions (its sizes read at run time):
    exported, it loads in onnxruntime, and at two image sizes its gradients are those of the graph built for
    that static size (which the rule table checks against torch)."""
    dyn = _grid_model(tmp_path, ["n", "c", "h", "w"], **attrs)
    out = tmp_path / "bw.onnx"
    spec = api.GradSpec(wrt=("x", "warp.grid"))
    api.export_backward(api.load(dyn), out, spec)
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    for dims in ((1, 2, 5, 6), (1, 3, 4, 9)):
        x = rng.standard_normal(dims).astype(np.float32)
        got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {"x": x})))
        want = _grads(_grid_model(tmp_path, list(dims), "static.onnx", **attrs), {"x": x}, spec)
        for t in ("x", "warp.grid"):
            np.testing.assert_allclose(got[f"{t}_grad"], want[t], rtol=1e-5, atol=1e-5, err_msg=f"{t} at {dims}")


@pytest.mark.parametrize("attrs", [dict(mode="linear"), dict(mode="linear", align_corners=1),
                                   dict(mode="linear", padding_mode="border"), dict(mode="nearest", padding_mode="border")])
def test_the_float64_grid_sample_oracle_is_the_runtime_forward(attrs):
    """The finite differences of the rule table evaluate GridSample with tests/more_oracle.py (onnx.reference
    unnormalizes in float32): it must compute what onnxruntime computes."""
    from more_oracle import GridSample
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(5)
    x, grid = rng.standard_normal((2, 3, 4, 5)), rng.uniform(-1.2, 1.2, (2, 3, 6, 2))
    d = TensorProto.DOUBLE
    g = helper.make_graph([helper.make_node("GridSample", ["x", "g"], ["y"], **attrs)], "m",
                          [helper.make_tensor_value_info("x", d, x.shape), helper.make_tensor_value_info("g", d, grid.shape)],
                          [helper.make_tensor_value_info("y", d, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    m.ir_version = 9
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x, "g": grid})[0]
    got = ReferenceEvaluator(m, new_ops=[GridSample]).run(None, {"x": x, "g": grid})[0]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_col2im_with_a_computed_image_shape_is_refused_in_one_line(tmp_path):
    """Col2Im's gradient gathers at indices fixed by image_shape and block_shape: computed ones are refused."""
    i64 = TensorProto.INT64
    g = helper.make_graph([helper.make_node("Col2Im", ["x", "size", "block"], ["y"], name="fold")], "m",
                          [helper.make_tensor_value_info("x", F, [1, 8, 9]), helper.make_tensor_value_info("size", i64, [2])],
                          [helper.make_tensor_value_info("y", F, None)], [numpy_helper.from_array(np.array([2, 2]), "block")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 9
    p = tmp_path / "fold.onnx"
    onnx.save(m, p)
    line = _one_line_error(p, "--input", "size=[4,4]", "--wrt", "x")
    assert line.startswith("onnxprobe: error: cannot differentiate Col2Im node 'fold'") and "must be constants" in line, line


def _roi_model(tmp_path, opset, name="roi.onnx", **attrs):
    rois = numpy_helper.from_array(np.array([[1.4, 2.6, 13.1, 11.7], [3.3, 1.1, 3.9, 1.6]], np.float32), "rois")
    bi = numpy_helper.from_array(np.array([1, 0], np.int64), "bi")
    return _save(tmp_path, [helper.make_node("RoiAlign", ["x", "rois", "bi"], ["y"], name="pool", output_height=2,
                                             output_width=3, spatial_scale=0.5, **attrs)],
                 {"x": [2, 2, 7, 8]}, [rois, bi], opset=opset, name=name)


def test_roi_align_max_mode_is_refused_in_one_line(tmp_path):
    line = _one_line_error(_roi_model(tmp_path, 16, mode="max"), "--wrt", "x")
    assert line.startswith("onnxprobe: error: cannot differentiate RoiAlign node 'pool'") and "mode=max" in line, line


def test_roi_align_of_opset_10_is_differentiated_as_output_half_pixel(tmp_path):
    """Opset 10's RoiAlign has no coordinate_transformation_mode and works as output_half_pixel; its gradient
    (on the copy converted to opset 17) is that of opset 16's with output_half_pixel, not half_pixel's."""
    feed = {"x": np.random.default_rng(0).standard_normal((2, 2, 7, 8)).astype(np.float32)}
    spec = api.GradSpec(wrt=("x",))
    old = _grads(_roi_model(tmp_path, 10, "old.onnx"), feed, spec)["x"]
    same = _grads(_roi_model(tmp_path, 16, "same.onnx", coordinate_transformation_mode="output_half_pixel"), feed, spec)["x"]
    half = _grads(_roi_model(tmp_path, 16, "half.onnx"), feed, spec)["x"]
    np.testing.assert_allclose(old, same, rtol=1e-6, atol=1e-6)
    assert np.abs(old - half).max() > 1e-3


def test_a_grid_point_at_infinity_or_nan_adds_nothing_to_the_image_gradient(tmp_path):
    """A grid point whose coordinate is inf or NaN reads no pixel (zeros padding): its corners weighed
    (1 - NaN) * 0 = NaN and made the gradient of pixel 0, which a finite point read, NaN. Now they weigh 0:
    the image gradient is that of the finite points alone (torch gives the same)."""
    p = _save(tmp_path, [helper.make_node("GridSample", ["x", "grid"], ["y"], mode="linear")],
              {"x": [1, 2, 3, 4], "grid": [1, 1, 4, 2]})
    x = np.random.default_rng(1).random((1, 2, 3, 4)).astype(np.float32)
    bad = np.array([[[[np.inf, 0.2], [np.nan, 0.1], [-1.0, -1.0], [0.3, -0.4]]]], np.float32)
    far = np.array([[[[9.0, 0.2], [9.0, 0.1], [-1.0, -1.0], [0.3, -0.4]]]], np.float32)  # read nothing either
    spec = api.GradSpec(wrt=("x",))
    got = _grads(p, {"x": x, "grid": bad}, spec)["x"]
    assert np.isfinite(got).all(), got
    np.testing.assert_allclose(got, _grads(p, {"x": x, "grid": far}, spec)["x"], rtol=1e-6, atol=1e-7)
