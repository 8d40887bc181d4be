"""Per-node time from onnxruntime's own profiler, attributed back to the model's nodes.

``profile(model, feeds, outputs, config)`` runs a copy of ``model`` (every node named: onnxruntime's
profile names kernels after nodes) with profiling on, once and then ``RUNS`` times more, and reads the
timed runs' kernel events, each time the minimum over them.
Kernels map to the model's nodes by name; a fused kernel keeps the name of one node of the chain it
replaced (Conv + BatchNormalization fused is named after one of them, with ``_nchwc`` and the like
appended by layout passes), and the other nodes of the chain, which have no kernel of their own, are
reported as fused into it. Kernels of nodes onnxprobe added (``is_probe``) are the probes' own cost. Layout kernels (ReorderInput/Output) are
counted as "other"; a function body onnxruntime inlines (unnamed nodes: HardSwish as HardSigmoid and Mul) is
its node's, each of its kernels matched to its node by the inputs ready when it ran (``_name_unnamed``). Kernels of If/Loop/Scan bodies run inside their parent's kernel and are counted once,
in it (onnxprobe's own nodes in a body: as probes, taken out of it).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field

import onnx

from onnxprobe.graph.builder import fresh_name
from onnxprobe.graph.merge import CONE_PREFIX
from onnxprobe.graph.walk import all_graphs
from onnxprobe.runtime.ort import create_session, run_bound

SUFFIXES = ("_nchwc", "_fused", "_token")
LAYOUT_OPS = ("ReorderInput", "ReorderOutput")  # NCHWc layout changes: "other", not a model node's work
PROBE_NODES = ("onnxprobe/", CONE_PREFIX)
# ops onnxruntime removes rather than runs (IdentityElimination, DropoutElimination): a reader takes their input, or
# the node before them writes their tensor under its own kernel. Such a node was fused into nothing: it is "removed"
# (PP-OCR cls: its Softmax read 'fused into' the graph output's Identity, which got the Softmax's time)
NO_OPS = frozenset({"Identity", "Dropout"})
# activations onnxruntime folds into the kernel before them (Conv, Gemm, NCHWc Conv): never into one after
ACTIVATIONS = frozenset({"Relu", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Clip", "Elu", "Selu",
                         "Softplus", "Softsign", "ThresholdedRelu", "Gelu", "QuickGelu"})
# timed runs per profile (after one untimed): each kernel's time is its minimum over them. One run let a
# scheduling hiccup top the "slowest" table (a Conv at 4.4 ms probed, 0.3 ms plain, on a loaded machine)
RUNS = 3


@dataclass
class Profile:
    """Kernel times of one run, in milliseconds."""

    node_ms: dict[str, float] = field(default_factory=dict)  # model node -> its kernel's time
    fused_into: dict[str, str] = field(default_factory=dict)  # model node without a kernel -> the node whose kernel ran it
    # model nodes onnxruntime removed, fused into nothing: "no-op" (``NO_OPS``), or "constant-folded" (their tensors
    # computed as the session was built: a shape computation whose result a Reshape reads as a constant)
    removed: dict[str, str] = field(default_factory=dict)
    probe_ms: float = 0.0  # kernels of onnxprobe's own nodes
    other_ms: float = 0.0  # layout reorders, inlined function bodies: no model node of that name
    # model nodes with a kernel of their own (not kernel events: onnxruntime adds kernels around some fusions,
    # a 3-D MatMul + Add runs as Reshape, Gemm, Reshape, and their count hid the fusions probing broke)
    kernels: int = 0
    total_ms: float = 0.0  # the run, as the profiler timed it
    # the run's time in no kernel: onnxruntime's own step between two nodes (scheduling, allocation), one per
    # node, which every node probing adds pays too (PP-OCRv4 det 480x480, layers --all: 21 ms of a 167 ms run)
    between_ms: float = 0.0
    runs: int = 1  # timed runs: each time above is the minimum over them (runtime.profile.attribute)
    outputs: dict[str, list[str]] = field(default_factory=dict)  # model node -> the tensors it writes
    # If/Loop/Scan body node -> its kernels' time in the run (every iteration), inside its parent's: not in model_ms
    body_ms: dict[str, float] = field(default_factory=dict)
    body_outputs: dict[str, list[str]] = field(default_factory=dict)  # body node -> the tensors it writes
    # the statistics the host computes from raw outputs (small tensors: ``Probe.stats_on_host``), in no kernel: the
    # fastest of the timed runs' (``profile(host=)``); probing costs them beside its kernels
    host_ms: float = 0.0
    host_tensors: int = 0

    @property
    def model_ms(self) -> float:
        return sum(self.node_ms.values())

    def of_tensor(self) -> dict[str, tuple[float | None, str | None, str | None]]:
        """tensor -> (its producer's kernel time, or None; the node it was fused into, or None; how onnxruntime
        removed its producer, or None: ``removed``)."""
        inside = {t: (self.body_ms.get(n), None, None) for n, ts in self.body_outputs.items() for t in ts}
        return inside | {t: (self.node_ms.get(n), self.fused_into.get(n), self.removed.get(n))
                         for n, ts in self.outputs.items() for t in ts}

    def fusions_broken(self, probed: Profile) -> int:
        """How many of the model nodes fused into another node's kernel in this (plain) run have a kernel of their
        own in ``probed``: the fusions probing broke (a no-op onnxruntime removes, kept as a kernel where a probe
        reads its tensor, is none)."""
        return sum(1 for n in self.fused_into if n in probed.node_ms)


def own_node_names(model: onnx.ModelProto) -> set[str]:
    """The names of the model's own nodes, in its If / Loop / Scan bodies too (a body node the model named
    'onnxprobe/...' was taken for a probe: its time went to the probes and its row read none)."""
    return {n.name for g in all_graphs(model.graph) for n in g.node if n.name}


def is_probe(name: str, own: frozenset[str] | set[str] = frozenset()) -> bool:
    """A node onnxprobe added (statistics, pair metrics, introduced-error cones): named so, and not one of
    ``own``, the model's own node names (a model may name its nodes 'onnxprobe/...' itself)."""
    return name.startswith(PROBE_NODES) and name not in own


