"""The state the steps of one matching share (``match.engine.match``): both models' observables with the
lookups into them, built once, and the pairs made so far with what each refused candidate left on its
tensors; ``take`` makes a pair, ``structural`` one by alignment, ``unpair_structural`` undoes some."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from onnxprobe.match.folds import is_conv, node_words, tail_folded
from onnxprobe.match.integers import IntegerCheck, Unknown, other_settings
from onnxprobe.match.observe import Observable
from onnxprobe.match.ops import canonical, function_op, one_function
from onnxprobe.match.pairs import Pair, shape_words, shapes_agree
from onnxprobe.match.refused import contradicts

# why A's i and B's j are other functions of the data, as each side says it, or None
OtherReads = Callable[[int, int], "tuple[str, str] | None"]


@dataclass(eq=False)
class MatchState:
    """One matching in progress. ``pairs`` and ``made`` (their indices) stay in step; ``used_*`` are the
    paired indices, ``a_to_b`` / ``b_to_a`` their names; ``why_*`` the reason left on a refused candidate and
    ``shape_*`` / ``folded_*`` / ``other_*`` its cause (another shape, a tail folded elsewhere, another
    function of the data); ``if_map`` pairs If nodes; ``renamed`` the (A, B) names refused by node name."""
    obs_a: list[Observable]
    obs_b: list[Observable]
    pairs: list[Pair] = field(default_factory=list)
    made: list[tuple[int, int]] = field(default_factory=list)
    used_a: set[int] = field(default_factory=set)
    used_b: set[int] = field(default_factory=set)
    why_a: dict[int, str] = field(default_factory=dict)
    why_b: dict[int, str] = field(default_factory=dict)
    shape_a: set[int] = field(default_factory=set)
    shape_b: set[int] = field(default_factory=set)
    folded_a: set[int] = field(default_factory=set)  # compared after the other model's quantization range took their Relu
    folded_b: set[int] = field(default_factory=set)
    other_a: set[int] = field(default_factory=set)  # a candidate read other tensors
    other_b: set[int] = field(default_factory=set)
    a_to_b: dict[str, str] = field(default_factory=dict)
    b_to_a: dict[str, str] = field(default_factory=dict)
    if_map: dict[str, str] = field(default_factory=dict)  # A's If node -> B's, once their outputs are paired
    renamed: set[tuple[str, str]] = field(default_factory=set)

    def __post_init__(self) -> None:
        """The lookups every step reads, built once from the observables (none depends on the pairs)."""
        obs_a, obs_b = self.obs_a, self.obs_b
        self.b_by_key: dict[str, int] = {}
        self.b_by_name: dict[str, int] = {}
        for j, o in enumerate(obs_b):
            self.b_by_key.setdefault(o.key, j)
            self.b_by_name.setdefault(o.name, j)
        self.a_by_name: dict[str, int] = {}
        for i, o in enumerate(obs_a):
            self.a_by_name.setdefault(o.name, i)
        self.a_keys = {o.key for o in obs_a}
        self.inputs_a = {s for o in obs_a for s in o.sources if s.startswith("input:")}
        self.inputs_b = {s for o in obs_b for s in o.sources if s.startswith("input:")}
        self.up_a, self.up_b = _ancestry(obs_a), _ancestry(obs_b)
        self.readers_a, self.readers_b = _readers(obs_a), _readers(obs_b)
        self.index_a, self.index_b = {o.name: k for k, o in enumerate(obs_a)}, {o.name: k for k, o in enumerate(obs_b)}
        self.data_a, self.data_b = {o.name for o in obs_a if o.data}, {o.name for o in obs_b if o.data}
        self.shared = shared_weights(obs_a, obs_b)
        self.ints = IntegerCheck(obs_a, obs_b, self.a_to_b, self.b_to_a, self.inputs_a, self.inputs_b, self.up_a, self.up_b)

    def take(self, i: int, j: int, strategy: str, reason: str) -> bool:
        """Pair A's ``i`` with B's ``j``, or refuse them (False) with the reason left on both: another shape,
        or a Conv with its tail folded in against one the tail follows (paired later, with the tail's output)."""
        a, b = self.obs_a[i], self.obs_b[j]
        if (strategy != "map" and a.kind == b.kind == "float" and canonical(a.effective_op) == canonical(b.effective_op) and is_conv(a)
                and a.tails_after != b.tails_after and not unfolded(a, b)):
            # one name, two functions: a Conv with its BatchNormalization (or bias, scale) folded in against one the
            # tail follows; the folded one pairs with the tail's output (``match.folds``), by alignment
            # (the one more tails follow took fewer in: onnxsim folds a BatchNormalization and a scale, not the bias)
            k, why, folded, other = ((j, self.why_b, self.folded_b, a) if b.tails_after > a.tails_after
                                     else (i, self.why_a, self.folded_a, b))
            why[k] = tail_folded("A" if b.tails_after > a.tails_after else "B", node_words(other))
            folded.add(k)
            return False
        if not shapes_agree(a.shape, b.shape):
            shapes = f"({shape_words(a.shape)} vs {shape_words(b.shape)})"
            self.why_a[i] = f"{strategy} candidate {b.name} in B has another shape {shapes}"
            self.why_b[j] = f"{strategy} candidate {a.name} in A has another shape {shapes}"
            self.shape_a.add(i)
            self.shape_b.add(j)
            return False
        self.pairs.append(Pair(a, b, strategy, reason))
        self.made.append((i, j))
        if a.op_type == "If" and b.op_type == "If" and a.node and b.node:  # their branches are one another's
            self.if_map[a.node] = b.node
        self.used_a.add(i)
        self.used_b.add(j)
        self.a_to_b[a.name], self.b_to_a[b.name] = b.name, a.name
        return True

    def a_scope(self, scope: str) -> str:
        """A's If-branch scope in B's names, where the If nodes are paired ("If_0/then_branch" -> "cond/then_branch")."""
        for na, nb in self.if_map.items():
            for attr in ("/then_branch", "/else_branch"):
                if scope.startswith(na + attr):
                    scope = nb + scope[len(na):]
                scope = scope.replace(f"_branch/{na}{attr}", f"_branch/{nb}{attr}")
        return scope

    def like(self, x: Observable, y: Observable, open_shapes: bool = False) -> bool:
        """``alike`` with the weights both models hold and B's names for A's If-branch scopes."""
        return alike(x, y, self.shared, self.a_scope, open_shapes)

    def _reads(self, i: int, j: int) -> tuple[list, list, list, list]:
        """(what A's ``i`` reads, what B's ``j`` reads, the former as B's tensors paired with them, the latter as A's):
        data tensors and graph inputs ("input:NAME"); None where one is not paired."""
        read_a = [s for s in self.obs_a[i].sources if s.startswith("input:") or s in self.data_a]
        read_b = [t for t in self.obs_b[j].sources if t.startswith("input:") or t in self.data_b]
        to_b = [(s if s in self.inputs_b else None) if s.startswith("input:") else self.a_to_b.get(s) for s in read_a]
        to_a = [(t if t in self.inputs_a else None) if t.startswith("input:") else self.b_to_a.get(t) for t in read_b]
        return read_a, read_b, to_b, to_a

    @staticmethod
    def _crossed(read_a: list, read_b: list, to_b: list, to_a: list) -> bool:
        """Everything both read is paired, and with other tensors than the other reads (x * (1 + erf) against
        0.5 * (1 + erf))."""
        return bool(read_a and read_b and None not in to_b and None not in to_a and set(to_b) != set(read_b))

    def reads_alike(self, i: int, j: int) -> bool:
        """No contradiction between what the two nodes read (``Observable.sources``) and what the other
        is computed from: a tensor one reads is paired with one that is nowhere upstream of the other
        (Shape of a Reshape's output against Shape of the attention mask). Unpaired sources tell
        nothing; a pair computed in another order (x * a * 0.5 against x * (0.5 * a)) reads alike."""
        obs_a, obs_b = self.obs_a, self.obs_b
        read_a, read_b, to_b, to_a = self._reads(i, j)
        if self._crossed(read_a, read_b, to_b, to_a):
            return False
        if any(t is not None and not self.up_b(j, t) for t in to_b):
            return False
        if _swapped(i, j, read_a, to_a, obs_a, obs_b, self.used_a, self.used_b, self.readers_b, self.index_a) or \
                _swapped(j, i, read_b, to_b, obs_b, obs_a, self.used_b, self.used_a, self.readers_a, self.index_b):
            return False
        if _read_by_another(i, j, read_b, to_b, obs_a, obs_b, self.readers_b, self.used_b) or \
                _read_by_another(j, i, read_a, to_a, obs_b, obs_a, self.readers_a, self.used_a):
            return False
        return not any(s is not None and not self.up_a(i, s) for s in to_a)

    def crossed_reads(self, i: int, j: int) -> tuple[str, str] | None:
        """Why A's ``i`` and B's ``j`` are other functions of the data though one name: everything each reads is paired,
        and with other tensors than the other reads (two lines of forward() swapped: '/Relu_output_0' of branch a in A,
        of branch b in B, each Gemm before it paired with its own namesake). None where nothing says so, and for two
        model outputs of one name, which always pair (what they compute is the question a diff answers)."""
        if self.obs_a[i].is_output and self.obs_b[j].is_output:
            return None
        return ("reads other tensors than it",) * 2 if self._crossed(*self._reads(i, j)) else None

    def other_reads(self, i: int, j: int) -> tuple[str, str] | None:
        """``OtherReads`` by ``reads_alike``; never of two model outputs, which always pair (what they compute is the
        question a diff answers: two models whose weights were swapped between layers differ there)."""
        if self.obs_a[i].is_output and self.obs_b[j].is_output:
            return None
        return None if self.reads_alike(i, j) else ("reads other tensors than it",) * 2

    def other_integers(self, i: int, j: int) -> tuple[str, str] | None:
        """``OtherReads`` of an integer tensor's operands (``match.integers``)."""
        return None if (why := self.ints.why(i, j)) is None else (why, self.ints.why_b(i, j))

    def reads_renamed(self, i: int, j: int) -> tuple[str, str] | None:
        """``OtherReads`` of a pair that reads a refused node-name candidate, which joins ``renamed``; not of two model
        outputs (``other_reads``)."""
        if self.obs_a[i].is_output and self.obs_b[j].is_output:
            return None
        hit = next(((s, t) for s in self.obs_a[i].sources for t in self.obs_b[j].sources if (s, t) in self.renamed), None)
        if hit is not None:
            self.renamed.add((self.obs_a[i].name, self.obs_b[j].name))
        return None if hit is None else (f"reads {hit[1]}, a refused candidate of {hit[0]}, which this reads",
                                         f"reads {hit[0]}, a refused candidate of {hit[1]}, which this reads")

    def refuse_other(self, i: int, j: int, strategy: str) -> None:
        """Leave on ``i`` and ``j`` (where nothing was left yet) that the ``strategy`` candidate reads other tensors."""
        self.why_a.setdefault(i, f"{strategy} candidate {self.obs_b[j].name} in B reads other tensors than it (another function of the data)")
        self.why_b.setdefault(j, f"{strategy} candidate {self.obs_a[i].name} in A reads other tensors than it (another function of the data)")
        self.other_a.add(i)
        self.other_b.add(j)

    def structural(self, i: int, j: int, reason: str) -> None:
        """``take`` by alignment where the two read alike; otherwise refused as another function of the data."""
        if self.reads_alike(i, j):
            self.take(i, j, "structural", reason + one_function(self.obs_a[i], self.obs_b[j]))
            return
        self.refuse_other(i, j, "structural")

    def unpair(self, k: int) -> tuple[Pair, int, int]:
        """Undo the ``k``-th pair: (the pair, A's index, B's index)."""
        p, (i, j) = self.pairs.pop(k), self.made.pop(k)
        self.used_a.discard(i)
        self.used_b.discard(j)
        self.a_to_b.pop(p.a.name, None)
        self.b_to_a.pop(p.b.name, None)
        return p, i, j

    def unpair_structural(self, other_reads: OtherReads, strategy: str = "structural") -> list[tuple[str, str]]:
        """Unpair the pairs made by ``strategy`` whose tensors, by what they read, are other functions of the data
        (as ``other_reads`` now tells: why, for each side); the (A, B) names of those undone (empty: none was)."""
        bad = [(k, why) for k, (p, (i, j)) in enumerate(zip(self.pairs, self.made))
               if p.strategy == strategy and (why := other_reads(i, j))]
        undone = []
        for k, why in reversed(bad):
            p, i, j = self.unpair(k)
            undone.append((p.a.name, p.b.name))
            if isinstance(why[0], Unknown) or isinstance(why[1], Unknown):  # not shown to be one function, nor other
                self.why_a[i], self.why_b[j] = f"{strategy} candidate {p.b.name} in B: {why[0]}", f"{strategy} candidate {p.a.name} in A: {why[1]}"
                continue
            # each why says what this tensor does (its subject), not the candidate
            self.why_a[i] = f"{strategy} candidate {p.b.name} in B: it {why[0]} (another function of the data)"
            self.why_b[j] = f"{strategy} candidate {p.a.name} in A: it {why[1]} (another function of the data)"
            self.other_a.add(i)
            self.other_b.add(j)
        return undone


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


def _read_by_another(i: int, j: int, read_b: list[str], to_b: list, obs_a, obs_b, readers_b, used_b) -> bool:
    """Whether a tensor A's ``i`` reads is paired with a B tensor that B's ``j`` does not read and that another B node
    of ``i``'s op, paired with another A tensor, reads directly: that node reads what ``i`` reads, not ``j`` (two
    residual blocks whose same-shaped weights are swapped: block 0's Gemm in A paired by its weight's bytes with block
    1's in B, which lies downstream of block 0's input, so 'nowhere upstream' allowed it). A B node of another op between them (a Cast inserted) says
    nothing, nor does one unpaired (x * e * 0.5 against x * (0.5 * e): B's first Mul reads x, unpaired), nor a pair of
    two ops (a Conv with its BatchNormalization folded in against that BatchNormalization, whose Conv reads what the
    folded one reads: ``match.folds``)."""
    op = function_op(obs_a[i])
    if function_op(obs_b[j]) != op:  # a Conv that took in its tails against the last tail: the bare Conv reads it
        return False
    for t in to_b:
        if t is None or t in read_b or t.startswith("input:"):
            continue
        if any(k != j and k in used_b and function_op(obs_b[k]) == op for k in readers_b.get(t, ())):
            return True
    return False


def _swapped(i: int, j: int, read_a: list[str], to_a: list, obs_a, obs_b, used_a, used_b, readers_b, idx_a) -> bool:
    """Whether A's ``i`` and B's ``j`` are one op applied in another order: B's node reads a tensor whose
    partner A's node does not read (it reads a tensor of A's own, unpaired, computed from it), and that
    unpaired tensor's op is applied to ``j``'s output in B (Sigmoid(Relu(m)) against Relu(Sigmoid(m)): the
    Sigmoids align by op, order and shape, yet are other functions). An op of A's own that B has nowhere
    after ``j`` (a Pad that B's Conv took in) says nothing, nor does a tail (``i``) against a Conv (``j``) that took it
    in: the Conv or tail before it that the tail reads is the chain's, which that Conv holds too (``match.folds``)."""
    if not any(t is not None and t not in read_a for t in to_a):
        return False
    folded = obs_a[i].conv_bn and is_conv(obs_b[j])
    between = {function_op(obs_a[idx_a[u]]) for u in read_a if u in idx_a and idx_a[u] not in used_a
               and not (folded and (is_conv(obs_a[idx_a[u]]) or obs_a[idx_a[u]].conv_bn))}
    after = {function_op(obs_b[k]) for k in readers_b.get(obs_b[j].name, ()) if k not in used_b}
    return bool(between & after)


def alike(a: Observable, b: Observable, shared: set[str], a_scope=None, open_shapes: bool = False) -> bool:
    """Whether ``a`` and ``b`` may be one function of the data, by what they are: the same op and scope,
    shapes that agree, no Relu folded into one side's quantization range against a tensor the other
    model's Relu reads (Relu(x) against x: the pairing by key takes the Relu's output), and not each
    reading weights both models hold (``shared``, by value) that the other does not, nor each reading a
    weight of a size the other reads none of (Conv(x, W 1x1) against Conv(x, W 3x3), whatever the values).
    ``open_shapes``: tensors of no static shape may pair, both (an If whose branches leave its rank open, and what
    reads it: torch's squeeze(-1)) or one (a MatMul behind a Reshape to a shape computed at run time, against one
    behind the constant shape a tool folded it into), where what they read says they are one function
    (``engine._same_inputs``)."""
    relu_folded = (a.floor_zero and b.relu) or (b.floor_zero and a.relu)
    known = a.shape is not None and b.shape is not None and shapes_agree(a.shape, b.shape)
    shaped = known or (open_shapes and (a.shape is None or b.shape is None))
    return (_same_function_op(a, b) and shaped and (a_scope(a.scope) if a_scope else a.scope) == b.scope
            and not relu_folded and not contradicts(a, b, shared) and not other_settings(a, b))


def unfolded(a: Observable, b: Observable) -> bool:
    """Two Convs that read the same weights, byte for byte: neither took a BatchNormalization or scale in (that
    changes the weights), whatever follows each (B's Conv followed by x2 in 2 sigmoid(2x) - 1, A's by Tanh)."""
    return bool(a.weights) and a.weights == b.weights


def _same_function_op(a: Observable, b: Observable) -> bool:
    """The same op (or one function that two exporters write with other ops: ``match.ops.function_op``), or a
    Conv with its tails folded in against the last folded tail's output (``match.folds``): as many tails follow
    each; never a Conv whose tail follows against one whose does not (the folded one computes the tail's
    function too), nor two tails of chains that have more or fewer tails still to come."""
    if function_op(a) == function_op(b):  # a GlobalAveragePool and its ReduceMean too (``match.ops.global_pool``)
        return a.tails_after == b.tails_after or unfolded(a, b)
    conv, bn = (a, b) if is_conv(a) else (b, a)
    return is_conv(conv) and bn.conv_bn and conv.tails_after == bn.tails_after


def shared_weights(obs_a: list[Observable], obs_b: list[Observable]) -> set[str]:
    """The weights (by value) both models' observables read."""
    return {w for o in obs_a for w in o.weights} & {w for o in obs_b for w in o.weights}
