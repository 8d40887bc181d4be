"""The output a gradient's loss is taken of: which one (``pick_output``, ``tensor_output``), its shape for a feed
(``output_shape``, ``loss_shape``) and the refusal of one with no element (``refuse_empty``, ``EmptyBatch``)."""

from __future__ import annotations

import numpy as np
import onnx

from onnxprobe.errors import ExecutionError, ModelError, UsageError, setting_error
from onnxprobe.graph.select import Selection, select
from onnxprobe.graph.shapes import concrete_shapes, static_shape, value_types
from onnxprobe.runtime.runners.ort import OrtRunner
from onnxprobe.types import RunConfig


def pick_output(model: onnx.ModelProto, name: str | None) -> str:
    """The output the loss is taken of: ``name`` where it is one of the model's, else (None) its first."""
    outs = [o.name for o in model.graph.output]
    if name is None:
        if not outs:
            raise ModelError("the model has no outputs: no loss to differentiate")  # a model problem: exit 1
        return outs[0]
    if name not in outs:
        raise setting_error(UsageError, ("output", "--loss-output"), f"{name!r}: not an output of the model; its outputs are: {', '.join(outs)}")
    return name


def tensor_output(model: onnx.ModelProto, name: str, given: bool) -> str:
    """``name``, when it is a tensor: a sequence, optional or map output has no loss to differentiate."""
    from onnxprobe.graph.summary import non_tensor_outputs

    skip = non_tensor_outputs(model)
    if name not in skip:
        return name
    kind = skip[name]
    from onnxprobe.graph.builder import float_outputs

    # a float one: an int64 label, which the next run refuses, was advised (a ZipMap classifier's)
    others = [o for o in float_outputs(model) if o not in skip]
    hint = f"pick a float tensor output: {', '.join(others)}" if others else "the model has no float tensor output"
    raise setting_error(UsageError, ("output", "--loss-output"),
                        f"{name!r}{'' if given else ' (the first output)'} is {kind}, not a tensor: no loss to differentiate; {hint}")


class EmptyBatch(UsageError):
    """An input whose loss output has no element: refused alone, skipped in a dataset (``grad_dataset``)."""


def refuse_empty(base: onnx.ModelProto, output: str, feed: dict[str, np.ndarray], source: onnx.ModelProto,
                 cache: bool = True) -> None:
    """An output of no elements for this feed (an empty batch: --shape x=0x3x8x8) has no loss to
    differentiate: said here, before its backward graph fails in onnxruntime (a Reshape of 0 elements).
    Where the output's shape is not known for this feed and an input is empty, one run of the model as
    declared (``source``) tells it: shape inference with the inputs fixed to a 0 dimension can refuse
    what onnxruntime runs (GPT-2's dynamo export: Reshape to [0, 8, -1, 32])."""
    t = value_types(base).get(output)
    dims = [d.dim_value if d.HasField("dim_value") else None for d in t.tensor_type.shape.dim] if t is not None else []
    unknown = t is None or not t.tensor_type.HasField("shape") or None in dims
    if unknown and any(np.size(v) == 0 for v in feed.values()):
        dims = list(output_shape(source, output, feed, cache) or dims)
    if 0 in dims:
        empty = [f"{k} {'x'.join(map(str, np.shape(v)))}" for k, v in feed.items() if np.size(v) == 0]
        raise EmptyBatch(f"output {output!r} is empty (shape {'x'.join('?' if d is None else str(d) for d in dims)})"
                         f"{' for the empty input ' + ', '.join(empty) if empty else ''}: an empty batch has no loss "
                         "to differentiate; give at least one sample")


def output_shape(model: onnx.ModelProto, output: str, feed: dict[str, np.ndarray], cache: bool = True) -> tuple[int, ...] | None:
    """The shape ``output`` has for ``feed``: shape inference's for those input shapes, else one run's."""
    shape = concrete_shapes(model, {k: tuple(np.shape(v)) for k, v in feed.items()}).get(output)
    if shape is None:
        refs = [r for r in select(model, Selection(all=True), strict=False) if r.name == output]
        try:
            shape = OrtRunner(model, RunConfig(cache=cache)).probe(refs, feed, stats=False, outputs=False).shapes.get(output) if refs else None
        except ExecutionError:
            return None
    return tuple(shape) if shape is not None else None


def loss_shape(base: onnx.ModelProto, output: str, source: onnx.ModelProto, feed: dict[str, np.ndarray],
               cache: bool = True) -> tuple[int, ...] | None:
    """The shape the loss's extra input (labels, target, output gradient) is checked against: the output's for
    ``feed``, not its declared one (a batch of 2 labels for an output [?, 4] of batch 1 broadcast into another
    loss): ``base``'s where ``_runtime_shapes`` read one, else ``output_shape`` of the model as declared (``source``)."""
    known = static_shape(value_types(base).get(output))
    return tuple(known) if known is not None and all(isinstance(d, int) for d in known) else \
        output_shape(source, output, feed, cache)
