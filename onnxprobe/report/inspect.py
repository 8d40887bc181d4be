"""The ``inspect`` report: a JSON-ready dict and a Rich rendering of ``api.InspectResult``."""

from __future__ import annotations

import math

from rich.text import Text

from onnxprobe import __version__
from onnxprobe.errors import report_voice
from onnxprobe.report.format import shape as fmt_shape
from onnxprobe.report.cells import cells
from onnxprobe.report.format import cut_middle, graph_dims, plural, safe, shorten
from onnxprobe.report.table import Column, Table
from onnxprobe.text import clip, controls, human_bytes, human_count

SCHEMA_VERSION = 1
MAX_LISTED = 12  # uninferred nodes / subgraphs shown before "... and N more"


# --- JSON ------------------------------------------------------------------------------------------------

def _shape(s):
    return graph_dims(s)


def type_dict(t) -> dict:
    """A graph input's or output's JSON: name, dtype and shape (of the tensors it holds, however nested); for
    a value that is no tensor, its ``kind`` and its whole ``type`` (``sequence<map<int64, float32>>``)."""
    d = {"name": t.name, "dtype": t.dtype, "shape": _shape(t.shape)}
    if t.kind != "tensor":
        d["kind"] = t.kind
        d["type"] = t.type
    return d


def _tensor(t, weights=frozenset()) -> dict:
    d = type_dict(t)
    if t.name in weights:
        d["weight"] = True
    return d


def _node(r) -> dict:
    return {
        "index": r.index, "name": r.name, "op_type": r.op_type, "scope": "/".join(r.scope) or None,
        "inputs": [_tensor(t, r.weights) for t in r.inputs], "outputs": [_tensor(t) for t in r.outputs],
    }


def inspect_dict(result) -> dict:
    s = result.summary
    return {
        "schema_version": SCHEMA_VERSION, "onnxprobe_version": __version__,
        "model": result.source, "file_bytes": result.file_bytes,
        "ir_version": s.ir_version, "opsets": s.opsets,
        "producer": {"name": s.producer, "version": s.producer_version},
        "graph_name": s.graph_name, "doc": s.doc or None, "metadata": s.metadata,
        "inputs": [_tensor(t) for t in s.inputs], "outputs": [_tensor(t) for t in s.outputs],
        "initializers": {"count": s.initializers.count, "bytes": s.initializers.bytes, "elements": s.initializers.elements},
        "constants": {"count": s.constants.count, "bytes": s.constants.bytes, "elements": s.constants.elements},
        "parameters": s.parameters,
        "computed_weights": {"count": s.computed.count, "bytes": s.computed.bytes, "elements": s.computed.elements,
                             "unsized": s.computed.unsized},
        "parameters_at_load": s.parameters_at_load,
        "node_count": s.nodes, "main_graph_node_count": s.main_nodes,
        "op_histogram": dict(s.op_histogram),
        "uninferred_nodes": [_node(r) for r in s.uninferred],
        "subgraphs": [{"index": g.index, "node": g.node, "op_type": g.op_type, "attribute": g.attribute,
                       "scope": "/".join(g.scope) or None, "nodes": g.nodes, "total_nodes": g.total_nodes} for g in s.subgraphs],
        "external_data": [{"file": f.location, "tensors": f.tensors, "bytes": f.bytes, "exists": f.exists,
                           "problem": f.problem.message if f.problem else None} for f in s.external],
        "custom_domains": s.custom_domains, "functions": s.functions,
        "notes": list(result.warnings),
        "problems": list(result.problems),
        "nodes": [_node(r) for r in result.nodes],
    }


# --- text --------------------------------------------------------------------------------------------------

def _extent_text(p) -> str:
    """A data file that does not hold its tensors, in short (``graph.extents.ExtentProblem``; the note says
    it in full)."""
    if p.entry is not None:
        return f"the length entry of {p.tensor} says {human_bytes(p.entry)}, its dims need {human_bytes(p.tensor_needs)}"
    if p.holds is not None:
        return f"truncated (holds {human_bytes(p.holds)}, entries need {human_bytes(p.needs)})"
    return p.short or "not readable"


