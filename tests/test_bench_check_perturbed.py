"""bench/models.py check_perturbed: the benchmark's diff input is checked on inputs of the model's own
element types, and its verdict is earned on the finite values (a NaN that both models produce hides no
difference; a NaN or Inf that only the copy produces is a broken copy)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import bench_models


def _model(path, op="Relu", elem=TensorProto.FLOAT, extra_int=None):
    dtype = helper.tensor_dtype_to_np_dtype(elem)
    w = np.random.default_rng(0).standard_normal((16, 16)).astype(dtype)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node(op, ["m"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", elem, [1, 16])]
    outputs = [helper.make_tensor_value_info("y", elem, [1, 16])]
    if extra_int is not None:  # an integer input of another width, returned as it is
        inputs.append(helper.make_tensor_value_info("ids", extra_int, [1, 4]))
        nodes.append(helper.make_node("Identity", ["ids"], ["ids_out"]))
        outputs.append(helper.make_tensor_value_info("ids_out", extra_int, [1, 4]))
    g = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(w, "W")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


@pytest.mark.parametrize("elem, extra_int", [(TensorProto.FLOAT16, None), (TensorProto.DOUBLE, None),
                                              (TensorProto.FLOAT, TensorProto.INT32), (TensorProto.FLOAT, TensorProto.BOOL)])
def test_inputs_of_the_models_own_types(tmp_path, elem, extra_int):
    bm = bench_models()
    src = _model(tmp_path / "a.onnx", elem=elem, extra_int=extra_int)
    line = bm.check_perturbed(src, bm.perturbed(src, tmp_path / "b.onnx"), {})
    assert "differs" in line


def test_nan_that_both_produce_hides_no_difference(tmp_path):
    bm = bench_models()
    src = _model(tmp_path / "a.onnx", op="Log")  # log of a negative product: NaN in both, at the same places
    line = bm.check_perturbed(src, bm.perturbed(src, tmp_path / "b.onnx"), {})
    assert "differs" in line and "nan" not in line


def test_nan_only_the_copy_produces_is_a_broken_copy(tmp_path):
    bm = bench_models()
    src = _model(tmp_path / "a.onnx", op="Tanh")  # finite everywhere
    dst = tmp_path / "b.onnx"
    m = onnx.load(str(src))
    w = numpy_helper.to_array(m.graph.initializer[0]).copy()
    w[0, 0] = np.nan
    m.graph.initializer[0].CopyFrom(numpy_helper.from_array(w, "W"))
    onnx.save(m, dst)
    with pytest.raises(ValueError, match="NaN or Inf"):
        bm.check_perturbed(src, dst, {})


def test_external_data_source_keeps_its_weights_beside_the_copy(tmp_path):
    """big_mlp (its weights in an external data file, as the bench's big-weights model): the perturbed copy keeps
    them in a file of its own beside it, and its weights differ from the source's, each by about 1e-3 relative."""
    bm = bench_models()
    src = bm.big_mlp(tmp_path / "m.onnx", layers=2, width=128)
    dst = bm.perturbed(src, tmp_path / "p.onnx")
    assert (tmp_path / "p.onnx.data").exists()
    assert all(t.data_location == TensorProto.EXTERNAL for t in onnx.load(str(dst), load_external_data=False).graph.initializer)
    a, b = onnx.load(str(src)), onnx.load(str(dst))
    for ta, tb in zip(a.graph.initializer, b.graph.initializer):
        wa, wb = numpy_helper.to_array(ta).astype(np.float64), numpy_helper.to_array(tb).astype(np.float64)
        rel = np.abs(wb / wa - 1)
        assert 1e-4 < np.median(rel) < 1e-2
    assert "differs" in bm.check_perturbed(src, dst, {"x": (1, 128)})


def test_deep_mlp_is_a_chain_of_small_tensors_and_its_copy_differs(tmp_path):
    """deep_mlp (the bench's model of many small tensors): blocks x (MatMul, Add, Tanh) on [rows, width] tensors; its
    perturbed copy's weights differ, each by about 1e-3 relative, and so do its outputs."""
    bm = bench_models()
    src = bm.deep_mlp(tmp_path / "d.onnx", blocks=5, width=8, rows=3)
    m = onnx.load(str(src))
    assert [n.op_type for n in m.graph.node] == ["MatMul", "Add", "Tanh"] * 5
    dst = bm.perturbed(src, tmp_path / "p.onnx")
    for ta, tb in zip(m.graph.initializer, onnx.load(str(dst)).graph.initializer):
        wa, wb = numpy_helper.to_array(ta).astype(np.float64), numpy_helper.to_array(tb).astype(np.float64)
        assert 1e-4 < np.median(np.abs(wb / wa - 1)) < 1e-2, ta.name
    assert "differs" in bm.check_perturbed(src, dst, {"x": (3, 8)})
