"""``api.diff``: a repeated request's run started before onnx and the comparison code are imported, then the
normal path (``api.diff``'s own module), which serves from it or runs as ever.

``api.diff_direct`` serves a repeated diff of two model files from the plan cache: the merged graph the first run
left there, over both files' own weights. Its session takes 0.3-0.4 s to build on PP-OCRv4 det, and onnxruntime
builds it without holding the GIL, so importing what checks the request and reads and judges the run (onnx, the
matching, the comparison, the report: 0.15-0.2 s) need not wait for it: the request's key is made and its entry
prepared here (``api.diff_ticket``), with numpy and onnxruntime alone, before the normal path is imported. Nothing
is decided here: the normal path checks every argument, then serves from the prepared entry
(``api.diff_direct.served``) or runs as ever and writes the entry under the same ticket; an entry it does not take
is let go.
"""

from __future__ import annotations

import os

from onnxprobe.api import hints  # annotations only (hints.DiffResult: typing.get_type_hints imports it when asked)
from onnxprobe.api.diff_ticket import prepare, ticket
from onnxprobe.runtime.interrupt import held_back
from onnxprobe.stats.metrics import Tolerance
from onnxprobe.types import InputSpec, Model, Progress, RunConfig, Selection, TorchLike

__all__ = ["diff"]


def diff(
    a: Model | str | os.PathLike,
    b: Model | str | os.PathLike | None = None,
    *,
    vs_device: str | None = None,
    vs_opt_level: str | None = None,
    vs_reference: bool = False,
    vs_npz: str | os.PathLike | dict | None = None,
    vs_torch: TorchLike | None = None,
    runtime: str = "ort",
    vs_runtime: str | None = None,
    runtime_options: dict[str, str] | None = None,
    selection: Selection | None = None,
    config: RunConfig | None = None,
    inputs: InputSpec | None = None,
    tolerance: Tolerance | None = None,
    per_tensor: dict | None = None,
    user_map: dict[str, str] | None = None,
    introduced: bool = True,
    max_memory: int | None = None,
    progress: Progress | None = None,
    fp32_sensitivity: int = 0,
    fuse: bool = True,
    profile: bool = False,
    extras: bool = True,
) -> hints.DiffResult:
    """Compare model A against a reference B: another model, the same model on another device or
    optimisation level, onnx.reference, or saved activations (an ``.npz`` path or a dict of arrays keyed
    by tensor name), or the PyTorch module it was exported from (``vs_torch``: see ``api.diff_torch``).
    ``a`` and ``b`` are loaded Models or paths. ``result.verdict()`` says whether it passed, and why not.
    ``fuse`` (two models on onnxruntime with the same settings): both in one graph and one run, the
    metrics and introduced error computed in the graph (float32 partial sums added in float64); False:
    separate runs, the tensors measured on the host in float64. ``profile``: time the one run with
    onnxruntime's profiler (``result.profile``, each result's ``kernel_ms``). ``extras=False``: the one run
    (``fuse``) computes no max relative error, mean |a-b| nor the worst element's index (three passes over
    every tensor fewer, and a ReduceMax for the ArgMax), and each result's ``metrics.max_rel``, ``mean_abs`` and
    ``worst`` are None, as are its introduced error's ``mean_abs`` and ``worst``; kept where a criterion judges by one, and
    measured as ever by a diff in separate runs (another runtime or device, ``vs_torch``, ``fuse=False``, and a
    one run that cannot be or fails, whose pairs the separate runs then measure).

    ``runtime`` runs A (and a model B): ``ort`` (default), ``openvino``, ``tensorrt`` or ``reference``;
    ``vs_runtime`` compares the model with itself on another runtime (on ``vs_device``, that runtime's
    device, when given; ``vs_reference`` is ``vs_runtime="reference"``). ``runtime_options``: settings of
    the runtimes that take them (``{"INFERENCE_PRECISION_HINT": "f16"}``; ``"openvino:KEY"`` for one).

    A repeated diff of the same two model files with the same request (or another ``tolerance`` whose judging reads
    the same rows) is served from the plan cache without reading the models again (``api.diff_direct``;
    ``RunConfig(cache=False)`` turns it off): the result a run that reads them gives, whose sides (``result.a``,
    ``result.b``) are built when first read."""
    try:  # the request as stated (the normal path checks it before anything is served)
        t = ticket(a, b, others=bool(vs_device or vs_opt_level or vs_reference or vs_npz is not None or vs_torch is not None
                                     or vs_runtime or fp32_sensitivity or not fuse or profile),
                   runtime=runtime, runtime_options=runtime_options, selection=selection, config=config, inputs=inputs,
                   per_tensor=per_tensor, user_map=user_map, introduced=introduced, max_memory=max_memory, extras=extras)
        early = prepare(t) if t is not None else None
    except KeyboardInterrupt:
        raise
    except Exception:  # noqa: BLE001 - an argument the normal path refuses, in its words
        t = early = None
    try:
        # inside the try: what ends the import of onnx and the comparison code lets the prepared session go (left
        # building, the interpreter's shutdown ran with it: a second Ctrl-C, an abort); a Ctrl-C held back till the
        # import is done (onnx's extension, interrupted while it initialises, ends the process: runtime.interrupt)
        with held_back():
            from onnxprobe.api.diff import diff as normal

        return normal(a, b, vs_device=vs_device, vs_opt_level=vs_opt_level, vs_reference=vs_reference, vs_npz=vs_npz,
                      vs_torch=vs_torch, runtime=runtime, vs_runtime=vs_runtime, runtime_options=runtime_options,
                      selection=selection, config=config, inputs=inputs, tolerance=tolerance, per_tensor=per_tensor,
                      user_map=user_map, introduced=introduced, max_memory=max_memory, progress=progress,
                      fp32_sensitivity=fp32_sensitivity, fuse=fuse, profile=profile, extras=extras, _ticket=t,
                      _early=early)
    finally:
        if early is not None:
            early.close()
