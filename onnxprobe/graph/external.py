"""External data without loading it: read a model's header, write a copy whose weights stream from disk.

The surgery commands (``inspect``, ``mark``, ``extract``) never need weight values, only their dims and
types, so they work on a *lazy* model: the ModelProto with its external tensors left on disk. A 3 GB model
then costs a few kilobytes of memory, and nothing over 2 GB ever has to be serialised in one piece.

- ``load_lazy(path)`` reads the model without its external data, except tensors of at most
  ``SMALL_TENSOR`` bytes (shape constants, axes...), which shape inference needs to see; the result also
  lists the external data files as the model on disk names them.
- ``external_files(model, base_dir)`` lists the files the model's external tensors live in.
- ``materialize(model, base_dir)`` returns a copy with every tensor loaded (to run it).
- ``write_model(model, out, base_dir=...)`` writes atomically: tensors still on disk are copied chunk by
  chunk from their source file into ``OUT.data`` beside OUT (bytes that several tensors share are copied
  once); the model is checked on the temporary files before they replace OUT. Nothing is ever written
  beside the source model unless OUT is there, and the source data file is never the destination.

None of these mutate the model they are given.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import onnx
from onnx import TensorProto
from onnx.external_data_helper import load_external_data_for_tensor

from onnxprobe.errors import ModelError, OutputRefused, WriteFailed, first_line
from onnxprobe.text import as_word
from onnxprobe.fileio import input_kind, protect, replace_keeping_mode, temp_beside
from onnxprobe.graph.builder import single_initializers
from onnxprobe.graph.extents import (ExtentProblem, all_tensors, extent_problems, is_external, location, source, sparse_tensors,
                                     tensor_nbytes)
from onnxprobe.graph.io import PROTO_LIMIT, check_output_path, load_model, model_size
from onnxprobe.graph.weight_files import unmark

SMALL_TENSOR = 1 << 20  # external tensors up to this size are read by load_lazy
INLINE_LIMIT = 1024  # tensors below this stay inside the .onnx file when OUT.data is written
ALIGN = 4096  # big tensors start at page boundaries in OUT.data, so onnxruntime can map them
CHUNK = 64 << 20


@dataclass
class LazyModel:
    proto: onnx.ModelProto  # external tensors over SMALL_TENSOR bytes still on disk
    base_dir: Path  # where their locations are relative to
    external: list["ExternalFile"]  # the external data files, as the file on disk describes them
    problems: list[str] = field(default_factory=list)  # files that do not hold their tensors (truncated...)
    notes: list[str] = field(default_factory=list)  # what reading it as onnxruntime runs it changed (single_initializers)


def load_lazy(path: str | os.PathLike, *, require_data: bool = True) -> LazyModel:
    """The model with big external tensors left on disk (see the module docstring). A missing external
    data file is a ModelError, unless ``require_data`` is False (its tensors then stay unread)."""
    model = load_model(path, load_external_data=False)
    notes: list[str] = []
    single_initializers(model, notes)  # one copy of each weight, as onnxruntime runs it, for every pass and the copy written
    base = Path(path).parent
    for t in all_tensors(model):  # every location checked (absolute, '..', a link out) before any is listed:
        if is_external(t):        # a missing one is no reason to describe /dev/zero as "missing"
            source(t, base, path)
    files = external_files(model, base)
    for f in files:
        if not f.exists and require_data:
            raise ModelError(f"{path}: external data file missing: {f.path} (keep it beside the model)")
    missing = {f.location for f in files if not f.exists}
    problems = extent_problems(model, base, path, absent=missing)
    if problems and require_data:
        raise ModelError(problems[0].message)
    missing |= {p.location for p in problems}  # described, not read
    files = [dataclasses.replace(f, problem=next((p for p in problems if p.location == f.location), None)) for f in files]
    for t in all_tensors(model):
        if is_external(t) and tensor_nbytes(t) <= SMALL_TENSOR and location(t) not in missing:
            source(t, base)
            try:
                load_external_data_for_tensor(t, str(base))
            except Exception as e:  # noqa: BLE001
                raise ModelError(f"{path}: cannot read the external data of tensor {t.name!r}: {first_line(e)}") from e
    return LazyModel(model, base, files, [p.message for p in problems], notes)


@dataclass(frozen=True)
class ExternalFile:
    path: Path
    location: str  # as written in the model
    tensors: int
    bytes: int  # bytes the model reads from it
    exists: bool
    problem: ExtentProblem | None = None  # it does not hold its tensors (truncated, a length entry that disagrees)


def protect_models(models: list[str], what: str) -> None:
    """Keep every output from the model files ``models`` and their external data files (``fileio.protect``; ``what``
    they are, said in the refusal): a path that does not read as a model (a file that took its name since) has none."""
    for model in models:
        protect(model, what)
        try:
            files = external_files(onnx.load(model, load_external_data=False), os.path.dirname(os.path.abspath(model)))
        except Exception:  # noqa: BLE001 - not a model: nothing more to protect
            continue
        for f in files:
            protect(str(f.path), f"the external data of {what}")


def external_files(model: onnx.ModelProto, base_dir: str | os.PathLike) -> list[ExternalFile]:
    found: dict[str, list] = {}
    for t in all_tensors(model):
        if is_external(t):
            loc = location(t)
            entry = found.setdefault(loc, [0, 0])
            entry[0] += 1
            entry[1] += tensor_nbytes(t)
    out = []
    for loc, (n, size) in found.items():
        p = Path(base_dir) / loc
        out.append(ExternalFile(p, loc, n, size, p.exists()))  # a folder or device: a problem (extents), not missing
    return out


def materialize(model: onnx.ModelProto, base_dir: str | os.PathLike) -> onnx.ModelProto:
    """A copy with every external tensor loaded into memory."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for t in all_tensors(out):
        if is_external(t):
            _read_in(t, base_dir)
    return out