def dims(s) -> str:
    """2x4, scalar, ?; with symbolic dimensions spaced out: batch x 3 x 224 x 224 (``format.shape``)."""
    return fmt_shape(s)


def _dims(t) -> str:
    """The shape of the tensors a value holds (its type cell says how they are nested)."""
    return "?" if t.kind == "unknown" else dims(t.shape)


def _line(text: str, style: str | None = None, message: bool = False) -> Text:
    """One line (broken between its phrases where it is wider than the terminal, as every Text the console
    prints: ``report.console.SafeConsole.print``); ``text`` is raw (names as the model holds them,
    escaped here, once), or with ``message`` a message whose names are escaped already."""
    return Text(controls(text) if message else safe(text), style=style or "", no_wrap=True, overflow="ellipsis")


def _section(title: str, note: str = "") -> Text:
    t = Text("\n")
    t.append(title, style="bold")
    if note:
        t.append(f"  {note}", style="dim")
    return t


IO_COLUMNS = [Column("role", "", head=True), Column("name", "name", name=True), Column("dtype", "dtype"),
              Column("shape", "shape")]


def io_table(inputs, outputs, width: int = 120) -> Table:
    """The model's inputs and outputs: name, dtype, shape (no header)."""
    t = Table(IO_COLUMNS, header=False, main=False)
    for label, items in (("input", inputs), ("output", outputs)):
        for k, v in enumerate(items):
            # raw: the dims as a list, as every other command's rows give a shape (None for an unknown one);
            # the dtype cell holds a sequence's or map's whole type, its tensors' shape the shape cell
            raw = graph_dims(v.shape) if v.shape is not None else None
            t.add_row([label if k == 0 else "", v.name, v.type or "?", _dims(v)], [label, v.name, v.type, raw])
        if not items:
            t.add_row([label, "none", "", ""], [label, None, None, None])
    return t


def _histogram(hist: dict[str, int], width: int) -> Text:
    """Op types in columns, most frequent first, read top to bottom (like ``ls``)."""
    items = [(shorten(op, 40), str(n)) for op, n in hist.items()]
    if not items:
        return Text("  none", style="dim")
    gap = 3
    for cols in range(min(len(items), 12), 0, -1):
        rows = math.ceil(len(items) / cols)
        grid = [items[c * rows:(c + 1) * rows] for c in range(cols)]
        grid = [col for col in grid if col]
        op_w = [max(len(op) for op, _ in col) for col in grid]
        n_w = [max(len(n) for _, n in col) for col in grid]
        total = 2 + sum(o + 1 + n for o, n in zip(op_w, n_w)) + gap * (len(grid) - 1)
        if total <= width or cols == 1:
            break
    out = Text()
    for r in range(rows):
        line = Text("  ")
        for c, col in enumerate(grid):
            if r >= len(col):
                break
            op, n = col[r]
            if c:
                line.append(" " * gap)
            line.append(op.ljust(op_w[c]) + " ")  # shortened: escaped already
            line.append(n.rjust(n_w[c]), style="cyan")
        line.rstrip()
        out.append_text(line)
        if r < rows - 1:
            out.append("\n")
    return out


