"""The table of gradient cases: at least one per registered rule (``test_every_rule_has_a_case`` fails
otherwise), with broadcasting shapes, attributes (Conv groups, strides, pads, dilations, auto_pad),
axes, and the opset forms that change how the backward nodes are written.

Each case is a small forward graph whose outputs y_k get a random cotangent dy_k; onnxprobe attaches the
backward graph (seeded with dy_k, as ``--output-grad`` does) and onnxruntime runs it, in float64 when
onnxruntime has double kernels for every op, else in float32. The gradients are then checked twice:

1. finite differences: for each input x and two random directions v (one Gaussian, one weighted by
   the gradient itself), <dL/dx, v> must match the float64 central difference
   (L(x + h v) - L(x - h v)) / 2h of L = sum_k <y_k, dy_k>, evaluated with onnx.reference on the
   float64 forward graph (with Erf, Gelu, BatchNormalization and LRN replaced by float64, inference-form
   versions: onnx.reference computes Erf in float32, mixes batch statistics into BatchNormalization
   before opset 14, and sums another channel window in LRN). Relative error below 1e-6 when the backward graph ran in float64, below 2e-3 when
   it ran in float32 (float32 rounding of the gradient itself);
2. torch.autograd on the same graph evaluated with torch ops (tests/test_autodiff_torchref.py), where
   torch has the op: rtol 1e-7 (float64) or 1e-4 (float32), relative to the largest gradient value.

Inputs are drawn away from kinks (|x| >= 0.2 for Relu/Abs, away from Clip and HardSwish bounds),
denominators and logarithms get positive inputs, so the float64 central difference with h = 1e-6 is
accurate to about 1e-9.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun
from onnx.reference.ops.op_loop import Loop as ReferenceLoop

from more_oracle import ORACLE_OPS as MORE_OPS
from recurrent_oracle import ORACLE_OPS as RECURRENT_OPS
from recurrent_oracle import run as run_recurrent

from onnxprobe import api
from onnxprobe.autodiff import registry
from onnxprobe.autodiff.rules import conv as conv_rules
from onnxprobe.autodiff.engine import annotate_outputs, attach_backward, shaped_types
from onnxprobe.graph.shapes import infer_shapes

DOUBLE, FLOAT = TensorProto.DOUBLE, TensorProto.FLOAT


# -- value generators ------------------------------------------------------------------------------------

def away(lo=0.2, hi=1.0):
    """|x| in [lo, hi], random sign: no input sits on a kink at 0."""
    return lambda rng, s: rng.choice([-1.0, 1.0], size=s) * rng.uniform(lo, hi, size=s)


def pos(lo=0.5, hi=1.5):
    return lambda rng, s: rng.uniform(lo, hi, size=s)


def normal(rng, s):
    return rng.standard_normal(s)


def avoiding(points, lo, hi, gap=0.15):
    def gen(rng, s):
        x = rng.uniform(lo, hi, size=s)
        for p in points:
            near = np.abs(x - p) < gap
            x[near] = p + np.sign(x[near] - p + 1e-12) * gap * 1.5
        return x
    return gen


def quant_grid(rng, s, step, lo, hi):
    """x = (k + u) step, k integer in [lo, hi), |u| <= 0.3: far from rounding ties, so round(x / step) = k
    (``step`` broadcasts against the shape: one scale per channel)."""
    return (rng.integers(lo, hi, size=s) + rng.uniform(-0.3, 0.3, size=s)) * step


# -- cases -----------------------------------------------------------------------------------------------

@dataclass
class Case:
    id: str
    op: str  # the rule this case exercises (coverage)
    nodes: list
    inputs: dict  # name -> shape (differentiable graph input) ; order = graph input order
    consts: dict = field(default_factory=dict)  # name -> np.ndarray (initializers; ints, bools, fixed values)
    opset: int = 17
    gen: dict = field(default_factory=dict)  # input name -> generator
    outputs: tuple = ("y",)
    wrt: tuple | None = None  # default: every input (and every float const named in wrt_consts)
    torch: bool = True
    fd_h: float = 1e-6
    force32: bool = False
    ste: bool = False  # a straight-through gradient (quantization): checked against its own oracle, not FD
    small: dict = field(default_factory=dict)  # size thresholds of autodiff.rules.conv set for this case
    ort: bool = True  # False: onnxruntime has no kernel for the forward node (LSTM layout=1): onnx.reference runs it
    ref64: bool = False  # onnxruntime runs it in float32 only: also check the backward graph in float64 (onnx.reference)
    checker: bool = True  # False: an onnxruntime op in the default domain (SimplifiedLayerNormalization) onnx.checker does not know


def node(op, ins, outs=("y",), **attrs):
    return helper.make_node(op, list(ins), list(outs), name=f"{op.lower()}_node", **attrs)


def one(op, inputs, *, consts=None, attrs=None, ins=None, outs=("y",), id=None, **kw):
    """A single-node case; ``ins`` orders the node's inputs (default: inputs then consts)."""
    consts = consts or {}
    ins = ins if ins is not None else list(inputs) + list(consts)
    return Case(id or op, op, [node(op, ins, outs, **(attrs or {}))], dict(inputs), consts, outputs=tuple(outs), **kw)


i64 = lambda *v: np.array(v, np.int64)  # noqa: E731
PER_OFFSET = {"PER_OFFSET_MIN_COLUMNS": 0}  # dense dW by one GEMM per kernel offset at any size
f64 = lambda *v: np.array(v, np.float64)  # noqa: E731

