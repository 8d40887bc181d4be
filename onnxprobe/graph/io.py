"""Loading and saving models: external data, clear errors, atomic writes, >2 GB models.

``load_model`` never writes to the file it reads; writing models is ``graph.external.write_model``'s job
(atomic, external data in chunks).
"""

from __future__ import annotations

import os
from pathlib import Path

import onnx

from onnxprobe.errors import ModelError, first_line
from onnxprobe.fileio import (  # noqa: F401 (check_output_path: re-exported, where its callers have it from)
    check_output_path, checked_path, not_a_folder, output_target, protect, refuse_inputs, same_file,
)
from onnxprobe.graph.integrity import unlisted_initializers
from onnxprobe.graph.node_check import model_problem
from onnxprobe.graph.extents import all_tensors, check_extents, is_external, location
from onnxprobe.graph.tensor_data import check_tensor
from onnxprobe.text import human_bytes, quote

# protobuf cannot serialise a single message over 2 GiB; stay well below it.
PROTO_LIMIT = 2**31 - 2**26


# a model file this big or bigger is read lazily without its big inline weights (a smaller one's walk would cost more
# than its weights)
LAZY_FILE = 4 << 20


def load_model(path: str | os.PathLike, *, load_external_data: bool = True, lazy: bool = False) -> onnx.ModelProto:
    """Read an ONNX model (and its external data), or raise a one-line ModelError. ``lazy``: the main graph's big
    weights stay where they are, in the model file itself (its protobuf parsed without them: ``_without_weights``)
    or in its external data files (``graph.weight_files.leave``), read from there by whoever needs their bytes: for a
    model only onnxprobe's own code and onnxruntime see (never one handed to the user as read)."""
    p = Path(checked_path(path, "model"))
    if not p.exists():
        raise ModelError(f"{p}: is a symbolic link that leads to no file (broken, or a loop of links)" if p.is_symlink()
                         else f"{p}: no such file")
    if p.is_dir():
        raise ModelError(f"{p}: is a folder, not an ONNX model file")
    if not p.is_file():  # a pipe would be read as empty (or wait for ever), a device for ever
        raise ModelError(f"{p}: is a device, pipe or socket, not an ONNX model file")
    try:
        size = p.stat().st_size
    except OSError as e:  # pragma: no cover - permissions etc.
        raise ModelError(f"{p}: cannot read ({e.strerror})") from e
    if size == 0:
        raise ModelError(f"{p}: file is empty, not an ONNX model")
    check_wire_format(p, size)
    stripped = _without_weights(p, size) if lazy and size >= LAZY_FILE else None
    try:
        model = onnx.load(str(p), load_external_data=False) if stripped is None else onnx.ModelProto.FromString(stripped[0])
    except MemoryError:
        raise ModelError(f"{p}: a {human_bytes(size)} model does not fit in the memory available") from None
    except Exception as e:  # DecodeError and friends
        raise ModelError(
            f"{p}: not a readable ONNX model (protobuf decoding failed: truncated or not ONNX)"
        ) from e
    if stripped is not None:
        _leave_inline(model, p, *stripped[1:])
    tensors = list(all_tensors(model))  # one walk for every check of them (3.5 ms a walk on PP-OCRv4 rec)
    check_graph(model, str(p), tensors)
    _protect(p, tensors)  # before the external data is loaded: that clears the tensors' locations
    if load_external_data and any(is_external(t) for t in tensors):
        check_extents(model, p.parent, p)
        try:
            _load_external(tensors, p.parent, model.graph.initializer, lazy)
        except FileNotFoundError as e:
            raise ModelError(
                f"{p}: external data file missing: {e.filename or e} (keep it beside the model)"
            ) from e
        except Exception as e:
            raise ModelError(f"{p}: cannot load its external data: {first_line(e)}") from e
    return model


