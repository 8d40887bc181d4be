"""Reverse-mode autodiff on ONNX graphs: a registry of per-op gradient rules (``registry``, ``rules/``),
an engine that emits the backward graph as ONNX nodes (``engine``), losses (``loss``), forward rewrites
made before differentiating (``fold``: BatchNormalization into the Conv before it), and the graph
rewrites that the gradient check needs (``check``). Nothing here runs a model."""

from onnxprobe.autodiff.engine import Backward, attach_backward

__all__ = ["Backward", "attach_backward"]
