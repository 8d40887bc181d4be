"""A dynamic-quantized MatMul behind a Reshape whose target shape the float model computes at run time (Shape, Slice,
Concat: PP-OCR's cls model) and the quantized copy holds as a constant (onnxruntime's quant_pre_process folds it):
the MatMul was "no counterpart" on both sides, as B's MatMul has no static shape and reads the shape chain A lacks,
and its weight-quantization error was charged to the bias Add behind it (intro 54 dB for an Add that computes what
A's does). What each reads that holds data pairs them, a static shape on one side. The oracle: onnxruntime's values
of each model with the tensors as outputs, numpy float64; B's MatMul fed A's input for the introduced error."""

from __future__ import annotations

import logging

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from onnxprobe import api
from test_diff import _run_with_outputs


def _float_model(path) -> str:
    rng = np.random.default_rng(0)
    inits = [nh.from_array(rng.standard_normal((3, 4)).astype(np.float32), "W"),
             nh.from_array(rng.standard_normal(4).astype(np.float32), "b"),
             nh.from_array(np.array([0], np.int64), "s0"), nh.from_array(np.array([1], np.int64), "s1"),
             nh.from_array(np.array([-1], np.int64), "m1")]
    nodes = [h.make_node("GlobalAveragePool", ["x"], ["gap"]), h.make_node("Shape", ["gap"], ["shape"]),
             h.make_node("Slice", ["shape", "s0", "s1"], ["n"]), h.make_node("Concat", ["n", "m1"], ["shp"], axis=0),
             h.make_node("Reshape", ["gap", "shp"], ["flat"]), h.make_node("MatMul", ["flat", "W"], ["mm"]),
             h.make_node("Add", ["mm", "b"], ["logits"]), h.make_node("Softmax", ["logits"], ["prob"], axis=1)]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8])],
                     [h.make_tensor_value_info("prob", T.FLOAT, [1, 4])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


def test_a_dynamic_matmul_behind_a_folded_shape_chain_pairs_and_takes_its_own_error(tmp_path):
    quantization = pytest.importorskip("onnxruntime.quantization")
    from onnxruntime.quantization.shape_inference import quant_pre_process

    logging.disable(logging.WARNING)
    try:
        f = _float_model(tmp_path / "f.onnx")
        quant_pre_process(f, str(tmp_path / "pre.onnx"), skip_symbolic_shape=True)
        quantization.quantize_dynamic(str(tmp_path / "pre.onnx"), str(tmp_path / "q.onnx"),
                                      weight_type=quantization.QuantType.QInt8, op_types_to_quantize=["MatMul"])
    finally:
        logging.disable(logging.NOTSET)
    q = str(tmp_path / "q.onnx")
    assert "shp" in {i.name for i in onnx.load(q).graph.initializer}  # folded into a constant there
    x = np.random.default_rng(1).random((1, 3, 8, 8), dtype=np.float32)
    res = api.diff(q, f, selection=api.Selection(all=True), inputs=api.InputSpec(arrays={"x": x}),
                   config=api.RunConfig(device="cpu", cache=False))
    got = {r.pair.b.name: r for r in res.results if r.metrics is not None}
    mm = got.get("mm")
    assert mm is not None, [(u.obs.name, u.reason) for u in res.unmatched_in("b")]
    qa = onnx.load(q)
    a_name = mm.pair.a.name
    assert any(n.op_type == "MatMulInteger" for n in qa.graph.node)
    ta = _run_with_outputs(q, [a_name, "flat"], {"x": x})
    tb = _run_with_outputs(f, ["mm"], {"x": x})
    a64, b64 = ta[a_name].astype(np.float64), tb["mm"].astype(np.float64)
    assert abs(mm.metrics.sqnr_db - 10 * np.log10(np.sum(b64 ** 2) / np.sum((a64 - b64) ** 2))) < 1e-3
    # introduced: B's MatMul fed A's flat, against A's MatMul
    w = nh.to_array(next(i for i in onnx.load(f).graph.initializer if i.name == "W")).astype(np.float64)
    own = ta["flat"].astype(np.float64) @ w
    want = 10 * np.log10(np.sum(own ** 2) / np.sum((a64 - own) ** 2))
    assert abs(mm.introduced.sqnr_db - want) < 0.05, (mm.introduced, want)
    # the bias Add behind it computes what A's computes: it introduces nothing
    assert got["logits"].introduced is not None and got["logits"].introduced.max_abs == 0, got["logits"].introduced
    assert "logits_MatMul" not in {u.obs.name for u in res.unmatched_in("a")}