CASES: list[Case] = [
    # elementwise ------------------------------------------------------------------------------------
    one("Add", {"a": (2, 3, 4), "b": (3, 1)}, id="Add-broadcast"),
    one("Add", {"a": (2, 3), "b": (2, 3)}, id="Add-same"),
    one("Sub", {"a": (2, 3, 4), "b": (4,)}),
    one("Mul", {"a": (2, 1, 4), "b": (3, 1)}, id="Mul-both-broadcast"),
    one("Mul", {"a": (1, 4, 5, 6), "b": (4, 1, 1)}, id="Mul-per-channel-one-image"),
    one("Div", {"a": (2, 3), "b": (3,)}, gen={"b": pos()}),
    one("Mod", {"a": (2, 3), "b": (3,)}, attrs={"fmod": 1}, gen={"b": pos(0.3, 0.7)}, id="Mod-fmod"),
    one("Neg", {"x": (2, 3)}),
    one("Pow", {"a": (2, 3), "b": (3,)}, gen={"a": pos(), "b": pos(0.5, 2.0)}),
    one("Pow", {"x": (2, 3)}, consts={"p": f64(2.0)}, id="Pow-square-const"),
    one("Sqrt", {"x": (2, 3)}, gen={"x": pos()}),
    one("Reciprocal", {"x": (2, 3)}, gen={"x": pos()}),
    one("Exp", {"x": (2, 3)}),
    one("Log", {"x": (2, 3)}, gen={"x": pos()}),
    one("Abs", {"x": (2, 3)}, gen={"x": away()}),
    one("Relu", {"x": (3, 4)}, gen={"x": away()}),
    one("LeakyRelu", {"x": (3, 4)}, gen={"x": away()}, attrs=dict(alpha=0.1)),
    one("PRelu", {"x": (2, 3, 4, 4), "s": (3, 1, 1)}, gen={"x": away()}),
    one("Elu", {"x": (3, 4)}, gen={"x": away()}, attrs=dict(alpha=0.7)),
    one("Selu", {"x": (3, 4)}, gen={"x": away()}),
    one("Sigmoid", {"x": (3, 4)}),
    one("HardSigmoid", {"x": (4, 5)}, gen={"x": avoiding([-4 / 3, 2.0], -3, 4)}, attrs=dict(alpha=0.3, beta=0.4)),
    one("HardSwish", {"x": (4, 5)}, gen={"x": avoiding([-3.0, 3.0], -5, 5)}),
    one("Tanh", {"x": (3, 4)}),
    one("Erf", {"x": (3, 4)}),
    one("Gelu", {"x": (3, 4)}, opset=20, gen={"x": normal}),
    one("Gelu", {"x": (3, 4)}, opset=20, gen={"x": normal}, attrs=dict(approximate="tanh"), id="Gelu-tanh"),
    one("Softplus", {"x": (3, 4)}),
    one("Clip", {"x": (3, 4)}, consts={"lo": f64(-0.5), "hi": f64(0.6)}, gen={"x": avoiding([-0.5, 0.6], -1.5, 1.5, 0.05)}),
    one("Clip", {"x": (3, 4)}, consts={"lo": f64(0.0), "hi": f64(6.0)}, opset=11, id="Clip-relu6-opset11",
        gen={"x": avoiding([0.0, 6.0], -2, 8, 0.1)}),
    one("Clip", {"x": (3, 4)}, ins=["x", "", "hi"], consts={"hi": f64(0.3)}, id="Clip-max-only",
        gen={"x": avoiding([0.3], -1, 1, 0.05)}),
    one("Max", {"a": (2, 3), "b": (3,), "c": (2, 1)}),
    one("Min", {"a": (2, 3), "b": (2, 3)}),
    one("Sum", {"a": (2, 3), "b": (3,), "c": (1, 3)}),
    one("Mean", {"a": (2, 3), "b": (2, 1)}),
    one("Where", {"a": (2, 3), "b": (3,)}, consts={"c": np.array([[True, False, True], [False, False, True]])},
        ins=["c", "a", "b"]),
    # softmax and matrix products ------------------------------------------------------------------
    one("Softmax", {"x": (2, 3, 5)}, attrs=dict(axis=1)),
    one("Softmax", {"x": (2, 3, 4)}, attrs=dict(axis=1), opset=11, id="Softmax-opset11-coerced"),
    one("LogSoftmax", {"x": (2, 3, 5)}),
    one("MatMul", {"a": (2, 3, 4, 5), "b": (5, 6)}, id="MatMul-batched-by-2d"),
    one("MatMul", {"a": (3, 4), "b": (2, 4, 5)}, id="MatMul-2d-by-batched"),
    one("MatMul", {"a": (1, 3, 4), "b": (2, 4, 5)}, id="MatMul-batch-broadcast"),
    one("MatMul", {"a": (4,), "b": (2, 4, 5)}, id="MatMul-vector-left"),
    one("MatMul", {"a": (2, 3, 4), "b": (4,)}, id="MatMul-vector-right"),
    one("Gemm", {"a": (3, 4), "b": (5, 4), "c": (5,)}, attrs=dict(transB=1, alpha=0.5, beta=2.0)),
    one("Gemm", {"a": (4, 3), "b": (4, 5), "c": (3, 1)}, attrs=dict(transA=1), id="Gemm-transA"),
    one("Gemm", {"a": (4, 3), "b": (5, 4)}, attrs=dict(transA=1, transB=1), id="Gemm-both-no-C"),
    # convolution and pooling ------------------------------------------------------------------------
    one("Conv", {"x": (2, 3, 7, 6), "w": (4, 3, 3, 3), "b": (4,)}, attrs=dict(strides=[2, 2], pads=[1, 1, 1, 1])),
    one("Conv", {"x": (1, 4, 8, 7), "w": (6, 2, 3, 2)}, attrs=dict(group=2, dilations=[2, 1], pads=[1, 0, 0, 1]),
        id="Conv-group-dilation-asym-pads"),
    one("Conv", {"x": (2, 3, 6, 6), "w": (3, 1, 3, 3), "b": (3,)}, attrs=dict(group=3, strides=[2, 2], pads=[1, 1, 1, 1]),
        id="Conv-depthwise"),
    one("Conv", {"x": (2, 4, 6, 7), "w": (4, 1, 3, 3), "b": (4,)}, attrs=dict(group=4, dilations=[1, 2], pads=[1, 0, 1, 2]),
        id="Conv-depthwise-unit-stride"),
    one("Conv", {"x": (1, 4, 3, 5), "w": (6, 4, 1, 1), "b": (6,)}, id="Conv-1x1-one-image"),
    one("Conv", {"x": (1, 6, 5, 5), "w": (4, 3, 1, 3)}, attrs=dict(group=2, pads=[1, 1, 0, 3]), id="Conv-group-pads-beyond-window"),
    one("Conv", {"x": (1, 2, 7, 5), "w": (3, 2, 3, 3)}, attrs=dict(auto_pad="SAME_UPPER", strides=[2, 2]),
        id="Conv-same-upper"),
    one("Conv", {"x": (1, 2, 6, 5), "w": (3, 2, 2, 3)}, attrs=dict(auto_pad="SAME_LOWER"), id="Conv-same-lower"),
    one("Conv", {"x": (2, 3, 6, 7), "w": (4, 3, 3, 2), "b": (4,)}, attrs=dict(dilations=[2, 1], pads=[1, 0, 2, 1]),
        id="Conv-unit-stride-per-offset-batch", small=PER_OFFSET),
    one("Conv", {"x": (1, 3, 5, 4), "w": (5, 3, 2, 3)}, attrs=dict(pads=[0, 1, 1, 1]), id="Conv-unit-stride-per-offset-one-image",
        small=PER_OFFSET),
    one("Conv", {"x": (1, 2, 3, 3), "w": (12, 2, 2, 2)}, id="Conv-unit-stride-more-channels-than-positions", small=PER_OFFSET),
    one("Conv", {"x": (2, 3, 9), "w": (2, 3, 3), "b": (2,)}, attrs=dict(strides=[3]), id="Conv-1d"),
    one("Conv", {"x": (1, 2, 4, 4, 4), "w": (2, 2, 2, 2, 2)}, attrs=dict(strides=[2, 1, 1]), id="Conv-3d"),
    one("Conv", {"x": (1, 3, 8, 8), "w": (4, 3, 3, 3), "b": (4,)}, attrs=dict(strides=[2, 2], pads=[1, 1, 1, 1]),
        opset=11, id="Conv-opset11"),
    one("ConvTranspose", {"x": (1, 4, 4, 3), "w": (4, 3, 3, 3), "b": (6,)},
        attrs=dict(group=2, strides=[2, 2], pads=[1, 0, 0, 1], output_padding=[1, 0])),
    one("ConvTranspose", {"x": (2, 3, 5, 5), "w": (3, 2, 2, 2)}, attrs=dict(strides=[2, 2]), id="ConvTranspose-simple"),
    one("ConvTranspose", {"x": (2, 3, 4, 4), "w": (3, 1, 3, 3)}, attrs=dict(group=3, pads=[1, 1, 0, 1]),
        id="ConvTranspose-depthwise-unit-stride"),
    one("ConvTranspose", {"x": (1, 4, 3, 3), "w": (4, 2, 1, 1)}, id="ConvTranspose-1x1-one-image"),
    one("ConvTranspose", {"x": (1, 2, 3, 3), "w": (2, 3, 3, 3), "b": (3,)}, attrs=dict(strides=[2, 2], output_shape=[6, 5]),
        id="ConvTranspose-output-shape"),
    one("ConvTranspose", {"x": (1, 2, 3, 3), "w": (2, 3, 3, 3), "b": (3,)},
        attrs=dict(strides=[2, 2], output_shape=[5, 6], auto_pad="SAME_UPPER"), id="ConvTranspose-output-shape-same-upper"),
    one("ConvTranspose", {"x": (1, 2, 3, 3), "w": (2, 3, 3, 3), "b": (3,)},
        attrs=dict(strides=[2, 2], output_shape=[8, 7], auto_pad="SAME_LOWER"), id="ConvTranspose-output-shape-larger"),
    one("ConvTranspose", {"x": (1, 2, 3, 4), "w": (2, 3, 1, 2)}, attrs=dict(strides=[2, 3], auto_pad="SAME_UPPER"),
        id="ConvTranspose-same-upper-larger"),
    one("MaxPool", {"x": (2, 3, 7, 7)}, attrs=dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        id="MaxPool-indices-opset17"),
    one("MaxPool", {"x": (2, 3, 7, 7)}, attrs=dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        opset=11, id="MaxPool-mask-opset11"),
    one("MaxPool", {"x": (1, 2, 8, 8)}, attrs=dict(kernel_shape=[2, 2], strides=[2, 2]), opset=13, id="MaxPool-2x2-opset13"),
    one("MaxPool", {"x": (1, 2, 6, 6)}, attrs=dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1), opset=13,
        id="MaxPool-ceil-opset13"),
    one("AveragePool", {"x": (2, 3, 7, 7)}, attrs=dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    one("AveragePool", {"x": (1, 2, 6, 5)}, attrs=dict(kernel_shape=[3, 2], strides=[1, 2], pads=[1, 0, 1, 1],
                                                    count_include_pad=1), id="AveragePool-include-pad"),
    one("AveragePool", {"x": (1, 2, 6, 6)}, attrs=dict(kernel_shape=[2, 2], strides=[2, 2]), opset=11,
        id="AveragePool-opset11"),
    # ceil_mode windows that run past the padded end divide by the part inside the padded input
    one("AveragePool", {"x": (1, 2, 6, 6)}, attrs=dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                                                    count_include_pad=1, ceil_mode=1), id="AveragePool-ceil-include-pad"),
    one("AveragePool", {"x": (1, 2, 7, 6)}, attrs=dict(kernel_shape=[3, 2], strides=[2, 3], pads=[0, 1, 1, 0],
                                                    count_include_pad=1, ceil_mode=1), opset=19,
        id="AveragePool-ceil-include-pad-asym"),
    one("AveragePool", {"x": (1, 2, 6, 6)}, attrs=dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                                                    ceil_mode=1), id="AveragePool-ceil-exclude-pad"),
    one("GlobalAveragePool", {"x": (2, 3, 4, 5)}),
    one("GlobalMaxPool", {"x": (2, 3, 4, 5)}),
    # normalisation -------------------------------------------------------------------------------------
    one("BatchNormalization", {"x": (2, 3, 4, 4), "s": (3,), "b": (3,), "m": (3,), "v": (3,)}, opset=15,
        gen={"v": pos()}, attrs=dict(epsilon=1e-3)),
    one("BatchNormalization", {"x": (2, 3, 4)}, consts={"s": f64(1.0, 2.0, 0.5), "b": f64(0.1, 0.2, 0.3),
                                                       "m": f64(0.0, 0.5, -0.5), "v": f64(1.0, 0.5, 2.0)},
        opset=11, id="BatchNormalization-opset11-consts"),
    Case("Conv-BatchNormalization-folded", "BatchNormalization",
         [node("Conv", ["x", "w", "cb"], ["c"], pads=[1, 1, 1, 1], strides=[2, 1]),
          node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"], epsilon=1e-3)],
         {"x": (2, 3, 5, 6), "w": (4, 3, 3, 3), "cb": (4,), "s": (4,), "b": (4,), "m": (4,), "v": (4,)},
         gen={"v": pos()}, opset=15),
    Case("Conv-BatchNormalization-folded-no-bias", "BatchNormalization",
         [node("Conv", ["x", "w"], ["c"], group=2), node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"])],
         {"x": (1, 4, 4, 4), "w": (4, 2, 1, 2), "s": (4,), "b": (4,), "m": (4,), "v": (4,)},
         gen={"v": pos()}, opset=11),
    Case("Conv-BatchNormalization-weights-dominate", "BatchNormalization",
         [node("Conv", ["x", "w", "cb"], ["c"]), node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"])],
         {"x": (1, 4, 3, 3), "w": (6, 4, 3, 3), "cb": (6,), "s": (6,), "b": (6,), "m": (6,), "v": (6,)},
         gen={"v": pos()}, opset=15),
    one("LRN", {"x": (2, 5, 3, 2)}, attrs=dict(size=3, alpha=0.6, beta=0.75, bias=1.5)),
    one("LRN", {"x": (1, 6, 4, 3)}, attrs=dict(size=5, alpha=0.9, beta=0.6, bias=2.0), id="LRN-size5-channels-edge"),
    one("LayerNormalization", {"x": (2, 3, 8), "s": (8,), "b": (8,)}),
    one("LayerNormalization", {"x": (2, 3, 8), "s": (8,), "b": (8,)}, force32=True, id="LayerNormalization-f32-outputs"),
    one("LayerNormalization", {"x": (2, 4, 5), "s": (4, 5)}, attrs=dict(axis=1, epsilon=1e-3), opset=18,
        id="LayerNormalization-axis1-opset18"),
    # the optional Mean and InvStdDev outputs carry gradients too, with or without output 0's
    one("LayerNormalization", {"x": (2, 3, 8), "s": (8,), "b": (8,)}, outs=("y", "mean", "isd"), id="LayerNormalization-stats"),
    one("LayerNormalization", {"x": (2, 3, 8), "s": (8,), "b": (8,)}, outs=("y", "mean", "isd"), force32=True,
        id="LayerNormalization-stats-f32"),
    Case("LayerNormalization-stats-only", "LayerNormalization",
         [node("LayerNormalization", ["x", "s", "b"], ["o", "mean", "isd"], axis=1)], {"x": (2, 3, 4)},
         {"s": np.ones((3, 4)), "b": np.zeros((3, 4))}, outputs=("mean", "isd"), wrt=("x",)),
    Case("LayerNormalization-mean-only", "LayerNormalization",
         [node("LayerNormalization", ["x", "s", "b"], ["o", "mean", "isd"])], {"x": (2, 5)},
         {"s": np.ones(5), "b": np.zeros(5)}, outputs=("mean",), wrt=("x",), force32=True),
    one("InstanceNormalization", {"x": (2, 3, 4, 5), "s": (3,), "b": (3,)}),
    one("LpNormalization", {"x": (2, 3, 4)}, attrs=dict(axis=1, p=2), id="LpNormalization-p2-axis1"),
    one("LpNormalization", {"x": (2, 3, 4)}, attrs=dict(p=1), gen={"x": away()}, id="LpNormalization-p1-default-axis"),
    one("LpNormalization", {"x": (3, 1)}, attrs=dict(axis=-1), id="LpNormalization-axis-of-size-1", torch=False),  # 0: torch 1e-18
    one("LpNormalization", {"x": (1, 3, 1)}, attrs=dict(axis=1, p=1), gen={"x": away()}, id="LpNormalization-p1-size1-dims"),
    one("MeanVarianceNormalization", {"x": (2, 3, 4, 5)}, attrs=dict(axes=[0, 2, 3]), force32=True),
    one("MeanVarianceNormalization", {"x": (2, 3, 1, 5)}, attrs=dict(axes=[1, -1]), force32=True,
        id="MeanVarianceNormalization-negative-axis"),
    # reductions ---------------------------------------------------------------------------------------
    one("ReduceSum", {"x": (2, 3, 4)}, consts={"axes": i64(1, -1)}, attrs=dict(keepdims=0)),
    one("ReduceSum", {"x": (2, 3, 4)}, opset=11, attrs=dict(axes=[0], keepdims=0), id="ReduceSum-opset11"),
    one("ReduceSum", {"x": (2, 3, 4)}, id="ReduceSum-all"),
    one("ReduceMean", {"x": (2, 3, 4)}, attrs=dict(axes=[0, 2], keepdims=0)),
    one("ReduceMean", {"x": (2, 3, 4)}, consts={"axes": i64(-1)}, opset=18, id="ReduceMean-opset18"),
    one("ReduceMax", {"x": (2, 3, 4)}, attrs=dict(axes=[1])),
    one("ReduceMin", {"x": (2, 3, 4)}, attrs=dict(axes=[2], keepdims=0)),
    one("ReduceL2", {"x": (2, 3, 4)}, attrs=dict(axes=[1], keepdims=0)),
    one("ReduceSumSquare", {"x": (2, 3, 4)}, attrs=dict(axes=[0, 1])),
    # shape and data movement -----------------------------------------------------------------------
    one("Reshape", {"x": (2, 3, 4)}, consts={"shape": i64(4, 0, -1)}),
    one("Flatten", {"x": (2, 3, 4, 5)}, attrs=dict(axis=2)),
    one("Squeeze", {"x": (2, 1, 4, 1)}, consts={"axes": i64(1, -1)}),
    one("Squeeze", {"x": (2, 1, 4)}, attrs=dict(axes=[1]), opset=11, id="Squeeze-opset11"),
    one("Unsqueeze", {"x": (2, 4)}, consts={"axes": i64(0, -1)}),
    one("Transpose", {"x": (2, 3, 4)}, attrs=dict(perm=[2, 0, 1])),
    one("Concat", {"a": (2, 3), "b": (2, 1), "c": (2, 2)}, attrs=dict(axis=1)),
    one("Split", {"x": (2, 6)}, consts={"split": i64(2, 4)}, attrs=dict(axis=1), outs=("y0", "y1")),
    one("Split", {"x": (6, 2)}, attrs=dict(axis=0, split=[1, 2, 3]), opset=11, outs=("y0", "y1", "y2"), id="Split-opset11"),
    one("Split", {"x": (2, 7)}, attrs=dict(axis=-1, num_outputs=3), opset=18, outs=("y0", "y1", "y2"), id="Split-opset18"),
    Case("Split-one-output-used", "Split",
         [node("Split", ["x"], ["y0", "unused"], axis=0), node("Identity", ["y0"], ["y"])], {"x": (4, 3)}),
    one("Slice", {"x": (4, 5, 6)}, consts={"st": i64(1, -4), "en": i64(3, 100), "ax": i64(0, 2)}),
    one("Slice", {"x": (5, 6)}, consts={"st": i64(4, 0), "en": i64(-100, 6), "ax": i64(0, 1), "sp": i64(-2, 2)},
        id="Slice-steps"),
    one("Slice", {"x": (4, 5)}, attrs=dict(starts=[1], ends=[3], axes=[1]), opset=9, id="Slice-opset9"),
    one("Gather", {"x": (5, 3)}, consts={"i": np.array([[0, 2], [2, 4], [0, 0]], np.int64)}, id="Gather-embedding-repeats"),
    one("Gather", {"x": (2, 5, 3)}, consts={"i": np.array([-1, 1, 1], np.int64)}, attrs=dict(axis=1), id="Gather-axis1-negative"),
    one("Gather", {"x": (5, 3)}, consts={"i": np.array([[1, 1], [4, -2]], np.int64)}, opset=13, id="Gather-opset13-onehot"),
    one("Gather", {"x": (1, 4, 3)}, consts={"i": np.array(-1, np.int64)}, attrs=dict(axis=2), id="Gather-scalar-index-last-axis"),
    one("Gather", {"x": (2, 5, 3)}, consts={"i": np.array([0, 3, 3], np.int32)}, attrs=dict(axis=1), opset=13,
        id="Gather-opset13-axis1-int32"),
    one("GatherElements", {"x": (3, 4)}, consts={"i": np.array([[0, 3, 3], [1, -1, 0], [2, 2, 2]], np.int64)},
        attrs=dict(axis=1)),
    one("Expand", {"x": (3, 1)}, consts={"shape": i64(2, 1, 4)}),
    one("Tile", {"x": (2, 3)}, consts={"reps": i64(2, 3)}),
    # OneHot is linear in its values (label smoothing); -1 wraps to the last class, 5 is out of range: hot nowhere
    one("OneHot", {"v": (2,)}, consts={"i": np.array([[0, 2], [-1, 5]], np.int64), "depth": np.array(3, np.int64)}, ins=["i", "depth", "v"],
        attrs=dict(axis=1), torch=False),
    # Range(start, limit, delta)[k] = start + k delta: 7 values, far from a count that changes (0.5 + 7 x 0.25 > 2.1)
    one("Range", {"s": (), "d": ()}, consts={"lim": f64(2.1)}, ins=["s", "lim", "d"], torch=False,
        gen={"s": lambda rng, sh: np.array(0.5 + 0.01 * rng.uniform()), "d": lambda rng, sh: np.array(0.25 + 0.01 * rng.uniform())}),
    one("Pad", {"x": (2, 3, 4)}, consts={"pads": i64(0, 1, 2, 0, 2, 1), "v": f64(0.5)}),
    one("Pad", {"x": (2, 4, 5)}, consts={"pads": i64(1, 2, 2, 1), "v": f64(0.0), "axes": i64(1, 2)}, attrs=dict(mode="reflect"),
        opset=18, id="Pad-reflect-axes-opset18"),
    one("Pad", {"x": (3, 4)}, consts={"pads": i64(2, 1, 1, 3)}, attrs=dict(mode="edge"), id="Pad-edge"),
    one("Pad", {"x": (3, 4)}, consts={"pads": i64(1, -1, 0, 2)}, id="Pad-negative"),
    one("Pad", {"x": (1, 2, 3, 3)}, attrs=dict(pads=[0, 0, 1, 1, 0, 0, 1, 0]), opset=9, id="Pad-opset9"),
    one("Resize", {"x": (1, 2, 3, 4)}, consts={"roi": np.array([], np.float32), "sc": np.array([1, 1, 2, 1.5], np.float32)},
        attrs=dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"), id="Resize-nearest"),
    one("Resize", {"x": (1, 2, 3, 4)}, consts={"roi": np.array([], np.float32), "sc": np.array([1, 1, 2, 2], np.float32)},
        attrs=dict(mode="linear"), id="Resize-linear-half-pixel"),
    one("Resize", {"x": (1, 2, 4, 3)}, consts={"roi": np.array([], np.float32), "sc": np.array([], np.float32),
                                               "sz": i64(1, 2, 7, 5)},
        attrs=dict(mode="linear", coordinate_transformation_mode="align_corners"), id="Resize-linear-sizes-align"),
    one("Resize", {"x": (1, 2, 3, 4)}, consts={"roi": np.array([], np.float32), "sc": np.array([1, 1, 2, 2], np.float32)},
        attrs=dict(mode="linear"), opset=11, id="Resize-linear-opset11"),
    one("Resize", {"x": (2, 3, 4)}, consts={"roi": np.array([], np.float32), "sc": np.array([1.5, 2.0], np.float32)},
        ins=["x", "roi", "sc"], attrs=dict(mode="nearest", axes=[0, 2]), opset=19, id="Resize-axes-opset19", torch=False),
    one("Upsample", {"x": (1, 2, 3, 4)}, consts={"sc": np.array([1, 1, 2, 1.5], np.float32)}, attrs=dict(mode="nearest"),
        opset=9, id="Upsample-nearest-opset9"),
    one("Upsample", {"x": (1, 2, 3, 1)}, consts={"sc": np.array([1, 1, 2.5, 3], np.float32)}, attrs=dict(mode="linear"),
        opset=9, id="Upsample-linear-opset9-size1"),
    one("Upsample", {"x": (2, 1, 4, 3)}, consts={"sc": np.array([1, 1, 1.5, 2], np.float32)}, attrs=dict(mode="linear"),
        opset=9, id="Upsample-linear-opset9"),
    # quantization (straight-through) ---------------------------------------------------------------
    Case("QuantizeLinear-DequantizeLinear", "QuantizeLinear",
         [node("QuantizeLinear", ["x", "s", "zp"], ["q"]), node("DequantizeLinear", ["q", "s", "zp"], ["y"])],
         {"x": (4, 5)}, consts={"s": f64(0.02), "zp": np.array(-20, np.int8)}, opset=19, ste=True, force32=True,
         gen={"x": lambda rng, s: quant_grid(rng, s, 0.02, -160, 160)}),
    Case("QuantizeLinear-DequantizeLinear-per-axis-uint8", "DequantizeLinear",
         [node("QuantizeLinear", ["x", "s", "zp"], ["q"], axis=1), node("DequantizeLinear", ["q", "s", "zp"], ["dq"], axis=1),
          node("Mul", ["dq", "w"])],
         {"x": (2, 3, 4), "w": (3, 1)}, consts={"s": f64(0.05, 0.01, 0.02), "zp": np.array([128, 20, 250], np.uint8)},
         opset=19, ste=True, force32=True, gen={"x": lambda rng, s: quant_grid(rng, s, np.array([0.05, 0.01, 0.02]).reshape(1, 3, 1), -140, 140)}),
    # pass-through -------------------------------------------------------------------------------------
    one("Identity", {"x": (2, 3)}),
    one("Dropout", {"x": (2, 3)}, consts={"ratio": np.array(0.3)}),
    Case("Cast", "Cast", [helper.make_node("Cast", ["x"], ["x32"], name="to32", to=FLOAT),
                          helper.make_node("Cast", ["x32"], ["y"], name="back", to=DOUBLE)], {"x": (2, 3)},
         fd_h=1.0),
    Case("CastLike", "CastLike", [node("CastLike", ["x", "like"], ["y"])], {"x": (2, 3)}, consts={"like": f64(1.0)}),
    Case("Constant", "Constant",
         [helper.make_node("Constant", [], ["c"], name="c", value=numpy_helper.from_array(np.array([[1.0, -2.0, 0.5]], np.float64))),
          node("Mul", ["x", "c"])], {"x": (2, 3)}, wrt=("x", "c")),
    # the engine: fan-out sums, a tensor used twice by one node, a chain ---------------------------------
    Case("fanout-chain", "Mul", [node("Mul", ["x", "x"], ["sq"]), helper.make_node("Tanh", ["sq"], ["t"], name="t"),
                                 helper.make_node("Add", ["t", "x"], ["u"], name="u"),
                                 helper.make_node("MatMul", ["u", "w"], ["y"], name="mm")], {"x": (3, 4), "w": (4, 2)}),
]


# trigonometric and less common activations ------------------------------------------------------------
CASES += [
    one("Sin", {"x": (3, 4)}, gen={"x": normal}),
    one("Cos", {"x": (3, 4)}, gen={"x": normal}),
    one("Tan", {"x": (3, 4)}, gen={"x": lambda rng, s: rng.uniform(-1.2, 1.2, s)}),
    one("Asin", {"x": (3, 4)}, gen={"x": lambda rng, s: rng.uniform(-0.8, 0.8, s)}),
    one("Acos", {"x": (3, 4)}, gen={"x": lambda rng, s: rng.uniform(-0.8, 0.8, s)}),
    one("Atan", {"x": (3, 4)}, gen={"x": normal}),
    one("Sinh", {"x": (3, 4)}, gen={"x": normal}),
    one("Cosh", {"x": (3, 4)}, gen={"x": normal}),
    one("Asinh", {"x": (3, 4)}, gen={"x": normal}),
    one("Acosh", {"x": (3, 4)}, gen={"x": pos(1.2, 3.0)}),
    one("Atanh", {"x": (3, 4)}, gen={"x": lambda rng, s: rng.uniform(-0.8, 0.8, s)}),
    one("Softsign", {"x": (3, 4)}, gen={"x": away()}),
    one("Mish", {"x": (3, 4)}, gen={"x": normal}, opset=18),
    one("Swish", {"x": (3, 4)}, gen={"x": normal}, opset=24, attrs=dict(alpha=0.8)),
    one("Celu", {"x": (3, 4)}, gen={"x": away()}, attrs=dict(alpha=0.7), force32=True),
    one("ThresholdedRelu", {"x": (3, 4)}, gen={"x": avoiding([0.4], -1.5, 1.5)}, attrs=dict(alpha=0.4)),
    one("Shrink", {"x": (3, 4)}, gen={"x": avoiding([-0.3, 0.3], -1.5, 1.5)}, attrs=dict(lambd=0.3, bias=0.2)),
]


def with_zeros(rng, s):
    """Gaussian values with exact zeros along both axes: one row with two zeros (a product after its first
    zero), rows with one (at either end), and rows with none. The products are multilinear in x, so the
    central difference at a zero is exact."""
    x = rng.standard_normal(s)
    x[0, 1] = x[0, 3] = 0.0
    x[1, 0] = 0.0
    x[2, -1] = 0.0
    return x


# losses over integer labels (no gradient to the labels; the class weights get one), LpPool, Det -------------
NLL, SCE = "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"
CASES += [
    one(NLL, {"x": (3, 5)}, consts={"t": i64(1, 0, 4)}, opset=13, id="NLL-mean"),
    one(NLL, {"x": (4, 5), "w": (5,)}, consts={"t": i64(1, 2, 2, 4)}, ins=["x", "t", "w"], opset=13, gen={"w": pos()},
        attrs=dict(reduction="sum", ignore_index=2), id="NLL-sum-weight-ignore"),
    one(NLL, {"x": (2, 4, 3), "w": (4,)}, consts={"t": np.array([[0, -1, 3], [3, 3, 1]], np.int32)}, ins=["x", "t", "w"],
        opset=22, gen={"w": pos()}, attrs=dict(reduction="none", ignore_index=-1), id="NLL-none-weight-3d-int32"),
    one(NLL, {"x": (2, 3, 2, 2), "w": (3,)}, consts={"t": np.array([[[0, 2], [1, 1]], [[2, 0], [2, 1]]], np.int64)},
        ins=["x", "t", "w"], opset=13, gen={"w": pos()}, attrs=dict(ignore_index=0), id="NLL-mean-weight-ignore-4d"),
    one(SCE, {"x": (3, 5)}, consts={"t": i64(1, 0, 4)}, opset=13, gen={"x": normal}, id="SCE-mean"),
    one(SCE, {"x": (2, 4, 3), "w": (4,)}, consts={"t": np.array([[0, 2, 3], [3, 3, 1]], np.int64)}, ins=["x", "t", "w"],
        outs=("y", "lp"), opset=13, gen={"x": normal, "w": pos()}, attrs=dict(reduction="none"),
        id="SCE-none-weight-log-prob"),
    one(SCE, {"x": (4, 5)}, consts={"t": i64(1, 3, 1, 0)}, opset=13, gen={"x": normal},
        attrs=dict(reduction="sum", ignore_index=1), id="SCE-sum-ignore"),
    one(SCE, {"x": (2, 3, 2, 2), "w": (3,)}, consts={"t": np.array([[[0, 2], [-100, 1]], [[2, 0], [2, -100]]], np.int64)},
        ins=["x", "t", "w"], outs=("y", "lp"), opset=13, gen={"x": normal, "w": pos()}, attrs=dict(ignore_index=-100),
        id="SCE-mean-weight-ignore-4d-log-prob"),
    Case("SCE-log-prob-only", SCE, [node(SCE, ["x", "t"], ["y", "lp"])], {"x": (3, 4)}, {"t": i64(2, 0, 3)}, opset=13,
         gen={"x": normal}, outputs=("lp",)),
    one("LpPool", {"x": (1, 2, 7, 7)}, attrs=dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), opset=18,
        gen={"x": away()}, id="LpPool-p2-pads-strides"),
    one("LpPool", {"x": (2, 2, 5, 6)}, attrs=dict(kernel_shape=[2, 3], strides=[1, 2], pads=[0, 1, 1, 0], p=1),
        opset=18, gen={"x": away()}, id="LpPool-p1-asym-pads"),
    one("LpPool", {"x": (1, 2, 6, 7)}, attrs=dict(kernel_shape=[2, 2], strides=[2, 2], dilations=[1, 2], p=3,
                                               ceil_mode=1), opset=18, gen={"x": away()}, id="LpPool-p3-ceil-dilated"),
    one("LpPool", {"x": (1, 3, 9)}, attrs=dict(kernel_shape=[3], strides=[2], auto_pad="SAME_UPPER"), opset=11,
        gen={"x": away()}, id="LpPool-1d-same-upper-opset11"),
    one("Det", {"x": (3, 3)}, gen={"x": normal}),
    one("Det", {"x": (2, 4, 4)}, gen={"x": normal}, id="Det-batched-4x4"),
    one("Det", {"x": (2, 1, 1)}, gen={"x": normal}, id="Det-1x1"),
    one("CumProd", {"x": (3, 5)}, consts={"axis": np.array(1, np.int64)}, opset=26, gen={"x": normal}),
    one("CumProd", {"x": (4, 5)}, consts={"axis": np.array(1, np.int64)}, opset=26, gen={"x": with_zeros},
        id="CumProd-zeros"),
    one("CumProd", {"x": (4, 5)}, consts={"axis": np.array(-1, np.int32)}, opset=26, gen={"x": with_zeros},
        attrs=dict(exclusive=1, reverse=1), id="CumProd-zeros-exclusive-reverse"),
    one("CumProd", {"x": (5, 4)}, consts={"axis": np.array(0, np.int64)}, opset=26, gen={"x": with_zeros},
        attrs=dict(exclusive=1), id="CumProd-zeros-exclusive-axis0"),
    one("CumProd", {"x": (5, 4)}, consts={"axis": np.array(0, np.int64)}, opset=26, gen={"x": with_zeros},
        attrs=dict(reverse=1), id="CumProd-zeros-reverse-axis0"),
]


# tensor algebra, scans, indexed reads and writes ---------------------------------------------------------
def with_zero(rng, s):
    x = away(0.3, 1.0)(rng, s)
    x.reshape(-1)[1] = 0.0  # one zero in the first reduced group: ReduceProd's gradient there is the others' product
    return x


MS = "com.microsoft"


def ms(op, ins, outs=("y",), **attrs):
    return helper.make_node(op, list(ins), list(outs), name=f"{op.lower()}_node", domain=MS, **attrs)


CASES += [
    one("Einsum", {"a": (3, 4), "b": (4, 5)}, attrs=dict(equation="ij,jk->ik"), id="Einsum-matmul"),
    one("Einsum", {"q": (2, 2, 3, 4), "k": (2, 2, 5, 4)}, attrs=dict(equation="bhqd,bhkd->bhqk"), id="Einsum-attention-scores"),
    one("Einsum", {"a": (4,), "b": (4,)}, attrs=dict(equation="i,i->"), id="Einsum-dot"),
    one("Einsum", {"a": (3, 4)}, attrs=dict(equation="ij->ji"), id="Einsum-transpose"),
    one("Einsum", {"a": (3, 4)}, attrs=dict(equation="ij->"), id="Einsum-sum"),
    one("Einsum", {"a": (2, 3, 4), "b": (1, 4, 5)}, attrs=dict(equation="...ij,...jk->...ik"), id="Einsum-ellipsis-broadcast"),
    one("Einsum", {"a": (3, 4), "b": (5,)}, attrs=dict(equation="ij,k->i"), id="Einsum-index-of-one-operand-only"),
    one("Einsum", {"a": (3, 4), "b": (4, 2)}, attrs=dict(equation="ij,jk"), id="Einsum-implicit-output"),
    one("CumSum", {"x": (3, 4)}, consts={"axis": np.array(1, np.int64)}),
    one("CumSum", {"x": (3, 4)}, consts={"axis": np.array(-2, np.int64)}, attrs=dict(exclusive=1, reverse=1),
        id="CumSum-exclusive-reverse"),
    one("Trilu", {"x": (4, 5)}, consts={"k": np.array(1, np.int64)}, opset=14),
    one("Trilu", {"x": (2, 4, 4)}, consts={"k": np.array(-1, np.int64)}, attrs=dict(upper=0), opset=14, id="Trilu-lower"),
    one("DepthToSpace", {"x": (1, 8, 2, 3)}, attrs=dict(blocksize=2), id="DepthToSpace-DCR"),
    one("DepthToSpace", {"x": (2, 8, 2, 3)}, attrs=dict(blocksize=2, mode="CRD"), id="DepthToSpace-CRD"),
    one("SpaceToDepth", {"x": (2, 2, 4, 6)}, attrs=dict(blocksize=2)),
    one("ReduceProd", {"x": (2, 3, 4)}, attrs=dict(axes=[1], keepdims=0), gen={"x": with_zero}),
    one("ReduceProd", {"x": (2, 3)}, gen={"x": away(0.5, 1.2)}, id="ReduceProd-all"),
    one("ReduceLogSumExp", {"x": (2, 3, 4)}, attrs=dict(axes=[2])),
    one("ReduceLogSum", {"x": (2, 3, 4)}, attrs=dict(axes=[0, 2], keepdims=0), gen={"x": pos()}),
    one("ReduceL1", {"x": (2, 3, 4)}, attrs=dict(axes=[1]), gen={"x": away()}),
    one("ReduceL1", {"x": (2, 3, 4)}, consts={"axes": i64(-1)}, opset=18, gen={"x": away()}, id="ReduceL1-opset18"),
    # empty axes with noop_with_empty_axes=1 reduce over no axis: the element function stays (|x|, x^2, log x)
    *[one(op, {"x": (2, 3)}, attrs=dict(noop_with_empty_axes=1), opset=18, gen={"x": gen}, id=f"{op}-noop-empty-axes")
      for op, gen in (("ReduceL1", away()), ("ReduceL2", away()), ("ReduceSumSquare", away()), ("ReduceLogSum", pos()),
                      ("ReduceLogSumExp", away()), ("ReduceMax", away()), ("ReduceProd", away()), ("ReduceMean", away()))],
    # runtime axes (not constants) that come out empty: every axis (noop 0) or none (noop 1), as the node says
    *[Case(f"{op}-runtime-empty-axes-noop{noop}-keep{keep}", op, [node("Identity", ["ac"], ["ar"]),
                                                             node(op, ["x", "ar"], noop_with_empty_axes=noop, keepdims=keep)],
           {"x": (2, 3)}, {"ac": i64()}, opset=18, gen={"x": away(0.5, 1.2)})
      for op in ("ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2") for noop, keep in ((0, 0), (1, 0), (0, 1))],
    Case("TopK", "TopK", [node("TopK", ["x", "k"], ["y", "i"], axis=1)], {"x": (3, 6)}, {"k": i64(2)}),
    Case("TopK-smallest-values-only", "TopK", [node("TopK", ["x", "k"], ["y", "idx"], axis=0, largest=0)], {"x": (5, 3)},
         {"k": i64(3)}),
    one("GatherND", {"x": (3, 4, 2)}, consts={"i": np.array([[0, 1], [2, -1], [0, 1]], np.int64)}),
    one("ScatterND", {"data": (4, 3), "upd": (2, 3)}, consts={"i": np.array([[1], [3]], np.int64)}, ins=["data", "i", "upd"]),
    one("ScatterND", {"data": (4, 3), "upd": (3, 3)}, consts={"i": np.array([[1], [3], [1]], np.int64)},
        ins=["data", "i", "upd"], attrs=dict(reduction="add"), opset=16, id="ScatterND-add-repeats"),
    # repeated indices without reduction: the last write is kept (onnxruntime and onnx.reference write in
    # order), the overwritten updates get 0; torch leaves the order of repeated writes undefined: not its oracle
    one("ScatterND", {"data": (4, 3), "upd": (3, 3)}, consts={"i": np.array([[1], [3], [1]], np.int64)},
        ins=["data", "i", "upd"], id="ScatterND-repeats", torch=False),
    one("ScatterElements", {"data": (3, 4), "upd": (2, 4)}, consts={"i": np.array([[0, 2, 1, 2], [0, 2, 2, 0]], np.int64)},
        ins=["data", "i", "upd"], id="ScatterElements-repeats", torch=False),
    one("ScatterElements", {"data": (3, 4), "upd": (2, 4)}, consts={"i": np.array([[0, 2, 1, 2], [1, 0, 2, 0]], np.int64)},
        ins=["data", "i", "upd"]),
    one("ScatterElements", {"data": (3, 4), "upd": (3, 2)}, consts={"i": np.array([[0, 0], [3, 3], [1, 2]], np.int64)},
        ins=["data", "i", "upd"], attrs=dict(axis=1, reduction="add"), opset=16, id="ScatterElements-add-repeats"),
    one("ReverseSequence", {"x": (4, 2, 3)}, consts={"lens": i64(4, 2)}),
    # normalisation (opset 21 and 23 forms) and attention ---------------------------------------------------
    one("GroupNormalization", {"x": (2, 4, 3, 2), "s": (4,), "b": (4,)}, attrs=dict(num_groups=2, epsilon=1e-3), opset=21),
    one("RMSNormalization", {"x": (2, 3, 8), "s": (8,)}, opset=23),
    one("RMSNormalization", {"x": (2, 4, 5), "s": (4, 5)}, attrs=dict(axis=1, epsilon=1e-3), opset=23, id="RMSNormalization-axis1"),
    one("Attention", {"q": (1, 2, 3, 4), "k": (1, 2, 5, 4), "v": (1, 2, 5, 3)}, opset=23),
    one("Attention", {"q": (1, 2, 3, 4), "k": (1, 2, 5, 4), "v": (1, 2, 5, 4), "m": (3, 5)}, opset=23,
        id="Attention-float-mask-scale", attrs=dict(scale=0.3)),
    one("Attention", {"q": (2, 4, 4, 4), "k": (2, 2, 4, 4), "v": (2, 2, 4, 4)}, opset=23, attrs=dict(is_causal=1),
        id="Attention-causal-grouped-kv"),
    one("Attention", {"q": (2, 3, 8), "k": (2, 5, 4), "v": (2, 5, 4)}, opset=23, attrs=dict(q_num_heads=2, kv_num_heads=1),
        id="Attention-3d-heads"),
    # the com.microsoft ops of onnxruntime's transformer optimizer ------------------------------------------
    Case("FusedMatMul", "com.microsoft:FusedMatMul", [ms("FusedMatMul", ["a", "b"], alpha=0.5, transB=1)],
         {"a": (2, 3, 4), "b": (5, 4)}, force32=True),
    Case("FusedMatMul-transA-batched", "com.microsoft:FusedMatMul", [ms("FusedMatMul", ["a", "b"], transA=1)],
         {"a": (2, 4, 3), "b": (2, 4, 5)}, force32=True),
    Case("SkipLayerNormalization", "com.microsoft:SkipLayerNormalization",
         [ms("SkipLayerNormalization", ["x", "skip", "gamma", "beta", "bias"], ["y", "", "", "sum"], epsilon=1e-5)],
         {"x": (2, 3, 8), "skip": (2, 3, 8), "gamma": (8,), "beta": (8,), "bias": (8,)}, outputs=("y", "sum"), force32=True),
    Case("SkipLayerNormalization-stats", "com.microsoft:SkipLayerNormalization",
         [ms("SkipLayerNormalization", ["x", "skip", "gamma", "beta"], ["y", "mean", "isd"], epsilon=1e-5)],
         {"x": (2, 3, 8), "skip": (2, 3, 8), "gamma": (8,), "beta": (8,)}, outputs=("y", "mean", "isd"), force32=True),
    Case("BiasGelu", "com.microsoft:BiasGelu", [ms("BiasGelu", ["x", "b"])], {"x": (2, 3, 4), "b": (4,)},
         gen={"x": normal}, force32=True),
    Case("FastGelu", "com.microsoft:FastGelu", [ms("FastGelu", ["x", "b"])], {"x": (2, 3, 4), "b": (4,)},
         gen={"x": normal}, force32=True),
    Case("QuickGelu", "com.microsoft:QuickGelu", [ms("QuickGelu", ["x"], alpha=1.5)], {"x": (3, 4)}, gen={"x": normal},
         force32=True),
    Case("Gelu-com.microsoft", "com.microsoft:Gelu", [ms("Gelu", ["x"])], {"x": (3, 4)}, gen={"x": normal}, force32=True),
    Case("SkipSimplifiedLayerNormalization", "com.microsoft:SkipSimplifiedLayerNormalization",
         [ms("SkipSimplifiedLayerNormalization", ["x", "skip", "gamma", "bias"], ["y", "", "isd", "sum"], epsilon=1e-5)],
         {"x": (2, 3, 8), "skip": (2, 3, 8), "gamma": (8,), "bias": (8,)}, outputs=("y", "isd", "sum"), force32=True),
    Case("SkipSimplifiedLayerNormalization-no-bias", "com.microsoft:SkipSimplifiedLayerNormalization",
         [ms("SkipSimplifiedLayerNormalization", ["x", "skip", "gamma"])], {"x": (2, 3, 8), "skip": (2, 3, 8), "gamma": (8,)},
         force32=True),
    Case("FusedConv-Sigmoid-Z", "com.microsoft:FusedConv",
         [ms("FusedConv", ["x", "w", "b", "z"], activation="Sigmoid", pads=[1, 1, 1, 1], strides=[2, 1])],
         {"x": (1, 2, 5, 4), "w": (3, 2, 3, 3), "b": (3,), "z": (1, 3, 3, 4)}, gen={"x": normal}, force32=True),
    Case("FusedConv-LeakyRelu-group", "com.microsoft:FusedConv",
         [ms("FusedConv", ["x", "w"], activation="LeakyRelu", activation_params=[0.2], group=2)],
         {"x": (2, 4, 4, 4), "w": (4, 2, 2, 2)}, gen={"x": normal}, force32=True),
    Case("FusedConv-Tanh", "com.microsoft:FusedConv", [ms("FusedConv", ["x", "w", "b"], activation="Tanh")],
         {"x": (1, 2, 4, 4), "w": (2, 2, 3, 3), "b": (2,)}, gen={"x": normal}, force32=True),
    Case("FusedConv-Clip", "com.microsoft:FusedConv",
         [ms("FusedConv", ["x", "w"], activation="Clip", activation_params=[-0.3, 0.4])],
         {"x": (1, 1, 4, 4), "w": (2, 1, 1, 1)}, consts={"w": f64(0.5, 1.5).reshape(2, 1, 1, 1)},
         gen={"x": avoiding([-0.6, 0.8, -0.2, 0.267], -1.0, 1.0, gap=0.03)}, wrt=("x",), force32=True),
    Case("FusedGemm-Tanh", "com.microsoft:FusedGemm",
         [ms("FusedGemm", ["a", "b", "c"], activation="Tanh", alpha=0.5, transB=1)],
         {"a": (3, 4), "b": (5, 4), "c": (5,)}, force32=True),
    Case("FusedGemm-LeakyRelu", "com.microsoft:FusedGemm",
         [ms("FusedGemm", ["a", "b", "c"], activation="LeakyRelu", activation_alpha=0.1, beta=0.5)],
         {"a": (3, 4), "b": (4, 5), "c": (3, 5)}, force32=True),
    Case("FusedGemm-HardSigmoid", "com.microsoft:FusedGemm",
         [ms("FusedGemm", ["a", "b"], activation="HardSigmoid", activation_alpha=0.3, activation_beta=0.4)],
         {"a": (3, 4), "b": (4, 5)}, force32=True),
    Case("FusedGemm-Elu", "com.microsoft:FusedGemm", [ms("FusedGemm", ["a", "b"], activation="Elu", activation_alpha=0.7)],
         {"a": (3, 4), "b": (4, 5)}, force32=True),
    Case("FusedGemm-Softplus", "com.microsoft:FusedGemm", [ms("FusedGemm", ["a", "b"], activation="Softplus")],
         {"a": (3, 4), "b": (4, 5)}, force32=True),
    Case("FusedGemm-Softsign", "com.microsoft:FusedGemm", [ms("FusedGemm", ["a", "b"], activation="Softsign")],
         {"a": (3, 4), "b": (4, 5)}, force32=True),
    Case("QuantizeLinear-DequantizeLinear-com.microsoft", "com.microsoft:QuantizeLinear",
         [ms("QuantizeLinear", ["x", "s", "zp"], ["q"]), ms("DequantizeLinear", ["q", "s", "zp"], ["y"])],
         {"x": (4, 5)}, consts={"s": f64(0.02), "zp": np.array(-20, np.int8)}, opset=19, ste=True, force32=True,
         gen={"x": lambda rng, s: quant_grid(rng, s, 0.02, -160, 160)}),
    Case("DequantizeLinear-com.microsoft-per-axis-uint8", "com.microsoft:DequantizeLinear",
         [ms("QuantizeLinear", ["x", "s", "zp"], ["q"], axis=1), ms("DequantizeLinear", ["q", "s", "zp"], ["y"], axis=1)],
         {"x": (2, 3, 4)}, consts={"s": f64(0.05, 0.01, 0.02), "zp": np.array([128, 20, 250], np.uint8)},
         opset=19, ste=True, force32=True,
         gen={"x": lambda rng, s: quant_grid(rng, s, np.array([0.05, 0.01, 0.02]).reshape(1, 3, 1), -140, 140)}),
    # onnxruntime's RMS norm in the default domain, pooling, unpooling and Compress ---------------------------
    Case("SimplifiedLayerNormalization", "SimplifiedLayerNormalization",
         [node("SimplifiedLayerNormalization", ["x", "s"], ["y", "isd"], epsilon=1e-3)], {"x": (2, 3, 8), "s": (8,)},
         outputs=("y", "isd"), force32=True, checker=False),
    one("SimplifiedLayerNormalization", {"x": (2, 4, 5), "s": (4, 5)}, attrs=dict(axis=1), force32=True, checker=False,
        id="SimplifiedLayerNormalization-axis1"),
    one("GlobalLpPool", {"x": (2, 3, 4, 5)}, gen={"x": away()}),
    one("GlobalLpPool", {"x": (2, 3, 6)}, attrs=dict(p=3), gen={"x": away()}, id="GlobalLpPool-p3"),
    one("GlobalLpPool", {"x": (1, 2, 3, 3)}, attrs=dict(p=1), gen={"x": away()}, id="GlobalLpPool-p1"),
    one("MaxUnpool", {"x": (1, 2, 2, 2)}, consts={"i": np.array([[[[0, 3], [9, 14]], [[17, 18], [24, 31]]]], np.int64)},
        attrs=dict(kernel_shape=[2, 2], strides=[2, 2]), force32=True),
    # overlapping windows repeat an index: onnxruntime keeps the last write, the earlier ones get no gradient
    one("MaxUnpool", {"x": (1, 1, 4)}, consts={"i": np.array([[[1, 1, 2, 4]]], np.int64),
                                                "shape": i64(1, 1, 6)},
        attrs=dict(kernel_shape=[2], strides=[1]), force32=True, id="MaxUnpool-repeated-index-output-shape"),
    one("Compress", {"x": (3, 5)}, consts={"c": np.array([1, 0, 1, 1], bool)}, attrs=dict(axis=1)),
    one("Compress", {"x": (2, 3)}, consts={"c": np.array([0, 1, 1, 0, 1], bool)}, id="Compress-flat"),
    one("Compress", {"x": (3, 2, 2)}, consts={"c": np.array([0, 0, 0], bool)}, attrs=dict(axis=-3), id="Compress-nothing-kept"),
]


# recurrent layers: onnxruntime runs them in float32 only, so each case is also checked in float64 with the
# backward graph run by onnx.reference (test_backward_in_float64); T = 3 is unrolled, T = 6 a Scan

def rnn_case(cid, op, *, T=3, direction="forward", lens=None, h0=True, c0=False, peep=False, bias=True,
             outs=("Y", "Yh"), attrs=None, layout=0, **kw):
    H, nb, I = 2, 2, 3
    nd = 2 if direction == "bidirectional" else 1
    k = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    inputs = {"X": (nb, T, I) if layout else (T, nb, I), "W": (nd, k * H, I), "R": (nd, k * H, H)}
    ins = ["X", "W", "R", "B" if bias else "", "sl" if lens else "", "h0" if h0 else ""]
    if bias:
        inputs["B"] = (nd, 2 * k * H)
    state = (nb, nd, H) if layout else (nd, nb, H)
    if h0:
        inputs["h0"] = state
    if op == "LSTM":
        ins += ["c0" if c0 else "", "P" if peep else ""]
        if c0:
            inputs["c0"] = state
        if peep:
            inputs["P"] = (nd, 3 * H)
    while ins and not ins[-1]:
        ins.pop()
    names = ["Y", "Yh", "Yc"]
    node_outs = [n if n in outs else "" for n in names[:max(names.index(o) for o in outs) + 1]]
    a = dict(hidden_size=H, direction=direction, **(attrs or {}))
    if layout:
        a["layout"] = 1
    consts = {"sl": np.array(lens, np.int32)} if lens else {}
    return Case(cid, op, [node(op, ins, node_outs, **a)], inputs, consts, opset=14, outputs=tuple(outs), force32=True,
                ref64=True, **kw)


CASES += [
    rnn_case("RNN-forward", "RNN"),
    rnn_case("RNN-reverse-seqlens-scan", "RNN", T=6, direction="reverse", lens=[6, 3]),
    rnn_case("RNN-bidirectional-relu", "RNN", direction="bidirectional", attrs=dict(activations=["Relu", "Tanh"])),
    rnn_case("GRU-forward", "GRU", attrs=dict(linear_before_reset=0)),
    rnn_case("GRU-forward-linear-before-reset-scan", "GRU", T=6, attrs=dict(linear_before_reset=1)),
    rnn_case("GRU-reverse-seqlens-scan", "GRU", T=6, direction="reverse", lens=[6, 2]),
    rnn_case("GRU-bidirectional-linear-before-reset-seqlens", "GRU", direction="bidirectional", lens=[3, 1],
             attrs=dict(linear_before_reset=1)),
    rnn_case("GRU-no-bias-no-initial-state-Yh-only", "GRU", bias=False, h0=False, outs=("Yh",)),
    rnn_case("LSTM-forward", "LSTM", c0=True, outs=("Y", "Yh", "Yc")),
    rnn_case("LSTM-Yh-only", "LSTM", outs=("Yh",)),
    rnn_case("LSTM-reverse-peephole-scan", "LSTM", T=6, direction="reverse", c0=True, peep=True, outs=("Y", "Yc")),
    rnn_case("LSTM-bidirectional-seqlens-peephole", "LSTM", direction="bidirectional", lens=[3, 1], c0=True, peep=True,
             outs=("Y", "Yh", "Yc")),
    rnn_case("LSTM-bidirectional-seqlens-scan", "LSTM", T=6, direction="bidirectional", lens=[4, 6], c0=True),
    rnn_case("LSTM-batch-first-layout", "LSTM", layout=1, c0=True, outs=("Y", "Yh", "Yc"), ort=False),
]


# control flow: bodies read outer tensors (weights of the outer scope); their value_info carries shapes

def body(nodes, ins, outs, name="body"):
    return helper.make_graph(nodes, name, [helper.make_tensor_value_info(n, t, s) for n, t, s in ins],
                             [helper.make_tensor_value_info(n, t, s) for n, t, s in outs])


BOOL, I64 = TensorProto.BOOL, TensorProto.INT64
THEN = body([node("MatMul", ["x", "w"], ["t1"]), node("Tanh", ["t1"], ["t2"]), node("Mul", ["t2", "x"], ["t3"])], [],
            [("t3", DOUBLE, [3, 3])], "then")
ELSE = body([node("Mul", ["x", "x"], ["e1"]), node("Sigmoid", ["e1"], ["e2"])], [], [("e2", DOUBLE, [3, 3])], "else")
INNER = body([node("If", ["c2"], ["n1"], then_branch=THEN, else_branch=ELSE), node("Relu", ["n1"], ["n2"]),
              node("Add", ["n2", "w"], ["n3"])], [], [("n3", DOUBLE, [3, 3])], "outer_then")
LOOP_BODY = body([node("MatMul", ["h_in", "w"], ["m"]), node("Add", ["m", "x"], ["a"]), node("Tanh", ["a"], ["h_out"]),
                  node("Identity", ["cond_in"], ["cond_out"]), node("Mul", ["h_out", "h_in"], ["so"])],
                 [("i", I64, []), ("cond_in", BOOL, []), ("h_in", DOUBLE, [2, 3])],
                 [("cond_out", BOOL, []), ("h_out", DOUBLE, [2, 3]), ("so", DOUBLE, [2, 3])])
LOOP_IF_BODY = body([node("If", ["c"], ["m"], then_branch=body([node("MatMul", ["h_in", "w"], ["mt"])], [], [("mt", DOUBLE, [2, 3])]),
                          else_branch=body([node("Mul", ["h_in", "x"], ["me"])], [], [("me", DOUBLE, [2, 3])])),
                     node("Sin", ["m"], ["h_out"]), node("Identity", ["cond_in"], ["cond_out"])],
                    [("i", I64, []), ("cond_in", BOOL, []), ("h_in", DOUBLE, [2, 3])],
                    [("cond_out", BOOL, []), ("h_out", DOUBLE, [2, 3])])
SCAN_BODY = body([node("Mul", ["s_in", "xt"], ["p"]), node("MatMul", ["p", "w"], ["q"]), node("Tanh", ["q"], ["s_out"]),
                  node("Add", ["s_out", "xt"], ["yt"])],
                 [("s_in", DOUBLE, [2, 3]), ("xt", DOUBLE, [2, 3])], [("s_out", DOUBLE, [2, 3]), ("yt", DOUBLE, [2, 3])])
SCAN2_BODY = body([node("Mul", ["s_in", "at"], ["p"]), node("Add", ["p", "bt"], ["s_out"]), node("Exp", ["s_in"], ["y1"]),
                   helper.make_node("Mul", ["at", "bt"], ["y2"], name="mul_2")],
                  [("s_in", DOUBLE, [3]), ("at", DOUBLE, [3]), ("bt", DOUBLE, [3])],
                  [("s_out", DOUBLE, [3]), ("y1", DOUBLE, [3]), ("y2", DOUBLE, [3])])
TRUE, FALSE = np.array(True), np.array(False)

CASES += [
    Case("If-then", "If", [node("If", ["c"], ["y"], then_branch=THEN, else_branch=ELSE)], {"x": (3, 3), "w": (3, 3)},
         {"c": TRUE}),
    Case("If-else", "If", [node("If", ["c"], ["y"], then_branch=THEN, else_branch=ELSE)], {"x": (3, 3), "w": (3, 3)},
         {"c": FALSE}),
    Case("If-nested", "If", [node("If", ["c"], ["y"], then_branch=INNER, else_branch=ELSE)], {"x": (3, 3), "w": (3, 3)},
         {"c": TRUE, "c2": TRUE}, gen={"x": away(0.3, 1.0)}),
    Case("Loop-trip-count-state-scan-output", "Loop", [node("Loop", ["M", "", "h0"], ["hN", "ss"], body=LOOP_BODY)],
         {"x": (2, 3), "h0": (2, 3), "w": (3, 3)}, {"M": np.array(3, np.int64)}, outputs=("hN", "ss")),
    Case("Loop-if-in-body", "Loop", [node("Loop", ["M", "", "h0"], ["hN"], body=LOOP_IF_BODY)],
         {"x": (2, 3), "h0": (2, 3), "w": (3, 3)}, {"M": np.array(4, np.int64), "c": TRUE}, outputs=("hN",)),
    Case("Scan-forward", "Scan", [node("Scan", ["s0", "xs"], ["sN", "ys"], body=SCAN_BODY, num_scan_inputs=1)],
         {"s0": (2, 3), "xs": (4, 2, 3), "w": (3, 3)}, outputs=("sN", "ys")),
    Case("Scan-reverse-axis1", "Scan", [node("Scan", ["s0", "xs"], ["sN", "ys"], body=SCAN_BODY, num_scan_inputs=1,
                                             scan_input_directions=[1], scan_input_axes=[1], scan_output_directions=[1],
                                             scan_output_axes=[2])],
         {"s0": (2, 3), "xs": (2, 4, 3), "w": (3, 3)}, outputs=("sN", "ys")),
    Case("Scan-two-inputs-two-outputs", "Scan", [node("Scan", ["s0", "a", "b"], ["sN", "y1", "y2"], body=SCAN2_BODY,
                                                      num_scan_inputs=2, scan_input_directions=[0, 1])],
         {"s0": (3,), "a": (5, 3), "b": (5, 3)}, outputs=("y1", "y2"), gen={"a": away(0.3, 0.9)}),
]

# sampling: grids reach past the image (zeros / border padding); sample points fall inside cells, off the nodes
GRID = {"grid": lambda rng, s: rng.uniform(-1.15, 1.15, size=s)}


def grid_case(id, x, grid, opset=20, **attrs):
    return one("GridSample", {"x": x, "grid": grid}, attrs=attrs, opset=opset, gen=GRID, id=id)


CASES += [
    grid_case("GridSample-bilinear-zeros-opset16", (2, 3, 5, 6), (2, 4, 3, 2), opset=16, mode="bilinear"),
    grid_case("GridSample-linear-zeros-align-corners", (2, 3, 5, 6), (2, 4, 3, 2), mode="linear", align_corners=1),
    grid_case("GridSample-linear-border", (1, 2, 4, 7), (1, 5, 4, 2), mode="linear", padding_mode="border"),
    grid_case("GridSample-linear-border-align-corners", (2, 2, 4, 5), (2, 3, 3, 2), mode="linear",
              padding_mode="border", align_corners=1),
    grid_case("GridSample-nearest-zeros", (2, 3, 5, 6), (2, 4, 3, 2), mode="nearest"),
    grid_case("GridSample-nearest-border-align-corners-opset16", (1, 2, 4, 5), (1, 3, 6, 2), opset=16,
              mode="nearest", padding_mode="border", align_corners=1),
    grid_case("GridSample-3d-linear", (2, 2, 3, 4, 5), (2, 2, 3, 2, 3), mode="linear"),
    grid_case("GridSample-3d-linear-border-align-corners", (1, 2, 3, 4, 5), (1, 3, 2, 2, 3), mode="linear",
              padding_mode="border", align_corners=1),
    one("Col2Im", {"x": (1, 2 * 4, 9)}, consts={"size": i64(4, 4), "block": i64(2, 2)}, opset=18),
    one("Col2Im", {"x": (2, 3 * 6, 12)}, consts={"size": i64(5, 6), "block": i64(2, 3)}, opset=18,
        attrs=dict(dilations=[1, 2], strides=[2, 1], pads=[1, 0, 0, 2]), id="Col2Im-strides-dilations-uneven-pads"),
    one("Col2Im", {"x": (1, 2 * 3, 4)}, consts={"size": i64(7), "block": i64(3)}, opset=18,
        attrs=dict(strides=[2], pads=[1, 2]), id="Col2Im-1d", torch=False),
    # RoiAlign w.r.t. the image (torchvision is no test dependency: finite differences only); rois reach past
    # the image, and one is smaller than a pixel (output_half_pixel makes it 1 x 1)
    one("RoiAlign", {"x": (2, 3, 8, 9)}, opset=16, torch=False, id="RoiAlign-half-pixel-ratio2",
        consts={"rois": f64([0.7, 1.3, 6.2, 5.9], [2.1, 0.4, 8.6, 7.3], [-0.8, 3.3, 3.9, 9.4]), "bi": i64(0, 1, 1)},
        attrs=dict(output_height=3, output_width=2, sampling_ratio=2)),
    one("RoiAlign", {"x": (2, 2, 7, 8)}, opset=16, torch=False, id="RoiAlign-output-half-pixel-adaptive",
        consts={"rois": f64([1.4, 2.6, 13.1, 11.7], [3.3, 1.1, 3.9, 1.6], [-3.1, -2.2, 9.7, 17.3]), "bi": i64(1, 0, 1)},
        attrs=dict(output_height=2, output_width=3, spatial_scale=0.5, coordinate_transformation_mode="output_half_pixel")),
    one("RoiAlign", {"x": (1, 2, 6, 7)}, opset=16, torch=False, id="RoiAlign-half-pixel-adaptive-past-edges",
        consts={"rois": f64([0.3, 0.2, 6.9, 5.8], [-1.7, 2.3, 9.2, 8.9], [4.6, 3.2, 5.1, 5.5]), "bi": i64(0, 0, 0)},
        attrs=dict(output_height=2, output_width=2, sampling_ratio=0)),
]


# rotary embeddings (opset 23 and onnxruntime's), centre crop / pad, affine grids, BERT's fused embedding layer
def _angles(*shape):
    t = np.random.default_rng(5).uniform(-3.0, 3.0, shape)
    return {"cos": np.cos(t), "sin": np.sin(t)}


ids32 = lambda *rows: np.array(rows, np.int32)  # noqa: E731

CASES += [
    one("RotaryEmbedding", {"x": (2, 2, 3, 4)}, consts={**_angles(5, 2), "pos": i64([0, 4, 2], [3, 3, 1])},
        ins=["x", "cos", "sin", "pos"], opset=23, force32=True, id="RotaryEmbedding-4d-position-ids"),
    one("RotaryEmbedding", {"x": (2, 3, 12)}, consts=_angles(2, 3, 2), ins=["x", "cos", "sin"], opset=23,
        attrs=dict(num_heads=2, rotary_embedding_dim=4, interleaved=1), force32=True,
        id="RotaryEmbedding-3d-partial-interleaved"),
    Case("RotaryEmbedding-com.microsoft-offset", "com.microsoft:RotaryEmbedding",
         [ms("RotaryEmbedding", ["x", "pos", "cos", "sin"], num_heads=2)], {"x": (2, 3, 8)},
         {"pos": i64(2), **_angles(6, 2)}, force32=True),
    Case("RotaryEmbedding-com.microsoft-4d-interleaved-partial", "com.microsoft:RotaryEmbedding",
         [ms("RotaryEmbedding", ["x", "pos", "cos", "sin"], interleaved=1, num_heads=2, rotary_embedding_dim=4)],
         {"x": (2, 2, 3, 6)}, {"pos": i64([0, 1, 2], [4, 2, 2]), **_angles(5, 2)}, force32=True),
    # the first axis padded 3 -> 6 and the second cropped 7 -> 4 (odd differences: the offsets round down)
    one("CenterCropPad", {"x": (3, 7, 2)}, consts={"shape": i64(6, 4)}, attrs=dict(axes=[-3, 1]), opset=18,
        id="CenterCropPad-pad-and-crop-negative-axis"),
    one("CenterCropPad", {"x": (4, 5)}, consts={"shape": i64(3, 8)}, opset=18,
        id="CenterCropPad-every-axis"),
    one("AffineGrid", {"theta": (2, 2, 3)}, consts={"size": i64(2, 3, 4, 5)}, opset=20),
    one("AffineGrid", {"theta": (2, 2, 3)}, consts={"size": i64(2, 1, 3, 2)}, attrs=dict(align_corners=1), opset=20,
        id="AffineGrid-align-corners"),
    one("AffineGrid", {"theta": (1, 3, 4)}, consts={"size": i64(1, 2, 2, 3, 4)}, opset=20, id="AffineGrid-3d"),
    one("AffineGrid", {"theta": (0, 2, 3)}, consts={"size": i64(0, 1, 3, 2)}, opset=20, id="AffineGrid-empty-batch",
        torch=False),  # torch.affine_grid refuses a size with a 0
    one("CenterCropPad", {"x": (0, 3)}, consts={"shape": i64(2)}, attrs=dict(axes=[1]), opset=18,
        id="CenterCropPad-empty", torch=False),  # an empty gradient: nothing for torch to compare
    # repeated ids (rows that get two contributions) and a segment table; then position_ids (1, S), no segment
    Case("EmbedLayerNormalization", "com.microsoft:EmbedLayerNormalization",
         [ms("EmbedLayerNormalization", ["ids", "seg_ids", "word", "pos", "seg", "gamma", "beta"], ["y", "", "sum"],
             epsilon=1e-5)],
         {"word": (6, 8), "pos": (5, 8), "seg": (2, 8), "gamma": (8,), "beta": (8,)},
         {"ids": ids32([1, 4, 1], [5, 0, 4]), "seg_ids": ids32([0, 0, 1], [0, 1, 1])}, opset=17,
         outputs=("y", "sum"), force32=True),
    Case("EmbedLayerNormalization-position-ids", "com.microsoft:EmbedLayerNormalization",
         [ms("EmbedLayerNormalization", ["ids", "", "word", "pos", "", "gamma", "beta", "", "pids"], ["y", "mask_index"])],
         {"word": (6, 8), "pos": (5, 8), "gamma": (8,), "beta": (8,)},
         {"ids": ids32([1, 4, 1], [5, 0, 4]), "pids": ids32([4, 0, 4])}, opset=17, force32=True),
]


# onnxruntime's fused BERT self-attention: masks as its optimizer passes them (key lengths, 0-1 masks)
def ms_attention(cid, extra=(), consts=None, hidden=(8, 8, 8), **attrs):
    ins = {"x": (2, 3, 6), "w": (6, sum(hidden)), "bias": (sum(hidden),)}
    names = ["x", "w", "bias"] + list(extra)
    return Case(cid, "com.microsoft:Attention", [ms("Attention", names, num_heads=2, **attrs)], ins, consts or {},
                gen={"x": normal, "w": normal}, force32=True)


CASES += [
    ms_attention("Attention-com.microsoft"),
    ms_attention("Attention-com.microsoft-key-lengths", ["mask"], {"mask": ids32(3, 2)}),
    ms_attention("Attention-com.microsoft-raw-mask-unidirectional-scale", ["mask"], {"mask": ids32([1, 1, 0], [1, 0, 1])},
                 unidirectional=1, scale=0.4),
    ms_attention("Attention-com.microsoft-qkv-sizes-3d-mask", ["mask"],
                 {"mask": np.array([[[1, 0, 1], [1, 1, 0], [0, 1, 1]], [[1, 1, 1], [0, 1, 1], [1, 0, 0]]], np.int32)},
                 hidden=(4, 4, 6), qkv_hidden_sizes=[4, 4, 6]),
]


def mha(cid, ins, extra=(), consts=None, **attrs):
    names = ["q", "k", "v"] + list(extra)
    return Case(cid, "com.microsoft:MultiHeadAttention", [ms("MultiHeadAttention", names, num_heads=2, **attrs)], ins,
                consts or {}, gen={k: normal for k in ("q", "k", "v")}, force32=True)


CASES += [
    mha("MultiHeadAttention-cross-bias", {"q": (2, 3, 8), "k": (2, 4, 8), "v": (2, 4, 6), "bias": (22,)}, ["bias"]),
    # a 0-1 key padding mask and an attention bias broadcast over the batch, which gets its gradient summed
    mha("MultiHeadAttention-padding-mask-attention-bias", {"q": (2, 3, 8), "k": (2, 4, 8), "v": (2, 4, 8), "ab": (1, 2, 3, 4)},
        ["", "mask", "ab"], {"mask": ids32([1, 1, 0, 1], [1, 1, 1, 0])}),
    mha("MultiHeadAttention-key-lengths-unidirectional-scale", {"q": (2, 4, 8), "k": (2, 4, 8), "v": (2, 4, 4)},
        ["", "mask"], {"mask": ids32(3, 4)}, unidirectional=1, scale=0.5),
]


# KV-cache writes (opset 24): linear, circular (wrapping past the cache's end) and an empty update
CASES += [
    one("TensorScatter", {"past": (2, 5, 3), "upd": (2, 2, 3)}, consts={"w": i64(1, 3)}, ins=["past", "upd", "w"], opset=24),
    one("TensorScatter", {"past": (2, 2, 4, 3), "upd": (2, 2, 3, 3)}, consts={"w": i64(2, 0)}, ins=["past", "upd", "w"],
        attrs=dict(axis=2, mode="circular"), opset=24, id="TensorScatter-circular-axis2"),
    one("TensorScatter", {"past": (2, 3, 4), "upd": (2, 3, 2)}, attrs=dict(axis=-1), opset=24,
        id="TensorScatter-no-write-indices-last-axis"),
    one("TensorScatter", {"past": (2, 4, 3), "upd": (2, 0, 3)}, consts={"w": i64(1, 2)}, ins=["past", "upd", "w"],
        opset=24, torch=False, id="TensorScatter-empty-update"),
]


# DFT: complex and real signals, dft_length padding and cutting, onesided, inverse, the opset-17 attribute form
n64 = lambda v: np.array(v, np.int64)  # noqa: E731 - a scalar input
CASES += [
    one("DFT", {"x": (2, 5, 2)}, opset=20, id="DFT-complex"),
    one("DFT", {"x": (3, 6, 1)}, consts={"n": n64(8), "ax": n64(-2)}, ins=["x", "n", "ax"], attrs=dict(onesided=1),
        opset=20, id="DFT-real-onesided-padded"),
    one("DFT", {"x": (6, 3, 2)}, consts={"n": n64(4), "ax": n64(0)}, ins=["x", "n", "ax"], attrs=dict(inverse=1),
        opset=20, id="DFT-inverse-cut-axis0"),
    one("DFT", {"x": (2, 5, 1)}, attrs=dict(axis=1, onesided=1), opset=17, id="DFT-opset17-real-onesided-odd"),
]


# rules checked by a test of their own, not a case of this table: Scatter exists in opsets 9 and 10 only, whose
# gradient needs the model converted to opset 11 or later first (api.grad_plan does it; attach_backward does not)
COVERED_ELSEWHERE = {"Scatter": "tests/test_grad_scatter_opset10.py"}


def test_every_rule_has_a_case():
    covered = {c.op for c in CASES} | set(COVERED_ELSEWHERE)
    missing = sorted(set(registry.load()) - covered)
    assert not missing, f"registered rules without a gradient test case: {missing}"


def test_case_ids_are_unique():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))


