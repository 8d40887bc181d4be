"""Whether onnxruntime should pre-pack a model's matrix weights as it builds the session (``prepacks``).

onnxruntime's CPU kernels of matrix products (MatMul, Gemm and their fused and quantized forms) copy each constant
weight into their GEMM's packed layout when the session is built, and keep that copy as long as the session: a
second copy of the weights in memory, written at build time. It pays where a session runs many times; onnxprobe's
command line runs a session once, and the product packs what it reads as it goes anyway. Measured (2-core x86_64,
whole processes, a served run): the bench's 512 MiB MLP, `layers --all` 0.75 -> 0.27 s and 723 -> 594 MB, `diff
--all` 1.85 -> 0.45 s and 1.39 -> 1.13 GB; BERT-base exported by torch, `layers --all` 1.43 -> 1.15 s, `diff --all`
2.6 -> 1.76 s; a chain of 2,000 MatMul [96, 96] `diff --all` 2.33 -> 2.18 s. Where the matrix weights are small
(PP-OCRv4, convolution networks) pre-packing stays on: without it PP-OCRv4 det's `diff --all` took 33 MB more and
2 % longer. Both ways compute the same products, rounded alike within float32 (BERT-base's outputs moved by 3e-6). A session kept
for many runs (a dataset's batches, the debugger's: ``runtime.ort.create_session``'s ``files`` False) still
pre-packs: it packs once where the product would pack each run.
"""

from __future__ import annotations

from onnxprobe.graph.constants import constants
from onnxprobe.graph.extents import dims_nbytes

# the operators whose CPU kernels pre-pack a constant input (onnxruntime's PrePack implementations of matrix products)
PACKED_OPS = frozenset({"MatMul", "Gemm", "FusedMatMul", "FusedGemm", "MatMulNBits", "MatMulInteger", "MatMulIntegerToFloat",
                        "DynamicQuantizeMatMul", "QLinearMatMul", "QGemm", "Attention", "QAttention", "DynamicQuantizeLSTM",
                        "LSTM", "GRU"})
PACKED_MAX = 8 << 20  # bytes of such weights from which they are not pre-packed


def prepacks(model) -> bool:
    """Whether a session of ``model`` (an onnx.ModelProto; a skeleton's stubs count with their dims) should pre-pack:
    False when the constant inputs of its matrix products (``PACKED_OPS``), initializers or Constant nodes of its main
    graph, hold PACKED_MAX bytes or more."""
    g = model.graph
    sizes = {name: dims_nbytes(t) for name, t in constants(g).items()}  # by dims and type: a stub's bytes lie elsewhere
    read = {name for n in g.node if n.op_type in PACKED_OPS and n.domain in ("", "ai.onnx", "com.microsoft")
            for name in n.input if name in sizes}
    return sum(sizes[name] for name in read) < PACKED_MAX

