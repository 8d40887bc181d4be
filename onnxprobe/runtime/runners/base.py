"""The runner interface: one small class per backend that executes a model (onnxruntime, onnx.reference,
saved activations; OpenVINO, TensorRT and PyTorch add a file each), as Polygraphy's runners are.

A ``Runner`` says what it can observe and returns values of tensors on given inputs:

- ``values(names, feeds)``: tensor name -> value (numpy, or an OrtValue left on the device);
- ``unobservable(names)``: the names it cannot return, each with the reason ("fused away", "not in
  the .npz"...), so that callers list them instead of leaving silent gaps;
- ``describe()``: one line for reports; ``kind``: the backend's name, for JSON.

A ``GraphRunner`` executes ONNX graphs, so it can also run graphs derived from the model (probed copies,
the introduced-error cones of ``diff``, fp32 reruns) through ``execute``; ``probe`` is the one run
sequence of onnxprobe: expose the tensors (graph.expose, planned by ``planning``) -> run -> read the
outputs back as statistics, shapes and values (``readback``), with the masked rerun for tensors that hold
NaN or Inf. Graph inputs and weights are never run: their values and statistics come from the feeds and
the initializers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import OrderedDict
from dataclasses import replace
from typing import ClassVar

import numpy as np
import onnx

from onnxprobe.errors import STATS_ONLY, DeviceUnavailable, ExecutionError, SessionError, settings_error
from onnxprobe.graph.expose import unsure_stack
from onnxprobe.graph.select import refs_by_key
from onnxprobe.graph.stale_shapes import without_shapes
from onnxprobe.graph.summary import non_tensor_outputs
from onnxprobe.runtime.budget import check_run_fits
from onnxprobe.runtime.runners.planning import make_plan
from onnxprobe.runtime.runners.readback import (body_weights, constant_value, read_host_refs, read_probes, second_look,
                                                 without_idle_branches)
from onnxprobe.text import some
from onnxprobe.types import Probe, ProbePlan, ProbeResult, RunConfig, RunInfo, TensorRef


class Runner(ABC):
    kind: ClassVar[str] = "runner"
    runs_graphs: ClassVar[bool] = False  # can run other ONNX graphs built from the model (GraphRunner)
    takes_feeds: ClassVar[bool] = True  # runs on the model's inputs (saved activations do not)
    float64_in_float32: bool = False  # computes float64 tensors in float32 (OpenVINO's CPU plugin), once a run showed it

    def __init__(self, model: onnx.ModelProto, config: RunConfig | None = None, label: str = ""):
        self.model = model
        self.config = config or RunConfig()
        self.label = label
        self.device = "cpu"  # the device that really runs (resolved)
        self.notes: list[str] = []

    def describe(self) -> str:
        return f"{self.label} ({self.kind})"

    def facts(self) -> dict:
        """What ``describe`` says, as JSON: model, runtime, device, opt_level (onnxruntime's; else None)
        and providers (what really ran; None while the runner has run nothing of its own, as B in diff's
        one run of both models, which A's session runs)."""
        providers = getattr(self, "providers", None)
        return {"model": self.label, "runtime": self.kind, "device": self.device,
                "opt_level": self.config.opt_level if self.kind == "onnxruntime" else None,
                "providers": (list(providers()) or None) if callable(providers) else None,
                "precision": self.inference_precision(), "runtime_options": self.runtime_options()}

    def inference_precision(self) -> str | None:
        """The float precision the runtime computes in where not the graph's own ('bf16', 'tf32'), else None."""
        return None

    def integer_kernels(self) -> dict[str, int]:
        """The integer precisions of the compute layers the runtime compiled a QDQ graph into ('u8': count)."""
        return {}

    def runtime_options(self) -> dict[str, str]:
        """The runtime's own settings (--runtime-option KEY=VALUE), as given."""
        return dict(getattr(self, "options", None) or {})

    def note(self, text: str) -> None:
        """Add ``text`` to the runner's notes, once (a runner's later runs find the same things)."""
        if text not in self.notes:
            self.notes.append(text)

    def infinities_lost(self) -> None:
        """Told by ``diff`` where a float64 tensor of this runtime is finite at a position the other side holds
        an infinity: a runtime that computes float64 in float32 (``float64_in_float32``) says why in its note.
        Nothing by default."""

    def check_outputs(self, probes: list[Probe], model: onnx.ModelProto, feeds: dict, got: dict) -> None:
        """Where exposing tensors can change what the runtime computes (its reduced-precision rounding moves
        with the graph's outputs): a note when the probed run's model outputs ``got`` differ from a plain
        run's. None by default: a runtime that computes what the graph says needs no second run."""

    def unobservable(self, names: list[str]) -> dict[str, str]:
        """The names among ``names`` this runner cannot return, with the reason."""
        return {}

    # a runner that can compute its values again with some of them replaced (``replay``): the error each
    # layer introduces on its own is then measured without running ONNX cones (a PyTorch module)
    replays: ClassVar[bool] = False

    def replay(self, names: list[str], known: dict, feeds: dict[str, np.ndarray]) -> dict:
        """The values of ``names``, each computed from the values in ``known`` (name -> value of the
        other side) where it reads them, instead of this runner's own."""
        raise NotImplementedError

    @abstractmethod
    def values(self, names: list[str], feeds: dict[str, np.ndarray], *, keep_on_device: bool = False) -> dict:
        """Tensor name -> value for each name the runner can observe."""


# A tensor of at most this many bytes (for the feeds' shapes) gets its statistics from its values on the
# host, in float64, instead of from ~20 statistics nodes: each node costs onnxruntime ~30-50 us to create
# and the rewrite ~30 us to emit, where numpy summarises 256 KiB of float32 in ~0.2 ms
# (``TensorStats.from_array``'s float32 form). The values leave the run at its end, so their total is
# bounded too, and the smallest go first (``planning.planned_shapes``): memory grows with the largest tensors, not
# with how many are probed. Measured, interleaved, PP-OCRv4 rec ``layers --all`` (425 tensors): 64 KiB
# each -> 159 on the host, 5,926 nodes, 0.87 s, 166 MB; 256 KiB -> 177, 5,578 nodes, 0.83 s, 168 MB;
# 1 MiB -> 236, 4,457 nodes, 0.80 s, 189 MB (the total then bounds it).
# The third number: a tensor of at most this many bytes is summarised on the host whatever the total, for its
# values cost less memory than the nodes they replace: onnxruntime holds ~45 KB for each tensor's ~27 statistics
# nodes (a chain of 4,000 MatMul, Add and Tanh of [16, 96] each, 12,000 tensors of 6 KiB, `layers --all`,
# interleaved: 12.0 -> 4.8 s and 917 -> 613 MB on a first run, 7.9 -> 2.5 s and 816 -> 559 MB served; plain
# inference 1.7 s, 398 MB). Memory then grows with the number of such tensors, by less than their nodes' did.
SMALL_ON_HOST = (256 * 1024, 32 * 2**20, 32 * 1024)
# The same for diff's one run (compare.fused), per pair. It also takes pairs whose size nobody can tell and
# that no row can measure (no known rank or type: reshapes to sizes computed at run time) raw, counted at
# the per-tensor size; past the total they cost two more runs of both whole models, which fetch them whole
# too. 64 KiB, not 256: 256 made no difference to diff on PP-OCRv4 (interleaved) and would count each
# pair of unknown size 4x larger. 32 MB, not 16: PP-OCRv4 rec's 57 such pairs (0-50 KiB each) then fit,
# and diff --all went 2.64 -> 2.40 s for 232 -> 241 MB (interleaved).
# The third number as SMALL_ON_HOST's, for each tensor of a pair: a row costs 29 nodes or more per pair. Float32
# pairs within it that share a static shape and criterion with STACK_MIN or more others are measured in the graph
# instead, a stack of them at a time (compare.fused_stacks: ~30 nodes a stack of up to 64 pairs): their values
# then never reach the host (the chain above in `diff --all`: 98 MB of them, 538 -> 441 MB served).
SMALL_PAIRS_ON_HOST = (64 * 1024, 32 * 2**20, 32 * 1024)


class GraphRunner(Runner):
    runs_graphs = True
    max_plans: ClassVar[int] = 4  # probed copies (and their sessions) kept for reuse, by cache key
    # the runtime takes a skeleton's weights apart (``execute(weights=)``): probed copies are then made
    # over a skeleton and never hold a copy of the model's weights
    takes_weights: ClassVar[bool] = False

    def __init__(self, model: onnx.ModelProto, config: RunConfig | None = None, label: str = ""):
        super().__init__(model, config, label)
        self._plans: OrderedDict = OrderedDict()
        self._key_shapes: dict = {}  # a caller's key -> the input shapes its first plan was made for (probe)
        self._fits: set = set()  # (model, input shapes) that check_run_fits passed: a dataset's batches check once
        # the user's model, where the runner runs one onnxprobe built from it (grad: forward + backward):
        # a failed run is diagnosed by running that one, not the built one as if it were the user's
        self.diagnose_with: onnx.ModelProto | None = None
        self.cast_float_feeds = False  # feeds of another float type than the model's inputs cast to them (diff)
        self._unlaying = False  # run_plan's second plan without declared dims is under way

    @abstractmethod
    def execute(self, model: onnx.ModelProto, feeds: dict, outputs: list[str], *, device_outputs: list[str] = (),
                keep_on_device: bool = False, key=None) -> tuple[dict, float]:
        """Run ``model`` (the runner's own model or one derived from it) and return (outputs, seconds).
        ``outputs`` come back as numpy arrays; ``device_outputs`` stay where the runtime produced them
        when ``keep_on_device`` (else numpy too). ``key``: the caller's name for ``model``, under which a
        runner may keep its compiled form for the next call."""

    def load(self, model: onnx.ModelProto, *, key=None, weights: dict | None = None) -> None:
        """Compile ``model`` as ``execute`` would, running nothing (a run that asks for no tensor: a model
        whose outputs are all sequences, maps or optionals): a runtime that refuses the model raises its
        error (``SessionError``) here too. ``key`` and ``weights`` as for ``execute``. Nothing by default,
        for a runtime with no separate load step."""

    def providers(self) -> list[str]:
        return [self.kind]

    def session_seconds(self) -> float:
        return 0.0

    def pin_shapes(self, key, shapes: dict) -> None:
        """Make ``key``'s plan for these input shapes (a dataset's first sample), whatever sample this runner
        sees first: every process of a dataset run then summarises each sample the same way (``probe``)."""
        self._key_shapes.setdefault(key, {k: tuple(v) for k, v in shapes.items()})

    def _plan(self, model: onnx.ModelProto, refs: list[TensorRef], key, input_shapes: dict | None = None, **kw) -> ProbePlan:
        """``planning.make_plan``'s plan, kept under ``key`` (the last ``max_plans`` keys) for the next call."""
        if key is not None and key in self._plans:
            self._plans.move_to_end(key)
            return self._plans[key]
        plan = make_plan(model, refs, input_shapes, label=self.label, takes_weights=self.takes_weights,
                         cache=self.config.cache, **kw)
        if key is not None:
            self._plans[key] = plan
            while len(self._plans) > self.max_plans:
                self._plans.popitem(last=False)
        return plan

    def _execute_plan(self, plan: ProbePlan, feeds: dict, outputs: list[str], **kw) -> tuple[dict, float]:
        """``execute`` on a plan's model, with its weights apart when the plan is a skeleton."""
        if plan.weights is not None:
            kw["weights"] = plan.weights
        return self.execute(plan.model, feeds, outputs, **kw)

    def probe(self, refs: list[TensorRef], feeds: dict[str, np.ndarray], *, stats: bool = True, shapes: bool = True,
              raw: bool | set[str] = False, nonfinite: str = "deferred", model: onnx.ModelProto | None = None,
              key=None, outputs: bool = True, check: bool = True, extras: bool = True) -> ProbeResult:
        """The one run sequence: expose ``refs`` in (a copy of) ``model`` (default: the runner's), run
        once, read the statistics, shapes and raw values back (``run_plan``). ``raw``: all refs, or a set
        of names. ``outputs``: also return the model's own outputs. ``key``: reuse the probed copy and its
        compiled form made under the same key (the debugger's repeated runs, a dataset's batches). ``check``:
        the runtime's notes on the statistics (``check_statistics``; not for the masked rerun of some of
        them, which the first run's check covers). ``extras`` False: the block form leaves out Σ|x| and the
        zero count (``graph.expose``; its own plan, in memory and in the disk cache)."""
        base = model if model is not None else self.model
        in_graph = [r for r in refs if r.kind == "node"]
        shapes_now: dict | None = {k: tuple(np.shape(v)) for k, v in feeds.items()}
        fits = (id(base), tuple(sorted(shapes_now.items())))
        if fits not in self._fits:
            check_run_fits(base, shapes_now, sum(int(getattr(v, "nbytes", 0)) for v in feeds.values()))
            self._fits.add(fits)
        if key is not None and self._key_shapes.setdefault(key, shapes_now) != shapes_now:
            # a plan made for one set of input shapes (concrete sizes choose its statistics' block rows,
            # graph.stats_nodes.block_size) may not fit another: feeds of varying shapes under one key (a
            # dataset's batches) get one plan made for any shape, kept under a key of its own
            key, shapes_now = (key, "any shape"), None
        if key is not None and not extras:
            key = (key, "light")  # a plan without Σ|x| never serves a call that wants them, nor the reverse
        plan = self._plan(base, in_graph, key, shapes_now,
                          stats=stats, shapes=shapes, raw=raw, nonfinite=nonfinite, small=SMALL_ON_HOST,
                          count_from_shape=True, extras=extras)
        return self.run_plan(plan, feeds, host_refs=[r for r in refs if r.kind != "node"], stats=stats, shapes=shapes,
                             raw=raw, key=key, outputs=outputs, order=[r.key for r in refs], rerun=nonfinite == "deferred",
                             check=check)

    def run_plan(self, plan: ProbePlan, feeds: dict[str, np.ndarray], *, host_refs: list[TensorRef] = (),
                 stats: bool = True, shapes: bool = True, raw: bool | set[str] = False, key=None, outputs: bool = True,
                 order: list[str] | None = None, rerun: bool = True, check: bool = True) -> ProbeResult:
        """Run a probed copy (``plan.model``, made by ``graph.expose``) and read its outputs back; then
        summarise again, with masks, the tensors whose fast statistics came out non-finite (a NaN or Inf
        inside: one more run over just them, none in the usual case; not when ``rerun`` is False, for a
        plan already made with masks). ``host_refs``: graph inputs and weights, whose statistics come from
        ``feeds`` and the initializers."""
        base = plan.base if plan.base is not None else self.model
        host, device, own = fetched(plan, base, outputs)
        # nothing of the graph asked for (only graph inputs or weights probed, the model's outputs not wanted or
        # none a tensor): no run, which onnxruntime refuses anyway ("at least one output should be requested"),
        # but the model is still loaded, so that a runtime that refuses it says so
        try:
            if host or device:
                out, seconds = self._execute_plan(plan, feeds, host, device_outputs=device, key=key)
            else:
                self.load(plan.model, key=key, weights=plan.weights)
                out, seconds = {}, 0.0
        except ExecutionError as e:
            # values of Loop/Scan body tensors are stacked per iteration: onnxruntime refuses a stack whose
            # shapes change (a tensor that grows, or lies in an If branch inside the loop)
            stacked = [p.ref.name for p in plan.probes if p.raw_output and unsure_stack(p.ref)]
            err = self._diagnosed(e, base, feeds, stacked)
            laid = {p.ref.name for p in plan.probes if p.planned_shape}
            if getattr(err, "probed_only", False) and laid and rerun and not self._unlaying:
                # statistics laid out for declared dims that the fed values contradict (a Reshape of 2M
                # elements to [-1, 1024] blocks, a sum over an axis the tensor lacks: misplanned's case, where
                # the run failed): once more without those declarations, as flat float64 rows
                self._unlaying = True
                try:
                    again = self.probe([replace(p.ref, shape=None) if p.ref.name in laid else p.ref for p in plan.probes]
                                      + list(host_refs), feeds, stats=stats, shapes=shapes, raw=raw,
                                      model=without_shapes(base, laid), outputs=outputs, check=check,
                                      extras=all(p.stats_extras for p in plan.probes))
                finally:
                    self._unlaying = False
                again.reran = sorted(set(again.reran) | {p.ref.key for p in plan.probes if p.ref.name in laid})
                return again
            raise err from e
        st, shp, arrays = read_probes(plan.probes, out)
        arrays = without_idle_branches(arrays, base)
        reran: list[str] = []
        if stats and rerun:
            # rows laid out for dims the run's tensor does not have: a declared shape that the fed values
            # contradicted (a Range to a fed limit: Σ|x| of 2M elements summed in float32 as if of 6, abs_mean
            # off in the 3rd digit); graph.stale_shapes only sees what the input shapes contradict
            moved, bad = second_look(plan.probes, st, shp)
            reran = [r.key for r in bad]
            if bad:
                # those are summarised again without the declared shapes: flat float64 rows, right at any size
                again = self.probe([replace(r, shape=None) if r.name in moved else r for r in bad], feeds, shapes=False,
                                   nonfinite="masked", model=without_shapes(base, moved) if moved else base,
                                   outputs=False, check=False)
                st.update(again.stats)
        read_host_refs(host_refs, feeds, base, st, shp, arrays, stats=stats, shapes=shapes, raw=raw)
        if stats and check:
            self.check_statistics(plan.probes, st, {o.name: out[o.name] for o in base.graph.output if o.name in out})
            if outputs:
                self.check_outputs(plan.probes, base, feeds, {o.name: out[o.name] for o in base.graph.output if o.name in out})
        probes = list(plan.probes) + [Probe(ref=r) for r in host_refs]
        if order is not None:
            rank = {n: k for k, n in enumerate(order)}
            probes.sort(key=lambda p: rank.get(p.ref.key, len(rank)))
        view = ProbePlan(plan.model, probes, plan.source, list(plan.warnings), base=base, weights_from=plan.weights_from,
                         weights=plan.weights)
        info = RunInfo(device=self.device, providers=self.providers(), opt_level=self.config.opt_level,
                       session_seconds=self.session_seconds(), run_seconds=seconds, runtime=self.kind,
                       runtime_options=self.runtime_options(), precision=self.inference_precision())
        return ProbeResult(view, info, st, shp, arrays, {n: out[n] for n in own if n in out and outputs},
                           notes=list(self.notes), reran=reran)

    def _diagnosed(self, e: ExecutionError, base: onnx.ModelProto, feeds: dict, stacked: list[str] = ()) -> ExecutionError:
        """A probed copy's failed run, told apart: the model run as it is, on the same feeds, fails too
        (the model and its inputs are the cause: that error, not one that names a statistics node onnxprobe
        added), or it runs (onnxprobe's additions are the cause: said so). Not for a device that is
        unavailable, which no rerun changes."""
        own = self.diagnose_with
        base = own if own is not None else base
        if isinstance(e, DeviceUnavailable) or not base.graph.output:
            return e
        if own is not None:  # the built model's extra inputs (a loss's target) are not the user's model's
            takes = {i.name for i in own.graph.input}
            feeds = {k: v for k, v in feeds.items() if k in takes}
        try:
            self.execute(base, feeds, [o.name for o in base.graph.output])
        except SessionError as plain:  # the model cannot be loaded at all: its own error, inputs aside
            return plain
        except ExecutionError as plain:
            return ExecutionError(f"the model fails on these inputs as it is, without onnxprobe's probes: {plain}")
        except Exception:  # noqa: BLE001 - the rerun only tells the two apart; the first error stands
            return e
        if own is not None:
            return ExecutionError(f"{e} (the model itself runs on these inputs: what fails is the graph onnxprobe built "
                                  "from it, on this runtime and these types)")
        if stacked:
            names = some(stacked)
            return settings_error(ExecutionError, lambda say: (
                f"{e} (the model itself runs on these inputs: what fails is stacking the values of {names}, tensors of a "
                "Loop or Scan body, one per iteration, which cannot be done where their shape changes between iterations, "
                "they lie in an If branch there, or shape inference leaves the rank of a Scan body's tensor unknown "
                "(onnxruntime's Scan needs it); their statistics can be taken without their values: " + say.either(
                    "api.layers without save or save_to, or api.mark(..., stats=True)", "drop --save, or mark --stats",
                    about=STATS_ONLY) + ")"))
        err = ExecutionError(f"{e} (the model itself runs on these inputs: what failed is onnxprobe's probed copy of it; "
                             f"please report this, with ONNXPROBE_DEBUG=1's output)")
        err.probed_only = True  # run_plan may plan it again
        return err

    def check_statistics(self, probes: list[Probe], stats: dict, outputs: dict | None = None) -> None:
        """What this runtime's statistics of these tensors may not tell: notes (``note``), and statistics taken
        again from the values the run returned (``outputs``: the graph's outputs) where the in-graph ones are not
        of those values; none by default."""

    def known_values(self, names: list[str], feeds: dict) -> tuple[dict, list[str]]:
        """({name: value} for the graph inputs (from ``feeds``) and weights among ``names``, the names left
        to run)."""
        inits = {t.name for t in self.model.graph.initializer}
        inputs = {i.name for i in self.model.graph.input} - inits
        inits |= body_weights(self.model)  # read on the host, as a main-graph weight is
        found: dict = {}
        rest = []
        for n in dict.fromkeys(names):
            if n in inputs and n in feeds:
                found[n] = feeds[n]
            elif n in inits:
                found[n] = constant_value(self.model, n)
            else:
                rest.append(n)
        return found, rest

    def values(self, names: list[str], feeds: dict[str, np.ndarray], *, keep_on_device: bool = False, key=None) -> dict:
        """Raw values: node outputs from one run of a probed copy (lifted out of If/Loop/Scan bodies),
        graph inputs from ``feeds``, weights from the initializers. ``key``: keep the probed copy and its
        compiled form for the next call with the same names (a dataset's samples)."""
        found, rest = self.known_values(names, feeds)
        run = refs_by_key(self.model, rest)  # a key qualified by its body: that body's tensor (graph.select)
        if run:
            key = None if key is None else ("values", key, tuple(r.key for r in run))
            # the input shapes: declared shapes that they contradict are left out of the probed copy
            plan = self._plan(self.model, run, key, {k: tuple(np.shape(v)) for k, v in feeds.items()},
                              stats=False, shapes=False, raw=True)
            self.notes += [w for w in plan.warnings if w not in self.notes]
            raw = list(dict.fromkeys(p.raw_output for p in plan.probes if p.raw_output))
            out, _ = self._execute_plan(plan, feeds, [], device_outputs=raw, keep_on_device=keep_on_device, key=key)
            _, _, arrays = read_probes(plan.probes, out)
            found.update(without_idle_branches(arrays, self.model))
        return found


def fetched(plan: ProbePlan, base: onnx.ModelProto, outputs: bool = True) -> tuple[list[str], list[str], list[str]]:
    """What a run of ``plan`` (a probed copy of ``base``) fetches: (outputs to the host: the probes' rows, shapes
    and small values, and with ``outputs`` the model's own; raw values bound on the device; the model's own
    outputs among them). ``runtime.direct`` keeps the host list of a ``layers`` run, to fetch the same."""
    probe_outputs = {n for p in plan.probes for n in (p.stats_output, p.stats_sums, p.shape_output, p.exact_extremes) if n}
    probe_outputs |= {p.raw_output for p in plan.probes if p.raw_for_stats}  # small: to the host with the rows
    lifted_raw = {p.raw_output for p in plan.probes if p.raw_output and p.ref.scope}
    model_outputs = {o.name for o in base.graph.output}  # a small one summarised on the host is still returned
    skip = non_tensor_outputs(base)  # a sequence, optional or map output: no tensor to read back as one
    own = [o.name for o in plan.model.graph.output if o.name not in skip
           and (o.name in model_outputs or (o.name not in probe_outputs and o.name not in lifted_raw))]
    raw_names = list(dict.fromkeys(p.raw_output for p in plan.probes if p.raw_output and not p.raw_for_stats))
    host = list(dict.fromkeys([o.name for o in plan.model.graph.output if o.name in probe_outputs] + (own if outputs else [])))
    device = [r for r in raw_names if r not in host]
    return host, device, own
