"""The process's memory under glibc: hand freed memory back to the system, so that peak RSS follows what
is in use (a probed run's tensors, a model's shape inference) rather than everything ever allocated.

glibc raises its mmap threshold each time a large block is freed, after which freed blocks (activations,
onnx's shape-inference buffers) stay in the heap and the process's resident memory only grows. A fixed
128 KiB threshold keeps large blocks in mmap'ed memory that goes back when freed; ``trim`` returns what
the heap holds free after a phase that allocated much and kept little (measured on PP-OCRv4 det: shape
inference left 32 MiB resident, 13 MiB with the threshold set first, 8 MiB after a trim). Setting
ONNXPROBE_KEEP_MALLOC=1 leaves glibc's defaults alone (faster first runs, more memory: bench/ measures both);
ONNXPROBE_MMAP_THRESHOLD=BYTES sets another threshold (PP-OCRv4 det 800x608, layers --all without the arena:
128 KiB 3.1 s / 255 MB, 1 MiB 3.05 s / 271 MB, 4 MiB 2.5 s / 362 MB, 32 MiB 2.5 s / 540 MB).
Elsewhere than glibc on Linux, both do nothing.
"""

from __future__ import annotations

import functools
import os

__all__ = ["return_freed_memory", "trim", "MMAP_THRESHOLD", "park_when_done", "done_with", "unpark"]

MMAP_THRESHOLD = 128 * 1024
MAX_MMAP_THRESHOLD = 32 * 2**20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit: mallopt refuses more


@functools.lru_cache(maxsize=None)
def _libc():
    from onnxprobe.errors import env_switch

    if env_switch("ONNXPROBE_KEEP_MALLOC") or not os.path.exists("/proc/self"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt  # noqa: B018 - glibc, or AttributeError
        libc.malloc_trim  # noqa: B018
        return libc
    except (OSError, AttributeError):  # not glibc
        return None


def mmap_threshold() -> int:
    """``$ONNXPROBE_MMAP_THRESHOLD``: a whole number of bytes up to MAX_MMAP_THRESHOLD, MMAP_THRESHOLD when
    unset; anything else is a UsageError naming the variable (it was int()'s ValueError, an internal error)."""
    text = os.environ.get("ONNXPROBE_MMAP_THRESHOLD", "").strip()
    if not text:
        return MMAP_THRESHOLD
    if not (text.isascii() and text.isdigit()) or int(text) > MAX_MMAP_THRESHOLD:
        from onnxprobe.errors import UsageError
        from onnxprobe.text import clip, quote

        raise UsageError(f"ONNXPROBE_MMAP_THRESHOLD must be a whole number of bytes from 0 to {MAX_MMAP_THRESHOLD} "
                         f"(glibc's most), such as 131072, not {quote(clip(text, 40))}")
    return int(text)


@functools.lru_cache(maxsize=None)
def return_freed_memory() -> None:
    """A fixed 128 KiB mmap threshold for the rest of the process (once)."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(-3, mmap_threshold())  # M_MMAP_THRESHOLD


def trim() -> None:
    """Give the heap's free memory back to the system (after a phase that freed much)."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


# Freeing an onnxruntime session takes about as long as building it (0.10 s for the 4,741 nodes of PP-OCRv4
# det's probed copy, measured): in a process that ends with os._exit right after its output (the command
# line's ``finish``), a session that is done with is parked instead, and freed only when another session is
# about to be built (``unpark``), so that two sessions' memory never stacks; the exit frees the last one at
# no cost. Elsewhere (the API, the debugger's long-lived process) sessions are freed as usual.
_parked: list = []
_parking = [False]


def park_when_done(on: bool = True) -> None:
    """Park the sessions that are done with from now on (``on``), or free them as usual again."""
    _parking[0] = on
    if not on:
        unpark()


def done_with(session) -> None:
    """``session`` is done with: parked when parking is on (the one parked before is freed now)."""
    if _parking[0]:
        _parked[:] = [session]


def unpark() -> None:
    """Free the parked session (before another is built)."""
    _parked.clear()
