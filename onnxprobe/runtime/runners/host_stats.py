"""Runners for compiled runtimes (OpenVINO, TensorRT): tensors are read by name from the runtime's own
compiled graph (OpenVINO's ``Model.add_outputs``, TensorRT's ``mark_output`` / debug tensors) instead of
through onnxprobe's probed ONNX copy, and their statistics are computed on the runtime's output buffers.

Why not the in-graph statistics of ``graph.expose`` (measured, OpenVINO 2026.4 CPU): OpenVINO converts
the statistics graph, but its CPU plugin computes float64 in float32 (a float64 ReduceSum of [1e8, 1,
-1e8] gives 0), so the rows lose the accuracy they are built for (means off by up to 1e-4 relative on 43 of
PP-OCRv4 rec's 425 tensors), and reading, compiling and running the model with ~24 statistics nodes per tensor took 35 s where
exposing the tensors took 2 s. (Before the statistics used Mul/Abs + ReduceSum, they did not convert at
all: OpenVINO's ReduceL1 at opset 13-17 ignores ``axes``.) Extra Reduce nodes would also change which
fusions the runtime makes, which is what a user of these runtimes wants to see. The tensors are fetched in
chunks of at most half the memory budget (``max_memory``, as in ``diff``), and the statistics are taken
where the buffers are (the OpenVINO worker, TensorRT's debug listener), so only one row per tensor is
kept unless the raw values were asked for.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import onnx

from onnxprobe.graph.memo import ModelMemo, feed_key
from onnxprobe.graph.shapes import concrete_sizes
from onnxprobe.runtime.budget import default_budget, plan_chunks
from onnxprobe.runtime.runners.base import GraphRunner
from onnxprobe.runtime.runners.readback import read_host_refs
from onnxprobe.text import some
from onnxprobe.types import Probe, ProbePlan, ProbeResult, RunInfo, TensorRef


@dataclass
class Collected:
    """What one run of a compiled runtime returned: statistics, shapes and raw values by tensor name."""

    stats: dict = field(default_factory=dict)
    shapes: dict = field(default_factory=dict)
    values: dict = field(default_factory=dict)
    seconds: float = 0.0
    build_seconds: float = 0.0


class HostStatsRunner(GraphRunner):
    """A GraphRunner whose runtime returns tensors by name. Subclasses implement ``collect`` (one run
    returning the statistics of ``stats`` and the values of ``raw``) and ``unobservable``."""

    title: ClassVar[str] = "the runtime"  # for people: "OpenVINO", "TensorRT"

    def __init__(self, model: onnx.ModelProto, config=None, label: str = "", *, max_memory: int | None = None):
        super().__init__(model, config, label)
        self.max_memory = max_memory
        self._build_seconds = 0.0
        self._sizes = ModelMemo(keep=4)  # concrete_sizes by model and feed shapes: once for a dataset's samples
        if self.config.opt_level != "off":
            self.notes.append(f"--opt-level {self.config.opt_level} is onnxruntime's: {self.title} applies its own graph optimisations")

    @abstractmethod
    def collect(self, model: onnx.ModelProto, names: list[str], feeds: dict, *, stats: list[str], raw: list[str],
                key=None) -> Collected:
        """Run ``model`` once with the tensors ``names`` readable; statistics of ``stats``, values of ``raw``."""

    def unobservable_in(self, model: onnx.ModelProto, names: list[str]) -> dict[str, str]:
        """``unobservable`` for another model than the runner's own (by default: nothing is hidden)."""
        return self.unobservable(names) if model is self.model else {}

    def session_seconds(self) -> float:
        return self._build_seconds

    def execute(self, model: onnx.ModelProto, feeds: dict, outputs: list[str], *, device_outputs: list[str] = (),
                keep_on_device: bool = False, key=None) -> tuple[dict, float]:
        names = list(dict.fromkeys(list(outputs) + list(device_outputs)))
        got = self.collect(model, names, feeds, stats=[], raw=names, key=key)
        self._build_seconds = got.build_seconds
        return got.values, got.seconds

    def values(self, names: list[str], feeds: dict[str, np.ndarray], *, keep_on_device: bool = False, key=None) -> dict:
        found, rest = self.known_values(names, feeds)
        hidden = self.unobservable(rest)
        run = [n for n in rest if n not in hidden]
        if run:
            found.update(self.collect(self.model, run, feeds, stats=[], raw=run).values)  # key: the model is compiled once anyway
        return found

    def probe(self, refs: list[TensorRef], feeds: dict[str, np.ndarray], *, stats: bool = True, shapes: bool = True,
              raw: bool | set[str] = False, nonfinite: str = "deferred", model: onnx.ModelProto | None = None,
              key=None, outputs: bool = True, check: bool = True, extras: bool = True) -> ProbeResult:
        """The statistics (computed on the runtime's buffers), shapes and, with ``raw``, values of ``refs``,
        fetched in as many runs as the memory budget needs (``extras`` is taken and ignored: statistics on
        the host always have abs_mean and zero_fraction). Tensors the runtime cannot observe get no
        statistics and are listed, with the reason, in ``result.unobserved`` and the notes."""
        base = model if model is not None else self.model
        want_raw = (lambda n: n in raw) if isinstance(raw, set) else (lambda n: bool(raw))
        node_refs = [r for r in refs if r.kind == "node"]
        hidden = self.unobservable_in(base, [r.name for r in node_refs])
        todo = [r.name for r in node_refs if r.name not in hidden]
        own = [o.name for o in base.graph.output] if outputs else []
        sizes = self._sizes.get(base, feed_key(feeds), lambda: concrete_sizes(base, {k: tuple(np.shape(v)) for k, v in feeds.items()}))
        chunks = plan_chunks([(n, sizes.get(n, 0)) for n in todo], (self.max_memory or default_budget()) // 2) or [[]]
        st: dict = {}
        shp: dict = {}
        arrays: dict = {}
        own_values: dict = {}
        seconds = build = 0.0
        for k, chunk in enumerate(chunks):
            extra = [o for o in own if o not in chunk] if k == 0 else []
            got = self.collect(base, chunk + extra, feeds, stats=chunk if stats else [],
                               raw=[n for n in chunk if want_raw(n)] + (own if k == 0 else []), key=key)
            seconds += got.seconds
            build += got.build_seconds
            st.update({n: got.stats[n] for n in chunk if n in got.stats})
            if shapes:
                shp.update({n: got.shapes[n] for n in chunk if n in got.shapes})
            arrays.update({n: got.values[n] for n in chunk if want_raw(n) and n in got.values})
            own_values.update({n: got.values[n] for n in own if n in got.values})
            del got
        self._build_seconds = build
        read_host_refs(refs, feeds, base, st, shp, arrays, stats=stats, shapes=shapes, raw=raw)
        probes = [Probe(ref=r, raw_output=r.name if r.name in arrays else None) for r in refs]
        notes = list(self.notes)
        if hidden:
            names = some(hidden, form=str)
            notes.append(f"{self.title} cannot observe {len(hidden)} of the probed tensors ({names}); the first: "
                         f"{next(iter(hidden.values()))} (--json gives each one's reason)")
        info = RunInfo(device=self.device, providers=self.providers(), opt_level=self.config.opt_level,
                       session_seconds=build, run_seconds=seconds, runtime=self.kind,
                       runtime_options=self.runtime_options(), precision=self.inference_precision())
        return ProbeResult(ProbePlan(base, probes, self.label, [], base=base), info, st, shp, arrays, own_values,
                           notes=notes, unobserved=hidden)
