"""onnxruntime sessions: device choice, optimisation level, IR compatibility, IOBinding runs.

- ``resolve_device("auto")`` is "cuda" only when a session really gets the CUDA provider: onnxruntime-gpu
  lists CUDAExecutionProvider as available even when the CUDA libraries are missing.
- ``create_session`` lowers a model's IR version when the installed onnxruntime is older than the onnx
  that wrote it (e.g. onnx 1.23 writes IR 14, onnxruntime-gpu 1.31 reads up to 13), and turns
  onnxruntime's errors into one-line ``ExecutionError`` messages.
- ``run_bound`` runs with IOBinding: inputs are copied to the device once, outputs stay there unless
  asked for on the host.
"""

from __future__ import annotations

import functools
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx

from onnxprobe.errors import (DeviceUnavailable, ExecutionError, ModelError, SessionError, UsageError, first_line, setting_error)
from onnxprobe.graph.builder import opset_version
from onnxprobe.graph.io import is_large, save_beside
from onnxprobe.graph.merge import origin
from onnxprobe.graph.tensor_data import to_array
from onnxprobe.memory import return_freed_memory, trim, unpark
from onnxprobe.runtime.arrays import narrow_buffer
from onnxprobe.runtime import ort_options
from onnxprobe.runtime.interrupt import call_interruptibly
from onnxprobe.runtime.prepack import prepacks
from onnxprobe.runtime.ort_options import (  # noqa: F401 (re-exported: where every caller has them from)
    DEVICES, OPT_LEVELS, check_opt_level, ort_module, providers_for, reads_folders, session_options,
)
from onnxprobe.text import as_word
from onnxprobe.types import element_count

