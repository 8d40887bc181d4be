"""Why a tensor of a diff stayed unmatched, where more is known than the matcher's "no counterpart": the
other side's runner cannot observe it, it holds the values of a tensor that is compared (an Identity, a
Reshape, a Cast to its own type or a wider float type, an Expand or Tile to its input's own shape) or one
that is compared holds its values, the other model folded it into a constant, or the other model folded it into its consumer (Conv+BN folding, a Relu
dropped by the quantizer) and compared it there."""

from __future__ import annotations

from collections.abc import Callable

from onnx import TensorProto

from onnxprobe.compare.sides import Side
from onnxprobe.errors import said
from onnxprobe.types import DIFFERENT_FUNCTION, NO_SCALE
from onnxprobe.graph.constants import constant_arrays
from onnxprobe.graph.shapes import static_shape, value_types
from onnxprobe.graph.walk import constant_tensors
from onnxprobe.match.bodies import body_tensors
from onnxprobe.match.engine import COPY, FOLDED, MAP, NO_COUNTERPART, NO_NUMBERS, NOT_OBSERVABLE, Matching, Unmatched
from onnxprobe.match.observe import Observable
from onnxprobe.match.ops import VALUE_PRESERVING, computing
from onnxprobe.match.regions import inside_one_node
from onnxprobe.runtime.runners.npz import NpzRunner

# ops whose output holds its first input's values in their order (a Cast only to its input's own type): the
# matcher's value-preserving moves, less those that reorder or repeat the values
SAME_VALUES = VALUE_PRESERVING - {"Transpose", "Expand"}


def saved_non_numbers(a: Side, b: Side) -> list[Unmatched]:
    """Saved values that are no numbers (strings) under a name that A does not observe: unmatched in B,
    with the runner's reason, as every saved entry of a name the model does not hold is listed (``npz_side``
    leaves them out of its observables, which are measured; they were dropped without a word)."""
    if not isinstance(b.runner, NpzRunner):
        return []
    seen = {n for o in a.observation.observables + b.observation.observables + a.observation.no_numbers for n in (o.name, o.key)}
    names = [n for n in b.runner.arrays if n not in seen]
    why = b.runner.unobservable(names)
    return [Unmatched(Observable(key=n, name=n, probe=n, node="", op_type="?", effective_op="?", index=1 << 30 | k,
                                 shape=tuple(getattr(b.runner.arrays[n], "shape", ())), kind="float"), why[n], NOT_OBSERVABLE)
            for k, n in enumerate(names) if n in why]


def no_numbers(side: Side) -> list[Unmatched]:
    """The side's values that hold no numbers (sequences, optionals, maps, strings: ``Observation.no_numbers``):
    never compared, so unmatched with why, as every value of the selection is listed somewhere (they were
    listed nowhere); their cause, NO_NUMBERS, makes no verdict an error (one is about what was compared)."""
    obs = side.observation
    return [Unmatched(o, obs.hidden.get(o.name, "no numbers: no difference to measure"), NO_NUMBERS) for o in obs.no_numbers]


def unscaled(side: Side, other_unmatched: list[Unmatched]) -> list[Unmatched]:
    """The side's integer codes of no known scale (``Observation.unscaled``: a weight's int8 moved by a Transpose,
    Reshape or Gather), compared on neither side: unmatched with why (they vanished from the diff without a
    word), save where the other side's unmatched tensor of that name already says that this side does not
    observe it. Their cause, NO_SCALE, makes no verdict an error: a model output is never one (``match.observe``
    compares an output's codes as they are)."""
    said_there = {u.obs.name for u in other_unmatched}
    obs = side.observation
    return [Unmatched(o, obs.hidden.get(o.name, "codes of no known scale: compared on neither side"), NO_SCALE)
            for o in obs.unscaled if o.name not in said_there]