def ir_notes(model: onnx.ModelProto) -> list[str]:
    """What loading assumes of the model's IR version: none where ONNX defines it (1 on); for 0 or below,
    which ONNX does not define (onnx.checker refuses it) and onnxruntime loads, how onnxruntime reads it
    (measured: as an IR version below 4, its weights constants that no feed overrides, each one listed among
    the graph's inputs or read by a main-graph node, ``graph.integrity.unlisted_initializers``)."""
    if not model.HasField("ir_version") or model.ir_version > 0:
        return []
    return [f"IR version {model.ir_version}, which ONNX does not define (its IR versions start at 1; onnx.checker "
            "refuses it): read as onnxruntime reads it, as an IR version below 4 (weights are constants no feed overrides)"]


def _protect(p: Path, tensors: list[onnx.TensorProto]) -> None:
    """The model file and the external data files of its ``tensors`` (``all_tensors``): never written by this
    process (``fileio.protect``)."""
    protect(p, "an input model")
    for t in tensors:
        loc = location(t) if is_external(t) else ""
        if "\x00" in loc:  # before the path is resolved, which would raise ValueError (extents.source says the same)
            raise ModelError(f"{p}: tensor {t.name!r}: external data location {loc!r} holds a NUL byte")
        if loc:
            protect(p.parent / loc, "an input model's external data")


# ModelProto's fields (onnx.proto): number -> protobuf wire type (0 varint, 2 length-delimited)
_MODEL_FIELDS = {1: 0, 2: 2, 3: 2, 4: 2, 5: 0, 6: 2, 7: 2, 8: 2, 14: 2, 20: 2, 25: 2, 26: 2}


def _varint(f) -> int | None:
    shift = result = 0
    for _ in range(10):
        b = f.read(1)
        if not b:
            return None
        result |= (b[0] & 0x7F) << shift
        if not b[0] & 0x80:
            return result
        shift += 7
    return None


# files of other formats a model is often mistaken for: their first bytes, what they are and what to do
_OTHER_FORMATS = (
    (b"PK\x03\x04", "a zip archive: a zipped model, a PyTorch checkpoint or a Keras file; unzip it, or export the model to ONNX"),
    (b"\x1f\x8b", "a gzip file: decompress it first"),
    (b"\x93NUMPY", "a numpy .npy array, not a model"),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file (a Keras .h5 model?): export the model to ONNX"),
)


def check_wire_format(p: Path, size: int) -> None:
    """Walk the file's top-level protobuf fields without reading their contents (seeking over each
    length-delimited field), so that a file which is not a ModelProto, or is cut short, is refused
    before it is read into memory: a 3 GB file of zeros fails at its first byte. Fields of other
    wire types than ModelProto's, and a graph that is missing, are refused too; a file that is not
    protobuf at all but one of ``_OTHER_FORMATS`` (by its first bytes) is named as what it is."""
    try:
        _walk_fields(p, size)
    except ModelError:
        with open(p, "rb") as f:
            head = f.read(8)
        known = next((what for magic, what in _OTHER_FORMATS if head.startswith(magic)), None)
        if known is None:
            raise
        raise ModelError(f"{p}: not a readable ONNX model ({known})") from None


def _walk_fields(p: Path, size: int) -> None:
    seen_graph = False
    with open(p, "rb") as f:
        while f.tell() < size:
            tag = _varint(f)
            if tag is None:
                raise ModelError(f"{p}: not a readable ONNX model (truncated in a field header)")
            number, wire = tag >> 3, tag & 7
            want = _MODEL_FIELDS.get(number)
            if number == 0 or wire not in (0, 1, 2, 5) or (want is not None and want != wire):
                raise ModelError(f"{p}: not a readable ONNX model (byte {f.tell() - 1} is not a field of an ONNX ModelProto)")
            if wire == 0:
                if _varint(f) is None:
                    raise ModelError(f"{p}: not a readable ONNX model (truncated)")
            elif wire == 2:
                n = _varint(f)
                if n is None or f.tell() + n > size:
                    raise ModelError(f"{p}: not a readable ONNX model (truncated: a field runs past the end of the "
                                     f"{size}-byte file)")
                seen_graph = seen_graph or number == 7
                f.seek(n, 1)
            else:
                f.seek(8 if wire == 1 else 4, 1)
        if f.tell() > size:
            raise ModelError(f"{p}: not a readable ONNX model (truncated)")
    if not seen_graph:
        raise ModelError(f"{p}: not an ONNX model (no graph in the file)")


