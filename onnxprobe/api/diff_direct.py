"""``api.diff``'s direct mode: the second ``diff`` of the same two model files with the same request (or one that
asks another criterion of the same run) runs the merged graph the first one left in the plan cache, over the files'
own bytes, without reading either model's graph, validating it, observing it or matching it again (on PP-OCRv4 det,
0.3 s of a 1.3 s ``diff --all``).

As ``api.lean`` for ``layers``: an index entry keyed by the request as stated before any model is read
(``api.diff_ticket``: both paths, as given and resolved; selection, per-tensor criteria, map, input flags, device,
opt level; ``plan_cache.key_of`` adds onnxprobe's version and code), never by the files' bytes; ``api.diff`` (``api.diff_lean``)
prepares the entry and starts its session before this module and onnx are imported. It records both files (size, status, digest: a file of
other bytes is a miss), the merged graph as a skeleton whose stubs point into one in-memory buffer of both files'
weights (``runtime.direct.file_weights``), the inputs' recipe, and what the result says that no run computes: the
matching with its unmatched entries and their reasons, the comparison's default criterion, each pair's rtol, the
notes, the sides' descriptions (``compare.frozen``: JSON, never pickle). The run's rows are read and judged by the
code the normal path reads and judges them with (``compare.fused``'s readers, ``compare.diff.judged`` and
``assembled``), by the request's own criterion over that default: --atol, --min-sqnr or --metric cosine asked of a
diff already run are served (a user trying thresholds), where the rows recorded measure what it judges (each pair
measured with the same rtol, or judged by a metric that reads no allclose excess: an allclose rtol other than the
entry's builds its own graph, whose rows hold each pair's excess over that rtol).

Served only where the first run measured every pair in its one run of both models, on onnxruntime's CPU provider,
with inputs drawn from the seed; anything else (another reference than a model B, --separate-runs, --profile,
saved activations, input files, a one run that failed or handed pairs back to the host, a pair whose shapes
differed, a tensor measured exact on one run and not on the other) goes the normal way, which writes the entry
again. A served result's sides are built when something reads them (``result.a.runner``, ``result.a.model``): the
report does not.
"""

from __future__ import annotations

from types import SimpleNamespace

from onnx import TensorProto

from onnxprobe.api.diff_ticket import ENTRY, Prepared, Ticket, template_fits
# imported with this module, not inside served's guard: an import that a Ctrl-C breaks (a C extension's ImportError or
# RuntimeError) would read there as an entry it cannot serve, and the Ctrl-C be lost (QA)
from onnxprobe.compare.criteria import chosen, judged_by_extras
from onnxprobe.compare.diff import assembled, judged
from onnxprobe.compare.frozen import thaw
from onnxprobe.compare.fused import read
from onnxprobe.compare.fused_cache import same_pairs
from onnxprobe.compare.fused_stacks import fits
from onnxprobe.compare.measure import Measured, criterion_of
from onnxprobe.compare.sides import Side
from onnxprobe.errors import cli_words, said
from onnxprobe.runtime import direct, plan_cache
from onnxprobe.runtime.model_file import same_file
from onnxprobe.stats.metrics import IntroducedError, Tolerance

# --- writing an entry (after a normal run, onnx loaded) ------------------------------------------------------------

def remember(t: Ticket, res) -> None:
    """The index entry of a normal run that qualifies (the module's docstring)."""
    try:
        _remember(t, res)
    except (OSError, ValueError, TypeError, KeyError):  # only a cache: a run that cannot be indexed is served the normal way
        return


