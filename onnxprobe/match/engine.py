"""Pair the observables of model A with those of model B.

Strategies, tried in this order; each pair records which one matched it and why:
1. ``map``: an explicit user map (A tensor -> B tensor) overrides everything;
2. ``name`` / ``qdq`` / ``qoperator`` / ``dynamic``: A's value stands for a float tensor of the same name
   in B (see match.observe for how quantized values are keyed); a float pair by name that is two functions
   of the data (``match.refused.named_other``) is undone;
3. ``qoperator-stem``: A's key without a quantizer suffix (``_quantized``...) names a tensor of B;
4. ``node-name``: the producing nodes have the same name of their own (a ``_quant`` suffix aside; an
   unnamed node's position is no name) and compatible ops, and reads what the other reads (a node an
   optimizer rewrote keeps its name: refused, and the structural pairs that read it);
5. ``structural``: between two pairs already made, the remaining tensors are aligned by a longest common
   subsequence over (equivalent op type, shape): never by position alone; structural pairs that read
   tensors refused as other functions of the data (their weights contradict: ``match.refused``) are undone,
   and so are structural pairs of integer tensors that are not one function (``match.integers``).
Shapes must agree wherever both are known; a rejected candidate leaves its reason on the unmatched entry.
"""

from __future__ import annotations

from onnxprobe.errors import UsageError, setting_error, settings_error
from onnxprobe.match.align import align
from onnxprobe.match.folds import folded_elsewhere, node_words, tail_folded
from onnxprobe.match.integers import IntegerCheck, Unknown
from onnxprobe.match.observe import Observable, scoped_hint, stem
from onnxprobe.match.ops import canonical, compatible
from onnxprobe.match.pairs import Matching, Pair, Unmatched, shape_words, shapes_agree
from onnxprobe.match.refused import contradicts, named_other, refuse
from onnxprobe.match.weights import near_weights
# matching's causes live in onnxprobe.types (report/ reads them in the JSON too); imported from here as well
from onnxprobe.types import (COPY, DIFFERENT_FUNCTION, FOLDED, MAP, NO_COUNTERPART, NO_GRADIENT, NO_NUMBERS,  # noqa: F401
                             NOT_OBSERVABLE, OTHER_SHAPE, OTHER_VALUES)