def check_graph(model: onnx.ModelProto, name: str, tensors: list[onnx.TensorProto] | None = None) -> None:
    """Every check of a model as read, one ModelError naming the first problem (``name``: the file, or
    '<in-memory model>'): a file (``load_model``) and an in-memory ModelProto (``model.check_loaded``) take
    this one function, so that both are refused alike (an in-memory model of no ir_version field was run,
    and a file of it refused). A graph of no node and no output (a missing graph too) is a model, as
    onnx.save writes helper.make_graph([], ...), but nothing to probe: it was called 'not an ONNX model'
    from a file, and from Python (onnx.ModelProto()) gave an empty result without a word. ``tensors``: the
    model's ``all_tensors``, where the caller has them (``load_model``: one walk for its checks too)."""
    if not model.graph.node and not model.graph.output:
        raise ModelError(f"{name}: the model has no nodes and no outputs (an empty graph)")
    # an ir_version left out onnxruntime refuses ("Missing model IR version"); one given as 0 (or below) it loads,
    # read as an IR version below 4 (measured): so does onnxprobe, with ir_notes' note
    if not model.HasField("ir_version"):
        raise ModelError(f"{name}: the model gives no IR version (its ir_version field is missing; onnxruntime "
                         "refuses it too): a broken model")
    field = not_utf8(model)
    if field is not None:  # protobuf hands such a string over as bytes: every command failed on it somewhere
        raise ModelError(f"{name}: {field[0]} is not UTF-8 text ({field[1]!r}), as every ONNX string must be: a broken model")
    if not model.opset_import:  # onnxruntime loads none ("Missing opset"); inspect said 'opset none', grad 'opset 1'
        raise ModelError(f"{name}: the model imports no opset (its opset_import is empty; every ONNX model names the "
                         "opsets of its ops, e.g. ai.onnx 17): a broken model")
    opsets = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if opsets and opsets[-1] < 1:  # the one onnxruntime reads (graph.builder.opset_version)
        raise ModelError(f"{name}: the model imports ai.onnx opset {opsets[-1]}, which does not exist (opsets start at 1)")
    problem = model_problem(model)
    if problem is not None:  # grad's rules read attributes onnxruntime refuses; a conversion dropped a duplicate
        raise ModelError(f"{name}: {problem} (onnxruntime refuses it too): a broken model")
    missing = missing_body(model.graph)
    if missing is not None:  # expose, grad and the debugger read both branches of every If
        raise ModelError(f"{name}: {missing} (onnxruntime refuses it too): a broken model")
    # IR < 4: a weight only a body reads must be a graph input; layers met onnxruntime's raw error on it
    unlisted = unlisted_initializers(model)
    if unlisted:
        more = f" (and {len(unlisted) - 1} more)" if len(unlisted) > 1 else ""
        raise ModelError(f"{name}: {unlisted[0]}{more} (onnxruntime refuses it too): a broken model")
    # a weight's dims are sizes: a negative one made inspect count -4 parameters and -16 B of external data,
    # and onnxruntime's error ("Out of bounds dimensions") named neither the tensor nor the file
    for t in all_tensors(model) if tensors is None else tensors:
        if any(d < 0 for d in t.dims):
            raise ModelError(f"{name}: tensor {quote(t.name)} has dimensions {list(t.dims)}: a negative size (a broken model)")
        check_tensor(t, name, raw=False)  # a weight of fewer values than its dims, or of an unknown type


_BODIES = {"If": ("then_branch", "else_branch"), "Loop": ("body",), "Scan": ("body",)}


