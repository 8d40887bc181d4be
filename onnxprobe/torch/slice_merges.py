"""A step of ``torch.params.map_parameters``: initializers merged with a slice of another parameter, unlinked.

The legacy exporter folds the slices that ``F.multi_head_attention_forward`` takes of a cross-attention's
``in_proj_bias`` (query ``[:E]``, key and value ``[E:]``) into constants, and then merges every constant of
equal values into one initializer: at init the query slice is E zeros, as are the out_proj and LayerNorm
biases, so one initializer holds them all and is read as each. Its gradient is then the sum of those
parameters' and of the slice's; comparing it with the parameters' sum alone FAILed a faithful export of
``nn.TransformerDecoderLayer``. An initializer linked to parameters by value whose values are also a block
(along the first axis, as it is or, 2-D, transposed) of a parameter that no initializer holds, read by that
parameter's own module, holds a part of it: it is not compared, and its parameters say why.
"""

from __future__ import annotations

import numpy as np


def block_of(v: np.ndarray, p: np.ndarray) -> tuple[int, int] | None:
    """The rows ``(start, stop)`` of ``p`` (along its first axis, in steps of the block's own length) that
    equal ``v``, as it is or transposed (a 2-D block of a MatMul's weight), or None."""
    if not p.ndim or p.size <= v.size or not v.size:
        return None
    for cand in (v, v.T) if v.ndim == 2 else (v,):
        if cand.shape[1:] != p.shape[1:]:  # rows of p's own layout
            continue
        k = cand.shape[0]
        for start in range(0, p.shape[0] - k + 1, k):
            if np.array_equal(p[start:start + k], cand):
                return start, start + k
    return None


def unlink_slice_merges(st) -> None:
    """Unlinks each initializer that also holds a block of a parameter no link holds, whose module reads it (above)."""
    held = {q for link in st.out.links.values() for q in link.params} | set(st.out.ties)
    for i, link in list(st.out.links.items()):
        v, readers = st.init_value[i], st.readers(i)
        for q, qv in st.params.items():
            if q in held or q in link.params or q.rpartition(".")[0] not in readers:
                continue
            rows = block_of(v, qv)
            if rows is None:
                continue
            del st.out.links[i]
            mine = ", ".join(link.params)
            st.out.refused[i] = (f"holds the values of {mine} and of rows {rows[0]}:{rows[1]} of {q}, which "
                                 f"{q.rpartition('.')[0]} reads here: the exporter folded that slice into a constant and "
                                 "merged it with them (equal values), so its gradient also holds the slice's, which the "
                                 "sum of theirs leaves out: not compared")
            for p in link.params:
                st.out.unused[p] = f"its initializer {i} also holds a slice of {q} (merged by the exporter: equal values): not compared"
            st.out.unused.setdefault(q, f"the exporter folded slices of it into constants, one merged into {i} with "
                                        f"{mine} (equal values): not compared")
            break
