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

A model read with ``lazy`` (``graph.io.load_model``: a command's own load of a path, for onnxruntime) leaves those
weights in their files (``leave``), and the big inline initializers of a model file of 4 MiB or more in the model file
itself (``inline``, ``in_model_file``): the tensor keeps its name, type and dims, no data, and the mark, with the
file's status when the model was read. The proto never holds them (a model of 1 GiB of MatMul weights: `layers` at
2.3 GB where plain inference takes 1.2; onnxruntime maps an external data file; a weight inside the model file is
copied out of it as the session is built, never mapped there: ``in_model_file``). Every reader of a weight's bytes reads
them through ``data`` (``graph.tensor_data.tensor_values``, ``graph.skeleton.raw_bytes``, ``model_digest``, the
writers' ``unmark``, ``fill`` for a copy handed back, ``filled`` for the runtimes that read the proto's bytes), which
reads the file again, refused with one line where it changed since the model was read: what was compared (matching
reads weights) and what runs are then the same bytes.
"""

from __future__ import annotations

import os
from pathlib import Path

from onnx import TensorProto

from onnxprobe.fileio import file_state, open_regular

KEY = "onnxprobe-source"  # value: "TOKEN:N", N this process's entry in _SOURCES
CHUNK = 16 << 20
# this process's: an entry of another (a model written with one) is no mark (os.urandom: `secrets` imports hashlib,
# which loads OpenSSL's 3.5 MB)
_TOKEN = os.urandom(8).hex()
# (file, offset, length, status of a left weight's file, whether that file is the model file itself) by N
_SOURCES: list[tuple[str, int, int, tuple | None, bool]] = []


_BEFORE: dict[str, int] = {}  # an ancestor's token -> how many of _SOURCES' entries were its own at the fork


def _renew_token() -> None:
    """A forked child's own token: its table grows apart from its parent's from then on (a mark of the parent's
    would name the child's later entry: the bytes compared would differ, but the file be read for nothing). The
    entries made before the fork stay the child's under the parent's token: a weight the parent left in its file
    (``leave``) is read there by the child too."""
    global _TOKEN
    _BEFORE[_TOKEN] = len(_SOURCES)
    _TOKEN = os.urandom(8).hex()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_token)


def mark(t: TensorProto, file: Path, offset: int, length: int, state: tuple | None = None, inline: bool = False) -> None:
    """Record on a tensor just read from ``file`` (its bytes ``offset``..``offset + length``) where they came from
    (``state``: the file's ``file_state``, for a tensor ``leave`` left there; ``inline``: the file is the model's own)."""
    _SOURCES.append((str(file), int(offset), int(length), state, inline))
    e = t.external_data.add()
    e.key, e.value = KEY, f"{_TOKEN}:{len(_SOURCES) - 1}"


def leave(t: TensorProto, file: Path, offset: int, length: int, state: tuple, inline: bool = False) -> None:
    """Make the tensor ``t`` whose bytes lie in ``file`` (of status ``state``: its external data file, or with ``inline``
    the model file itself, parsed without them) one whose bytes stay there: no data in the proto, marked (``is_left``)."""
    del t.external_data[:]
    if t.data_location == TensorProto.EXTERNAL:  # (one inline already is DEFAULT: not written as a field)
        t.data_location = TensorProto.DEFAULT
    mark(t, file, offset, length, state, inline)


def _entry(t: TensorProto) -> tuple[str, int, int, tuple | None] | None:
    value = next((e.value for e in t.external_data if e.key == KEY), None)
    token, _, n = (value or "").partition(":")
    limit = len(_SOURCES) if token == _TOKEN else _BEFORE.get(token, 0)
    if not n.isdigit() or int(n) >= limit:
        return None
    return _SOURCES[int(n)]


def is_left(t: TensorProto) -> bool:
    """A weight ``leave`` left in its file (this process's mark, no data in the proto)."""
    if t.data_location == TensorProto.EXTERNAL or t.HasField("raw_data") or not len(t.external_data):
        return False
    found = _entry(t)
    return found is not None and found[3] is not None


def marked(t: TensorProto) -> tuple[str, int, int] | None:
    """(file, offset, length) that ``mark`` recorded on ``t`` in this process, or None: none recorded, one of another
    process, a tensor whose data is external after all."""
    if t.data_location == TensorProto.EXTERNAL or not (t.HasField("raw_data") or is_left(t)):
        return None
    found = _entry(t)
    return None if found is None else found[:3]


def data(t: TensorProto) -> bytes:
    """The bytes of a weight ``leave`` left in its file, read there: a ModelError where the file is gone, no longer a
    regular file, or changed since the model was read (its size, times, inode: what was compared before and what runs
    now would be other bytes)."""
    return b"".join(chunks(t, None))


def chunks(t: TensorProto, size: int | None):
    """``data``'s bytes ``size`` at a time (None: at once), the file checked as ``data`` checks it, before the first."""
    file, offset, length, state = _entry(t)[:4]
    try:
        with open_regular(file, follow=False) as f:
            check_state(file, f.fileno(), state, t.name)
            f.seek(offset)
            for at in range(0, length, size or max(length, 1)):
                out = f.read(min(size or length, length - at))
                if not out:  # pragma: no cover - the status said it holds them
                    raise too_short(file, t.name)
                yield out
    except OSError as e:
        raise unreadable(file, t.name, e) from None


def check_state(file: str, fd: int, state: tuple | None, name: str) -> None:
    """A ModelError where the open file ``fd`` (``file``, where weight ``name`` was left) is not as it was when the model
    was read (``state``, ``fileio.file_state``): what was compared before and what runs now would be other bytes."""
    if file_state(os.fstat(fd)) != state:
        from onnxprobe.errors import ModelError

        raise ModelError(f"{file}: the file changed while onnxprobe ran (its size or times differ from when the model "
                         f"was read: weight {name!r} lies in it); run it again")


def too_short(file: str, name: str):
    """The ModelError for a file that ends before weight ``name``'s bytes (truncated since the model was read)."""
    from onnxprobe.errors import ModelError

    return ModelError(f"{file}: the file is too short for weight {name!r} now (it changed while onnxprobe ran); run it again")


def unreadable(file: str, name: str, e: OSError):
    """The ModelError for a file where weight ``name`` was left that cannot be opened or read again (``e``)."""
    from onnxprobe.errors import ModelError

    return ModelError(f"{file}: cannot read the file again (weight {name!r} lies in it): {e.strerror or e}")


def same_data(t: TensorProto, u: TensorProto) -> bool:
    """Whether two tensors of one type and dims, at least one of them left in its file (``leave``), hold the same bytes:
    compared CHUNK by CHUNK, to the first that differs (two different weights of 128 MiB: 64 KiB read, not 256 MiB)."""
    from itertools import zip_longest

    def pieces(x):
        if is_left(x):
            return chunks(x, CHUNK)
        if x.HasField("raw_data"):
            raw = memoryview(x.raw_data)
        else:  # typed fields (float_data...): not left, so numpy_helper reads them
            from onnx import numpy_helper

            raw = memoryview(numpy_helper.to_array(x).tobytes())
        return (raw[at:at + CHUNK] for at in range(0, len(raw), CHUNK))

    return all(a is not None and b is not None and a == b for a, b in zip_longest(pieces(t), pieces(u)))


def in_model_file(t: TensorProto) -> bool:
    """A weight ``leave`` left inside its model file (an inline initializer the lazy read skipped): onnxruntime pointed at
    it would map the model file for the session's life (a file rewritten meanwhile mixed weights, truncated it ended the
    process with SIGBUS, QA; and its offset's alignment changed a reduction's last digit against plain inference, which
    parses the file), so it is handed over from a private copy at a page boundary (``runtime.weight_copy``) or from
    memory, read from the file as the session is built."""
    return is_left(t) and _entry(t)[4]


def left_state(t: TensorProto) -> tuple | None:
    """The status ``leave`` recorded of a left weight's file (None: not left)."""
    return _entry(t)[3] if is_left(t) else None


def unmark(tensors) -> None:
    """``mark``'s entries taken off ``tensors`` (a copy about to be written: a model onnxprobe writes carries none), the
    bytes of a weight left in its file (``leave``) read into it."""
    tensors = list(tensors)
    fill(tensors)
    for t in tensors:
        if t.data_location != TensorProto.EXTERNAL and any(e.key == KEY for e in t.external_data):
            kept = [(e.key, e.value) for e in t.external_data if e.key != KEY]
            del t.external_data[:]
            for k, v in kept:
                e = t.external_data.add()
                e.key, e.value = k, v


def fill(tensors) -> None:
    """Each weight of ``tensors`` left in its file (``leave``) read into it, its mark kept (a tensor read with its
    bytes, as an eager load marks one): a copy that leaves onnxprobe's hands whole (``graph.model.Model.of``)."""
    for t in tensors:
        if is_left(t):
            t.raw_data = data(t)


def filled(model):
    """``model`` as a runtime other than onnxruntime reads it (OpenVINO, TensorRT, onnx.reference: the proto's own
    bytes): a copy with each weight left in its file (``leave``) read in, or ``model`` itself where none is."""
    import onnx

    if not any(is_left(t) for t in model.graph.initializer):
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    unmark(out.graph.initializer)
    return out


def unchanged(t: TensorProto, where: tuple[str, int, int]) -> bool:
    """True when ``t``'s bytes are still those of its file at ``where`` (``marked``); False where they differ, the
    file is shorter, gone or unreadable. The tensor's bytes are one transient copy (protobuf's), the file read a
    CHUNK at a time. A weight left in its file (``leave``): its file's status as when the model was read."""
    file, offset, length = where
    if is_left(t):
        try:
            return file_state(os.stat(file, follow_symlinks=False)) == left_state(t)
        except OSError:
            return False
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
