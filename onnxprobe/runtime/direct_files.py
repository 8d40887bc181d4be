"""The direct mode's weights in external data files (``runtime.direct``): a model whose big weights lie beside it.

An index entry of such a model holds its probed copy with each stub pointed at its weight's bytes in its data file
(a location relative to the deepest folder holding every such file, ``graph.weight_files.common_folder``), and
records the model file and every external data file the model names (a small tensor's file too: its values are
inline in the entry's skeleton) by size, status and digest. Serving it checks each file as the model file is
checked (``model_file.unchanged``: its status trusted, else hashed), and onnxruntime maps the weights from the
files itself: no buffer of them, no onnx, nothing of the model parsed (plain inference's memory: a model of
512 MiB of MatMul weights held them twice on the normal path, in the proto and in onnxruntime's packed copy).

``outside_weights`` (at an entry, onnx loaded) says where the stubs' bytes are, comparing each with the tensor the
run used; ``files_unchanged`` (at a hit, without onnx) checks the records. An entry is made only where every stub
lies in an external data file: onnxruntime given a folder and in-memory files looks up every weight among the
latter (measured, onnxruntime 1.32).
"""

from __future__ import annotations

import os
import time

from onnxprobe.runtime.model_file import file_state, open_regular, stat_record, stream, unchanged


# a model file bigger than this holds weights big enough to be stubs (which the external form cannot serve); parsing it
# to find that out cost its size in memory at every run of such a model, never served (QA)
HEADER_LIMIT = 64 << 20


def outside_weights(path: str, before: tuple, held: dict, inline: dict) -> tuple[dict, dict, list[dict]] | None:
    """For the stubs ``held`` (stub name -> the tensor the run used, by that name a main-graph initializer of the model
    file ``path``, ``before`` its ``file_state`` when the run began) and the entry's ``inline`` initializers (by name,
    their values in its skeleton): ``files`` ({stub: (file, length, offset)}, the file absolute: ``relative`` makes
    the locations onnxruntime reads), the model file's record as ``runtime.direct.file_weights`` writes one (size,
    digest, stat, recorded_ns; no ``moves``: none of its bytes are weights) and the records of every external data file
    it names (path too). Every external tensor's bytes are compared with the
    tensor the entry stands for as the files are hashed, so that a record's digest is of the very bytes the entry
    holds or points at. None where it cannot be served so: a stub's tensor not in a file of its own (inline in the
    model), bytes other than the run's, an external tensor that is not a main-graph initializer (a Constant's value,
    a body's weight: not compared), a file changed since ``before`` or while read, an onnxruntime that cannot be told
    the folder."""
    import onnx

    from onnxprobe.graph.extents import all_tensors, is_external, source
    from onnxprobe.graph.weight_files import is_left, left_state, marked
    from onnxprobe.runtime.ort_options import reads_folders

    if (held and not reads_folders()) or os.path.getsize(path) > HEADER_LIMIT:
        return None
    base = os.path.dirname(path) or "."
    try:
        header = onnx.load(path, load_external_data=False)
        inits: dict = {}
        for t in header.graph.initializer:
            inits[t.name] = None if t.name in inits else t  # two of one name: which did the run use? not served
        outside = {t.name: t for t in header.graph.initializer if is_external(t)}
        # every external tensor a main-graph initializer of a name of its own; every stub one of them
        if not outside or sum(is_external(t) for t in all_tensors(header)) != len(outside) or any(n not in outside for n in held):
            return None
        where, compared = {}, {}
        for name, t in outside.items():
            file, offset, length = source(t, base)
            used = held.get(name, inline.get(name))
            if inits[name] is None or length is None or (name in held and (used is None or not (used.HasField("raw_data") or is_left(used)))):
                return None
            if used is not None and is_left(used):  # left in its file (graph.weight_files): this very extent, or none
                if marked(used) != (str(file.resolve()), offset, length):
                    return None
                used = left_state(used)
            compared[name] = (str(file.resolve()), offset, length, used)  # used None: a weight the entry does not hold
            if name in held:
                where[name] = compared[name]
    except Exception:  # noqa: BLE001 - a file the normal path read differently: not served
        return None
    records = [_record(path, [], before)]
    for file in sorted({f for f, _, _, _ in compared.values()}):
        records.append(_record(file, [(o, n, used) for f, o, n, used in compared.values() if f == file and used is not None]))
    if any(r is None for r in records):
        return None
    model_record = {k: v for k, v in records[0].items() if k != "path"} | {"moves": []}
    return {name: (f, n, o) for name, (f, o, n, _) in where.items()}, model_record, records[1:]


