"""Integer tensors (shape computations, indices, masks) as evidence of nothing but their own function.

Two exporters write a shape computation in many ways, and many of a model's integer tensors share an op
and a shape (every [batch, seq, hidden] target of a Reshape is a Concat of 3 elements): alignment by op,
order and shape pairs [batch, seq, 128] with [-1, seq, 128], or Gather(shape, 0) with Gather(shape, 1),
and their difference was reported as where the error starts, though no float value differs. A structural
pair of integer tensors stands only when the two are one function: the same op and attributes, the same
integer constants at the same operands, a computed tensor where the other has one too, and computed
operands that are paired with each other, or (unpaired) are in turn one function (``IntegerCheck``; an
operand computed with other ops, Gather(Shape(x), 1) against Shape(x, 1, 2), is other only where it reads
other tensors). The matcher undoes the others once alignment is done (they still serve it as anchors:
the float pairs between them do not depend on their verdict), and what reads an undone pair in turn:
Unsqueeze(Gather(s, 0)) against Unsqueeze(Gather(s, 1)) is no more one function than the Gathers.

``Observable.slots`` says, per input of an integer tensor's node, what it reads: ``("k", value)`` an
integer constant of at most 64 elements ("?": another constant, or one computed from constants),
``("t", sources)`` a computed tensor (the nearest observed tensors upstream and graph inputs), ``("",)``
no input. ``Observable.attrs``: the node's plain attributes, the schema's defaults filled in.
"""

from __future__ import annotations

import ast

import numpy as np
import onnx

from onnxprobe.graph.constants import constant_arrays
from onnxprobe.match.ops import canonical, fused_activation

_INTS = (onnx.TensorProto.INT64, onnx.TensorProto.INT32, onnx.TensorProto.INT16, onnx.TensorProto.INT8,
         onnx.TensorProto.UINT8, onnx.TensorProto.BOOL)
# attributes that change no value of a computed integer tensor: a Reshape's allowzero acts only on a 0 in the
# target, which a shape computed from the data never holds (one exporter writes 1, another 0)
_NO_VALUE = {"allowzero"}
# ops whose output is their first operand's values laid out in the output's shape: where the two shapes agree,
# the operands that say the shape (a Reshape's target, an Unsqueeze's axes) change nothing
LAID_OUT = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Expand"}
_PLAIN = {onnx.AttributeProto.INT, onnx.AttributeProto.INTS, onnx.AttributeProto.FLOAT, onnx.AttributeProto.FLOATS,
          onnx.AttributeProto.STRING, onnx.AttributeProto.STRINGS}


def int_constants(found: dict[str, onnx.TensorProto]) -> dict[str, str]:
    """Of a graph's constants (``graph.constants.constants``), the integer ones of at most 64 elements ->
    their values, as text ("[0]", "-1"): int32 and int64 of one value are one operand."""
    small = constant_arrays(None, 64, {k: t for k, t in found.items() if t.data_type in _INTS})
    return {k: str(a.astype(np.int64).tolist()) if a.ndim else str(int(a)) for k, a in small.items()}


def attributes(node: onnx.NodeProto) -> tuple:
    """``node``'s plain attributes (numbers, strings), with the defaults its schema gives for the ones not set:
    Shape with start=0 is Shape."""
    got = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute if a.type in _PLAIN and a.name not in _NO_VALUE}
    try:
        schema = onnx.defs.get_schema(node.op_type, node.domain or "")
    except Exception:  # an op of a domain onnx does not know: its attributes as written
        schema = None
    for name, at in (schema.attributes.items() if schema is not None else ()):
        if name not in got and name not in _NO_VALUE and at.default_value is not None and at.default_value.type in _PLAIN:
            got[name] = onnx.helper.get_attribute_value(at.default_value)
    return tuple(sorted((k, str(v)) for k, v in got.items()))


# attributes that make another function of one op where both nodes set them (not the spellings of one setting that
# exporters write apart: pads / auto_pad, kernel_shape, an axis counted from either end), and the constant integer
# operand that does (a Gather's indices)
SETTINGS = {"perm", "alpha", "beta", "dilations", "strides", "group", "lambd", "blocksize", "mode", "direction", "activation"}
INDEXED = {"Gather": 1, "GatherElements": 1, "GatherND": 1}