def explain_unmatched(matching: Matching, a: Side, b: Side) -> None:
    """Say why, where more is known than 'no counterpart': a tensor the other side's runner cannot observe
    (fused away, not in the .npz), or a B tensor folded into its consumer in A (Conv+BN folding, a Relu
    dropped by the quantizer: compared there)."""
    for side, other, items in ((a, b, matching.unmatched_a), (b, a, matching.unmatched_b)):
        todo = [u for u in items if u.cause == NO_COUNTERPART]
        hidden = other.runner.unobservable([u.obs.key for u in todo]) if todo else {}
        for u in todo:
            if u.obs.key in hidden:  # the runner's words say why; saved values (--vs-npz) are the side itself
                where = f"in {'B' if side is a else 'A'}, " if other.runner.takes_feeds else ""
                u.reason, u.cause = where + hidden[u.obs.key], NOT_OBSERVABLE
            elif u.obs.key in other.observation.hidden:
                why = other.observation.hidden[u.obs.key]
                where = "B" if side is a else "A"
                if other.hidden_cause != NOT_OBSERVABLE:
                    u.reason = why
                else:
                    u.reason = f"in {where}, {why}" if u.obs.key in other.runner_hidden else f"not observable in {where}: {why}"
                u.cause = other.hidden_causes.get(u.obs.key, other.hidden_cause)
    mapped = _mapped_away(matching)
    inside = body_tensors(a.model.proto, loops_only=True)
    for u in matching.unmatched_b:  # saved activations of A's body tensors (layers --all --save)
        if u.cause == NO_COUNTERPART and u.obs.name in inside:
            u.reason = f"inside {inside[u.obs.name]} in A: diff compares main-graph and If-branch tensors only"
            u.cause = NOT_OBSERVABLE
    if not b.runner.takes_feeds:  # saved values of what A computes from weights alone: left out by the selection
        consts = constant_tensors(a.model.proto)  # its initializers too
        for u in matching.unmatched_b:
            if u.cause == NO_COUNTERPART and u.obs.name in consts:
                u.reason = said(lambda say: "in A, computed from weights alone (a constant of the model), which the "
                                f"selection leaves out ({say(('include_constants', '--include-constants'))} compares it)")
                u.cause = NOT_OBSERVABLE
    for side, other, items, pairs_of in ((a, b, matching.unmatched_a, lambda p: (p.a.name, p.b.name)),
                                         (b, a, matching.unmatched_b, lambda p: (p.b.name, p.a.name))):
        if side is b and not b.runner.takes_feeds:
            continue
        paired = dict(pairs_of(p) for p in matching.pairs)
        _copies_and_constants(side, other, [u for u in items if u.cause == NO_COUNTERPART], paired, "B" if side is a else "A")
        # a tensor whose namesake is another function may still hold a compared tensor's values (onnxslim drops an Add
        # of a zero bias, the MatMul before it taking its name): that, not 'another layer', is what it is
        _copies_and_constants(side, other, [u for u in items if u.cause == DIFFERENT_FUNCTION], paired,
                              "B" if side is a else "A", copies_only=True)
    opaque: dict[int, set[str]] = {}

    def opaque_of(side: Side) -> set[str]:  # ``_opaque`` of a side once: both steps below ask it of A
        if id(side) not in opaque:
            opaque[id(side)] = _opaque(side)
        return opaque[id(side)]

    _inside_one_node(matching, a, b, mapped, opaque_of)
    if b.runner.takes_feeds:
        _folded_into_consumer(matching, a, b, opaque_of)


def _inside_one_node(matching: Matching, a: Side, b: Side, mapped: set[int], opaque_of: Callable[[Side], set[str]]) -> None:
    """A tensor still without counterpart that lies strictly inside what the other model computes as one
    node (HardSwish written as HardSigmoid and Mul, a LayerNormalization spelled out: ``match.regions``) is
    folded into that node, compared at its output; after the copies and constants, which say more, and
    before the consumer a B tensor's value may be folded into, which names no node of A (``mapped``: the ids
    of the entries whose namesake --map paired with another tensor, which says so). ``opaque_of(side)``:
    ``_opaque(side)``, computed once per diff."""
    for side, other, items, pairs_of, there in ((a, b, matching.unmatched_a, lambda p: (p.a.name, p.b.name), "B"),
                                                (b, a, matching.unmatched_b, lambda p: (p.b.name, p.a.name), "A")):
        todo = {u.obs.name: u for u in items if u.cause == NO_COUNTERPART and id(u) not in mapped}
        if not todo:
            continue
        obs = side.observation.observables
        skip = {k for k, o in enumerate(obs) if o.name not in todo}
        paired = dict(pairs_of(p) for p in matching.pairs)
        for k, reason in inside_one_node(obs, other.observation.observables, paired, skip, there, opaque_of(other)).items():
            todo[obs[k].name].reason, todo[obs[k].name].cause = reason, FOLDED


