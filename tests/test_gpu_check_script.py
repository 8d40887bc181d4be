"""bench/gpu_check.sh and bench/cuda_agree.py on a machine without a usable GPU stack: they say so and
fail, rather than report success for tests that all skipped (QA: on a machine without CUDA, gpu_check
exited 0 after 177 skipped tests and timed CPU runs for a minute; cuda_agree ended in a traceback, or with
ONNXPROBE_MODELS naming no model, exited 0 having compared nothing)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from onnxprobe.runtime.ort import cuda_usable

ROOT = Path(__file__).resolve().parent.parent
no_gpu = pytest.mark.skipif(cuda_usable(), reason="onnxruntime's CUDA provider is usable here")


def _env(**kw) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("ONNXPROBE_MODELS", "WHEELS", "VENV")}
    env.update(kw)
    return env


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(ROOT / "bench" / "gpu_check.sh")]).returncode == 0


@no_gpu
def test_without_a_gpu_stack_gpu_check_says_so_and_fails():
    r = subprocess.run(["bash", str(ROOT / "bench" / "gpu_check.sh")], capture_output=True, text=True, timeout=300,
                       env=_env(PY=sys.executable, SKIP_INSTALL="1"), cwd="/")
    out = r.stdout + r.stderr
    assert r.returncode == 3, out[-2000:]
    assert "usable GPU stacks: none" in out and "no usable GPU stack here" in out, out[-2000:]
    assert "== timings" not in out and "skipped" in out, out[-2000:]


def test_gpu_check_refuses_a_wheel_folder_that_is_not_there(tmp_path):
    r = subprocess.run(["bash", str(ROOT / "bench" / "gpu_check.sh")], capture_output=True, text=True, timeout=60,
                       env=_env(WHEELS=str(tmp_path / "none"), VENV=str(tmp_path / "venv")))
    assert r.returncode == 2 and "WHEELS=" in r.stdout and "no such folder" in r.stdout, r.stdout + r.stderr
    assert not (tmp_path / "venv").exists()


def test_gpu_check_never_installs_into_a_python_of_the_caller_s(tmp_path):
    """PY=... without SKIP_INSTALL=1 said "== install into bench/.cache/gpu-venv", then ran pip install -e, pip
    uninstall onnxruntime and pip install onnxruntime-gpu on that Python. A stand-in Python logs what it is asked."""
    log = tmp_path / "asked.log"
    fake = tmp_path / "fakepy"
    fake.write_text(f'#!/bin/bash\necho "$*" >> {log}\nexit 0\n')
    fake.chmod(0o755)
    r = subprocess.run(["bash", str(ROOT / "bench" / "gpu_check.sh")], capture_output=True, text=True, timeout=60,
                       env=_env(PY=str(fake), VENV=str(tmp_path / "venv")))
    assert r.returncode == 2 and "SKIP_INSTALL=1" in r.stdout, r.stdout + r.stderr
    assert not log.exists() and not (tmp_path / "venv").exists()


@no_gpu
def test_cuda_agree_without_cuda_is_one_line(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "cuda_agree.py")], capture_output=True, text=True, timeout=120,
                       env=_env(ONNXPROBE_MODELS=str(tmp_path), PYTHONPATH=str(ROOT)))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert "no usable CUDA provider" in r.stdout + r.stderr, r.stdout + r.stderr


def test_cuda_agree_with_no_model_found_compared_nothing(tmp_path, monkeypatch):
    """ONNXPROBE_MODELS naming a folder without the models: every one 'not found, skipped', and exit 0."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import cuda_agree
    finally:
        sys.path.remove(str(ROOT / "bench"))
    monkeypatch.setattr(cuda_agree, "cuda_usable", lambda: True)
    monkeypatch.setenv("ONNXPROBE_MODELS", str(tmp_path))
    assert cuda_agree.main() == 2


@no_gpu
def test_without_a_gpu_stack_a_pytest_failure_is_not_called_a_skip(tmp_path):
    """The GPU tests failing to run at all (here: a copy of the script beside no tests/ folder, pytest exit 4)
    was reported as 'the GPU tests skipped', exit 3: pytest's own code is kept, and said."""
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "gpu_check.sh").write_text((ROOT / "bench" / "gpu_check.sh").read_text())
    r = subprocess.run(["bash", str(tmp_path / "bench" / "gpu_check.sh")], capture_output=True, text=True, timeout=300,
                       env=_env(PY=sys.executable, SKIP_INSTALL="1", PYTHONPATH=str(ROOT)), cwd="/")
    out = r.stdout + r.stderr
    assert r.returncode not in (0, 3), out[-2000:]
    assert "did not all skip" in out and "the GPU tests skipped" not in out, out[-2000:]
