"""Two residual blocks whose same-shaped weights are swapped in A (an exporter binding the wrong parameter), every name
changed: block 0's Gemm in A was paired by its weight's bytes with block 1's in B, crosswise, though what it reads is
paired with what block 0's Gemm in B reads (block 1's input lies downstream of block 0's, so 'nowhere upstream'
allowed it), and the Reshape after it followed; the error was said to start there, comparing two functions of the
data. With the names kept the same graphs were refused. Now both: the Gemms are other functions (unmatched), what
reads them too, and the outputs pair and FAIL. The oracle: each pair's tensors computed by onnxruntime, equal where
they are one function (before the swap), and every pair of the renamed copy is the rename's pair."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from conftest import make_model
from onnxprobe import api
from test_diff import _run_with_outputs
from onnxprobe.types import DIFFERENT_FUNCTION

RS = np.random.RandomState(0)
W = [RS.randn(8, 8).astype(np.float32) * 0.3 for _ in range(2)]
X = RS.randn(2, 4, 8).astype(np.float32)


def _build(path, order, pre) -> str:
    inits = [nh.from_array(np.array([8, 8], np.int64), "s2"), nh.from_array(np.array([2, 4, 8], np.int64), "s3"),
             nh.from_array(W[0], "W0"), nh.from_array(W[1], "W1")]
    nodes, cur = [], "x"
    for blk in range(2):
        p = f"{pre}{blk}_"
        nodes += [h.make_node("Relu", [cur], [p + "relu"], name=p + "Relu"),
                  h.make_node("Reshape", [p + "relu", "s2"], [p + "flat"], name=p + "Reshape"),
                  h.make_node("Gemm", [p + "flat", f"W{order[blk]}"], [p + "gemm"], name=p + "Gemm"),
                  h.make_node("Reshape", [p + "gemm", "s3"], [p + "back"], name=p + "Reshape2"),
                  h.make_node("Add", [cur, p + "back"], [p + "res"], name=p + "Add")]
        cur = p + "res"
    nodes.append(h.make_node("Identity", [cur], ["y_" + pre], name="out"))
    onnx.save(make_model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [2, 4, 8])],
                         [h.make_tensor_value_info("y_" + pre, T.FLOAT, [2, 4, 8])], inits), path)
    return str(path)


def _values(path, names) -> dict:
    return _run_with_outputs(path, list(dict.fromkeys(names)), {"x": X})  # the oracle: plain onnxruntime


@pytest.mark.parametrize("pre", ["zz", "blk"])
def test_swapped_weights_are_never_paired_crosswise(tmp_path, pre):
    b = _build(tmp_path / "b.onnx", (0, 1), "blk")
    a = _build(tmp_path / "a.onnx", (1, 0), pre)
    res = api.diff(a, b, selection=api.Selection(all=True), inputs=api.InputSpec(arrays={"x": X}), config=api.RunConfig(device="cpu", cache=False))
    pairs = [(r.pair.a.name, r.pair.b.name) for r in res.results]
    rename = lambda n: n.replace(pre, "blk", 1) if n.startswith(pre) else n  # noqa: E731 - A's name -> B's
    assert all(rename(x) == y or (x, y) == (f"y_{pre}", "y_blk") for x, y in pairs), pairs
    va, vb = _values(a, [x for x, _ in pairs]), _values(b, [y for _, y in pairs])
    for x, y in pairs:  # before the swap the same function, equal; the output a pair of its own, which differs
        assert np.array_equal(va[x], vb[y]) == (x not in (f"y_{pre}",)), (x, y)
    gone = {u.obs.name: u.cause for u in res.matching.unmatched_a}
    assert gone[f"{pre}0_gemm"] == gone[f"{pre}1_gemm"] == DIFFERENT_FUNCTION
    assert res.verdict()[0] == "fail" and res.first_failure.pair.a.name == f"y_{pre}"


def _chain(path, first, second, n) -> str:
    g = h.make_graph([h.make_node("Relu", ["x"], [n[3]]), h.make_node("Gemm", [n[3], first], [n[0]]),
                      h.make_node("Relu", [n[0]], [n[1]]), h.make_node("Gemm", [n[1], second], [n[2]])], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [2, 8])], [h.make_tensor_value_info(n[2], T.FLOAT, [2, 8])],
                     [nh.from_array(W[0], "W0"), nh.from_array(W[1], "W1")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return str(path)


def test_outputs_left_as_other_functions_earn_no_pass(tmp_path):
    # the first Relu pairs and agrees; both Gemms read weights the other does not, the outputs among them: the
    # verdict read 'outputs pass' on the Relu alone
    b = _chain(tmp_path / "b.onnx", "W0", "W1", ["g0", "r0", "y", "rin"])
    a = _chain(tmp_path / "a.onnx", "W1", "W0", ["p", "q", "out", "s"])
    res = api.diff(a, b, selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False))
    assert [(r.pair.a.name, r.pair.b.name) for r in res.results] == [("s", "rin")]
    verdict, why = res.verdict()
    assert verdict == "error" and "'out'" in why and "'y'" in why