@functools.lru_cache(maxsize=None)
def cuda_usable() -> bool:
    """True when a session really gets the CUDA provider (not just when it is listed)."""
    ort = ort_module()
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        return False
    g = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["x"], ["y"])], "cuda_probe",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])],
    )
    m = onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 13)])
    m.ir_version = 7
    try:
        s = ort.InferenceSession(m.SerializeToString(), providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    except Exception:  # noqa: BLE001
        return False
    return "CUDAExecutionProvider" in s.get_providers()


def resolve_device(device: str, what: tuple[str, str] = ("device", "--device")) -> str:
    """The device a session runs on ("cpu" or "cuda"); ``what`` (API parameter, flag) names the setting in
    messages."""
    if device not in DEVICES:
        # the value as typed, as a known one is said ("--device cuda: ..."): one form
        raise setting_error(UsageError, what, f"{as_word(device)}: choose one of {', '.join(DEVICES)}")
    if device == "auto":
        return "cuda" if cuda_usable() else "cpu"
    if device == "cuda" and not cuda_usable():
        raise setting_error(DeviceUnavailable, what, "cuda: onnxruntime has no usable CUDA provider here "
                            "(install onnxruntime-gpu with matching CUDA/cuDNN libraries, or run on the cpu device)")
    return device


IR_VERSION_RE = re.compile(r"Unsupported model IR version: (\d+), max supported IR version: (\d+)")


@dataclass
class Session:
    sess: object  # onnxruntime.InferenceSession
    device: str
    opt_level: str
    seconds: float
    notes: list[str]
    arena: bool = False  # onnxruntime's CPU memory arena on (create_session)

    @property
    def providers(self) -> list[str]:
        return list(self.sess.get_providers())

    @property
    def float_inputs(self) -> dict[str, np.dtype]:
        """Input name -> the numpy type of the float type it takes."""
        if "_floats" not in self.__dict__:
            self.__dict__["_floats"] = {i.name: np.dtype(onnx.helper.tensor_dtype_to_np_dtype(ORT_FLOATS[i.type]))
                                        for i in self.sess.get_inputs() if i.type in ORT_FLOATS}
        return self.__dict__["_floats"]


# onnxruntime's names of the float input types -> their ONNX element types
ORT_FLOATS = {"tensor(float16)": onnx.TensorProto.FLOAT16, "tensor(float)": onnx.TensorProto.FLOAT,
              "tensor(double)": onnx.TensorProto.DOUBLE, "tensor(bfloat16)": onnx.TensorProto.BFLOAT16}


def create_session(model: onnx.ModelProto, *, device: str = "cpu", opt_level: str = "off", threads: int | None = None,
                   profile_prefix: str | None = None, optimized_path: str | None = None,
                   weights: dict[str, onnx.TensorProto] | None = None, arena: bool = False, tf32: bool | None = None,
                   files: bool = True) -> Session:
    """Build an InferenceSession from an in-memory model. ``device`` must be resolved already.
    ``profile_prefix``: onnxruntime's profiler on, its JSON written there; ``optimized_path``: where
    onnxruntime writes the graph it runs (weights in a file beside it) (``runtime.profile``).
    ``weights``: the tensors of the model's stubs (``graph.skeleton``), by name: a graph built over other
    models' weights (``diff``'s merged graph) never holds a copy of them. ``arena``: onnxruntime's CPU
    memory arena, for a run whose outputs are only small (statistics, pair sums): see below. ``tf32``:
    the CUDA provider's TF32 (``providers_for``). ``files`` False: every weight handed over from memory, none read
    from its external data file (``_weights_in_place``): a session that lives over many runs."""
    ort = ort_module()
    unpark()  # a session done with goes before this one is built: their memory never stacks
    return_freed_memory()
    trim()  # what loading, inference and the rewrite freed: not under the run's peak
    notes: list[str] = []
    # big matrix weights: no packed copy of them for a session that runs once; one kept for many runs packs once
    pack = prepacks(model) or not files
    t0 = time.perf_counter()
    for _attempt in range(2):
        # options of their own for each try: _make registers the weights' in-memory files in them, which onnxruntime
        # refuses twice ("An entry for this name has already been added": a retry at a lowered IR version, QA)
        so = session_options(ort, opt_level=opt_level, arena=arena, threads=threads, profile_prefix=profile_prefix,
                             optimized_path=optimized_path, prepack=pack)
        try:
            sess = _make(ort, model, so, providers_for(device, tf32), weights or {}, files)
            break
        except ModelError:  # said in our own words already (a weight whose data does not fit its dims)
            raise
        except Exception as e:  # noqa: BLE001
            msg = str(e)
            m = IR_VERSION_RE.search(msg)
            if m and _attempt == 0:
                model = _with_ir(model, int(m.group(2)))
                notes.append(f"model IR version {m.group(1)} lowered to {m.group(2)}, the newest this onnxruntime reads")
                continue
            m = OPSET_RE.search(msg)
            if m and _attempt == 0:
                model = _with_opset(model, int(m.group(1)))
                notes.append(f"model converted down to opset {m.group(1)}, the newest this onnxruntime supports")
                continue
            declared, old = opset_version(model), _NO_KERNEL.search(msg) or _NO_OP.search(msg)
            if declared is not None and declared < ORT_OLDEST_OPSET and old:
                # onnxruntime guarantees opsets 7 and up: older versions of an op have no kernel (Relu-1, Add-6)
                raise SessionError(f"the model's opset {declared} is older than onnxruntime supports ({ORT_OLDEST_OPSET} "
                                   f"and up): it has no kernel for op {old.group(1)} of that opset; convert the model "
                                   f"to opset {ORT_OLDEST_OPSET} or newer (onnx.version_converter)") from e
            raise SessionError(explain_ort_error(msg, device)) from e
    return Session(sess, device, opt_level, time.perf_counter() - t0, notes, arena)


SKELETON_BYTES = 8 * 2**20  # above this much weight, sessions are built from a skeleton


def _make(ort, model: onnx.ModelProto, so, providers: list[str], weights: dict[str, onnx.TensorProto], files: bool = True):
    from onnxprobe.graph.skeleton import check_data, large_initializers, skeleton, stubs as stubs_of, unpoint_stubs, weight_bytes
    from onnxprobe.graph.weight_files import is_left

    stubs = list(stubs_of(model))
    # a weight left in its file (graph.weight_files) has no bytes in the proto: the skeleton's way, whatever the size
    if stubs or weight_bytes(model) >= SKELETON_BYTES or any(is_left(t) for t in model.graph.initializer):
        # the graph goes to onnxruntime without its big weights, which follow by name: no serialising
        # and re-parsing of the weights
        missing = [n for n in stubs if n not in weights]
        if missing:
            raise ExecutionError(f"no weights for {len(missing)} of the graph's stubbed initializers ({missing[0]!r}, ...)")
        large = large_initializers(model)
        big = [(t.name, t) for t in large] + [(n, weights[n]) for n in stubs]
        # a skeleton already (a plan's probed copy: stubs, no big weight of its own) is serialised as it is,
        # its stubs pointed at the weights for that moment only: a copy of its graph cost 4 MB resident more
        # during the build (PP-OCRv4 det's probed copy, 4,651 nodes)
        sk = skeleton(model) if large else model
        watch: dict = {}
        done = None  # what removes a private copy of the weights once the session is built (runtime.weight_copy)
        if hasattr(so, "add_external_initializers_from_files_in_memory"):
            keep, pointed, watch, done = _weights_in_place(so, sk, big, providers, files)
        else:  # an onnxruntime without in-memory external data: OrtValues, which it copies
            for _, t in big:
                check_data(t)
            keep, pointed = [to_array(t) for _, t in big], []
            so.add_external_initializers([n for n, _ in big], [ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(a)) for a in keep])
        try:
            try:
                data = sk.SerializeToString()
            finally:
                if sk is model:
                    unpoint_stubs(pointed)
            del sk
            try:
                sess = ort.InferenceSession(data, sess_options=so, providers=providers)
            except Exception:
                ort_options.check_files(watch)  # a weight file changed under the build: said so, not "damaged"
                raise
        finally:
            if done is not None:
                done()
        sess._onnxprobe_keepalive = keep  # onnxruntime may read these buffers for as long as the session lives
        ort_options.watch_weight_files(sess, watch)
        return sess
    if not is_large(model):
        return ort.InferenceSession(model.SerializeToString(), sess_options=so, providers=providers)
    with tempfile.TemporaryDirectory(prefix="onnxprobe-") as d:  # >2 GB: weights beside a temp file
        return ort.InferenceSession(save_beside(model, d), sess_options=so, providers=providers)


