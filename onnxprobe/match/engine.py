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
from onnxprobe.match.folds import folded_elsewhere
from onnxprobe.match.observe import Observable, scoped_hint, stem
from onnxprobe.match.ops import canonical, compatible, function_op
from onnxprobe.match.pairs import Matching, Pair, Unmatched, shape_words, shapes_agree  # noqa: F401
from onnxprobe.match.readers import pair_by_readers
from onnxprobe.match.refused import named_other, refuse
from onnxprobe.match.state import MatchState, alike, shared_weights  # noqa: F401
from onnxprobe.match.weights import near_weights
from onnxprobe.text import some
# matching's causes live in onnxprobe.types (report/ reads them in the JSON too); imported from here as well
from onnxprobe.types import (COPY, DIFFERENT_FUNCTION, FOLDED, MAP, NO_COUNTERPART, NO_GRADIENT, NO_NUMBERS,  # noqa: F401
                             NOT_OBSERVABLE, OTHER_SHAPE, OTHER_VALUES)


def match(obs_a: list[Observable], obs_b: list[Observable], user_map: dict[str, str] | None = None) -> Matching:
    """Pair ``obs_a`` (model A's observables) with ``obs_b`` (B's) by the strategies above, in that order."""
    st = MatchState(obs_a, obs_b)
    _pair_user_map(st, user_map or {})
    _pair_by_key(st)
    _pair_by_stem(st)
    _pair_by_node_name(st)
    _undo_named_other(st)
    _pair_by_weights_and_reads(st)
    _align_structurally(st)
    _undo_contradicted(st)
    pair_by_readers(st)
    _say_refused(st)
    _say_unpaired_branches(st)
    return _matching(st)


def _pair_user_map(st: MatchState, user_map: dict[str, str]) -> None:
    """Step 1: every (A name -> B name) of ``user_map`` paired, each name an observable's name, key or probe;
    a name that is none, or is in another entry, or a pair of other shapes: a UsageError."""
    obs_a, obs_b = st.obs_a, st.obs_b
    for a_name, b_name in user_map.items():
        ia = next((i for i, o in enumerate(obs_a) if a_name in (o.name, o.key, o.probe)), None)
        jb = next((j for j, o in enumerate(obs_b) if b_name in (o.name, o.key, o.probe)), None)
        if ia is None or jb is None:
            missing = a_name if ia is None else b_name
            raise setting_error(UsageError, MAP, f": tensor {missing!r} is not an observable tensor of model {'A' if ia is None else 'B'}"
                             + scoped_hint(obs_a if ia is None else obs_b, missing))
        # the user's pair is made as given or refused out loud: silently falling back to the other
        # strategies would report a comparison the user did not ask for as if it were theirs
        if ia in st.used_a or jb in st.used_b:
            twice = a_name if ia in st.used_a else b_name
            raise settings_error(UsageError, lambda say: f"{say(MAP)} {a_name} -> {b_name}: {twice!r} is already in another {say(MAP)} entry")
        # a float tensor of a quantized model is compared as its quantized value (the observable whose key it
        # is: the Q -> DQ copy the next layers use, a uint8 tensor), as the other strategies compare it: said
        via = [f"{side}'s {n!r} compared as {o.name!r}, its quantized value" for side, n, o in
               (("A", a_name, obs_a[ia]), ("B", b_name, obs_b[jb])) if n not in (o.name, o.probe)]
        if not st.take(ia, jb, "map", "given in --map" + (f" ({'; '.join(via)})" if via else "")):
            raise setting_error(UsageError, MAP, f"{a_name} -> {b_name}: shapes {shape_words(obs_a[ia].shape)} and "
                                f"{shape_words(obs_b[jb].shape)} differ, so they cannot be compared")


def _key_pairing(a: Observable, b: Observable) -> tuple[str, str]:
    """(strategy, reason) of A's ``a`` and B's ``b`` paired by key: the quantized side's kind, whichever model
    it is (a float A against its quantized B: B's), and how its value stands for the float one."""
    q, where = (a, "") if a.kind != "float" or b.kind == "float" else (b, " in B")
    strategy = "name" if q.kind == "float" else q.kind
    reason = {"name": "same tensor name", "qdq": f"DequantizeLinear(QuantizeLinear({a.key})){where}",
              "qoperator": f"{q.op_type} output{where} dequantized with its own scale",
              "dynamic": f"float result{where} after the integer layer's rescale"}[strategy]
    return strategy, reason


