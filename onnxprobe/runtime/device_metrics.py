"""Pair metrics computed where the tensors are: a small ONNX model run through IOBinding on the
tensors' device, so that only scalars cross to the host. Used for tensors that live on a GPU; on the
CPU the tensors already are on the host and numpy (stats.host_sums.pair_sums) does the same work.

The model flattens a and b (float32), computes |a-b| with its maximum and argmax in float32, and the
sums (|a-b|, (a-b)^2, a^2, b^2, ab) in float64; ``sums_on_device`` turns the scalars into the same
PairSums as stats.host_sums.pair_sums. A non-finite value anywhere sends the pair to the host's masked path.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import onnx
from onnx import TensorProto, helper

from onnxprobe.stats.metrics import REL_TINY
from onnxprobe.stats.pooled import PairSums
from onnxprobe.types import element_count

OUTPUTS = ("max_abs", "argmax", "sum_abs", "dd", "aa", "bb", "ab", "b_absmax", "excess", "max_rel", "check")


@functools.lru_cache(maxsize=None)
def metrics_model_bytes() -> bytes:
    n = []
    flat = helper.make_tensor("flat", TensorProto.INT64, [1], [-1])

    def add(op, ins, out, **kw):
        n.append(helper.make_node(op, ins, [out], name=out, **kw))
        return out

    af = add("Reshape", ["a", "flat"], "af")
    bf = add("Reshape", ["b", "flat"], "bf")
    d = add("Abs", [add("Sub", [af, bf], "diff")], "d")
    add("ReduceMax", [d], "max_abs", keepdims=0)
    add("ArgMax", [d], "argmax", axis=0, keepdims=0)
    a64 = add("Cast", [af], "a64", to=TensorProto.DOUBLE)
    b64 = add("Cast", [bf], "b64", to=TensorProto.DOUBLE)
    d64 = add("Cast", [d], "d64", to=TensorProto.DOUBLE)
    add("ReduceSum", [d64], "sum_abs", keepdims=0)
    add("ReduceSumSquare", [d64], "dd", keepdims=0)
    add("ReduceSumSquare", [a64], "aa", keepdims=0)
    add("ReduceSumSquare", [b64], "bb", keepdims=0)
    add("ReduceSum", [add("Mul", [a64, b64], "ab_el")], "ab", keepdims=0)
    absb = add("Abs", [bf], "absb")
    add("ReduceMax", [absb], "b_absmax", keepdims=0)
    add("ReduceMax", [add("Sub", [d, add("Mul", [absb, "rtol"], "rtol_b")], "excess_el")], "excess", keepdims=0)
    add("ReduceMax", [add("Div", [d, add("Max", [absb, "tiny"], "absb_tiny")], "rel_el")], "max_rel", keepdims=0)
    add("Add", [add("ReduceSum", [a64], "sa", keepdims=0), add("ReduceSum", [b64], "sb", keepdims=0)], "check")
    g = helper.make_graph(
        n, "onnxprobe_pair_metrics",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, None), helper.make_tensor_value_info("b", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("rtol", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info(o, TensorProto.INT64 if o == "argmax" else (TensorProto.FLOAT if o in ("max_abs", "b_absmax", "excess", "max_rel") else TensorProto.DOUBLE), []) for o in OUTPUTS],
        initializer=[flat, helper.make_tensor("tiny", TensorProto.FLOAT, [], [REL_TINY])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


@functools.lru_cache(maxsize=4)
def _session(device: str):
    from onnxprobe.runtime.ort import create_session

    return create_session(onnx.load_from_string(metrics_model_bytes()), device=device)


def sums_on_device(a, b, shape: tuple[int, ...], device: str, rtol: float = 0.0, sample: int = 0) -> PairSums | None:
    """One sample's sums of two OrtValues (or arrays) on ``device``; None when a value is not finite
    (the caller then falls back to the host's masked path)."""
    from onnxprobe.runtime.ort import run_bound

    session = _session(device)
    out, _ = run_bound(session, {"a": a, "b": b, "rtol": np.array(rtol, np.float32)}, list(OUTPUTS))
    v = {k: float(out[k]) if k != "argmax" else int(out[k]) for k in OUTPUTS}
    if not math.isfinite(v["check"]) or not math.isfinite(v["dd"]):
        return None
    return PairSums.one(sample, shape, count=element_count(shape or ()), max_abs=v["max_abs"],
                        argmax=v["argmax"], b_absmax=v["b_absmax"], excess=v["excess"] if rtol else v["max_abs"],
                        max_rel=v["max_rel"], sum_abs=v["sum_abs"], dd=v["dd"], aa=v["aa"], bb=v["bb"], ab=v["ab"])
