"""Where an external tensor's bytes lie, and whether they are there: its file inside the model's folder
(``source``: never outside it, never through a NUL byte or a link that leads out), how many bytes its dims
and type need (``dims_nbytes``, ``tensor_nbytes``), and whether each file holds them (``extent_problems``,
``check_extents``: a truncated data file is named with both sizes before onnxruntime's "buffer size
mismatch"). Shared by the loader (``graph.io``) and the lazy reader and writer (``graph.external``);
nothing here reads a tensor's data.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import onnx
from onnx import TensorProto
from onnx.external_data_helper import ExternalDataInfo, _get_all_tensors

from onnxprobe.errors import ModelError, first_line
from onnxprobe.types import element_count


def all_tensors(model: onnx.ModelProto) -> Iterator[TensorProto]:
    """Every TensorProto of the model: initializers and tensor attributes, in subgraphs too, and the values
    and indices of its sparse tensors (sparse initializers, sparse attributes), which onnx's own walk leaves
    out: their external data was neither checked nor loaded, and onnxruntime, given the model as bytes,
    read it relative to the working directory."""
    yield from _get_all_tensors(model)
    yield from sparse_tensors(model)


def sparse_tensors(model: onnx.ModelProto) -> Iterator[TensorProto]:
    """The values and indices of every sparse tensor of the model, in subgraphs and functions too."""
    yield from _sparse_in(model.graph)
    for f in model.functions:
        yield from _sparse_in(f)


def _sparse_in(g) -> Iterator[TensorProto]:
    """The values and indices of the sparse tensors of ``g`` (a graph or a function) and its bodies."""
    for s in getattr(g, "sparse_initializer", ()):
        yield s.values
        yield s.indices
    for n in g.node:
        for a in n.attribute:
            for s in ([a.sparse_tensor] if a.HasField("sparse_tensor") else []) + list(a.sparse_tensors):
                yield s.values
                yield s.indices
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                yield from _sparse_in(sub)


def is_external(t: TensorProto) -> bool:
    return t.data_location == TensorProto.EXTERNAL


def source(t: TensorProto, base_dir: str | os.PathLike, origin: str | os.PathLike | None = None) -> tuple[Path, int, int | None]:
    """Where a tensor's external data lies: a file inside the model's folder (symbolic links resolved
    first, so a link that leads outside is refused as onnx and onnxruntime refuse it), an offset and a
    length (non-negative integers). ``origin``: the model file, named in the errors (two models, one
    tensor name: which one)."""
    try:
        where = _source(t, base_dir)
    except ModelError as e:
        if origin is None:
            raise
        raise ModelError(f"{origin}: {e}") from None
    if origin is not None and where[0].resolve() == Path(origin).resolve():  # its protobuf bytes read as weights
        raise ModelError(f"{origin}: tensor {t.name!r}: external data location {location(t)!r} is the model file itself")
    return where


def _source(t: TensorProto, base_dir: str | os.PathLike) -> tuple[Path, int, int | None]:
    try:
        info = ExternalDataInfo(t)
    except (ValueError, TypeError) as e:
        raise ModelError(f"tensor {t.name!r}: malformed external data entry ({first_line(e)})") from None
    if "\x00" in (info.location or ""):  # no file name holds one; the system would refuse it as a ValueError
        raise ModelError(f"tensor {t.name!r}: external data location {info.location!r} holds a NUL byte")
    loc = Path(info.location)
    if not info.location or loc.is_absolute():
        raise ModelError(f"tensor {t.name!r}: external data location {info.location!r} must be a relative path inside the model's folder")
    base = Path(base_dir).resolve()
    path = (base / loc).resolve()  # a '..' that stays inside ('sub/../w.bin') is read, as onnx and onnxruntime read it
    if path != base and base not in path.parents:
        if os.path.normpath(loc).split(os.sep)[0] == "..":
            raise ModelError(f"tensor {t.name!r}: external data location {info.location!r} must be a relative path inside "
                             "the model's folder (it leads outside through '..')")
        raise ModelError(f"tensor {t.name!r}: external data location {info.location!r} leads outside the model's folder "
                         f"(a symbolic link to {path}); refusing to read it")
    try:
        offset = int(info.offset or 0)
        length = int(info.length) if info.length is not None else None
    except (TypeError, ValueError):
        raise ModelError(f"tensor {t.name!r}: external data offset/length {info.offset!r}/{info.length!r} are not numbers") from None
    if offset < 0 or (length is not None and length < 0):
        raise ModelError(f"tensor {t.name!r}: external data offset/length {offset}/{length} are negative")
    return Path(base_dir) / loc, offset, length


def location(t: TensorProto) -> str:
    return next((e.value for e in t.external_data if e.key == "location"), "")


def check_extents(model: onnx.ModelProto, base_dir: str | os.PathLike, path: str | os.PathLike, *,
                  absent: frozenset[str] | set[str] = frozenset()) -> None:
    """Each external tensor's data fits its file (``extent_problems``): else a ModelError, the first problem."""
    problems = extent_problems(model, base_dir, path, absent=absent)
    if problems:
        raise ModelError(problems[0].message)