def _weights_in_place(so, sk: onnx.ModelProto, big: list[tuple[str, onnx.TensorProto]], providers: list[str],
                      files: bool = True) -> tuple[list, list, dict, "Callable[[], None] | None"]:
    """Hand ``big``'s bytes to onnxruntime and point ``sk``'s stubs at them. Returns the buffers, which must outlive the
    session, the stubs pointed (``unpoint_stubs``), the files pointed at with their status now
    (``ort_options.watch_weight_files``: a run during which one changed is refused) and what to call once the session
    is built (None: nothing).

    - Every weight still as its model's external data file holds it (``graph.weight_files``; ``files``): at that file,
      which onnxruntime maps and lets go of once it has packed the weight, as plain inference does (1 GiB of MatMul
      weights: 1.2 GB at the peak, in-memory buffers 2.1 GB). Only for a session of one run: onnxruntime reads the file
      it maps for as long as the session lives, and one kept over many (a dataset's batches, the debugger's commands)
      mixed old and new weights where the file was rewritten meanwhile, and ended the process with SIGBUS where it
      was truncated (QA).
    - Else, from 8 MiB of them on, from a private copy, which onnxruntime maps as an external data file and lets go of
      once packed (``runtime.weight_copy``: a weight left inside its model file, ``weight_files.in_model_file``, copied
      from there; any other written from its bytes), removed once the session is built: 1x a weight left in its file
      where from memory it was 2x, 2x one the proto holds where it was 3x.
    - Else (no copy made) every weight as an in-memory external-data file of its own (onnxruntime, told of in-memory files, looks
      every weight up among them: measured). On CPU it runs on those buffers in place
      (``use_external_initializer_file_buffers_directly``); ``add_external_initializers`` copies every weight once
      more (measured, onnxruntime 1.32, a 44 MB ResNet-18: +45 MB at session creation against +7 MB)."""
    from onnxprobe.graph.skeleton import point_stubs_at, raw_bytes
    from onnxprobe.graph.weight_files import common_folder, in_model_file, marked, unchanged

    on_disk: dict[str, tuple[str, int, int]] = {}
    if files and reads_folders():
        for name, t in big:  # every one, or none
            where = marked(t)
            if where is None or in_model_file(t) or not unchanged(t, where):
                on_disk = {}
                break
            on_disk[name] = where
    if on_disk:
        folder, locations = common_folder([f for f, _, _ in on_disk.values()])
        so.add_session_config_entry("session.model_external_initializers_file_folder_path", folder)
        places = {name: (loc, length, offset) for (name, (_, offset, length)), loc in zip(on_disk.items(), locations)}
        return [], point_stubs_at(sk, places), ort_options.file_states(f for f, _, _ in on_disk.values()), None
    if reads_folders():
        from onnxprobe.runtime.weight_copy import copy_out

        copied = copy_out(big)
        if copied is not None:
            made, places = copied
            so.add_session_config_entry("session.model_external_initializers_file_folder_path", made.folder)
            return [], point_stubs_at(sk, places), {}, made.remove
    buffers = [raw_bytes(t) for _, t in big]
    places = {name: (f"onnxprobe-weight-{i}", b.nbytes) for i, ((name, _), b) in enumerate(zip(big, buffers))}
    if providers == ["CPUExecutionProvider"]:  # other providers copy their weights to their device anyway
        so.add_session_config_entry("session.use_external_initializer_file_buffers_directly", "1")
    so.add_external_initializers_from_files_in_memory([f for f, _ in places.values()], buffers, [b.nbytes for b in buffers])
    return buffers, point_stubs_at(sk, places), {}, None  # last: nothing can fail between this and their unpointing


