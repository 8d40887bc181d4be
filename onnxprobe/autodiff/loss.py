"""Losses, appended to the forward graph as ordinary ONNX nodes (so the backward pass goes through them
with the same rules), and the seed of the backward pass.

- ``sum``: L = sum(y);  ``mean``: L = mean(y) (of a float16 / bfloat16 y, these, mse and output-grad's
  sum(y * dy) are accumulated in float32)
- ``mse``: L = mean((y - target)^2), ``target`` a new graph input shaped like y
- ``cross-entropy``: L = mean over samples of -log softmax(y)[label] along the class axis; ``labels`` is
  a new integer input (class indices, y's shape without the class axis) or a float input shaped like y
  (class probabilities). The class axis is the last one when the labels' shape is y's shape without it
  (language models), else axis 1 (torch's convention); for probabilities, the last axis when they sum to 1
  along it, else axis 1. An output that is already a Softmax's
  (``probabilities``) is taken as the probabilities they are: -log p[label] (the model's negative log
  likelihood), p clamped at the dtype's smallest normal number (an underflowed 0 is no -inf); a log-softmax
  of probabilities is ~ln(classes) whatever the model predicts (8.799 = ln 6625 on PP-OCR's recognizer).
- ``output-grad``: dL/dy given directly as a new input shaped like y; the backward pass is seeded with it
  and the reported loss is sum(y * dy).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper

from onnxprobe.graph.builder import FLOAT_TYPES, GraphBuilder, float_outputs, np_dtype
from onnxprobe.errors import UsageError, setting_error, settings_error
from onnxprobe.graph.shapes import static_shape
from onnxprobe.text import as_word
from onnxprobe.types import BACKWARD_TAG

KINDS = ("sum", "mean", "mse", "cross-entropy", "output-grad")
INPUT_FOR = {"mse": "target", "cross-entropy": "labels", "output-grad": "output_grad"}
# the settings the loss takes, as the API (GradSpec's fields) and the command line (its flags) name them
LOSS, TARGET, LABELS, OUTPUT_GRAD = (("loss", "--loss"), ("target", "--target"), ("labels", "--labels"),
                                     ("output_grad", "--output-grad"))


@dataclass
class Loss:
    kind: str
    output: str  # the model output the loss is computed from
    loss: str  # scalar loss tensor
    seeds: dict[str, str]  # tensor -> its gradient, where the backward pass starts
    input: str | None = None  # the new graph input (target, labels or output gradient)
    class_axis: int | None = None
    probabilities: bool = False  # cross-entropy of an output that is a Softmax's: -log p, not -log softmax(p)


def _elem_of(model: onnx.ModelProto, name: str) -> tuple[int | None, tuple | None]:
    from onnxprobe.autodiff.engine import annotate_outputs, shaped_types

    tp = shaped_types(annotate_outputs(model)).get(name)
    if tp is None or not tp.HasField("tensor_type"):
        return None, None
    return tp.tensor_type.elem_type or None, static_shape(tp)


def class_axis(y_shape: tuple | None, labels_shape: tuple[int, ...]) -> int:
    """Where the classes are: the last axis when labels == y without it, else axis 1."""
    if y_shape is None:
        return 1 if len(labels_shape) <= 1 else -1
    r = len(y_shape)
    if len(labels_shape) != r - 1:
        raise setting_error(UsageError, LABELS, f": shape {list(labels_shape)} should be the output's shape without its class axis "
                         f"(output shape {_fmt(y_shape)}), or the output's shape for class probabilities")

    def same(a, b):
        return [x == z or not isinstance(x, int) for x, z in zip(a, b)]

    if r == 2 or all(same(y_shape[:-1], labels_shape)):
        return r - 1
    if all(same(y_shape[:1] + y_shape[2:], labels_shape)):
        return 1
    raise setting_error(UsageError, LABELS, f": shape {list(labels_shape)} does not match the output's shape {_fmt(y_shape)} "
                     f"without its last axis or without axis 1")


def _fmt(s) -> str:
    return "[" + ", ".join("?" if not isinstance(d, int) else str(d) for d in s) + "]"


def attach_loss(model: onnx.ModelProto, output: str, kind: str, *, extra: np.ndarray | None = None,
                opset: int, names: set[str], shape: tuple[int, ...] | None = None, probabilities: bool = False) -> Loss:
    """Append the loss of ``output`` to ``model`` (modified in place). ``extra``: the target / labels /
    output gradient value, whose dtype (and, for labels, shape) decide the new input's type. ``shape``: the
    output's shape for the run's inputs, which ``extra`` must fit (else its declared, maybe dynamic, one).
    ``probabilities``: the output is a Softmax's, cross-entropy takes its log (the module doc)."""
    if kind not in KINDS:
        raise setting_error(UsageError, LOSS, f"{as_word(kind)}: choose one of {', '.join(KINDS)}")
    elem, yshape = _elem_of(model, output)
    if shape is not None:
        yshape = tuple(shape)
    if elem is not None and elem not in FLOAT_TYPES:
        kind_name = TensorProto.DataType.Name(elem).lower()
        # the outputs to pick from, by name (an skl2onnx classifier's label comes first, its probabilities after it)
        floats = [o for o in float_outputs(model) if o != output]
        raise settings_error(UsageError, lambda say: f"output {output!r} is {kind_name}; gradients need a float output " + (
            f"(pick one: {say(('output', '--loss-output'))} {', '.join(floats)})" if floats else
            "and the model has no other float tensor output: no loss to differentiate"))
    elem = elem or TensorProto.FLOAT
    dtype = np_dtype(elem)
    b = GraphBuilder(names, opset, scope="onnxprobe.loss", doc=f"onnxprobe loss ({kind}) of {output}", strict=True)
    g = model.graph
    new_input = None
    if kind in INPUT_FOR:
        if extra is None:
            flag = {"mse": TARGET, "cross-entropy": LABELS, "output-grad": OUTPUT_GRAD}[kind][1]
            raise setting_error(UsageError, LOSS, f"{kind} needs {flag} FILE.npy")
        new_input = b.fresh(INPUT_FOR[kind])
    y = output
    axis = None
    # a half-precision output's sum, mean or mse is accumulated in float32: the sum of 40000 float16 2s is
    # 80000, over float16's 65504 (inf, every gradient finite); the Cast's rule hands dL/dy back in y's type
    half = elem in (TensorProto.FLOAT16, TensorProto.BFLOAT16)
    wide = (lambda t: b.Cast(t, to=TensorProto.FLOAT)) if half else (lambda t: t)  # noqa: E731
    if kind == "sum":
        loss = b.reduce("ReduceSum", wide(y), None, keepdims=0)
    elif kind == "mean":
        loss = b.reduce("ReduceMean", wide(y), None, keepdims=0)
    elif kind == "mse":
        _check_like(extra, yshape, dtype, TARGET, output)
        d = b.Sub(wide(y), wide(new_input))
        loss = b.reduce("ReduceMean", b.Mul(d, d), None, keepdims=0)
        g.input.append(helper.make_tensor_value_info(new_input, elem, _dims(yshape, extra.shape)))
    elif kind == "output-grad":
        _check_like(extra, yshape, dtype, OUTPUT_GRAD, output)
        loss = b.reduce("ReduceSum", b.Mul(wide(y), wide(new_input)), None, keepdims=0)
        g.input.append(helper.make_tensor_value_info(new_input, elem, _dims(yshape, extra.shape)))
    else:
        loss, axis = _cross_entropy(b, g, y, yshape, elem, dtype, extra, new_input, probabilities)
    loss = b.op("Identity", loss, out=b.fresh("loss"))
    g.node.extend(b.nodes)
    # a scalar, whatever inference can tell of y (a Loop output of unknown rank): an exported model's graph
    # outputs must declare a shape (onnx.checker)
    g.value_info.append(helper.make_tensor_value_info(loss, TensorProto.FLOAT if half and kind != "cross-entropy" else elem, []))
    seed_b = GraphBuilder(names, opset, scope=BACKWARD_TAG + "seed", doc="onnxprobe backward: dL/dL = 1", strict=True)
    if kind == "output-grad":
        seeds = {y: new_input}
    else:
        seeds = {loss: seed_b.const(np.array(1.0, np.float32 if half and kind != "cross-entropy" else dtype))}
        g.node.extend(seed_b.nodes)
    return Loss(kind, output, loss, seeds, new_input, axis, probabilities and kind == "cross-entropy")


