"""A diff request as the plan cache keys it (``ticket``), and its entry made ready to serve (``prepare``): with
numpy and onnxruntime alone, before onnx and the comparison code are imported (``api.diff_lean``).

The key is the request as stated, as ``api.lean`` keys ``layers`` (both paths, as given and resolved; selection,
per-tensor criteria, map, input flags, device, opt level; ``plan_cache.key_of`` adds onnxprobe's version and code),
but for the diff's own criterion (--metric, --atol, --rtol...), which judges what the run measures: an entry serves
any criterion that its rows measure (``api.diff_direct._criteria``). ``prepare``
reads and checks the entry, copies both files' weights out (each file checked against its record) and starts the
merged graph's session (``runtime.direct.Pending``); ``api.diff_direct`` serves from it.
"""

from __future__ import annotations

from onnxprobe.api.lean import servable, servable_file, settings_request
from onnxprobe.runtime import direct, plan_cache
from onnxprobe.types import InputSpec, RunConfig

ENTRY = 3  # the layout of an entry's metadata (``_template``): another one is a miss


class Ticket:
    """A request that may be served: both files' paths and states when it came, the index key, the run's settings,
    its inputs' spec (the seed the entry records) and whether it asked for every metric (``extras``)."""

    def __init__(self, paths: list[str], states: list[tuple], key: str, config: RunConfig, spec: InputSpec,
                 extras: bool = True):
        self.paths, self.states, self.key, self.config, self.spec = paths, states, key, config, spec
        self.extras = extras


def ticket(a, b, *, others: bool, runtime: str, runtime_options, selection, config, inputs, per_tensor,
           user_map, introduced, max_memory, extras) -> Ticket | None:
    """The request as stated, when one this mode may serve (the module's docstring); None for anything else.
    ``others``: whether any other reference, --profile, --separate-runs or --fp32-sensitivity was asked for. Made
    before the request is checked (``api.diff_lean``): an argument the normal path refuses is refused there before
    anything is served, and one it takes is keyed as it came (``servable``: the types themselves, defaults filled
    in), so that a request is served only an entry that a normal run of the same request wrote, but for its criterion
    (``api.diff_direct`` judges the run by the request's, where the entry's rows measure it)."""
    from onnxprobe.compare.frozen import freeze

    if others or b is None or runtime != "ort" or runtime_options or max_memory is not None or type(extras) is not bool:
        return None
    settings = servable(config, inputs, selection)
    if settings is None:
        return None
    config, inputs, selection = settings
    files = [servable_file(m) for m in (a, b)]
    if None in files:
        return None
    try:
        request = {"command": "diff", "models": [[path, real] for path, real, _ in files],
                   **settings_request(config, inputs, selection, extras), "introduced": bool(introduced),
                   "per_tensor": freeze(per_tensor), "map": freeze(user_map), "entry": ENTRY}
        key = direct.request_key(request)
    except (ValueError, TypeError):  # a criterion or map the normal path takes and the key cannot say
        return None
    return Ticket([path for path, _, _ in files], [state for _, _, state in files], key, config, inputs, extras)


class Prepared:
    """An entry ready to serve: its skeleton's session building (``runtime.direct.Pending``), its metadata (checked:
    ``_fits``), and the inputs drawn from its recipe."""

    def __init__(self, meta: dict, feeds: dict, pending: direct.Pending):
        self.meta, self.feeds, self.pending = meta, feeds, pending

    def close(self) -> None:
        self.pending.close()


def prepare(t: Ticket) -> Prepared | None:
    """The entry of ``t`` read and checked, both files' weights copied out (each checked against its record) and
    its session started; None on a miss, a damaged entry or a file of other bytes than the entry's."""
    got = plan_cache.read_entry(t.key)
    if got is None:
        return None
    skel, meta = got
    try:
        if not isinstance(meta, dict) or not _fits(meta, t):
            return None
        weights = direct.load_weights([(path, state[0], record, record["moves"])
                                       for path, state, record in zip(t.paths, t.states, meta["files"])], meta["packed"],
                                      meta["data_files"])
        if weights is None:
            return None  # another file now: the normal path, whose entry replaces this one
        pending, feeds = direct.start_drawn(skel, weights, t.config.opt_level, meta)
    except KeyboardInterrupt:
        raise
    except Exception:  # noqa: BLE001 - the normal path runs, and says what fails in its words
        return None
    return Prepared(meta, feeds, pending)


def _fits(meta: dict, t: Ticket) -> bool:
    from onnxprobe.runtime.direct_files import outside_fits

    files = meta.get("files")
    return (meta.get("entry") == ENTRY and outside_fits(meta) and plan_cache.strings(meta.get("outputs"))
            and isinstance(meta.get("packed"), int) and isinstance(meta.get("prepack"), bool)
            and isinstance(meta.get("template"), plan_cache.Deferred) and isinstance(meta.get("seed"), int)
            and isinstance(meta.get("int_range"), list) and len(meta["int_range"]) == 2
            and all(isinstance(v, int) for v in meta["int_range"]) and isinstance(meta.get("recipe"), list)
            and all(isinstance(r, list) and len(r) == 3 and isinstance(r[0], str) and isinstance(r[1], str)
                    and isinstance(r[2], list) and all(isinstance(d, int) and d >= 0 for d in r[2]) for r in meta["recipe"])
            and isinstance(files, list) and len(files) == 2
            and all(isinstance(f, dict) and f.get("size") == s[0] and isinstance(f.get("digest"), str)
                    and direct.moves_fit(f.get("moves"), s[0], meta["packed"]) for f, s in zip(files, t.states)))


def template_fits(tp: dict) -> bool:
    """Whether the plain fields of an entry's template are of the types ``_remember`` writes (as
    ``runtime.direct._meta_fits`` checks its entries'): an entry whose digest holds but whose notes are not
    strings, say, is a miss, not an internal error in the report. Asked once the template is parsed, while the
    session builds (``api.diff_direct``)."""
    def pair(x, ok) -> bool:  # one value of each side
        return isinstance(x, list) and len(x) == 2 and all(ok(v) for v in x)

    return (plan_cache.strings(tp.get("notes")) and plan_cache.strings(tp.get("notes_cli"))
            and len(tp["notes_cli"]) == len(tp["notes"]) and pair(tp.get("describe"), lambda v: isinstance(v, str))
            and pair(tp.get("labels"), lambda v: isinstance(v, str))
            and pair(tp.get("facts"), lambda v: v is None or isinstance(v, dict)) and isinstance(tp.get("measured"), str)
            and plan_cache.strings(tp.get("exact")) and plan_cache.strings(tp.get("alike"))
            and isinstance(tp.get("rtols"), list) and all(type(v) in (int, float) for v in tp["rtols"])
            and isinstance(tp.get("raw"), dict) and all(isinstance(v, list) for v in tp["raw"].values())
            and isinstance(tp.get("extras"), bool) and isinstance(tp.get("frozen"), dict))