def _remember(t: Ticket, res) -> None:
    from onnxprobe.compare.frozen import freeze
    from onnxprobe.graph.merge import PREFIX, PREFIX_A
    from onnxprobe.graph.skeleton import point_stubs_at, stubs, unpoint_stubs
    from onnxprobe.runtime.prepack import prepacks

    plan = res.plan
    fg = getattr(plan, "fused", None)
    if fg is None or fg.model is None or not plan.fuse or plan.skip or plan.floats or plan.profile or not plan.report \
            or plan.default is None:
        return
    if res.in_graph != len(plan.report) or any(r.problem is not None or r.metrics is None for r in res.results):
        return
    tolerances = [plan.tolerance_of(p) for p in plan.report]
    if any(x.atol_relative for x in [*tolerances, plan.tolerance, *(plan.per_tensor or {}).values()]):
        return  # judged at the run's scale: what the run measures sets the criterion
    recipe = direct.recipe_of(res.feed, t.spec.seed, t.spec.int_range)
    if recipe is None:
        return
    held: list[dict] = [{}, {}]
    for name in stubs(fg.model):
        side = 0 if name.startswith(PREFIX_A) else 1 if name.startswith(PREFIX) else None
        if side is None:
            return
        held[side][name] = (name[len(PREFIX_A if side == 0 else PREFIX):], fg.weights.get(name))
    files: dict = {}
    records, packed = [], 0
    for path, before, h in zip(t.paths, t.states, held):
        got = direct.file_weights(path, before, h, files, packed)
        if got is None:
            break
        record, packed = got
        records.append(record)
    outside: dict = {"data_files": [], "folder": ""}
    if len(records) < 2:  # both models' weights in external data files: onnxruntime reads them there (runtime.direct_files)
        found = _outside(t, fg, held)
        if found is None:
            return
        (files, records, outside), packed = found, 0
    exact = plan.exact_inputs
    template = {
        # one freeze: the report's pairs are the matching's, and come back as the same objects
        # the comparison's default criterion (``compare.criteria.default_tolerance``, a fact of the two models), over
        # which a request's own is taken when served (``_criteria``): each entry serves every criterion it measures
        "frozen": freeze({"report": list(plan.report), "default": plan.default,
                          "per_tensor": plan.per_tensor, "matching": res.matching, "selected_b": set(res.selected_b),
                          "selected_a": res.selected_a}),
        "rtols": [float(plan.rtol_of(p)) for p in plan.report], "measured": res.measured, "notes": list(res.notes),
        "notes_cli": [cli_words(n) for n in res.notes],  # a note said in each reader's words keeps both (errors.said)
        "describe": [res.a.describe(), res.b.describe()], "labels": [str(res.a.label), str(res.b.label)],
        "facts": [res.a.facts(), res.b.facts()],
        "exact": sorted({r.pair.b.name for r in res.results if r.metrics is not None and r.metrics.exact}),
        "alike": sorted(exact[1]) if exact is not None else [],
        "raw": {str(k): list(v) for k, v in fg.raw.items()}, "extras": bool(fg.extras), "same": sorted(fg.same),
        "stacks": fg.stacks,
    }
    pointed = point_stubs_at(fg.model, files)
    try:
        serialised = fg.model.SerializeToString()
    finally:
        unpoint_stubs(pointed)
    meta = {"entry": ENTRY, "outputs": list(fg.outputs), "recipe": recipe, "seed": int(t.spec.seed),
            "int_range": [int(v) for v in t.spec.int_range], "packed": packed, "files": records, "template": template,
            "prepack": prepacks(fg.model),  # as the session of the normal path (runtime.ort.create_session)
            **outside}
    plan_cache.write_entry(t.key, serialised, meta, later="template")  # parsed while the session builds


def _outside(t: Ticket, fg, held: list[dict]) -> tuple[dict, list, dict] | None:
    """Where both models' stubs lie in their external data files (``runtime.direct_files``): (the stubs' files, at
    locations relative to one folder, the two models' records, and the data files' records and that folder); None
    where a model's do not (a model of its own bytes beside one of external data is not served: onnxruntime, given
    in-memory files, looks every weight up among them)."""
    from onnxprobe.graph.merge import PREFIX, PREFIX_A
    from onnxprobe.graph.skeleton import is_stub
    from onnxprobe.runtime.direct_files import outside_weights, relative

    files, records, data_files = {}, [], []
    for side, (path, before, h) in enumerate(zip(t.paths, t.states, held)):
        prefix = PREFIX_A if side == 0 else PREFIX
        inline = {i.name[len(prefix):]: i for i in fg.model.graph.initializer if i.name.startswith(prefix) and not is_stub(i)}
        found = outside_weights(path, before, {name: tensor for name, tensor in h.values()}, inline)
        if found is None:
            return None
        by_name = {name: stub for stub, (name, _) in h.items()}
        files.update({by_name[name]: where for name, where in found[0].items()})
        records.append(found[1])
        data_files += found[2]
    files, folder = relative(files)
    return files, records, {"data_files": data_files, "folder": folder}


