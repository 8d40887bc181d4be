"""onnxruntime's settings, without onnx: the module, the optimisation levels and devices by name, the providers of a
device, the SessionOptions of every session onnxprobe builds (``session_options``) and the one IOBinding run of a
session (``run_with_binding``). ``runtime.ort`` builds and runs its sessions with these, and so does a cached
``layers`` run (``runtime.direct``), which never imports onnx: both run a probed copy the same way.
"""

from __future__ import annotations

import functools
import re
import time

from onnxprobe.errors import UsageError, debug_enabled, owns_the_process, setting_error
from onnxprobe.text import as_word

OPT_LEVELS = ("off", "basic", "extended", "layout", "all")
DEVICES = ("auto", "cpu", "cuda")


def ort_module():
    """onnxruntime, imported on first use (``_first_import``)."""
    import sys

    if "onnxruntime" not in sys.modules:
        _first_import()
    import onnxruntime as ort

    _quiet_default_logger(ort)
    return ort


def _first_import() -> None:
    """onnxruntime imported with a Ctrl-C held back until it is done (``runtime.interrupt.held_back``: its extension
    turns a KeyboardInterrupt raised while it initialises into ImportError('import numpy failed'), which
    ``api.diff_lean``'s early start took for a request it cannot prepare, the Ctrl-C lost)."""
    from onnxprobe.runtime.interrupt import held_back

    with held_back():
        import onnxruntime  # noqa: F401


@functools.lru_cache(maxsize=None)
def _quiet_default_logger(ort) -> None:
    """Kernels log through onnxruntime's default logger, not their session's (RoiAlign's max mode warns as
    it is built): that line came beside onnxprobe's own output and one-line errors. Sessions log nothing
    below fatal (``log_severity_level = 4``); neither does the default logger in the command line's own
    process, unless ONNXPROBE_DEBUG=1. Through the API the logger is the user's process's: left alone (a
    notebook's own sessions would lose every warning)."""
    if owns_the_process() and not debug_enabled():
        ort.set_default_logger_severity(4)


def check_opt_level(name: str, what: tuple[str, str] = ("opt_level", "--opt-level")) -> str:
    """``name`` when it is one of OPT_LEVELS, else a UsageError that names ``what`` (API parameter, flag: each
    option that takes a level, A's own or a reference's, is named as given)."""
    if name not in OPT_LEVELS:
        raise setting_error(UsageError, what, f"{as_word(name)}: choose one of {', '.join(OPT_LEVELS)}")
    return name


def _level(name: str):
    check_opt_level(name)
    ort = ort_module()
    table = {
        "off": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "layout": getattr(ort.GraphOptimizationLevel, "ORT_ENABLE_LAYOUT", ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED),
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }
    return table[name]


def providers_for(device: str, tf32: bool | None = None) -> list:
    """The providers of a session on ``device``; ``tf32`` (cuda): the CUDA provider's use_tf32, float32
    matrix products and convolutions in TF32 (None: the provider's default, which is on)."""
    if device != "cuda":
        return ["CPUExecutionProvider"]
    cuda = "CUDAExecutionProvider" if tf32 is None else ("CUDAExecutionProvider", {"use_tf32": "1" if tf32 else "0"})
    return [cuda, "CPUExecutionProvider"]


def session_options(ort, *, opt_level: str = "off", arena: bool = False, threads: int | None = None,
                    profile_prefix: str | None = None, optimized_path: str | None = None, prepack: bool = True):
    """The SessionOptions of a session (``runtime.ort.create_session``'s parameters, which it documents); ``prepack``
    False: no packed copy of the matrix weights made as the session builds (``runtime.prepack``)."""
    so = ort.SessionOptions()
    if not prepack:
        so.add_session_config_entry("session.disable_prepacking", "1")
    if profile_prefix:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    if optimized_path:
        so.optimized_model_filepath = optimized_path
        so.add_session_config_entry("session.optimized_model_external_initializers_file_name", "weights.bin")
        so.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    so.graph_optimization_level = _level(opt_level)
    so.log_severity_level = 4
    # without the arena, freed activations go back to the system at once: several sessions in a row
    # (chunked dumps, diff's separate runs) then never stack their peaks, and raw outputs handed to numpy
    # do not pin arena chunks (a --save within --max-memory needs that). A run that returns only small
    # outputs (statistics rows, pair sums: layers, the one-run diff) takes the arena: every activation
    # then comes from memory already mapped instead of fresh pages (measured, PP-OCRv4 det 800x608:
    # layers --all 3.3 -> 2.5 s for 255 -> 272 MB, diff --all 7.2 -> 5.5 s for 430 -> 461 MB)
    so.enable_cpu_mem_arena = arena
    # run nodes in the order the graph lists them: probes sit right behind the tensors they read
    # (graph.expose interleaves them), so each tensor is summarised and freed before the model moves on
    if hasattr(ort, "ExecutionOrder"):
        so.execution_order = ort.ExecutionOrder.PRIORITY_BASED
    if threads:
        so.intra_op_num_threads = threads
    return so


