"""Our implementations of ops onnx.reference (1.23 at least) gets wrong or cannot run, as their specification
says (``corrected_ops`` in runners.reference adds them for the opsets where they apply): ``diff
--vs-reference`` would otherwise blame onnxruntime for onnx.reference's mistake, or not run at all.

Each was found comparing one-node models of every op and opset under onnxruntime and onnx.reference, and
decided against the op's documentation with a float64 numpy oracle (tests/test_reference_ops_*.py)."""

from __future__ import annotations

from onnx.reference.op_run import OpRun

from onnxprobe.runtime.runners.reference_pool import ConvTranspose, MaxPool


def version_corrections(opset: int) -> list[type[OpRun]]:  # noqa: ARG001
    """The corrections above that apply to a model of this ai.onnx opset."""
    return [MaxPool, ConvTranspose]
