"""bench/runtimes.py times a command only where it did its work: exit 0, or diff's exit 1 of a failed verdict. It
timed any exit 1 without 'onnxprobe: error:', so with ONNXPROBE_DEBUG=1 (a traceback instead of that line) the CUDA
and TensorRT rows of a machine with no GPU read 0.25-0.63x the CPU for commands that crashed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture()
def runtimes(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import runtimes as module

    return module


def _cmd(code: str, stderr: str, op: str) -> list[str]:
    return [sys.executable, "-c", f"import sys; sys.stderr.write({stderr!r}); sys.exit({code})", op]


@pytest.mark.parametrize("code, stderr, op, timed", [
    (0, "", "layers", True), (1, "", "diff", True),  # diff's FAIL verdict: a result
    (1, "Traceback (most recent call last):\n  ...\nRuntimeError: no CUDA\n", "diff", False),
    (1, "Traceback (most recent call last):\n  ...\nRuntimeError: no CUDA\n", "layers", False),
    (1, "", "layers", False),  # layers has no verdict: exit 1 is an error
    (1, "onnxprobe: error: CUDA is not available\n", "diff", False), (2, "", "diff", False)])
def test_only_a_command_that_did_its_work_is_timed(runtimes, code, stderr, op, timed):
    seconds, why = runtimes.once(_cmd(code, stderr, op))
    assert (seconds is not None) == timed, why
    assert timed or why
