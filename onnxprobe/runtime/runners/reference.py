"""The ``onnx.reference.ReferenceEvaluator`` runner: onnx's own Python implementation of every op, slow
but independent of onnxruntime, for checking onnxruntime's kernels (``diff --vs-reference``)."""

from __future__ import annotations

import time
import warnings

import numpy as np
import onnx

from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun
from onnx.reference.ops.op_batch_normalization import BatchNormalization_9, _batchnorm_test_mode

from onnxprobe.errors import ExecutionError, SessionError, first_line
from onnxprobe.graph.builder import default_opset
from onnxprobe.graph.densify import dense_weights
from onnxprobe.graph.weight_files import filled
from onnxprobe.graph.walk import walk
from onnxprobe.runtime.feeds import fed
from onnxprobe.runtime.runners.base import GraphRunner
from onnxprobe.runtime.runners.reference_ops import version_corrections
from onnxprobe.types import element_count


class ReferenceRunner(GraphRunner):
    kind = "onnx.reference"

    def describe(self) -> str:
        return f"{self.label} (onnx.reference)"

    def execute(self, model: onnx.ModelProto, feeds: dict, outputs: list[str], *, device_outputs: list[str] = (),
                keep_on_device: bool = False, key=None) -> tuple[dict, float]:
        names = list(dict.fromkeys(list(outputs) + list(device_outputs)))
        t0 = time.perf_counter()
        feeds = fed(model, feeds)  # its undeclared names left out, its unread inputs zeros
        try:
            # an op's NaN or Inf (a mean of nothing, a division by zero) is a value the diff reports, not a
            # warning on stderr
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                # sparse weights dense: onnx.reference reads none ("SparseTensorProto has no data_location field")
                evaluator = ReferenceEvaluator(dense_weights(filled(model)), new_ops=corrected_ops(model))
        except Exception as e:  # noqa: BLE001 - an op it has no implementation of: it cannot load the model,
            # whatever the inputs (a SessionError: no hint about guessed dimensions or random integers follows)
            # (its NotImplementedError's first line ends 'and domain D in', the ops it has on the lines after it)
            why = "onnx.reference has no implementation of that op" if isinstance(e, NotImplementedError) else \
                f"{type(e).__name__}: {first_line(e)[:300]}"
            raise SessionError(f"onnx.reference could not load the model at {_culprit(model, e)}: {why}") from e
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                res = evaluator.run(names, _narrowed(model, feeds))
        except Exception as e:  # noqa: BLE001 - the evaluator raises whatever an op implementation raises
            raise ExecutionError(f"onnx.reference could not run {_culprit(model, e)}: {type(e).__name__}: "
                                 f"{first_line(e)[:300]}") from e
        return {n: _widened(np.asarray(v)) for n, v in zip(names, res)}, time.perf_counter() - t0


def _culprit(model: onnx.ModelProto, e: BaseException) -> str:
    """The node whose implementation raised ``e``, as "node 'NAME' (OP_TYPE, opset N)", or "the model".

    onnx.reference's messages name neither the node nor (as an op runs) its op type. The innermost frame of
    the traceback that holds a node tells: an op's own frames (``self``, an OpRun, for an error as it runs,
    in a subgraph too) or the evaluator's as it looks an implementation up (``node``, a NodeProto)."""
    node = None
    tb = e.__traceback__
    while tb is not None:
        for v in (tb.tb_frame.f_locals.get("self"), tb.tb_frame.f_locals.get("node")):
            v = getattr(v, "onnx_node", v)
            if isinstance(v, onnx.NodeProto):
                node = v
                break
        tb = tb.tb_next
    if node is None:
        return "the model"
    opsets = {o.domain or "ai.onnx": o.version for o in model.opset_import}
    domain = node.domain or "ai.onnx"
    op = node.op_type if domain == "ai.onnx" else f"{domain}.{node.op_type}"
    version = opsets.get(domain)
    where = f", opset {version}" if version is not None else ""
    return f"node {_listed_name(model, node)!r} ({op}{where})"


def _listed_name(model: onnx.ModelProto, node: onnx.NodeProto) -> str:
    """``node`` as listings show it: its name, or an unnamed one's ``OpType_index`` (qualified by its bodies
    inside one), found by the outputs it writes; '(unnamed)' where none matches."""
    if node.name:
        return node.name
    for site in walk(model):
        if site.node.op_type == node.op_type and list(site.node.output) == list(node.output):
            return site.path
    return "(unnamed)"


def _widened(a: np.ndarray) -> np.ndarray:
    """A bfloat16 value as float32, exactly (the same numbers), as onnxruntime's are read back: onnx.reference
    returns ml_dtypes' bfloat16, a void dtype to numpy, which got no statistics and --save wrote as raw |V2."""
    return a.astype(np.float32) if a.dtype.name == "bfloat16" else a