OPSET_RE = re.compile(r"Current official support for domain ai\.onnx is till opset (\d+)")


def _with_opset(model: onnx.ModelProto, opset: int) -> onnx.ModelProto:
    from onnx import version_converter

    declared = opset_version(model)
    known = onnx.defs.onnx_opset_version()
    if declared is not None and declared > known:  # onnx's converter has no rules for it (a C++ assertion)
        raise SessionError(f"the model's opset {declared} is newer than this onnxruntime (up to {opset}) and this onnx "
                           f"(up to {known}) know: no conversion down to it is possible; upgrade onnxruntime and onnx")
    try:
        return version_converter.convert_version(model, opset)
    except Exception as e:  # noqa: BLE001
        raise SessionError(f"this onnxruntime supports opsets up to {opset} and converting the model down failed: {first_line(e)[:200]}") from e


def _with_ir(model: onnx.ModelProto, ir: int) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    out.ir_version = ir
    return out


_NO_KERNEL = re.compile(r"Could not find an implementation for (\S+)\((\d+)\) node with name '([^']*)'")
_NO_OP = re.compile(r"No Op registered for (\S+) with domain_version of (-?\d+)")
ORT_OLDEST_OPSET = 7  # "ONNX Runtime only *guarantees* support for models stamped with opset version 7 or above"


# where onnxruntime's C++ said it, wherever in the message: '/onnxruntime_src/.../upsamplebase.h:314
# onnxruntime::UpsampleBase::UpsampleBase(const KernelInfoType&) [with KernelInfoType = ...] ', its status code
# '[ONNXRuntimeError] : 1 : FAIL : ', and the enforcing file, line and function 'upsamplebase.h:544 ScalesValidation '
_SOURCE = re.compile(r"/\S+:\d+ (?:[\w:~<>,*&\s]+\([^()]*(?:\([^()]*\)[^()]*)*\)\s*(?:const)?\s*(?:\[with [^\]]*\]\s*)?)?")
_STATUS = re.compile(r"\[ONNXRuntimeError\] : \d+ : \w+ : ")
_ENFORCED_AT = re.compile(r"(?<![\w/])[\w-]+\.(?:h|hpp|cc|cpp|cu):\d+ \w+ ")


def _without_source_locations(text: str) -> str:
    """onnxruntime's message without the C++ source locations, signatures and status codes it carries."""
    return _ENFORCED_AT.sub("", _STATUS.sub("", _SOURCE.sub("", text))).strip()


