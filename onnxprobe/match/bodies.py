"""Body tensors: what If/Loop/Scan bodies compute, which ``diff`` (Loop/Scan bodies) and ``grad`` (every
body) leave out of their rows, and the one line that says so."""

from __future__ import annotations

import onnx

from onnxprobe.graph.select import select, shared_names
from onnxprobe.graph.walk import walk


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


def body_note(inside: dict[str, str], what: str, loops_only: bool = False) -> str | None:
    """One line saying which selected body tensors ``what`` leaves out, or None (``loops_only``: as
    ``body_tensors``'s)."""
    if not inside:
        return None
    names = ", ".join(f"{t} ({where})" for t, where in list(inside.items())[:4])
    more = f" and {len(inside) - 4} more" if len(inside) > 4 else ""
    bodies, kept = ("Loop/Scan bodies", "main-graph and If-branch tensors") if loops_only else ("If/Loop/Scan bodies", "main-graph tensors")
    return (f"{len(inside)} selected tensor(s) inside {bodies} are not {what}: {names}{more}; "
            f"only {kept} are (`layers --all` shows the body tensors' statistics)")