def match(obs_a: list[Observable], obs_b: list[Observable], user_map: dict[str, str] | None = None) -> Matching:
    pairs: list[Pair] = []
    made: list[tuple[int, int]] = []
    used_a: set[int] = set()
    used_b: set[int] = set()
    why_a: dict[int, str] = {}
    why_b: dict[int, str] = {}
    shape_a: set[int] = set()
    shape_b: set[int] = set()
    folded_a: set[int] = set()  # compared after the other model's quantization range took their Relu
    folded_b: set[int] = set()
    other_a: set[int] = set()  # a structural candidate read other tensors
    other_b: set[int] = set()
    b_by_key: dict[str, int] = {}
    b_by_name: dict[str, int] = {}
    for j, o in enumerate(obs_b):
        b_by_key.setdefault(o.key, j)
        b_by_name.setdefault(o.name, j)
    a_by_name: dict[str, int] = {}
    for i, o in enumerate(obs_a):
        a_by_name.setdefault(o.name, i)
    a_keys = {o.key for o in obs_a}

    def take(i: int, j: int, strategy: str, reason: str) -> bool:
        a, b = obs_a[i], obs_b[j]
        if (strategy != "map" and a.kind == b.kind == "float" and canonical(a.effective_op) == canonical(b.effective_op) == "Conv"
                and a.bn_next != b.bn_next):
            # one name, two functions: a Conv with its BatchNormalization (or bias, scale) folded in against one the
            # tail follows; the folded one pairs with the tail's output (``match.folds``), by alignment
            k, why, folded, other = (j, why_b, folded_b, a) if b.bn_next else (i, why_a, folded_a, b)
            why[k] = tail_folded("A" if b.bn_next else "B", node_words(other))
            folded.add(k)
            return False
        if not shapes_agree(a.shape, b.shape):
            why_a[i] = f"{strategy} candidate {b.name} in B has another shape ({shape_words(a.shape)} vs {shape_words(b.shape)})"
            why_b[j] = f"{strategy} candidate {a.name} in A has another shape ({shape_words(a.shape)} vs {shape_words(b.shape)})"
            shape_a.add(i)
            shape_b.add(j)
            return False
        pairs.append(Pair(a, b, strategy, reason))
        made.append((i, j))
        if a.op_type == "If" and b.op_type == "If" and a.node and b.node:  # their branches are one another's
            if_map[a.node] = b.node
        used_a.add(i)
        used_b.add(j)
        a_to_b[a.name], b_to_a[b.name] = b.name, a.name
        return True

    a_to_b: dict[str, str] = {}
    b_to_a: dict[str, str] = {}
    if_map: dict[str, str] = {}  # A's If node -> B's, once their outputs are paired

    def a_scope(scope: str) -> str:
        """A's If-branch scope in B's names, where the If nodes are paired ("If_0/then_branch" -> "cond/then_branch")."""
        for na, nb in if_map.items():
            for attr in ("/then_branch", "/else_branch"):
                if scope.startswith(na + attr):
                    scope = nb + scope[len(na):]
                scope = scope.replace(f"_branch/{na}{attr}", f"_branch/{nb}{attr}")
        return scope
    inputs_b = {s for o in obs_b for s in o.sources if s.startswith("input:")}
    inputs_a = {s for o in obs_a for s in o.sources if s.startswith("input:")}

    up_a, up_b = _ancestry(obs_a), _ancestry(obs_b)
    readers_a, readers_b = _readers(obs_a), _readers(obs_b)
    index_a, index_b = {o.name: k for k, o in enumerate(obs_a)}, {o.name: k for k, o in enumerate(obs_b)}
    data_a, data_b = {o.name for o in obs_a if o.data}, {o.name for o in obs_b if o.data}

    ints = IntegerCheck(obs_a, obs_b, a_to_b, b_to_a, inputs_a, inputs_b, up_a, up_b)

    def reads_alike(i: int, j: int) -> bool:
        """No contradiction between what the two nodes read (``Observable.sources``) and what the other
        is computed from: a tensor one reads is paired with one that is nowhere upstream of the other
        (Shape of a Reshape's output against Shape of the attention mask). Unpaired sources tell
        nothing; a pair computed in another order (x * a * 0.5 against x * (0.5 * a)) reads alike."""
        read_a = [s for s in obs_a[i].sources if s.startswith("input:") or s in data_a]
        read_b = [t for t in obs_b[j].sources if t.startswith("input:") or t in data_b]
        to_b = [(s if s in inputs_b else None) if s.startswith("input:") else a_to_b.get(s) for s in read_a]
        to_a = [(t if t in inputs_a else None) if t.startswith("input:") else b_to_a.get(t) for t in read_b]
        # everything both read is paired: they must read the same (x * (1 + erf) against 0.5 * (1 + erf))
        if read_a and read_b and None not in to_b and None not in to_a and set(to_b) != set(read_b):
            return False
        if any(t is not None and not up_b(j, t) for t in to_b):
            return False
        if _swapped(i, j, read_a, to_a, obs_a, obs_b, used_a, used_b, readers_b, index_a) or \
                _swapped(j, i, read_b, to_b, obs_b, obs_a, used_b, used_a, readers_a, index_b):
            return False
        return not any(s is not None and not up_a(i, s) for s in to_a)


    def other_reads(i: int, j: int) -> tuple[str, str] | None:
        return None if reads_alike(i, j) else ("reads other tensors than it",) * 2

    def other_integers(i: int, j: int) -> tuple[str, str] | None:  # an integer tensor's operands (``match.integers``)
        return None if (why := ints.why(i, j)) is None else (why, ints.why_b(i, j))

    def structural(i: int, j: int, reason: str) -> None:
        if reads_alike(i, j):
            take(i, j, "structural", reason)
            return
        a, b = obs_a[i], obs_b[j]
        why_a.setdefault(i, f"structural candidate {b.name} in B reads other tensors than it (another function of the data)")
        why_b.setdefault(j, f"structural candidate {a.name} in A reads other tensors than it (another function of the data)")
        other_a.add(i)
        other_b.add(j)

    # 1. user map
    for a_name, b_name in (user_map or {}).items():
        ia = next((i for i, o in enumerate(obs_a) if a_name in (o.name, o.key, o.probe)), None)
        jb = next((j for j, o in enumerate(obs_b) if b_name in (o.name, o.key, o.probe)), None)
        if ia is None or jb is None:
            missing = a_name if ia is None else b_name
            raise setting_error(UsageError, MAP, f": tensor {missing!r} is not an observable tensor of model {'A' if ia is None else 'B'}"
                             + scoped_hint(obs_a if ia is None else obs_b, missing))
        # the user's pair is made as given or refused out loud: silently falling back to the other
        # strategies would report a comparison the user did not ask for as if it were theirs
        if ia in used_a or jb in used_b:
            twice = a_name if ia in used_a else b_name
            raise settings_error(UsageError, lambda say: f"{say(MAP)} {a_name} -> {b_name}: {twice!r} is already in another {say(MAP)} entry")
        # a float tensor of a quantized model is compared as its quantized value (the observable whose key it
        # is: the Q -> DQ copy the next layers use, a uint8 tensor), as the other strategies compare it: said
        via = [f"{side}'s {n!r} compared as {o.name!r}, its quantized value" for side, n, o in
               (("A", a_name, obs_a[ia]), ("B", b_name, obs_b[jb])) if n not in (o.name, o.probe)]
        if not take(ia, jb, "map", "given in --map" + (f" ({'; '.join(via)})" if via else "")):
            raise setting_error(UsageError, MAP, f"{a_name} -> {b_name}: shapes {shape_words(obs_a[ia].shape)} and {shape_words(obs_b[jb].shape)} "
                             "differ, so they cannot be compared")
    # 2. same key (name, or the float name a quantized value stands for)
    for i, a in enumerate(obs_a):
        if i in used_a:
            continue
        j = b_by_key.get(a.key)
        if j is None or j in used_b:
            continue
        b = obs_b[j]
        # the quantized side's kind, whichever model it is (a float A against its quantized B: B's)
        q, where = (a, "") if a.kind != "float" or b.kind == "float" else (b, " in B")
        strategy = "name" if q.kind == "float" else q.kind
        ops = "" if a.effective_op == b.effective_op else f"; {a.effective_op} in A stands for {b.effective_op} in B"
        reason = {"name": "same tensor name", "qdq": f"DequantizeLinear(QuantizeLinear({a.key})){where}",
                  "qoperator": f"{q.op_type} output{where} dequantized with its own scale",
                  "dynamic": f"float result{where} after the integer layer's rescale"}[strategy]
        # a quantized value whose range starts at 0 holds Relu(x) when the float model applies a Relu to x
        # (or a Clip from 0: a Relu6, a HardSwish's clip): it is compared with that node's output, never
        # with x (a different function of the data); not where the quantized model holds that node's output
        # itself (it kept the node: a range that starts at 0 by itself, a Sigmoid's)
        if a.floor_zero and b.kind == "float" and b.relu in b_by_name and b.relu not in a_keys:
            r = b_by_name[b.relu]
            op = obs_b[r].op_type
            why_b[j] = f"its {op} {b.relu!r} is folded into A's quantization range: compared there (with A's {a.name!r})"
            folded_b.add(j)
            if r not in used_b:
                take(i, r, strategy, reason + f"; B's {op} is folded into A's quantization range (no value below 0)")
            continue
        if b.floor_zero and a.kind == "float" and a.relu in a_by_name and a.relu not in b_by_key:
            r = a_by_name[a.relu]
            op = obs_a[r].op_type
            why_a[i] = f"its {op} {a.relu!r} is folded into B's quantization range: compared there (with B's {b.name!r})"
            folded_a.add(i)
            if r not in used_a:
                take(r, j, "name" if b.kind == "float" else b.kind, reason + f"; A's {op} is folded into B's quantization range (no value below 0)")
            continue
        take(i, j, strategy, reason + ops)
    # 3. quantizer suffixes
    for i, a in enumerate(obs_a):
        if i in used_a:
            continue
        for cand in dict.fromkeys(c for c in (stem(a.name), stem(a.key)) if c not in (a.name, a.key)):  # a suffix to drop
            j = b_by_key.get(cand, b_by_name.get(cand))
            if j is not None and j not in used_b and compatible(a.effective_op, obs_b[j].effective_op):
                if take(i, j, "qoperator-stem", f"{a.name} is the quantized {cand}"):
                    break
    # 4. node names
    b_by_node: dict[str, list[int]] = {}
    for j, o in enumerate(obs_b):
        if o.node_named:  # an unnamed node's "Op_index" says only where it is: no evidence
            b_by_node.setdefault(_node_stem(o.node), []).append(j)
    # a node an optimizer rewrote keeps its name (onnxruntime's transpose optimizer moves a Transpose below a
    # Slice, which then reads x where B's reads Transpose(x)): a candidate whose reads contradict
    # (``reads_alike``), or that reads such a refused candidate, is another function of the data
    renamed: set[tuple[str, str]] = set()
    for i, a in enumerate(obs_a):
        if i in used_a or not a.node_named:
            continue
        for j in b_by_node.get(_node_stem(a.node), []):
            if j not in used_b and compatible(a.effective_op, obs_b[j].effective_op):
                b = obs_b[j]
                if not reads_alike(i, j) or any((s, t) in renamed for s in a.sources for t in b.sources):
                    renamed.add((a.name, b.name))
                    why_a.setdefault(i, f"node-name candidate {b.name} in B reads other tensors than it (another function of the data)")
                    why_b.setdefault(j, f"node-name candidate {a.name} in A reads other tensors than it (another function of the data)")
                    other_a.add(i), other_b.add(j)
                elif take(i, j, "node-name", f"same node name {a.node!r}"):
                    break
    # a name is no proof: two tensors of one name that are other functions of the data are undone before
    # anything is aligned between them (step 8 says why, where their weights contradict)
    shared = shared_weights(obs_a, obs_b)
    for k in [k for k, p in enumerate(pairs) if p.strategy == "name"][::-1]:
        why = named_other(pairs[k].a, pairs[k].b, shared, a_to_b)
        if why is not None:
            (i, j), p = made.pop(k), pairs.pop(k)
            used_a.discard(i), used_b.discard(j), a_to_b.pop(p.a.name, None), b_to_a.pop(p.b.name, None)
            why_a[i], why_b[j] = f"name candidate {p.b.name} in B: it {why[0]}", f"name candidate {p.a.name} in A: it {why[1]}"
            other_a.add(i), other_b.add(j)
    # 5. the same weights: a tensor of each model, alone in it to read those float constants with that op;
    # then what reads tensors paired so far, before any pairing by order (which may cross parallel branches)

    def like(x: Observable, y: Observable) -> bool:
        return alike(x, y, shared, a_scope)

    _same_weights(obs_a, obs_b, used_a, used_b, structural, like)
    near_weights(obs_a, obs_b, used_a, used_b, structural, like)  # moved a little
    _same_inputs(obs_a, obs_b, used_a, used_b, a_to_b, structural, like, a_scope)
    # 6. structural alignment between anchors, and what reads its pairs
    align(obs_a, obs_b, used_a, used_b, structural, list(made), like)
    _same_inputs(obs_a, obs_b, used_a, used_b, a_to_b, structural, like, a_scope)
    known = 0
    while len(if_map) > known:  # If nodes paired after their branches were aligned: the branches again, as one
        known = len(if_map)     # another's (and the Ifs nested in them, a level a round)
        align(obs_a, obs_b, used_a, used_b, structural, list(made), like)
        _same_inputs(obs_a, obs_b, used_a, used_b, a_to_b, structural, like, a_scope)
    # 7. every structural pair checked again against all the pairs now made: one made before what it reads
    # was paired may read tensors paired with others (alignment by order in crossed branches); undone,
    # and what reads the pairs that stand is paired again
    if _undo_contradicted(pairs, made, used_a, used_b, a_to_b, b_to_a, other_reads, why_a, why_b, other_a, other_b):
        _same_inputs(obs_a, obs_b, used_a, used_b, a_to_b, structural, like, a_scope)
    # structural pairs that read node-name candidates refused above (aligned by order and shape, the transpose
    # of one another): undone, and their readers in turn; not pairs by name, which a later Transpose may
    # make one function again (onnxruntime renames the tensors it rewrites and keeps the others' names)
    def reads_renamed(i: int, j: int) -> tuple[str, str] | None:
        hit = next(((s, t) for s in obs_a[i].sources for t in obs_b[j].sources if (s, t) in renamed), None)
        if hit is not None:
            renamed.add((obs_a[i].name, obs_b[j].name))
        return None if hit is None else (f"reads {hit[1]}, a refused candidate of {hit[0]}, which this reads",
                                         f"reads {hit[0]}, a refused candidate of {hit[1]}, which this reads")

    while renamed and _undo_contradicted(pairs, made, used_a, used_b, a_to_b, b_to_a, reads_renamed, why_a, why_b, other_a, other_b):
        pass
    # integer pairs (shape computations, indices) of other functions, once every anchor served: and what reads them
    while _undo_contradicted(pairs, made, used_a, used_b, a_to_b, b_to_a, other_integers, why_a, why_b, other_a, other_b):
        pass
    # 8. candidates refused for their weights, said; structural pairs that read a refused pair undone
    ref_a, ref_b = refuse(obs_a, obs_b, pairs, made, used_a, used_b, shared, a_scope)
    for why, other, ref in ((why_a, other_a, ref_a), (why_b, other_b, ref_b)):
        for k, reason in ref.items():
            if k not in why or k in other:  # a reason of its own stands (another shape, a folded Relu)
                why[k] = reason
                other.add(k)
    pairs.sort(key=lambda p: (p.a.index, p.b.index))
    for obs, other, paired, why, folded, used, side in ((obs_a, obs_b, a_to_b, why_a, folded_a, used_a, "B"),
                                                        (obs_b, obs_a, b_to_a, why_b, folded_b, used_b, "A")):
        for k, reason in folded_elsewhere(obs, other, paired, used | set(why), side).items():
            why[k] = reason
            folded.add(k)

    def cause(k: int, folded: set[int], shape: set[int], other: set[int]) -> str:
        return FOLDED if k in folded else OTHER_SHAPE if k in shape else DIFFERENT_FUNCTION if k in other else NO_COUNTERPART

    ua = [Unmatched(o, why_a.get(i, "no counterpart in B"), cause(i, folded_a, shape_a, other_a))
          for i, o in enumerate(obs_a) if i not in used_a]
    ub = [Unmatched(o, why_b.get(j, "no counterpart in A"), cause(j, folded_b, shape_b, other_b))
          for j, o in enumerate(obs_b) if j not in used_b]
    return Matching(pairs, ua, ub)