# --- serving a hit ------------------------------------------------------------------------------------------------

def served(t: Ticket, build, got: Prepared, tolerance: Tolerance | None = None):
    """The DiffResult of entry ``t.key``, prepared (``api.diff_ticket.prepare``: read, checked, its session started),
    run now and judged by ``tolerance`` (the request's criterion, checked; None: the comparison's default); None on
    a run the normal path must make (the module's docstring; a criterion under which the merged graph would be
    another: ``_criteria``). ``build(feeds)``: side A and side B as the normal path makes them, for these feeds
    (called when something reads the result's sides). The prepared entry is let go either way."""
    try:
        return _served(t, got, build, tolerance)
    except KeyboardInterrupt:
        raise
    except Exception:  # noqa: BLE001 - the normal path runs, and says what fails in its words
        return None
    finally:
        got.close()  # its session and weights let go before the report (or the normal path) goes on


def _served(t: Ticket, got: Prepared, build, given: Tolerance | None):
    meta, feeds = got.meta, got.feeds
    tp = meta["template"].value()  # while the session builds, as the thaw (plan_cache.Deferred)
    if not isinstance(tp, dict) or not template_fits(tp):
        return None
    f = thaw(tp["frozen"])
    report, rtols = f["report"], tp["rtols"]
    if not (isinstance(report, list) and isinstance(rtols, list) and len(report) == len(rtols)):
        return None
    judging = _criteria(t, f, given, rtols, bool(tp["extras"]))
    if judging is None:
        return None
    tolerance, tolerances = judging
    at = {id(p): k for k, p in enumerate(report)}
    plan = SimpleNamespace(report=report, tolerance_of=lambda p: tolerances[at[id(p)]],
                           rtol_of=lambda p: tolerances[at[id(p)]].measured_rtol,
                           extras=bool(tp["extras"]), kernel_ms={}, profile_summary={}, matching=f["matching"],
                           selected_b=f["selected_b"], selected_a=f["selected_a"], tolerance=tolerance,
                           per_tensor=f["per_tensor"])
    raw = {int(k): v for k, v in tp["raw"].items()}
    same = same_pairs(tp.get("same"), len(report))  # checked here, where the pairs are counted
    if same is None or not fits(tp.get("stacks"), len(report)):
        return None
    fetched = got.pending.run(feeds, meta["outputs"])[0]
    out = read(fetched, report, raw, 0, plan.rtol_of, plan.tolerance_of, plan.extras, same, tp["stacks"])
    if out.problems or set(out.sums) != set(range(len(report))):
        return None  # a pair handed back to the host (NaN / Inf, a maximum too near its threshold): the normal path
    measured = {k: Measured(s, out.introduced.get(k), in_graph=True) for k, s in out.sums.items()}
    results, scaled = judged(plan, measured)
    if sorted({r.pair.b.name for r in results if r.metrics is not None and r.metrics.exact}) != tp["exact"]:
        return None  # another run measured other tensors exact: what the introduced errors take from it differs
    alike = set(tp["alike"])
    for r in results:
        if r.pair.b.name in alike and r.metrics is not None and r.pair.b.kind == "float":
            r.introduced = IntroducedError.of(r.metrics)
    sides = _Sides(lambda: build(feeds), t, meta["files"])
    a, b = (ServedSide(label, text, facts, sides, k)
            for k, (label, text, facts) in enumerate(zip(tp["labels"], tp["describe"], tp["facts"])))
    notes = [said(lambda say, n=n, c=c: c if say.cli else n) for n, c in zip(tp["notes"], tp["notes_cli"])]
    res = assembled(plan, a, b, results, scaled, tp["measured"], notes, len(measured))
    res.feed = feeds
    plan_cache.touch(t.key)
    return res