def settings_of(node: onnx.NodeProto, ints: dict[str, str]) -> tuple:
    """``Observable.settings`` of a float tensor written by ``node``: its SETTINGS as set, and the digest of the
    constant integer operand INDEXED names."""
    def word(v) -> str:
        return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)

    got = [(a.name, word(onnx.helper.get_attribute_value(a))) for a in node.attribute if a.name in SETTINGS and a.type in _PLAIN]
    k = INDEXED.get(node.op_type)
    if k is not None and len(node.input) > k and node.input[k] in ints:
        got.append((f"input {k}", ints[node.input[k]]))
    return tuple(sorted(got))


def other_settings(a, b) -> bool:
    """Whether float tensors ``a`` and ``b`` of one op are written with another setting that both set (crossed
    parallel branches that differ only there: two Transposes of other perms, LeakyRelus of other slopes)."""
    if (fused_activation(a) is None) != (fused_activation(b) is None):  # Relu(Gemm) against a Gemm: the activation's output is its partner
        return True
    if a.op_type != b.op_type or not a.settings or not b.settings:
        return False
    sa, sb = dict(a.settings), dict(b.settings)
    return any(sa[k] != sb[k] for k in sa.keys() & sb.keys())


def slots_of(node: onnx.NodeProto, const: set[str], ints: dict[str, str], upstream) -> tuple:
    """``Observable.slots`` of an integer tensor written by ``node`` (``upstream(t)``: its sources)."""
    return tuple(("",) if not i else ("k", ints.get(i, "?")) if i in const else ("t", tuple(sorted(upstream(i))))
                 for i in node.input)


def static_difference(a, b) -> str | None:
    """How two integer tensors of one op differ, by their nodes alone (``slots``, ``attrs``), or None: another
    constant at one operand, a constant where the other computes one, other attributes."""
    if not a.slots or not b.slots:
        return None
    if a.op_type == b.op_type and a.attrs != b.attrs:
        diff = sorted(set(a.attrs) ^ set(b.attrs))
        return f"has other attributes than {b.name} ({diff[0][0]})"
    for k, (x, y) in enumerate(zip(a.slots, b.slots), start=1):
        if "" in (x[0], y[0]) or k > 1 and a.op_type == b.op_type and a.op_type in LAID_OUT:
            continue
        if x[0] != y[0]:  # a computed tensor may hold that constant for every input (an Expand of a constant)
            return Unknown("cannot tell they are one function of the data: it " + (
                f"reads {_const(x[1])} as operand {k} where {b.name} reads a computed tensor" if x[0] == "k" else
                f"reads a computed tensor as operand {k} where {b.name} reads {_const(y[1])}"))
        if x[0] == "k" and "?" not in (x[1], y[1]) and x[1] != y[1]:
            return f"reads {x[1]} as operand {k} where {b.name} reads {y[1]}"
    return None


def _name(source: str) -> str:
    return f"the input {source[6:]}" if source.startswith("input:") else source


def _const(value: str) -> str:
    return "a constant" if value == "?" else f"the constant {value}"