MS_CASES = [c for c in CASES if any(n.domain == MS for n in c.nodes) and not c.ste]


@pytest.mark.parametrize("case", MS_CASES, ids=[c.id for c in MS_CASES])
def test_com_microsoft_oracles_match_onnxruntime(case):
    """The float64 oracles of onnxruntime's contrib ops (more_oracle.py) compute what onnxruntime's kernels do:
    the finite differences above differentiate the oracle, so an oracle that read the op otherwise (a mask
    convention, a position offset) would check the gradient of another function."""
    vals = values(case)
    m32 = build(case, FLOAT)
    got = ort.InferenceSession(m32.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        list(case.outputs), {k: v.astype(np.float32) for k, v in vals.items()})
    want = ReferenceEvaluator(build(case, DOUBLE), new_ops=oracle_ops(case.opset)).run(list(case.outputs), vals)
    for o, a, b in zip(case.outputs, got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4, err_msg=o)


# -- float64 oracle overrides -------------------------------------------------------------------------

class Erf(OpRun):
    op_domain = ""

    def _run(self, x):
        return (np.vectorize(math.erf, otypes=[np.float64])(x).astype(x.dtype),)


class Gelu(OpRun):
    op_domain = ""

    def _run(self, x, approximate="none"):
        if approximate == "tanh":
            return ((0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))).astype(x.dtype),)
        erf = np.vectorize(math.erf, otypes=[np.float64])
        return ((0.5 * x * (1 + erf(x / math.sqrt(2)))).astype(x.dtype),)


