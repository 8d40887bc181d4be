"""Time `layers` and `diff` on each runtime against onnxruntime on the CPU, measured in the same run.

    python bench/runtimes.py [--repeat 3] [--deadline 240] [--runtimes cuda,tensorrt,openvino]

Every figure is a whole process (start, imports, model load, session or engine build, runs, report):
the median of --repeat runs after one warm-up. Each row prints its ratio to the same command on
onnxruntime CPU. Rows whose runtime is missing here (no GPU, extra not installed) print the one-line
error instead. --deadline (seconds) stops starting new measurements, so the script ends in time.
Models: ResNet-18 with random weights (bench/models.py) and the transformer block sample.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CACHE = HERE / ".cache"
ONNXPROBE = [sys.executable, "-m", "onnxprobe"]

# runtime -> (flags of layers, flags of diff); the CPU baseline is onnxruntime on the CPU
RUNTIMES = {
    "cpu": (["--runtime", "ort", "--device", "cpu"], ["--vs-runtime", "ort", "--device", "cpu"]),
    "cuda": (["--runtime", "ort", "--device", "cuda"], ["--vs-runtime", "ort", "--device", "cuda", "--vs-device", "cpu"]),
    "tensorrt": (["--runtime", "tensorrt"], ["--vs-runtime", "tensorrt", "--device", "cpu"]),
    "openvino": (["--runtime", "openvino"], ["--vs-runtime", "openvino", "--device", "cpu"]),
}


def models() -> dict[str, tuple[Path, list[str]]]:
    sys.path.insert(0, str(HERE))
    from models import resnet18  # noqa: E402

    CACHE.mkdir(exist_ok=True)
    r18 = CACHE / "resnet18.onnx"
    if not r18.exists():
        resnet18(r18)
    return {"resnet18": (r18, ["--shape", "input=1x3x224x224"]),
            "transformer_block": (ROOT / "sample_models" / "transformer_block.onnx", [])}


def once(argv: list[str]) -> tuple[float | None, str]:
    """The wall time of one run of ``argv``, or None and why: a time only where the command did its work, exit 0, or
    diff's exit 1 of a failed verdict. An exit 1 of layers (no verdict), or with an error line or a traceback
    (ONNXPROBE_DEBUG=1 prints one instead of the line), is an error: CUDA and TensorRT commands that crashed on a
    machine with no GPU were timed, at 0.25-0.63x the CPU (bench/run.py's diff_verdict, the same rule)."""
    sys.path.insert(0, str(HERE))
    from run import diff_verdict  # noqa: E402

    t0 = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - t0
    verdict = r.returncode == 1 and "diff" in argv and diff_verdict(r.stderr)
    if r.returncode != 0 and not verdict or "Traceback (most recent call last)" in r.stderr:
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        return None, (lines[-1] if lines else f"exit code {r.returncode}")[:160]
    return seconds, ""


def measure(argv: list[str], repeat: int) -> tuple[float | None, str]:
    first, why = once(argv)  # warm-up (also the check that this runtime works here)
    if first is None:
        return None, why
    times = []
    for _ in range(repeat):
        t, why = once(argv)
        if t is None:
            return None, why
        times.append(t)
    return statistics.median(times), ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--deadline", type=float, default=240.0)
    ap.add_argument("--runtimes", default="cuda,tensorrt,openvino")
    args = ap.parse_args()
    unknown = [r for r in args.runtimes.split(",") if r not in RUNTIMES]
    if unknown:  # dropped silently, a row asked for was missing from the table with no word why
        ap.error(f"--runtimes: no runtime {', '.join(unknown)}; give some of {', '.join(RUNTIMES)}")
    start = time.perf_counter()
    wanted = ["cpu"] + [r for r in args.runtimes.split(",") if r != "cpu"]
    print(f"{'model':18} {'command':7} {'runtime':9} {'seconds':>8} {'x cpu':>7}")
    for mname, (path, shape) in models().items():
        for cmd in ("layers", "diff"):
            base = None
            for rt in wanted:
                if time.perf_counter() - start > args.deadline:
                    print(f"{mname:18} {cmd:7} {rt:9} {'-':>8} {'-':>7}  deadline reached")
                    continue
                flags = RUNTIMES[rt][0 if cmd == "layers" else 1]
                argv = ONNXPROBE + [cmd, str(path), "--all", *shape, *flags, "--json", "/dev/null"]
                t, why = measure(argv, args.repeat)
                if rt == "cpu":
                    base = t
                ratio = f"{t / base:7.2f}" if t is not None and base else f"{'-':>7}"
                secs = f"{t:8.2f}" if t is not None else f"{'-':>8}"
                print(f"{mname:18} {cmd:7} {rt:9} {secs} {ratio}  {why}", flush=True)


if __name__ == "__main__":
    main()