def _opaque(side: Side) -> set[str]:
    """The observables whose node (for a quantized value, the float or QLinear* node behind its Q/DQ) reads,
    walking back through the tensors the side does not observe (Q/DQ, moves, a rescale's partial results),
    one that the side computes and compares nowhere: codes of no known scale, a value that is no tensor.
    Their ``sources`` walk past that node, so a region ending at them is not one node of this side."""
    obs = side.observation
    producer = {t: nd for nd in side.model.proto.graph.node for t in nd.output if t}
    seen = {o.name for o in obs.observables} | {o.key for o in obs.observables if o.kind == "qdq"}
    lost = {o.name for o in obs.unscaled + obs.no_numbers}
    if not lost:
        return set()
    out = set()
    for o in obs.observables:
        nd = computing(o.name, producer) if o.name in producer else None  # through the Q/DQ around the value
        todo, walked = list(nd.input) if nd is not None else [], set()
        while todo and len(walked) < 256:
            t = todo.pop()
            if t in walked or not t:
                continue
            walked.add(t)
            if t in lost:
                out.add(o.name)
                break
            if t not in seen and t in producer:
                todo.extend(producer[t].input)
    return out


def _folded_into_consumer(matching: Matching, a: Side, b: Side, opaque_of: Callable[[Side], set[str]]) -> None:
    """A B tensor whose one consumer's output is paired, where A has no tensor of its own for it: A
    computes both in one tensor (Conv+BN folding, a Relu dropped by the quantizer), compared there.
    ``opaque_of(side)``: ``_opaque(side)``, computed once per diff."""
    consumers: dict[str, list] = {}
    for n in b.model.proto.graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    matched_b = {p.b.name: p.a.name for p in matching.pairs}
    keys_a = {o.key for o in a.observation.observables}
    # A's own tensors left unmatched, by the A tensor their consumer writes: where B's tensor has one of
    # those beside it in A (a2 -> Identity ya against b2 -> Identity yb), A did not fold anything: the two
    # are different computations, each without a counterpart
    unmatched_a = {u.obs.name for u in matching.unmatched_a}
    fed_by_unmatched = {o for n in a.model.proto.graph.node if any(i in unmatched_a for i in n.input) for o in n.output}
    obs_a = {o.name: o for o in a.observation.observables}
    obs_b = {o.name: o for o in b.observation.observables}
    paired_a = {p.a.name for p in matching.pairs}
    opaque_a = opaque_of(a)  # A's tensors whose node reads one A computes and compares nowhere: A's own, not compared
    for u in matching.unmatched_b:
        # a graph output A has no counterpart of is missing there, whatever it feeds (a model output left
        # unpaired fails the verdict: called folded, an extra output of B passed a diff that never compared it)
        if u.cause != NO_COUNTERPART or u.obs.is_output:
            continue
        cs = consumers.get(u.obs.name, [])
        # folded only when A has no tensor of its own for it (one it has was paired elsewhere, or not at all)
        if (len(cs) == 1 and cs[0].output and cs[0].output[0] in matched_b and u.obs.key not in keys_a
                and matched_b[cs[0].output[0]] not in fed_by_unmatched and matched_b[cs[0].output[0]] not in opaque_a
                # and A's tensor reads every graph input this one is computed from (HardSigmoid(x2) is no
                # part of an A tensor that reads x alone)
                and _graph_inputs(u.obs.name, obs_b, matched_b) <= _graph_inputs(matched_b[cs[0].output[0]], obs_a, paired_a)):
            out = cs[0].output[0]  # B's consumer, whose output is paired: A computes both in one tensor
            u.reason, u.cause = (f"no tensor of its own in A: folded into its consumer {cs[0].op_type} {out!r}, "
                                 f"compared there (with A's {matched_b[out]!r})"), FOLDED