class BatchNormalization(OpRun):
    op_domain = ""

    def _run(self, x, scale, bias, mean, var, epsilon=1e-5, momentum=None, training_mode=None, spatial=None,
             is_test=None, consumed_inputs=None):
        sh = [1, -1] + [1] * (x.ndim - 2)
        y = scale.reshape(sh) * (x - mean.reshape(sh)) / np.sqrt(var.reshape(sh) + epsilon) + bias.reshape(sh)
        return (y.astype(x.dtype),)


class LRN(OpRun):
    """The operator's definition: the channel window is [c - floor((size-1)/2), c + ceil((size-1)/2)];
    onnx.reference's LRN sums another window (off by up to 0.7 on a random 6-channel input)."""

    op_domain = ""

    def _run(self, x, alpha=1e-4, beta=0.75, bias=1.0, size=None):
        lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
        c = x.shape[1]
        s = np.zeros_like(x)
        for ch in range(c):
            s[:, ch] = np.sum(x[:, max(0, ch - lo):min(c, ch + hi + 1)] ** 2, axis=1)
        return ((x / (bias + alpha / size * s) ** beta).astype(x.dtype),)


class ConvTranspose(OpRun):
    """onnx.reference ignores ``group``; this one is a direct float64 scatter."""

    op_domain = ""

    def _run(self, x, w, b=None, auto_pad=None, dilations=None, group=None, kernel_shape=None, output_padding=None,
             output_shape=None, pads=None, strides=None):
        n = x.ndim - 2
        G = group or 1
        s, d = strides or [1] * n, dilations or [1] * n
        op, p = output_padding or [0] * n, pads or [0] * 2 * n
        k = list(w.shape[2:])
        cg_in, cg_out = x.shape[1] // G, w.shape[1]
        full_sp = [s[i] * (x.shape[2 + i] - 1) + op[i] + (k[i] - 1) * d[i] + 1 for i in range(n)]
        full = np.zeros([x.shape[0], cg_out * G] + full_sp)
        for grp in range(G):
            xg = x[:, grp * cg_in:(grp + 1) * cg_in]
            wg = w[grp * cg_in:(grp + 1) * cg_in]
            for off in np.ndindex(*k):
                contrib = np.einsum("nc...,co->no...", xg, wg[(slice(None), slice(None)) + off])
                sl = tuple(slice(off[i] * d[i], off[i] * d[i] + s[i] * (x.shape[2 + i] - 1) + 1, s[i]) for i in range(n))
                full[(slice(None), slice(grp * cg_out, (grp + 1) * cg_out)) + sl] += contrib
        if output_shape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            # the ONNX spec: total = full - output_shape (x s for SAME_*), its odd unit at the start except
            # with SAME_UPPER; an output larger than full is full followed by zeros (as onnxruntime runs it)
            # (auto_pad alone never grows it: onnxruntime and onnx shape inference)
            target = (list(output_shape)[-n:] if output_shape is not None
                      else [min(x.shape[2 + i] * s[i], full_sp[i]) for i in range(n)])
            p = [0] * 2 * n
            for i in range(n):
                total = max(full_sp[i] - target[i], 0)
                first = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
                p[i], p[n + i] = first, full_sp[i] - target[i] - first
        crop = tuple(slice(p[i], full_sp[i] - p[n + i]) for i in range(n))
        y = full[(slice(None), slice(None)) + crop]
        grow = [max(-p[n + i], 0) for i in range(n)]
        if any(grow):
            y = np.pad(y, [(0, 0), (0, 0)] + [(0, v) for v in grow])
        if b is not None:
            y = y + b.reshape([1, -1] + [1] * n)
        return (y.astype(x.dtype),)


