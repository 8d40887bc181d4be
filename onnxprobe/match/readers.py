"""Pairing by readers: a tensor one model computes as one node (a Gelu, a LayerNormalization) and the other as a
region of several (torch's legacy exporter writes GELU as Div, Erf, Add, Mul, Mul and LayerNorm as ReduceMean,
Sub, Pow...) have no name, op or place in common; the matcher's other steps leave both unpaired, and the one node's
output was compared nowhere (a bug inside the GELU read as the next Gemm's error). What they share is who reads them:
paired nodes of one op read both, the region is computed from the tensors the one node reads, alone, and holds the
ops that node is written out with (an Erf or a Tanh for a GELU: ``SPELLED_OUT``), the only such region among what
those readers read. Then they are one function of the data: the pair is made, and the region's inside is folded into
the node (``match.regions``), as where the two outputs share a name.
"""

from __future__ import annotations

from onnxprobe.match.integers import other_settings
from onnxprobe.match.ops import canonical, function_op
from onnxprobe.match.pairs import shapes_agree
from onnxprobe.match.refused import contradicts
from onnxprobe.match.regions import LIMIT

# ops exporters, optimizers and inliners write out as several nodes, or fuse several into (onnxruntime's com.microsoft
# ones), each with the ops its written-out form holds (every group: one of it at least). Only a node of one of these
# stands for a region, and only for a region of such ops: x -> Neg against x -> Abs, both read by paired Identities,
# are other functions of the data, and so are log(x x + 1) and a Gelu of x, both computed from x alone
_GELU = ({"Erf", "Tanh"},)
_NORM = ({"ReduceMean"}, {"Sqrt", "Pow", "Reciprocal", "Div"})
SPELLED_OUT: dict[str, tuple[set[str], ...]] = {
    "Gelu": _GELU, "FastGelu": _GELU, "BiasGelu": _GELU, "QuickGelu": ({"Sigmoid"},),
    "LayerNormalization": _NORM, "SimplifiedLayerNormalization": _NORM, "RMSNormalization": _NORM,
    "GroupNormalization": ({"ReduceMean", "InstanceNormalization", "MeanVarianceNormalization"},),
    "InstanceNormalization": ({"ReduceMean"},), "MeanVarianceNormalization": ({"ReduceMean"},),
    "Softmax": ({"Exp"}, {"ReduceSum"}), "LogSoftmax": ({"Exp", "ReduceLogSumExp"}, {"Log", "ReduceLogSumExp"}),
    "HardSwish": ({"HardSigmoid", "Clip", "Relu", "Min", "Max"},), "HardSigmoid": ({"Clip", "Relu", "Min", "Max"},),
    "Mish": ({"Tanh"},), "Swish": ({"Sigmoid"},), "Softplus": ({"Log", "Softplus"},),
    "Elu": ({"Exp"},), "Celu": ({"Exp"},), "Selu": ({"Exp"},)}

__all__ = ["SPELLED_OUT", "pair_by_readers"]


def pair_by_readers(st) -> None:
    """``st.structural`` (a ``match.state.MatchState``) for unpaired tensors that paired nodes of one op both read,
    where one side's is the output of one node of an op written out as several (``SPELLED_OUT``) whose reads are all
    paired, and the other side's is the one tensor those readers read that is computed, by several nodes of that op's
    written-out form, through tensors no other pair holds, from their counterparts alone (what a node reads is a set
    here, ``Observable.sources``: no place among its inputs tells them apart). Readers in the order of the pairs made,
    then again for what the new pairs read, until nothing more pairs."""
    done: set[tuple[int, int]] = set()
    while True:
        todo = [(i, j) for i, j in st.made if (i, j) not in done]
        if not todo:
            return
        for i, j in todo:
            done.add((i, j))
            ra, rb = st.obs_a[i], st.obs_b[j]
            if function_op(ra) != function_op(rb):
                continue
            xs = [x for x in (st.index_a.get(s) for s in ra.sources) if x is not None and x not in st.used_a]
            ys = [y for y in (st.index_b.get(s) for s in rb.sources) if y is not None and y not in st.used_b]
            found = [(x, y) for x in xs for y in ys if _candidates(st, x, y)]
            for x, y in found:  # each alone: one region for one node, one node for one region
                if sum(1 for p, q in found if p == x or q == y) == 1:
                    st.structural(x, y, f"read by {canonical(ra.effective_op)} nodes paired with each other; computed "
                                        "from the same tensors, one node of it written out as several")


def _candidates(st, x: int, y: int) -> bool:
    """Whether A's ``x`` and B's ``y`` may pair: shapes and scopes that agree, nothing ``alike`` refuses but the op, and
    one of them one node over the other's region (``_one_node_over``, either way)."""
    a, b = st.obs_a[x], st.obs_b[y]
    if not (a.shape is None or b.shape is None or shapes_agree(a.shape, b.shape)) or st.a_scope(a.scope) != b.scope:
        return False
    # what ``alike`` refuses but the op: weights of other sizes, other settings, a candidate refused before
    if x in st.other_a or y in st.other_b or contradicts(a, b, st.shared) or other_settings(a, b):
        return False
    return _one_node_over(b, a, st.b_to_a, st.obs_a, st.index_a) or _one_node_over(a, b, st.a_to_b, st.obs_b, st.index_b)


def _one_node_over(one, region_end, to_region: dict[str, str], obs: list, index: dict[str, int]) -> bool:
    """Whether ``one`` (an observable of one model), the output of an op of SPELLED_OUT, reads only tensors paired with
    tensors of the other model (``to_region``: one's model's names -> the other's) and ``region_end`` is computed
    from exactly those, through tensors of its model that are no pair's (a walk of ``Observable.sources`` back to
    them), by two nodes or more that hold that op's written-out form (``SPELLED_OUT``)."""
    form = SPELLED_OUT.get(one.op_type)
    if form is None or region_end.op_type == one.op_type:
        return False
    if not one.sources or any(not s.startswith("input:") and s not in to_region for s in one.sources):
        return False
    want = {s if s.startswith("input:") else to_region[s] for s in one.sources}
    paired = set(to_region.values())
    reached, seen, todo, ops = set(), set(), list(region_end.sources), {region_end.op_type}
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
        ops.add(obs[k].op_type)
        todo.extend(obs[k].sources)
    # region_end and one tensor more (two nodes at least), and the ops of the node's written-out form
    return reached == want and len(seen - reached) >= 1 and all(group & ops for group in form)
