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

__all__ = ["return_freed_memory", "trim", "MMAP_THRESHOLD"]

MMAP_THRESHOLD = 128 * 1024


@functools.lru_cache(maxsize=None)
def _libc():
    if os.environ.get("ONNXPROBE_KEEP_MALLOC") or not os.path.exists("/proc/self"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt  # noqa: B018 - glibc, or AttributeError
        libc.malloc_trim  # noqa: B018
        return libc
    except (OSError, AttributeError):  # not glibc
        return None


@functools.lru_cache(maxsize=None)
def return_freed_memory() -> None:
    """A fixed 128 KiB mmap threshold for the rest of the process (once)."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(-3, int(os.environ.get("ONNXPROBE_MMAP_THRESHOLD", MMAP_THRESHOLD)))  # M_MMAP_THRESHOLD


def trim() -> None:
    """Give the heap's free memory back to the system (after a phase that freed much)."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
