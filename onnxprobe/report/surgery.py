"""What ``mark`` and ``extract`` wrote: JSON-ready dicts and Rich renderings of their results."""

from __future__ import annotations

from rich import box
from rich.table import Table
from rich.text import Text

from onnxprobe.report.format import safe, shorten
from onnxprobe.report.inspect import dims, io_table, plural, size


def _written(result) -> Text:
    t = Text("wrote ")
    t.append(safe(result.path), style="bold")
    if result.data_path:
        t.append(f" (weights in {safe(result.data_path)})")
    t.append(f" · {size(result.bytes)} · IR {result.ir_version}")
    return t


def mark_dict(result) -> dict:
    return {
        "model": result.source, "written": result.path, "data": result.data_path, "bytes": result.bytes,
        "ir_version": result.ir_version,
        "exposed": [
            {"tensor": m.ref.name, "output": m.output, "kind": m.kind, "node": m.ref.node, "op_type": m.ref.op_type,
             "index": m.ref.index, "scope": "/".join(m.ref.scope) or None,
             "dtype": result.types[m.output].dtype, "shape": None if result.types[m.output].shape is None else list(result.types[m.output].shape)}
            for m in result.marked if m.added
        ],
        "notes": list(result.notes),
    }


def mark_table(result, width: int = 120) -> Table:
    added = [m for m in result.marked if m.added]
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1, 0, 0), show_edge=False)
    t.add_column("#", justify="right", no_wrap=True)
    t.add_column("node", no_wrap=True, overflow="ellipsis", ratio=3)
    t.add_column("op", no_wrap=True, max_width=16, overflow="ellipsis")
    t.add_column("output", no_wrap=True, overflow="ellipsis", ratio=3)
    t.add_column("dtype", no_wrap=True)
    t.add_column("shape", no_wrap=True, max_width=48, overflow="ellipsis")
    name_w = max(16, (width - 50) // 2)
    for m in added:
        ti = result.types[m.output]
        node = "/".join(m.ref.scope + (m.ref.node,))
        t.add_row(str(m.ref.index), Text(shorten(node, name_w)), Text(safe(m.ref.op_type)), Text(shorten(m.output, name_w)),
                  Text(safe(ti.dtype or "?")), Text(safe(dims(ti.shape)) if ti.kind == "tensor" else ti.kind))
    return t


def mark_renderables(result, width: int = 120) -> list:
    out: list = []
    added = [m for m in result.marked if m.added]
    if added:
        out.append(mark_table(result, width))
    kind = "statistics rows" if any(m.kind == "stats" for m in added) else "tensors"
    t = Text(f"{plural(len(added), 'output')} added ({kind}; listed in metadata onnxprobe.exposed)")
    already = sum(1 for m in result.marked if not m.added)
    if already:
        t.append(f" · {already} selected tensor{'s were' if already != 1 else ' was'} already a model output")
    out += [t, _written(result)]
    return out


def extract_dict(result) -> dict:
    return {
        "model": result.source, "written": result.path, "data": result.data_path, "bytes": result.bytes,
        "ir_version": result.ir_version, "nodes": result.nodes,
        "inputs": [{"name": t.name, "dtype": t.dtype, "shape": None if t.shape is None else list(t.shape)} for t in result.inputs],
        "outputs": [{"name": t.name, "dtype": t.dtype, "shape": None if t.shape is None else list(t.shape)} for t in result.outputs],
        "notes": list(result.notes),
    }


def extract_renderables(result, width: int = 120) -> list:
    out: list = [io_table(result.inputs, result.outputs, width)]
    t = _written(result)
    t.append(f" · {plural(result.nodes, 'node')}")
    out.append(t)
    return out
