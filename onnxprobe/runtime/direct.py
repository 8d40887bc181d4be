"""The plan cache's direct mode (as ccache's): the second ``layers`` of the same model file with the same request
runs the cached probed copy without importing onnx and without parsing the model.

An index entry (``runtime.plan_cache``'s folder, size bound, digest check and damaged-entry-is-a-miss rules) is
keyed by the request as it is stated before any model is read (``api.lean``: the model's path as given and
resolved, selection, input flags, device, opt level; onnxprobe's version and code, ``plan_cache.key_of``), never
by the file's bytes: a lookup that finds nothing costs a stat of the model and the opening of the index's file.
It records the model file it was made from (size, modification time, digest) and holds what the run needs and
could not compute without onnx:

- the probed copy as a skeleton whose stubs point into one in-memory external-data file (``LOCATION``: from 8 MiB on
  a private file of that name, ``runtime.weight_copy``; or, for a
  model whose weights lie in external data files, at those files: ``runtime.direct_files``): the
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

import contextlib
import os
import time
from contextvars import ContextVar
from typing import TYPE_CHECKING

import numpy as np

from onnxprobe.errors import cli_words, owns_the_process, said
from onnxprobe.memory import done_with, return_freed_memory, unpark
from onnxprobe.runtime import model_file, plan_cache
from onnxprobe.runtime.model_file import FileBytes, file_state, open_regular, stat_record, stream, unchanged, weight_extents
from onnxprobe.runtime.random_inputs import draw
from onnxprobe.runtime.runners.readback import host_statistics, read_probes, second_look
from onnxprobe.types import Probe

if TYPE_CHECKING:
    import onnx

    from onnxprobe.runtime.weight_copy import PrivateCopy

LOCATION = "onnxprobe-weights"  # the one in-memory external-data file an entry's stubs point into: the file's weights
MAX_FILE = 2**31 - 1  # protobuf's limit: a bigger model keeps its weights in external data files (runtime.direct_files)
# each weight's bytes start at a multiple of this in the buffer onnxruntime reads them from: its kernels sum
# otherwise (ReduceSum of 5000 float32 gives -37.389652 at a 16-byte boundary, -37.38966 8 bytes past one),
# and the normal path hands them over from Python bytes objects, which start at 16-byte boundaries
ALIGN = 64


def request_key(request: dict) -> str:
    """The index entry's key: the request, the model's path in it, and the versions of onnxruntime and numpy the
    first run's notes and draws came from (another onnxruntime may read the model otherwise, an IR version it
    lowered; another numpy draw other inputs); ``plan_cache.key_of`` adds onnxprobe's version, the entries' FORMAT
    and the code's fingerprint. The file's bytes are no part of it: the entry records the file (its ``"file"``:
    size, status, digest), checked when it serves."""
    from onnxprobe.runtime.ort_options import ort_module

    return plan_cache.key_of({"direct": 2, "request": {**request, "onnxruntime": ort_module().__version__,
                                                       "numpy": np.__version__}})


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
    from onnxprobe.graph.skeleton import point_stubs_at, skeleton, stubs, weights_of
    from onnxprobe.runtime.prepack import prepacks

    recipe = recipe_of(feed, seed, int_range)
    if recipe is None:  # (a file past MAX_FILE: file_weights refuses it)
        return False
    sk = skeleton(plan_model, constants=True)
    held = stubs(sk)
    # a stub ``weights`` does not hold: the probed copy held it inline (skeleton made the stub from its own tensor)
    inline = weights_of(plan_model) if any(n not in (weights or {}) for n in held) else {}
    files: dict = {}
    used = {n: (weights or {}).get(n, inline.get(n)) for n in held}
    got = file_weights(path, before, {n: (n, t) for n, t in used.items()}, files, 0)
    outside: dict = {"data_files": [], "folder": ""}
    if got is None:  # the weights in external data files: onnxruntime reads them there (runtime.direct_files)
        from onnxprobe.runtime.direct_files import outside_weights, relative

        found = outside_weights(path, before, used, {t.name: t for t in sk.graph.initializer if t.name not in used})
        if found is None:
            return False
        (files, folder), got = relative(found[0]), (found[1], 0)
        outside = {"data_files": found[2], "folder": folder}
    record, packed = got
    point_stubs_at(sk, files)
    try:
        serialised = sk.SerializeToString()
    except ValueError:
        return False
    meta = {"probes": [p.record() for p in probes], "outputs": list(outputs), "own": list(own), "recipe": recipe,
            "seed": int(seed), "int_range": [int(int_range[0]), int(int_range[1])], "notes": [str(n) for n in notes],
            "notes_cli": [cli_words(n) for n in notes],  # a note said in each reader's words keeps both (errors.said)
            "warnings": list(warnings), "runtime_options": dict(runtime_options), "moves": record.pop("moves"),
            "packed": packed, "file": record, "prepack": prepacks(plan_model), **outside}
    plan_cache.write_entry(key, serialised, meta)
    return True


def recipe_of(feed: dict, seed: int, int_range: tuple[int, int]) -> list | None:
    """The inputs' recipe ([name, numpy dtype, shape] each) when ``draw`` makes ``feed`` again from ``seed`` and
    ``int_range``; None where it does not (an input given, not drawn)."""
    recipe = [[n, v.dtype.str, list(v.shape)] for n, v in feed.items() if isinstance(v, (np.ndarray, np.generic))]
    if len(recipe) != len(feed) or any(np.dtype(d).kind not in "biufc" or np.dtype(d).str != d for _, d, _ in recipe):
        return None
    again = draw([(n, d, tuple(s)) for n, d, s in recipe], seed, int_range)
    if any(not np.array_equal(again[n], v) or np.asarray(again[n]).dtype != np.asarray(v).dtype for n, v in feed.items()):
        return None
    return recipe


def file_weights(path: str, before: tuple, held: dict, files: dict, packed: int) -> tuple[dict, int] | None:
    """Where the weights of the model file ``path`` (``before``: its ``file_state`` when the run began) lie, for
    the stubs ``held`` (stub name -> (the tensor's name in the file, the tensor the run used)): each stub gets
    ``files[stub] = (LOCATION, length, offset)``, at an ALIGN boundary from ``packed`` on. Returns the file's record
    (size, digest, stat, recorded_ns, and ``moves``: [offset in the file, length, offset in the buffer] each) and
    the buffer's length so far; None where it cannot be served so: the file changed since ``before`` (or while it
    is read), a weight not stored in the file as its own bytes (``_DATA_FIELDS``) or not the bytes the run used. The
    file is read a CHUNK at a time, hashed, each weight's bytes compared with its tensor as they pass."""
    from onnxprobe.graph.skeleton import raw_bytes
    from onnxprobe.graph.weight_files import in_model_file, left_state, marked

    size, real = before[0], os.path.realpath(path)
    if size > MAX_FILE:
        return None
    with open_regular(path) as f:
        if file_state(os.fstat(f.fileno())) != tuple(before):
            return None
        extents = weight_extents(FileBytes(f, size, model_file.CHUNK))  # walked whatever is held: a weight in another file is refused
        if extents is None:
            return None
        moves, expected = [], []
        for stub_name, (name, w) in held.items():
            if name not in extents:
                return None
            offset, length = extents[name]
            try:
                if w is not None and in_model_file(w) and marked(w) == (real, offset, length) and left_state(w) == tuple(before):
                    raw = None  # the lazy read left it in this very extent of this file, unchanged since: not read again
                elif w is None or (raw := raw_bytes(w)).size != length:
                    return None
            except Exception:  # noqa: BLE001 - data that does not fit its dims: the normal path says so
                return None
            moves.append([offset, length, packed])
            expected.append(raw)
            files[stub_name] = (LOCATION, length, packed)
            packed += -(-length // ALIGN) * ALIGN
        digest = stream(f, size, moves, lambda k, at, chunk: expected[k] is None or np.array_equal(expected[k][at:at + chunk.size], chunk))
        st = os.fstat(f.fileno())
        if digest is None or file_state(st) != tuple(before) or file_state(os.stat(path)) != tuple(before):
            return None
    return {"size": size, "digest": digest, "stat": stat_record(st), "recorded_ns": time.time_ns(), "moves": moves}, packed


# --- serving a hit (no onnx) ------------------------------------------------------------------------------------

def _meta_fits(meta: dict) -> bool:
    from onnxprobe.runtime.direct_files import outside_fits

    lists = ("probes", "outputs", "own", "recipe", "notes", "notes_cli", "warnings", "int_range")
    file = meta.get("file")
    if not outside_fits(meta):
        return False
    return (all(isinstance(meta.get(k), list) for k in lists) and plan_cache.strings(meta["outputs"])
            and plan_cache.strings(meta["own"]) and plan_cache.strings(meta["notes"]) and plan_cache.strings(meta["warnings"])
            and plan_cache.strings(meta["notes_cli"]) and len(meta["notes_cli"]) == len(meta["notes"])
            and isinstance(meta.get("seed"), int) and isinstance(meta.get("runtime_options"), dict)
            and isinstance(meta.get("prepack"), bool)
            and isinstance(file, dict) and isinstance(file.get("size"), int) and isinstance(file.get("digest"), str)
            and isinstance(meta.get("packed"), int) and moves_fit(meta.get("moves"), file["size"], meta["packed"])
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
        weights = load_weights([(path, size, meta["file"], meta["moves"])], meta["packed"], meta["data_files"])
        if weights is None:
            return None  # another file now: the normal path, whose entry replaces this one
        pending, feeds = start_drawn(skel, weights, opt_level, meta)
        try:
            if any(p.ref.kind == "input" and p.ref.name not in feeds for p in probes):
                return None
            out, providers, session_seconds, seconds = pending.run(feeds, host)
        finally:
            pending.close()  # let go, where run did not take it
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
            "feeds": feeds, "providers": providers, "session_seconds": session_seconds,
            "run_seconds": seconds, "notes": [said(lambda say, n=n, c=c: c if say.cli else n) for n, c in zip(meta["notes"], meta["notes_cli"])],
            "warnings": meta["warnings"],
            "runtime_options": {str(k): str(v) for k, v in meta["runtime_options"].items()}, "skeleton": skel,
            "file": meta["file"]}


def load_weights(files: list[tuple[str, int, dict, list]], packed: int, data_files: list = ()) -> "np.ndarray | PrivateCopy | None":
    """The weights' bytes of model files, each at an ALIGN boundary, in one buffer of ``packed`` bytes that
    onnxruntime reads them from in place (CPU): ``files``, (path, size when last seen, its record, its moves) each
    (``copy_weights``); None where one is not the file its record describes, nor one of the external ``data_files``
    (records, ``runtime.direct_files``: onnxruntime reads those itself). Where every file's status is the one its record
    holds and no weight lies in an external data file: those bytes laid out the same in a private file onnxruntime maps
    (``runtime.weight_copy``: the buffer and onnxruntime's packed copy were both held, 2x a MatMul's weights). The process's malloc is set first, as
    the normal path sets it before its session (memory.return_freed_memory: its $ONNXPROBE_MMAP_THRESHOLD read, a
    bad one refused there in its words), here before the weights' buffer."""
    unpark()
    return_freed_memory()
    from onnxprobe.runtime.ort_options import reads_folders

    if not data_files and reads_folders():  # a private copy onnxruntime maps (runtime.weight_copy): not held twice
        from onnxprobe.runtime.weight_copy import copy_moves

        made = copy_moves([(path, lambda st, record=record: unchanged(st, record), moves) for path, _, record, moves in files],
                          packed, LOCATION)
        if made is not None:
            return made
    weights = aligned(packed)
    for path, size, record, moves in files:
        if not copy_weights(path, size, record, moves, weights):
            return None
    if data_files:
        from onnxprobe.runtime.direct_files import files_unchanged

        if not files_unchanged(data_files):
            return None
    return weights


def copy_weights(path: str, size: int, record: dict, moves: list, weights: np.ndarray) -> bool:
    """Copy the weights' bytes of the model file ``path`` (``size`` bytes when last seen) to ``weights`` as
    ``moves`` says ([offset in the file, length, offset in ``weights``] each), reading it CHUNK at a time and
    hashing it unless its status says it is the file ``record`` (``file_weights``) describes (``unchanged``).
    False where it is not that file (its digest, or its length)."""
    def copy(k: int, at: int, chunk: np.ndarray) -> bool:
        start = moves[k][2] + at
        weights[start:start + chunk.size] = chunk
        return True

    with open_regular(path) as f:
        trusted = unchanged(os.fstat(f.fileno()), record)
        got = stream(f, size, moves, copy, hashed=not trusted)
        return got is not None and (trusted or got == record["digest"])


def moves_fit(moves, size: int, packed: int) -> bool:
    """Whether an entry's ``moves`` (``file_weights``) lie within a file of ``size`` bytes and a buffer of ``packed``."""
    return isinstance(moves, list) and all(
        isinstance(m, list) and len(m) == 3 and all(isinstance(v, int) and v >= 0 for v in m)
        and m[0] + m[1] <= size and m[2] + m[1] <= packed for m in moves)


def aligned(n: int) -> np.ndarray:
    """``n`` bytes (uint8) starting at an ALIGN boundary."""
    raw = np.empty(n + ALIGN, np.uint8)
    skip = -raw.ctypes.data % ALIGN
    return raw[skip:skip + n]


def run_skeleton(skel: bytes, weights: np.ndarray, opt_level: str, feeds: dict, outputs: list[str]) -> tuple[dict, list, float, float]:
    """One run of the serialised model ``skel`` (its stubs pointed into ``weights``, the one in-memory external-data
    file ``LOCATION``) on onnxruntime's CPU provider at ``opt_level``, fed ``feeds`` (those its inputs take) and
    fetching ``outputs``: (the outputs by name, the session's providers, its creation's seconds, the run's)."""
    return start_skeleton(skel, weights, opt_level).run(feeds, outputs)


def start_skeleton(skel: bytes, weights: np.ndarray, opt_level: str, folder: str = "", watch=(),
                   prepack: bool = True) -> "Pending":
    """The session of ``skel`` over ``weights`` (``run_skeleton``), built from now on in a worker thread; ``watch``:
    the external data files it reads weights from (``ort_options.watch_weight_files``); ``prepack``: as the session
    of the normal path (``runtime.prepack``, which an entry records)."""
    return Pending(skel, weights, opt_level, folder, watch, prepack)


def start_drawn(skel: bytes, weights: np.ndarray, opt_level: str, meta: dict) -> tuple["Pending", dict]:
    """An entry's session started (``start_skeleton``) and, while it builds, what the caller left to do meanwhile
    (``while_building``) and the inputs drawn from the entry's recipe (its ``recipe``, ``seed`` and ``int_range``:
    numpy.random's import and the draw, 0.01 s on PP-OCRv4 det): (the session, the feeds). Where either fails, the
    session is let go and the failure raised (a Ctrl-C as one)."""
    pending = start_skeleton(skel, weights, opt_level, meta.get("folder", ""), [r["path"] for r in meta.get("data_files", [])],
                             meta["prepack"])
    try:
        meanwhile()
        return pending, draw([(n, d, tuple(s)) for n, d, s in meta["recipe"]], meta["seed"], tuple(meta["int_range"]))
    except BaseException:
        pending.close()
        raise


_MEANWHILE: ContextVar[tuple] = ContextVar("onnxprobe_meanwhile", default=())


@contextlib.contextmanager
def while_building(*work):
    """Within: the first session a direct mode starts (``start_drawn``: ``run`` here, ``api.diff_ticket.prepare``)
    runs ``work`` on the caller's thread while onnxruntime builds it without the GIL (``meanwhile``): what the caller
    needs after the run (the command line's report and Rich, 30-50 ms of imports) comes in the build's shadow, not
    after the run."""
    token = _MEANWHILE.set(tuple(work))
    try:
        yield
    finally:
        _MEANWHILE.reset(token)


def meanwhile() -> None:
    """The work ``while_building`` left, run once, on this thread, right after a session started. A callable that
    fails is left for its caller to meet where it needs what the callable would have done (an import, again)."""
    work = _MEANWHILE.get()
    _MEANWHILE.set(())
    for w in work:
        try:
            w()
        except Exception:  # noqa: BLE001 - said where the caller does it again
            pass


class Pending:
    """A session being built in a worker thread: onnxruntime builds it without holding the GIL, so what the caller
    does meanwhile overlaps it (``api.diff_lean``: importing onnx and the code that reads the run, 0.15-0.2 s of a
    0.3-0.4 s build on PP-OCRv4 det's merged graph, measured). ``run`` waits for it and runs it once; ``close``
    waits for it and lets it go (a session left building would outlive the interpreter's shutdown). The thread is
    not a daemon: a process that ends meanwhile waits for it rather than tearing onnxruntime down under it."""

    def __init__(self, skel: bytes, weights: "np.ndarray | PrivateCopy", opt_level: str, folder: str = "", watch=(),
                 prepack: bool = True):
        import threading

        from onnxprobe.runtime.ort_options import file_states, ort_module, session_options, watch_weight_files

        self._ort = ort = ort_module()
        states = file_states(watch)  # before onnxruntime maps them (a run during which one changes is refused)
        so = session_options(ort, opt_level=opt_level, arena=True, prepack=prepack)
        copy = None if isinstance(weights, np.ndarray) else weights  # a private copy (load_weights): read from its folder
        if copy is not None:
            folder = copy.folder
        if folder:  # the weights in their model's external data files, at locations relative to this folder
            so.add_session_config_entry("session.model_external_initializers_file_folder_path", folder)
        if copy is None and weights.size:
            so.add_session_config_entry("session.use_external_initializer_file_buffers_directly", "1")
            so.add_external_initializers_from_files_in_memory([LOCATION], [weights], [weights.size])
        self._weights = weights  # onnxruntime reads them in place: alive as long as the session
        self._box: dict = {}
        self._done = threading.Event()

        def build() -> None:
            t0 = time.perf_counter()
            try:
                self._box["session"] = ort.InferenceSession(skel, sess_options=so, providers=["CPUExecutionProvider"])
                watch_weight_files(self._box["session"], states)
            except BaseException as e:  # noqa: BLE001 - raised to whoever waits for it
                self._box["error"] = e
            finally:
                self._box["seconds"] = time.perf_counter() - t0
                if copy is not None:  # onnxruntime maps what it still reads: the folder goes
                    copy.remove()
                self._done.set()

        self._thread = threading.Thread(target=build, name="onnxprobe-session")
        self._thread.start()

    def _wait(self) -> None:
        """Until the session is built: in short slices, so that a Ctrl-C reaches the command line's main thread
        at once (the build then finishes alone, ``runtime.interrupt``'s rule)."""
        from onnxprobe.runtime.interrupt import POLL_S

        while not self._done.wait(POLL_S):
            pass

    def run(self, feeds: dict, outputs: list[str]) -> tuple[dict, list, float, float]:
        """``run_skeleton``'s result: the session waited for, run once with ``feeds``, and let go."""
        self._wait()
        sess, error = self._box.pop("session", None), self._box.pop("error", None)
        if error is not None:
            raise error
        try:
            fed = {i.name: feeds[i.name] for i in sess.get_inputs() if i.name in feeds}
            out, seconds = _run(self._ort, sess, fed, outputs)
            return out, list(sess.get_providers()), self._box["seconds"], seconds
        finally:
            # freeing a session takes time too (0.05-0.07 s for PP-OCRv4 det's merged graph, a sixth of its build): in
            # the command line's process, parked and left to the exit (memory.done_with), with the weights it reads
            done_with((sess, self._weights))
            del sess

    def close(self) -> None:
        """The session waited for and let go (parked, as ``run`` does), unless ``run`` took it. A Ctrl-C meanwhile
        (another one: the first brought the caller here) is raised once the build is done, never before: a thread
        left building would outlive the command into the interpreter's shutdown, which onnxruntime does not
        survive (a second Ctrl-C there: 'terminate called without an active exception', exit code 134)."""
        interrupted = None
        while True:
            try:
                self._wait()
                break
            except KeyboardInterrupt as e:
                interrupted = e
        sess = self._box.pop("session", None)
        if sess is not None:
            done_with((sess, self._weights))
        self._box.clear()
        if interrupted is not None:
            raise interrupted


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

    from onnxprobe.graph.skeleton import fill_stubs, weights_of

    model = onnx.load_model_from_string(skel)
    # every stub: pointed into the model file's weights (LOCATION), or at their external data files (direct_files)
    if not fill_stubs(model, weights_of(base), None):
        raise KeyError("the model no longer holds a weight its cached probed copy reads")
    return model