def _pair_by_key(st: MatchState) -> None:
    """Step 2: each unpaired A tensor with B's of the same key (its name, or the float name a quantized value
    stands for); where a quantized side's range starts at 0 and the float side applies a Relu to the
    tensor, with that Relu's output instead (``_pair_past_folded_relu``)."""
    for i, a in enumerate(st.obs_a):
        if i in st.used_a:
            continue
        j = st.b_by_key.get(a.key)
        if j is None or j in st.used_b:
            continue
        b = st.obs_b[j]
        strategy, reason = _key_pairing(a, b)
        if not _pair_past_folded_relu(st, i, j, strategy, reason):
            # a side of no graph (saved activations: op "?") says no op
            ops = ("" if a.effective_op == b.effective_op or "?" in (a.effective_op, b.effective_op)
                   else f"; {a.effective_op} in A stands for {b.effective_op} in B")
            st.take(i, j, strategy, reason + ops)


def _pair_past_folded_relu(st: MatchState, i: int, j: int, strategy: str, reason: str) -> bool:
    """Whether A's ``i`` and B's ``j`` (of one key) were settled as a Relu folded into one side's quantization
    range: the float side's tensor left unpaired (folded), its Relu's output paired instead where free."""
    a, b = st.obs_a[i], st.obs_b[j]
    # a quantized value whose range starts at 0 holds Relu(x) when the float model applies a Relu to x
    # (or a Clip from 0: a Relu6, a HardSwish's clip): it is compared with that node's output, never
    # with x (a different function of the data); not where the quantized model holds that node's output
    # itself (it kept the node: a range that starts at 0 by itself, a Sigmoid's)
    if a.floor_zero and b.kind == "float" and b.relu in st.b_by_name and b.relu not in st.a_keys:
        r = st.b_by_name[b.relu]
        op = st.obs_b[r].op_type if st.obs_b[r].op_type != "?" else "Relu"  # saved values: a Relu by its values
        st.why_b[j] = f"its {op} {b.relu!r} is folded into A's quantization range: compared there (with A's {a.name!r})"
        st.folded_b.add(j)
        if r not in st.used_b:
            st.take(i, r, strategy, reason + f"; B's {op} is folded into A's quantization range (no value below 0)")
        return True
    if b.floor_zero and a.kind == "float" and a.relu in st.a_by_name and a.relu not in st.b_by_key:
        r = st.a_by_name[a.relu]
        op = st.obs_a[r].op_type if st.obs_a[r].op_type != "?" else "Relu"
        st.why_a[i] = f"its {op} {a.relu!r} is folded into B's quantization range: compared there (with B's {b.name!r})"
        st.folded_a.add(i)
        if r not in st.used_a:
            st.take(r, j, "name" if b.kind == "float" else b.kind, reason + f"; A's {op} is folded into B's quantization range (no value below 0)")
        return True
    return False


def _pair_by_stem(st: MatchState) -> None:
    """Step 3: an unpaired A tensor whose name or key without a quantizer suffix (``_quantized``...) is a
    free B tensor's key or name, of a compatible op."""
    for i, a in enumerate(st.obs_a):
        if i in st.used_a:
            continue
        for cand in dict.fromkeys(c for c in (stem(a.name), stem(a.key)) if c not in (a.name, a.key)):  # a suffix to drop
            j = st.b_by_key.get(cand, st.b_by_name.get(cand))
            if j is not None and j not in st.used_b and compatible(a.effective_op, st.obs_b[j].effective_op):
                if st.take(i, j, "qoperator-stem", f"{a.name} is the quantized {cand}"):
                    break


