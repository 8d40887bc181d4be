"""The session's commands over features that live elsewhere: ``diff`` and ``match`` (compare/, match/,
through ``api.diff``) and ``grad`` (autodiff/, through ``api.grad``). Each takes the API function it
calls as an argument, so ``commands`` can say "not available yet" while a function does not exist.

Results are cached in ``state.extras`` per run key, like the statistics: a second ``diff`` or a
``match`` after a ``diff`` costs nothing until inputs, device or models change.
"""

from __future__ import annotations

import io

from rich.console import Console
from rich.text import Text

from onnxprobe.errors import UsageError
from onnxprobe.report.format import num, shape as fmt_shape
from onnxprobe.session.parse import parse_selection, pop_all, pop_option


def _render(env, draw) -> Text:
    """What a ``print_*(…, console)`` report function draws, as one Text (styles kept)."""
    c = Console(file=io.StringIO(), width=env.width, record=True, force_terminal=True, color_system="truecolor",
                highlight=False, soft_wrap=False)
    draw(c)
    return Text.from_ansi(c.export_text(styles=True).rstrip("\n"))


def _diff_result(env, fn, selection, *, introduced: bool = True):
    from onnxprobe.runtime.interrupt import call_interruptibly

    st = env.state
    a, b = st.target("a"), st.target("b")
    feed = st.feed(a)[0]
    key = (st.run_key(a), st.run_key(b), selection, introduced)
    cached = st.extras.get("diff")
    if cached is not None and cached[0] == key:
        return cached[1]
    with st.busy("comparing a with b…"):
        res = call_interruptibly(fn, a.model.source, b.model.source, selection=selection, config=st.config(),
                                 arrays=dict(feed), seed=st.inputs.seed, int_range=st.inputs.int_range,
                                 introduced=introduced, grace=0)
    st.extras["diff"] = (key, res)
    return res


def diff(env, args: list[str], fn) -> list:
    """`diff [SELECTION]`: the `onnxprobe diff` table for the two loaded models on the session's inputs."""
    from onnxprobe.compare.diff import sort_results
    from onnxprobe.report.diff import print_diff

    sort = pop_option(args, "--sort") or "topo"
    sel = parse_selection(args)
    res = _diff_result(env, fn, sel)
    order = sort_results(res.results, sort)
    out: list = [_render(env, lambda c: print_diff(res, c, order))]
    out += [Text(f"note: {n}", style="dim") for n in dict.fromkeys(res.notes)]
    return out


def match(env, args: list[str], fn) -> list:
    """`match TENSOR`: the tensor of the other model paired with TENSOR (a name in either model), the
    strategy and the reason; or why it stayed unmatched."""
    if len(args) != 1:
        raise UsageError("match: give one tensor name (usage: match TENSOR)")
    name = args[0]
    res = _diff_result(env, fn, parse_selection([]))
    m = res.matching
    for p in m.pairs:
        if name in (p.a.name, p.a.key, p.a.probe, p.b.name, p.b.probe):
            out = Text()
            out.append(p.a.name, style="bold")
            out.append(f" (a: node {p.a.node}, {p.a.effective_op})  ↔  ")
            out.append(p.b.name, style="bold")
            out.append(f" (b: node {p.b.node}, {p.b.effective_op})\n")
            out.append(f"matched by {p.strategy}: {p.reason}")
            r = next((r for r in res.results if r.pair is p), None)
            if r is not None and r.metrics is not None:
                mt = r.metrics
                out.append(f"\nshape [{fmt_shape(r.shape)}] · max|a-b| {num(mt.max_abs, 3)} · cosine {num(mt.cosine, 6)}"
                           f" · SQNR {num(mt.sqnr_db, 3)} dB · " + ("pass" if r.passed else "FAIL"))
            return [out]
    for side, items in (("a", m.unmatched_a), ("b", m.unmatched_b)):
        for u in items:
            if name in (u.obs.name, u.obs.key):
                return [Text(f"{name} (model {side}, node {u.obs.node}) is not matched: {u.reason}")]
    raise UsageError(f"match: {name!r} is not a compared tensor of either model (diff --all lists them)")


def grad(env, args: list[str], fn) -> list:
    """`grad [SELECTION] [--loss KIND] [--output NAME] [--target F] [--labels F] [--output-grad F] [--wrt GLOB]`:
    attach a loss and the backward graph with ``api.grad_plan`` (on the session's inputs) and work on that
    model from then on: gradients (``<tensor>_grad``) appear in show, stats, where and the walk."""
    from onnxprobe import api
    from onnxprobe.graph.shapes import infer_shapes
    from onnxprobe.runtime.feeds import read_array

    st = env.state
    t = st.target(pop_option(args, "--model", "-m"))
    loss = pop_option(args, "--loss") or "sum"
    output = pop_option(args, "--output")
    target, labels, og = (pop_option(args, f) for f in ("--target", "--labels", "--output-grad"))
    wrt = pop_all(args, "--wrt")
    if og is not None:
        loss = "output-grad"
    sel = parse_selection(args) if args else None
    spec = api.GradSpec(output=output, loss=loss, wrt=tuple(wrt),
                        target=read_array(target) if target else None, labels=read_array(labels) if labels else None,
                        output_grad=read_array(og) if og else None)
    forward = t.forward or t.model
    feed = st.feed(t)[0]
    feed = {s.name: feed[s.name] for s in st.specs_of(forward) if s.name in feed}
    with st.busy("attaching the loss and the backward graph…"):
        gp = fn(forward, spec, sel, feed=feed)
    bw = gp.backward.model
    warnings = list(gp.warnings)
    model = api.Model(bw, infer_shapes(bw, warnings), forward.source, warnings)
    st.replace_model(t, model, forward=forward)
    if gp.extra_feed:
        st.set_all_inputs(dict(gp.extra_feed), origin=f"the loss's {target and 'target' or labels and 'labels' or 'output gradient'} ({target or labels or og})")
    grads = [g for g in gp.grads.values() if g in t.index.refs]
    t.probes = sorted(set(t.probes) | set(grads) | {gp.loss.loss}, key=t.index.position.__getitem__)
    out = [Text(f"{_tag(env, t)}loss {gp.loss.kind} of {gp.loss.output} ({gp.loss.loss}); backward graph attached: "
                f"{len(grads)} gradient{'s' if len(grads) != 1 else ''}, now probed (stats, show NAME_grad, where nan)")]
    out += [Text(f"note: {w}", style="dim") for w in dict.fromkeys(warnings)]
    return out


def _tag(env, t) -> str:
    return f"[{t.label}] " if len(env.state.targets) > 1 else ""