def _names_in(names: list[str], budget: int) -> str:
    """``names`` in ``budget`` cells, each cut on its own (the joined list cut in its middle read as one name,
    'first_outpu…ond_output_of_custom_0'), as many as fit at 12 cells or more each, then '+N more'."""
    fit = max(1, min(len(names), (budget + 2) // 14))
    while fit < len(names) and fit > 1 and 14 * fit + len(f"+{len(names) - fit} more") > budget:
        fit -= 1
    more = f", +{len(names) - fit} more" if fit < len(names) else ""
    each = max(12, (budget - len(more) - 2 * (fit - 1)) // fit)
    return ", ".join(cut_middle(n, each) for n in names[:fit]) + more


def _listed(lines: list[Text], total: int, hint: str) -> Text:
    shown = lines[:MAX_LISTED]
    if total > len(shown):
        shown.append(Text(f"  … and {total - len(shown)} more ({hint})", style="dim"))
    return Text("\n").join(shown)


def inspect_renderables(result, width: int = 120) -> list:
    s = result.summary
    out: list = []
    head = Text()
    head.append(safe(result.source), style="bold")
    head.append(f"  {human_bytes(result.file_bytes)}", style="dim")
    if s.external:
        head.append(f" + {human_bytes(sum(f.bytes for f in s.external))} external data", style="dim")
    out.append(head)
    used = [d for d in s.used_domains if d in s.opsets] or list(s.opsets)
    opsets = ", ".join(f"{d} {s.opsets[d]}" for d in used) or "none"
    unused = len(s.opsets) - len(used)
    if unused:
        opsets += f" (+{unused} imported, unused)"
    producer = " ".join(x for x in (s.producer, s.producer_version) if x) or "unknown"
    out.append(_line(f"IR {s.ir_version} · opset {opsets} · producer {producer}"
                     + (f" · graph '{s.graph_name}'" if s.graph_name else "")))  # escaped once, by _line
    nodes = plural(s.nodes, "node")
    if s.nodes != s.main_nodes:
        nodes += f": {s.main_nodes:,} in the main graph, {s.nodes - s.main_nodes:,} in {len(s.subgraphs)} If/Loop/Scan bodies"
    out.append(_line(nodes))
    weights = f"weights: {plural(s.initializers.count, 'initializer')} ({human_bytes(s.initializers.bytes)})"
    if s.constants.count:
        weights += f", {plural(s.constants.count, 'Constant node')} ({human_bytes(s.constants.bytes)})"
    params = f"{human_count(s.parameters)} parameters"
    if s.computed.count:  # weights the runtime computes from constants at load (ConstantOfShape, Cast...)
        unsized = f"; {s.computed.unsized} of unknown size" if s.computed.unsized else ""
        weights += f", {s.computed.count:,} computed from constants at load ({human_bytes(s.computed.bytes)}{unsized})"
        params = f"{'at least ' if s.computed.unsized else ''}{human_count(s.parameters_at_load)} parameters"
        if s.parameters_at_load != s.parameters:
            params += f" ({human_count(s.parameters)} stored)"
    out.append(_line(f"{weights} · {params}"))
    if s.doc:
        # clipped: a one-line doc string of megabytes (a hostile model) was wrapped whole, for minutes
        out.append(_line(clip(s.doc.splitlines()[0], 400), style="dim"))

    if result.problems:  # first: onnxruntime refuses the model as written
        out.append(_section("problems", f"{plural(len(result.problems), 'problem')}: onnxruntime will not load the graph"))
        out += [_line(f"  {p}", style="bold red", message=True) for p in result.problems]

    out.append(_section("inputs and outputs"))
    out.append(io_table(s.inputs, s.outputs, width))

    out.append(_section("ops", f"{plural(len(s.op_histogram), 'type')}, {plural(s.nodes, 'node')}"))
    out.append(_histogram(s.op_histogram, width))

    if s.uninferred:
        out.append(_section("shapes not inferred", f"{plural(len(s.uninferred), 'node')}: outputs of unknown type or rank"))
        lines = []
        for r in s.uninferred:
            bad = [o.name for o in r.outputs if o.kind == "unknown" or (o.kind == "tensor" and o.shape is None)]
            head = f"  #{r.index} {cut_middle(r.name, max(20, width * 2 // 5))} ({r.op_type}) → "
            lines.append(_line(head + _names_in(bad, max(16, width - cells(head)))))
        out.append(_listed(lines, len(s.uninferred), report_voice().either("the result's summary.uninferred lists them all", "--nodes or --json lists them all")))
    else:
        out.append(Text("\nshapes: every node output has an inferred type and rank", style="dim"))

    if s.subgraphs:
        out.append(_section("subgraphs", f"{len(s.subgraphs)} bod{'y' if len(s.subgraphs) == 1 else 'ies'}"))
        lines = []
        for g in s.subgraphs:
            indent = "  " * (len(g.scope) + 1)
            nested = f" ({g.total_nodes} with nested bodies)" if g.total_nodes != g.nodes else ""
            lines.append(_line(f"{indent}#{g.index} {cut_middle(g.node, max(20, width // 2))} {g.op_type}.{g.attribute}: {plural(g.nodes, 'node')}{nested}"))
        out.append(_listed(lines, len(s.subgraphs), report_voice().either("the result's summary.subgraphs lists them all", "--json lists them all")))

    if s.external:
        out.append(_section("external data"))
        for f in s.external:
            line = Text(f"  {safe(f.location)}  {human_bytes(f.bytes)} in {plural(f.tensors, 'tensor')}")
            if not f.exists:
                line.append("  missing", style="bold red")
            elif f.problem is not None:
                line.append(f"  {safe(_extent_text(f.problem))}", style="bold red")
            out.append(line)
    if s.custom_domains:
        out.append(_section("custom domains", "ops outside the ONNX standard: the runtime must provide them"))
        for d, ops in s.custom_domains.items():
            listed = ", ".join(f"{op} {n}" for op, n in ops.items())
            out.append(Text(f"  {safe(d)}: {shorten(listed, max(30, width - len(d) - 4))}"))
    if s.functions:
        out.append(_section("model-local functions"))
        out.append(Text("  " + shorten(", ".join(s.functions), width - 2)))
    if s.metadata:
        out.append(_section("metadata"))
        for k, v in s.metadata.items():
            v = " ".join(v.split())
            out.append(Text(f"  {safe(k)}: {shorten(v, max(20, width - len(k) - 4))}"))
    return out


def _tensors_text(ts, weights=frozenset()) -> str:
    """'x (1x3), W (weight 8x3)': names with their shapes; weights marked."""
    parts = []
    for x in ts:
        if not x.name:
            parts.append("-")
        else:
            # a value that is no tensor says its whole type before the shape of the tensors it holds, as the
            # inputs-and-outputs table's dtype cell does: 's (sequence<float32> 2x3)', not a tensor's 's (2x3)'
            kind = f"{x.type or '?'} " if x.kind not in ("tensor", "unknown") else ""
            parts.append(f"{x.name} ({'weight ' if x.name in weights else ''}{kind}{_dims(x)})")
    return ", ".join(parts)


NODE_COLUMNS = [Column("index", "#", "right", head=True), Column("node", "node", name=True), Column("op", "op", head=True),
                Column("io", "inputs → outputs", wrap=True)]


def nodes_table(result, width: int = 120) -> Table:
    """Every node: index, name (after its enclosing bodies: 'loop/body: add'), op, inputs → outputs."""
    t = Table(NODE_COLUMNS)
    for r in result.nodes:
        name = "/".join(r.scope + (r.name,))  # as debug's `nodes` lists it, and every command takes it
        ins, outs = _tensors_text(r.inputs, r.weights), _tensors_text(r.outputs)
        # a no-break space keeps the arrow on the line of the last input when the cell wraps
        t.add_row([str(r.index), name, r.op_type, f"{ins}\u00a0→ {outs}"], [r.index, name, r.op_type, f"{ins} → {outs}"])
    return t


def inspect_report(result, width: int = 120, *, nodes: bool = False) -> list:
    """What ``inspect`` shows (with ``nodes``: and every node), as renderables."""
    out = inspect_renderables(result, width)
    if nodes:
        out += [Text(""), nodes_table(result, width)]
    return out
