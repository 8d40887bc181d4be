"""Plain data that crosses layers. No behaviour beyond small derived properties."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

# names that several layers agree on: backward nodes are named BACKWARD_TAG + "<forward node>/<Op>", and
# the gradient of forward tensor t is the tensor t + GRAD_SUFFIX
BACKWARD_TAG = "onnxprobe.grad/"
GRAD_SUFFIX = "_grad"


def grad_name(tensor: str) -> str:
    """The name the gradient of ``tensor`` gets (and that reports and matching use for it)."""
    return tensor + GRAD_SUFFIX


def forward_name(name: str) -> str | None:
    """The forward tensor a gradient name stands for, or None when ``name`` is not a gradient name."""
    return name[: -len(GRAD_SUFFIX)] if name.endswith(GRAD_SUFFIX) and len(name) > len(GRAD_SUFFIX) else None


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
    kind: str = "node"  # "node" (a node output), "input" (a graph input) or "initializer"

    @property
    def in_subgraph(self) -> bool:
        return bool(self.scope)


@dataclass
class Probe:
    """What a rewritten model exposes for one tensor: names of the added graph outputs."""

    ref: TensorRef
    stats_output: str | None = None  # [1, 10] float64 row, see onnxprobe.stats.tensor_stats.ROW (or, with
    # stats_sums, the extremes [min, max, shift] of the row's two computed pieces: graph.stats_nodes.stats_parts)
    stats_sums: str | None = None  # the float64 [Σ(x-c), Σ(x-c)², Σ|x|, non-zero] of those pieces
    shape_output: str | None = None  # int64 [rank] runtime shape (main-graph tensors only)
    raw_output: str | None = None  # the tensor itself (or, inside Loop/Scan, stacked per iteration)
    stats_on_host: bool = False  # statistics (and shape) from raw_output with numpy (small tensors, opsets without IsNaN)
    raw_for_stats: bool = False  # raw_output is there for stats_on_host only: its values were not asked for


@dataclass
class ProbePlan:
    """A rewritten model plus what each added output means. The input model is not modified."""

    model: Any  # onnx.ModelProto
    probes: list[Probe]
    source: str  # path or label of the original model
    warnings: list[str] = field(default_factory=list)
    base: Any = None  # the model before probing (for reruns over some of its tensors)
    # when set, ``model`` is a skeleton (graph.skeleton): its stubbed weights are this ModelProto's
    # initializers and Constant values of the same names, handed to the runtime apart
    weights_from: Any = None
    # those tensors by stub name (graph.skeleton.stub_weights), found once when the plan is made: every
    # run of the plan hands them over, and finding them scans both graphs (10 ms on PP-OCRv4 rec)
    weights: Any = None


@dataclass(frozen=True)
class InputSpec:
    """How a model's inputs are made: seeded random data from the model's own input types, except where
    a file, a value or an array is given. Every command and API function that runs a model takes one.

    ``shapes``: input name -> dimensions (fixes dynamic dimensions of random inputs); ``files``: input
    name -> a ``.npy`` / ``.pb`` path or a literal value (``16000``, ``[1, 2]``); ``arrays``: input name
    -> a numpy array (from an ``.npz``, or computed)."""

    seed: int = 0
    int_range: tuple[int, int] = (0, 100)
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    arrays_from: str = "--inputs"  # where ``arrays`` came from, as messages say it
    # ``arrays`` must hold every input (a dataset's batches); else an input they lack gets seeded random data,
    # with a note
    arrays_complete: bool = False

    def names(self) -> list[str]:
        """Every input name the spec mentions."""
        return list(dict.fromkeys(list(self.arrays) + list(self.files) + list(self.shapes)))


@dataclass
class RunConfig:
    device: str = "auto"  # auto | cpu | cuda
    opt_level: str = "off"  # off | basic | extended | layout | all
    io_binding: bool = True
    cache: bool = True  # reuse probed copies across runs (runtime.plan_cache; --no-cache)


@dataclass
class RunInfo:
    device: str  # the device that really ran: "cpu" or "cuda"
    providers: list[str]
    opt_level: str
    session_seconds: float
    run_seconds: float
    runtime: str = "onnxruntime"  # the runner's kind: onnxruntime, onnx.reference, openvino, tensorrt
    runtime_options: dict[str, str] = field(default_factory=dict)  # the runtime's own settings (--runtime-option)


@dataclass
class ProbeResult:
    """What one probed run computed: statistics (``stats.TensorStats``, None for a dtype that has none),
    runtime shapes, raw values (only those asked for) and the model's own outputs."""

    plan: ProbePlan
    info: RunInfo
    stats: dict[str, Any]  # tensor name -> TensorStats
    shapes: dict[str, tuple[int, ...]]  # tensor name -> runtime shape (when known)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)  # only when raw tensors were asked for
    outputs: dict[str, np.ndarray] = field(default_factory=dict)  # the model's own outputs
    notes: list[str] = field(default_factory=list)
    unobserved: dict[str, str] = field(default_factory=dict)  # probed tensors the runtime cannot return -> why

    def rows(self):
        """(TensorRef, TensorStats | None) per probed tensor, in the plan's (topological) order."""
        for p in self.plan.probes:
            yield p.ref, self.stats.get(p.ref.name)