def _criteria(t: Ticket, f: dict, given: Tolerance | None, rtols: list, extras: bool) -> tuple[Tolerance, list] | None:
    """The request's criterion over the comparison's default (the entry's, as ``compare.diff.prepare`` takes it) and
    each pair's (``compare.measure.criterion_of``), where the entry's rows measure what they judge: each pair measured
    with the rtol its rows were built with, or judged by a criterion that reads no allclose excess (its rtol 0: the
    metrics then take max |a-b| for it, as rows built with rtol 0 make it, and no threshold reads it:
    ``stats.metrics.from_sums``, ``Tolerance.near_float32_threshold``), the same metrics computed
    (``judged_by_extras``), and no atol judged at the run's scale (``remember`` writes no such entry); None for any
    other (the normal path builds its graph)."""
    default, per_tensor = f.get("default"), f.get("per_tensor")
    if not isinstance(default, Tolerance) or not (per_tensor is None or isinstance(per_tensor, dict)):
        return None
    tolerance = chosen(given, default)
    tolerances = [criterion_of(p, tolerance, per_tensor) for p in f["report"]]
    if any(x.measured_rtol not in (0, r) for x, r in zip(tolerances, rtols)) or any(x.atol_relative for x in [tolerance, *tolerances]):
        return None
    # the merged graph stacks small float32 pairs by shape and rtol (``compare.fused_stacks``): a criterion that
    # merges two of the entry's rtols into one, or parts one, would have stacked them otherwise (a pair of a rule of
    # rtol 0 beside many of 1e-3, then all judged by SQNR: stacked with them, measured alone in the entry's rows)
    classes = {(r, x.measured_rtol) for x, r, p in zip(tolerances, rtols, f["report"])
               if all(o.kind == "float" and o.elem_type == TensorProto.FLOAT for o in (p.a, p.b))}
    if not len({r for r, _ in classes}) == len({n for _, n in classes}) == len(classes):
        return None
    if extras != (t.extras or judged_by_extras(tolerance, per_tensor)):
        return None  # a light request whose criterion reads no extra metric, served rows that hold them (or the reverse)
    return tolerance, tolerances


class _Sides:
    """Both sides of a served diff, built as the normal path builds them (``build()``) when first read, from
    the files as they are then: each must still be the file the run read (``t``'s state when the request came,
    or the bytes of the entry's ``records``), before and after the build; a file edited since is refused (the
    normal path's sides hold the models it read; these would silently be another model than the one measured)."""

    def __init__(self, build, t: Ticket, records: list):
        self._build, self._got, self._t, self._records = build, None, t, records

    def get(self, k: int) -> Side:
        if self._got is None:
            self._check()
            got = tuple(self._build())
            self._check()
            self._got = got
        return self._got[k]

    def _check(self) -> None:
        for who, path, state, record in zip("AB", self._t.paths, self._t.states, self._records):
            if not same_file(path, state, record):
                from onnxprobe.errors import ModelError
                from onnxprobe.text import clean

                raise ModelError(f"{who} ({clean(path)}): the model file changed since this diff ran, which was served "
                                 "from the plan cache and reads the models when first used: run the diff again")


def _built(field: str):
    return property(lambda self: getattr(self._sides.get(self._k), field))


class ServedSide(Side):
    """A side of a served diff: its label and description as the first run had them; the rest (model, runner,
    observation, notes) built when first read (``_Sides``)."""

    def __init__(self, label: str, described: str, facts: dict | None, sides: _Sides, k: int):
        self.label, self._described, self._facts, self._sides, self._k = label, described, facts, sides, k

    def describe(self) -> str:
        return self._described

    def facts(self) -> dict | None:
        return self._facts

    model = _built("model")
    runner = _built("runner")
    observation = _built("observation")
    notes = _built("notes")
    hidden_cause = _built("hidden_cause")
    hidden_causes = _built("hidden_causes")
    runner_hidden = _built("runner_hidden")
    own_snapshot = _built("own_snapshot")