def missing_body(g: onnx.GraphProto) -> str | None:
    """The first If without one of its branches, or Loop or Scan without its body (ONNX domain), in ``g``
    and the bodies inside it, said as ``node 'if' (If) has no else_branch``; or the first such node with
    an output left unnamed (''): each returns every value its body gives, none is optional, and
    onnxruntime refuses the model (a Loop's unnamed loop-carried output, it dies of SIGSEGV running it).
    None when every one is whole."""
    for n in g.node:
        if n.op_type in _BODIES and n.domain in ("", "ai.onnx"):  # no other node has a body to miss
            graphs = {a.name: a.g for a in n.attribute if a.type == onnx.AttributeProto.GRAPH}
            label = quote(n.name or next((o for o in n.output if o), ""))
            lacking = [b for b in _BODIES[n.op_type] if b not in graphs]
            if lacking:
                return f"node {label} ({n.op_type}) has no {lacking[0]}"
            unnamed = [k for k, o in enumerate(n.output) if not o]
            if unnamed:
                return f"node {label} ({n.op_type}) leaves its output {unnamed[0]} unnamed (''): none of its outputs is optional"
            # a body takes one value per input of its node (a Scan of opset 8, one less: its sequence_lens);
            # with fewer, grad's Loop and Scan rules read past its inputs (an internal IndexError, QA fuzzing)
            body = graphs.get("body") if n.op_type in ("Loop", "Scan") else None
            if body is not None and not len(n.input) - (n.op_type == "Scan") <= len(body.input) <= len(n.input):
                return (f"node {label} ({n.op_type}) has {len(n.input)} inputs and its body takes {len(body.input)}: "
                        "one per input of the node")
        for a in n.attribute:
            for sub in ((a.g,) if a.type == onnx.AttributeProto.GRAPH else a.graphs):
                found = missing_body(sub)
                if found is not None:
                    return found
    return None


def not_utf8(message) -> tuple[str, bytes] | None:
    """(where, the bytes) of the first string field of ``message`` (a protobuf message, its sub-messages
    included) that is not UTF-8, which protobuf gives as bytes; None when there is none. The field's path
    is built on the way out, for that field only (a path a string cost 2-9 ms a model)."""
    found = _first_bytes(message)
    return None if found is None else (".".join(reversed(found[0])), found[1])


def _first_bytes(message) -> tuple[list[str], bytes] | None:
    """``not_utf8``'s search: the path's parts innermost first, and the first 40 bytes."""
    for fd, value in message.ListFields():
        if fd.type == fd.TYPE_STRING:
            if not fd.is_repeated:
                if isinstance(value, bytes):
                    return [fd.name], value[:40]
                continue
            for k, v in enumerate(value):
                if isinstance(v, bytes):
                    return [f"{fd.name}[{k}]"], v[:40]
        elif fd.type == fd.TYPE_MESSAGE:
            for k, v in enumerate(value if fd.is_repeated else (value,)):
                found = _first_bytes(v)
                if found is not None:
                    found[0].append(f"{fd.name}[{k}]" if fd.is_repeated else fd.name)
                    return found
    return None


def _load_external(tensors: list[onnx.TensorProto], base_dir: Path, weights=(), lazy: bool = False) -> None:
    """onnx's ``load_external_data_for_model`` over the model's ``all_tensors``: sparse tensors' values too
    (onnx's walk skips them), each then marked as held in the model, as onnx marks the others. Those of
    ``weights`` (the main graph's initializers, each of a name of its own) that a skeleton stubs also keep where they
    were read from (``graph.weight_files.mark``), which onnxruntime then reads itself; with ``lazy`` they are not
    read at all (``graph.weight_files.leave``), where their extent is exactly their bytes (a tensor without a length
    entry read to its file's end holds what it holds, as onnx reads it)."""
    from collections import Counter

    from onnx.external_data_helper import load_external_data_for_tensor

    from onnxprobe.fileio import file_state
    from onnxprobe.graph.extents import dims_nbytes, source
    from onnxprobe.graph.skeleton import is_large_tensor, stubbed_size
    from onnxprobe.graph.weight_files import leave, mark

    named = Counter(t.name for t in weights)
    came = {t.name: source(t, base_dir) for t in weights if is_external(t) and named[t.name] == 1}
    states: dict[Path, tuple] = {}
    left, probed = set(), set()
    for t in weights if lazy else ():
        where = came.get(t.name)
        if where is None or not stubbed_size(t):
            continue
        file, offset, length = where[0].resolve(), where[1], where[2]
        if location(t) not in probed:
            _as_onnx_reads(t, base_dir)
            probed.add(location(t))
        if file not in states:
            states[file] = file_state(os.stat(file))
        need = dims_nbytes(t)
        if length == need or (length is None and states[file][0] - offset == need):
            leave(t, file, offset, need, states[file])
            left.add(id(t))
    for t in tensors:
        if is_external(t) and id(t) not in left:
            load_external_data_for_tensor(t, str(base_dir))
            t.data_location = onnx.TensorProto.DEFAULT
            del t.external_data[:]
    for t in weights:
        where = came.get(t.name)
        if where is not None and id(t) not in left and is_large_tensor(t):  # the length onnx read (len(raw_data) copies)
            mark(t, where[0].resolve(), where[1], where[2] if where[2] is not None else dims_nbytes(t))