class Pad(OpRun):
    """onnx.reference rejects negative pads (a crop); numpy does the rest."""

    op_domain = ""

    def _run(self, x, pads=None, constant_value=None, axes=None, mode=None, value=None):
        mode = mode or "constant"
        r = x.ndim
        axes = list(range(r)) if axes is None else [a + r if a < 0 else a for a in axes]
        k = len(axes)
        pb, pe = [0] * r, [0] * r
        for j, a in enumerate(axes):
            pb[a], pe[a] = int(pads[j]), int(pads[k + j])
        x = x[tuple(slice(-min(b, 0), x.shape[i] + min(e, 0)) for i, (b, e) in enumerate(zip(pb, pe)))]
        width = [(max(b, 0), max(e, 0)) for b, e in zip(pb, pe)]
        if mode == "constant":
            v = value if constant_value is None else (constant_value.reshape(-1)[0] if np.size(constant_value) else 0)
            return (np.pad(x, width, mode="constant", constant_values=v or 0),)
        return (np.pad(x, width, mode={"edge": "edge", "reflect": "reflect", "wrap": "wrap"}[mode]),)


class Softmax(OpRun):
    """Before opset 13 Softmax flattens the input to 2-D at ``axis``; onnx.reference does not."""

    op_domain = ""

    def _run(self, x, axis=1):
        ax = axis + x.ndim if axis < 0 else axis
        f = x.reshape(list(x.shape[:ax]) + [-1])
        e = np.exp(f - f.max(axis=-1, keepdims=True))
        return ((e / e.sum(axis=-1, keepdims=True)).reshape(x.shape),)


