"""Quantized variants of the sample models, made with onnxruntime.quantization (dynamic, static QDQ,
static QOperator), cached per test session."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from conftest import sample_path


class RandomReader:
    """Calibration data: seeded random inputs in [0, 1)."""

    def __init__(self, model_path: Path, n: int = 8, seed: int = 0):
        m = onnx.load(str(model_path), load_external_data=False)
        rng = np.random.default_rng(seed)
        self.batches = []
        for _ in range(n):
            feed = {}
            for vi in m.graph.input:
                dims = [d.dim_value if d.HasField("dim_value") else 1 for d in vi.type.tensor_type.shape.dim]
                feed[vi.name] = rng.random(dims, dtype=np.float32)
            self.batches.append(feed)
        self.it = iter(self.batches)

    def get_next(self):
        return next(self.it, None)

    def __iter__(self):  # qdq_loss_debug.collect_activations iterates
        return iter(self.batches)

    def rewind(self):
        self.it = iter(self.batches)


def quantize(name: str, kind: str, out_dir: Path) -> Path:
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_dynamic, quantize_static

    src = sample_path(name) if isinstance(name, str) and not str(name).endswith(".onnx") else Path(name)
    out = out_dir / f"{Path(src).stem}_{kind}.onnx"
    if out.exists():
        return out
    if kind == "dynamic":
        quantize_dynamic(str(src), str(out), weight_type=QuantType.QInt8)
    else:
        fmt = QuantFormat.QDQ if kind == "qdq" else QuantFormat.QOperator
        quantize_static(str(src), str(out), RandomReader(Path(src)), quant_format=fmt,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=kind == "qdq")
    return out
