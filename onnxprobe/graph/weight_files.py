"""Where a loaded weight's bytes lie in its model's external data file, so that onnxruntime reads them there.

A model read with its external data (``graph.io.load_model``) holds every weight in memory. Handed to onnxruntime
from there, a weight was in memory three times (measured, onnxruntime 1.32, eight MatMul weights of 1 GiB in all:
`layers` peaked at 3.2 GB against plain inference's 1.2 GB): in the ModelProto, in the buffer it is handed over in
(protobuf gives its bytes as a copy), and in onnxruntime's own prepacked form, which cannot replace a buffer it was
told to run on. Plain inference maps the file, and lets each weight's pages go once it has packed it.

So ``graph.io.load_model`` marks each main-graph weight it read from an external file (``mark``: one ``external_data``
entry of ours, ``KEY``, on a tensor whose data is in the proto: onnx, onnxruntime and OpenVINO read ``external_data``
only of a tensor whose data_location is EXTERNAL). The entry holds a key into this process's own table of where the
bytes came from (the file, resolved, the offset and the length), never the path itself: a proto that leaves the
process (``onnx.save`` of ``api.load(...).proto``, a model onnxprobe writes) carries a word no other process reads,
and a file that holds such an entry is not trusted to say where any weight lies. And
a session is built with that weight pointed at its file (``runtime.ort._weights_in_place``) where the bytes in memory are
still the file's (``unchanged``: compared a chunk at a time, so a weight changed in place since it was read, or a
file changed under the model, runs as the proto holds it). Only weights a skeleton stubs are marked
(``graph.skeleton``: the marks never reach a skeleton's serialised bytes or ``model_digest``).
"""

from __future__ import annotations

import os
from pathlib import Path

from onnx import TensorProto

from onnxprobe.fileio import open_regular

KEY = "onnxprobe-source"  # value: "TOKEN:N", N this process's entry in _SOURCES
CHUNK = 16 << 20
# this process's: an entry of another (a model written with one) is no mark (os.urandom: `secrets` imports hashlib,
# which loads OpenSSL's 3.5 MB)
_TOKEN = os.urandom(8).hex()
_SOURCES: list[tuple[str, int, int]] = []  # (file, offset, length) by N


def _renew_token() -> None:
    """A forked child's own token: its table grows apart from its parent's from then on (a mark of the parent's
    would name the child's later entry: the bytes compared would differ, but the file be read for nothing)."""
    global _TOKEN
    _TOKEN = os.urandom(8).hex()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_token)


def mark(t: TensorProto, file: Path, offset: int, length: int) -> None:
    """Record on a tensor just read from ``file`` (its bytes ``offset``..``offset + length``) where they came from."""
    _SOURCES.append((str(file), int(offset), int(length)))
    e = t.external_data.add()
    e.key, e.value = KEY, f"{_TOKEN}:{len(_SOURCES) - 1}"


def marked(t: TensorProto) -> tuple[str, int, int] | None:
    """(file, offset, length) that ``mark`` recorded on ``t`` in this process, or None: none recorded, one of another
    process, a tensor whose data is external after all."""
    if t.data_location == TensorProto.EXTERNAL or not t.HasField("raw_data"):
        return None
    value = next((e.value for e in t.external_data if e.key == KEY), None)
    token, _, n = (value or "").partition(":")
    if token != _TOKEN or not n.isdigit() or int(n) >= len(_SOURCES):
        return None
    return _SOURCES[int(n)]


def unmark(tensors) -> None:
    """``mark``'s entries taken off ``tensors`` (a copy about to be written: a model onnxprobe writes carries none)."""
    for t in tensors:
        if t.data_location != TensorProto.EXTERNAL and any(e.key == KEY for e in t.external_data):
            kept = [(e.key, e.value) for e in t.external_data if e.key != KEY]
            del t.external_data[:]
            for k, v in kept:
                e = t.external_data.add()
                e.key, e.value = k, v


def unchanged(t: TensorProto, where: tuple[str, int, int]) -> bool:
    """True when ``t``'s bytes are still those of its file at ``where`` (``marked``); False where they differ, the
    file is shorter, gone or unreadable. The tensor's bytes are one transient copy (protobuf's), the file read a
    CHUNK at a time."""
    file, offset, length = where
    raw = t.raw_data
    if len(raw) != length:
        return False
    try:
        with open_regular(file, follow=False) as f:  # not a FIFO swapped in (it would wait for a writer), nor a link
            f.seek(offset)
            for at in range(0, length, CHUNK):
                chunk = f.read(min(CHUNK, length - at))
                if not chunk or not raw.startswith(chunk, at):  # a memcmp in place (a memoryview compares by element)
                    return False
    except OSError:
        return False
    return True


def common_folder(files: list[str]) -> tuple[str, list[str]]:
    """The deepest folder that holds every one of ``files`` (absolute) and each file's path relative to it: what
    onnxruntime reads external data from (it refuses absolute locations and any that leads out of its folder)."""
    folder = os.path.commonpath([os.path.dirname(f) for f in files])
    return folder, [os.path.relpath(f, folder) for f in files]