def relative(files: dict) -> tuple[dict, str]:
    """``outside_weights``' files ({stub: (absolute file, length, offset)}, of one model or several) at locations
    relative to the deepest folder that holds them all, and that folder ("" where there are none)."""
    from onnxprobe.graph.weight_files import common_folder  # (onnx: at an entry, never at a hit)

    if not files:
        return {}, ""
    folder, locations = common_folder([f for f, _, _ in files.values()])
    return {name: (loc, n, o) for (name, (_, n, o)), loc in zip(files.items(), locations)}, folder


def _record(path: str, extents: list, before: tuple | None = None) -> dict | None:
    """A file's record (path, size, digest, stat, recorded_ns), each of its ``extents`` ((offset, length, tensor)) compared
    with that tensor's bytes as they pass (a tensor's bytes held from its extent's first chunk to its last: one at a
    time, or those whose extents overlap; letting go of one at each other's chunk copied it again at every chunk of
    two that share their bytes, QA); None where they differ, the file is not ``before`` (its state when the run
    began, where given) or changed while it was read. A tensor left in this file (``graph.weight_files``, given as
    the file's state when the model was read, a tuple): the file must still be in that state, its bytes not compared."""
    from onnxprobe.graph.tensor_data import tensor_bytes  # (onnx: at an entry, never at a hit)

    left = {tuple(t) for _, _, t in extents if isinstance(t, tuple)}
    extents = [e for e in extents if not isinstance(e[2], tuple)]
    held: dict = {}

    def same(k: int, at: int, chunk) -> bool:
        if k not in held:
            t = extents[k][2]
            held[k] = tensor_bytes(t)  # a copy (protobuf's)
        raw = held[k]
        if at + chunk.size >= extents[k][1]:  # the extent's last chunk
            del held[k]
        return len(raw) == extents[k][1] and raw.startswith(chunk.tobytes(), at)

    try:
        with open_regular(path, follow=before is not None) as f:  # a data file: no link (onnx refuses one)
            st = os.fstat(f.fileno())
            if (before is not None and file_state(st) != tuple(before)) or any(o + n > st.st_size for o, n, _ in extents):
                return None
            if left and left != {file_state(st)}:
                return None
            digest = stream(f, st.st_size, [[o, n] for o, n, _ in extents], same)
            if digest is None or file_state(os.fstat(f.fileno())) != file_state(st) or file_state(os.stat(path)) != file_state(st):
                return None
    except OSError:
        return None
    return {"path": path, "size": int(st.st_size), "digest": digest, "stat": stat_record(st), "recorded_ns": time.time_ns()}


def files_unchanged(records: list) -> bool:
    """Whether every file ``records`` describe (``outside_weights``) is still that file: its status trusted
    (``model_file.unchanged``), else its bytes hashed, a CHUNK at a time."""
    for r in records:
        try:
            with open_regular(r["path"], follow=False) as f:  # a link swapped in: the normal path refuses it
                st = os.fstat(f.fileno())
                if st.st_size != r["size"]:
                    return False
                if not unchanged(st, r) and stream(f, r["size"], [], None) != r["digest"]:
                    return False
        except OSError:
            return False
    return True


def outside_fits(meta: dict) -> bool:
    """Whether an entry's ``data_files`` and ``folder`` are of the forms ``outside_weights`` and ``relative`` give
    (none and "" for a model of its own bytes)."""
    records = meta.get("data_files")
    return isinstance(meta.get("folder"), str) and isinstance(records, list) and all(
        isinstance(r, dict) and isinstance(r.get("path"), str) and os.path.isabs(r["path"]) and isinstance(r.get("size"), int)
        and isinstance(r.get("digest"), str) and isinstance(r.get("stat"), list) and isinstance(r.get("recorded_ns"), int)
        for r in records)