def _pair_by_node_name(st: MatchState) -> None:
    """Step 4: unpaired tensors whose nodes have one name of their own (a ``_quant`` suffix aside) and
    compatible ops; a candidate whose reads contradict, or that reads a refused one, joins ``st.renamed``."""
    b_by_node: dict[str, list[int]] = {}
    for j, o in enumerate(st.obs_b):
        if o.node_named:  # an unnamed node's "Op_index" says only where it is: no evidence
            b_by_node.setdefault(_node_stem(o.node), []).append(j)
    # a node an optimizer rewrote keeps its name (onnxruntime's transpose optimizer moves a Transpose below a
    # Slice, which then reads x where B's reads Transpose(x)): a candidate whose reads contradict
    # (``reads_alike``), or that reads such a refused candidate, is another function of the data
    for i, a in enumerate(st.obs_a):
        if i in st.used_a or not a.node_named:
            continue
        for j in b_by_node.get(_node_stem(a.node), []):
            if j not in st.used_b and compatible(a.effective_op, st.obs_b[j].effective_op):
                b = st.obs_b[j]
                if not st.reads_alike(i, j) or _reads_transposed(st, i, j) or \
                        any((s, t) in st.renamed for s in a.sources for t in b.sources):
                    st.renamed.add((a.name, b.name))
                    st.refuse_other(i, j, "node-name")
                elif st.take(i, j, "node-name", f"same node name {a.node!r}"):
                    break


# ops that take a Transpose of what they read in (a MatMul's transA, FusedMatMul, Gemm, a Conv's layout): one of
# them reading x where the other reads Transpose(x) may compute one function
_ABSORB_TRANSPOSE = ("MatMul", "Gemm", "Conv", "Einsum", "Attention")


def _reads_transposed(st: MatchState, i: int, j: int) -> bool:
    """Whether one of A's ``i`` and B's ``j`` reads a tensor paired with what an unpaired Transpose on the other
    side reads, and the other reads that Transpose's output (onnxruntime's transpose optimizer moves a Slice or
    Squeeze above a Transpose and keeps its name: Slice(x) against Slice(Transpose(x)), two functions of the data,
    whose shapes differ at run time where no static shape tells them apart); not for ops that take transposes in."""
    a, b = st.obs_a[i], st.obs_b[j]
    if any(w in op for op in (a.effective_op, b.effective_op) for w in _ABSORB_TRANSPOSE):
        return False

    def moved(mine, other, obs, index, used, to_other) -> bool:  # ``other`` reads an unpaired Transpose of what
        read = {to_other.get(s) for s in mine.sources} - {None}    # ``mine`` reads (as the other side's tensors)
        return any(k is not None and k not in used and obs[k].op_type == "Transpose" and read & set(obs[k].sources)
                   for k in (index.get(t) for t in other.sources))

    return (moved(a, b, st.obs_b, st.index_b, st.used_b, st.a_to_b) or
            moved(b, a, st.obs_a, st.index_a, st.used_a, st.b_to_a))


def _undo_named_other(st: MatchState) -> None:
    """Pairs by name that are two functions of the data (``match.refused.named_other``) undone, before
    anything is aligned between them: a name is no proof (step 8 says why, where their weights contradict)."""
    for k in [k for k, p in enumerate(st.pairs) if p.strategy == "name"][::-1]:
        why = named_other(st.pairs[k].a, st.pairs[k].b, st.shared, st.a_to_b)
        if why is not None:
            p, i, j = st.unpair(k)
            st.why_a[i], st.why_b[j] = f"name candidate {p.b.name} in B: it {why[0]}", f"name candidate {p.a.name} in A: it {why[1]}"
            st.other_a.add(i), st.other_b.add(j)


def _pair_by_weights_and_reads(st: MatchState) -> None:
    """Step 5: a tensor of each model, alone in it to read those float constants with that op (exactly, then
    moved a little); then what reads tensors paired so far, before any pairing by order (which may cross
    parallel branches)."""
    _same_weights(st.obs_a, st.obs_b, st.used_a, st.used_b, st.structural, st.like)
    near_weights(st.obs_a, st.obs_b, st.used_a, st.used_b, st.structural, st.like)  # moved a little
    _same_inputs(st)


def _align_structurally(st: MatchState) -> None:
    """Step 6: structural alignment between the pairs made, and what reads its pairs; again while If nodes
    were paired after their branches were aligned (the branches as one another's, a nesting level a round)."""
    align(st.obs_a, st.obs_b, st.used_a, st.used_b, st.structural, list(st.made), st.like)
    _same_inputs(st)
    known = 0
    while len(st.if_map) > known:
        known = len(st.if_map)
        align(st.obs_a, st.obs_b, st.used_a, st.used_b, st.structural, list(st.made), st.like)
        _same_inputs(st)