class Loop(ReferenceLoop):
    """onnx.reference's Loop runs no iteration when the cond input is absent, and concatenates the scan
    outputs instead of stacking them (2-D slices come out 2-D)."""

    op_domain = ""

    def _run(self, M, cond, *args, context=None, body=None, attributes=None, bindings=None):
        inputs = dict.fromkeys(self.body.input_names)
        names = self.body.input_names
        for name, val in zip(names[2:], args):
            inputs[name] = val
        if context is not None:
            inputs.update(context)
        scans = [[] for _ in range(self.K)]
        it, go = 0, True if cond is None else bool(cond)
        outputs = None
        while go and (M is None or it < M):
            inputs[names[0]] = np.array(it, np.int64)
            inputs[names[1]] = np.array(go)
            outputs = self._run_body(inputs, attributes=attributes, bindings=bindings)
            for k in range(self.K):
                scans[k].append(outputs[-self.K + k])
            go = bool(outputs[0])
            for i, o in zip(names[2:], outputs[1:1 + self.N]):
                inputs[i] = o
            it += 1
        final = [inputs[i] for i in names[2:]]
        return tuple(final + [np.stack(x) for x in scans])


class Scan(OpRun):
    """onnx.reference's Scan reads its inputs and writes its outputs in the forward direction along axis 0
    only; this one takes any direction and axis."""

    op_domain = ""

    def need_context(self) -> bool:
        return True

    def _run(self, *args, context=None, body=None, num_scan_inputs=None, scan_input_axes=None, scan_input_directions=None,
             scan_output_axes=None, scan_output_axes_=None, scan_output_directions=None, attributes=None, bindings=None):
        m = num_scan_inputs
        n = len(args) - m
        ins, outs = self.body.input_names, self.body.output_names
        k = len(outs) - n
        di, ai = list(scan_input_directions or [0] * m), list(scan_input_axes or [0] * m)
        do, ao = list(scan_output_directions or [0] * k), list(scan_output_axes or [0] * k)
        xs = [np.moveaxis(x, a % x.ndim, 0)[::-1 if d else 1] for x, a, d in zip(args[n:], ai, di)]
        states, per = list(args[:n]), [[] for _ in range(k)]
        for t in range(xs[0].shape[0]):
            feed = dict(context or {})
            feed.update(zip(ins[:n], states))
            feed.update({name: x[t] for name, x in zip(ins[n:], xs)})
            res = self._run_body(feed, bindings=bindings)
            states = list(res[:n])
            for j in range(k):
                per[j].append(res[n + j])
        ys = []
        for j in range(k):
            y = np.stack(per[j][::-1] if do[j] else per[j])
            ys.append(np.moveaxis(y, 0, ao[j] % y.ndim))
        return tuple(states + ys)