@dataclass(frozen=True)
class ExtentProblem:
    """An external data file that does not hold its tensors, as a message and as numbers (``inspect`` lists
    the file with them: a stat, never a read)."""

    location: str
    message: str
    needs: int  # bytes the file's tensors call for: the largest offset + dims x type size
    holds: int | None = None  # the file's size, when it is too short for them
    tensor: str = ""  # the tensor whose length entry disagrees with its dims ...
    entry: int | None = None  # ... what the entry says ...
    tensor_needs: int = 0  # ... and what its dims and type need
    short: str = ""  # what is wrong in a few words, where no numbers say it (a folder, a file not readable)


def extent_problems(model: onnx.ModelProto, base_dir: str | os.PathLike, path: str | os.PathLike, *,
                    absent: frozenset[str] | set[str] = frozenset()) -> list[ExtentProblem]:
    """One ExtentProblem for each external data file that does not hold its tensors: the bytes a tensor's
    dims and type need, from its offset, lie past the file's end, or its length entry says otherwise (a
    truncated data file surfaced as onnxruntime's "Deserialize tensor W failed ... buffer size mismatch",
    naming no file), or the file is missing or not a regular file (unless its location is in ``absent``: a
    caller that reads the model without that data)."""
    sizes: dict[str, int] = {}
    needs: dict[str, int] = {}
    out: dict[str, tuple] = {}  # location -> (message, holds, tensor, entry, tensor_needs)
    for t in all_tensors(model):
        if not is_external(t) or t.data_type == TensorProto.STRING or location(t) in absent:
            continue
        where, offset, length = source(t, base_dir, path)
        loc = location(t)
        need = dims_nbytes(t)
        needs[loc] = max(needs.get(loc, 0), offset + need)
        if loc in out:
            continue
        if length is not None and length != need:
            out[loc] = (f"{path}: tensor {t.name!r} ({_kind(t)}) needs {need} bytes, its external data entry says {length}",
                        None, t.name, length, need)
            continue
        if loc not in sizes:
            if not where.exists():
                out[loc] = (f"{path}: external data file missing: {loc} (keep it beside the model)", None, "", None, 0)
                continue
            if not where.is_file():
                why = "not a regular file (a folder, a device or a pipe)"
                out[loc] = (f"{path}: external data {loc} is {why}", None, "", None, 0, why)
                continue
            try:
                sizes[loc] = where.stat().st_size
            except OSError as e:
                out[loc] = (f"{path}: cannot read external data {loc} ({e.strerror})", None, "", None, 0,
                            f"not readable ({e.strerror})")
                continue
        if offset + need > sizes[loc]:
            out[loc] = (f"{path}: external data {loc} holds {sizes[loc]} bytes; tensor {t.name!r} ({_kind(t)}) "
                        f"needs {need} from offset {offset} (the file is truncated, or not this model's)", sizes[loc], "", None, 0)
    return [ExtentProblem(loc, msg, needs[loc], *rest) for loc, (msg, *rest) in out.items()]


def _kind(t: TensorProto) -> str:
    return f"{TensorProto.DataType.Name(t.data_type).lower()} [{'x'.join(str(d) for d in t.dims)}]"


def dims_nbytes(t: TensorProto) -> int:
    """Bytes a tensor's dims and element type call for."""
    n = element_count(t.dims) or 0
    bits = _BITS.get(t.data_type)
    if bits is None:
        try:
            bits = 8 * onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
        except Exception:  # noqa: BLE001
            bits = 8
    return (n * bits + 7) // 8


def tensor_nbytes(t: TensorProto) -> int:
    """Bytes of a tensor's data, wherever it lives (computed from dims and dtype when not stored raw)."""
    if t.HasField("raw_data"):
        return len(t.raw_data)
    if is_external(t):
        length = next((e.value for e in t.external_data if e.key == "length"), None)
        if length is not None:
            try:
                return int(length)
            except ValueError:
                raise ModelError(f"tensor {t.name!r}: external data length {length!r} is not a number") from None
    if t.data_type == TensorProto.STRING:
        return sum(len(s) for s in t.string_data)
    return dims_nbytes(t)


_BITS = {getattr(TensorProto, k): 4 for k in ("INT4", "UINT4", "FLOAT4E2M1") if hasattr(TensorProto, k)}
_BITS.update({getattr(TensorProto, k): 2 for k in ("INT2", "UINT2") if hasattr(TensorProto, k)})