def _read_in(t, base_dir) -> None:
    """An external tensor's data read into it from ``base_dir`` (its location validated first)."""
    source(t, base_dir)
    try:
        load_external_data_for_tensor(t, str(base_dir))
    except Exception as e:  # noqa: BLE001
        raise ModelError(f"cannot read the external data of tensor {t.name!r}: {first_line(e)}") from e


def check_model_file(path: str | os.PathLike) -> str | None:
    """onnx.checker on a file (by path, so external data and >2 GB models work): None, or the complaint on
    one line (the checker breaks its sentences: "...of node: \nname: a OpType: Add\n is not output...")."""
    try:
        onnx.checker.check_model(str(path))
    except Exception as e:  # noqa: BLE001 - ValidationError and friends
        return " ".join(ln.strip() for ln in str(e).splitlines() if ln.strip())[:400] or first_line(e)
    return None


@dataclass
class Written:
    path: Path
    data_path: Path | None  # OUT.data, when weights were written beside OUT
    bytes: int  # total bytes written (model + data)


def write_model(
    model: onnx.ModelProto,
    out: str | os.PathLike,
    *,
    base_dir: str | os.PathLike | None = None,
    external: bool | None = None,
    check: Callable[[Path], None] | None = None,
    protect: list[str | os.PathLike] = (),
) -> Written:
    """Write ``model`` to ``out`` atomically. Tensors whose data is still on disk are read from
    ``base_dir``. ``external`` (default: when the model has external tensors or would pass 2 GB) puts
    every tensor of ``INLINE_LIMIT`` bytes or more into ``OUT.data``. ``check(tmp_path)`` runs on the
    temporary files before they replace OUT; an exception from it leaves OUT untouched. Files in
    ``protect`` (the input model's own data files) are never written: an OutputRefused says so (which the
    command line leads with its flag)."""
    o = check_output_path(out)
    if o.exists() and not o.is_file():  # /dev/null, /dev/full, a FIFO: written in place, never replaced
        return _write_in_place(model, o, external)
    if o.exists() and o.resolve() in {Path(p).resolve() for p in protect}:
        raise OutputRefused(f"{o}: is the input model's external data; choose another output path")
    folder = o.parent if str(o.parent) else Path(".")
    m = onnx.ModelProto()
    m.CopyFrom(model)
    tensors = list(all_tensors(m))
    unmark(tensors)  # where a loaded weight came from (graph.weight_files) is this process's, not the file's
    has_ext = any(is_external(t) for t in tensors)
    if has_ext and base_dir is None:
        raise ValueError("base_dir is required for a model with external tensors")
    if external is None:
        external = has_ext or model_size(m) >= PROTO_LIMIT
    elif has_ext and not external:
        raise ValueError("a model with tensors still on disk is written with external=True")
    if (external or check is not None) and not _utf8(o.absolute()):
        from onnxprobe.text import clean

        raise OutputRefused(f"{clean(str(o))}: its path is not UTF-8 text (a name in another encoding); a model's data file is "
                         "named, and onnx.checker reads the model, by UTF-8 paths: choose another name")
    tmp_paths: list[Path] = []

    def tmp(suffix: str) -> Path:
        p = temp_beside(o, suffix)  # 0666 minus the umask, not mkstemp's 0600
        tmp_paths.append(p)
        return p

    try:
        data_path = None
        if external:
            data_name = o.name + ".data"
            data_path = folder / data_name
            sources = {source(t, base_dir)[0].resolve() for t in tensors if is_external(t)}
            sources |= {Path(p).resolve() for p in protect}
            what = "the input model's external data" if data_path.resolve() in sources else input_kind(data_path)
            if what is not None:  # led, as every refused output, by the flag that named OUT (errors.writing_as)
                raise OutputRefused(f"{o}: its data file {data_path} is {what}; choose another output name")
            if data_path.exists() and not data_path.is_file():  # said before any weight is copied; it was
                # "OUT: cannot write it (Is a directory)" after all of them were
                raise OutputRefused(f"{o}: its data file {data_path} is a folder (or a device or pipe); choose another output name")
            tmp_data = tmp(".data.tmp")
            _inline_sparse(m, base_dir)
            _write_data(tensors, base_dir, tmp_data, keep={id(t) for t in sparse_tensors(m)})
            if not any(is_external(t) for t in tensors):  # every tensor small enough to stay inline: no data file
                external, data_path = False, None
            else:
                _setlocation(tensors, tmp_data.name)
        tmp_model = tmp(".tmp")
        _save_header(m, tmp_model)
        if check is not None:
            check(tmp_model)
        if external:
            _setlocation(tensors, data_name)
            _save_header(m, tmp_model)
            replace_keeping_mode(tmp_data, data_path)
        replace_keeping_mode(tmp_model, o)
        size = o.stat().st_size + (data_path.stat().st_size if data_path else 0)
        return Written(o, data_path, size)
    except OSError as e:  # a read-only folder, a full disk...
        raise WriteFailed.cannot(as_word(os.fspath(o)), e) from e
    finally:
        for p in tmp_paths:
            if p.exists():
                p.unlink()