def _graph_inputs(name: str, obs: dict, paired: set[str] | dict) -> set[str]:
    """The graph inputs (``input:NAME``) that ``name`` is computed from, walking back through the observed
    tensors of its model that are not ``paired`` (a paired one stands for the same value on both sides)."""
    out: set[str] = set()
    seen: set[str] = set()
    todo = list(obs[name].sources) if name in obs else []
    while todo and len(seen) < 10000:
        s = todo.pop()
        if s in seen:
            continue
        seen.add(s)
        if s.startswith("input:"):
            out.add(s)
        elif s in obs and s not in paired:
            todo.extend(obs[s].sources)
    return out


def _mapped_away(matching: Matching) -> set[int]:
    """A tensor left alone because its namesake on the other side was paired with another tensor by
    --map says so (rather than 'no counterpart', or a folding that did not happen); the ids of those."""
    done: set[int] = set()
    by_key = {}
    for p in matching.pairs:
        if p.strategy == "map":
            by_key[("a", p.a.key)] = p
            by_key[("b", p.b.key)] = p
    for items, other in ((matching.unmatched_a, "b"), (matching.unmatched_b, "a")):
        for u in items:
            p = by_key.get((other, u.obs.key))
            if p is not None and u.cause == NO_COUNTERPART:
                mine, theirs = (p.b, p.a) if other == "b" else (p.a, p.b)
                where = "B" if other == "b" else "A"
                u.reason = said(lambda say: f"its namesake in {where}, {mine.name!r}, is paired with {theirs.name!r} by {say(MAP)}")
                done.add(id(u))
    return done


def _copies_and_constants(side: Side, other: Side, todo: list[Unmatched], paired: dict[str, str], there: str,
                          copies_only: bool = False) -> None:
    """``todo`` (``side``'s unmatched tensors): one that holds the values of a tensor of its model that is
    compared (a float-to-float Cast onnxruntime removed, an Identity an exporter added) says so; one the
    other model holds as a constant of that name (constant folding) says that."""
    if not todo:
        return
    model = side.model.proto
    producer = {o: n for n in model.graph.node for o in n.output if o}
    types = value_types(model)
    consts = {t.name for t in other.model.proto.graph.initializer} | {
        o for n in other.model.proto.graph.node if n.op_type == "Constant" for o in n.output}

    # a neutral operand: one element, or a whole bias of zeros (onnxslim drops BERT's zero-initialised biases)
    small = constant_arrays(model.graph, 1 << 16)
    consumers: dict[str, list] = {}
    for n in model.graph.node:
        for i in dict.fromkeys(n.input):
            consumers.setdefault(i, []).append(n)
    for u in todo:
        x, first = u.obs.name, None
        for _ in range(16):
            n = producer.get(x)
            data = _neutral_operand(n, small, types) if n is not None else None
            if data is not None:
                first, x = first or f"{n.op_type} with the constant {NEUTRAL[n.op_type]:g}", data
                if x in paired:
                    break
                continue
            if n is None or not _keeps_values(n, types):
                x = None
                break
            first, x = first or n.op_type, n.input[0]
            if x in paired:
                break
        below = _held_below(u.obs.name, consumers, types, paired) if x is None or x not in paired else None
        if x is not None and x in paired:
            u.reason = f"the values of {x!r} ({first}), which is compared (with {there}'s {paired[x]!r})"
            u.cause = COPY
        elif below is not None:
            u.reason = f"its values are compared as {below[0]!r} (a {below[1]} that keeps them), with {there}'s {paired[below[0]]!r}"
            u.cause = COPY
        elif u.obs.name in consts and not copies_only:
            u.reason = f"a constant in {there} (folded into one of that name): computed from weights alone there"
            u.cause = FOLDED