ORACLE_OPS = [Erf, Gelu, BatchNormalization, LRN, ConvTranspose, Pad, Loop, Scan] + RECURRENT_OPS + MORE_OPS


def oracle_ops(opset: int) -> list:
    return ORACLE_OPS + ([Softmax] if opset < 13 else [])


# -- building and running a case ------------------------------------------------------------------------

def _retype(c: onnx.NodeProto, elem: int, np_t) -> None:
    """DOUBLE -> elem in a node's Cast target and Constant value, and in the bodies inside it."""
    for a in c.attribute:
        if c.op_type == "Cast" and a.name == "to" and a.i == DOUBLE:
            a.i = elem
        if c.op_type == "Constant" and a.name == "value" and a.t.data_type == DOUBLE:
            a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np_t)))
        if a.type == onnx.AttributeProto.GRAPH:
            for vi in list(a.g.input) + list(a.g.output) + list(a.g.value_info):
                if vi.type.tensor_type.elem_type == DOUBLE:
                    vi.type.tensor_type.elem_type = elem
            for n in a.g.node:
                _retype(n, elem, np_t)


def build(case: Case, elem: int) -> onnx.ModelProto:
    np_t = np.float64 if elem == DOUBLE else np.float32
    inits = []
    for k, v in case.consts.items():
        v = np.asarray(v)
        if v.dtype == np.float64 and not (k in ("roi", "sc")):
            v = v.astype(np_t)
        inits.append(numpy_helper.from_array(v, k))
    nodes = []
    for n in case.nodes:
        c = onnx.NodeProto()
        c.CopyFrom(n)
        _retype(c, elem, np_t)
        nodes.append(c)
    ins = [helper.make_tensor_value_info(k, elem, list(s)) for k, s in case.inputs.items()]
    outs = [helper.make_tensor_value_info(o, 0, None) for o in case.outputs]
    g = helper.make_graph(nodes, case.id, ins, [], initializer=inits)
    g.output.extend(outs)
    domains = [helper.make_opsetid("", case.opset)] + (
        [helper.make_opsetid(MS, 1)] if any(n.domain == MS for n in case.nodes) else [])
    m = helper.make_model(g, opset_imports=domains)
    m.ir_version = 8 if case.opset <= 17 else (9 if case.opset <= 20 else (10 if case.opset <= 23 else 11))
    m = annotate_outputs(infer_shapes(m))
    for o in m.graph.output:
        if not o.type.tensor_type.elem_type:
            o.type.tensor_type.elem_type = elem
    if any(not o.type.tensor_type.HasField("shape") for o in m.graph.output):  # Loop outputs: shapes from a run
        outs = ReferenceEvaluator(m, new_ops=oracle_ops(case.opset)).run(
            None, {k: v.astype(np_t) for k, v in values(case).items()})
        for o, y in zip(m.graph.output, outs):
            o.type.tensor_type.shape.SetInParent()
            del o.type.tensor_type.shape.dim[:]
            for d in np.shape(y):
                o.type.tensor_type.shape.dim.add().dim_value = int(d)
    return m


def with_cotangents(m: onnx.ModelProto, case: Case, elem: int) -> tuple[onnx.ModelProto, dict[str, str]]:
    out = onnx.ModelProto()
    out.CopyFrom(m)
    seeds = {}
    shapes = shaped_types(m)
    for o in case.outputs:
        d = f"d_{o}"
        vi = helper.make_tensor_value_info(d, elem, None)
        vi.type.CopyFrom(shapes[o])
        out.graph.input.append(vi)
        seeds[o] = d
    return out, seeds


def wrt_of(case: Case) -> list[str]:
    return list(case.wrt) if case.wrt else list(case.inputs)


def values(case: Case, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {k: case.gen.get(k, away(0.1, 1.0))(rng, s).astype(np.float64) for k, s in case.inputs.items()}


def reference_backward(case: Case, vals: dict, cot: dict):
    """The gradients from onnxprobe's backward graph run by onnx.reference in float64 (with the oracle's
    forward ops), for nodes onnxruntime runs only in float32 or not at all."""
    fwd = build(case, DOUBLE)
    model, seeds = with_cotangents(fwd, case, DOUBLE)
    bw = attach_backward(model, seeds, wrt_of(case), outputs=list(case.outputs))
    if case.checker:
        onnx.checker.check_model(bw.model, full_check=True)
    feeds = {k: v for k, v in vals.items() if k in case.inputs}
    feeds.update({f"d_{o}": cot[o] for o in case.outputs})
    names = list(bw.grads.values())
    res = dict(zip(names, ReferenceEvaluator(bw.model, new_ops=oracle_ops(case.opset)).run(names, feeds)))
    return {t: np.asarray(res[g], np.float64) for t, g in bw.grads.items()}, DOUBLE, bw


def run_backward(case: Case, vals: dict, cot: dict):
    """The gradients from onnxprobe's backward graph in onnxruntime: float64 when it can, else float32."""
    if not case.ort:
        return reference_backward(case, vals, cot)
    for elem in ([] if case.force32 else [DOUBLE]) + [FLOAT]:
        fwd = build(case, elem)
        model, seeds = with_cotangents(fwd, case, elem)
        bw = attach_backward(model, seeds, wrt_of(case), outputs=list(case.outputs))
        if case.checker:
            onnx.checker.check_model(bw.model, full_check=True)
        np_t = np.float64 if elem == DOUBLE else np.float32
        try:
            sess = ort.InferenceSession(bw.model.SerializeToString(), providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001
            if elem == DOUBLE and "NOT_IMPLEMENTED" in str(e):
                continue
            raise
        feeds = {k: v.astype(np_t) for k, v in vals.items() if k in case.inputs}
        seed_t = {i.name: helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type) for i in model.graph.input}
        # a seed has its output's type (LayerNormalization's Mean is float32, its stash type, in a double model)
        feeds.update({f"d_{o}": cot[o].astype(seed_t.get(f"d_{o}", np_t)) for o in case.outputs})
        names = list(bw.grads.values())
        res = dict(zip(names, sess.run(names, feeds)))
        return {t: res[g].astype(np.float64) for t, g in bw.grads.items()}, elem, bw
    raise AssertionError("unreachable")


def forward_f64(case: Case):
    m = build(case, DOUBLE)
    # constants that the case differentiates (Constant nodes) become inputs of the oracle graph
    return m


def loss_fd(case: Case, m: onnx.ModelProto, vals: dict, cot: dict):
    wrt = wrt_of(case)
    extra = [w for w in wrt if w not in case.inputs]
    if extra:
        m = _consts_as_inputs(m, extra)
    ref = ReferenceEvaluator(m, new_ops=oracle_ops(case.opset))

    def L(v):
        outs = ref.run(list(case.outputs), v)
        return float(sum(np.sum(o.astype(np.float64) * cot[k]) for k, o in zip(case.outputs, outs)))

    return L


def _consts_as_inputs(m: onnx.ModelProto, names: list[str]) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(m)
    keep = [n for n in out.graph.node if not (n.op_type == "Constant" and n.output[0] in names)]
    del out.graph.node[:]
    out.graph.node.extend(keep)
    for n in names:
        out.graph.input.append(helper.make_tensor_value_info(n, DOUBLE, None))
    return out


def const_values(case: Case) -> dict[str, np.ndarray]:
    out = {}
    for n in case.nodes:
        if n.op_type == "Constant" and n.output[0] in (case.wrt or ()):
            out[n.output[0]] = numpy_helper.to_array(n.attribute[0].t).astype(np.float64)
    return out


def cotangents(case: Case, vals: dict) -> dict[str, np.ndarray]:
    m = build(case, DOUBLE)
    extra = [w for w in wrt_of(case) if w not in case.inputs]
    if extra:
        m = _consts_as_inputs(m, extra)
    outs = ReferenceEvaluator(m, new_ops=oracle_ops(case.opset)).run(list(case.outputs), vals)
    rng = np.random.default_rng(99)
    return {k: rng.standard_normal(np.shape(o)) for k, o in zip(case.outputs, outs)}


@pytest.fixture(scope="module")
def computed():
    return {}


def _compute(case: Case, cache: dict):
    if case.id not in cache:
        vals = values(case)
        vals.update(const_values(case))
        cot = cotangents(case, vals)
        saved = {k: getattr(conv_rules, k) for k in case.small}
        try:
            for k, v in case.small.items():
                setattr(conv_rules, k, v)  # a formulation chosen for big tensors, exercised on a small case
            grads, elem, bw = run_backward(case, vals, cot)
        finally:
            for k, v in saved.items():
                setattr(conv_rules, k, v)
        cache[case.id] = (vals, cot, grads, elem, bw)
    return cache[case.id]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_finite_differences(case, computed):
    if case.ste:
        pytest.skip("straight-through gradient: test_straight_through_quantization checks it")
    vals, cot, grads, elem, _ = _compute(case, computed)
    L = loss_fd(case, build(case, DOUBLE), vals, cot)
    rtol = 1e-6 if elem == DOUBLE else 2e-3
    rng = np.random.default_rng(7)
    assert set(grads) == set(wrt_of(case)), f"no gradient for {set(wrt_of(case)) - set(grads)}"
    for name in wrt_of(case):
        g = grads[name]
        assert g.shape == np.shape(vals[name]), f"{name}: gradient shape {g.shape}, tensor {np.shape(vals[name])}"
        for v in (rng.standard_normal(g.shape), g * rng.uniform(0.5, 1.5, g.shape)):
            h = case.fd_h
            plus = dict(vals, **{name: vals[name] + h * v})
            minus = dict(vals, **{name: vals[name] - h * v})
            fd = (L(plus) - L(minus)) / (2 * h)
            an = float(np.sum(g * v))
            scale = max(abs(fd), abs(an), 1e-9)
            assert abs(fd - an) <= rtol * scale + 1e-9, f"{name}: <grad, v> = {an:.10g}, finite difference {fd:.10g}"


TORCH_CASES = [c for c in CASES if c.torch]


@pytest.fixture(scope="module")
def torch_answers(computed):
    """torch.autograd's gradients for every case, computed in one worker process."""
    from test_autodiff_torchref import in_worker

    jobs = []
    for case in TORCH_CASES:
        vals, cot, *_ = _compute(case, computed)
        m = build(case, DOUBLE)
        extra = [w for w in wrt_of(case) if w not in case.inputs]
        if extra:
            m = _consts_as_inputs(m, extra)
        jobs.append({"kind": "grads", "model": m.SerializeToString(), "feeds": vals,
                     "wrt": {k: vals[k] for k in wrt_of(case)}, "outputs": [(o, cot[o]) for o in case.outputs]})
    return dict(zip([c.id for c in TORCH_CASES], in_worker(jobs)))


@pytest.mark.parametrize("case", TORCH_CASES, ids=[c.id for c in TORCH_CASES])
def test_against_torch_autograd(case, computed, torch_answers):
    vals, cot, grads, elem, _ = _compute(case, computed)
    wrt = {k: vals[k] for k in wrt_of(case)}
    tg = torch_answers[case.id]
    if "__unsupported__" in tg:
        pytest.skip(f"the torch oracle has no equivalent: {tg['__unsupported__']}")
    rtol = 1e-7 if elem == DOUBLE else 1e-4
    for k in wrt:
        scale = max(float(np.abs(tg[k]).max()), 1e-12)
        np.testing.assert_allclose(grads[k], tg[k], rtol=0, atol=rtol * scale, err_msg=k)


def test_batchnorm_after_conv_is_folded(computed):
    """The Conv -> BatchNormalization cases run without a BatchNormalization node (autodiff.fold); their
    gradients are checked against finite differences and torch like every other case."""
    for cid in ("Conv-BatchNormalization-folded", "Conv-BatchNormalization-folded-no-bias"):
        case = next(c for c in CASES if c.id == cid)
        *_, bw = _compute(case, computed)
        ops = [n.op_type for n in bw.model.graph.node]
        assert "BatchNormalization" not in ops and ops.count("Conv") >= 1, cid


def test_batchnorm_stays_when_weights_outnumber_outputs(computed):
    """A Conv with more weights than twice its outputs keeps its BatchNormalization (folding would make the
    BatchNormalization's gradients weight-sized work); the gradients are checked like every case's."""
    case = next(c for c in CASES if c.id == "Conv-BatchNormalization-weights-dominate")
    *_, bw = _compute(case, computed)
    assert "BatchNormalization" in [n.op_type for n in bw.model.graph.node]


@pytest.mark.parametrize("cid, gemms", [("Conv-unit-stride-per-offset-batch", 0), ("Conv-unit-stride-per-offset-one-image", 6),
                                        ("Conv-unit-stride-more-channels-than-positions", 1)])
def test_dense_weight_gradient_formulation(cid, gemms, computed):
    """Unit-stride dense Convs with at least as many output positions as channels get one product per kernel
    offset (six offsets: six windows of the padded x; Gemm for one image, MatMul for a batch) once the im2col
    would be big (set to always here); with more channels than positions, one im2col Conv and one GEMM.
    Their values are checked with every case's; the sample CNN's small Convs take the im2col path."""
    case = next(c for c in CASES if c.id == cid)
    *_, bw = _compute(case, computed)
    ops = [n.op_type for n in bw.model.graph.node if n.name.startswith("onnxprobe.grad/")]
    if gemms == 1:
        assert ops.count("Gemm") == 1 and ops.count("Conv") >= 1, ops
    else:
        assert ops.count("Slice") >= 6 and ops.count("Gemm") == gemms and ops.count("MatMul") == 6 - gemms, ops
        assert ops.count("Conv") <= 1, ops  # dX's Conv; no im2col Conv


def test_unbroadcast_is_one_reduction_and_skips_size_one_axes(computed):
    """b (4, 1, 1) times a (1, 4, 5, 6): db is one ReduceSum over the two spatial axes and a Squeeze of the
    leading axis; summing the leading axis of size 1 would only copy the tensor (DenseNet-121 spent a
    fifth of its backward pass so)."""
    case = next(c for c in CASES if c.id == "Mul-per-channel-one-image")
    *_, bw = _compute(case, computed)
    reduces = [n for n in bw.model.graph.node if n.op_type == "ReduceSum"]
    assert len(reduces) == 1, [n.name for n in reduces]


def test_backward_nodes_are_tagged_and_gradients_named(computed):
    case = next(c for c in CASES if c.id == "fanout-chain")
    *_, bw = _compute(case, computed)
    assert bw.grads == {"x": "x_grad", "w": "w_grad"}
    bw_nodes = [n for n in bw.model.graph.node if n.name.startswith("onnxprobe.grad/")]
    assert bw_nodes and all(n.doc_string.startswith("onnxprobe backward") for n in bw_nodes)
    sums = [n for n in bw_nodes if n.op_type == "Sum"]
    assert len(sums) == 1 and sums[0].output[0] == "x_grad"  # x feeds Mul twice and Add once: one fan-out sum


@pytest.mark.parametrize("opset", [11, 17])
def test_maxpool_on_an_input_smaller_than_its_kernel(opset, tmp_path):
    """onnxruntime (and ONNX shape inference) still make one window when the input is shorter than the kernel
    (H = 1, kernel 2: the window is clipped); onnx.reference makes none, and torch refuses, so the oracle
    here is numpy: dy goes to the first maximum of the clipped window. Both MaxPool formulations: the
    Indices scatter (opset >= 16) and the per-offset equality masks (older opsets)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 2, 1, 5)).astype(np.float32)
    g = helper.make_graph([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2])], "mp",
                          [helper.make_tensor_value_info("x", FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("y", FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    path = tmp_path / "mp.onnx"
    onnx.save(m, path)
    dy = rng.standard_normal((1, 2, 1, 2)).astype(np.float32)
    # through the API, as `grad` does it: the backward graph carries the inferred shapes, which onnxruntime
    # checks against its own when it loads the model
    gp = api.grad_plan(api.load(path), api.GradSpec(loss="output-grad", output_grad=dy, wrt=("x",)), feed={"x": x})
    sess = ort.InferenceSession(gp.backward.model.SerializeToString(), providers=["CPUExecutionProvider"])
    dx = sess.run([gp.backward.grads["x"]], {"x": x, gp.loss.input: dy})[0]
    y = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    want = np.zeros_like(x)
    for c in range(2):
        for j in range(2):
            cols = x[0, c, 0, 2 * j:2 * j + 2]
            assert y[0, c, 0, j] == cols.max()
            want[0, c, 0, 2 * j + int(np.argmax(cols))] += dy[0, c, 0, j]
    np.testing.assert_array_equal(dx, want)


@pytest.mark.parametrize("attrs", [
    dict(output_shape=[6, 6]), dict(output_shape=[5, 4]), dict(output_shape=[8, 7], auto_pad="SAME_LOWER"),
    dict(output_shape=[5, 4], auto_pad="SAME_UPPER"), dict(output_shape=[7, 8], auto_pad="SAME_UPPER"),
    dict(auto_pad="SAME_LOWER"), dict(output_shape=[6, 6], output_padding=[1, 0])], ids=str)
def test_convtranspose_output_shape_against_onnxruntime(attrs, tmp_path):
    """The forward defines the function: y is linear in x and in W, so onnxruntime's own forward on basis
    tensors gives the exact Jacobian, and <dy, J e_i> the oracle gradient (float32 forward: rtol 1e-5)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 2, 3, 3)).astype(np.float32)
    w = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    g = helper.make_graph([helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], **attrs)], "ct",
                          [helper.make_tensor_value_info("x", FLOAT, list(x.shape)),
                           helper.make_tensor_value_info("w", FLOAT, list(w.shape))],
                          [helper.make_tensor_value_info("y", FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "ct.onnx"
    onnx.save(m, path)
    fwd = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    y = fwd.run(None, {"x": x, "w": w})[0]
    dy = rng.standard_normal(y.shape).astype(np.float32)

    def oracle(name, val, other):
        flat = np.zeros(val.size)
        for i in range(val.size):
            e = np.zeros(val.size, np.float32)
            e[i] = 1
            feed = {name: e.reshape(val.shape), other[0]: other[1]}
            flat[i] = np.sum(fwd.run(None, feed)[0].astype(np.float64) * dy)
        return flat.reshape(val.shape)

    gp = api.grad_plan(api.load(path), api.GradSpec(loss="output-grad", output_grad=dy, wrt=("x", "w")),
                       feed={"x": x, "w": w})
    sess = ort.InferenceSession(gp.backward.model.SerializeToString(), providers=["CPUExecutionProvider"])
    dx, dw = sess.run([gp.backward.grads["x"], gp.backward.grads["w"]], {"x": x, "w": w, gp.loss.input: dy})
    np.testing.assert_allclose(dx, oracle("x", x, ("w", w)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dw, oracle("w", w, ("x", x)), rtol=1e-5, atol=1e-5)


def test_depthwise_weight_gradient_with_dynamic_shapes():
    """With symbolic dimensions the depthwise weight gradient is written with 2-D windows instead of flat
    slices (autodiff/rules/conv.py); both are checked against a direct numpy sum over positions."""
    x_shape, k, pads, dil = (2, 3, 6, 7), (3, 2), [1, 0, 1, 1], [1, 2]
    rng = np.random.default_rng(3)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal((3, 1) + k).astype(np.float32)
    for dims in (list(x_shape), ["n", 3, "h", "w"]):
        g = helper.make_graph(
            [helper.make_node("Conv", ["x", "w"], ["y"], group=3, pads=pads, dilations=dil, kernel_shape=list(k))],
            "dw", [helper.make_tensor_value_info("x", FLOAT, dims)], [helper.make_tensor_value_info("y", FLOAT, None)],
            initializer=[numpy_helper.from_array(w, "w")])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        m = annotate_outputs(infer_shapes(m))
        m.graph.input.append(helper.make_tensor_value_info("dy", FLOAT, None))
        bw = attach_backward(m, {"y": "dy"}, ["w"], outputs=["y"])
        sess = ort.InferenceSession(bw.model.SerializeToString(), providers=["CPUExecutionProvider"])
        ho = x_shape[2] + pads[0] + pads[2] - (k[0] - 1) * dil[0]
        wo = x_shape[3] + pads[1] + pads[3] - (k[1] - 1) * dil[1]
        dy = rng.standard_normal((2, 3, ho, wo)).astype(np.float32)
        got = sess.run([bw.grads["w"]], {"x": x, "dy": dy})[0]
        xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])])
        want = np.zeros(w.shape)
        for a in range(k[0]):
            for b in range(k[1]):
                win = xp[:, :, a * dil[0]:a * dil[0] + ho, b * dil[1]:b * dil[1] + wo]
                want[:, 0, a, b] = np.sum(win * dy, axis=(0, 2, 3))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=str(dims))
        ops = [n.op_type for n in bw.model.graph.node]
        assert ops.count("Slice") == k[0] * k[1]
        assert ops.count("Pad") == (2 if isinstance(dims[2], int) else 1)  # flat: x and dy padded; windows: x