def _utf8(p: Path) -> bool:
    """Whether ``p`` is UTF-8 text (a file name of other bytes comes as lone surrogates, which onnx's C++
    checker and a TensorProto's location refuse)."""
    try:
        str(p).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _write_in_place(model: onnx.ModelProto, o: Path, external: bool | None) -> Written:
    """A model written into a special file (a device, a FIFO): renaming a temporary file over it would
    replace the device, so the bytes go straight in; weights cannot go beside it."""
    if external or any(is_external(t) for t in all_tensors(model)) or model_size(model) >= PROTO_LIMIT:
        raise OutputRefused(f"{o}: is not a regular file, and this model's weights need a data file beside it; "
                         "choose a file name")
    m = onnx.ModelProto()
    m.CopyFrom(model)
    unmark(all_tensors(m))
    try:
        data = m.SerializeToString()
        with open(o, "wb") as f:
            f.write(data)
    except OSError as e:
        raise WriteFailed.cannot(as_word(os.fspath(o)), e) from e
    return Written(o, None, len(data))


def _save_header(m: onnx.ModelProto, path: Path) -> None:
    if m.ByteSize() >= PROTO_LIMIT:  # pragma: no cover - external=True moves every big tensor out
        raise ModelError("the model is over 2 GB even without its weights; cannot write it")
    path.write_bytes(m.SerializeToString())


def _inline_sparse(m: onnx.ModelProto, base_dir) -> None:
    """A sparse tensor's values and indices read into the model: onnx.checker refuses a sparse tensor whose
    data lies outside it ("Cannot parse data from external tensors"), so they stay in the .onnx file."""
    for t in sparse_tensors(m):
        if is_external(t):
            _read_in(t, base_dir)
            t.data_location = TensorProto.DEFAULT
            del t.external_data[:]


def _write_data(tensors: list[TensorProto], base_dir, dest: Path, keep: set[int] = frozenset()) -> None:
    """The external and big tensors' bytes into ``dest``; those in ``keep`` (by id: sparse tensors' parts)
    stay in the model."""
    done: dict[tuple, tuple[int, int]] = {}  # (source file, offset, length) -> (new offset, length)
    with open(dest, "wb") as f:
        for t in tensors:
            if id(t) in keep:
                continue
            if is_external(t):
                src, off, length = source(t, base_dir)
                if not src.is_file():
                    raise ModelError(f"external data file missing: {src}")
                if length is None:
                    length = src.stat().st_size - off
                key = (str(src), off, length)
                if key not in done:
                    start = _pad(f, length)
                    with open(src, "rb") as s:
                        s.seek(off)
                        left = length
                        while left:
                            buf = s.read(min(CHUNK, left))
                            if not buf:
                                raise ModelError(f"{src}: too short for tensor {t.name!r} (offset {off}, length {length})")
                            f.write(buf)
                            left -= len(buf)
                    done[key] = (start, length)
                start, length = done[key]
            elif t.HasField("raw_data") and len(t.raw_data) >= INLINE_LIMIT:
                length = len(t.raw_data)
                start = _pad(f, length)
                f.write(t.raw_data)
                t.ClearField("raw_data")
            else:
                continue
            t.data_location = TensorProto.EXTERNAL
            del t.external_data[:]
            for k, v in (("location", ""), ("offset", str(start)), ("length", str(length))):
                e = t.external_data.add()
                e.key, e.value = k, v


def _pad(f, length: int) -> int:
    pos = f.tell()
    if length >= ALIGN and pos % ALIGN:
        f.write(b"\0" * (ALIGN - pos % ALIGN))
        pos = f.tell()
    return pos


def _setlocation(tensors: list[TensorProto], name: str) -> None:
    for t in tensors:
        if is_external(t):
            for e in t.external_data:
                if e.key == "location":
                    e.value = name


def save_model(model: onnx.ModelProto, out: str | os.PathLike, *, external_data: bool | None = None) -> Path:
    """Write an in-memory ``model`` atomically (``write_model``). Models over 2 GB (or
    ``external_data=True``) get their weights in ``OUT.data`` beside the output file."""
    return write_model(model, out, external=external_data).path