# float types whose every value the second type holds exactly (a Cast between them keeps the values)
_WIDER = {TensorProto.FLOAT16: {TensorProto.FLOAT, TensorProto.DOUBLE}, TensorProto.BFLOAT16: {TensorProto.FLOAT, TensorProto.DOUBLE},
          TensorProto.FLOAT: {TensorProto.DOUBLE}}


def _exact_cast(src: int, dst: int) -> bool:
    """A Cast from element type ``src`` to ``dst`` returns its input's values unchanged: to its own type, or
    a float type widened (float16 -> float32, as a float16 model that keeps float32 outputs ends)."""
    return bool(src) and (src == dst or dst in _WIDER.get(src, ()))


def _keeps_values(n, types: dict) -> bool:
    """Node ``n``'s first output holds its first input's values in their order: an op of ``SAME_VALUES`` (a Cast
    only where ``_exact_cast``), or an Expand or Tile to the input's own shape (a no-op broadcast: ``h.expand(b,
    t, d)`` of a [b, t, d] tensor, ``h.repeat(1, 1)``), told by the shapes inference gives both, every dim known
    (a number, or one symbol on both sides)."""
    if not n.input or not n.output or not n.output[0]:
        return False
    x, y = n.input[0], n.output[0]
    if n.op_type == "Cast":
        return _exact_cast(_elem(types, x), _elem(types, y))
    if n.op_type in SAME_VALUES:
        return True
    if n.op_type not in ("Expand", "Tile") or n.domain not in ("", "ai.onnx"):
        return False
    sx, sy = static_shape(types.get(x)), static_shape(types.get(y))
    return sx is not None and sx == sy and None not in sx and _elem(types, x) == _elem(types, y)


def _elem(types: dict, name: str) -> int:
    t = types.get(name)
    return t.tensor_type.elem_type if t is not None and t.HasField("tensor_type") else 0


def _held_below(name: str, consumers: dict, types: dict, paired: dict) -> tuple[str, str] | None:
    """A compared tensor that holds ``name``'s values exactly, reached from it through value-keeping nodes
    (an Identity, a Reshape, a widening Cast: ``graph_output_cast_0 -> Cast -> logits`` of a float16 model
    converted with its float32 outputs kept), with the first such node's op; else None."""
    todo, seen = [(name, None)], {name}
    while todo and len(seen) < 64:
        x, first = todo.pop(0)
        for n in consumers.get(x, []):
            if not n.input or n.input[0] != x or not _keeps_values(n, types):
                continue
            y = n.output[0]
            if y in paired:
                return y, first or n.op_type
            if y not in seen:
                seen.add(y)
                todo.append((y, first or n.op_type))
    return None


NEUTRAL = {"Mul": 1.0, "Div": 1.0, "Add": 0.0, "Sub": 0.0}  # x op c == x for every x where c is this everywhere


def _same_static_shape(types: dict, a: str, b: str) -> bool:
    """Whether inference gives ``a`` and ``b`` one shape, every dim a number."""
    sa, sb = static_shape(types.get(a)), static_shape(types.get(b))
    return sa is not None and sa == sb and all(isinstance(d, int) for d in sa)


def _neutral_operand(n, small: dict, types: dict | None = None) -> str | None:
    """The data input of a node that returns it unchanged: a multiplication or division by a constant 1, an
    addition or subtraction of a constant 0, of one element (it broadcasts without changing the shape), or of more,
    every one of them that value, where the output's shape is the data input's (inference gives both, every dim
    known). onnxruntime removes such nodes (PP-OCRv4 rec's Mul by [1.]), onnxslim an Add of a bias of zeros (a freshly
    initialised BERT's), so the other model has no tensor of theirs."""
    if n.op_type not in NEUTRAL or len(n.input) != 2:
        return None
    sides = [(0, 1)] if n.op_type in ("Div", "Sub") else [(0, 1), (1, 0)]
    for d, c in sides:
        v = small.get(n.input[c])
        if v is None or v.dtype.kind != "f" or not v.size or not (v == NEUTRAL[n.op_type]).all():
            continue
        if v.size == 1 or _same_static_shape(types or {}, n.input[d], n.output[0]):
            return n.input[d]
    return None
