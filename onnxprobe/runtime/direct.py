"""The plan cache's direct mode (as ccache's): the second ``layers`` of the same model file with the same request
runs the cached probed copy without importing onnx and without parsing the model.

An index entry (``runtime.plan_cache``'s folder, size bound, digest check and damaged-entry-is-a-miss rules) is
keyed by the request as it is stated before any model is read (``api.lean``: the model's path as given and
resolved, selection, input flags, device, opt level; onnxprobe's version and code, ``plan_cache.key_of``), never
by the file's bytes: a lookup that finds nothing costs a stat of the model and the opening of the index's file.
It records the model file it was made from (size, modification time, digest) and holds what the run needs and
could not compute without onnx:

- the probed copy as a skeleton whose stubs point into one in-memory external-data file (``LOCATION``): the
  weights' bytes taken from the model file (the offset and length of each one's data, ``_DATA_FIELDS``, found by a walk of the
  file's protobuf wire format, ``weight_extents``; ``moves``), each at an ``ALIGN`` boundary;
- the probes as ``plan_cache`` stores them, the graph outputs to fetch, the inputs' recipe (name, numpy dtype,
  shape, drawn from one generator of the seed: ``runtime.random_inputs.draw``), and the notes and warnings
  the first run printed, which do not come from the run itself.

``entry`` writes it (onnx imported there: the normal path has it loaded already); ``run`` reads it and runs,
and returns None for anything unusual (a miss, a damaged entry, a model file of other bytes than the entry's,
onnxruntime's refusal, statistics that need the masked rerun): the normal path then runs as always, says what
went wrong in its words, and writes the entry anew. Neither holds the model file whole: it is read ``CHUNK`` at a
time, hashed as it passes, each weight's bytes copied out (``run``) or checked (``entry``) on the way.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import asdict
from typing import TYPE_CHECKING

import numpy as np

from onnxprobe.errors import owns_the_process
from onnxprobe.memory import return_freed_memory, unpark
from onnxprobe.runtime import plan_cache
from onnxprobe.runtime.random_inputs import draw
from onnxprobe.runtime.runners.readback import host_statistics, read_probes, second_look
from onnxprobe.types import Probe

if TYPE_CHECKING:
    import onnx

LOCATION = "onnxprobe-weights"  # the one in-memory external-data file an entry's stubs point into: the file's weights
MAX_FILE = 2**31 - 1  # protobuf's limit: a bigger model keeps its weights in external data files, which are not served
# each weight's bytes start at a multiple of this in the buffer onnxruntime reads them from: its kernels sum
# otherwise (ReduceSum of 5000 float32 gives -37.389652 at a 16-byte boundary, -37.38966 8 bytes past one),
# and the normal path hands them over from Python bytes objects, which start at 16-byte boundaries
ALIGN = 64
CHUNK = 2**20  # the model file is read this much at a time: never held whole (a 1.5 GB model is no 1.5 GB more)
WINDOW = 2**16  # the wire-format walk reads the file's headers this much at a time (the weights' bytes it skips)


def request_key(request: dict) -> str:
    """The index entry's key: the request, the model's path in it (``plan_cache.key_of`` adds onnxprobe's
    version, the entries' FORMAT and the code's fingerprint). The file's bytes are no part of it: the entry
    records them (``file_record``), checked when it serves."""
    return plan_cache.key_of({"direct": 2, "request": request})


def file_state(st) -> tuple[int, int, int, int]:
    """What says that a model file is still the one it was (an ``os.stat_result``'s size, modification time,
    inode and device): a normal run during which it changed is not indexed."""
    return (int(st.st_size), int(st.st_mtime_ns), int(st.st_ino), int(st.st_dev))


def _stream(f, size: int, moves: list, each) -> str | None:
    """Read the open file ``f`` from its start, CHUNK at a time, hashing it; each ``moves`` extent's bytes
    ([offset, length, ...], in any order; handed over in the order of the file) go to ``each(k, at, chunk)`` as
    they pass (``k``: the index in ``moves``, ``at``: where in the extent ``chunk`` starts), which returns False
    to stop. The digest; None where ``each`` stopped or the file is not ``size`` bytes long."""
    h = plan_cache.blake2b(digest_size=32)
    order = sorted(range(len(moves)), key=lambda k: moves[k][0])
    buf = np.empty(min(CHUNK, max(size, 1)), np.uint8)
    f.seek(0)
    pos = first = 0
    while True:
        n = f.readinto(memoryview(buf))
        if not n:
            break
        view, end = buf[:n], pos + n
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
    return h.hexdigest() if pos == size else None


class _FileBytes:
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


def _constant(b, start: int, end: int) -> tuple[str | None, tuple[int, int] | None]:
    """A main-graph Constant node's (first output, its ``value`` tensor's data extent: ``_tensor``), else (None, None)."""
    outputs, op, value = [], None, None
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
                _, raw, elsewhere = _tensor(b, *t)
                value = None if elsewhere else raw
    return (outputs[0] if op == b"Constant" and outputs else None), value


def weight_extents(data) -> dict[str, tuple[int, int]] | None:
    """Name -> (offset, length) in the model file's bytes ``data`` (bytes, or an open file's: ``_FileBytes``) of the
    data of every main-graph initializer and main-graph Constant value stored inline (``_DATA_FIELDS``; by its node's
    first output, as ``graph.skeleton`` names its stubs); None where the bytes cannot be walked (no graph, a graph
    given twice)."""
    b = data if isinstance(data, _FileBytes) else memoryview(data)
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
                name, raw = _constant(b, a, z)
            else:
                name, raw, elsewhere = _tensor(b, a, z)
                raw = None if elsewhere else raw
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


# --- writing an entry (the normal path, onnx loaded) ------------------------------------------------------------

def entry(key: str, path: str, before: tuple, plan_model: "onnx.ModelProto", weights: dict | None, probes: list[Probe],
          outputs: list[str], own: list[str], feed: dict[str, np.ndarray], seed: int, int_range: tuple[int, int],
          notes: list[str], warnings: list[str], runtime_options: dict) -> bool:
    """Write the index entry ``key`` for a run of the model file ``path``, which was ``before`` (``file_state``) when
    the run began: its probed copy ``plan_model`` (its stubs' tensors in ``weights``, by name, or inline), the
    result's ``probes`` in their order, the graph ``outputs`` its run fetched (the model's own among them: ``own``),
    its ``feed`` (every input drawn from ``seed`` and ``int_range``), and the ``notes`` and ``warnings`` it
    printed. False where the run cannot be served so: the file changed since ``before`` (or while it is read), a
    weight not stored in the file as its own bytes (``_DATA_FIELDS``) or not the bytes the run used, inputs the recipe does not make
    again. The file is read a CHUNK at a time, hashed, each stub's bytes compared with its tensor as they pass."""
    from onnxprobe.graph.skeleton import raw_bytes, skeleton, stubs

    recipe = [[n, v.dtype.str, list(v.shape)] for n, v in feed.items() if isinstance(v, (np.ndarray, np.generic))]
    if len(recipe) != len(feed) or any(np.dtype(d).kind not in "biufc" or np.dtype(d).str != d for _, d, _ in recipe):
        return False
    again = draw([(n, d, tuple(s)) for n, d, s in recipe], seed, int_range)
    if any(not np.array_equal(again[n], v) or np.asarray(again[n]).dtype != np.asarray(v).dtype for n, v in feed.items()):
        return False
    size = before[0]
    if size > MAX_FILE:
        return False
    sk = skeleton(plan_model, constants=True)
    held = stubs(sk)
    with _open_regular(path) as f:
        if file_state(os.fstat(f.fileno())) != tuple(before):
            return False
        extents = weight_extents(_FileBytes(f, size)) if held else {}
        if extents is None:
            return False
        moves, expected, packed = [], [], 0
        for name, t in held.items():
            if name not in extents:
                return False
            w = (weights or {}).get(name)
            if w is None:  # the probed copy held it inline: its own tensor (skeleton made the stub from it)
                w = _inline(plan_model, name)
            offset, length = extents[name]
            try:
                if w is None or (raw := raw_bytes(w)).size != length:
                    return False
            except Exception:  # noqa: BLE001 - data that does not fit its dims: the normal path says so
                return False
            moves.append([offset, length, packed])
            expected.append(raw)
            del t.external_data[:]
            for k, v in (("location", LOCATION), ("offset", str(packed)), ("length", str(length))):
                e = t.external_data.add()
                e.key, e.value = k, v
            packed += -(-length // ALIGN) * ALIGN
        digest = _stream(f, size, moves, lambda k, at, chunk: np.array_equal(expected[k][at:at + chunk.size], chunk))
        if digest is None or file_state(os.fstat(f.fileno())) != tuple(before) or file_state(os.stat(path)) != tuple(before):
            return False
    try:
        serialised = sk.SerializeToString()
    except ValueError:
        return False
    meta = {"probes": [asdict(p) for p in probes], "outputs": list(outputs), "own": list(own), "recipe": recipe,
            "seed": int(seed), "int_range": [int(int_range[0]), int(int_range[1])], "notes": list(notes),
            "warnings": list(warnings), "runtime_options": dict(runtime_options), "moves": moves, "packed": packed,
            "file": {"size": size, "mtime_ns": before[1], "digest": digest}}
    plan_cache.write_entry(key, serialised, meta)
    return True


def _inline(model: "onnx.ModelProto", name: str):
    from onnxprobe.graph.skeleton import weights_of

    return weights_of(model).get(name)


# --- serving a hit (no onnx) ------------------------------------------------------------------------------------

def _meta_fits(meta: dict) -> bool:
    lists = ("probes", "outputs", "own", "recipe", "notes", "warnings", "int_range")
    file = meta.get("file")
    return (all(isinstance(meta.get(k), list) for k in lists) and plan_cache.strings(meta["outputs"])
            and plan_cache.strings(meta["own"]) and plan_cache.strings(meta["notes"]) and plan_cache.strings(meta["warnings"])
            and isinstance(meta.get("seed"), int) and isinstance(meta.get("runtime_options"), dict)
            and isinstance(file, dict) and isinstance(file.get("size"), int) and isinstance(file.get("mtime_ns"), int)
            and isinstance(file.get("digest"), str)
            and isinstance(meta.get("packed"), int) and isinstance(meta.get("moves"), list)
            and all(isinstance(m, list) and len(m) == 3 and all(isinstance(v, int) and v >= 0 for v in m)
                    and m[0] + m[1] <= file["size"] and m[2] + m[1] <= meta["packed"] for m in meta["moves"])
            and len(meta["int_range"]) == 2 and all(isinstance(v, int) for v in meta["int_range"])
            and all(isinstance(r, list) and len(r) == 3 and isinstance(r[0], str) and isinstance(r[1], str)
                    and isinstance(r[2], list) and all(isinstance(d, int) and d >= 0 for d in r[2]) for r in meta["recipe"]))


def run(key: str, path: str, size: int, opt_level: str) -> dict | None:
    """Serve index entry ``key`` for the model file ``path`` (``size`` bytes when last seen): read it CHUNK at a
    time, hashing it and copying each weight's bytes, as they pass, to an ALIGN boundary of one buffer; a file of
    other bytes than the entry's (its digest) is a miss. Then build the session from the entry's skeleton and
    those weights, draw the inputs, run, read the statistics back. None on a miss, a damaged entry, or a run the
    normal path must make (onnxruntime's refusal, statistics that need the masked rerun)."""
    got = plan_cache.read_entry(key)
    if got is None:
        return None
    skel, meta = got
    try:
        if not _meta_fits(meta) or meta["file"]["size"] != size:
            return None
        host = meta["outputs"]
        probes = plan_cache.probes_from(meta["probes"], set(host))
        if probes is None:
            return None
        if any(p.ref.kind not in ("node", "input") for p in probes):
            return None
        # the process's malloc as the normal path sets it before its session (memory.return_freed_memory: its
        # $ONNXPROBE_MMAP_THRESHOLD read, a bad one refused there in its words), here before the weights' buffer
        unpark()
        return_freed_memory()
        # the weights' bytes, each at an ALIGN boundary, in one buffer onnxruntime reads them from in place (CPU)
        weights = aligned(meta["packed"])
        moves = meta["moves"]

        def copy(k: int, at: int, chunk: np.ndarray) -> bool:
            start = moves[k][2] + at
            weights[start:start + chunk.size] = chunk
            return True

        with _open_regular(path) as f:
            if _stream(f, size, moves, copy) != meta["file"]["digest"]:
                return None  # another file now: the normal path, whose entry replaces this one
        feeds = draw([(n, d, tuple(s)) for n, d, s in meta["recipe"]], meta["seed"], tuple(meta["int_range"]))
        if any(p.ref.kind == "input" and p.ref.name not in feeds for p in probes):
            return None
        from onnxprobe.runtime.ort_options import ort_module, session_options

        ort = ort_module()
        so = session_options(ort, opt_level=opt_level, arena=True)
        if moves:
            so.add_session_config_entry("session.use_external_initializer_file_buffers_directly", "1")
            so.add_external_initializers_from_files_in_memory([LOCATION], [weights], [weights.size])
        t0 = time.perf_counter()
        sess = _interruptibly(lambda: ort.InferenceSession(skel, sess_options=so, providers=["CPUExecutionProvider"]))
        session_seconds = time.perf_counter() - t0
        out, seconds = _run(ort, sess, feeds, host)
    except KeyboardInterrupt:
        raise
    except Exception:  # noqa: BLE001 - the normal path runs, and says what fails in its words
        return None
    st, shp, arrays = read_probes(probes, out)
    if arrays or second_look(probes, st, shp)[1]:  # NaN / Inf or misplanned rows: the masked rerun needs the graph
        return None
    for p in probes:
        if p.ref.kind == "input":
            st[p.ref.name] = host_statistics(feeds[p.ref.name])
            shp[p.ref.name] = tuple(np.shape(feeds[p.ref.name]))
    plan_cache.touch(key)
    return {"probes": probes, "stats": st, "shapes": shp, "outputs": {n: out[n] for n in meta["own"] if n in out},
            "feeds": feeds, "providers": list(sess.get_providers()), "session_seconds": session_seconds,
            "run_seconds": seconds, "notes": meta["notes"], "warnings": meta["warnings"],
            "runtime_options": {str(k): str(v) for k, v in meta["runtime_options"].items()}, "skeleton": skel}


def _open_regular(path: str):
    """``path`` opened for reading when it is a regular file (OSError otherwise): opened without blocking, so
    that a FIFO swapped in since the caller's stat never waits for a writer, then checked."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path}: not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def aligned(n: int) -> np.ndarray:
    """``n`` bytes (uint8) starting at an ALIGN boundary."""
    raw = np.empty(n + ALIGN, np.uint8)
    skip = -raw.ctypes.data % ALIGN
    return raw[skip:skip + n]


def _interruptibly(fn):
    """``fn()``, stopped by Ctrl-C in the command line's own process (as ``runners.ort.OrtRunner`` does)."""
    if not owns_the_process():
        return fn()
    from onnxprobe.runtime.interrupt import call_interruptibly

    return call_interruptibly(fn, grace=0)


def _run(ort, sess, feeds: dict, names: list[str]) -> tuple[dict, float]:
    """One run with IOBinding, as ``runtime.ort.run_bound`` makes a statistics run on the CPU (the same core,
    ``runtime.ort_options.run_with_binding``): inputs bound in place, every output to the host, the arena's blocks
    given back at the end."""
    from onnxprobe.runtime import ort_options

    binding = sess.io_binding()
    for name, value in feeds.items():
        binding.bind_cpu_input(name, np.require(value, requirements="C"))
    for name in names:
        binding.bind_output(name, "cpu")
    seconds = ort_options.run_with_binding(ort, sess, binding, shrink=True, interruptible=owns_the_process())
    return {n: v.numpy() for n, v in zip(names, binding.get_outputs())}, seconds


def probed_model(skel: bytes, base: "onnx.ModelProto") -> "onnx.ModelProto":
    """An entry's probed copy as a ModelProto, its weights put back from ``base`` (the model it was made from):
    what a served result's ``plan.model`` reads, made only when asked for."""
    import onnx

    from onnxprobe.graph.skeleton import weights_of

    model = onnx.load_model_from_string(skel)
    weights = weights_of(base)
    tensors = [t for t in model.graph.initializer] + [n.attribute[0].t for n in model.graph.node
                                                       if n.op_type == "Constant" and len(n.attribute) == 1 and n.output]
    names = {id(t): t.name for t in model.graph.initializer}
    names.update({id(n.attribute[0].t): n.output[0] for n in model.graph.node
                  if n.op_type == "Constant" and len(n.attribute) == 1 and n.output})
    for t in tensors:
        if any(e.key == "location" and e.value == LOCATION for e in t.external_data):
            keep = t.name
            t.CopyFrom(weights[names[id(t)]])
            t.name = keep
    return model
