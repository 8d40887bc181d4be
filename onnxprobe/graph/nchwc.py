"""Tensors onnxruntime holds in its blocked NCHWc layout, in a model it optimized and saved at --opt-level all
(``SessionOptions.optimized_model_filepath``): its ``com.microsoft.nchwc`` ReorderInput moves a tensor into blocks of
channels ([N, C/b, H, W, b] in memory, b = 8 or 16 by the CPU's vector width, the shape still read [N, C, H, W]), the
nchwc domain's Conv, pools and Upsample compute in it, and the standard ops between them (Concat, Add, Relu, Sum)
are kept in it, until a ReorderOutput moves it back. Such a tensor's values, fetched, are in that block order: the
same numbers (statistics over them hold), but no element pairs with the element of another model's tensor at the
same index (a diff of the saved model against its original read -0.9 of SQNR on a Concat that agreed to 1e-6)."""

from __future__ import annotations

import onnx

NCHWC_DOMAIN = "com.microsoft.nchwc"
# what reads a blocked tensor and writes no blocked values: the move back, and what reads only its shape
LEAVES = {(NCHWC_DOMAIN, "ReorderOutput"), ("", "Shape"), ("", "Size")}


def blocked_tensors(model: onnx.ModelProto) -> set[str]:
    """The main graph's tensors in the blocked NCHWc layout: the outputs of the nchwc domain's nodes but
    ReorderOutput's, and of any node that reads such a tensor (but ``LEAVES``), in topological order."""
    blocked: set[str] = set()
    if not any(o.domain == NCHWC_DOMAIN for o in model.opset_import):
        return blocked
    for n in model.graph.node:  # (topologically sorted, as onnx requires)
        key = (n.domain if n.domain != "ai.onnx" else "", n.op_type)
        if key in LEAVES:
            continue
        if n.domain == NCHWC_DOMAIN or any(i in blocked for i in n.input if i):
            blocked.update(o for o in n.output if o)
    return blocked
