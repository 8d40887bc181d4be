"""The table of gradient rules: one short rule per ONNX op, registered with ``@rule``.

Every op is in exactly one of three states:

- **rule**: ``RULES[op]`` says which inputs are differentiable, which of them broadcast (the engine sums
  their gradients back to the input's shape), and holds the function that emits the backward nodes;
- **non-differentiable**: ``NON_DIFFERENTIABLE[op]`` gives the reason (integer or boolean results,
  piecewise-constant maps, shape queries): no gradient flows through the op, and none is needed;
- **not implemented**: anything else. The engine stops with a message that names the op and the node
  when such an op lies between the loss and a tensor whose gradient was asked for.

A rule is ``fn(g) -> [grad of input 0, grad of input 1, ...]`` (``None`` where there is none), where ``g``
is the engine's per-node context (:class:`onnxprobe.autodiff.context.NodeGrad`): the node's input and output
names, ``g.dy`` (dL/d output 0) or ``g.dys``, attributes, static shapes, and builders that emit ONNX
nodes at the model's opset (``g.Mul(a, b)``, ``g.reduce_sum(x, axes)``...). The rule's docstring states
its maths; ``doc(op)`` returns it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

FAMILIES = ("elementwise", "activation", "matmul", "algebra", "conv", "pool", "norm", "reduce", "shape", "scatter",
            "sampling", "passthrough", "quant", "recurrent", "lstm", "control", "attention", "fused", "loss")
DEFAULT_DOMAINS = ("", "ai.onnx")


@dataclass(frozen=True)
class Rule:
    op: str
    fn: Callable
    inputs: tuple[int, ...] | None  # differentiable input slots; None: every input
    broadcast: tuple[int, ...]  # inputs whose gradient is summed back to the input's shape by the engine
    family: str
    straight_through: bool = False  # the gradient flows through the op's integer outputs (QuantizeLinear)

    @property
    def doc(self) -> str:
        return (self.fn.__doc__ or "").strip()

    def differentiable(self, i: int) -> bool:
        return self.inputs is None or i in self.inputs


RULES: dict[str, Rule] = {}

# op -> why no gradient flows through it (for people), and its category (for code)
NON_DIFFERENTIABLE: dict[str, str] = {}
CATEGORY: dict[str, str] = {}
# categories of ops that read float tensors without any gradient being expected through them (shape
# queries, comparisons, indices): unlike quantization or rounding, they do not "stop" a gradient
STRUCTURAL = {"shape", "boolean", "index", "builder", "string"}


def _nd(category: str, reason: str, *ops: str) -> None:
    for op in ops:
        NON_DIFFERENTIABLE[op] = reason
        CATEGORY[op] = category


_nd("shape", "returns a shape or a size", "Shape", "Size", "SequenceLength")
_nd("boolean", "returns booleans", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Not", "And", "Or", "OptionalHasElement",
    "Xor", "IsNaN", "IsInf")
_nd("index", "returns indices", "ArgMax", "ArgMin", "NonZero", "NonMaxSuppression", "Unique", "com.microsoft:Unique",
    "com.microsoft:BifurcationDetector")
_nd("piecewise", "piecewise constant: zero gradient almost everywhere", "Sign", "Floor", "Ceil", "Round", "Hardmax")
_nd("integer", "integer or bit arithmetic", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot",
    "BitCast", "com.microsoft:MurmurHash3")
_nd("builder", "builds a tensor from shapes or indices alone", "ConstantOfShape", "EyeLike",
    "BlackmanWindow", "HannWindow", "HammingWindow", "MelWeightMatrix", "com.microsoft:Range")
_nd("random", "random sampling", "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
    "Multinomial", "Bernoulli")
_nd("quantization", "quantization rounds to integers (QuantizeLinear has a straight-through rule)",
    "DynamicQuantizeLinear")
_nd("string", "string ops", "StringNormalizer", "StringConcat", "StringSplit", "RegexFullMatch", "TfIdfVectorizer",
    "com.microsoft:Tokenizer")


def key(op: str, domain: str = "") -> str:
    """The table's key of an op: its name in the default domain, ``domain:op`` in another (com.microsoft)."""
    return op if domain in DEFAULT_DOMAINS else f"{domain}:{op}"


def rule(*ops: str, inputs: tuple[int, ...] | None = (0,), broadcast: tuple[int, ...] = (),
         straight_through: bool = False, domain: str = ""):
    """Register ``fn`` as the gradient rule of ``ops`` (of ``domain``). ``inputs``: differentiable input
    slots (None: all); ``broadcast``: the inputs whose gradient the engine un-broadcasts to the input's own
    shape; ``straight_through``: the op's integer outputs carry a gradient (a straight-through estimator)."""

    def deco(fn: Callable) -> Callable:
        family = fn.__module__.rsplit(".", 1)[-1]
        for op in ops:
            k = key(op, domain)
            if k in RULES or k in NON_DIFFERENTIABLE:
                raise ValueError(f"gradient rule for {k} registered twice")
            RULES[k] = Rule(k, fn, inputs, tuple(broadcast), family, straight_through)
        return fn

    return deco


_loaded = False


def load() -> dict[str, Rule]:
    """Import every family of rules (registration happens on import)."""
    global _loaded
    if not _loaded:
        for fam in FAMILIES:
            importlib.import_module(f"onnxprobe.autodiff.rules.{fam}")
        _loaded = True
    return RULES


def status(op: str, domain: str = "") -> str:
    """'rule', 'non-differentiable' or 'not implemented'."""
    load()
    k = key(op, domain)
    if k in RULES:
        return "rule"
    if k in NON_DIFFERENTIABLE:
        return "non-differentiable"
    return "not implemented"


def rule_of(node) -> Rule | None:
    """The rule of an ONNX node (its op type in its domain), or None."""
    load()
    return RULES.get(key(node.op_type, node.domain))


def structural(op: str) -> bool:
    """True for non-differentiable ops through which no gradient is expected (shape queries,
    comparisons, indices), as opposed to those that cut one (quantization, rounding)."""
    return CATEGORY.get(op) in STRUCTURAL


def supported_ops() -> list[str]:
    return sorted(load())


def doc(op: str) -> str:
    load()
    return RULES[op].doc if op in RULES else NON_DIFFERENTIABLE.get(op, "not implemented")
