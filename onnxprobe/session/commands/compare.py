"""The debugger's commands about two models and gradients: ``diff`` and ``match`` (``api.diff`` on the two
loaded Models, on the session's inputs) and ``grad`` (``api.grad_plan``). Results are cached in
``state.extras`` per run key, like the statistics: a second ``diff`` or a ``match`` after a ``diff`` costs
nothing until inputs, device or models change. ``extras["diff"]`` is the last ``diff`` the user ran (what
``save html`` writes); a ``match`` with no such ``diff`` to read keeps its own under ``extras["match"]``."""

from __future__ import annotations


import numpy as np
from rich.text import Text

from onnxprobe import api
from onnxprobe.errors import UsageError, cli_words
from onnxprobe.report.diff import COLUMNS, JUDGED_COLUMNS, PROBLEM, cosine_cell, diff_renderables
from onnxprobe.report.format import safe, num, shape as fmt_shape
from onnxprobe.session.commands.table import Env, close_name, command, pop_json_view, tag, with_json
from onnxprobe.session.parse import parse_selection, pop_all, pop_option
from onnxprobe.text import quote


def _two(env: Env, what: str) -> None:
    if "b" not in env.state.targets:
        raise UsageError(f"{what} needs a second model: start with `onnxprobe debug MODEL OTHER`")


def _diff_result(env: Env, selection: api.Selection, *, introduced: bool = True, slot: str = "diff",
                 criteria: tuple = (None, None)) -> api.DiffResult:
    """``api.diff`` of the two models on the session's inputs, cached in ``extras[slot]`` (a ``diff`` of
    what a ``match`` already compared takes its result); ``criteria``: (tolerance, per_tensor) as the
    criterion flags give them (``api.tolerances_from_flags``), (None, None) for the comparison's default."""
    st = env.state
    a, b = st.target("a"), st.target("b")
    feed = st.feed(a)[0]
    models = (a.runs or a.model, b.runs or b.model)
    if (a.forward is None) != (b.forward is None):  # a loss and gradients against none: the models as loaded
        models = (a.forward or a.model, b.forward or b.model)
        feed = {s.name: feed[s.name] for s in st.specs_of(models[0]) if s.name in feed}
    key = (st.run_key(a), st.run_key(b), selection, introduced, criteria)
    for cached in (st.extras.get(slot), st.extras.get("match")):
        if cached is not None and cached[0] == key:
            st.extras[slot] = cached
            return cached[1]
    with st.busy("comparing a with b…"):
        res = api.interruptibly(api.diff, *models, selection=selection, config=st.config(),
                                inputs=api.InputSpec(arrays=dict(feed)), introduced=introduced,
                                tolerance=criteria[0], per_tensor=criteria[1] or None)
    if models[0] is a.runs or models[1] is b.runs:
        _renumber(res, a if models[0] is a.runs else None, b if models[1] is b.runs else None)
    st.extras[slot] = (key, res)
    return res


def _renumber(res: api.DiffResult, a, b) -> None:
    """The rows of a diff of the backward models that run (``Target.runs``: a copy converted to a newer opset)
    numbered and named as the session shows each model (``Target.index``), not as the copy numbers them."""
    from dataclasses import replace

    def own(t, obs):
        r = t.index.refs.get(obs.key if obs.key in t.index.refs else obs.name) if t is not None else None
        if r is None or r.index < 0:
            return obs
        op = {"op_type": r.op_type, "effective_op": r.op_type} if r.op_type and obs.effective_op == obs.op_type else {}
        return replace(obs, index=r.index, node=r.node or obs.node, **op)

    m = res.matching
    for p in m.pairs:
        p.a, p.b = own(a, p.a), own(b, p.b)
    for t, items in ((a, m.unmatched_a), (b, m.unmatched_b)):
        for u in items:
            u.obs = own(t, u.obs)
    res.results.sort(key=lambda r: r.pair.a.index)


def _matching_result(env: Env) -> api.DiffResult:
    """What ``match`` reads: the last ``diff`` when it is of the current models, inputs and device (the
    pairing does not depend on the selection), else a diff of its own, which is not the last ``diff``:
    ``save html`` goes on writing the one the user ran."""
    st = env.state
    cached = st.extras.get("diff")
    if cached is not None and cached[0][:2] == (st.run_key(st.target("a")), st.run_key(st.target("b"))):
        return cached[1]
    return _diff_result(env, api.Selection(), slot="match")


