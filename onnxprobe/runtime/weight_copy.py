"""A private copy of a session's big weights, for onnxruntime to read as an external data file of onnxprobe's own:
those a lazy read left inside the model file (``graph.weight_files.in_model_file``), copied from there, and those a
model read whole holds (``api.load``, the debugger: in the proto, and a buffer each before; api.load of BERT-base then
`api.layers`, 1,338 -> 922 MB), written from its bytes one weight at a time.

Handed over from memory, such weights were held twice while the session was built and for its life: the buffer read
from the model file, which onnxruntime runs on, and its prepacked copy (a MatMul's), which cannot replace a buffer it
was told to run on (BERT-base exported by torch, 438 MB inside the .onnx, `layers --all`: 946 MB where plain inference
takes 654 MB). Pointed at the model file itself, onnxruntime would map it for the session's life: a file rewritten
meanwhile mixed old and new weights, one truncated ended the process with SIGBUS (QA). So ``copy_out`` copies them
into a file of its own, in a folder of its own (``tempfile.mkdtemp``: 0700), each weight at a page boundary, which
onnxruntime maps as it maps an external data file, letting each weight's pages go once it has packed it; the folder is
removed as soon as the session is built (what onnxruntime still maps stays readable, and nothing else can write it).
The kernel copies the bytes (``os.copy_file_range``: they never pass through this process's memory). The plan cache's
direct mode, which laid the weights out in one buffer, lays them out the same in such a file (``copy_moves``).

No copy (None: the caller hands the weights over from memory, as before) for less than MIN_BYTES of weights, or where
the temporary folder lies in memory (tmpfs, ramfs, devtmpfs: the copy would take as much memory as the buffers, in no
process's count), has not the room, or cannot be written.
"""

from __future__ import annotations

import atexit
import errno
import mmap
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from onnxprobe.errors import ModelError
from onnxprobe.fileio import open_regular, private_folder

if TYPE_CHECKING:  # not imported: the direct mode (copy_moves) runs without onnx
    from onnx import TensorProto

MEMORY_FILESYSTEMS = frozenset({"tmpfs", "ramfs", "devtmpfs"})
PREFIX = "onnxprobe-weights-"  # + the process id + '-' + tempfile's part: a copy whose process has ended is swept (fileio.private_folder)
# below this many bytes of weights, no copy: held twice they cost little, and a file costs its folder's making and removal
MIN_BYTES = 8 << 20
ROOM = 64 << 20  # free space left beside the copy
CHUNK = 16 << 20  # a read and write at a time where the kernel cannot copy (another OS, an old kernel)
LOCATION = "weights"


class PrivateCopy(NamedTuple):
    """A folder of onnxprobe's own holding a copy of weights, and what removes it (once the session is built)."""

    folder: str
    remove: Callable[[], None]


def copy_out(big: "list[tuple[str, TensorProto]]") -> tuple[PrivateCopy, dict[str, tuple[str, int, int]]] | None:
    """(the copy, {name: (location, length, offset)} in its folder) for ``big`` ((name, tensor) each); None where no
    copy is made (the module doc). A weight left inside its model file is copied from there by the kernel; any other
    (a model read whole: ``api.load``, the debugger; a Constant's value) is written from its bytes, one weight's copy
    at a time, which then goes (from memory, every weight was held in the proto, in the buffer onnxruntime ran on and
    in its packed copy). A ModelError where a model file changed since it was read (its size or times), before or
    while it is copied, or a weight's data does not fit its dims (``skeleton.check_data``)."""
    from onnxprobe.graph.extents import dims_nbytes
    from onnxprobe.graph.weight_files import in_model_file, left_state, marked

    if not big:
        return None
    sources = [(name, t, marked(t), left_state(t)) if in_model_file(t) else (name, t, None, None) for name, t in big]
    made = _folder(sum((where[2] if where else dims_nbytes(t)) + mmap.ALLOCATIONGRANULARITY for _, t, where, _ in sources))
    if made is None:
        return None
    try:
        places = _copy(sources, os.path.join(made.folder, LOCATION))
    except BaseException:
        made.remove()
        raise
    if places is None:
        made.remove()
        return None
    return made, places