@pytest.mark.parametrize("case", [c for c in CASES if c.ste], ids=[c.id for c in CASES if c.ste])
def test_straight_through_quantization(case, computed):
    """QuantizeLinear -> DequantizeLinear passes dy where round(x / s) + zp is inside the integer range and
    0 where it saturates (QAT's fake quantization). Oracle: numpy, from the integer grid the inputs were
    drawn on (x = (k + u) s with |u| <= 0.3, so round(x / s) = k exactly)."""
    vals, cot, grads, elem, _ = _compute(case, computed)
    x = vals["x"]
    consts = case.consts
    s, zp = consts["s"].astype(np.float64), consts["zp"]
    lo, hi = (0, 255) if zp.dtype == np.uint8 else (-128, 127)
    shape = [1, -1] + [1] * (x.ndim - 2) if np.ndim(s) == 1 else []
    k = np.round(x / np.reshape(s, shape))
    inside = (k + np.reshape(zp.astype(np.float64), shape) >= lo) & (k + np.reshape(zp.astype(np.float64), shape) <= hi)
    assert inside.any() and not inside.all(), "the case should exercise both the pass-through and the saturation"
    dq = cot["y"] * (vals["w"] if "w" in vals else 1.0)
    np.testing.assert_allclose(grads["x"], dq * inside, rtol=1e-5, atol=1e-6)
    if "w" in vals:  # w multiplies the dequantized x: dL/dw = sum of dy * DQ(Q(x)) over the broadcast axes
        q = np.clip(k + np.reshape(zp.astype(np.float64), shape), lo, hi)
        dqx = (q - np.reshape(zp.astype(np.float64), shape)) * np.reshape(s, shape)
        np.testing.assert_allclose(grads["w"], np.sum(cot["y"] * dqx, axis=(0, 2))[:, None], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", [c for c in CASES if c.ref64], ids=[c.id for c in CASES if c.ref64])
def test_backward_in_float64(case, computed):
    """Cases whose forward node onnxruntime runs in float32 only (LSTM, GRU, RNN): the same backward graph,
    run by onnx.reference in float64 (the recurrent forward by tests/recurrent_oracle.py), against float64
    finite differences at 1e-6; test_finite_differences checks onnxruntime's float32 run of it."""
    vals, cot, *_ = _compute(case, computed)
    grads, _, _ = reference_backward(case, vals, cot)
    L = loss_fd(case, build(case, DOUBLE), vals, cot)
    rng = np.random.default_rng(8)
    for name in wrt_of(case):
        v = rng.standard_normal(np.shape(vals[name]))
        h = 1e-6
        fd = (L(dict(vals, **{name: vals[name] + h * v})) - L(dict(vals, **{name: vals[name] - h * v}))) / (2 * h)
        an = float(np.sum(grads[name] * v))
        assert abs(fd - an) <= 1e-6 * max(abs(fd), abs(an), 1e-9) + 1e-9, f"{name}: <grad, v> = {an:.10g}, fd {fd:.10g}"


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("lens", [None, [4, 2, 3]])
def test_recurrent_oracle_matches_onnxruntime(op, direction, lens):
    """The float64 oracle of the recurrent tests (tests/recurrent_oracle.py) computes what onnxruntime's
    kernels compute (float32), sequence_lens, initial states, peepholes and linear_before_reset included."""
    rng = np.random.default_rng(5)
    nd, k, H = 2 if direction == "bidirectional" else 1, {"LSTM": 4, "GRU": 3, "RNN": 1}[op], 3
    vals = {"X": rng.standard_normal((4, 3, 5)), "W": rng.standard_normal((nd, k * H, 5)), "R": rng.standard_normal((nd, k * H, H)),
            "B": rng.standard_normal((nd, 2 * k * H)), "h0": rng.standard_normal((nd, 3, H))}
    ins = ["X", "W", "R", "B", "sl" if lens else "", "h0"]
    if op == "LSTM":
        vals.update(c0=rng.standard_normal((nd, 3, H)), P=rng.standard_normal((nd, 3 * H)))
        ins += ["c0", "P"]
    outs = ["Y", "Yh"] + (["Yc"] if op == "LSTM" else [])
    attrs = dict(hidden_size=H, direction=direction, **({"linear_before_reset": 1} if op == "GRU" else {}))
    inits = [numpy_helper.from_array(np.array(lens, np.int32), "sl")] if lens else []
    g = helper.make_graph([helper.make_node(op, ins, outs, **attrs)], "rnn",
                          [helper.make_tensor_value_info(n, FLOAT, list(v.shape)) for n, v in vals.items()],
                          [helper.make_tensor_value_info(o, FLOAT, None) for o in outs], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    got = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {n: v.astype(np.float32) for n, v in vals.items()})
    want = run_recurrent(op, vals["X"], vals["W"], vals["R"], vals["B"], lens, vals["h0"], vals.get("c0"), vals.get("P"),
                         direction=direction, linear_before_reset=attrs.get("linear_before_reset", 0))
    for o, a, b in zip(outs, got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5, err_msg=o)


@pytest.mark.parametrize("case", [c for c in CASES if c.op == "LSTM"], ids=[c.id for c in CASES if c.op == "LSTM"])
def test_lstm_states_recomputed(case, computed, monkeypatch):
    """The LSTM's other way to its per-step states (rules/lstm.py, STATES = "recompute": the LSTM node stays,
    the gates come back from its Y): float64 through onnx.reference against finite differences, as
    test_backward_in_float64 checks the default; onnxruntime's float32 run of it against those."""
    from onnxprobe.autodiff.rules import lstm as lstm_rule

    vals, cot, _, _, bw_default = _compute(case, computed)
    assert "LSTM" not in [n.op_type for n in bw_default.model.graph.node]  # the default replaced the node
    monkeypatch.setattr(lstm_rule, "STATES", "recompute")
    grads, _, bw = reference_backward(case, vals, cot)
    assert "LSTM" in [n.op_type for n in bw.model.graph.node]
    L = loss_fd(case, build(case, DOUBLE), vals, cot)
    rng = np.random.default_rng(9)
    for name in wrt_of(case):
        v = rng.standard_normal(np.shape(vals[name]))
        h = 1e-6
        fd = (L(dict(vals, **{name: vals[name] + h * v})) - L(dict(vals, **{name: vals[name] - h * v}))) / (2 * h)
        an = float(np.sum(grads[name] * v))
        assert abs(fd - an) <= 1e-6 * max(abs(fd), abs(an), 1e-9) + 1e-9, f"{name}: <grad, v> = {an:.10g}, fd {fd:.10g}"
    if case.ort:
        g32, _, _ = run_backward(case, vals, cot)
        for name in wrt_of(case):
            np.testing.assert_allclose(g32[name], grads[name], rtol=0, atol=2e-4 * max(float(np.abs(grads[name]).max()), 1e-9))


@pytest.mark.parametrize("precision", ["float64", "float64 (float32 gradients)", "float32"])
def test_the_check_finds_a_gradient_wrongly_zero(precision):
    """check_gradients: a gradient with entries wrongly 0 (a rule that drops a contribution) fails, however
    few they are, though the direction weighted by the gradient never moves them; the true gradient, and a
    gradient truly 0 where the loss does not move, pass. The loss: sum(c * tanh(t)), differentiated by hand."""
    from onnxprobe.autodiff.check import CheckItem, check_gradients

    rng = np.random.default_rng(3)
    t = rng.standard_normal(200)
    c = rng.standard_normal(200)
    c[:50] = 0.0  # the loss does not depend on these: their gradient is truly 0
    true = c * (1 - np.tanh(t) ** 2)
    loss = (lambda name, delta: float(np.sum(c * np.tanh(t + delta))))
    item = (lambda g: CheckItem("t", g, t, float(np.sqrt(np.mean(t * t)))))
    assert check_gradients([item(true)], loss, precision)["t"]["ok"]
    for wrong in (slice(60, 61), slice(60, 140, 2)):  # one entry, and 40 of them
        g = true.copy()
        g[wrong] = 0.0
        assert check_gradients([item(g)], loss, precision)["t"]["ok"] is False, wrong
