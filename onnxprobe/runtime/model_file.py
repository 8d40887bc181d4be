"""A model file read without onnx, for the plan cache's direct mode (``runtime.direct``): its status, its bytes
streamed a CHUNK at a time (hashed, and each weight's bytes handed over as they pass), and where its weights' bytes
lie, found by a walk of its protobuf wire format that reads the headers and skips the weights
(``graph.wire_format.weight_extents``).
"""

from __future__ import annotations

import os

import numpy as np

from onnxprobe.fileio import file_state, open_regular  # noqa: F401 (re-exported: where runtime.direct has them from)
from onnxprobe.graph.wire_format import FileBytes, weight_extents  # noqa: F401 (re-exported: the same)
from onnxprobe.runtime import plan_cache

CHUNK = 2**20  # the model file is read this much at a time: never held whole (a 1.5 GB model is no 1.5 GB more)


def stream(f, size: int, moves: list, each, hashed: bool = True) -> str | None:
    """Read the open file ``f`` from its start, CHUNK at a time, hashing it; each ``moves`` extent's bytes
    ([offset, length, ...], in any order; handed over in the order of the file) go to ``each(k, at, chunk)`` as
    they pass (``k``: the index in ``moves``, ``at``: where in the extent ``chunk`` starts), which returns False
    to stop. The digest ("" where not ``hashed``); None where ``each`` stopped or the file is not ``size`` bytes long."""
    h = hasher() if hashed else None
    order = sorted(range(len(moves)), key=lambda k: moves[k][0])
    buf = np.empty(min(CHUNK, max(size, 1)), np.uint8)
    f.seek(0)
    pos = first = 0
    while True:
        n = f.readinto(memoryview(buf))
        if not n:
            break
        view, end = buf[:n], pos + n
        if h is not None:
            h.update(view)
        k = first
        while k < len(order) and moves[order[k]][0] < end:
            offset, length = moves[order[k]][0], moves[order[k]][1]
            lo, hi = max(offset, pos), min(offset + length, end)
            if lo < hi and not each(order[k], lo - offset, view[lo - pos:hi - pos]):
                return None
            k += 1
        while first < len(order) and moves[order[first]][0] + moves[order[first]][1] <= end:
            first += 1
        pos = end
        if pos > size:
            return None
    return (h.hexdigest() if h is not None else "") if pos == size else None


def same_file(path: str, state: tuple, record: dict) -> bool:
    """Whether the file ``path`` is still the one of ``state`` (``file_state`` when a request came) or holds the
    bytes of ``record`` (its size and digest, as a direct-mode entry records them): a result served from the plan
    cache reads its model only when something asks for it, and must read the model it measured."""
    try:
        if file_state(os.stat(path)) == tuple(state):
            return True
        with open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            return size == record["size"] and stream(f, size, [], lambda *_: True) == record["digest"]
    except (OSError, ValueError, TypeError, KeyError):
        return False


def hasher():
    return plan_cache.blake2b(digest_size=32)


# A file whose status (size, modification and change times, inode, device) is the one an entry recorded is the
# file the entry was made from, and is not hashed again (16 ms for PP-OCRv4 rec's 10.8 MB, seconds for a model of
# gigabytes), as git trusts its index: ctime cannot be set back (touch -d, os.utime, cp -p, an editor's write all
# make it now), so an edit since shows in it. Unless the entry was recorded within RACY_NS of the file's last
# change (git's "racy" files: a change in the same clock tick as the recording would keep every time the same):
# such a file is hashed every time.
RACY_NS = 2 * 10**9


def stat_record(st) -> list[int]:
    """What ``unchanged`` compares: an ``os.stat_result``'s size, mtime, ctime, inode and device."""
    return [int(st.st_size), int(st.st_mtime_ns), int(st.st_ctime_ns), int(st.st_ino), int(st.st_dev)]


def unchanged(st, file: dict) -> bool:
    """Whether the file of status ``st`` is, without hashing it, the one an entry's ``file`` record describes (see
    RACY_NS), on a file system whose change times can be trusted so (``keeps_ctime``)."""
    recorded, at = file.get("stat"), file.get("recorded_ns")
    return (isinstance(recorded, list) and isinstance(at, int) and stat_record(st) == recorded
            and recorded[2] < at - RACY_NS and keeps_ctime(int(st.st_dev)))


# Linux file systems whose change time is the kernel's own: set to now by every write and every utime, never set
# back. Not FAT / exFAT (their change time is the modification time, which os.utime sets back), not NTFS through
# FUSE, not Windows (st_ctime is the creation time there), nor any file system not listed: those files are hashed.
CTIME_KEPT = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "bcachefs", "f2fs", "zfs", "jfs", "reiserfs",
                        "tmpfs", "overlay", "nfs", "nfs4", "ceph"})


def keeps_ctime(dev: int) -> bool:
    """Whether the file system of device ``dev`` (an ``os.stat_result``'s st_dev) is one of CTIME_KEPT, by Linux's
    /proc/self/mountinfo (a mount's major:minor and type); False where it cannot be told."""
    return filesystem_type(dev) in CTIME_KEPT


def filesystem_type(dev: int) -> str | None:
    """The type of the file system of device ``dev`` (an ``os.stat_result``'s st_dev: "ext4", "tmpfs"...), by Linux's
    /proc/self/mountinfo; None where it cannot be told."""
    return _mount_types().get((os.major(dev), os.minor(dev)))


def _mount_types() -> dict[tuple[int, int], str]:
    """(major, minor) -> file-system type of every mount (the last listed wins: a later mount hides an earlier one
    of the same device); empty where /proc/self/mountinfo cannot be read (not Linux)."""
    out: dict[tuple[int, int], str] = {}
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                fields = line.split()
                if "-" not in fields or len(fields) < 3:
                    continue
                major, _, minor = fields[2].partition(":")
                kind = fields[fields.index("-") + 1] if fields.index("-") + 1 < len(fields) else ""
                if major.isdigit() and minor.isdigit():
                    out[(int(major), int(minor))] = kind
    except OSError:
        return {}
    return out
