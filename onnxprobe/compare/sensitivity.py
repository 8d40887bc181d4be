"""Which quantized layer to keep in float: rerun model A with one layer at a time computed in fp32, and
measure how much the model's output error drops.

The intro-dB column of ``diff`` says how much a layer damages its own output; how much of that reaches
the model's output depends on what follows. This pass measures the latter directly, for the QDQ layers
that introduce the most error: in a copy of A, the layer's node(s) are replaced by B's float cone (the
same nodes ``introduced`` runs, reading A's values at the cone's inputs) and the QuantizeLinear /
DequantizeLinear pair on its output is removed; the copy runs on the same inputs, and its outputs are
compared with B's. Everything else in A stays quantized.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx

from onnxprobe.compare.introduced import build_cones
from onnxprobe.stats.metrics import sqnr_db
from onnxprobe.text import json_word

PREFIX = "onnxprobe.fp32/"


@dataclass
class Sensitivity:
    layer: str  # the float tensor (B's name) kept in fp32
    op_type: str
    introduced_sqnr_db: float
    output: str
    output_sqnr_db: float  # A's output against B's, as quantized
    output_sqnr_db_fp32: float  # the same with this one layer in fp32

    @property
    def gain_db(self) -> float:
        return self.output_sqnr_db_fp32 - self.output_sqnr_db

    def to_dict(self) -> dict:
        # an SQNR or gain that is not finite (the layer in fp32 makes the output exact: +inf) as json_word says it
        return {"layer": self.layer, "op_type": self.op_type, "introduced_sqnr_db": json_word(self.introduced_sqnr_db),
                "output": self.output, "output_sqnr_db": json_word(self.output_sqnr_db),
                "output_sqnr_db_fp32_layer": json_word(self.output_sqnr_db_fp32), "gain_db": json_word(self.gain_db)}


def keep_in_fp32(a: onnx.ModelProto, b: onnx.ModelProto, key: str, b_to_a: dict[str, str]) -> onnx.ModelProto | None:
    """A copy of QDQ model ``a`` where the float tensor ``key`` is computed by B's cone from A's values
    (``b_to_a``: B tensor -> A tensor holding the same value) and read by its consumers without its
    QuantizeLinear/DequantizeLinear pair. None when that cannot be done (no Q node, a control-flow cone)."""
    import onnx_graphsurgeon as gs

    cones, index = build_cones(b, [key], set(b_to_a))
    if cones is None or key not in index:
        return None
    out_name, inputs = index[key]
    m = onnx.ModelProto()
    m.CopyFrom(a)
    g = m.graph
    q = [n for n in g.node if n.op_type == "QuantizeLinear" and n.input and n.input[0] == key]
    if not q:
        return None
    dq = [n for n in g.node if n.op_type == "DequantizeLinear" and n.input and n.input[0] in {x.output[0] for x in q}]
    rename = {d.output[0]: key for d in dq}
    producer = [n for n in g.node if key in n.output]
    for n in q + dq + producer:
        g.node.remove(n)
    for n in g.node:
        n.input[:] = [rename.get(i, i) for i in n.input]
    for o in g.output:
        if o.name in rename:
            return None  # the pair's DequantizeLinear is a model output: nothing downstream to improve
    # B's cone: its inputs read A's tensors, its output is `key`, its weights get a prefix of their own
    cone_inputs = {name: b_to_a.get(src, src) for name, src in inputs}
    weights = {t.name: PREFIX + t.name for t in cones.graph.initializer}
    for n in cones.graph.node:
        c = onnx.NodeProto()
        c.CopyFrom(n)
        c.name = PREFIX + n.name
        c.input[:] = [cone_inputs.get(i, weights.get(i, i)) for i in n.input]
        c.output[:] = [key if o == out_name else o for o in n.output]
        g.node.append(c)
    for t in cones.graph.initializer:
        w = onnx.TensorProto()
        w.CopyFrom(t)
        w.name = weights[t.name]
        g.initializer.append(w)
    graph = gs.import_onnx(m)
    graph.cleanup().toposort()
    out = gs.export_onnx(graph)
    out.ir_version = a.ir_version
    del out.opset_import[:]
    out.opset_import.extend(a.opset_import)
    return out


def fp32_sensitivity(res, feeds: dict[str, np.ndarray], top: int = 5) -> list[Sensitivity]:
    """For the ``top`` QDQ layers of a diff with the lowest intro SQNR: the model output's SQNR against B
    with that layer kept in fp32, next to the quantized one."""
    a, b = res.a, res.b
    if top <= 0 or not (a.runs_graphs and b.runs_graphs and b.runner.takes_feeds):
        return []
    cands = [r for r in res.results if r.pair.a.kind == "qdq" and r.introduced is not None
             and not r.introduced.exact and not (r.pair.a.is_output or r.pair.b.is_output)]
    cands = sorted(cands, key=lambda r: r.introduced.sqnr_db)[:top]
    if not cands:
        return []
    a_model, b_model = a.model.proto, b.model.proto
    outputs = [o.name for o in a_model.graph.output if o.name in {x.name for x in b_model.graph.output}]
    if not outputs:
        return []
    output = outputs[0]

    def run(side, model: onnx.ModelProto) -> np.ndarray:
        return side.runner.execute(model, feeds, [output])[0][output]

    ref = run(b, b_model)
    base = sqnr_db(run(a, a_model), ref)
    b_to_a = {p.b.name: p.a.name for p in res.matching.pairs if p.b.kind == "float"}
    found = []
    for r in cands:
        m = keep_in_fp32(a_model, b_model, r.pair.b.name, b_to_a)
        if m is None:
            continue
        found.append(Sensitivity(r.pair.b.name, r.pair.a.effective_op, r.introduced.sqnr_db, output, base,
                                 sqnr_db(run(a, m), ref)))
    return found
