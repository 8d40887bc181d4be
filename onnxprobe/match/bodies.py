"""Body tensors: what If/Loop/Scan bodies compute, which ``diff`` (Loop/Scan bodies) and ``grad`` (every
body) leave out of their rows, and the one line that says so. A SequenceMap's body is counted with the
loops' (one value per element), but no command probes it: no output of the node carries a tensor out."""

from __future__ import annotations

import onnx

from onnxprobe.graph.select import select, shared_names
from onnxprobe.graph.expose import CARRIERS
from onnxprobe.graph.walk import walk
from onnxprobe.text import some


def body_tensors(model: onnx.ModelProto, selection=None, loops_only: bool = False) -> dict[str, str]:
    """Tensors computed inside If/Loop/Scan bodies -> the body that holds them ('loop/body'); with a
    ``graph.select.Selection``, only those it picks. ``loops_only``: those of Loop/Scan bodies (If
    branches within them included), which ``observe`` leaves out (a body tensor has one value per
    iteration, none of which is the value a diff pairs): what ``diff`` leaves out, and must say it does;
    ``grad`` gives no row to any body tensor."""
    if not any(a.type == onnx.AttributeProto.GRAPH for n in model.graph.node for a in n.attribute):
        return {}
    sites = walk(model)
    shared = shared_names(sites)  # each body's tensor of a name sibling bodies share, by its key
    inside = {"/".join(s.scope + (t,)) if t in shared else t: "/".join(s.scope) for s in sites
              if s.chain and (not loops_only or any(n.op_type != "If" for n, _ in s.chain)) for t in s.node.output if t}
    if selection is None:
        return inside
    return {r.key: inside[r.key] for r in select(model, selection, strict=False) if r.key in inside}


def sealed_tensors(model: onnx.ModelProto) -> dict[str, str]:
    """Body tensors (keys as ``body_tensors``'s) inside the body of a node whose outputs carry no tensor of
    it out (SequenceMap: its outputs are sequences) -> that node's op type; ``layers`` skips them too."""
    if not any(a.type == onnx.AttributeProto.GRAPH for n in model.graph.node for a in n.attribute):
        return {}
    sites = walk(model)
    shared = shared_names(sites)
    return {"/".join(s.scope + (t,)) if t in shared else t: sealer.op_type for s in sites
            for sealer in [next((p for p, _ in s.chain if p.op_type not in CARRIERS), None)] if sealer is not None
            for t in s.node.output if t}


def body_note(inside: dict[str, str], what: str, loops_only: bool = False,
              sealed: dict[str, str] | None = None) -> str | None:
    """One line saying which selected body tensors ``what`` leaves out, or None (``loops_only``: as
    ``body_tensors``'s); ``sealed``: ``sealed_tensors``'s, those no command probes (the line says so
    instead of sending the user to ``layers --all``)."""
    if not inside:
        return None
    names = some(inside.items(), 4, lambda tw: f"{tw[0]} ({tw[1]})")
    bodies, kept = ("Loop/Scan", "main-graph and If-branch tensors") if loops_only else ("If/Loop/Scan", "main-graph tensors")
    ops = sorted({op for t, op in (sealed or {}).items() if t in inside})
    n_sealed = sum(1 for t in inside if t in (sealed or {}))
    bodies = "/".join([bodies, *ops])
    where = "/".join(ops)
    if not n_sealed:
        why = "`layers --all` shows the body tensors' statistics"
    else:
        why = (f"no command probes the {n_sealed} inside {where} bodies: no output of the node carries "
               "their values out, as its outputs are sequences" + ("; `layers --all` shows the other body tensors' statistics"
                                                    if n_sealed < len(inside) else ""))
    return f"{len(inside)} selected tensor(s) inside {bodies} bodies are not {what}: {names}; only {kept} are ({why})"
