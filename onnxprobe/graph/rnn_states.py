"""The zero initial states of RNN / GRU / LSTM nodes: constants of an export, not weights.

torch's exporters write the zero state an ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` starts from when ``forward()``
is given none as a constant that the node reads as ``initial_h`` (and ``initial_c``): the legacy exporter as
a Constant expanded to the batch (``/gru/Constant_output_0`` -> Expand), dynamo as one initializer read
directly (``val_10``, both states of an LSTM). No torch parameter holds it, so it is no weight to compare:
``torch.rnn`` (against the module) and ``compare.gradients`` (two exports against each other) leave it out.
"""

from __future__ import annotations

import onnx

from onnxprobe.graph.constants import constants
from onnxprobe.graph.tensor_data import tensor_values
from onnxprobe.graph.walk import slot_readers

STATES = {"RNN": {5: "initial_h"}, "GRU": {5: "initial_h"}, "LSTM": {5: "initial_h", 6: "initial_c"}}  # not weights
PASS = {"Expand", "Reshape", "Unsqueeze", "Squeeze", "Identity", "Cast", "Tile", "Transpose", "Slice", "Concat"}
DATA = {"Concat": None}  # the inputs a PASS op carries values through (None: all; else the first only)


def initial_states(model: onnx.ModelProto) -> dict[str, str]:
    """The initializers and Constant outputs that are all zeros and read only, through ops that only carry
    values (``PASS``: an Expand to the batch, a Reshape), as the initial state of RNN / GRU / LSTM nodes
    (``STATES``; the legacy exporter's ``/gru/Constant_output_0`` through an Expand, dynamo's ``val_10``
    directly): tensor -> what reads it (``initial_h of the GRU node /gru/GRU``). Such a tensor is the zero
    state torch's module starts from when ``forward()`` is given none: a constant, not a parameter. Only
    those candidates are read (a model's other weights are not), and one whose data lies outside the file
    is none."""
    nodes = list(model.graph.node)
    if not any(n.op_type in STATES for n in nodes):
        return {}
    reading = slot_readers(nodes)
    outputs = {o.name for o in model.graph.output}
    memo: dict[str, list[str] | None] = {}

    def ends(t: str, depth: int = 0) -> list[str] | None:
        """What state inputs ``t`` reaches (every read of it leads to one), or None."""
        if t in memo:
            return memo[t]
        memo[t] = None  # a cycle, or too deep: not a state
        if t in outputs or not reading.get(t) or depth > 8:
            return None
        got = []
        for n, k in reading[t]:
            if n.op_type in STATES and k in STATES[n.op_type]:
                got.append(f"{STATES[n.op_type][k]} of the {n.op_type} node {n.name or n.output[0]}")
            elif n.op_type in PASS and (k == 0 or (n.op_type in DATA and DATA[n.op_type] is None)) and len(n.output) == 1:
                more = ends(n.output[0], depth + 1)
                if more is None:
                    return None
                got += more
            else:
                return None
        memo[t] = got
        return got

    out = {}
    for t, tp in constants(model.graph).items():
        got = ends(t)
        if not got or tp.data_location == onnx.TensorProto.EXTERNAL:
            continue
        v = tensor_values(tp)
        if v.dtype.kind == "f" and v.size and not v.any():
            out[t] = ", ".join(dict.fromkeys(got))
    return out