def _ancestry(obs: list[Observable]):
    """``upstream(k, name)``: whether the observed tensor or graph input ``name`` ("input:NAME") is among
    what observable ``k`` is computed from (its ``sources``, theirs, and so on), as bit sets."""
    bit: dict[str, int] = {}
    for o in obs:
        for s in (o.name, *o.sources):
            bit.setdefault(s, len(bit))
    mask: dict[str, int] = {}

    def of(name: str, depth: int = 0) -> int:
        if name in mask:
            return mask[name]
        m = 0
        for s in by_name[name].sources if name in by_name and depth < 400 else ():
            m |= (1 << bit[s]) | (of(s, depth + 1) if s in by_name else 0)
        mask[name] = m
        return m

    by_name = {o.name: o for o in obs if o.sources}
    for o in sorted(by_name.values(), key=lambda o: o.index):  # upstream first: shallow recursion
        of(o.name)
    return lambda k, name: name in bit and bool(of(obs[k].name) >> bit[name] & 1)


def _readers(obs: list[Observable]) -> dict[str, list[int]]:
    """Observed tensor name -> the observables whose nodes read it (``Observable.sources``)."""
    out: dict[str, list[int]] = {}
    for k, o in enumerate(obs):
        for s in o.sources:
            out.setdefault(s, []).append(k)
    return out


