"""Pairing by readers: a tensor one model computes as one node (a Gelu, a LayerNormalization) and the other as a
region of several (torch's legacy exporter writes GELU as Div, Erf, Add, Mul, Mul and LayerNorm as ReduceMean,
Sub, Pow...) have no name, op or place in common; the matcher's other steps leave both unpaired, and the one node's
output was compared nowhere (a bug inside the GELU read as the next Gemm's error). What they share is where they
stand: paired nodes of one op read them at the same place, and the region is computed from the tensors the one node
reads, alone. Then they are one function of the data: the pair is made, and the region's inside is folded into the
node (``match.regions``), as where the two outputs share a name.
"""

from __future__ import annotations

from onnxprobe.match.integers import other_settings
from onnxprobe.match.ops import canonical, function_op
from onnxprobe.match.pairs import shapes_agree
from onnxprobe.match.refused import contradicts
from onnxprobe.match.regions import LIMIT

# ops exporters, optimizers and inliners write out as several nodes, or fuse several into (onnxruntime's com.microsoft
# ones): only a node of one of these stands for a region of other nodes (x -> Neg against x -> Abs, both read by paired
# Identities, are other functions of the data, not one written two ways)
SPELLED_OUT = frozenset({
    "Gelu", "FastGelu", "BiasGelu", "QuickGelu", "LayerNormalization", "SimplifiedLayerNormalization", "RMSNormalization",
    "GroupNormalization", "InstanceNormalization", "MeanVarianceNormalization", "Softmax", "LogSoftmax", "HardSwish",
    "HardSigmoid", "Mish", "Swish", "Softplus", "Elu", "Celu", "Selu"})

__all__ = ["SPELLED_OUT", "pair_by_readers"]


def pair_by_readers(st) -> None:
    """``st.structural`` (a ``match.state.MatchState``) for the unpaired tensors that paired nodes of one op read at
    the same place (the k-th tensor of data each reads), where one side's tensor is the output of one node of an op
    that is written out as several (``SPELLED_OUT``) whose reads are all paired, and the other side's is computed,
    by several nodes, through tensors no other pair holds, from their counterparts alone. Readers first by the order
    of the pairs made, then again for what the new pairs read, until nothing more pairs."""
    done: set[tuple[int, int]] = set()
    while True:
        todo = [(i, j) for i, j in st.made if (i, j) not in done]
        if not todo:
            return
        for i, j in todo:
            done.add((i, j))
            ra, rb = st.obs_a[i], st.obs_b[j]
            if function_op(ra) != function_op(rb) or len(ra.sources) != len(rb.sources):
                continue
            for sa, sb in zip(ra.sources, rb.sources):
                x, y = st.index_a.get(sa), st.index_b.get(sb)
                if x is None or y is None or x in st.used_a or y in st.used_b:
                    continue
                a, b = st.obs_a[x], st.obs_b[y]
                if not (a.shape is None or b.shape is None or shapes_agree(a.shape, b.shape)) or st.a_scope(a.scope) != b.scope:
                    continue
                # what ``alike`` refuses but the op: weights of other sizes, other settings, a candidate refused before
                if x in st.other_a or y in st.other_b or contradicts(a, b, st.shared) or other_settings(a, b):
                    continue
                if _one_node_over(b, a, st.b_to_a, st.obs_a, st.index_a) or _one_node_over(a, b, st.a_to_b, st.obs_b, st.index_b):
                    st.structural(x, y, f"read where {canonical(ra.effective_op)} nodes paired with each other read it; "
                                        "computed from the same tensors")


def _one_node_over(one, region_end, to_region: dict[str, str], obs: list, index: dict[str, int]) -> bool:
    """Whether ``one`` (an observable of one model), the output of an op of SPELLED_OUT, reads only tensors paired with
    tensors of the other model (``to_region``: one's model's names -> the other's) and ``region_end`` is computed
    from exactly those, through tensors of its model that are no pair's (a walk of ``Observable.sources`` back to
    them), by two nodes or more."""
    if one.op_type not in SPELLED_OUT or region_end.op_type == one.op_type:
        return False
    if not one.sources or any(not s.startswith("input:") and s not in to_region for s in one.sources):
        return False
    want = {s if s.startswith("input:") else to_region[s] for s in one.sources}
    paired = set(to_region.values())
    reached, seen, todo = set(), set(), list(region_end.sources)
    while todo:
        s = todo.pop()
        if s in seen:
            continue
        seen.add(s)
        if len(seen) > LIMIT:
            return False
        if s.startswith("input:") or s in paired:
            reached.add(s)
            continue
        k = index.get(s)
        if k is None:  # a tensor not observed: what it is computed from is not known here
            return False
        todo.extend(obs[k].sources)
    return reached == want and len(seen - reached) >= 1  # region_end and one tensor more: two nodes at least