def explain_ort_error(msg: str, device: str = "cpu") -> str:
    """One line that names the problem and what to do, from an onnxruntime error message."""
    m = _NO_KERNEL.search(msg)
    if m:
        op, ver, node = m.groups()
        own = origin(node)  # a model's own node in diff's one run of both models (graph.merge)
        if own is not None:
            return (f"onnxruntime has no {device} kernel for op {op} (version {ver}) at {own} (in diff's one run of "
                    f"both models); try another device, or check the op's input types")
        if node.startswith(("onnxprobe.", "onnxprobe/")):  # a node of the loss or backward graph onnxprobe adds
            return (f"onnxruntime has no {device} kernel for op {op} (version {ver}) for the tensor types of node {node!r}, "
                    f"which onnxprobe adds (the loss, a gradient or a statistic) for this model's types: try another "
                    f"device, or a float32 copy of the model")
        return (f"onnxruntime has no {device} kernel for op {op} (version {ver}) at node {node!r}; "
                f"try another device, or check the op's input types")
    m = re.search(r"Deserialize tensor (.+?) failed", msg)
    if m:  # raw_data of another size than its dims and type call for (a damaged or hand-made file)
        return (f"tensor {m.group(1)!r} of the model holds another number of bytes than its shape and type need "
                f"(the file is damaged, or was written wrongly); onnxruntime: {msg.strip().splitlines()[0][:300]}")
    if "Unsupported model IR version" in msg:
        return f"onnxruntime cannot read this model's IR version ({IR_VERSION_RE.search(msg).group(0) if IR_VERSION_RE.search(msg) else msg.strip()})"
    m = _NO_OP.search(msg) or re.search(
        r"Fatal error: (\S+?)\((-?\d+)\) is not a registered function/op", msg)
    if m:
        node = re.search(r'In Node, \("([^"]*)"', msg)
        where = f" at node {node.group(1)!r}" if node and node.group(1) else ""
        return (f"unknown op {m.group(1)}{where}: onnxruntime has no such operator; "
                f"load the custom-op library that defines it, or remove the node")
    lines = [ln.strip() for ln in msg.strip().splitlines() if ln.strip()]
    first = lines[0] if lines else "unknown error"
    first = _without_source_locations(first)
    whole = " ".join([first] + lines[1:])  # the whole message, on one line: its second half often says which index
    node = re.search(r"Name:'(onnxprobe[./][^']*)'", whole)
    own = origin(node.group(1)) if node else None
    if own is not None:  # "onnxprobe.b/X": B's own node X in diff's one run of both models (graph.merge)
        return f"onnxruntime cannot run {own} (in diff's one run of both models): {whole[:600]}"
    if node:  # a node onnxprobe added (the loss, the backward graph, a statistic): not the model's own
        return (f"onnxruntime cannot run node {node.group(1)!r}, which onnxprobe adds for this model (its backward graph, "
                f"loss or statistics), with these tensor types: {whole[:600]}")
    return f"onnxruntime: {whole[:800]}"


def run_bound(session: Session, feeds: dict, host_outputs: list[str], device_outputs: list[str] = (),
              keep_on_device: bool = False, interruptible: bool = False, cast_floats: bool = False,
              shrink: bool = True) -> tuple[dict, float]:
    """Run with IOBinding. ``host_outputs`` are returned as numpy arrays; ``device_outputs`` are bound on
    the device and returned as numpy arrays, or, with ``keep_on_device``, as the OrtValues themselves
    (nothing crosses to the host). ``feeds`` may hold OrtValues already on the device. With
    ``interruptible``, a Ctrl-C stops the run between two nodes (runtime.interrupt) and raises
    KeyboardInterrupt. ``cast_floats``: a float feed of another float type than its input takes is cast
    to it (diff of a float16 model and its float32 original), else left to onnxruntime to refuse.
    ``shrink``: a session with the arena gives its blocks back at the end of the run; False for one of many runs
    in a row (grad --check's hundreds of loss evaluations: each paid for mapping every activation afresh, 2-3x
    the run itself). Returns (outputs, seconds)."""
    ort = ort_module()
    sess = session.sess
    dev = "cuda" if session.device == "cuda" else "cpu"
    if any(isinstance(v, np.ndarray) and v.dtype == object for v in feeds.values()):
        return _run_plain(session, feeds, host_outputs, device_outputs, keep_on_device, interruptible, dev)
    binding = sess.io_binding()
    kept = []
    for name, value in feeds.items():
        if isinstance(value, ort.OrtValue):
            binding.bind_ortvalue_input(name, value)
            continue
        value = np.require(value, requirements="C")  # not ascontiguousarray: it turns scalars into [1]
        takes = session.float_inputs.get(name) if cast_floats else None
        if takes is not None and (value.dtype.kind == "f" or value.dtype.name == "bfloat16") and value.dtype != takes:
            # the same values in the float type this model takes (diff of a float16 model and its float32
            # original: each side gets the feed in its own type, drawn where both hold it exactly)
            value = value.astype(takes)
        if value.dtype.name == "bfloat16":  # ml_dtypes' type, which onnxruntime does not know: its bits, typed
            binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy_with_onnx_type(value.view(np.uint16),
                                                                                             onnx.TensorProto.BFLOAT16))
            continue
        narrow = narrow_buffer(value)  # float8, int4...: ml_dtypes' types too, fed as their (packed) bits, typed
        if narrow is not None:
            kept.append(narrow[0])  # the OrtValue may read the buffer in place: alive until the run is over
            binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy_with_onnx_type(*narrow))
            continue
        if dev == "cpu":
            binding.bind_cpu_input(name, value)
        else:
            binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(value, dev, 0))
    for name in host_outputs:
        binding.bind_output(name, "cpu")
    for name in device_outputs:
        binding.bind_output(name, dev)
    try:  # (the arena's blocks go back at the end of the run: none left under a later session's peak)
        seconds = ort_options.run_with_binding(ort, sess, binding, shrink=session.arena and shrink, interruptible=interruptible)
    except (KeyboardInterrupt, ModelError):  # (a weight file changed during the run: said as it is)
        raise
    except Exception as e:  # noqa: BLE001
        raise ExecutionError(explain_ort_error(str(e), session.device)) from e
    names = list(host_outputs) + list(device_outputs)
    values = binding.get_outputs()
    on_device = set(device_outputs) if keep_on_device else set()
    out = {n: (v if n in on_device else host_array(v)) for n, v in zip(names, values)}
    return out, seconds


