"""A side of a comparison produces values for observables: onnxruntime (any device / opt level),
onnx.reference.ReferenceEvaluator, or an .npz of activations saved elsewhere (e.g. PyTorch hooks)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from onnxprobe.graph.expose import expose
from onnxprobe.match.observe import Observable, Observation, add_dequantize, observe
from onnxprobe.runtime.session import create_session, resolve_device, run_bound
from onnxprobe.types import RunConfig, TensorRef


@dataclass
class Side:
    label: str
    model: object  # api.Model
    kind: str = "ort"  # ort | reference | npz
    config: RunConfig = field(default_factory=RunConfig)
    npz: dict[str, np.ndarray] | None = None
    device: str | None = None  # resolved
    notes: list[str] = field(default_factory=list)
    _observation: Observation | None = None

    @property
    def observation(self) -> Observation:
        if self._observation is None:
            self._observation = observe(self.model.inferred)
            if self.kind == "npz":
                keep = [o for o in self._observation.observables if o.name in self.npz]
                self._observation = Observation(keep, [], self._observation.hidden)
        return self._observation

    def describe(self) -> str:
        if self.kind == "reference":
            return f"{self.label} (onnx.reference)"
        if self.kind == "npz":
            return f"{self.label}"
        return f"{self.label} ({self.device or self.config.device}, opt-level {self.config.opt_level})"

    def values(self, observables: list[Observable], feeds: dict[str, np.ndarray], keep_on_device: bool = False) -> dict:
        """probe name -> value for each observable: numpy arrays, or with ``keep_on_device`` (onnxruntime
        sides) the OrtValues where the session left them, so that metrics can be computed there."""
        if self.kind == "npz":
            return {o.probe: np.asarray(self.npz[o.name]) for o in observables}
        model = add_dequantize(self.model.inferred, self.observation.dequantize)
        if self.kind == "reference":
            from onnx.reference import ReferenceEvaluator

            res = ReferenceEvaluator(model).run(None, feeds, intermediate=True)
            return {o.probe: np.asarray(res[o.probe]) for o in observables if o.probe in res}
        refs = [TensorRef(name=o.probe, node=o.node, op_type=o.op_type, index=o.index) for o in observables]
        rewritten, probes = expose(model, refs, stats=False, shapes=False, raw=True, warnings=self.notes)
        self.device = self.device or resolve_device(self.config.device)
        session = create_session(rewritten, device=self.device, opt_level=self.config.opt_level)
        self.notes += session.notes
        names = list(dict.fromkeys(p.raw_output for p in probes if p.raw_output))
        out, _ = run_bound(session, feeds, [], names, keep_on_device=keep_on_device)
        return {p.ref.name: out[p.raw_output] for p in probes if p.raw_output}
