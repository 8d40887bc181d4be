"""What ``mark`` and ``extract`` wrote: JSON-ready dicts and Rich renderings of their results."""

from __future__ import annotations

from rich.text import Text

from onnxprobe.report.format import graph_dims, safe
from onnxprobe.report.table import Column, Table
from onnxprobe.report.inspect import dims, io_table, plural, type_dict
from onnxprobe.text import human_bytes, some


def _written(result) -> Text:
    t = Text("wrote ")
    t.append(safe(result.path), style="bold")
    if result.data_path:
        t.append(f" (weights in {safe(result.data_path)})")
    t.append(f" · {human_bytes(result.bytes)} · IR {result.ir_version}")
    return t


def mark_dict(result) -> dict:
    return {
        "model": result.source, "written": result.path, "data": result.data_path, "bytes": result.bytes,
        "ir_version": result.ir_version,
        "exposed": [
            {"tensor": m.ref.name, "output": m.output, "kind": m.kind, "node": m.ref.node, "op_type": m.ref.op_type,
             "index": m.ref.index, "scope": "/".join(m.ref.scope) or None,
             "dtype": result.types[m.output].dtype, "shape": graph_dims(result.types[m.output].shape)}
            for m in result.marked if m.added
        ],
        "not_marked": [{"tensor": r.name, "kind": "input" if r.kind == "input" else "weight"} for r in result.not_marked],
        "notes": list(result.notes),
    }


MARK_COLUMNS = [
    Column("index", "#", "right", head=True), Column("node", "node", name=True), Column("op", "op", head=True),
    Column("output", "output", name=True), Column("dtype", "dtype"), Column("shape", "shape"),
]
# CSV and JSON rows (and --columns tensor): the tensor marked, keyed as in every command's rows and in --json; the
# table shows the output it was added as, which differs for --stats (onnxprobe.stats:NAME) and body tensors
MARK_TENSOR = Column("tensor", "tensor", name=True)


def mark_table(result) -> Table:
    t = Table(MARK_COLUMNS, data=(MARK_TENSOR.key,))
    for m in (m for m in result.marked if m.added):
        ti = result.types[m.output]
        node = "/".join(m.ref.scope + (m.ref.node,))
        t.add_row([str(m.ref.index), node, m.ref.op_type, m.output, ti.type or "?", dims(ti.shape)],
                  [m.ref.index, node, m.ref.op_type, m.output, ti.type, graph_dims(ti.shape)],
                  data=[m.ref.key])
    return t


def _not_marked(refs) -> str:
    """Selected graph inputs and weights, said: mark adds node outputs only (the values of those are the
    feed and the model file's); a selection that reached only them read as a bare '0 outputs added'."""
    text = ""
    for kind, one, many, why in (("input", "a graph input", "graph inputs", "fed"), ("weight", "a weight", "weights", "in the model file")):
        names = [r.name for r in refs if (r.kind == "input") == (kind == "input")]
        if names:
            shown = some(names, form=str)
            text += (f" · {shown} {'is ' + one if len(names) == 1 else 'are ' + many}: not added, mark adds node outputs "
                     f"(the value is {why})")
    return text


def mark_renderables(result, width: int = 120) -> list:
    out: list = []
    added = [m for m in result.marked if m.added]
    if added:
        out.append(mark_table(result))
    kind = "statistics rows" if any(m.kind == "stats" for m in added) else "tensors"
    t = Text(f"{plural(len(added), 'output')} added ({kind}; listed in metadata onnxprobe.exposed)")
    already = sum(1 for m in result.marked if not m.added)
    if already:
        t.append(f" · {already} selected tensor{'s were' if already != 1 else ' was'} already a model output")
    t.append(_not_marked(result.not_marked))
    out += [t, _written(result)]
    return out


def extract_dict(result) -> dict:
    return {
        "model": result.source, "written": result.path, "data": result.data_path, "bytes": result.bytes,
        "ir_version": result.ir_version, "nodes": result.nodes,
        "inputs": [type_dict(t) for t in result.inputs],
        "outputs": [type_dict(t) for t in result.outputs],
        "notes": list(result.notes),
    }


def extract_renderables(result, width: int = 120) -> list:
    out: list = [io_table(result.inputs, result.outputs, width)]
    t = _written(result)
    t.append(f" · {plural(result.nodes, 'node')}")
    out.append(t)
    return out
