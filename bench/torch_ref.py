"""`diff --vs-torch` against plain `diff` of two ONNX models of the same size, in one run.

    python bench/torch_ref.py [--models DIR] [--repeat 3]

The baseline is plain `diff MODEL MODEL --all` (every tensor, onnxruntime on both sides); the check
is `diff MODEL --vs-torch tests/tiny_transformers.py:bert` (every module output: onnxruntime against
one torch forward, plus the teacher-forced one for the introduced error) and its --grad form.

Two figures each, the median of --repeat runs after one warm-up:
- in one process (``api.diff`` / ``api.diff_torch``, the module built and torch imported once): the
  work onnxprobe does. The goal (issue 13) is a ratio of at most 3;
- whole processes (`python -m onnxprobe ...`): what a user waits for, importing torch and
  transformers and building the module included (seconds of imports that are not onnxprobe's).

DIR is the folder fetch_models.sh fills (default $ONNXPROBE_MODELS); without the tiny BERT there (or
without transformers) the test-defined transformer block is exported and used instead.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
GOAL = 3.0


def timed(cmd: list[str], repeat: int) -> float:
    subprocess.run(cmd, check=False, capture_output=True)  # warm-up (file cache, bytecode)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        r = subprocess.run(cmd, check=False, capture_output=True, text=True)
        times.append(time.perf_counter() - t)
        # diff exits 1 with a FAIL verdict, a result; exit 1 is also its errors (said as "onnxprobe: error:") and a
        # crash (a traceback): those are no timing
        failed = r.returncode not in (0, 1) or (r.returncode == 1 and ("onnxprobe: error:" in r.stderr
                                                                         or "Traceback (most recent call last)" in r.stderr))
        if failed:
            raise SystemExit(f"{' '.join(cmd)} failed: {r.stderr.strip()[-300:]}")
    return statistics.median(times)


def subject(models: Path | None, tmp: Path) -> tuple[Path, str]:
    bert = models / "transformers" / "bert_tiny_random_legacy_op17.onnx" if models else None
    try:
        import transformers  # noqa: F401
        have_tf = True
    except ImportError:
        have_tf = False
    if bert is not None and bert.is_file() and have_tf:
        return bert, f"{ROOT / 'tests' / 'tiny_transformers.py'}:bert"
    print("note: tiny BERT or transformers missing: using the test-defined transformer block", file=sys.stderr)
    sys.path.insert(0, str(ROOT / "tests"))
    import torch
    import torch_models

    m, args = torch_models.build("block")
    path = tmp / "block.onnx"
    torch.onnx.export(m, args, str(path), dynamo=False, input_names=["x"], output_names=["y"])
    return path, f"{ROOT / 'tests' / 'torch_models.py'}:block"


def in_process(model: Path, func: str, repeat: int) -> dict[str, float]:
    sys.path.insert(0, str(ROOT))
    from onnxprobe import api
    from onnxprobe.api.torch import torch_module

    module = torch_module(func)
    runs = {"plain diff A A --all": lambda: api.diff(model, model, selection=api.Selection(all=True)),
            "diff --vs-torch": lambda: api.diff_torch(model, module),
            "diff --grad --vs-torch": lambda: api.diff_grad_torch(model, module)}
    out = {}
    for label, fn in runs.items():
        fn()  # warm-up: torch's first calls, onnxruntime's first session
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        out[label] = statistics.median(times)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, default=Path(os.environ["ONNXPROBE_MODELS"]) if os.environ.get("ONNXPROBE_MODELS") else None)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model, func = subject(a.models, Path(tmp))
        inner = in_process(model, func, a.repeat)
        base = inner["plain diff A A --all"]
        print(f"{model.name}, in one process:")
        for label, t in inner.items():
            goal = "" if label.startswith("plain") else (f"  (goal <= {GOAL}x: {'ok' if t / base <= GOAL else 'MISSED'})"
                                                        if label == "diff --vs-torch" else "")
            print(f"  {label:<24} {t:6.3f} s  = {t / base:.2f}x{goal}")
        procs = {"plain diff A A --all": [PY, "-m", "onnxprobe", "diff", str(model), str(model), "--all", "--json", os.devnull],
                 "diff --vs-torch": [PY, "-m", "onnxprobe", "diff", str(model), "--vs-torch", func, "--json", os.devnull],
                 "diff --grad --vs-torch": [PY, "-m", "onnxprobe", "diff", "--grad", str(model), "--vs-torch", func,
                                            "--json", os.devnull]}
        print(f"{model.name}, whole processes (imports of torch and the user's file included):")
        base = None
        for label, cmd in procs.items():
            t = timed(cmd, a.repeat)
            base = base or t
            print(f"  {label:<24} {t:6.2f} s  = {t / base:.2f}x")


if __name__ == "__main__":
    main()
