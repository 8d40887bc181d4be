"""The state of a debugging session, with no I/O: nothing here prints, prompts or reads the terminal.

One ``Target`` per loaded model (label ``a``, and ``b`` for a second model) holds the model, its
``GraphIndex``, its probe set (tensor names, in topological order), its cached ``Results`` and a cursor
(a node index, for goto/step/back): ``session.targets``. The ``State`` holds the targets and what they
share: the input specification (seed, integer range, shapes, files or values per input; each model's
feed from it and changes to it are ``session.feeding``'s part of the State), the device and the
optimisation level.

Results are cached per *run key* = (digest of the input values, device, opt-level). Asking for
statistics of tensors computes only those not cached for the current key; when the key changes the
cache is dropped. So ``run`` re-runs only what changed: nothing when nothing changed, only the new
probes when probes were added, everything when inputs or device changed. onnxruntime sessions are kept
by ``api.Runner`` (per set of exposed tensors), so new inputs re-use them.

Long work goes through ``busy(message)``, a context manager the front end may replace (a spinner);
Ctrl-C raises KeyboardInterrupt out of any method, and nothing half-computed is kept.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Callable, ContextManager, Iterator

import numpy as np

from onnxprobe import api
from onnxprobe.errors import UsageError
from onnxprobe.session.feeding import Feeding
from onnxprobe.session.inputs import SessionInputs
from onnxprobe.session.targets import RAW_CACHE_BYTES, Results, RunReport, Target
from onnxprobe.text import as_word, quote, some
from onnxprobe.types import TensorRef

WALK_BEHIND, WALK_AHEAD = 8, 32  # goto/step/back compute the statistics of this window of nodes at once


def _null_busy(message: str) -> ContextManager:
    return contextlib.nullcontext()


class State(Feeding):
    def __init__(self, models: list[api.Model], *, inputs: api.InputSpec | None = None, device: str = "auto",
                 opt_level: str = "off", selection: api.Selection | None = None, cache: bool = True,
                 max_memory: int | None = None) -> None:
        if not models:
            raise UsageError("no model to debug")
        if len(models) > 2:
            raise UsageError("debug takes one model, or two to compare")
        self.targets: dict[str, Target] = {}
        for label, m in zip(("a", "b"), models):
            t = Target(label, m, api.index(m))
            self.targets[label] = t
        spec = inputs or api.InputSpec()
        if spec.arrays:  # a test data set's input_N.pb without a name: model a's input of its position
            spec = replace(spec, arrays=api.named_by_position(spec.arrays, models[0]))
        self.inputs = SessionInputs(spec)
        self.set_device(device)
        if opt_level not in api.OPT_LEVELS:
            raise UsageError(f"--opt-level {as_word(opt_level)}: choose one of {', '.join(api.OPT_LEVELS)}")
        self.opt_level = opt_level
        # --max-memory: raw values are fetched in runs of at most half of it, and at most this much is kept
        api.raw_batches([], max_memory)  # a bad budget is refused here, as the API refuses it
        self.max_memory = max_memory
        self.cache = cache  # the plan cache (runtime.plan_cache): --no-cache turns it off for every run of the session
        self.busy: Callable[[str], ContextManager] = _null_busy
        self.current = "a"  # the target goto/step/back walk
        self.extras: dict[str, object] = {}  # room for features that attach later (gradients...)
        for t in self.targets.values():
            self.probe_add(t, selection or api.Selection())
        self._check_inputs(flags=True)

    # -- targets -------------------------------------------------------------------------------------
    def target(self, label: str | None = None) -> Target:
        label = (label or "a").lower()
        label = {"1": "a", "2": "b", "other": "b", "first": "a", "second": "b"}.get(label, label)
        if label not in self.targets:
            if label == "b":
                raise UsageError("no second model: start with `onnxprobe debug MODEL OTHER`")
            raise UsageError(f"--model {as_word(label)}: choose {' or '.join(self.targets)}")
        return self.targets[label]

    @property
    def a(self) -> Target:
        return self.targets["a"]

    # -- device --------------------------------------------------------------------------------------
    def set_device(self, device: str) -> str:
        """The API's one check (an unknown device, CUDA not usable): its error names the flag --device at the
        start, and the `device` command later (``errors.speaking``, in which the commands run)."""
        self.resolved_device = api.resolve_device(device)
        self.device = device
        return self.resolved_device

    def config(self) -> api.RunConfig:
        return api.RunConfig(device=self.resolved_device, opt_level=self.opt_level, cache=self.cache)

    # -- models --------------------------------------------------------------------------------------
    def replace_model(self, t: Target, model: api.Model, *, forward: api.Model | None = None,
                      runs: api.Model | None = None) -> int:
        """Work on ``model`` (e.g. the same model with its backward graph; ``forward``: the model it came
        from; ``runs``: the model that computes ``model``'s tensors, where ``model`` only shows it) from now
        on; caches are dropped, probes that still exist are kept. Returns the number of backward tensors."""
        t.forward, t.runs = forward, runs
        t.grad_shapes = None  # set by `grad` for the feed it attached the backward graph at
        t.model = model
        t.index = api.index(model)
        t.results = Results()
        t.prober = None
        t.feed_cache = None
        t.last_key = None
        t.probes = [n for n in t.probes if n in t.index.refs]
        if t.cursor is not None and t.cursor >= len(t.index.sites):
            t.cursor = None
        for k in [k for k in self.extras if k in ("diff", "match")]:
            del self.extras[k]
        known = {x.name for tt in self.targets.values() for x in self.specs(tt)}
        spec = self.inputs
        if any(n not in known for n in spec.spec.names()):
            self.inputs = spec.changed(shapes={k: v for k, v in spec.shapes.items() if k in known},
                                       files={k: v for k, v in spec.files.items() if k in known},
                                       arrays={k: v for k, v in spec.arrays.items() if k in known})
            for tt in self.targets.values():
                tt.feed_cache = None
        return sum(1 for r in t.index.refs.values() if r.direction == "backward")

    # -- results -------------------------------------------------------------------------------------
    def run_key(self, t: Target) -> tuple:
        return (self.feed(t)[1], self.resolved_device, self.opt_level)

    def _why(self, t: Target, key: tuple) -> str:
        old = t.last_key
        if old is None:
            return "first run"
        reasons = []
        if old[0] != key[0]:
            reasons.append("inputs changed")
        if old[1] != key[1]:
            reasons.append(f"device {old[1]} → {key[1]}")
        if old[2] != key[2]:
            reasons.append(f"opt-level {old[2]} → {key[2]}")
        return ", ".join(reasons) or "first run"

    def ensure_stats(self, t: Target, names, *, what: str | None = None) -> RunReport:
        """Statistics (and runtime shapes) of ``names`` for the current inputs/device; computes only what
        the cache lacks."""
        names = [n for n in dict.fromkeys(names) if n in t.index.refs]
        feed = self.feed(t)[0]
        key = self.run_key(t)
        reason = ""
        if t.results.key != key:
            reason = self._why(t, key)
            t.results.reset(key)
        missing = [n for n in names if n not in t.results.stats]
        if not missing:
            return RunReport([], len(names), "", t.results.info)
        if not reason:
            reason = f"{len(missing)} new tensor{'s' if len(missing) != 1 else ''}"
        label = f" {t.label}" if len(self.targets) > 1 else ""
        with self.busy(f"running{label} ({what or f'{len(missing)} tensors'})…"):
            res = self._probe(t, feed, missing)
        r = t.results
        r.stats.update(res.stats)
        for n in missing:
            r.stats.setdefault(n, None)
        r.shapes.update(res.shapes)
        if res.outputs:
            r.outputs = res.outputs
        if res.info.providers:
            r.info = res.info
        r.notes = list(dict.fromkeys(r.notes + res.notes + res.plan.warnings))
        r.runs += 1
        t.last_key = key
        return RunReport(missing, len(names) - len(missing), reason, res.info if res.info.providers else r.info)

    def ensure_values(self, t: Target, names, skip_not_run: bool = False) -> dict[str, np.ndarray]:
        """Raw values of tensors (graph inputs and weights come from the host; node outputs from a run). A
        tensor inside a body that did not run on these inputs (an If branch not taken, a loop of no
        iteration) has no value: an error naming it, or (``skip_not_run``) left out of the result."""
        out: dict[str, np.ndarray] = {}
        for part in self.iter_values(t, names, skip_not_run):
            out.update(part)
        return out

    def iter_values(self, t: Target, names, skip_not_run: bool = False) -> Iterator[dict[str, np.ndarray]]:
        """``ensure_values`` a run's worth at a time, in the order of ``names``: each dict holds at most half of
        --max-memory of values (those kept from before, and one run's; a larger tensor comes alone), and the
        values kept for show/save are first cut to the other half, so a caller that drops each dict before
        asking for the next (``api.save_npz`` of this generator) never has more than the budget alive."""
        names = [n for n in dict.fromkeys(names)]
        for n in names:
            if n not in t.index.refs:
                raise UsageError(f"no tensor named {quote(n)}")
        feed = self.feed(t)[0]
        key = self.run_key(t)
        if t.results.key != key:
            t.results.reset(key)
        limit = self.max_memory or RAW_CACHE_BYTES
        refs, r = t.index.refs, t.results
        runs = api.raw_batches([(n, r.shapes.get(n, refs[n].shape), refs[n].dtype) for n in names], self.max_memory)
        for chunk in runs:
            have = {n: r.raw[n] for n in chunk if n in r.raw}  # kept here: fetching may evict them
            missing = [n for n in chunk if n not in have and n not in r.not_run]
            if missing:
                r.keep_within(limit // 2, keep=set(have))  # room for this run beside what stays kept
                with self.busy(f"fetching {some(missing, form=str)}"):
                    res = self._probe(t, feed, [], raw=missing, stats=False)
                for n in missing:
                    if n in res.arrays:
                        have[n] = res.arrays[n]
                        r.keep_raw(n, res.arrays[n], limit)
                    elif refs[n].scope:  # carried out of a body that did not run: no value of its own
                        r.not_run.add(n)
                    elif n in t.index.no_tensors:
                        raise UsageError(f"{n}: {t.index.no_tensors[n]}, not a tensor: no values to show or save "
                                         "(onnxprobe probes tensors only)")
                    else:
                        raise UsageError(f"{n}: no value (a tensor whose type is unknown)")
                for n, s in res.shapes.items():
                    if n not in r.not_run:  # a body that did not run: its placeholder's shape is none of the tensor's
                        r.shapes.setdefault(n, s)
                del res
            gone = [n for n in chunk if n in r.not_run]
            if gone and not skip_not_run:
                where = " / ".join(refs[gone[0]].scope)
                raise UsageError(f"{gone[0]}: not run on these inputs (inside {where}: an If branch not taken, or a loop "
                                 "of no iteration)")
            for n in chunk:
                if n in r.raw:
                    r.raw.move_to_end(n)
            part = {n: have[n] for n in chunk if n not in r.not_run}
            del have
            yield part
            del part

    def prober(self, t: Target) -> api.Prober:
        """The target's Prober (of the model that runs, ``t.runs or t.model``) for the session's device and opt
        level (a new one when they changed)."""
        cfg = self.config()
        if t.prober is None or t.prober.config != cfg:
            t.prober = api.Prober(t.runs or t.model, cfg)
        return t.prober

    def _probe(self, t: Target, feed, names, *, raw=(), stats: bool = True):
        """``Prober.run`` of the tensors ``names`` and ``raw`` by the model that runs; where that is a converted
        copy (``t.runs``), a tensor of the model that the copy lacks (pruned, renamed) by the model as loaded.
        A run that fails says what about the inputs may be why, as ``layers`` does (``Feeds.explained``: guessed
        dimensions, random integers), in the words of the command that runs (``errors.speaking``)."""
        with self.feed(t)[2].explaining():
            return self._probe_runs(t, feed, names, raw=raw, stats=stats)

    def _probe_runs(self, t: Target, feed, names, *, raw=(), stats: bool = True):
        if t.runs is None or t.forward is None:
            return self.prober(t).run(feed, names, raw=raw, stats=stats)
        have = api.index(t.runs).refs
        res = self.prober(t).run(feed, [n for n in names if n in have], raw=[n for n in raw if n in have], stats=stats)
        own, own_raw = [n for n in names if n not in have], [n for n in raw if n not in have]
        if own or own_raw:
            inputs = {s.name for s in self.specs_of(t.forward)}
            more = api.Prober(t.forward, self.config()).run({k: v for k, v in feed.items() if k in inputs}, own,
                                                            raw=own_raw, stats=stats)
            res.stats.update(more.stats)
            res.shapes.update(more.shapes)
            res.arrays.update(more.arrays)
        return res

    def run(self, t: Target) -> RunReport:
        """Statistics of the probes and the model's outputs, computing only what changed."""
        return self.ensure_stats(t, list(t.probes) + [o for o in t.index.outputs if o in t.index.refs], what="probes")

    def stats_rows(self, t: Target, names) -> list[tuple[TensorRef, api.TensorStats | None]]:
        return [(t.index.refs[n], t.results.stats.get(n)) for n in names if n in t.index.refs]

    # -- selections and probes -----------------------------------------------------------------------
    def select(self, t: Target, sel: api.Selection) -> list[str]:
        """Tensor names a selection picks (``api.select``: the same words as on the command line, graph
        inputs included where a name glob matches them)."""
        return [r.key for r in api.select(t.model.proto, sel, sites=t.index.sites) if r.key in t.index.refs]

    def probe_add(self, t: Target, sel: api.Selection) -> list[str]:
        new = [n for n in self.select(t, sel) if n not in set(t.probes)]
        t.probes = sorted(set(t.probes) | set(new), key=t.index.position.__getitem__)
        return new

    def probe_rm(self, t: Target, sel: api.Selection) -> list[str]:
        gone = [n for n in self.select(t, sel) if n in set(t.probes)]
        t.probes = [n for n in t.probes if n not in set(gone)]
        return gone

    def probe_clear(self, t: Target) -> int:
        n = len(t.probes)
        t.probes = []
        return n

    # -- where ---------------------------------------------------------------------------------------
    def where_domain(self, t: Target, *, weights: bool = False, after: int | None = None, since: int | None = None) -> list[str]:
        names = t.index.order if weights else [n for n in t.index.order if n not in t.index.constants]
        if after is not None:
            names = [n for n in names if t.index.refs[n].index > after]
        if since is not None:
            names = [n for n in names if t.index.position[n] > since]
        return names

    def where(self, t: Target, condition, *, after: int | None = None, weights: bool = False, since: int | None = None):
        """The first tensor in topological order (after node index ``after``, or after the tensor at position
        ``since``, when given) whose statistics satisfy ``condition``; None when there is none. Searches graph
        inputs and activations, and weights (initializers, Constant outputs and what is computed from them alone)
        when ``weights``. Computes the statistics of every tensor searched."""
        names = self.where_domain(t, weights=weights, after=after, since=since)
        self.ensure_stats(t, names, what=f"statistics of {len(names)} tensors")
        return api.where(self.stats_rows(t, names), condition, shapes=t.results.shapes)

    def readers_that_ran(self, t: Target, name: str) -> list:
        """The nodes that read ``name`` and ran on the current inputs, in order: a node inside a body (an If
        branch not taken, a loop of no iteration) ran when one of its outputs got a value."""
        readers = t.index.consumers.get(name, [])
        outs = {id(s): [t.index.key_at(s.scope, o) for o in s.node.output if o] for s in readers}
        inside = [o for s in readers if s.scope for o in outs[id(s)] if o in t.index.refs]
        self.ensure_stats(t, inside, what="what ran")
        return [s for s in readers if not s.scope or not any(o in t.index.refs for o in outs[id(s)])
                or any(o in t.results.shapes for o in outs[id(s)])]

    # -- walking -------------------------------------------------------------------------------------
    def goto(self, t: Target, key: str | int) -> int:
        site = t.index.node(key)
        t.cursor = site.index
        self.current = t.label
        return site.index

    def step(self, t: Target, n: int = 1, *, weights: bool = False) -> int:
        """Move the cursor ``n`` nodes (back when negative) in topological order. Nodes that only compute
        weights (Constant, and what depends on constants alone) are passed over unless ``weights``."""
        sites = t.index.sites

        def stop(i: int) -> bool:
            outs = [o for o in sites[i].node.output if o]
            return weights or not outs or not all(o in t.index.constants for o in outs)

        i = t.cursor if t.cursor is not None else (-1 if n > 0 else len(sites))
        d = 1 if n > 0 else -1
        moved = 0
        for _ in range(abs(n)):
            j = i + d
            while 0 <= j < len(sites) and not stop(j):
                j += d
            if not 0 <= j < len(sites):
                break
            i, moved = j, moved + 1
        if not moved:
            raise UsageError("already at the last node" if n > 0 else "already at the first node")
        t.cursor = i
        self.current = t.label
        return i

    def node_tensors(self, t: Target, lo: int, hi: int) -> list[str]:
        out: list[str] = []
        for s in t.index.sites[max(lo, 0):hi + 1]:
            out += [k for x in list(s.node.input) + list(s.node.output) if x for k in [t.index.key_at(s.scope, x)]
                    if k in t.index.refs]
        return list(dict.fromkeys(out))

    def ensure_walk_window(self, t: Target, index: int) -> RunReport:
        """Statistics for the tensors around node ``index``, so the next steps answer at once."""
        here = self.node_tensors(t, index, index)
        if all(n in t.results.stats for n in here) and t.results.key == self.run_key(t):
            return RunReport([], len(here), "")
        window = self.node_tensors(t, index - WALK_BEHIND, index + WALK_AHEAD)
        return self.ensure_stats(t, window, what=f"tensors around node {index}")