@command("diff", "diff [SELECTION] [--metric M] [--atol X|NAME:X] [--rtol X|NAME:X] [--min-sqnr DB] [--min-cosine C] "
         "[--sort topo|introduced|accumulated] [--wide] [--columns a,b] [--format table|csv|markdown|json] [--json FILE|-]", "compare the two models tensor by tensor, as `onnxprobe diff` does", "two models and gradients", args=("selection",))
def cmd_diff(env: Env, args: list[str]):
    """Needs `onnxprobe debug MODEL OTHER`: model a is compared with model b (the reference) on the
    session's inputs and device. The result is cached until inputs, device or criterion change. The
    criterion flags (--metric, --atol, --rtol with NAME:X for one tensor, --min-sqnr, --min-cosine), --wide,
    --columns, --format and --json (the whole report, every unmatched tensor with its reason; `-`: instead of
    the table) work as on the command line.
    Examples: `diff`, `diff --all --sort introduced`, `diff --metric cosine`, `diff --atol 1e-3 --atol logits:0.05`,
    `diff 'conv*' --format csv`, `diff --json diff.json`."""
    from onnxprobe.report.diff import diff_dict
    from onnxprobe.report.io import in_cli_words

    _two(env, "diff")
    sort = pop_option(args, "--sort") or "topo"
    metric, min_sqnr, min_cosine = (pop_option(args, f) for f in ("--metric", "--min-sqnr", "--min-cosine"))
    base, per, _ = api.tolerances_from_flags(metric, pop_all(args, "--atol"), pop_all(args, "--rtol"), min_sqnr, min_cosine)
    json_path, view = pop_json_view(env, "diff", args, COLUMNS + list(JUDGED_COLUMNS.values()) + [PROBLEM])  # as diff's
    res = _diff_result(env, parse_selection(args), criteria=(base, per))
    order = api.sort_results(res.results, sort)
    env.verdict = res.verdict()[0]  # a script whose diff fails exits 1, as `onnxprobe diff` does
    notes = [Text(f"note: {cli_words(n)}", style="dim") for n in dict.fromkeys(res.notes)]
    one = next((t.label for t in env.state.targets.values() if t.forward is not None), None)
    if one is not None and len({t.forward is None for t in env.state.targets.values()}) == 2:
        notes.append(Text(f"note: only model {one} has a backward graph: the models are compared as loaded (`grad --model "
                          f"{'b' if one == 'a' else 'a'}` to compare the gradients too)", style="dim"))
    # its criterion and verdict in the command line's words (errors.said), as its --json's
    # --columns may ask for a metric no pair is judged by (rmse...), as on the command line
    shown = diff_renderables(in_cli_words(diff_dict(res, order)), env.width, asked=tuple(view["columns"] or ()))
    return with_json("diff", lambda: diff_dict(res, order), json_path, shown + notes, view)


@command("match", "match TENSOR [--model a|b]", "which tensor of the other model matches TENSOR, by which strategy and why",
         "two models and gradients", args=("tensor",))
def cmd_match(env: Env, args: list[str]):
    """TENSOR may be a name in either model (--model a|b: in that one, where both have the name). Uses the pairing
    `diff` makes (computed if needed): the tensor of the other model paired with TENSOR, the strategy and the
    reason; or why it stayed unmatched.
    Examples: `match conv1_out`, `match /m/layer.0/Add_output_0`, `match conv1_out --model b`."""
    _two(env, "match")
    side_of = pop_option(args, "--model", "-m")
    only = env.state.target(side_of).label if side_of is not None else None
    if len(args) != 1:
        raise UsageError("match: give one tensor name (usage: match TENSOR [--model a|b])")
    name = args[0]
    res = _matching_result(env)
    m = res.matching
    for p in m.pairs:
        if name in ((p.a.name, p.a.key, p.a.probe) if only != "b" else ()) + ((p.b.name, p.b.probe) if only != "a" else ()):
            out = Text()
            out.append(safe(p.a.name), style="bold")
            out.append(safe(f" (a: node {p.a.node}, {p.a.effective_op})  ↔  "))
            out.append(safe(p.b.name), style="bold")
            out.append(safe(f" (b: node {p.b.node}, {p.b.effective_op})") + "\n")
            out.append(safe(f"matched by {p.strategy}: {p.reason}"))
            r = next((r for r in res.results if r.pair is p), None)
            if r is not None and r.metrics is not None and r.metrics.empty:  # nothing finite: no numbers to show
                out.append("\n" + safe(f"shape [{fmt_shape(r.shape)}] · not compared: {r.problem}"
                                        + (" · FAIL" if r.passed is False else "")))
            elif r is not None and r.metrics is not None:
                mt = r.metrics
                out.append(f"\nshape [{fmt_shape(r.shape)}] · max|a-b| {num(mt.max_abs, 3)} · cosine {cosine_cell(mt.cosine, r.tolerance.metric == 'cosine')}"
                           f" · SQNR {'exact' if mt.exact else num(mt.sqnr_db, 3) + ' dB'} · " + ("pass" if r.passed else "FAIL"))
            return [out]
    for side, items in (("a", m.unmatched_a), ("b", m.unmatched_b)):
        for u in items if only in (None, side) else ():
            if name in (u.obs.name, u.obs.key):
                return [Text(safe(f"{name} (model {side}, node {u.obs.node}) is not matched: {u.reason}"))]
    for t in env.state.targets.values():  # a name sibling bodies share: compared by each body's key
        if t.index.ambiguous(name):
            raise UsageError(f"match: {t.index.ambiguous(name)}")
    # a mistyped name: the closest compared one, as `show` and `goto` suggest theirs
    names = [n for p in m.pairs for n in (p.a.name, p.b.name)] + [u.obs.name for us in (m.unmatched_a, m.unmatched_b) for u in us]
    close = close_name(name, names)
    hint = f"; did you mean {close}?" if close else " (diff --all lists them)"
    raise UsageError(f"match: {quote(name)} is not a compared tensor of {f'model {only}' if only else 'either model'}{hint}")