def _undo_contradicted(st: MatchState) -> None:
    """Step 7: structural pairs undone that are other functions of the data, now that every pair is made:
    those that read tensors paired with others (one made before what it reads was paired, by order in
    crossed branches; what reads the pairs that stand is paired again), those that read node-name
    candidates refused (the transpose of one another), and integer pairs (shape computations, indices) of
    other functions, each with what reads them in turn."""
    unpaired = st.unpair_structural(st.other_reads)
    if unpaired:
        # what was paired for reading them (a Reshape after two Gemms paired crosswise) reads other functions too
        st.renamed.update(unpaired)
        _same_inputs(st)
    # not pairs by name, which a later Transpose may make one function again (onnxruntime renames the
    # tensors it rewrites and keeps the others' names)
    while st.renamed and st.unpair_structural(st.reads_renamed):
        pass
    while st.unpair_structural(st.other_integers):
        pass
    # pairs by name whose reads are all paired, with other tensors (one exporter, two lines of forward() swapped:
    # the names follow the order, not the function); what reads the pairs that stand is paired again, crosswise
    if st.unpair_structural(st.crossed_reads, strategy="name"):
        _same_inputs(st)
        align(st.obs_a, st.obs_b, st.used_a, st.used_b, st.structural, list(st.made), st.like)
        _same_inputs(st)


def _say_refused(st: MatchState) -> None:
    """Step 8: the candidates refused for their weights (``match.refused``), where no reason of their own
    stands (another shape, a folded Relu), and the tensors folded into another node (``match.folds``), said;
    the pairs put in model order."""
    ref_a, ref_b = refuse(st.obs_a, st.obs_b, st.pairs, st.made, st.used_a, st.used_b, st.shared, st.a_scope)
    for why, other, ref in ((st.why_a, st.other_a, ref_a), (st.why_b, st.other_b, ref_b)):
        for k, reason in ref.items():
            if k not in why or k in other:
                why[k] = reason
                other.add(k)
    st.pairs.sort(key=lambda p: (p.a.index, p.b.index))
    for obs, other_obs, paired, why, folded, used, side in ((st.obs_a, st.obs_b, st.a_to_b, st.why_a, st.folded_a, st.used_a, "B"),
                                                           (st.obs_b, st.obs_a, st.b_to_a, st.why_b, st.folded_b, st.used_b, "A")):
        for k, reason in folded_elsewhere(obs, other_obs, paired, used | set(why), side).items():
            why[k] = reason
            folded.add(k)


def _say_unpaired_branches(st: MatchState) -> None:
    """Step 9: a tensor of an If branch whose If has no counterpart If in the other model, left with no reason of
    its own, says why: tensors pair within one scope (a branch with the branch of the If its If is paired with, the
    main graph with the main graph), so nothing of the other model is compared with it. "no counterpart in A" read as
    if A lacked the layer (silero-vad's 16k model against its export that computes it inside an If on the sample
    rate: the same weights, every Conv and LSTM unpaired)."""
    lone: dict[str, list[str]] = {"A": [], "B": []}  # each model's unpaired If branches holding unpaired tensors
    for obs, used, why, mine, other, paired in ((st.obs_a, st.used_a, st.why_a, "A", "B", set(st.if_map)),
                                               (st.obs_b, st.used_b, st.why_b, "B", "A", set(st.if_map.values()))):
        for k, o in enumerate(obs):
            if k in used or k in why or not o.scope or o.scope.rsplit("/", 1)[0] in paired:
                continue
            why[k] = (f"in the If branch {o.scope} of {mine}, whose If has no counterpart If in {other}: tensors pair "
                      f"within one scope, so none of {other}'s is compared with it (--map pairs two by name)")
            lone[mine] += [o.scope] if o.scope not in lone[mine] else []
    # and the other model's tensors outside such branches: their counterpart may lie inside one
    for obs, used, why, other in ((st.obs_a, st.used_a, st.why_a, "B"), (st.obs_b, st.used_b, st.why_b, "A")):
        if not lone[other]:
            continue
        shown = some(lone[other], 2, form=str)
        for k, o in enumerate(obs):
            if k not in used and k not in why:
                why[k] = f"no counterpart in {other} outside its If branches that pair with nothing ({shown})"


