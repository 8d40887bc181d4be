"""A step of ``torch.params.map_parameters``: a parameter's initializer that a module holding no such parameter
reads too, as a constant of equal values, unlinked.

The dynamo exporter dedups initializers by value: a fresh ``nn.LayerNorm(8)``'s weight (ones) is one initializer
with the ones an affine-less ``nn.LayerNorm(8, elementwise_affine=False)`` (or ``InstanceNorm2d()``) reads as its
scale. The initializer's gradient is then the sum over both nodes, where torch's gradient of ``ln1.weight`` holds
its own module's use alone: compared, a faithful export FAILed. Such merges are of constants, all of one value
(ones, zeros): an initializer linked to parameters whose values are all equal, read by a module (innermost) that
is none of the parameters' holders nor inside or around one, holds that module's constant too; it is not
compared, and its parameters say why. An initializer of varied values a foreign module reads is a parameter that
module uses (a weight shared in forward()), whose torch gradient holds that use: left as it is.
"""

from __future__ import annotations

import numpy as np

from onnxprobe.torch.module_params import innermost, related_paths


def unlink_constant_reads(st) -> None:
    """Unlinks each initializer of one repeated value that a module holding none of its parameters reads (above)."""
    for i, link in list(st.out.links.items()):
        v = st.init_value[i]
        if v.size < 2 or not np.all(v == v.flat[0]):
            continue
        owners = {o for p in link.params for o in ((st.owners or {}).get(p) or {p.rpartition(".")[0]})}
        foreign = sorted(r for r in innermost(st.readers(i)) if not any(related_paths(r, o) for o in owners))
        if not foreign:
            continue
        del st.out.links[i]
        mine, other = ", ".join(link.params), ", ".join(foreign)
        st.out.refused[i] = (f"holds {mine} and is read by {other} too, which holds no such parameter: the exporter merged "
                             f"a constant of {other} with it (equal values), so its gradient holds that use too, which "
                             "torch's gradient of the parameter leaves out: not compared")
        for p in link.params:
            st.out.unused[p] = (f"its initializer {i} is also read by {other} as a constant of equal values (merged by "
                                "the exporter): its gradient holds that use too, not comparable")