@command("grad", "grad [SELECTION] [--loss sum|mean|mse|cross-entropy] [--loss-output NAME] [--target F|--labels F|--output-grad F] [--wrt GLOB] "
         "[--model a|b]",
         "attach a loss and the backward graph; gradients then work in show, stats, where and the walk",
         "two models and gradients", args=("selection",))
def cmd_grad(env: Env, args: list[str]):
    """As `onnxprobe grad` does: the loss of --loss-output (default: the first output), gradients of the weights
    and of the selected activations (default: the probes of `layers`); --wrt GLOB names the tensors
    to differentiate directly (graph inputs too). The loss flags are checked as on the command line
    (`onnxprobe grad`). The gradients are named TENSOR_grad and join the probes. Run `grad` again after
    changing the inputs' shapes.
    Examples: `grad`, `grad --loss mse --target y.npy`, `grad --wrt 'conv*'`, `grad --model b`."""
    st = env.state
    t = st.target(pop_option(args, "--model", "-m"))
    loss = pop_option(args, "--loss") or "sum"
    output = pop_option(args, "--loss-output")
    if "--output" in args:  # its old name: say the new one, not "unknown selection option"
        raise UsageError("grad: the output the loss is computed from is --loss-output NAME (--output names a file elsewhere)")
    target, labels, og = (pop_option(args, f) for f in ("--target", "--labels", "--output-grad"))
    wrt = pop_all(args, "--wrt")
    sel = parse_selection(args) if args else None
    spec = api.grad_spec(output, loss, target, labels, og, wrt)
    forward = t.forward or t.model
    feed, _, fs = st.feed(t)
    feed = {s.name: feed[s.name] for s in st.specs_of(forward) if s.name in feed}
    with st.busy("attaching the loss and the backward graph…"), fs.explaining():
        gp = api.grad_plan(forward, spec, sel, feed=feed, cache=st.cache)
    if gp.run_failed is not None:  # the model does not run on these inputs: nothing attached, said as `run` says it
        raise fs.explained(gp.run_failed)
    model = api.Model.of(gp.backward.model, forward.source, list(gp.warnings))
    shown = gp.numbered_as(forward, model)  # a converted copy's nodes are numbered otherwise: the model's numbers shown
    runs = None
    if shown is not None:
        model, runs = api.Model(shown, forward.source, list(gp.warnings)), model
    st.replace_model(t, model, forward=forward, runs=runs)
    t.grad_shapes = {k: tuple(np.shape(v)) for k, v in feed.items()}
    if gp.extra_feed:
        what = "target" if target else "labels" if labels else "output gradient"
        st.set_all_inputs(dict(gp.extra_feed), origin=f"the loss's {what} ({target or labels or og})")
    grads = [g for g in gp.grads.values() if g in t.index.refs]
    t.probes = sorted(set(t.probes) | set(grads) | {gp.loss.loss}, key=t.index.position.__getitem__)
    out = [Text(safe(f"{tag(env, t)}loss {gp.loss.kind} of {gp.loss.output} ({gp.loss.loss}); backward graph attached: "
                f"{len(grads)} gradient{'s' if len(grads) != 1 else ''}, now probed (stats, show NAME_grad, where nan)"))]
    out += [Text(f"note: {cli_words(w)}", style="dim") for w in dict.fromkeys(model.warnings)]
    return out
