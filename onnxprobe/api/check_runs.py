"""The runs of ``grad --check`` (``api.grad._grad_check``): the precision the loss is perturbed in (the model's
float64 copy where onnxruntime runs it, float32 otherwise: ``check_run``), the perturbed loss itself
(``CheckRun.loss``) and the gradients the float64 backward graph computes (``grads_float64``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import onnx
from onnx import TensorProto

from onnxprobe.autodiff.check import TOLERANCE, to_float64
from onnxprobe.autodiff.engine import attach_backward
from onnxprobe.errors import ExecutionError, ModelError, UsageError, first_line, said, setting_error
from onnxprobe.graph.shapes import infer_shapes
from onnxprobe.runtime.runners.ort import OrtRunner
from onnxprobe.types import RunConfig

if TYPE_CHECKING:
    from onnxprobe.api.grad_plan import GradPlan


@dataclass
class CheckRun:
    """The loss's perturbed runs: one session of the perturbable model (``runner``) in the check's precision
    (``mode``: "float64", "float64 (float32 gradients)" or "float32"), the feed in it (``base``: the model's
    inputs and the loss's extra one), the float64 backward graph's gradients (``grads64``, None where there are
    none), the delta inputs' dtype (``dt``), each checked tensor's zero delta (``zeros``) and the loss output's name,
    and each checked tensor's delta input (``deltas``, ``autodiff.check.perturbable``)."""

    runner: OrtRunner
    mode: str
    base: dict[str, np.ndarray]
    grads64: dict[str, np.ndarray] | None
    dt: type
    zeros: dict[str, np.ndarray]
    loss_name: str
    deltas: dict[str, str]

    def loss(self, name: str, delta: np.ndarray) -> float:
        """The loss with tensor ``name`` moved by ``delta`` (the others where they are)."""
        # one session, its arena kept from run to run (hundreds of runs); the other tensors' deltas are broadcast
        # zeros (t + 0 is t, bit for bit, as with a whole tensor of zeros, which each run read for every tensor)
        f = dict(self.base)
        f.update(self.zeros)
        f[self.deltas[name]] = np.asarray(delta, self.dt)
        out, _ = self.runner.execute(self.runner.model, f, [self.loss_name], key="check", shrink=False)
        return float(np.asarray(out[self.loss_name], np.float64).reshape(-1)[0])


def check_run(gp: GradPlan, perturbed: tuple[onnx.ModelProto, dict[str, str]], feed: dict[str, np.ndarray],
              tensors: dict[str, tuple[int, list]], device: str, notes: list[str]) -> CheckRun:
    """The check's runs of ``perturbed`` (``autodiff.check.perturbable`` of ``gp.forward``: the model, and its delta
    input of each tensor of ``tensors``: name -> (elem type, shape)): in float64 where onnxruntime runs the float64 copy (one run tells:
    some kernels refuse double at run time), else in float32 with a note in ``notes``; a UsageError where the
    model computes a checked tensor in float16 / bfloat16 and must stay in float32."""
    config = RunConfig(device=device)
    pm, deltas = perturbed
    base = {**feed, **gp.extra_feed}
    mode, grads64 = "float32", None
    try:
        runner = OrtRunner(to_float64(pm), config)
        runner.session(runner.model, key="check", arena=True)  # (as execute would make it: scalar outputs only)
        # some kernels are registered for double and refuse it at run time (LSTM, GRU): one run tells
        f64 = {k: (v.astype(np.float64) if v.dtype in (np.float32, np.float16) else v) for k, v in base.items()}
        f64.update(zero_deltas(tensors, np.float64, deltas))
        runner.execute(runner.model, f64, [gp.loss.loss], key="check", shrink=False)
        mode = "float64"
    except ExecutionError as e:
        why = first_line(e)
        notes.append(said(lambda say: f"{say(('check', '--check'))} ran in float32 (tolerance "
                          f"{TOLERANCE['float32']:g}): onnxruntime cannot run the model's float64 copy ({why[:200]})"))
        runner = OrtRunner(pm, config)
        half = sorted(n for n, (e, _) in tensors.items() if e in (TensorProto.FLOAT16, TensorProto.BFLOAT16))
        if half:  # finite differences over a step of 1e-3 of the values drown in float16's own rounding
            raise setting_error(UsageError, ("check", "--check"), f": the model computes {half[0]!r}"
                                f"{f' (and {len(half) - 1} more)' if len(half) > 1 else ''} in float16 or bfloat16, and onnxruntime cannot run its float64 copy: finite differences in "
                                "half precision cannot check gradients (the gradients themselves are computed; check a "
                                "float32 version of the model)")
    if mode == "float64":
        base = {k: (v.astype(np.float64) if v.dtype in (np.float32, np.float16) else v) for k, v in base.items()}
        grads64 = grads_float64(gp, base, device)
        if grads64 is None:
            mode = "float64 (float32 gradients)"
    dt = np.float64 if mode.startswith("float64") else np.float32
    return CheckRun(runner, mode, base, grads64, dt, zero_deltas(tensors, dt, deltas), gp.loss.loss, deltas)


def zero_deltas(tensors: dict[str, tuple[int, list]], dt, deltas: dict[str, str]) -> dict[str, np.ndarray]:
    """The delta of each checked tensor left where it is: a zero of its rank, all dims 1 (``perturbable``'s delta
    inputs have unknown dims; the Add broadcasts it), not a copy of the tensor in zeros."""
    return {deltas[n]: np.zeros([1] * len(s), dt) for n, (_, s) in tensors.items()}


def grads_float64(gp: GradPlan, feed64: dict[str, np.ndarray], device: str) -> dict[str, np.ndarray] | None:
    """The gradients recomputed by the float64 backward graph, or None when onnxruntime cannot run it."""
    try:
        fwd = infer_shapes(to_float64(gp.forward))
        bw = attach_backward(fwd, gp.loss.seeds, list(gp.grads), outputs=[gp.loss.loss])
        out, _ = OrtRunner(bw.model, RunConfig(device=device)).execute(bw.model, feed64, list(bw.grads.values()))
    except (ExecutionError, ModelError):
        return None
    return {t: out[g] for t, g in bw.grads.items()}
