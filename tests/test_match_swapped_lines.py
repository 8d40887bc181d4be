"""Tensors of one name that are other functions of the data: one exporter names tensors by position
('/Relu_output_0', 'relu'), so two lines of forward() swapped (hb = relu(b(x)) computed before ha = relu(a(x)))
put one name on the other branch's tensor. Each Relu was paired with its namesake, which reads the other branch's
Gemm (itself paired with its own namesake): two FAILs on a model whose outputs are bit-identical, and "error starts
at /Relu_output_0". A pair by name whose reads are all paired, with other tensors, is undone and paired crosswise.
Oracle: the models, built here with the branches in both orders, the same weights, equal outputs."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api

F = TensorProto.FLOAT
RNG = np.random.default_rng(0)
WA, WB = RNG.standard_normal((8, 8)).astype(np.float32), RNG.standard_normal((8, 8)).astype(np.float32)


def _heads(a_first: bool, scale_b: float = 1.0):
    a = [helper.make_node("Gemm", ["x", "wa"], ["/a/Gemm_output_0"], name="/a/Gemm")]
    b = [helper.make_node("Gemm", ["x", "wb"], ["/b/Gemm_output_0"], name="/b/Gemm")]
    # relu names follow the order of the lines, as the exporter gives them
    first, second = ("/a/Gemm_output_0", "/b/Gemm_output_0") if a_first else ("/b/Gemm_output_0", "/a/Gemm_output_0")
    relus = [helper.make_node("Relu", [first], ["/Relu_output_0"], name="/Relu"),
             helper.make_node("Relu", [second], ["/Relu_1_output_0"], name="/Relu_1")]
    ha, hb = ("/Relu_output_0", "/Relu_1_output_0") if a_first else ("/Relu_1_output_0", "/Relu_output_0")
    cat = helper.make_node("Concat", [ha, hb], ["y"], name="/Concat", axis=1)
    return make_model((a + b if a_first else b + a) + relus + [cat], [helper.make_tensor_value_info("x", F, [8, 8])],
                      [helper.make_tensor_value_info("y", F, [8, 16])],
                      [numpy_helper.from_array(WA, "wa"), numpy_helper.from_array(WB * np.float32(scale_b), "wb")])


def test_swapped_lines_pair_crosswise():
    x = RNG.standard_normal((8, 8)).astype(np.float32)
    res = api.diff(_heads(True), _heads(False), inputs={"x": x}, selection=api.Selection(all=True))
    pairs = {r.pair.a.name: (r.pair.b.name, r.metrics.max_abs) for r in res.results}
    assert pairs["/Relu_output_0"] == ("/Relu_1_output_0", 0.0) and pairs["/Relu_1_output_0"] == ("/Relu_output_0", 0.0), pairs
    assert res.verdict()[0] == "pass" and res.first_failure is None


def test_a_changed_branch_is_where_the_error_starts():
    x = RNG.standard_normal((8, 8)).astype(np.float32)
    res = api.diff(_heads(True), _heads(False, scale_b=1.01), inputs={"x": x}, selection=api.Selection(all=True))
    assert res.first_failure is not None and res.first_failure.pair.a.name == "/b/Gemm_output_0", res.first_failure
    relu_a = next(r for r in res.results if r.pair.a.name == "/Relu_output_0")  # branch a: unchanged
    assert relu_a.metrics.max_abs == 0.0