def _without_weights(p: Path, size: int) -> tuple[bytes, list, tuple] | None:
    """The model file's protobuf bytes without its big inline initializers' raw_data (``graph.wire_format``), where
    each lies, and the file's status; None where the walk leaves nothing out or the file changed while walked."""
    from onnxprobe.fileio import file_state, open_regular
    from onnxprobe.graph.wire_format import FileBytes, without_weights

    try:
        with open_regular(p) as f:
            state = file_state(os.fstat(f.fileno()))
            got = without_weights(FileBytes(f, size))
            if got is None or file_state(os.fstat(f.fileno())) != state:
                return None
    except OSError:
        return None
    return got[0], got[1], state


def _leave_inline(model: onnx.ModelProto, p: Path, left: list[tuple[int, int, int]], state: tuple) -> None:
    """Each initializer ``_without_weights`` left out (its index, the offset and length of its raw_data in ``p``) left in
    the model file (``graph.weight_files.leave``) where a skeleton stubs it, its name is its own and its bytes fit its
    dims and type; the others' bytes read back in, as onnx reads them (a damaged one is then refused as always)."""
    from collections import Counter

    from onnxprobe.fileio import file_state, open_regular
    from onnxprobe.graph.extents import dims_nbytes
    from onnxprobe.graph.skeleton import stubbed_size
    from onnxprobe.graph.weight_files import leave

    inits = model.graph.initializer
    named = Counter(t.name for t in inits)
    back = []
    for k, offset, length in left:
        t = inits[k]
        if named[t.name] == 1 and stubbed_size(t) and dims_nbytes(t) == length:
            leave(t, p.resolve(), offset, length, state, inline=True)
        else:
            back.append((t, offset, length))
    if back:
        try:
            with open_regular(p) as f:
                if file_state(os.fstat(f.fileno())) != state:
                    raise OSError("the file changed while it was read")
                for t, offset, length in back:
                    f.seek(offset)
                    t.raw_data = f.read(length)
        except OSError as e:
            raise ModelError(f"{p}: cannot read the model file again ({e.strerror or e})") from None


def _as_onnx_reads(t: onnx.TensorProto, base_dir: Path) -> None:
    """onnx's own checks of ``t``'s external data file (a symbolic link, a location that leads out of the folder...:
    whatever its loader refuses, in its words), made by reading one byte of it as onnx reads a tensor: a weight left
    in its file is refused where the loaded one would be."""
    from onnx.external_data_helper import load_external_data_for_tensor

    probe = onnx.TensorProto(name=t.name, data_type=onnx.TensorProto.UINT8, dims=[1])
    probe.data_location = onnx.TensorProto.EXTERNAL
    for k, v in (("location", location(t)), ("offset", "0"), ("length", "1")):
        e = probe.external_data.add()
        e.key, e.value = k, v
    load_external_data_for_tensor(probe, str(base_dir))


def model_size(model: onnx.ModelProto) -> int:
    """Approximate serialised size in bytes, from the initializers' dims (ByteSize() walks every byte:
    75 ms on a 45 MB model)."""
    from onnxprobe.graph.skeleton import weight_bytes

    return weight_bytes(model) + 1_000_000


def is_large(model: onnx.ModelProto) -> bool:
    return model_size(model) >= PROTO_LIMIT


def save_beside(model: onnx.ModelProto, folder: str | os.PathLike) -> str:
    """Write a model too large for one protobuf (``is_large``) into ``folder`` as model.onnx with its
    weights in one file beside it, for a runtime that reads from a path; returns the path."""
    path = os.path.join(folder, "model.onnx")
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location="model.onnx.data")
    return path