def _swapped(i: int, j: int, read_a: list[str], to_a: list, obs_a, obs_b, used_a, used_b, readers_b, idx_a) -> bool:
    """Whether A's ``i`` and B's ``j`` are one op applied in another order: B's node reads a tensor whose
    partner A's node does not read (it reads a tensor of A's own, unpaired, computed from it), and that
    unpaired tensor's op is applied to ``j``'s output in B (Sigmoid(Relu(m)) against Relu(Sigmoid(m)): the
    Sigmoids align by op, order and shape, yet are other functions). An op of A's own that B has nowhere
    after ``j`` (a Pad that B's Conv took in) says nothing."""
    if not any(t is not None and t not in read_a for t in to_a):
        return False
    between = {canonical(obs_a[idx_a[u]].effective_op) for u in read_a if u in idx_a and idx_a[u] not in used_a}
    after = {canonical(obs_b[k].effective_op) for k in readers_b.get(obs_b[j].name, ()) if k not in used_b}
    return bool(between & after)


def _node_stem(name: str) -> str:
    for s in ("_quant", "_QuantizeLinear", "_DequantizeLinear"):
        if name.endswith(s):
            return name[: -len(s)]
    return name


def _undo_contradicted(pairs, made, used_a, used_b, a_to_b, b_to_a, other_reads, why_a, why_b, other_a, other_b) -> bool:
    """Unpair the structural pairs whose tensors, by what they read, are other functions of the data (as
    ``other_reads`` now tells: why, for each side); True when any was."""
    bad = [(k, why) for k, (p, (i, j)) in enumerate(zip(pairs, made)) if p.strategy == "structural" and (why := other_reads(i, j))]
    for k, why in reversed(bad):
        p, (i, j) = pairs.pop(k), made.pop(k)
        used_a.discard(i)
        used_b.discard(j)
        a_to_b.pop(p.a.name, None)
        b_to_a.pop(p.b.name, None)
        if isinstance(why[0], Unknown) or isinstance(why[1], Unknown):  # not shown to be one function, nor other
            why_a[i], why_b[j] = f"structural candidate {p.b.name} in B: {why[0]}", f"structural candidate {p.a.name} in A: {why[1]}"
            continue
        # each why says what this tensor does (its subject), not the candidate
        why_a[i] = f"structural candidate {p.b.name} in B: it {why[0]} (another function of the data)"
        why_b[j] = f"structural candidate {p.a.name} in A: it {why[1]} (another function of the data)"
        other_a.add(i)
        other_b.add(j)
    return bool(bad)


