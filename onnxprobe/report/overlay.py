"""Pictures of a report on the model's graph: node data for Google's Model Explorer (``--overlay``) and an
attachment for Netron (``--netron``), built from the JSON dicts of ``layers``, ``diff`` and ``grad``.

Model Explorer (``model-explorer --extensions=model_explorer_onnx MODEL --node_data_paths=FILE``) colours
each node by a number: ``{graph id: {"results": {node id: {"value": v}}, "thresholds": [...]}}``, where a
node id must be exactly what its ONNX adapter names the node (``graph.explorer_ids``; a tensor name would
silently colour nothing). One number per node:

- ``layers``: the largest magnitude the node's output reaches, max(|min|, |max|), coloured by quartile;
  a node whose output holds NaN or Inf is red whatever its value, and -1 (``NO_FINITE``, no magnitude is
  negative) when it holds no finite value at all;
- ``diff``: the SQNR the layer introduces on its own, in dB (the accumulated SQNR where there is none),
  red at 10 dB and below, then orange, yellow, green; the first failing layer is dark red. In a QDQ
  model the value is the DequantizeLinear output: that node and the op before its QuantizeLinear (the
  Conv, the MatMul) both carry it;
- ``grad``: the gradient norm (of the node's output, or of the weights it reads), coloured by quartile;
  NaN or Inf red, and -1 where the norm itself is NaN or infinite.

The marked values (-1 here, -140 on ``diff``: failed with no finite SQNR) are kept out of the quartiles:
a made-up 0 there shifted every other node's colour.

Netron has no colouring; its attachment (``"signature": "netron:attachment"``) lists metrics per value
name, which is how Netron finds them (its nodes may be unnamed), shown in the sidebar of each tensor. It
looks a target up by ``kind::`` and the name's first line, a node by its own name (none when unnamed).
"""

from __future__ import annotations

import collections
import math

import onnx

from onnxprobe.graph.explorer_ids import ExplorerIds, explorer_ids
from onnxprobe.graph.walk import all_graphs, subgraphs, walk
from onnxprobe.report.format import EXACT_DB, exact_db, finite
from onnxprobe.text import some
from onnxprobe.types import forward_name

RED, DARK_RED, ORANGE, YELLOW, GREEN = "#e53935", "#7f0000", "#fb8c00", "#fdd835", "#43a047"
QUARTILE_COLOURS = ("#e3f2fd", "#90caf9", "#42a5f5", "#1565c0")
SQNR_STEPS = ((10.0, RED), (20.0, ORANGE), (30.0, YELLOW), (1e9, GREEN))
NO_FINITE = -1.0  # the value of a node with no finite magnitude or norm: below any real one, always red


class _Results:
    """Node data per graph: the worst value given for a node wins (the largest; with ``lowest``, as an SQNR,
    the smallest), an explicit colour sticks; an If's value goes on its phi node too (``ExplorerIds.twins``)."""

    def __init__(self, ids: ExplorerIds, lowest: bool = False):
        self.ids = ids
        self.lowest = lowest
        self.graphs: dict[str, dict[str, dict]] = {}

    def put(self, where: tuple[str, str] | None, value: float | None, colour: str | None = None) -> None:
        if where is None or value is None:
            return
        gid, nid = where
        results = self.graphs.setdefault(gid, {})
        old = results.get(nid)
        worse = old is None or (value < old["value"] if self.lowest else value > old["value"])
        entry = {"value": value} if worse else dict(old)
        colour = colour or (old or {}).get("bgColor")
        if colour:
            entry["bgColor"] = colour
            entry["textColor"] = "#ffffff" if colour in (RED, DARK_RED) else "#000000"
        results[nid] = entry
        # a flattened If's output tensors are on its '<if>_phi' node: the one a user clicks for the value
        self.put(self.ids.twins.get(where), value, colour)

    def tensor(self, name: str, node: int | None = None) -> tuple[str, str] | None:
        """The node Model Explorer shows for a tensor: its producer (by its index ``node`` where given:
        sibling bodies may each name a tensor 'o'), or the [value] node of a graph input or weight. The node at
        ``node`` only where it makes that tensor (``name``, or a scoped key 'if1/then_branch/o' ending in its
        name): in a model the row is not about, another node has that index."""
        if node is not None and node in self.ids.hidden:
            return None  # a body the viewer does not show: by its name it would land on another node
        outs = self.ids.outputs.get(node, ()) if node is not None else ()
        at = self.ids.nodes.get(node) if any(name == o or name.endswith("/" + o) for o in outs) else None
        return at or self.ids.tensors.get(name) or self.ids.values.get(name)

    def data(self, label: str, thresholds) -> dict:
        """Model Explorer's node data: each graph with a value; with none (nothing compared, no tensor run), the
        main graph with no results, its legend and colours kept: ``{}`` loaded as an overlay of no graph at
        all, with no name saying what it is of, nor why it is empty."""
        out = {}
        graphs = self.graphs or {next(iter(self.ids.graphs)): {}}
        for gid, results in graphs.items():
            th = thresholds(sorted(r["value"] for r in results.values())) if callable(thresholds) else thresholds
            out[gid] = {"name": label, "results": results, "thresholds": th}
        return out


