"""``save html FILE``: the debugger's HTML report, from what the session has cached (the last ``diff``, or
the probes' statistics), with the histograms of the worst rows from the session's own inputs."""

from __future__ import annotations

from onnxprobe import api
from onnxprobe.api.reports import command_line_words
from onnxprobe.report.format import plural
from onnxprobe.report.html import html_report, require_plotly, worst_rows
from onnxprobe.report.io import write_text
from onnxprobe.session.commands.table import Env, layers_view
from onnxprobe.session.targets import Target


def _inputs(env: Env, t: Target) -> list[str]:
    feed = env.state.feed(t)[0]
    return [f"{n} {v.dtype} [{'x'.join(map(str, v.shape)) or 'scalar'}] {env.state.inputs.source(n)}" for n, v in feed.items()]


def save_html(env: Env, t: Target, path: str, *, diff: bool = True, columns: list[str] | None = None) -> str:
    """Write the report of the last ``diff`` (two models, ``diff`` run, ``diff``) or else of the probes
    of ``t``, with every column of its table and the ``columns`` asked for (``api.html``'s ``columns``, the
    CLI's --columns beside --html); returns what was written, in words."""
    require_plotly()
    st = env.state
    cached = st.extras.get("diff") if diff and "b" in st.targets else None
    feed = dict(st.feed(st.target("a"))[0])
    if cached is not None and cached[0][:2] == (st.run_key(st.target("a")), st.run_key(st.target("b"))):
        from onnxprobe.report.diff import diff_dict

        res = cached[1]
        data = diff_dict(res)
        with st.busy("histograms of the worst pairs…"):
            hists = api.diff_histograms(res, worst_rows("diff", data), api.InputSpec(arrays=feed))
        with command_line_words():  # its criterion and verdict as the debugger's table says them
            api.html(res, path, histograms=hists, inputs=_inputs(env, st.target("a")), columns=columns)
        return f"wrote the report of the last diff ({cached[0][2].describe()}: {plural(len(data['pairs']), 'pair')}) to {path}"
    from onnxprobe.report.layers import layers_table

    names = list(t.probes) + [o for o in t.index.outputs if o in t.index.refs and o not in set(t.probes)]
    names = sorted(names, key=t.index.position.__getitem__)
    if not names:
        return "no probes to report (probe add SELECTION first)"
    st.ensure_stats(t, names)
    data = layers_view(env, t, names)
    data.update({"model": t.model.source, "providers": list(t.results.info.providers) if t.results.info else [], "notes": []})
    worst = worst_rows("layers", data)
    values = st.ensure_values(t, worst, skip_not_run=True) if worst else {}
    hists = {n: api.histogram_of(v) for n, v in values.items() if v.dtype.kind in "biuf"}
    table = layers_table(data)[0]
    table.choose(table.keys() + list(columns or ()))  # as api.html: every column, then those asked (a wrong key: UsageError)
    write_text(html_report("layers", data, table, hists, _inputs(env, t)), path)
    why = " (no diff of the current models and inputs to report: run `diff` first)" if diff and "b" in st.targets else ""
    return f"wrote the report of {plural(len(names), 'tensor')}{why} to {path}"