def _run_plain(session: Session, feeds: dict, host_outputs: list[str], device_outputs, keep_on_device: bool,
               interruptible: bool, dev: str) -> tuple[dict, float]:
    """``run_bound`` without IOBinding, for a feed of strings: onnxruntime binds no string tensor ("Only binding
    non-string Tensors is currently supported") nor makes an OrtValue of one. Same results; device outputs
    are put back on the device when they are to stay there."""
    ort = ort_module()
    plain = {n: (host_array(v) if isinstance(v, ort.OrtValue) else v) for n, v in feeds.items()}
    names = list(host_outputs) + list(device_outputs)
    options = ort.RunOptions()
    options.log_severity_level = 4
    t0 = time.perf_counter()
    try:
        if interruptible:
            values = call_interruptibly(session.sess.run, names, plain, options,
                                        on_interrupt=lambda: setattr(options, "terminate", True))
        else:
            values = session.sess.run(names, plain, options)
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001
        raise ExecutionError(explain_ort_error(str(e), session.device)) from e
    seconds = time.perf_counter() - t0
    ort_options.check_weight_files(session.sess)
    out = dict(zip(names, values))
    if keep_on_device:
        for n in device_outputs:
            if out[n].dtype != object:
                out[n] = ort.OrtValue.ortvalue_from_numpy(out[n], dev, 0)
    return out, seconds


def host_array(value) -> np.ndarray:
    """An OrtValue as a numpy array. onnxruntime's ``numpy()`` refuses bfloat16 (numpy has no such type):
    a bfloat16 tensor in host memory comes back widened to float32, exactly (its 16 bits are float32's
    upper half), read from the tensor's own buffer; so does a float8, 4-bit or 2-bit one (``arrays.NARROW_ORT_TYPES``),
    exactly too: the values its probes read through a Cast to float32."""
    from onnxprobe.runtime.arrays import NARROW_ORT_TYPES

    kind = value.data_type()
    if kind != "tensor(bfloat16)" and kind not in NARROW_ORT_TYPES:
        return value.numpy()
    if value.device_name().lower() != "cpu":
        raise ExecutionError(f"a {kind[7:-1]} tensor on {value.device_name()} cannot be read back to numpy")
    shape = tuple(value.shape())
    n = element_count(shape)
    if n == 0:
        return np.zeros(shape, np.float32)
    import ctypes

    from onnxprobe.runtime.arrays import widened_bfloat16, widened_narrow

    if kind != "tensor(bfloat16)":
        nbytes = -(-n * NARROW_ORT_TYPES[kind][1] // 8)
        raw = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(value.data_ptr()))
        return widened_narrow(raw, kind, n).reshape(shape)  # a copy, as below
    bits = np.ctypeslib.as_array((ctypes.c_uint16 * n).from_address(value.data_ptr()))
    return widened_bfloat16(bits).reshape(shape)  # a copy: the buffer goes with the OrtValue
