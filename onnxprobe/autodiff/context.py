"""What a gradient rule sees: ``NodeGrad``, one forward node with its output gradients, static facts
about its tensors, and the engine's builder (``g.Mul(a, b)``, ``g.reduce_sum(x, [1])``, ``g.const(...)``).
Rules (``autodiff/rules/``) only ever talk to this object."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxprobe.errors import ModelError, OpsetTooOld, RuleRefused, UnknownShape
from onnxprobe.graph.builder import FLOAT_TYPES, np_dtype


class NodeGrad:
    """What a rule sees: one forward node, its output gradients, and builders (delegated to the engine's
    GraphBuilder, so ``g.Mul(a, b)``, ``g.reduce_sum(x, [1])``, ``g.const(...)`` all work)."""

    def __init__(self, engine, node: onnx.NodeProto, name: str, dys: list[str | None], wants: list[bool],
                 implicit: list[str] = ()):
        self.engine = engine
        self.implicit = list(implicit)  # outer tensors the node's bodies read that need a gradient
        self.node = node
        self.name = name
        self.x = list(node.input)
        self.y = list(node.output)
        self.dys = dys
        self.dy = dys[0] if dys else None
        self._wants = wants
        self.opset = engine.opset
        self.b = engine.b
        # the gradients' dtype: the first output's, or (QuantizeLinear: an integer output) the first input's
        elems = [engine.elem(t) for t in list(node.output[:1]) + list(node.input[:1]) if t]
        self.elem = next((e for e in elems if e in FLOAT_TYPES), None) or next((e for e in elems if e), None) \
            or TensorProto.FLOAT
        self.dtype = np_dtype(self.elem)

    def __getattr__(self, name):
        return getattr(self.b, name)

    # -- the node ------------------------------------------------------------------------------------
    def attr(self, name: str, default=None):
        for a in self.node.attribute:
            if a.name == name:
                return helper.get_attribute_value(a)
        return default

    def has(self, i: int) -> bool:
        return i < len(self.x) and bool(self.x[i])

    def wants(self, i: int) -> bool:
        return i < len(self._wants) and self._wants[i]

    def fail(self, why: str) -> RuleRefused:
        return RuleRefused(self.node.op_type, self.name, why)

    def unknown_size(self, what: str) -> ModelError:
        """The error for a rule that needs a size the model leaves dynamic (``what`` says which): --shape
        fixes it for a run, but --export keeps the model's dynamic dimensions, so there it cannot."""
        return self.fail(f"{what} (fix it with --shape NAME=DIMS; --export keeps the model's dynamic dimensions: "
                         "declare that size in the model to export it)")

    def needs_opset(self, needed: int, what: str) -> OpsetTooOld:
        """The error for a gradient that needs op versions of opset ``needed`` (grad_plan then converts
        the model and tries again)."""
        return OpsetTooOld(f"cannot differentiate {self.node.op_type} node {self.name!r}: {what} needs opset "
                           f"{needed} or later (model opset {self.opset})", needed)

    # -- static facts --------------------------------------------------------------------------------
    def sshape(self, t: str) -> tuple | None:
        return self.engine.sshape(t)

    def rank(self, t: str) -> int:
        s = self.engine.sshape(t)
        if s is None:
            raise UnknownShape(f"cannot differentiate {self.node.op_type} node {self.name!r}: the rank of {t!r} is "
                               "unknown (shape inference could not tell; input shapes given with --shape NAME=DIMS or "
                               "--input often let it: an If's branches that return different ranks need the input that "
                               "picks one)")
        return len(s)

    def static_dims(self, t: str) -> tuple[int, ...] | None:
        """The shape when every dimension is a known integer, else None."""
        s = self.engine.sshape(t)
        if s is None or not all(isinstance(d, int) for d in s):
            return None
        return tuple(s)

    # -- shapes: constants where they are static, Shape / Size ops where they are not -----------------
    def Shape(self, t: str, start: int | None = None, end: int | None = None) -> str:  # noqa: N802 - ONNX op name
        d = self.static_dims(t)
        if d is not None:
            return self.b.ints(list(d)[start:end])  # Python slicing clamps as Shape's start / end do
        return self.b.op("Shape", t, start=start, end=end)

    def shape(self, t: str, start: int | None = None, end: int | None = None) -> str:
        d = self.static_dims(t)
        if d is not None:
            return self.b.ints(list(d)[start:end])
        return self.b.shape(t, start, end)

    def Size(self, t: str) -> str:  # noqa: N802
        d = self.static_dims(t)
        if d is not None:
            return self.b.const(np.array(int(np.prod(d)) if d else 1, np.int64))
        return self.b.op("Size", t)

    def value(self, t: str) -> np.ndarray | None:
        return self.engine.const_value(t)

    def ints_input(self, i: int) -> list[int] | None:
        """A constant integer input (axes, pads, perm...) as a list, or None when it is not constant."""
        if not self.has(i):
            return None
        v = self.value(self.x[i])
        return None if v is None else [int(a) for a in np.asarray(v).reshape(-1)]

    def norm_axes(self, axes, rank: int) -> list[int]:
        return sorted(int(a) + rank if int(a) < 0 else int(a) for a in axes)

    # -- small builders that know the gradient's dtype -----------------------------------------------
    def ScatterElements(self, data: str, idx: str, updates: str, **attrs) -> str:  # noqa: N802 - the op's name
        return self._scatter("ScatterElements", data, idx, updates, **attrs)

    def ScatterND(self, data: str, idx: str, updates: str, **attrs) -> str:  # noqa: N802
        return self._scatter("ScatterND", data, idx, updates, **attrs)

    def _scatter(self, op: str, data: str, idx: str, updates: str, **attrs) -> str:
        """A scatter; with a reduction on half-precision data, done in float32 and cast back: onnxruntime's
        CPU kernels have no float16 scatter with a reduction (the gradients of MaxPool, Gather and reflect
        Pad in a float16 model failed to run)."""
        if attrs.get("reduction", "none") == "none" or self.elem not in (TensorProto.FLOAT16, TensorProto.BFLOAT16):
            return self.b.op(op, data, idx, updates, **attrs)
        wide = [self.b.op("Cast", t, to=TensorProto.FLOAT) for t in (data, updates)]
        return self.b.op("Cast", self.b.op(op, wide[0], idx, wide[1], **attrs), to=self.elem)

    def scalar(self, v: float) -> str:
        return self.b.const(np.array(v, dtype=self.dtype))

    def mask(self, cond: str) -> str:
        """A boolean tensor as 0/1 in the gradient's dtype, to multiply with: ``Mul(dy, mask(c))`` is dy
        where c, else 0 (onnxruntime's Where is an order of magnitude slower than Cast + Mul)."""
        return self.b.Cast(cond, to=self.elem)

    def zeros_like(self, t: str) -> str:
        dims = self.static_dims(t)
        shape = self.b.ints(dims) if dims is not None else self.b.Shape(t)
        return self.b.op("ConstantOfShape", shape, value=numpy_helper.from_array(np.zeros([1], self.dtype)))

    def count(self, t: str, axes: list[int] | None = None) -> str:
        """Number of elements of ``t`` over ``axes`` (all when None), as a scalar of the gradient's dtype."""
        s = self.sshape(t)
        if s is not None:
            ax = range(len(s)) if axes is None else axes
            dims = [s[a] for a in ax]
            if all(isinstance(d, int) for d in dims):
                return self.scalar(float(np.prod(dims)) if dims else 1.0)
        shp = self.b.Shape(t)
        if axes is not None:
            shp = self.b.Gather(shp, self.b.ints(axes), axis=0)
        n = self.b.reduce("ReduceProd", shp, None, keepdims=0)
        return self.b.Cast(n, to=self.elem)

    def sum_to(self, grad: str, target: str, grad_shape: tuple | None) -> str:
        return self.engine.sum_to(grad, target, grad_shape)

    def forward_output(self, k: int, base: str) -> str:
        """Output ``k`` of the forward node, added when the model left it out (e.g. MaxPool's Indices)."""
        while len(self.node.output) <= k:
            self.node.output.append("")
        if not self.node.output[k]:
            self.node.output[k] = self.b.fresh(f"{self.node.output[0]}.{base}")
        self.y = list(self.node.output)
        return self.node.output[k]