def _dims(yshape, fallback):
    return list(yshape) if yshape is not None else list(fallback)


def _check_finite(value: np.ndarray, flag: tuple[str, str]) -> None:
    """NaN or Inf in a target, labels or an output gradient makes every gradient NaN: refused, not run."""
    bad = ~np.isfinite(value.astype(np.float64))
    if bad.any():
        nan = int(np.isnan(value.astype(np.float64)).sum())
        what = "NaN" if nan == bad.sum() else "Inf" if not nan else "NaN or Inf"
        at = [int(i) for i in np.argwhere(bad)[0]]
        raise setting_error(UsageError, flag, f": {int(bad.sum())} of its {value.size} values are {what} (the first at {at}); "
                         "the loss and every gradient would be NaN")


def _probability_axis(p: np.ndarray) -> int:
    """Float labels are class probabilities: none negative, each sample's summing to 1 along the class
    axis (a float16 softmax sums to 1 within ~1e-3; 1e-2 leaves room). The class axis is the one integer
    labels would have: the last, else axis 1 (torch's), whichever the probabilities sum to 1 along (one-hot
    labels (2, 3, 6) along the last axis were read along axis 1: a wrong loss, silently)."""
    p64 = p.astype(np.float64)
    if (p64 < 0).any():
        at = [int(i) for i in np.argwhere(p64 < 0)[0]]
        n = int((p64 < 0).sum())
        raise setting_error(UsageError, LABELS, f": {n} {'probabilities are' if n > 1 else 'probability is'} negative (the first, {p64[tuple(at)]:.6g}, "
                         f"at {at}); float labels are class probabilities (or give integer class indices)")
    if p.ndim == 0:
        raise setting_error(UsageError, LABELS, ": one float value; float labels are class probabilities, shaped like the output")
    tol = 1e-2 if p.dtype.itemsize <= 2 else 1e-3
    axes = [p.ndim - 1] + ([1] if p.ndim > 2 else [])
    for axis in axes:
        if not (np.abs(p64.sum(axis=axis) - 1) > tol).any():
            return axis
    sums = p64.sum(axis=axes[0])
    off = np.abs(sums - 1) > tol
    at = [int(i) for i in np.argwhere(off)[0]]
    raise setting_error(UsageError, LABELS, f": the probabilities of {int(off.sum())} of the {sums.size} samples do not sum to 1 along the "
                     f"class axis {axes[0]}{' (nor along axis 1)' if len(axes) > 1 else ''} (the first, at {at}, sums to "
                     f"{sums[tuple(at)]:.6g}); float labels are class probabilities (or give integer class indices)")


