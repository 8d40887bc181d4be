"""Which tensors to probe: a ``Selection`` (op types, name globs, an index range, all) resolved
against a model into ``TensorRef`` objects in topological order.

Rules:
- default (no criteria): outputs of Conv, ConvTranspose, Gemm, MatMul, the attention ops and their
  quantized/fused forms, in the main graph, plus the model's own outputs;
- ``ops`` / ``names``: every node output, subgraphs included, whose producer's op type is listed or whose
  node or tensor name matches a glob (union of the two);
- ``all``: every node output, subgraphs included;
- ``range``: keeps only (alone: selects all) nodes whose index (as ``inspect --nodes`` and the ``layers`` table number them)
  lies in ``[start, end]``; either end may be a node name;
- weights (initializers, Constant/ConstantOfShape outputs and what is computed from them alone) are left
  out unless ``include_constants``.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

import onnx

from onnxprobe.errors import UsageError
from onnxprobe.graph.shapes import dtype_name, static_shape, value_types
from onnxprobe.graph.walk import NodeSite, constant_tensors, walk
from onnxprobe.types import TensorRef

ATTENTION_OPS = {
    "Attention", "MultiHeadAttention", "GroupQueryAttention", "PackedAttention",
    "PackedMultiHeadAttention", "DecoderMaskedMultiHeadAttention", "DecoderMaskedSelfAttention",
    "QAttention", "SparseAttention", "LongformerAttention", "PagedAttention",
}
DEFAULT_OPS = {
    "Conv", "ConvTranspose", "Gemm", "MatMul",
    # the same layers after quantization or fusion
    "QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger", "QGemm", "FusedConv",
    "FusedGemm", "FusedMatMul", "MatMulIntegerToFloat", "DynamicQuantizeMatMul",
} | ATTENTION_OPS


@dataclass(frozen=True)
class Selection:
    ops: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    all: bool = False
    range: str | None = None  # "START:END", each an index, a node name, or empty
    include_constants: bool = False

    @property
    def is_default(self) -> bool:
        return not (self.ops or self.names or self.all)


def parse_range(spec: str, node_index: dict[str, int], last: int) -> tuple[int, int]:
    """'START:END' -> (start, end), inclusive; each end an index, a node name, or empty (the first /
    ``last`` node)."""
    if ":" not in spec:
        raise UsageError(f"--range {spec!r}: expected START:END (node indices or node names), e.g. 10:40")
    a, b = spec.split(":", 1)

    def bound(x: str, default: int) -> int:
        x = x.strip()
        if not x:
            return default
        if x.lstrip("-").isdigit():
            return int(x)
        if x in node_index:
            return node_index[x]
        raise UsageError(f"--range: no node named {x!r} (use an index or a node name from `onnxprobe inspect --nodes`)")

    return bound(a, 0), bound(b, last)


def _matches(site: NodeSite, tensor: str, sel: Selection) -> bool:
    if sel.all:
        return True
    if site.node.op_type in sel.ops:
        return True
    return any(fnmatch.fnmatchcase(site.name, g) or fnmatch.fnmatchcase(tensor, g) for g in sel.names)


def select(model: onnx.ModelProto, sel: Selection, *, sites: list[NodeSite] | None = None) -> list[TensorRef]:
    """Resolve ``sel`` against ``model`` (ideally one with inferred shapes). Raises UsageError when an
    explicit criterion matches nothing."""
    sites = sites if sites is not None else walk(model)
    types = value_types(model)
    const = set() if sel.include_constants else constant_tensors(model, sites)
    outputs = {o.name for o in model.graph.output}
    lo, hi = parse_range(sel.range, {s.name: s.index for s in sites}, len(sites) - 1) if sel.range else (0, len(sites) - 1)

    refs: list[TensorRef] = []
    seen: set[str] = set()
    for site in sites:
        if not lo <= site.index <= hi:
            continue
        for t in site.node.output:
            if not t or t in seen:
                continue
            if t in const and t not in outputs:
                continue
            if sel.is_default and sel.range:
                take = True  # a range alone selects everything inside it
            elif sel.is_default:
                take = (not site.chain and site.node.op_type in DEFAULT_OPS) or t in outputs
            else:
                take = _matches(site, t, sel)
            if not take:
                continue
            seen.add(t)
            tp = types.get(t)
            refs.append(TensorRef(
                name=t, node=site.name, op_type=site.node.op_type, index=site.index, scope=site.scope,
                dtype=dtype_name(tp.tensor_type.elem_type) if tp is not None else None,
                shape=static_shape(tp), is_output=t in outputs,
            ))
    # model outputs that no node produces (a graph input passed straight through) are not layers
    if not sel.is_default and not refs:
        crit = ", ".join([f"--op {o}" for o in sel.ops] + [f"--name {n}" for n in sel.names])
        raise UsageError(f"the selection ({crit}) matches no tensor in this model")
    return refs
