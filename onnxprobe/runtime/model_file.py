"""A model file read without onnx, for the plan cache's direct mode (``runtime.direct``): its status, its bytes
streamed a CHUNK at a time (hashed, and each weight's bytes handed over as they pass), and where its weights' bytes
lie, found by a walk of its protobuf wire format (``weight_extents``) that reads the headers and skips the weights.
"""

from __future__ import annotations

import os

import numpy as np

from onnxprobe.fileio import file_state, open_regular  # noqa: F401 (re-exported: where runtime.direct has them from)
from onnxprobe.runtime import plan_cache

CHUNK = 2**20  # the model file is read this much at a time: never held whole (a 1.5 GB model is no 1.5 GB more)
WINDOW = 2**16  # the wire-format walk reads the file's headers this much at a time (the weights' bytes it skips)


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
    return _mount_types().get((os.major(dev), os.minor(dev))) in CTIME_KEPT


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


class FileBytes:
    """An open file's ``size`` bytes as ``weight_extents`` indexes them (``b[i]``, ``b[a:z]``), read on demand, WINDOW
    (at most CHUNK) at a time: the walk reads headers and skips the weights' bytes, which are never read."""

    def __init__(self, f, size: int):
        self.f, self.size, self.window = f, size, max(1, min(WINDOW, CHUNK))
        self.start, self.buf = 0, b""

    def __len__(self) -> int:
        return self.size

    def _read(self, a: int, z: int) -> bytes:
        self.f.seek(a)
        got = self.f.read(z - a)
        if len(got) != z - a:
            raise ValueError("the file is shorter than it was")
        return got

    def __getitem__(self, i):
        if isinstance(i, slice):
            a, z = i.start, min(i.stop, self.size)
            if self.start <= a and z <= self.start + len(self.buf):
                return self.buf[a - self.start:z - self.start]
            return b"".join(self._read(p, min(z, p + self.window)) for p in range(a, z, self.window))
        if not self.start <= i < self.start + len(self.buf):
            if not 0 <= i < self.size:
                raise IndexError(i)
            self.start, self.buf = i, self._read(i, min(self.size, i + self.window))
        return self.buf[i - self.start]


# --- the protobuf wire format, as far as the weights go ---------------------------------------------------------

def _varint(b, i: int) -> tuple[int, int]:
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        if c < 0x80:
            return v, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _fields(b, start: int, end: int):
    """(field number, wire type, value start, value end or the varint) of a message's bytes ``b[start:end]``."""
    i = start
    while i < end:
        key, i = _varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(b, i)
            yield num, wt, v, i
        elif wt == 2:
            n, i = _varint(b, i)
            if i + n > end:
                raise ValueError("field past its message")
            yield num, wt, i, i + n
            i += n
        elif wt == 1:
            i += 8
        elif wt == 5:
            i += 4
        else:  # groups: no ONNX message has any
            raise ValueError("unexpected wire type")
        if i > end:
            raise ValueError("field past its message")


# TensorProto's fields whose bytes in the file are the tensor's own little-endian bytes: raw_data, and float_data
# and double_data packed (fixed-width floats, as proto3 writes a repeated float: Paddle2ONNX's exports store their
# weights so); int32_data and int64_data are varints, whose bytes are not the values'
_DATA_FIELDS = (9, 4, 10)


def _tensor(b, start: int, end: int) -> tuple[str | None, tuple[int, int] | None, bool]:
    """A TensorProto's (name, (offset, length) of its data's bytes: raw_data, or float_data / double_data packed,
    whether its data lie elsewhere: data_location or external_data); data given twice (two such fields, or one
    repeated: protobuf keeps the last, or joins them) is not served. Every extent is checked against the tensor the
    normal path read (``entry``): these are where its bytes may be, never taken on trust."""
    name, raw, elsewhere = None, None, False
    for num, wt, a, z in _fields(b, start, end):
        if num == 8 and wt == 2:
            name = bytes(b[a:z]).decode("utf-8", "surrogateescape")
        elif num in _DATA_FIELDS and wt == 2:
            if raw is not None:
                return name, None, True
            raw = (a, z - a)
        elif (num == 14 and wt == 0 and a != 0) or num == 13:
            elsewhere = True
    return name, raw, elsewhere


def _constant(b, start: int, end: int) -> tuple[str | None, tuple[int, int] | None, bool]:
    """A main-graph Constant node's (first output, its ``value`` tensor's data extent, whether those data lie in
    another file: ``_tensor``), else (None, None, False)."""
    outputs, op, value, elsewhere = [], None, None, False
    for num, wt, a, z in _fields(b, start, end):
        if num == 2 and wt == 2:
            outputs.append(bytes(b[a:z]).decode("utf-8", "surrogateescape"))
        elif num == 4 and wt == 2:
            op = bytes(b[a:z])
        elif num == 5 and wt == 2:
            attr, t = None, None
            for n2, w2, a2, z2 in _fields(b, a, z):
                if n2 == 1 and w2 == 2:
                    attr = bytes(b[a2:z2])
                elif n2 == 5 and w2 == 2:
                    t = (a2, z2)
            if attr == b"value" and t is not None:
                _, value, elsewhere = _tensor(b, *t)
    named = outputs[0] if op == b"Constant" and outputs else None
    return named, (value if named is not None and not elsewhere else None), named is not None and elsewhere


def weight_extents(data) -> dict[str, tuple[int, int]] | None:
    """Name -> (offset, length) in the model file's bytes ``data`` (bytes, or an open file's: ``FileBytes``) of the
    data of every main-graph initializer and main-graph Constant value stored inline (``_DATA_FIELDS``; by its node's
    first output, as ``graph.skeleton`` names its stubs); None where the bytes cannot be walked (no graph, a graph
    given twice) or where a weight of the main graph lies in another file (external data: the model is then more
    than this file's bytes, and an entry that checks only these would serve a run of weights edited since)."""
    b = data if isinstance(data, FileBytes) else memoryview(data)
    try:
        graphs = [(a, z) for num, wt, a, z in _fields(b, 0, len(b)) if num == 7 and wt == 2]
        if len(graphs) != 1:
            return None
        out: dict[str, tuple[int, int]] = {}
        seen: set[str] = set()
        for num, wt, a, z in _fields(b, *graphs[0]):
            if wt != 2 or num not in (1, 5):
                continue
            if num == 1:
                name, raw, elsewhere = _constant(b, a, z)
            else:
                name, raw, elsewhere = _tensor(b, a, z)
            if elsewhere:
                return None
            if name is None:
                continue
            if name in seen:  # two tensors of one name: which one did the model use? not served
                out.pop(name, None)
                continue
            seen.add(name)
            if raw is not None:
                out[name] = raw
        return out
    except (ValueError, IndexError):
        return None