def _narrowed(model: onnx.ModelProto, feeds: dict) -> dict:
    """The feeds, a bfloat16 input given widened (a value read back from a run) in the graph's own type again:
    onnx.reference would compute the graph in the float32 it is given."""
    bf16 = {i.name for i in model.graph.input if i.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16}
    out = {k: np.asarray(v) for k, v in feeds.items()}
    if bf16:
        from ml_dtypes import bfloat16  # onnx's own bfloat16 type

        out = {k: v.astype(bfloat16) if k in bf16 and v.dtype.kind == "f" else v for k, v in out.items()}
    return out


def corrected_ops(model: onnx.ModelProto) -> list[type[OpRun]]:
    """Our implementations of the ops onnx.reference gets wrong for this model's opset (``new_ops``).

    BatchNormalization at opsets 7-13: onnx.reference (1.16-1.23 at least) runs BatchNormalization_9 in
    training mode whenever ``momentum`` is set, which the schema's default always is, and BatchNormalization_6
    (what opsets 7 and 8 get) whenever ``is_test`` is absent, which it is after opset 6: every such layer is
    normalised with the batch's own statistics, and ``diff --vs-reference`` blamed onnxruntime for it (a
    one-node opset-9 model differed by 0.27). Their specification decides the mode by the number of
    outputs: one output is inference, with the given mean and variance.

    Softmax, LogSoftmax and Hardmax before opset 13: onnx.reference (1.23 at least) runs them along one
    axis with opset 13's default (-1), where the specification of opsets 1-12 coerces the input to 2-D at
    ``axis`` (default 1: [N, C x H x W]) and normalises each row whole; a zoo model's [1, 1000, 1, 1]
    Softmax came out all ones and ``diff --vs-reference`` blamed onnxruntime's (right) 0.001s.

    And the ops of runners.reference_ops (DequantizeLinear before opset 19, RoiAlign before 16, MaxPool,
    ConvTranspose, LRN, LpNormalization, Pad, ...): each one's docstring says what onnx.reference gets wrong."""
    opset = default_opset(model)
    return (([BatchNormalization] if 7 <= opset <= 13 else []) + (list(COERCED_2D) if opset < 13 else [])
            + version_corrections(opset))


class BatchNormalization(OpRun):
    """BatchNormalization-7/9 as specified (``corrected_ops``): inference with one output."""

    op_domain = ""

    def _run(self, x, scale, bias, mean, var, epsilon=None, momentum=None, spatial=None, training_mode=None, is_test=None):  # noqa: ARG002
        if len(self.onnx_node.output) == 1:
            return (_batchnorm_test_mode(x, scale, bias, mean, var, epsilon=1e-5 if epsilon is None else epsilon),)
        return BatchNormalization_9._run(self, x, scale, bias, mean, var, epsilon=epsilon, momentum=momentum)


def _rows(x: np.ndarray, node) -> np.ndarray:
    """``x`` as the 2-D [prod(dims before axis), prod(dims from axis)] of opsets 1-12 (axis default 1)."""
    axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
    axis = axis + x.ndim if axis < 0 else axis
    return x.reshape(element_count(x.shape[:axis]), -1)


def _softmax(f: np.ndarray) -> np.ndarray:
    e = np.exp(f - f.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _log_softmax(f: np.ndarray) -> np.ndarray:
    d = f - f.max(axis=1, keepdims=True)
    return d - np.log(np.exp(d).sum(axis=1, keepdims=True))


def _hardmax(f: np.ndarray) -> np.ndarray:
    out = np.zeros_like(f)
    out[np.arange(f.shape[0]), f.argmax(axis=1)] = 1  # the first of equal maxima, as the specification says
    return out


class _Coerced2D(OpRun):
    """An op of opsets 1-12 that normalises the rows of its input coerced to 2-D (``corrected_ops``)."""

    op_domain = ""
    rows = staticmethod(_softmax)

    def _run(self, x, axis=None):  # noqa: ARG002 - the node's own attribute decides (the schema default is opset 13's)
        if x.size == 0:
            return (x,)
        f = _rows(x, self.onnx_node).astype(np.promote_types(x.dtype, np.float32))
        return (self.rows(f).reshape(x.shape).astype(x.dtype),)


COERCED_2D = tuple(type(op, (_Coerced2D,), {"rows": staticmethod(fn), "__doc__": f"{op}-1..12 as specified"})
                   for op, fn in (("Softmax", _softmax), ("LogSoftmax", _log_softmax), ("Hardmax", _hardmax)))