def run_options(ort, *, shrink: bool):
    """The RunOptions of a run: nothing logged below fatal; ``shrink``: the CPU arena's blocks given back at the
    end of the run (none left under a later session's peak)."""
    options = ort.RunOptions()
    options.log_severity_level = 4
    if shrink:
        options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    return options


def run_with_binding(ort, sess, binding, *, shrink: bool, interruptible: bool) -> float:
    """Run ``sess`` with IOBinding ``binding`` (its inputs and outputs bound: ``runtime.ort.run_bound``,
    ``runtime.direct``), with ``run_options``; ``interruptible``: a Ctrl-C stops the run between two nodes
    (``runtime.interrupt``) and raises KeyboardInterrupt. The run's seconds; onnxruntime's errors as it raises
    them (the caller words them); a ModelError where a file the session reads its weights from changed during it
    (``check_weight_files``)."""
    options = run_options(ort, shrink=shrink)
    t0 = time.perf_counter()
    if interruptible:
        from onnxprobe.runtime.interrupt import call_interruptibly

        call_interruptibly(sess.run_with_iobinding, binding, options, on_interrupt=lambda: setattr(options, "terminate", True))
    else:
        sess.run_with_iobinding(binding, options)
    seconds = time.perf_counter() - t0
    check_weight_files(sess)
    return seconds


WEIGHT_FILES = "_onnxprobe_weight_files"  # a session's attribute: {file: its file_state when the session was built}


def file_states(paths) -> dict:
    """{path: ``fileio.file_state``} of each of ``paths`` there is now (one gone: onnxruntime says so when it reads it,
    in the words its caller gives that refusal), for ``watch_weight_files`` before the session is built."""
    import os

    from onnxprobe.fileio import file_state

    out = {}
    for path in paths:
        try:
            out[path] = file_state(os.stat(path))
        except OSError:
            pass
    return out


def watch_weight_files(sess, files) -> None:
    """Record on ``sess`` the external data files it reads its weights from (``files``: {path: ``fileio.file_state``
    taken before the session was built}), which onnxruntime maps for the session's life."""
    if files:
        setattr(sess, WEIGHT_FILES, dict(files))


def check_weight_files(sess) -> None:
    """A ModelError naming the first file of ``watch_weight_files`` that is no longer as it was when the session was
    built: onnxruntime reads a mapped weight's pages as they are now (a file rewritten during a run mixes old and new
    weights, as plain inference does); the results of such a run are not reported."""
    check_files(getattr(sess, WEIGHT_FILES, {}))


def check_files(states: dict) -> None:
    """``check_weight_files`` of {file: ``fileio.file_state``}: also where building the session failed (a file truncated
    or swapped while onnxruntime read it: its words would call the model damaged)."""
    import os

    from onnxprobe.errors import ModelError
    from onnxprobe.fileio import file_state

    for path, state in states.items():
        try:
            now = file_state(os.stat(path))
        except OSError:
            now = None
        if now != state:
            raise ModelError(f"{path}: the file changed while onnxprobe ran (onnxruntime reads the weights in it for "
                             "the whole run, which then mixed the old and the new); run it again")


# the first onnxruntime that reads the external data of a model handed over as bytes from a folder it is told
# (session.model_external_initializers_file_folder_path, onnxruntime pull request 23557): older ones ignore the
# setting and would look in the working directory
READS_FOLDERS = (1, 21)


def reads_folders() -> bool:
    """Whether this onnxruntime reads a model's external data from the folder it is told (READS_FOLDERS and later):
    where a session can be pointed at external data files, a private copy of the weights included (here, onnx-free, for
    the served mode too: ``runtime.direct``)."""
    return READS_FOLDERS <= tuple(int(p) for p in re.findall(r"\d+", ort_module().__version__)[:2])