def alike(a: Observable, b: Observable, shared: set[str], a_scope=None) -> bool:
    """Whether ``a`` and ``b`` may be one function of the data, by what they are: the same op and scope,
    shapes that agree, no Relu folded into one side's quantization range against a tensor the other
    model's Relu reads (Relu(x) against x: the pairing by key takes the Relu's output), and not each
    reading weights both models hold (``shared``, by value) that the other does not, nor each reading a
    weight of a size the other reads none of (Conv(x, W 1x1) against Conv(x, W 3x3), whatever the values)."""
    relu_folded = (a.floor_zero and b.relu) or (b.floor_zero and a.relu)
    return (_same_function_op(a, b) and a.shape is not None and b.shape is not None
            and shapes_agree(a.shape, b.shape) and (a_scope(a.scope) if a_scope else a.scope) == b.scope and not relu_folded
            and not contradicts(a, b, shared))


def _same_function_op(a: Observable, b: Observable) -> bool:
    """The same op, or a Conv with its tail folded in against that tail's output (``match.folds``); never a
    Conv whose tail follows against one whose does not (the folded one computes the tail's function too)."""
    if canonical(a.effective_op) == canonical(b.effective_op):
        return a.bn_next == b.bn_next
    conv, bn = (a, b) if canonical(a.effective_op) == "Conv" else (b, a)
    return canonical(conv.effective_op) == "Conv" and bn.conv_bn and not conv.bn_next