def _check_like(value: np.ndarray, yshape, dtype, flag: tuple[str, str], output: str) -> None:
    if value.dtype.kind == "f":
        _check_finite(value, flag)
    if value.dtype != dtype:
        raise setting_error(UsageError, flag, f": dtype {value.dtype}, the output {output!r} is {dtype}")
    if yshape is not None:
        if len(yshape) != value.ndim or any(isinstance(a, int) and a != b for a, b in zip(yshape, value.shape)):
            raise setting_error(UsageError, flag, f": shape {list(value.shape)}, but output {output!r} has shape {_fmt(yshape)}")


def _cross_entropy(b: GraphBuilder, g, y, yshape, elem, dtype, labels: np.ndarray, name: str, probabilities: bool = False):
    soft = labels.dtype.kind == "f"
    r = len(yshape) if yshape is not None else None
    if soft:
        _check_like(labels, yshape, dtype, LABELS, y)
        axis = _probability_axis(labels)
        g.input.append(helper.make_tensor_value_info(name, elem, _dims(yshape, labels.shape)))
    else:
        if labels.dtype.kind not in "iu":
            raise setting_error(UsageError, LABELS, f": dtype {labels.dtype}; give integer class indices or float probabilities")
        axis = class_axis(yshape, labels.shape)
        r = r if r is not None else labels.ndim + 1
        if yshape is not None:
            rest = [d for i, d in enumerate(yshape) if i != axis]
            if any(isinstance(d, int) and d != got for d, got in zip(rest, labels.shape)):
                raise setting_error(UsageError, LABELS, f": shape {list(labels.shape)}, but output {y!r} of shape {_fmt(yshape)} has "
                                 f"{_fmt(rest)} without its class axis {axis}")
        classes = yshape[axis] if yshape is not None else None
        if labels.size and (int(labels.min()) < 0 or (isinstance(classes, int) and int(labels.max()) >= classes)):
            bad = int(labels.min()) if int(labels.min()) < 0 else int(labels.max())
            of = f" of the {classes} classes (0..{classes - 1})" if isinstance(classes, int) else ""
            raise setting_error(UsageError, LABELS, f": class index {bad} is not one{of} of output {y!r}; give class indices "
                             "0..C-1 along the class axis, or class probabilities")
        lshape = [d for i, d in enumerate(yshape) if i != axis] if yshape is not None else list(labels.shape)
        g.input.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(labels.dtype), lshape))
    r = r if r is not None else labels.ndim + (0 if soft else 1)
    axis = axis + r if axis < 0 else axis
    perm = None if axis == r - 1 else [i for i in range(r) if i != axis] + [axis]
    yt = b.Transpose(y, perm=perm) if perm else y
    if not soft and labels.ndim == 0:  # one sample: a batch of one (a scalar's one-hot has no rank inference tells)
        yt, name, r = b.unsqueeze(yt, [0]), b.unsqueeze(name, [0]), r + 1
    if probabilities:
        lsm = b.Log(b.Max(yt, b.const(np.array(np.finfo(dtype).tiny, dtype))))
    else:
        lsm = b.LogSoftmax(yt, axis=-1 if b.opset >= 13 else r - 1)
    if soft:
        target = b.Transpose(name, perm=perm) if perm else name
    else:
        idx = name if labels.dtype == np.int64 else b.Cast(name, to=TensorProto.INT64)
        # a scalar depth: the spec allows rank 1 too, but onnx.reference's OneHot takes only a scalar
        depth = b.squeeze(b.shape(yt, r - 1, r), [0])
        # an int64 one-hot, then Cast: onnxruntime has no OneHot with double values, and the float64 copy
        # that grad --check runs turns float constants into double (its check fell back to float32)
        onehot = b.OneHot(idx, depth, b.const(np.array([0, 1], np.int64)), axis=-1)
        target = b.Cast(onehot, to=elem)
    picked = b.reduce("ReduceSum", b.Mul(target, lsm), [r - 1], keepdims=0)
    loss = b.Neg(b.reduce("ReduceMean", picked, None, keepdims=0))
    return loss, axis