class IntegerCheck:
    """``why(i, j)``: why A's integer tensor ``i`` and B's ``j`` are other functions of the data, or None, given
    the pairs made so far (``a_to_b``, ``b_to_a``: live dicts of the matcher)."""

    def __init__(self, obs_a, obs_b, a_to_b: dict, b_to_a: dict, inputs_a: set, inputs_b: set, up_a, up_b):
        self.obs_a, self.obs_b, self.a_to_b, self.b_to_a = obs_a, obs_b, a_to_b, b_to_a
        self.inputs_a, self.inputs_b, self.up_a, self.up_b = inputs_a, inputs_b, up_a, up_b
        self.index_a = {o.name: k for k, o in enumerate(obs_a)}
        self.index_b = {o.name: k for k, o in enumerate(obs_b)}

    def why(self, i: int, j: int) -> str | None:
        return self._why(i, j, 0, {})

    def why_b(self, i: int, j: int) -> str | None:
        """``why`` as B's ``j`` says it of A's ``i``."""
        if not hasattr(self, "_mirror"):
            self._mirror = IntegerCheck(self.obs_b, self.obs_a, self.b_to_a, self.a_to_b, self.inputs_b, self.inputs_a,
                                        self.up_b, self.up_a)
        return self._mirror.why(j, i)

    def _why(self, i: int, j: int, depth: int, memo: dict) -> str | None:
        if (i, j) in memo:
            return memo[i, j]
        memo[i, j] = None  # a cycle through unpaired tensors tells nothing
        a, b = self.obs_a[i], self.obs_b[j]
        if a.elem_type and b.elem_type and (a.elem_type == onnx.TensorProto.BOOL) != (b.elem_type == onnx.TensorProto.BOOL):
            memo[i, j] = f"holds {'booleans' if a.elem_type == onnx.TensorProto.BOOL else 'integers'} where {b.name} holds " \
                         f"{'booleans' if b.elem_type == onnx.TensorProto.BOOL else 'integers'}"
            return memo[i, j]
        differ, same = compare_values(a, b, self._to_b)
        if not a.slots or not b.slots or same:  # the same values, however computed: one function
            return None
        if canonical(a.effective_op) != canonical(b.effective_op):
            # an operand two exporters compute with other ops (Gather(Shape(x), 1) against Shape(x, 1, 2)):
            # other functions where what they are computed from is paired with other tensors, or their values
            # (dimensions, constants) differ
            out = self._operands(0, a.sources, b.sources, b.name, 8, memo)
            out = out and f"is computed ({canonical(a.effective_op)}) from other tensors than {b.name}"
        else:
            out = static_difference(a, b)
            for k, (x, y) in enumerate(zip(a.slots, b.slots), start=1):
                if out is None and x[0] == y[0] == "t" and (k == 1 or a.op_type not in LAID_OUT):
                    out = self._operands(k, x[1], y[1], b.name, depth, memo)
        memo[i, j] = differ if isinstance(out, Unknown) and differ else out or differ  # a shown difference first
        if memo[i, j] and not differ and a.values is not None and b.values is not None:
            # what they hold is known on both sides and nothing tells it apart: dimensions of tensors not known to
            # be of one size (attention_mask's [batch, seq] against a LayerNorm output's [unk__7, unk__8])
            memo[i, j] = Unknown(not_known_same(a, b, self._to_b))
        return memo[i, j]

    def _to_b(self, source: str) -> str | None:
        """A's observed tensor or graph input ``source`` in B's names (None where it has no partner)."""
        if source.startswith("input:"):
            return source if source in self.inputs_b else None
        return self.a_to_b.get(source)

    def _operands(self, k: int, read_a: tuple, read_b: tuple, b_name: str, depth: int, memo: dict) -> str | None:
        """Why what operand ``k`` reads in A (``read_a``) and in B differ: a paired tensor (or a graph input)
        whose partner the other does not read there; unpaired, integer tensors none of which is one function
        with one of the other's."""
        to_b = {s: s if s in self.inputs_b else None if s.startswith("input:") else self.a_to_b.get(s) for s in read_a}
        to_a = {t: t if t in self.inputs_a else None if t.startswith("input:") else self.b_to_a.get(t) for t in read_b}
        for mapped, other, side, idx, up, obs in ((to_b, read_b, "this", self.index_b, self.up_b, self.obs_b),
                                                  (to_a, read_a, b_name, self.index_a, self.up_a, self.obs_a)):
            # what one reads there is paired with a tensor that the other neither reads, nor computes it from,
            # nor computes again (``copies``)
            partners = set(mapped.values()) - {None}
            if partners and not any(m == o or o in idx and up(idx[o], m) for m in partners for o in other):
                alike = [copies(obs, idx, o, m) for m in partners for o in other]
                if True in alike:
                    continue
                s = next(s for s, t in mapped.items() if t is not None)
                said = (f"reads {_name(s)} as operand {k} where {b_name} reads {_name(read_b[0])}" if side == "this" else
                        f"reads {_name(read_a[0])} as operand {k} where {b_name} reads {_name(s)}")
                if None in alike:  # computed alike from the dimensions of other tensors: the same values or not
                    return Unknown(f"cannot tell they are one function of the data: it {said}, which is computed alike "
                                   "from the shape of another tensor")
                return said
        if set(to_b.values()) - {None} or set(to_a.values()) - {None} or depth >= 8:
            return None
        ca = [self.index_a[s] for s in read_a if s in self.index_a and self.obs_a[self.index_a[s]].slots]
        cb = [self.index_b[t] for t in read_b if t in self.index_b and self.obs_b[self.index_b[t]].slots]
        whys = [self._why(p, q, depth + 1, memo) for p in ca for q in cb] if ca and cb else []
        if whys and all(whys):
            said = (f"reads {self.obs_a[ca[0]].name} as operand {k} where {b_name} reads {self.obs_b[cb[0]].name}, "
                    "which is no counterpart of it")
            if any(isinstance(w, Unknown) for w in whys):  # nor is it known to be another
                return Unknown(f"cannot tell they are one function of the data: it reads {self.obs_a[ca[0]].name} as "
                               f"operand {k} where {b_name} reads {self.obs_b[cb[0]].name}, which cannot be told to be "
                               "one function with it either")
            return said
        return None


