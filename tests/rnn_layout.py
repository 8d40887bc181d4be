"""The test's own oracle of how the exporters lay torch's RNN parameters out in ONNX RNN/GRU/LSTM nodes, found
by value (what they were measured to write), shared by the GRU/LSTM and the Elman RNN tests."""

from __future__ import annotations

import numpy as np
import onnx

from onnxprobe.autodiff.select import weight_value

# ONNX gate block q holds torch gate block ORDER[op][q] (measured); an Elman RNN has one block
ORDER = {"GRU": [1, 0, 2], "LSTM": [0, 3, 1, 2], "RNN": [0]}


def blocks(model: onnx.ModelProto, m, ops=tuple(ORDER)) -> dict[str, tuple[str, int, np.ndarray]]:
    """torch parameter -> (initializer, direction, rows in torch's order) of the ``ops`` nodes' W, R and B
    (B: each direction's two halves), found by value with ORDER."""
    params = {n: p.detach().numpy() for n, p in m.named_parameters()}
    out = {}
    for node in model.graph.node:
        if node.op_type not in ops:
            continue
        g = len(ORDER[node.op_type])
        for init in node.input[1:4]:
            v = weight_value(model, init)
            for d in range(v.shape[0]):
                for half in range(2 if v.ndim == 2 else 1):
                    flat = v[d] if v.ndim == 3 else v[d][half * v.shape[1] // 2:(half + 1) * v.shape[1] // 2]
                    h = flat.shape[0] // g
                    rows = np.concatenate([np.arange(ORDER[node.op_type].index(j) * h, ORDER[node.op_type].index(j) * h + h)
                                           for j in range(g)]) + half * g * h
                    for n, p in params.items():
                        if p.shape == flat.shape and np.array_equal(v[d][rows], p):
                            out[n] = (init, d, rows)
    return out
