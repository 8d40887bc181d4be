"""Plain data that crosses layers. No behaviour beyond small derived properties, checks of what a
caller may put in (``InputSpec``) and short reprs (a notebook shows a result, not its megabytes)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple, Union

import numpy as np

from onnxprobe.errors import UsageError, setting_error
from onnxprobe.text import clip, controls, quote

# names that several layers agree on: backward nodes are named BACKWARD_TAG + "<forward node>/<Op>", and
# the gradient of forward tensor t is the tensor t + GRAD_SUFFIX
BACKWARD_TAG = "onnxprobe.grad/"
GRAD_SUFFIX = "_grad"
SORTS = ("topo", "introduced", "accumulated")  # the orders of a diff's rows (compare.result.sort_results)


# where a dataset's samples come from (``inputs_from``): a FILE.py:FUNC, a function that returns or yields feed
# dicts {input name: array}, or such an iterable itself (a list, a generator)
FeedsFrom = Union[str, os.PathLike, Callable[[], Iterable[Mapping[str, np.ndarray]]], Iterable[Mapping[str, np.ndarray]]]


def grad_name(tensor: str) -> str:
    """The name the gradient of ``tensor`` gets (and that reports and matching use for it)."""
    return tensor + GRAD_SUFFIX


def forward_name(name: str) -> str | None:
    """The forward tensor a gradient name stands for, or None when ``name`` is not a gradient name."""
    return name[: -len(GRAD_SUFFIX)] if name.endswith(GRAD_SUFFIX) and len(name) > len(GRAD_SUFFIX) else None


def named_dim(d) -> bool:
    """A dimension with a real name (``batch``, ``seq_len``), which one size holds across a model's inputs:
    exporters write "?" or "-1" for "unknown", which ties nothing."""
    return isinstance(d, str) and any(ch.isalnum() for ch in d) and not d.lstrip("-").isdigit()


def element_count(dims) -> int | None:
    """Elements of a tensor of these dims (a shape tuple, or a TensorProto's ``dims``): an exact Python int
    (no int64 wrap-around, no float rounding), 1 for a scalar; None where a dim is not a whole number (a
    symbolic name, None), even beside a 0: what an unknown shape means is the caller's to say."""
    n = 1
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            return None
        n *= int(d)
    return n


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
    # its name is also a tensor's of another body (two If nodes' branches may each name one 'o'): results
    # key it by ``key``, its scope and name, so that each is a tensor of its own
    qualified: bool = False

    @property
    def key(self) -> str:
        """What results (statistics, shapes, saved arrays) key this tensor by: its name, or, where another
        body holds a tensor of the same name, that name qualified by its scope ('if1/then_branch/o')."""
        return "/".join(self.scope + (self.name,)) if self.qualified else self.name

    @property
    def in_subgraph(self) -> bool:
        return bool(self.scope)


@dataclass
class Probe:
    """What a rewritten model exposes for one tensor: names of the added graph outputs."""

    ref: TensorRef
    stats_output: str | None = None  # [1, 11] float64 row, see onnxprobe.stats.tensor_stats.ROW (or, with
    # stats_sums, the extremes [min, max, shift] of the row's two computed pieces: graph.stats_nodes.stats_parts)
    stats_sums: str | None = None  # the float64 [Σ(x-c), Σ(x-c)², Σ|x|, non-zero] of those pieces
    stats_block: int = 0  # > 0: stats_output holds per-block summaries of this many elements each
    # (graph.stats_nodes.block_parts, read by TensorStats.from_blocks)
    # False: those summaries leave out Σ|x| and the zero count (stats.tensor_stats.BLOCK_CORE: 5 rows a block,
    # not 7; api.layers(extras=False)): the statistics then have no abs_mean or zero_fraction
    stats_extras: bool = True
    shape_output: str | None = None  # int64 [rank] runtime shape (main-graph tensors only)
    exact_extremes: str | None = None  # an int64 / uint64 tensor's [min, max] in its type (main graph; the row's are float64)
    raw_output: str | None = None  # the tensor itself (or, inside Loop/Scan, stacked per iteration)
    stats_on_host: bool = False  # statistics (and shape) from raw_output with numpy (small tensors, opsets without IsNaN)
    raw_for_stats: bool = False  # raw_output is there for stats_on_host only: its values were not asked for
    raw_scalar: bool = False  # raw_output carries a scalar of an If branch as [1] ([0]: the branch did not run)
    # the static dims the float statistics nodes were laid out for (their partial sums' axes, the block rows),
    # where the plan fixed any: a run whose tensor has other dims (a shape declared in value_info that the
    # values, not the input shapes, contradict: a Range to a fed limit) read them wrong (runners.base)
    planned_shape: tuple | None = None

    def record(self) -> dict:
        """The probe as plain data for JSON (the plan cache's entries, read back by ``runtime.plan_cache.probes_from``):
        what ``dataclasses.asdict`` gives, made without its deep copy of every field (24,000 calls of it, 2.6 s of a
        first `layers --all` of a model of 12,000 tensors: the fields are strings, numbers and tuples of them)."""
        out = {f: getattr(self, f) for f in _PROBE_FIELDS}
        out["ref"] = {f: getattr(self.ref, f) for f in _REF_FIELDS}
        return out


_PROBE_FIELDS = tuple(f.name for f in fields(Probe))
_REF_FIELDS = tuple(f.name for f in fields(TensorRef))


@dataclass
class ProbePlan:
    """A rewritten model plus what each added output means. The input model is not modified."""

    model: Any  # onnx.ModelProto
    probes: list[Probe]
    source: str  # path or label of the original model
    warnings: list[str] = field(default_factory=list)
    base: Any = None  # the model before probing (for reruns over some of its tensors; see Model.proto on its weights)
    # when set, ``model`` is a skeleton (graph.skeleton): its stubbed weights are this ModelProto's
    # initializers and Constant values of the same names, handed to the runtime apart
    weights_from: Any = None
    # those tensors by stub name (graph.skeleton.stub_weights), found once when the plan is made: every
    # run of the plan hands them over, and finding them scans both graphs (10 ms on PP-OCRv4 rec)
    weights: Any = None

    def __repr__(self) -> str:
        return f"ProbePlan({os.path.basename(str(self.source))}: {len(self.probes)} probes, {len(self.warnings)} warnings)"


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
    arrays_from: str = "the arrays given"  # where ``arrays`` came from, as messages say it (the CLI: "--inputs F.npz")
    # ``arrays`` must hold every input (a dataset's batches); else an input they lack gets seeded random data,
    # with a note
    arrays_complete: bool = False

    def __post_init__(self) -> None:
        # checked when made, so a wrong value is one line naming the field, not a numpy error at the run;
        # frozen, hence object.__setattr__ for the normalised copies
        def refuse(what: str, value, why: str) -> UsageError:
            return UsageError(f"InputSpec {what}={clip(controls(repr(value)), 60)}: {why}")

        object.__setattr__(self, "arrays_complete", check_bool(self.arrays_complete, "InputSpec arrays_complete"))

        # only the kinds of values: their ranges are checked where the feeds are made (runtime.feeds), in
        # messages that name both the field and the flag (seed, --seed) that the command line sets it with
        if not _is_int(self.seed):
            raise refuse("seed", self.seed, "seeds are non-negative integers")
        rng = self.int_range
        if isinstance(rng, (str, bytes)) or not hasattr(rng, "__len__") or len(rng) != 2 or not all(map(_is_int, rng)):
            raise refuse("int_range", rng, "expected (LOW, HIGH), two integers")
        object.__setattr__(self, "int_range", (int(rng[0]), int(rng[1])))
        for what in ("shapes", "files", "arrays"):
            d = getattr(self, what)
            if not isinstance(d, Mapping) or not all(isinstance(k, str) for k in d):
                raise refuse(what, d, "expected a dict keyed by input name")
            object.__setattr__(self, what, dict(d))
        for name, dims in self.shapes.items():
            if isinstance(dims, (str, bytes)) or not hasattr(dims, "__iter__") or not all(_is_int(d) for d in dims):
                raise refuse(f"shapes[{name!r}]", dims, "expected a tuple of integers, e.g. (1, 3, 224, 224)")
            if any(d < 0 for d in dims):
                raise refuse(f"shapes[{name!r}]", dims, "dimensions must be non-negative")
            self.shapes[name] = tuple(int(d) for d in dims)
        for name, value in self.files.items():
            if isinstance(value, (bool, int, float, list, np.generic)):
                # a literal value (``{"sr": 16000}``), written as --input sr=16000 gives it
                self.files[name] = json.dumps(np.asarray(value).tolist() if isinstance(value, np.generic) else value)
            elif isinstance(value, os.PathLike):
                self.files[name] = os.fspath(value)
            elif not isinstance(value, str):
                raise refuse(f"files[{name!r}]", value, "expected a .npy / .pb path or a literal value such as 16000 "
                             "(arrays go in arrays=)")

    def __repr__(self) -> str:  # a notebook's view: the arrays' types and shapes, not their values
        arrays = "{" + ", ".join(f"{k!r}: {array_text(v)}" for k, v in self.arrays.items()) + "}"
        return (f"InputSpec(seed={self.seed}, int_range={self.int_range}, shapes={self.shapes}, files={self.files}, "
                f"arrays={arrays}, arrays_from={self.arrays_from!r}, arrays_complete={self.arrays_complete})")

    def names(self) -> list[str]:
        """Every input name the spec mentions."""
        return list(dict.fromkeys(list(self.arrays) + list(self.files) + list(self.shapes)))


def array_text(value) -> str:
    """An array as a notebook's view shows it: its type and shape ("float32[1x3x224x224]"), not its values."""
    dtype = getattr(value, "dtype", None)
    return f"{dtype if dtype is not None else type(value).__name__}[{'x'.join(str(d) for d in np.shape(value))}]"


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def check_bool(value, what: str) -> bool:
    """``value`` when it is True or False (numpy's too, as a bool); else a UsageError naming ``what``: a
    switch given "no", 0 or None would be taken by its truth, not by what it says."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise UsageError(f"{what}={clip(controls(repr(value)), 60)}: expected True or False")


@dataclass
class RunConfig:
    """How onnxruntime runs a model: ``device`` (auto, cpu or cuda), ``opt_level`` (onnxruntime's graph
    optimisations: off, basic, extended, layout, all), ``io_binding`` (outputs bound on the device),
    ``cache`` (reuse probed copies across runs: runtime.plan_cache) and ``tf32`` (the CUDA provider's float32
    matrix products and convolutions in TF32: None leaves its default, which is on; ``--runtime-option tf32=0``)."""

    device: str = "auto"  # auto | cpu | cuda
    opt_level: str = "off"  # off | basic | extended | layout | all
    io_binding: bool = True
    cache: bool = True  # reuse probed copies across runs (runtime.plan_cache; --no-cache)
    tf32: bool | None = None  # onnxruntime's CUDA provider option use_tf32; None: its default (on)

    def __post_init__(self) -> None:
        # device and opt_level are checked where a runtime reads them (runtime.ort), in its words
        self.io_binding = check_bool(self.io_binding, "RunConfig io_binding")
        self.cache = check_bool(self.cache, "RunConfig cache")
        if self.tf32 is not None:
            self.tf32 = check_bool(self.tf32, "RunConfig tf32")


class Settings(NamedTuple):
    """Where a runner's runtime and device were set, each (API parameter, flag): its errors name the one
    the user gave (diff's reference side is set by --vs-runtime / --vs-device, not --runtime / --device)."""

    runtime: tuple[str, str] = ("runtime", "--runtime")
    device: tuple[str, str] = ("device", "--device")


@dataclass
class RunInfo:
    """How a run really went: the device and providers, the opt level (None for runtimes other than
    onnxruntime), session and run seconds, the runtime, its options and the float precision it computed
    in where not the graph's own (OpenVINO's bf16)."""

    device: str  # the device that really ran: "cpu" or "cuda"
    providers: list[str]
    opt_level: str | None  # onnxruntime's graph optimisation level; None for the runtimes that take none
    session_seconds: float
    run_seconds: float
    runtime: str = "onnxruntime"  # the runner's kind: onnxruntime, onnx.reference, openvino, tensorrt
    runtime_options: dict[str, str] = field(default_factory=dict)  # the runtime's own settings (--runtime-option)
    precision: str | None = None  # what the runtime computes floats in where not the graph's types ('bf16'), else None

    def __post_init__(self) -> None:
        if self.runtime != "onnxruntime":  # RunConfig's default "off" is no setting of OpenVINO's or TensorRT's
            self.opt_level = None


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
    # the inputs of the run (what histograms and reruns of this result must use again); {} when unknown
    feed: dict[str, np.ndarray] = field(default_factory=dict)
    # the tensors whose fast in-graph rows could not stand and were summarised again (NaN or Inf, an extreme
    # range, rows laid out for other dims than they ran with: ``runtime.runners.readback.second_look``)
    reran: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        stats = sum(1 for v in self.stats.values() if v is not None)
        parts = [f"{len(self.plan.probes)} tensors probed", f"{stats} with statistics"]
        parts += [f"{len(self.arrays)} values kept"] if self.arrays else []
        parts += [f"{len(self.unobserved)} unobserved"] if self.unobserved else []
        parts += [f"{len(self.notes)} notes"] if self.notes else []
        return (f"ProbeResult({os.path.basename(str(self.plan.source))} on {self.info.runtime} {self.info.device}: "
                + ", ".join(parts) + ")")

    def rows(self):
        """(TensorRef, TensorStats | None) per probed tensor, in the plan's (topological) order."""
        for p in self.plan.probes:
            yield p.ref, self.stats.get(p.ref.key)


# why a tensor stayed unmatched in a diff, as a fact (the reason says it in words); the JSON report's "cause"
NO_COUNTERPART = "no-counterpart"  # nothing in the other model stands for the same value
OTHER_SHAPE = "shape"  # a candidate had another shape
FOLDED = "folded"  # fused into a neighbour in the other model, and compared there
NOT_OBSERVABLE = "not-observable"  # the runner cannot return it (fused away, not saved)
NO_GRADIENT = "no-gradient"  # diff --grad: the other model has no gradient for it
DIFFERENT_FUNCTION = "different-function"  # a candidate computes another function of the data
OTHER_VALUES = "other-values"  # diff --grad --vs-torch: a weight named as a parameter holds other values (no fold explains them)
NO_NUMBERS = "no-numbers"  # a sequence, an optional, a map or strings: nothing to measure (no verdict hangs on it)
# integer codes of no known scale (a weight's int8 moved by a Transpose): compared on neither side (no verdict hangs
# on it: a model output of such codes is compared as it is, ``match.observe``)
NO_SCALE = "no-scale"
COPY = "copy"  # holds the values of a tensor of its own model that is compared (an Identity, a Reshape)
GRADIENT_STOPPED = "gradient-stopped"  # diff --grad: an op without a gradient rule stops this weight's gradient
# an output left unpaired so fails a diff's verdict: nothing stood for it (a weight gradient: or one side could not
# compute it); compare.result judges by it, report.diff and compare.merge_diff read it in the JSON
UNPAIRED = (NO_COUNTERPART, NOT_OBSERVABLE, OTHER_SHAPE, GRADIENT_STOPPED)
MAP = ("user_map", "--map")  # the pairs a user gives, as the API and the command line name them (the messages about them)


# the settings of a Selection, as the API (its fields) and the command line (its flags) name them: the
# messages of a criterion that matches nothing name both (``errors.setting_error``)
OPS, NAMES, RANGE = ("ops", "--op"), ("names", "--name"), ("range", "--range")


@dataclass(frozen=True)
class Selection:
    """Which tensors to probe: ``ops`` (op types or globs), ``names`` (tensor or node names or globs),
    ``all`` (every float tensor), ``range`` ("START:END" over node names or indices) and
    ``include_constants`` (tensors computed from weights alone); the default is the layers' outputs."""

    ops: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    all: bool = False
    range: str | None = None  # "START:END", each an index, a node name, or empty
    include_constants: bool = False

    def __post_init__(self) -> None:
        # one string is one op type or glob, not its characters (frozen: object.__setattr__ for the tuples)
        for what in ("ops", "names"):
            v = getattr(self, what)
            items = (v,) if isinstance(v, str) else tuple(v) if isinstance(v, (list, tuple, set, frozenset)) else None
            if items is None or not all(isinstance(x, str) for x in items):
                raise UsageError(f"Selection {what}={controls(repr(v))[:60]}: expected a string or a tuple of strings")
            object.__setattr__(self, what, items)
        object.__setattr__(self, "ops", op_types(self.ops))
        if self.range is not None and not isinstance(self.range, str):
            raise UsageError(f"Selection range={controls(repr(self.range))[:60]}: expected 'START:END', e.g. '10:40'")
        if self.range is not None and not self.range.strip():  # '' is no range: not the default, silently
            raise setting_error(UsageError, RANGE, "'': expected 'START:END', e.g. '10:40'")
        for what in ("all", "include_constants"):  # "no" would select everything by its truth
            object.__setattr__(self, what, check_bool(getattr(self, what), f"Selection {what}"))

    @property
    def is_default(self) -> bool:
        return not (self.ops or self.names or self.all)

    def describe(self, canonical: bool = False, cli: bool = True) -> str:
        """The selection as its flags. ``canonical``: op types and globs sorted, as a dataset report records
        it: a union of matches does not depend on the order they were given in (``--op Relu --op Conv`` and
        ``--op Conv,Relu`` on two workers are shards of one selection). ``cli=False``: as the API's fields
        (``ops=('Conv',), all=True``), for a message to a caller of the API."""
        ops, names = (sorted(set(self.ops)), sorted(set(self.names))) if canonical else (self.ops, self.names)
        if not cli:
            fields = [f"ops={tuple(ops)!r}"] * bool(ops) + [f"names={tuple(names)!r}"] * bool(names)
            fields += ["all=True"] * self.all + [f"range={self.range!r}"] * bool(self.range)
            return ", ".join(fields) or "the default selection"
        parts = [f"--op {o}" for o in ops] + [f"--name {n}" for n in names]
        parts += ["--all"] if self.all else []
        parts += [f"--range {self.range}"] if self.range else []
        return " ".join(parts) or "the default selection"


def op_types(values: tuple[str, ...]) -> tuple[str, ...]:
    """Op types of repeated or comma-separated values (an op type holds no comma: ``--op Conv,Relu`` is
    ``--op Conv --op Relu``, in every command and the debugger), spaces around each dropped, each once;
    an empty one (``--op ,``, ``Conv,,Relu``) is refused, as it would select by nothing."""
    out: list[str] = []
    for item in values:
        for op in item.split(","):
            if not op.strip():
                raise setting_error(UsageError, OPS, f"{quote(item)}: an empty op type; give op types "
                                    "separated by commas or repeat the flag, e.g. Conv,Relu")
            if op.strip() not in out:
                out.append(op.strip())
    return tuple(out)


Progress = Callable[[int, int], object]  # progress(done, total), called as the work goes on
# what vs_torch and the torch functions take: a torch.nn.Module (Any: torch, an optional extra, is imported only
# inside onnxprobe.torch's functions), a (module, example args) tuple or "FILE.py:FUNC"
TorchLike = Union[Any, tuple, str, os.PathLike]


@dataclass
class Model:
    """A loaded model (``graph.model.load``; ``graph.model.Model``, which ``api.Model`` is, adds ``Model.of``,
    which needs onnx): defined here, without onnx, for what names it but needs none (``api.lean``).
    ``proto``: the model as read, with shape inference's value_info filled in (nothing else changed but a
    domain imported twice, collapsed to the import onnxruntime runs with). ``api.load`` reads every weight into it;
    a command given a path to run on onnxruntime (``layers``, ``diff``) leaves the big weights of external data files
    there, and those inside a model file of 4 MiB or more in it (``graph.weight_files``: no bytes in the proto, read
    from the file by ``graph.tensor_data.to_array``); such a proto is what its result's ``plan.base`` and a diff's
    ``a.model`` / ``b.model`` hold, and ``api.load`` of it gives a whole copy;
    ``source``: the path (or a label); ``warnings``: what loading had to say (shape inference degraded...)."""

    proto: Any  # onnx.ModelProto
    source: str
    warnings: list[str] = field(default_factory=list)

    @property
    def inferred(self) -> Any:
        """The annotated model (the same object as ``proto``)."""
        return self.proto

    @property
    def name(self) -> str:
        return os.path.basename(self.source)
