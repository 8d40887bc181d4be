"""A small node builder for the backward graph: fresh deterministic names, deduplicated constants, and
the ops whose signature changed across opsets (Reduce* / Squeeze / Unsqueeze / Split axes, Slice and Pad
arguments, Shape start/end) emitted the way the model's opset wants them.

Every node the builder emits is tagged: its name starts with ``TAG`` and its doc_string says which
forward node it differentiates, so a probe selects backward tensors with ``--name 'onnxprobe.grad/*'``.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxprobe.errors import OpsetTooOld
from onnxprobe.graph.builder import fresh_name

TAG = "onnxprobe.grad/"
FLOAT_TYPES = {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16}

Axes = "Sequence[int] | str | None"


def np_dtype(elem: int) -> np.dtype:
    return np.dtype(helper.tensor_dtype_to_np_dtype(elem))


class GraphBuilder:
    """Emits nodes into ``self.nodes`` (not yet in any graph). ``names`` is shared with the model so
    every new name is unique; ``scope`` prefixes node and tensor names."""

    def __init__(self, names: set[str], opset: int, scope: str = "onnxprobe.grad", doc: str = ""):
        self.names = names
        self.opset = opset
        self.scope = scope
        self.doc = doc
        self.nodes: list[onnx.NodeProto] = []
        self.consts: dict[tuple, str] = {}
        self.static: dict[str, tuple] = {}  # static shapes of emitted tensors, when a helper knows them

    # -- names -----------------------------------------------------------------------------------------
    def fresh(self, base: str) -> str:
        return fresh_name(self.names, base)

    # -- raw emission ----------------------------------------------------------------------------------
    def op(self, op_type: str, *inputs: str | None, n_out: int = 1, out: str | None = None, **attrs):
        """Emit one node; returns its output name (or the list of names when ``n_out > 1``)."""
        ins = ["" if i is None else i for i in inputs]
        while ins and ins[-1] == "":
            ins.pop()
        outs = [out or self.fresh(f"{self.scope}/{op_type.lower()}")] if n_out == 1 else [
            self.fresh(f"{self.scope}/{op_type.lower()}_{k}") for k in range(n_out)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        node = helper.make_node(op_type, ins, outs, name=self.fresh(f"{self.scope}/{op_type}"), **attrs)
        if self.doc:
            node.doc_string = self.doc
        self.nodes.append(node)
        return outs[0] if n_out == 1 else outs

    def __getattr__(self, name: str):
        # g.Mul(a, b) == g.op("Mul", a, b): rules read like the maths
        if name[:1].isupper():
            return lambda *inputs, **attrs: self.op(name, *inputs, **attrs)
        raise AttributeError(name)

    # -- constants -------------------------------------------------------------------------------------
    def const(self, value, dtype=None) -> str:
        a = np.asarray(value, dtype=dtype)
        key = (a.dtype.str, a.shape, a.tobytes())
        if key not in self.consts:
            out = self.fresh(f"{self.scope}/const")
            node = helper.make_node("Constant", [], [out], name=self.fresh(f"{self.scope}/Constant"),
                                    value=numpy_helper.from_array(a, out))
            if self.doc:
                node.doc_string = self.doc
            self.nodes.append(node)
            self.consts[key] = out
            self.static[out] = a.shape
        return self.consts[key]

    def ints(self, values: Sequence[int]) -> str:
        return self.const(np.array(list(values), np.int64))

    # -- opset-dependent helpers -----------------------------------------------------------------------
    def _axes_input(self, axes) -> str:
        return axes if isinstance(axes, str) else self.ints(axes)

    def reduce(self, op: str, x: str, axes: Axes = None, keepdims: int = 1) -> str:
        """Reduce* over ``axes`` (None: all axes; a tensor name: runtime axes, opset >= 13/18 only)."""
        if axes is None:
            return self.op(op, x, keepdims=keepdims)
        as_input = self.opset >= (13 if op == "ReduceSum" else 18)
        if as_input:
            return self.op(op, x, self._axes_input(axes), keepdims=keepdims)
        if isinstance(axes, str):
            need = 13 if op == "ReduceSum" else 18
            raise OpsetTooOld(f"{op} with runtime axes needs opset {need} (model opset {self.opset})", need)
        return self.op(op, x, axes=list(axes), keepdims=keepdims)

    def reduce_sum(self, x: str, axes: Axes = None, keepdims: int = 1) -> str:
        if axes is not None and not isinstance(axes, str) and len(axes) == 0:
            return x
        return self.reduce("ReduceSum", x, axes, keepdims)

    def reduce_sum_runtime(self, x: str, axes: str) -> str:
        """ReduceSum(keepdims=1) over a runtime (possibly empty) list of axes: opset >= 13."""
        return self.op("ReduceSum", x, axes, keepdims=1, noop_with_empty_axes=1)

    def unsqueeze(self, x: str, axes) -> str:
        if self.opset >= 13:
            return self.op("Unsqueeze", x, self._axes_input(axes))
        if isinstance(axes, str):
            raise OpsetTooOld(f"Unsqueeze with runtime axes needs opset 13 (model opset {self.opset})", 13)
        return self.op("Unsqueeze", x, axes=list(axes))

    def squeeze(self, x: str, axes) -> str:
        if self.opset >= 13:
            return self.op("Squeeze", x, self._axes_input(axes))
        return self.op("Squeeze", x, axes=list(axes))

    def split(self, x: str, axis: int, sizes, n: int) -> list[str]:
        if n == 1:
            return [self.op("Identity", x)]
        if self.opset >= 13:
            return self.op("Split", x, self._axes_input(sizes), n_out=n, axis=axis)
        if isinstance(sizes, str):
            raise OpsetTooOld(f"Split with runtime sizes needs opset 13 (model opset {self.opset})", 13)
        return self.op("Split", x, n_out=n, axis=axis, split=list(sizes))

    def slice(self, x: str, starts, ends, axes, steps=None) -> str:
        if self.opset >= 10:
            ins = [x, self._axes_input(starts), self._axes_input(ends), self._axes_input(axes)]
            if steps is not None:
                ins.append(self._axes_input(steps))
            return self.op("Slice", *ins)
        if any(isinstance(v, str) for v in (starts, ends, axes)) or steps is not None:
            raise OpsetTooOld(f"Slice with runtime arguments needs opset 10 (model opset {self.opset})", 10)
        return self.op("Slice", x, starts=list(starts), ends=list(ends), axes=list(axes))

    def pad(self, x: str, pads, value: str | None = None, mode: str = "constant") -> str:
        if self.opset >= 11:
            return self.op("Pad", x, self._axes_input(pads), value, mode=mode)
        if isinstance(pads, str):
            raise OpsetTooOld(f"Pad with runtime pads needs opset 11 (model opset {self.opset})", 11)
        return self.op("Pad", x, pads=list(pads), mode=mode)

    def shape(self, x: str, start: int | None = None, end: int | None = None) -> str:
        if start is None and end is None:
            return self.op("Shape", x)
        if self.opset >= 15:
            return self.op("Shape", x, start=start, end=end)
        s = self.op("Shape", x)
        return self.slice(s, [start or 0], [end if end is not None else 2**62], [0])

    def flat(self, x: str) -> str:
        return self.op("Reshape", x, self.ints([-1]))