SHAPE_QUERIES = {"Shape", "Size"}  # ops whose value is another tensor's dimensions (its element count)


def copies(obs, idx: dict, x: str, y: str, depth: int = 0) -> bool | None:
    """Whether integer tensors ``x`` and ``y`` of one model (``obs``, ``idx``: its observables and their
    index by name) are one computation written twice (True): the same op and attributes, the same constants
    at the same operands, and computed operands that are the same tensors or in turn copies (torch's legacy
    exporter writes a Range per use). None: written alike, but from the shapes (Shape, Size) of other tensors, whose
    dimensions may or may not be the same (BERT's arange over the sequence length, taken once from the
    embeddings' output and once from attention_mask). False: other computations."""
    if x == y:
        return True
    if depth > 8 or x not in idx or y not in idx:
        return False
    a, b = obs[idx[x]], obs[idx[y]]
    if not a.slots or a.op_type != b.op_type or a.attrs != b.attrs or len(a.slots) != len(b.slots):
        return False
    found: bool | None = True
    for s, t in zip(a.slots, b.slots):
        if s[0] != t[0] or s[0] == "k" and ("?" in (s[1], t[1]) or s[1] != t[1]):
            return False
        if s[0] == "t":
            if a.op_type in SHAPE_QUERIES and s[1] != t[1]:  # the shapes of other tensors: the same size or not
                found = None
                continue
            if len(s[1]) != len(t[1]):
                return False
            each = [copies(obs, idx, u, v, depth + 1) for u, v in zip(s[1], t[1])]
            if False in each:
                return False
            found = None if None in each else found
    return found


# ops whose output holds their first operand's values in order (a shape vector reshaped, cast, unsqueezed)
_KEEPS_VALUES = {"Identity", "Unsqueeze", "Squeeze", "Reshape", "Flatten", "Cast"}


def symbolic(producer: dict, ints: dict[str, str], shape_of, name_of, inputs=()):
    """``of(t)``: the values of the integer tensor ``t`` (of rank 0 or 1) as a tuple of integers and
    dimensions ``("d", source, k, static)`` (dimension k of the tensor ``name_of`` calls ``source``; its
    declared size, an int, a dim_param or None), where Shape, Gather, Slice, Concat and moves of constants
    compute it; else None. Gather(Shape(x), 1), Shape(x, start=1, end=2) and Slice(Shape(x), [1], [2])
    all hold ``(("d", x, 1, ...),)``: one function of the data, whatever the ops. A dimension named as one
    of the graph ``inputs``' is that input's (the first by name): Shape(attention_mask)[1] is input_ids' 1
    where both declare 'seq' there (names shape inference makes up, 'unk__3', are no input's)."""
    memo: dict[str, tuple | None] = {}
    declared: dict[str, tuple[str, int]] = {}
    for x in sorted(inputs):
        for k, d in enumerate(shape_of(x) or ()):
            if isinstance(d, str):
                declared.setdefault(d, (f"input:{x}", k))

    def const(t: str):
        try:
            v = ast.literal_eval(ints[t]) if t in ints else None  # "[0, 1]" or "-1", as int_constants writes
        except (ValueError, SyntaxError):
            return None
        return v if isinstance(v, int) or isinstance(v, list) and all(isinstance(x, int) for x in v) else None

    def of(t: str, depth: int = 0) -> tuple | None:
        if t in memo:
            return memo[t]
        memo[t] = None  # a cycle tells nothing
        v = const(t)
        out = (v,) if isinstance(v, int) else tuple(v) if v is not None else None
        shape = shape_of(t)
        if v is None and t in producer and depth < 64 and (shape is None or len(shape) <= 1):
            out = _computed(producer[t].node, lambda i: of(i, depth + 1), const, shape_of, name_of)
            out = out and tuple(("d", *declared[e[3]], e[3]) if not isinstance(e, int) and e[3] in declared else e for e in out)
        memo[t] = out
        return out

    return of


