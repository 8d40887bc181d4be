"""``--profile``: where the time goes, per node, from onnxruntime's profiler (``runtime.profile``).

``profile_layers`` profiles the plain model and the probed copy ``layers`` ran, on the same inputs and
settings: each probed tensor gets the time of the kernel that produced it (in the probed run, and in
the plain one where the node had a kernel of its own there), or the node its work was fused into; the
summary says what the probes cost (their own kernels, and the layout reorders and fusions that
reading intermediate tensors forced: the kernel count with and without probes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from onnxprobe.errors import UsageError, settings_error
from onnxprobe.api.inputs import ModelLike
from onnxprobe.runtime.profile import RUNS, Profile, own_node_names, profile
from onnxprobe.types import ProbeResult, RunConfig


@dataclass
class RowTime:
    """One row's time: its producer's kernel in the probed and in the plain run (ms), or the node whose kernel
    ran it when onnxruntime fused it away."""

    kernel_ms: float | None  # the producer's kernel in the probed run
    plain_ms: float | None  # ... in the plain run
    fused_into: str | None  # the node whose kernel ran it, when it had none of its own
    plain_fused_into: str | None = None  # ... in the plain run
    # how onnxruntime removed its producer, fused into nothing: "no-op" (an Identity, a Dropout) or "constant-folded"
    removed: str | None = None
    plain_removed: str | None = None  # ... in the plain run

    def to_dict(self) -> dict:
        r = (lambda v: round(v, 4) if v is not None else None)
        return {"kernel_ms": r(self.kernel_ms), "plain_kernel_ms": r(self.plain_ms), "fused_into": self.fused_into,
                "plain_fused_into": self.plain_fused_into, "removed": self.removed, "plain_removed": self.plain_removed}


@dataclass
class LayersProfile:
    """``layers --profile``: onnxruntime's profiles of the plain and the probed model, and each probed
    tensor's producer time (``rows``)."""

    plain: Profile
    probed: Profile
    rows: dict[str, RowTime] = field(default_factory=dict)  # probed tensor -> its producer's time

    def summary(self) -> dict:
        p, q = self.plain, self.probed
        # what probing costs: its statistics nodes' kernels, and the statistics the host computes from the raw values
        # of small tensors, in no kernel (a run of tensors of 256 KiB read 'probes 0 µs', one of 257 KiB 2.6 ms)
        return {"plain_ms": round(p.total_ms, 4), "probed_ms": round(q.total_ms, 4),
                "model_kernels_ms": round(q.model_ms, 4), "probe_overhead_ms": round(q.probe_ms + q.host_ms, 4),
                "probe_kernels_ms": round(q.probe_ms, 4), "host_statistics_ms": round(q.host_ms, 4),
                "host_statistics_tensors": q.host_tensors,
                "layout_and_other_ms": round(q.other_ms, 4), "between_kernels_ms": round(q.between_ms, 4),
                "plain_between_kernels_ms": round(p.between_ms, 4), "kernels_plain": p.kernels, "kernels_probed": q.kernels,
                "fusions_broken": p.fusions_broken(q), "runs": min(p.runs, q.runs)}


def check_profile(runtime: str = "ort", *, vs_runtime: str | None = None, vs_reference: bool = False,
                  one_run_off: tuple[str, str] | None = None) -> None:
    """A UsageError, before anything runs, where ``--profile`` cannot time what was asked: it reads
    onnxruntime's profiler, so every runtime is onnxruntime (``runtime``, ``vs_runtime``: that of diff's
    side B), and diff times its one run of both models (``one_run_off``: what keeps it from running, as the
    API and the command line say it: ("fuse=False", "--separate-runs"), ("vs_device", "--vs-device")...).
    One wording for layers and diff, in the words of each (``settings_error``)."""
    other = [(p, f, r) for p, f, r in (("runtime", "--runtime", runtime), ("vs_runtime", "--vs-runtime", vs_runtime))
             if r not in (None, "ort")]
    if vs_reference:
        raise settings_error(UsageError, lambda say: f"{say.either('profile', '--profile')} times onnxruntime's kernels: "
                             f"not with {say.either('vs_reference', '--vs-reference')}")
    if other:
        p, f, r = other[0]
        raise settings_error(UsageError, lambda say: f"{say.either('profile', '--profile')} times onnxruntime's kernels: "
                             f"not with {say.either(f'{p}={r!r}', f'{f} {r}')}")
    if one_run_off:
        raise settings_error(UsageError, lambda say: f"{say.either('profile', '--profile')} times diff's one run of both "
                             f"models: not with {say.either(*one_run_off)}")


def profile_layers(model: ModelLike, result: ProbeResult, feed: dict[str, np.ndarray], config: RunConfig | None = None,
                   runs: int = RUNS) -> LayersProfile:
    """Profile ``model`` and the probed copy of ``result`` on ``feed`` (one untimed run and ``runs`` timed
    ones each, every kernel's time the minimum over them: ``runtime.profile``), with ``result``'s device and opt level unless ``config`` says otherwise."""
    from onnxprobe.api.inputs import as_config, as_model, as_probe_result, checked_feed, of_model

    model, result, config = as_model(model), as_probe_result(result), as_config(config)
    of_model(model, (p.ref.name for p in result.plan.probes), "result")
    if not isinstance(runs, (int, np.integer)) or isinstance(runs, bool) or runs < 1:  # numpy's counts too
        raise UsageError(f"runs: expected a count of timed runs >= 1, got {runs!r}")
    feed = checked_feed(model.proto, feed)
    device = (config.device if config and config.device != "auto" else None) or result.info.device
    level = config.opt_level if config else result.info.opt_level or RunConfig.opt_level
    own = [o.name for o in model.proto.graph.output]
    plain = profile(model.proto, feed, own, device=device, opt_level=level, runs=runs)
    probe_outputs = [o.name for o in result.plan.model.graph.output]
    host = [p.raw_output for p in result.plan.probes if p.stats_on_host and p.raw_output]
    probed = profile(result.plan.model, feed, probe_outputs, device=device, opt_level=level, runs=runs,
                     weights=result.plan.weights, own=own_node_names(model.proto), host=host)
    out = LayersProfile(plain, probed)
    mine, theirs = probed.of_tensor(), plain.of_tensor()
    for ref, _ in result.rows():
        if ref.name in mine:
            ms, fused, removed = mine[ref.name]
            plain_ms, plain_fused, plain_removed = theirs.get(ref.name, (None, None, None))
            out.rows[ref.name] = RowTime(ms, plain_ms, fused, plain_fused, removed, plain_removed)
    return out


__all__ = ["LayersProfile", "RowTime", "check_profile", "profile_layers"]