def _quartiles(values: list[float]) -> list[dict]:
    values = [v for v in values if v != NO_FINITE]  # a marker, not a magnitude
    if not values:
        return []
    # the largest value of each quarter: a value at most the first cut takes the lightest blue, the largest of all
    # the darkest ([1, 2, 3, 4] took the cuts 2, 3, 4 and three colours: the darkest never drawn)
    cuts = [values[max(0, math.ceil(len(values) * q) - 1)] for q in (0.25, 0.5, 0.75)] + [values[-1]]
    out = []
    colours = list(QUARTILE_COLOURS)
    for k, cut in enumerate(cuts):
        if not out or cut > out[-1]["value"]:
            out.append({"value": cut, "colour": colours[k]})
    out[-1]["colour"] = colours[-1]  # the largest value is the darkest, however few values there are
    return [{"value": t["value"], "bgColor": t["colour"], "textColor": "#ffffff" if t["colour"] == colours[-1] else "#000000"}
            for t in out]


def layers_overlay(model: onnx.ModelProto, d: dict) -> dict:
    """Model Explorer node data of a ``layers`` dict (``report.layers.layers_dict`` or a dataset one)."""
    res = _Results(explorer_ids(model))
    for t in d["tensors"]:
        lo, hi = finite(t.get("min")), finite(t.get("max"))
        bad = bool(t.get("nan") or t.get("inf"))
        value = max(abs(lo), abs(hi)) if lo is not None and hi is not None else (NO_FINITE if bad else None)
        res.put(res.tensor(t["name"], t.get("index") if t.get("node") else None), value, RED if bad else None)
    return res.data("onnxprobe layers: max |x| (red: NaN/Inf; -1: no finite value)", _quartiles)


def _quantized_op(model: onnx.ModelProto, ids: ExplorerIds):
    """tensor -> the node of the op a QDQ pair stands for: the output of DequantizeLinear(QuantizeLinear(
    op(...))) is the op's value, so the op (a Conv, a MatMul) gets the pair's colour too."""
    sites = walk(model)
    producer = {o: s for s in sites for o in s.node.output if o}

    def op_of(tensor: str):
        s = producer.get(tensor)
        if s is None or s.node.op_type != "DequantizeLinear" or not s.node.input:
            return None
        q = producer.get(s.node.input[0])
        if q is None or q.node.op_type != "QuantizeLinear" or not q.node.input:
            return None
        op = producer.get(q.node.input[0])
        return ids.nodes.get(op.index) if op is not None else None

    return op_of


def diff_overlay(model: onnx.ModelProto, d: dict) -> dict:
    """Model Explorer node data of a ``diff`` dict, on model A (``report.diff.diff_dict``)."""
    ids = explorer_ids(model)
    res = _Results(ids, lowest=True)  # a node of several outputs shows its worst SQNR
    op_of = _quantized_op(model, ids)
    first = d.get("first_failure")
    grad = bool(d.get("grad"))
    top = exact_db(d["pairs"])  # an exact node reads above every measured one (float64 pairs measure > 140 dB)
    for p in d["pairs"]:
        intro, acc = p.get("introduced_sqnr_db"), p.get("sqnr_db")
        if p.get("introduced_exact") or (p.get("introduced_exact") is None and p.get("exact")):
            value = top
        else:
            value = finite(intro) if finite(intro) is not None else finite(acc)
        name = (forward_name(p["a"]) or p["a"]) if grad else p["a"]
        colour = DARK_RED if p["a"] == first and p.get("passed") is False else None
        if value is None and p.get("passed") is False:  # failed with no finite SQNR (NaN/Inf on one side, -inf)
            value, colour = -EXACT_DB, colour or RED
        # a branch tensor's name is its key ('if1/then_branch/o'), which no tensor of the graph is called (sibling
        # bodies may each name one 'o'): by A's node; not first, as a QDQ pair's index is its quantizer's
        at = res.tensor(name) or (res.tensor(name, p.get("index")) if p.get("node_a") and p.get("scope") and not grad else None)
        res.put(at or res.tensor(p["a"]), value, colour)
        if not grad:
            res.put(op_of(p["a"]), value, colour)
    what = (f"gradient SQNR dB (exact: {top:g})" if grad else
            f"introduced SQNR dB (exact: {top:g}; dark red: where the error starts; -140: failed with no finite SQNR)")
    # a diff that compared nothing says so in its legend, as its verdict and the Netron attachment do
    said = f" — verdict {d['verdict']}: {d.get('verdict_reason')}" if d.get("verdict") == "error" else ""
    return res.data(f"onnxprobe diff: {what}{said}", [{"value": v, "bgColor": c} for v, c in SQNR_STEPS])


