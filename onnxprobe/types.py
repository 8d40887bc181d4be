"""Plain data that crosses layers. No behaviour beyond small derived properties."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class TensorRef:
    """One tensor of a model, as probes and reports see it.

    ``scope`` names the control-flow nodes that enclose the tensor, outermost first
    (``()`` for the main graph), e.g. ``("loop/body",)``.
    """

    name: str
    node: str  # display name of the producing node ("" for a graph input)
    op_type: str  # op type of the producer ("" for a graph input)
    index: int  # position in topological order over the whole model (subgraphs inline)
    scope: tuple[str, ...] = ()
    dtype: str | None = None  # numpy dtype name when known statically
    shape: tuple[Any, ...] | None = None  # static shape: ints, symbolic strings or None
    is_output: bool = False  # one of the model's own outputs
    direction: str = "forward"  # "forward" or "backward"
    grad_of: str | None = None

    @property
    def in_subgraph(self) -> bool:
        return bool(self.scope)


@dataclass
class Probe:
    """What a rewritten model exposes for one tensor: names of the added graph outputs."""

    ref: TensorRef
    stats_output: str | None = None  # [1, 9] float64 row, see onnxprobe.stats.tensor_stats.ROW
    shape_output: str | None = None  # int64 [rank] runtime shape (main-graph tensors only)
    raw_output: str | None = None  # the tensor itself (or, inside Loop/Scan, stacked per iteration)
    stats_on_host: bool = False  # statistics from raw_output with numpy (opsets without IsNaN)


@dataclass
class ProbePlan:
    """A rewritten model plus what each added output means. The input model is not modified."""

    model: Any  # onnx.ModelProto
    probes: list[Probe]
    source: str  # path or label of the original model
    warnings: list[str] = field(default_factory=list)
    base: Any = None  # the model before probing (for reruns over some of its tensors)


@dataclass
class RunConfig:
    device: str = "auto"  # auto | cpu | cuda
    opt_level: str = "off"  # off | basic | extended | layout | all
    io_binding: bool = True


@dataclass
class RunInfo:
    device: str  # the device that really ran: "cpu" or "cuda"
    providers: list[str]
    opt_level: str
    session_seconds: float
    run_seconds: float


@dataclass
class ProbeResult:
    plan: ProbePlan
    info: RunInfo
    stats: dict[str, Any]  # tensor name -> TensorStats
    shapes: dict[str, tuple[int, ...]]  # tensor name -> runtime shape (when known)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)  # only when raw tensors were asked for
    outputs: dict[str, np.ndarray] = field(default_factory=dict)  # the model's own outputs