def _matching(st: MatchState) -> Matching:
    """The result: the pairs, and each model's unpaired tensors with the reason and cause left on them."""
    def unmatched(obs, used, why, folded, shape, other, other_side) -> list[Unmatched]:
        return [Unmatched(o, why.get(k, f"no counterpart in {other_side}"),
                          FOLDED if k in folded else OTHER_SHAPE if k in shape else DIFFERENT_FUNCTION if k in other else NO_COUNTERPART)
                for k, o in enumerate(obs) if k not in used]

    return Matching(st.pairs, unmatched(st.obs_a, st.used_a, st.why_a, st.folded_a, st.shape_a, st.other_a, "B"),
                    unmatched(st.obs_b, st.used_b, st.why_b, st.folded_b, st.shape_b, st.other_b, "A"))


def _node_stem(name: str) -> str:
    """A node's name without a quantizer's suffix."""
    for s in ("_quant", "_QuantizeLinear", "_DequantizeLinear"):
        if name.endswith(s):
            return name[: -len(s)]
    return name


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


def _same_inputs(st: MatchState) -> None:
    """``st.structural(i, j, reason)`` for unpaired tensors whose nodes read tensors paired with each other (or
    the same graph inputs), with the same op, in the same scope, each alone in its model to do so; in
    topological order, so that a chain behind a pair follows it. Then so again by what each reads that holds data
    (and graph inputs) alone: a shape computed at run time on one side (Shape, Slice, Concat into a Reshape) is a
    constant on the other where a tool folded it (onnxruntime's quant_pre_process), no evidence either way; an If's
    condition, which holds no data, pairs it in the first round."""
    _same_inputs_by(st, lambda o, data: o.sources)
    _same_inputs_by(st, lambda o, data: tuple(s for s in o.sources if s.startswith("input:") or s in data))


def _same_inputs_by(st: MatchState, read) -> None:
    """``_same_inputs`` with ``read(observable, the data tensors of its model)`` as what an observable reads."""
    obs_a, obs_b, used_a, used_b, a_to_b, take, like, a_scope = (st.obs_a, st.obs_b, st.used_a, st.used_b, st.a_to_b,
                                                                  st.structural, st.like, st.a_scope)

    def key(o, sources, scope=None) -> tuple:  # a GlobalAveragePool and its ReduceMean: one op (``match.ops.function_op``)
        return frozenset(sources), function_op(o), o.scope if scope is None else scope

    src_a, src_b = [read(o, st.data_a) for o in obs_a], [read(o, st.data_b) for o in obs_b]

    def mapped(i) -> list[str | None]:
        return [s if s.startswith("input:") else a_to_b.get(s) for s in src_a[i]]

    by_b: dict[tuple, list[int]] = {}
    for j, o in enumerate(obs_b):
        if j not in used_b and src_b[j]:
            by_b.setdefault(key(o, src_b[j]), []).append(j)
    group_a: dict[tuple, list[int]] = {}
    for i, o in enumerate(obs_a):
        if i not in used_a and src_a[i]:
            group_a.setdefault(key(o, src_a[i]), []).append(i)
    for i in sorted(range(len(obs_a)), key=lambda k: obs_a[k].index):
        o = obs_a[i]
        if i in used_a or not src_a[i]:
            continue
        group = group_a.get(key(o, src_a[i]), [])
        to = mapped(i)
        js = by_b.get(key(o, to, a_scope(o.scope)), []) if None not in to else []  # B's key: in B's scope names
        js = [j for j in js if j not in used_b]
        why = f"{canonical(o.effective_op)} of tensors paired with what B's reads"
        if len(group) == 1 and len(js) == 1 and like(o, obs_b[js[0]], open_shapes=True):  # reads what B's reads: no
            take(i, js[0], why)  # static shape needed
        elif len(group) == len(js) > 1 and i == group[0] and _one_node(obs_a, group) and _one_node(obs_b, js):
            # the outputs of one node on each side (an If's, a Split's): by their order
            for ia, jb in zip(group, js):
                if ia not in used_a and jb not in used_b and like(obs_a[ia], obs_b[jb], open_shapes=True):
                    take(ia, jb, why)


def _one_node(obs: list[Observable], ks: list[int]) -> bool:
    """Whether the observables ``ks`` are outputs of one named node, in its outputs' order (as ``observe`` lists them)."""
    nodes = {obs[k].node for k in ks}
    return len(nodes) == 1 and "" not in nodes and ks == sorted(ks)