def _computed(n: onnx.NodeProto, of, const, shape_of, name_of) -> tuple | None:
    if n.domain not in ("", "ai.onnx") or not n.input:
        return None
    at = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
    if n.op_type == "Shape":
        x, shape = name_of(n.input[0]), shape_of(n.input[0])
        if x is None or shape is None:
            return None
        return tuple(("d", x, k, shape[k]) for k in range(len(shape))[at.get("start", 0):at.get("end", len(shape))])
    if n.op_type in _KEEPS_VALUES:
        return of(n.input[0]) if n.op_type != "Cast" or at.get("to") in _INTS else None
    if n.op_type == "Concat":
        parts = [of(i) for i in n.input if i]
        return None if any(p is None for p in parts) else tuple(e for p in parts for e in p)
    data = of(n.input[0])
    if data is None or (shape_of(n.input[0]) or (0,)) == ():  # a scalar is not indexed
        return None
    if n.op_type == "Gather" and at.get("axis", 0) in (0, -1) and len(n.input) > 1:
        idx = const(n.input[1])
        idx = [idx] if isinstance(idx, int) else idx
        if idx is None or any(not -len(data) <= k < len(data) for k in idx):
            return None
        return tuple(data[k] for k in idx)
    if n.op_type == "Slice" and len(n.input) >= 3:
        starts, ends, axes, steps = (const(n.input[k]) if len(n.input) > k and n.input[k] else d
                                     for k, d in ((1, None), (2, None), (3, [0]), (4, [1])))
        if not all(isinstance(v, list) and len(v) == 1 for v in (starts, ends, axes, steps)) or axes[0] not in (0, -1) \
                or steps[0] == 0:
            return None
        return data[slice(starts[0], ends[0], steps[0])]
    return None


def compare_values(a, b, to_b) -> tuple[str | None, bool]:
    """(why two integer tensors' ``values`` (``symbolic``) are other functions of the data, or None; whether
    they are one: equal at every element for every input the models take). Other: two integers or declared
    sizes that differ, an integer against a dimension the model leaves dynamic, two dimensions of one tensor
    (``to_b``: A's source in B's names, None where unpaired) at other positions that the model does not
    declare alike. One: equal integers or declared sizes, or one dimension of paired tensors or of one graph
    input (input_ids' 'seq', which attention_mask declares too: ``symbolic``)."""
    va, vb = a.values, b.values
    if va is None or vb is None:
        return None, False
    if len(va) != len(vb):
        return f"holds {len(va)} values where {b.name} holds {len(vb)}", False
    same = True
    for k, (x, y) in enumerate(zip(va, vb)):
        sx, sy = (e if isinstance(e, int) else e[3] if isinstance(e[3], int) else None for e in (x, y))
        if sx is not None and sy is not None:
            differ = sx != sy
        elif isinstance(x, int) or isinstance(y, int):
            differ = True  # a number against a dimension of no declared size
        else:
            differ = to_b(x[1]) == y[1] and x[2] != y[2] and (x[3] is None or x[3] != y[3])
            same = same and to_b(x[1]) == y[1] and x[2] == y[2]
        if differ:
            at = f" at element {k + 1} of {len(va)}" if len(va) > 1 else ""
            return f"holds {_value(x)}{at} where {b.name} holds {_value(y)}", False
    return None, same


def _value(e) -> str:
    return str(e) if isinstance(e, int) else f"dimension {e[2]} of {_name(e[1])}"


class Unknown(str):
    """Why two integer tensors are not paired where nothing shows them to be other functions either: what
    they hold is not known to be the same (``IntegerCheck.why``); not a proof that they differ."""


def not_known_same(a, b, to_b) -> str:
    """The first element of ``a.values`` not known to equal ``b``'s, in words."""
    va, vb = a.values, b.values
    k, x, y = next(((k, x, y) for k, (x, y) in enumerate(zip(va, vb)) if x != y and (
        isinstance(x, int) or isinstance(y, int) or to_b(x[1]) != y[1] or x[2] != y[2])), (0, va[0], vb[0]))
    at = f" at element {k + 1} of {len(va)}" if len(va) > 1 else ""
    dim = lambda e: _value(e) + (f" ({e[3]})" if not isinstance(e, int) and e[3] is not None else "")  # noqa: E731
    return (f"cannot tell they are one function of the data: it holds {dim(x)}{at} where {b.name} holds {dim(y)}, "
            "not known to be the same")