def shared_weights(obs_a: list[Observable], obs_b: list[Observable]) -> set[str]:
    return {w for o in obs_a for w in o.weights} & {w for o in obs_b for w in o.weights}


def _same_weights(obs_a, obs_b, used_a, used_b, take, like) -> None:
    """``take(i, j, reason)`` for the unpaired tensors of each model that are the only ones there to read
    exactly these float constants (by value; scalars, which many nodes read, are no evidence) with this
    op, in this scope: parallel branches of one shape that alignment by order alone would cross (two 1x1
    Convs listed in the other order)."""
    def groups(obs, used) -> dict:
        out: dict = {}
        for k, o in enumerate(obs):
            weights = frozenset(w for w in o.weights if not w.startswith("s:"))
            if weights:
                out.setdefault((weights, canonical(o.effective_op), o.scope), []).append(k)
        return {key: ks[0] for key, ks in out.items() if len(ks) == 1 and ks[0] not in used}

    ga, gb = groups(obs_a, used_a), groups(obs_b, used_b)
    for key, i in ga.items():
        j = gb.get(key)
        if j is not None and like(obs_a[i], obs_b[j]):
            take(i, j, f"reads the same weights with {key[1]} (by value)")


def _same_inputs(obs_a, obs_b, used_a, used_b, a_to_b: dict[str, str], take, like, a_scope) -> None:
    """``take(i, j, reason)`` for unpaired tensors whose nodes read tensors paired with each other (or the
    same graph inputs), with the same op, in the same scope, each alone in its model to do so; in
    topological order, so that a chain behind a pair follows it."""
    def key(o, sources, scope=None) -> tuple:
        return frozenset(sources), canonical(o.effective_op), o.scope if scope is None else scope

    def mapped(o) -> list[str | None]:
        return [s if s.startswith("input:") else a_to_b.get(s) for s in o.sources]

    by_b: dict[tuple, list[int]] = {}
    for j, o in enumerate(obs_b):
        if j not in used_b and o.sources:
            by_b.setdefault(key(o, o.sources), []).append(j)
    count_a: dict[tuple, int] = {}
    for i, o in enumerate(obs_a):
        if i not in used_a and o.sources:
            count_a[key(o, o.sources)] = count_a.get(key(o, o.sources), 0) + 1
    for i in sorted(range(len(obs_a)), key=lambda k: obs_a[k].index):
        o = obs_a[i]
        if i in used_a or not o.sources or count_a.get(key(o, o.sources), 0) != 1:
            continue
        to = mapped(o)
        js = by_b.get(key(o, to, a_scope(o.scope)), []) if None not in to else []  # B's key: in B's scope names
        js = [j for j in js if j not in used_b]
        if len(js) == 1 and like(o, obs_b[js[0]]):
            take(i, js[0], f"{canonical(o.effective_op)} of tensors paired with what B's reads")