def _declared(g: onnx.GraphProto) -> set[str]:
    return ({i.name for i in g.input} | {t.name for t in g.initializer} | {t.values.name for t in g.sparse_initializer}
            | {o for n in g.node for o in n.output})


def _readers(model: onnx.ModelProto) -> dict[str, list[int]]:
    """Value name -> the indices of the nodes that read it, in bodies too. A name stands for its first
    declaration in graph order (the main graph's, else the body's that holds it: an If branch's weights); a
    node reads the declaration its own scope resolves the name to (its graph's, else the nearest enclosing
    one's), so a body's node reading its body's weight counts, and one reading a body value that shadows a
    main-graph name does not."""
    declared = {id(g): _declared(g) for g in all_graphs(model.graph)}
    meant: dict[str, int] = {}
    for g in all_graphs(model.graph):
        for name in declared[id(g)]:
            meant.setdefault(name, id(g))
    out: dict[str, list[int]] = {}
    for s in walk(model):
        scopes = [model.graph] + [dict(subgraphs(n))[attr] for n, attr in s.chain]  # outermost first, s.graph last
        for name in dict.fromkeys(i for i in s.node.input if i):
            home = next((g for g in reversed(scopes) if name in declared[id(g)]), None)
            if home is not None and meant.get(name) == id(home):
                out.setdefault(name, []).append(s.index)
    return out


def grad_overlay(model: onnx.ModelProto, d: dict) -> dict:
    """Model Explorer node data of a ``grad`` dict: each node by its output's gradient norm, or the
    largest norm of the weights it reads; the weights' own [value] nodes too."""
    ids = explorer_ids(model)
    res = _Results(ids)
    readers = _readers(model)
    for g in d["gradients"]:
        norm = finite(g.get("norm"))
        # a NaN or infinite norm ("nan", "inf" in JSON) is marked even where no element is (an overflowing sum)
        bad = bool(g.get("nan") or g.get("inf")) or (norm is None and g.get("norm") is not None)
        colour = RED if bad else None
        if bad and norm is None:
            norm = NO_FINITE
        if g["kind"] == "weight":
            res.put(res.tensor(g["tensor"]), norm, colour)  # its [value] node, or the Constant node that makes it
            # every node that reads it: the row's index is its first reader only, and nodes alike that share a
            # weight were coloured by different quantities
            for index in readers.get(g["tensor"], ()):
                res.put(ids.nodes.get(index), norm, colour)
        else:
            res.put(res.tensor(g["tensor"]), norm, colour)
    return res.data("onnxprobe grad: gradient norm (red: NaN/Inf; -1: NaN or infinite norm)", _quartiles)


# --- Netron -------------------------------------------------------------------------------------------------

NETRON_METRICS = {
    "layers": ("min", "max", "mean", "std", "nan", "inf", "p0.01", "p99.99"),
    "diff": ("max_abs", "mean_abs", "max_rel", "rmse", "cosine", "sqnr_db", "introduced_sqnr_db", "introduced_max_abs"),
    "grad": ("norm", "ratio", "min", "max", "mean", "std", "nan", "inf"),
}


def _netron_value(r: dict, key: str):
    """A row's metric for Netron: a finite number, or the word CSV and JSON rows say where it is not finite:
    "exact" for an SQNR JSON holds as null beside ``exact``, the "-inf" of one where B is all zeros (often where
    the error starts; a null beside a count in a report written before JSON said it), "nan" / "inf" of a norm;
    None: no value."""
    v = r.get(key)
    if isinstance(v, bool):
        return None
    if finite(v) is not None or v in ("nan", "inf", "-inf"):
        return v
    if key.endswith("sqnr_db") and v is None:
        of = key[:-len("sqnr_db")]  # "" or "introduced_"
        if r.get(f"{of}exact"):
            return "exact"
        if r.get(f"{of}count"):
            return "-inf" if r.get(f"{of}max_abs") else "inf"
    return None


def _shared(kind: str, r: dict) -> tuple[str, str, str | None] | None:
    """(bare name, key, producer node) of a row's tensor whose name sibling bodies share (its key is scoped,
    'if1/then_branch/o'), else None. Netron finds a value by its name alone: four branches' 'o' are one target."""
    if kind == "layers" and r.get("key") and r["key"] != r.get("name"):
        return r["name"], r["key"], r.get("node") or None
    a, scope = str(r.get("a") or ""), r.get("scope")
    if kind == "diff" and scope and a.startswith(f"{scope}/"):
        return a[len(scope) + 1:], a, r.get("node_a") or None
    return None