def named(model: onnx.ModelProto) -> tuple[onnx.ModelProto, dict[str, str]]:
    """A copy whose main-graph nodes all have unique names, and {name in the copy: the node as people
    know it} (its name, or for an unnamed node its first output; where that is another node's name or
    known already, with '#k' appended: times are kept by these, and two nodes known alike were one)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    seen: set[str] = set()
    back: dict[str, str] = {}
    known = {n.name for n in out.graph.node if n.name}
    for i, n in enumerate(out.graph.node):
        shown = n.name
        if not n.name or n.name in seen:
            shown = base = n.output[0] if n.output and n.output[0] else n.op_type
            k = 0
            while shown in known:
                k += 1
                shown = f"{base}#{k}"
            known.add(shown)
            n.name = fresh_name(seen, f"{n.op_type}#{i}")
        seen.add(n.name)
        back[n.name] = shown
    # an unnamed node of an If/Loop/Scan body gets a name of its own too, so that its kernels tell it (``_body_nodes``:
    # a Loop body's unnamed nodes read '-', as a branch that did not run)
    bodies = [n for g in list(all_graphs(out.graph))[1:] for n in g.node]
    seen.update(n.name for n in bodies if n.name)
    for k, n in enumerate(bodies):
        if not n.name:
            n.name = fresh_name(seen, f"{n.op_type}#body{k}")
            seen.add(n.name)
    return out, back


def profile(model: onnx.ModelProto, feeds: dict, outputs: list[str], *, device: str = "cpu",
            opt_level: str = "off", runs: int = RUNS, weights: dict | None = None, own: set[str] | None = None,
            host: list[str] = ()) -> Profile:
    """Run ``model`` once, then ``runs`` times more with onnxruntime's profiler, and attribute the timed
    runs' kernels, each the minimum over them (onnxruntime also writes the graph it ran, which tells what
    each kernel computed). ``own``: the node names of the model a probed copy was made from (default:
    every node of ``model`` is its own). ``host``: outputs whose statistics the host computes from their values
    (``Profile.host_ms``: that work timed after each timed run, the fastest kept)."""
    from onnxprobe.runtime.runners.readback import host_statistics

    own = own_node_names(model) if own is None else own
    copy, back = named(model)
    with tempfile.TemporaryDirectory(prefix="onnxprobe-profile-") as tmp:
        ran = os.path.join(tmp, "optimized.onnx")
        # with onnxruntime's memory arena, kept over the runs, as a plain session runs: without it (a one-run
        # session's way, which hands the memory back) every timed run paid fresh page faults on each large
        # output, and a Relu writing 4 MB read ten times its kernel's time in onnxruntime's own profile
        session = create_session(copy, device=device, opt_level=opt_level, profile_prefix=os.path.join(tmp, "run"),
                                 optimized_path=ran, weights=weights, arena=True)
        host_ms = []
        for k in range(1 + max(1, runs)):  # the first run allocates and warms caches: not timed
            got, _ = run_bound(session, feeds, outputs, shrink=False)  # the arena's blocks kept from one run to the next
            start = time.perf_counter()
            for name in host:
                if name in got:
                    host_statistics(got[name])
            host_ms += [1000 * (time.perf_counter() - start)] if k else []
            del got
        path = session.sess.end_profiling()
        with open(path) as f:
            events = json.load(f)
        graph = onnx.load(ran, load_external_data=False) if os.path.exists(ran) else None
    out = attribute(events, copy, back, graph, own, runs=max(1, runs))
    out.host_ms, out.host_tensors = (min(host_ms) if host else 0.0), len([n for n in host if n in outputs])
    return out


def _owner(name: str, nodes: set[str], producer: dict[str, str]) -> str | None:
    """The model node a kernel name stands for: the node itself, or the producer of the tensor a fused
    kernel is named after, possibly with a layout suffix."""
    for cand in [name] + [name[: name.find(s)] for s in SUFFIXES if name.find(s) > 0]:
        if cand in nodes:
            return cand
        if cand in producer:
            return producer[cand]
    return None


def _pass_of(name: str, nodes: set[str]) -> str | None:
    """The model node a fusion pass named its node after: the node's name, then the pass's
    ('m/QuickGeluFusion/', 'proj/MatMulAddFusion')."""
    stem = name.rstrip("/")
    head = stem.rsplit("/", 1)[0] if "/" in stem[1:] else None
    return head if head in nodes else None


def _ran_owners(graph: onnx.ModelProto | None, nodes: set[str],
                producer: dict[str, str]) -> dict[str, tuple[str, bool]]:
    """For each node of the graph onnxruntime ran: the model node whose tensor it computes, following
    its outputs forward to the first tensor of the model (inlined function bodies, layout reorders, not
    through a node named after a model node or tensor: that is another node's kernel), and whether the node
    writes that tensor itself (False: found only downstream of it)."""
    if graph is None:
        return {}
    ran = list(graph.graph.node)
    readers: dict[str, list[int]] = {}
    for i, n in enumerate(ran):
        for x in n.input:
            readers.setdefault(x, []).append(i)
    owners: dict[str, tuple[str, bool]] = {}
    for i, n in enumerate(ran):
        frontier, seen = [i], set()
        while frontier:
            j = frontier.pop(0)
            if j in seen:
                continue
            seen.add(j)
            hit = next((producer[o] for o in ran[j].output if o in producer), None)
            if hit is not None:
                owners[n.name] = (hit, j == i)
                break
            frontier += [k for o in ran[j].output for k in readers.get(o, [])
                         if _owner(ran[k].name, nodes, producer) is None]
    return owners


def _kernel_owner(name: str, ran: tuple[str, bool] | None, nodes: set[str], producer: dict[str, str],
                  noop: set[str] = frozenset()) -> str | None:
    """Whose kernel ``name`` is: the model tensor it writes itself (a Conv with its BatchNormalization fused
    in keeps the Conv's name but writes the BN's tensor), else its name, else the first model tensor
    downstream of it, else the node a fusion pass named it after (``_pass_of``). The name goes before what is
    downstream: an NCHWc Conv+Relu named 'relu2_out_nchwc' writes a blocked tensor that the next NCHWc kernel
    (GlobalAveragePool) reads before any model tensor. What is downstream goes before the pass's name: a
    MatMul + Add run as Reshape, Gemm 'proj/MatMulAddFusion', Reshape computes the Add's tensor. A tensor whose
    producer is a no-op onnxruntime removed (``noop``: ``NO_OPS`` nodes), written by a kernel that bears a model
    node's name, is that node's: the no-op's tensor was renamed onto it."""
    if ran is not None and ran[1] and not (ran[0] in noop and name in nodes):  # a Softmax writing a removed Identity's tensor
        return ran[0]
    return _owner(name, nodes, producer) or (ran[0] if ran is not None else None) or _pass_of(name, nodes)


def attribute(events: list[dict], model: onnx.ModelProto, back: dict[str, str],
              graph: onnx.ModelProto | None = None, own: set[str] = frozenset(), runs: int = 1) -> Profile:
    """The last ``runs`` runs' kernels (``events``: onnxruntime's profile JSON) attributed to ``model``'s nodes
    (``back``: name in ``model`` -> the node as the caller knows it; ``graph``: what onnxruntime ran), each
    time the minimum over those runs (``Profile.runs``)."""
    windows = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"][-max(1, runs):]
    spans = [(w["ts"], w["ts"] + w["dur"], w["dur"] / 1000.0) for w in windows] or [(float("-inf"), float("inf"), 0.0)]
    kernels = [e for e in events if e.get("cat") == "Node" and str(e.get("name", "")).endswith("_kernel_time")]
    if graph is not None and any(not n.name for n in graph.graph.node):
        graph = _name_unnamed(graph, [e for e in kernels if spans[-1][0] <= e.get("ts", 0) <= spans[-1][1]])
    each = [_one_run([e for e in kernels if lo <= e.get("ts", 0) <= hi], total, model, back, graph, own)
            for lo, hi, total in spans]
    return _fastest(each)


def _name_unnamed(graph: onnx.ModelProto, kernels: list[dict]) -> onnx.ModelProto:
    """A copy of the graph onnxruntime ran whose unnamed nodes (a function body it inlined: HardSwish as
    HardSigmoid and Mul) bear the names its profiler gave their kernels ('OpType_<node index>', an index the
    graph does not tell): each such kernel, in the order the run ran them, is the one unnamed node of its op
    type whose inputs are ready by then (two ready alike: left unnamed, its time 'other')."""
    out = onnx.ModelProto()
    out.CopyFrom(graph)
    nodes = list(out.graph.node)
    named_at = {n.name: i for i, n in enumerate(nodes) if n.name}
    ready = {""} | {i.name for i in out.graph.input} | {t.name for t in out.graph.initializer}
    left = {i for i, n in enumerate(nodes) if not n.name}
    inner = _nested(kernels)[1]  # a body's kernels: not nodes of this graph
    for e in sorted((e for k, e in enumerate(kernels) if k not in inner), key=lambda e: e.get("ts", 0)):
        name, op = e["name"][: -len("_kernel_time")], e.get("args", {}).get("op_name", "")
        j = named_at.get(name)
        if j is None and name.startswith(f"{op}_") and name[len(op) + 1:].isdigit():
            can = [i for i in left if nodes[i].op_type == op and all(x in ready for x in nodes[i].input)]
            if len(can) == 1:
                j = can[0]
                nodes[j].name = name
                left.discard(j)
        if j is not None:
            ready.update(nodes[j].output)
    return out


def _fastest(each: list[Profile]) -> Profile:
    """One Profile of several runs: each time the minimum over them (a scheduling hiccup only ever adds
    time: one timed run put a Conv at 4.4 ms probed against 0.3 ms plain on a loaded machine). The
    minima of the parts (``between_ms`` among them) add up to no more than the fastest run, as each run's parts
    do to it."""
    p = each[-1]
    if len(each) > 1:
        p.node_ms = {n: min(q.node_ms.get(n, v) for q in each) for n, v in p.node_ms.items()}
        p.probe_ms, p.other_ms = min(q.probe_ms for q in each), min(q.other_ms for q in each)
        p.total_ms = min(q.total_ms for q in each)
        p.between_ms = min(q.between_ms for q in each)
        p.body_ms = {n: min(q.body_ms.get(n, v) for q in each) for n, v in p.body_ms.items()}
    p.runs = len(each)
    return p


def _one_run(kernels: list[dict], total_ms: float, model: onnx.ModelProto, back: dict[str, str],
             graph: onnx.ModelProto | None, own: set[str]) -> Profile:
    """One run's ``kernels`` attributed (``attribute``)."""
    nodes = set(back)
    producer = {o: n.name for n in model.graph.node for o in n.output if o}
    ran = _ran_owners(graph, nodes, producer)
    noop = {n.name for n in model.graph.node if n.op_type in NO_OPS}
    p = Profile(total_ms=total_ms,
                outputs={back[n.name]: [o for o in n.output if o] for n in model.graph.node if not is_probe(n.name, own)})
    outer, inner = _nested(kernels)
    bucket: dict[int, str | None] = {}  # a main-graph kernel -> the model node its time went to (None: "other")
    for k, e in enumerate(kernels):
        if k in inner:
            continue
        ms = e.get("dur", 0) / 1000.0
        name = e["name"][: -len("_kernel_time")]
        op = e.get("args", {}).get("op_name", "")
        owner = _kernel_owner(name, ran.get(name), nodes, producer, noop)
        if owner is not None and is_probe(owner, own):
            p.probe_ms += ms
            bucket[k] = ""
        elif owner is None or op in LAYOUT_OPS:
            p.other_ms += ms
            bucket[k] = None
        else:
            who = bucket[k] = back[owner]
            p.node_ms[who] = p.node_ms.get(who, 0.0) + ms
    # kernels of If/Loop/Scan bodies ran inside their parent's kernel, whose time holds theirs: the model's
    # stay there (counted once), onnxprobe's statistics nodes in a body move from the parent to the probes
    # (they read as "other" twice over: control_flow.onnx's parts added up to 178 ms of a 111 ms run)
    p.body_outputs = _body_nodes(model, own)
    name_of = [e["name"][: -len("_kernel_time")] for e in kernels]
    in_probe = {k for k in inner if any(is_probe(name_of[j], own) for j in outer[k])}
    for k in inner:
        if name_of[k] in p.body_outputs and k not in in_probe:
            p.body_ms[name_of[k]] = p.body_ms.get(name_of[k], 0.0) + kernels[k].get("dur", 0) / 1000.0  # its row's time
    for k, top in inner.items():
        if not is_probe(name_of[k], own) or k in in_probe:
            continue
        ms, was = kernels[k].get("dur", 0) / 1000.0, bucket.get(top, "")
        if was == "":  # inside a probe's kernel: its time is the probes' already
            continue
        p.probe_ms += ms
        if was is None:
            p.other_ms -= ms
        else:
            p.node_ms[was] -= ms
        # and out of every body node around it (a nested If's row held its branch's probes: 16 ms inside a 3.6 ms If)
        for j in outer[k][1:]:
            if name_of[j] in p.body_ms:
                p.body_ms[name_of[j]] -= ms
    p.kernels = len(p.node_ms)
    p.between_ms = max(0.0, total_ms - p.model_ms - p.probe_ms - p.other_ms)  # this run's parts and itself
    present, activated = _computed(graph, {kernels[k]["name"][: -len("_kernel_time")]: w for k, w in bucket.items() if w})
    _fusions(model, back, p, present, own, activated, graph)
    return p


def _body_nodes(model: onnx.ModelProto, own: set[str]) -> dict[str, list[str]]:
    """The nodes of If/Loop/Scan bodies that a kernel name tells apart (named, that name borne by no other
    node, onnxprobe's left out), each with the tensors it writes that no other node writes."""
    found = [n for g in list(all_graphs(model.graph))[1:] for n in g.node]
    if not found:
        return {}
    names = Counter(n.name for n in list(model.graph.node) + found)
    writes = Counter(o for n in list(model.graph.node) + found for o in n.output if o)
    return {n.name: [o for o in n.output if o and writes[o] == 1] for n in found
            if n.name and names[n.name] == 1 and not is_probe(n.name, own)}


def _nested(kernels: list[dict]) -> tuple[dict[int, list[int]], dict[int, int]]:
    """Kernels that started inside another kernel's span (a body's, inside its If, Loop or Scan kernel):
    ({kernel: the kernels around it, outermost first}, {kernel: the main-graph kernel around it})."""
    order = sorted(range(len(kernels)), key=lambda k: (kernels[k].get("ts", 0), -kernels[k].get("dur", 0)))
    stack: list[int] = []
    outer: dict[int, list[int]] = {}
    for k in order:
        ts = kernels[k].get("ts", 0)
        while stack and ts >= kernels[stack[-1]].get("ts", 0) + kernels[stack[-1]].get("dur", 0):
            stack.pop()
        if stack:
            outer[k] = list(stack)
        stack.append(k)
    return outer, {k: around[0] for k, around in outer.items()}


def _computed(graph: onnx.ModelProto | None, owner: dict[str, str]) -> tuple[set[str] | None, dict[str, set[str]]]:
    """What the graph onnxruntime ran tells of its kernels (``owner``: kernel name -> its model node): the
    tensors computed by a node of their own (one that a layout reorder writes back from another node's
    kernel, NCHWc -> NCHW for a reader outside the blocked layout, was computed by that kernel), and the model
    nodes whose kernel has an activation fused in, each with the op types its kernels fused (their
    ``activation`` attribute: FusedConv, NCHWc Conv)."""
    if graph is None:
        return None, {}
    writer = {o: n for n in graph.graph.node for o in n.output if o}
    present: set[str] = set()
    for n in graph.graph.node:
        src = writer.get(n.input[0]) if n.op_type in LAYOUT_OPS and n.input else None
        if src is None or src.name not in owner:
            present.update(o for o in n.output if o)
    activated: dict[str, set[str]] = {}
    for n in graph.graph.node:
        for a in n.attribute:
            if n.name in owner and a.name == "activation" and a.type == onnx.AttributeProto.STRING:
                activated.setdefault(owner[n.name], set()).add(a.s.decode())
    return present, activated


def _folded(nodes: list, readers: dict[str, list[int]], graph: onnx.ModelProto | None) -> set[int]:
    """The model nodes (indices) onnxruntime computed as it built the session (constant folding): those whose
    tensors are initializers of the graph it ran, and those only such nodes read from."""
    if graph is None:
        return set()
    constants = {t.name for t in graph.graph.initializer}
    folded: set[int] = set()
    for i in range(len(nodes) - 1, -1, -1):  # readers first: the model's nodes are in topological order
        outs = [o for o in nodes[i].output if o]
        if outs and all(o in constants or (readers.get(o) and all(j in folded for j in readers[o])) for o in outs):
            folded.add(i)
    return folded


def _fusions(model: onnx.ModelProto, back: dict[str, str], p: Profile, present: set[str] | None,
             own: set[str] = frozenset(), activated: dict[str, set[str]] | None = None,
             graph: onnx.ModelProto | None = None) -> None:
    """Model nodes with no kernel whose tensors the graph onnxruntime ran no longer has (``present``):
    an activation into the kernel before it where that kernel has an activation of its op type fused in
    (``_computed``; a Conv + Relu kernel did not run the Sigmoid that reads it),
    any other node into the kernel of the first node after them (in the graph's order, along their outputs'
    readers) that has one. A node whose tensor is still there ran as kernels of other names (a
    function body onnxruntime inlined that ``_name_unnamed`` could not tell apart): its time is in "other". A no-op
    onnxruntime removed and a node it folded into a constant (``_folded``) were fused into nothing (``Profile.removed``)."""
    nodes = list(model.graph.node)
    readers: dict[str, list[int]] = {}
    producer = {o: n for n in nodes for o in n.output if o}
    for i, n in enumerate(nodes):
        for x in n.input:
            readers.setdefault(x, []).append(i)
    folded = _folded(nodes, readers, graph)
    for i, n in enumerate(nodes):
        who = back.get(n.name, n.name)
        if who in p.node_ms or is_probe(n.name, own) or n.op_type == "Constant":
            continue
        if n.op_type in NO_OPS:
            p.removed[who] = "no-op"
            continue
        if i in folded:
            p.removed[who] = "constant-folded"
            continue
        if present is not None and any(o in present for o in n.output if o):
            continue
        # an activation read from a kernel that has one of its type fused in (an NCHWc Conv named after its
        # own tensor, writing a blocked one): folded into that kernel, not the next one
        before = producer.get(n.input[0]) if n.op_type in ACTIVATIONS and n.input else None
        if before is not None and n.op_type in (activated or {}).get(back.get(before.name, before.name), ()):
            p.fused_into[who] = back.get(before.name, before.name)
            continue
        seen, frontier = set(), [j for o in n.output for j in readers.get(o, [])]
        while frontier:
            j = min(frontier)
            frontier.remove(j)
            if j in seen:
                continue
            seen.add(j)
            w = back.get(nodes[j].name, nodes[j].name)
            if w in p.node_ms:
                p.fused_into[who] = w
                break
            frontier += [k for o in nodes[j].output for k in readers.get(o, [])]