def copy_moves(files: list[tuple[str, Callable[[os.stat_result], bool], list]], size: int, location: str) -> PrivateCopy | None:
    """A copy of weights laid out as the plan cache's direct mode lays them out in its buffer (``runtime.direct``):
    ``files``, (model file, whether its ``os.stat_result`` is the one the entry recorded, its moves: [offset in the
    file, length, offset in the copy] each), into one file ``location`` of ``size`` bytes. None where no copy is made
    (the module doc), or a file is not as recorded, before or after it is copied: the caller then reads the file
    into memory as before (and hashes what it cannot trust)."""
    made = _folder(size)
    if made is None:
        return None
    try:
        out = os.open(os.path.join(made.folder, location), os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            for path, recorded, moves in files:
                with open_regular(path) as f:
                    if not recorded(os.fstat(f.fileno())):
                        raise OSError("not the file the entry recorded")
                    for offset, length, at in moves:
                        _copy_range(f.fileno(), out, offset, at, length, path, "")
                    if not recorded(os.fstat(f.fileno())):
                        raise OSError("changed while it was copied")
        finally:
            os.close(out)
    except (OSError, ModelError):
        made.remove()
        return None
    except BaseException:
        made.remove()
        raise
    return made


def _folder(need: int) -> PrivateCopy | None:
    """A new folder of onnxprobe's own for a copy of ``need`` bytes, in the temporary folder; None for less than
    MIN_BYTES, or where that folder lies in memory, has not the room or cannot be written."""
    # (os.pread: POSIX's; where there is none, no copy)
    folder = _room(need) if need >= MIN_BYTES and hasattr(os, "pread") else None
    if folder is None:
        return None
    try:  # (the copies of processes that ended without removing theirs are swept first)
        made = private_folder(PREFIX)  # (in ``folder``: the temporary folder, which _room checked)
    except OSError:
        return None

    def remove() -> None:
        atexit.unregister(remove)
        shutil.rmtree(made, ignore_errors=True)

    # also at exit: a Ctrl-C or SIGTERM while the session builds (in a daemon thread, runtime.interrupt) ends the
    # process before the builder's ``finally`` (QA: 29 of 30 such signals left a copy of the weights behind);
    # cli.main.finish runs atexit's functions before its os._exit
    atexit.register(remove)
    return PrivateCopy(made, remove)


def _room(need: int) -> str | None:
    """The temporary folder where a copy of ``need`` bytes goes, or None: in memory, short of room, or none usable
    (tempfile finds no folder it can write: a read-only container)."""
    try:
        folder = tempfile.gettempdir()
        st = os.statvfs(folder)
    except OSError:
        return None
    if st.f_bavail * st.f_frsize < need + ROOM or filesystem(folder) in MEMORY_FILESYSTEMS:
        return None
    return folder


def filesystem(path: str) -> str | None:
    """The type of the file system ``path`` lies on (``model_file.filesystem_type``); None where it cannot be told."""
    from onnxprobe.runtime.model_file import filesystem_type

    try:
        return filesystem_type(os.stat(path).st_dev)
    except OSError:
        return None


def _copy(sources: list, target: str) -> dict[str, tuple[str, int, int]] | None:
    """Each of ``sources`` ((name, tensor, (file, offset, length) or None, file status when read)) copied into
    ``target``, a new file, at a page boundary: {name: (LOCATION, length, offset in target)}; one without a place in its
    model file written from its bytes (``skeleton.raw_bytes``). None where the target cannot be written (no room after
    all). A ModelError where a source file is not as it was read, before or after its bytes are copied."""
    from onnxprobe.graph.skeleton import raw_bytes
    from onnxprobe.graph.weight_files import check_state, unreadable

    places: dict[str, tuple[str, int, int]] = {}
    opened: dict[str, int] = {}
    try:
        out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError:
        return None
    try:
        at = 0
        for name, t, where, state in sources:
            at = -(-at // mmap.ALLOCATIONGRANULARITY) * mmap.ALLOCATIONGRANULARITY
            if where is None:  # in memory (or in an external data file): its bytes written, one weight at a time
                data = memoryview(raw_bytes(t))
                try:
                    done = 0
                    while done < len(data):
                        done += os.pwrite(out, data[done:], at + done)
                except OSError:
                    return None
                places[name] = (LOCATION, len(data), at)
                at += len(data)
                del data
                continue
            file, offset, length = where
            if file not in opened:
                try:
                    f = open_regular(file, follow=False)
                except OSError as e:
                    raise unreadable(file, name, e) from None
                opened[file] = os.dup(f.fileno())
                f.close()
                check_state(file, opened[file], state, name)
            try:
                _copy_range(opened[file], out, offset, at, length, file, name)
            except OSError:
                return None
            places[name] = (LOCATION, length, at)
            at += length
        for name, _, where, state in sources:  # changed while it was copied: other bytes than those read
            if where is not None:
                check_state(where[0], opened[where[0]], state, name)
    finally:
        os.close(out)
        for fd in opened.values():
            os.close(fd)
    return places


def _copy_range(src: int, dst: int, offset: int, at: int, length: int, file: str, name: str) -> None:
    """``length`` bytes of ``src`` from ``offset`` to ``dst`` at ``at``: by the kernel where it can, else a CHUNK at a
    time. An OSError where ``dst`` cannot take them; a ModelError where ``src`` ends before them (truncated)."""
    done = 0
    kernel = hasattr(os, "copy_file_range")
    while done < length:
        n = 0
        if kernel:
            try:
                n = os.copy_file_range(src, dst, length - done, offset + done, at + done)
            except OSError as e:
                if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                    raise
                kernel = False  # not on this kernel or between these filesystems: read and write
                continue
        else:
            chunk = os.pread(src, min(CHUNK, length - done), offset + done)
            n = os.pwrite(dst, chunk, at + done) if chunk else 0
        if n <= 0:
            from onnxprobe.graph.weight_files import too_short  # (onnx with it: only here, a file truncated meanwhile)

            raise too_short(file, name)
        done += n