def netron_key(name: str) -> str:
    """What Netron looks a target up by: a name's first line (``name.split('\\n').shift()`` in its
    attachment reader, for nodes, values and tensors alike)."""
    return name.split("\n", 1)[0]


def _netron_names(model: onnx.ModelProto) -> tuple[dict[str, set[str]], collections.Counter]:
    """(Netron key -> the value names of the model it stands for, Netron key -> how many named nodes bear it),
    bodies included: a key of two value names, or of two nodes, is no target of one of them."""
    values: dict[str, set[str]] = {}
    nodes: collections.Counter = collections.Counter()
    for g in all_graphs(model.graph):
        for name in [i.name for i in g.input] + [t.name for t in g.initializer] + [o.name for o in g.output]:
            values.setdefault(netron_key(name), set()).add(name)
        for n in g.node:
            for name in n.output:
                values.setdefault(netron_key(name), set()).add(name)
            if n.name:  # Netron finds a node by its own name: an unnamed one (onnxprobe's 'Neg_2') cannot be targeted
                nodes[netron_key(n.name)] += 1
    return values, nodes


def netron_attachment(kind: str, d: dict, model: onnx.ModelProto) -> dict:
    """A Netron attachment of a ``layers``, ``diff`` or ``grad`` dict on ``model`` (the one the report is
    about): the row's numbers as metrics of the tensor (kind ``value``, keyed by its name; weights also as
    kind ``tensor``); a tensor whose name sibling bodies share, on its producer node (kind ``node``), the
    metric named with the tensor, where that node has a name of its own no other node's reads as. A name
    Netron reads as another's (its first line) is left out, with a note."""
    rows = {"layers": d.get("tensors"), "diff": d.get("pairs"), "grad": d.get("gradients")}[kind] or []
    metrics = []
    grads = kind == "diff" and bool(d.get("grad"))
    shared = {id(r): _shared(kind, r) for r in rows} if not grads else {}
    values, named = _netron_names(model)
    # a node is a target of its own where no other shared row's tensor comes from a node of its name (branch
    # bodies are often built alike: every node 'n') and the model has one node Netron reads by that name (an
    # unnamed one has none); else the value, each metric named with the tensor's key
    nodes = [s[2] for s in shared.values() if s and s[2]]
    # the name a row's producer really bears (an unnamed one's display name 'Neg_1' may be another, real, node's:
    # its metrics then went on that node), by the row's scoped key
    real = {"/".join(s.scope + (o,)): s.node.name for s in walk(model) for o in s.node.output if o and s.node.name}
    left_out: list[str] = []
    for r in rows:
        name = r.get("name") or r.get("a") or r.get("tensor")
        if grads:  # diff --grad pairs gradients: their metrics go on the forward tensor, as grad's do
            name = forward_name(name) or name
        kinds = ("value", "tensor") if r.get("kind") == "weight" or (grads and r.get("is_output")) else ("value",)
        label = "onnxprobe "
        if shared.get(id(r)):
            bare, key, node = shared[id(r)]
            if node and real.get(key) == node and nodes.count(node) == 1 and named[netron_key(node)] == 1:
                kinds, name, label = ("node",), node, f"onnxprobe {bare} "
            else:
                name, label = bare, f"onnxprobe {key} "
        if kinds != ("node",) and len(values.get(netron_key(name), ())) > 1:  # 'a\nb' and 'a\nc' both read 'a'
            left_out.append(name)
            continue
        name = netron_key(name)
        for key in NETRON_METRICS[kind]:
            v = _netron_value(r, key)
            if v is None:
                continue
            for k in kinds:
                metrics.append({"kind": k, "target": name, "name": f"{label}{key}", "value": v})
        if kind == "diff" and r.get("passed") is not None:
            metrics.append({"kind": kinds[0], "target": name, "name": f"{label}pass", "value": bool(r["passed"])})
    notes = {"layers": "statistics of each probed tensor", "diff": f"verdict {d.get('verdict')}: {d.get('verdict_reason')}",
             "grad": "gradient statistics"}[kind]
    meta = [{"kind": "model", "target": "", "name": "onnxprobe", "value": f"{kind}: {notes}"}]
    if left_out:
        gone = sorted(set(left_out))
        meta.append({"kind": "model", "target": "", "name": "onnxprobe left out",
                     "value": f"{len(gone)} tensor{'s' if len(gone) != 1 else ''} whose name Netron reads as another's "
                              f"(it keys names by their first line): {some(gone, 10)}"})
    return {"signature": "netron:attachment", "metrics": metrics, "metadata": meta}
