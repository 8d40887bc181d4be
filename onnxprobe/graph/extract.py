"""Extract: the subgraph between given tensors, as a model of its own.

Contract: ``extract(model, inputs, outputs, types)`` returns a new model; ``model`` is never modified.
The new model holds exactly the main-graph nodes that compute ``outputs`` from ``inputs`` (and from
weights: initializers, Constant nodes and what is computed from them alone), in their original order,
with their names, attributes and subgraphs unchanged, the initializers they use (external ones stay
external: the writer copies their bytes), the value_info of the tensors they keep, the original IR
version, opsets, functions and metadata, plus ``onnxprobe.extracted`` in the metadata. Its inputs and
outputs carry ``types[name]``. A kept node that also writes a cut input (one Split output cut at, another
computed) writes it under a fresh name (``NAME.cut``, read by nothing): the input is what the cut reads, and a
tensor both fed and written is one onnx's checker and onnxruntime refuse.

``cut(model, inputs, outputs)`` checks the request first and raises a one-line UsageError for unknown
names (with close matches, or the body a name lives in), for an output computed before an input (the two
given the wrong way round: it says so and suggests swapping them), and for inputs that do not cut the
outputs off from the rest of the graph: it names the tensors that reach the outputs around the inputs.

Tensors read by an If / Loop / Scan body from the enclosing graph count as inputs of the node that owns
the body. (onnx-graphsurgeon's ``cleanup`` is not used here: it moves outer-scope initializers into the
bodies that read them, duplicating weights that several graphs share, and it cannot say which tensors
leak past a cut, which is what the user needs to hear.)
"""

from __future__ import annotations

import shlex

import difflib
import json
from dataclasses import dataclass, field

import onnx

from onnxprobe.errors import LIST_NODES, CutLeaks, NothingToCut, UsageError, hinted_setting_error, setting_error, settings_error
from onnxprobe.graph.builder import all_names, fresh_name, single_opsets
from onnxprobe.graph.mark import prune_record
from onnxprobe.graph.walk import constant_tensors, implicit_inputs, walk
from onnxprobe.text import as_typed, quote, some

METADATA_KEY = "onnxprobe.extracted"
FROM, TO = ("cut_inputs", "--from"), ("cut_outputs", "--to")  # the cut, as api.extract and the command line name it


def node_inputs(node: onnx.NodeProto) -> list[str]:
    return [i for i in node.input if i] + [i for i in implicit_inputs(node) if i not in node.input]


@dataclass
class Cut:
    inputs: list[str]
    outputs: list[str]
    nodes: list[int]  # indices into model.graph.node, in order
    initializers: list[str]  # main-graph initializers the nodes read
    unused_inputs: list[str] = field(default_factory=list)


def _split(names: list[str] | None, known: set[str], flag: tuple[str, str]) -> tuple[list[str], str | None]:
    """The names of repeated, comma-separated flag values; a value that is itself a tensor name of the
    model (``a,b`` is one) stays whole, and a value holding one among others (``a,b,c``) is read as the
    model names its tensors: the one way to cut it into names of the model; one that reads two ways
    (``a,b`` and ``a`` and ``b`` are all tensors) is refused, naming both. Spaces around a name go, unless
    they are part of a tensor name (``' '`` can be one). Also the first value that holds an empty name
    (``','``, ``a,,b``), or None."""
    out: list[str] = []
    empty = None
    for item in names or []:
        item = as_typed(item, known)  # a name typed as listings print it ('new\\nline' for a newline), as --name takes it
        ways = [] if item in known or "," not in item else _readings(item, known)
        if len(ways) > 1:
            shown = " or ".join("[" + ", ".join(repr(n) for n in w) + "]" for w in ways)
            raise hinted_setting_error(UsageError, flag, f"{item!r} reads two ways as tensor names: {shown}", lambda say: (
                "; " + say.either("give a list of names", f"give each name its own {flag[1]}")))
        for n in ([item] if item in known else ways[0] if ways else item.split(",")):
            n = n if n in known else as_typed(n.strip(), known)
            if not n:
                empty = item if empty is None else empty
            elif n not in out:
                out.append(n)
    return out, empty


def _readings(item: str, known: set[str], limit: int = 2) -> list[list[str]]:
    """Up to ``limit`` ways to cut ``item`` at its commas into names of ``known`` (spaces around a part go,
    unless the name holds them)."""
    parts = item.split(",")
    span = 1 + max((n.count(",") for n in known), default=0)  # the most parts one name joins

    def name(i: int, j: int) -> str | None:
        s = ",".join(parts[i:j])
        return s if s in known else s.strip() if s.strip() in known else None

    ways: list[list[list[str]]] = [[] for _ in parts] + [[[]]]  # ways[i]: readings of parts[i:]
    for i in range(len(parts) - 1, -1, -1):
        for j in range(i + 1, min(len(parts), i + span) + 1):
            n = name(i, j)
            for rest in ways[j] if n is not None else []:
                if len(ways[i]) < limit:
                    ways[i].append([n, *rest])
    return ways[0]


def _check_names(model: onnx.ModelProto, names: list[str], flag: tuple[str, str], main: set[str]) -> None:
    for n in names:
        if n in main:
            continue
        for s in walk(model):
            if s.chain and n in s.node.output:
                raise setting_error(
                    UsageError, flag, f": tensor {n!r} lives inside {'/'.join(s.scope)}; extract cuts the main graph only "
                    f"(cut at the {s.chain[0][0].op_type} node's inputs and outputs instead)")
        close = difflib.get_close_matches(n, sorted(main), n=3, cutoff=0.6)
        raise hinted_setting_error(UsageError, flag, f": no tensor named {quote(n)} in the main graph", lambda say: (
            f"; did you mean {', '.join(quote(c) for c in close)}?" if close else
            f"; {say.either('api.inspect(model).nodes', '`onnxprobe inspect --nodes MODEL`', LIST_NODES)} lists the tensors"))


def cut(model: onnx.ModelProto, inputs: list[str] | None, outputs: list[str] | None, *, advise: bool = True,
        swap: bool = True) -> Cut:
    """Resolve and check a cut. ``inputs`` defaults to the model's inputs (those the outputs need),
    ``outputs`` to the model's outputs; names may also be given comma-separated. ``advise=False``: a cut
    that does not cut raises a bare UsageError (``_trial``: an error's suggestion tried before it is given);
    ``swap=False``: its error suggests no swap of --from and --to (``_completed``: a swap's own cut, completed)."""
    g = model.graph
    inits = {t.name for t in g.initializer} | {t.values.name for t in g.sparse_initializer}
    real_inputs = [vi.name for vi in g.input if vi.name not in inits]
    producer = {o: i for i, n in enumerate(g.node) for o in n.output if o}
    main = set(real_inputs) | inits | set(producer)
    (ins, empty_in), (outs, empty_out) = _split(inputs, main, FROM), _split(outputs, main, TO)
    if not ins and not outs:
        raise settings_error(NothingToCut, lambda say: say.either(
            "give the tensors to cut at: cut_inputs and/or cut_outputs (a name, a list of names, or names separated by "
            "commas); api.inspect(model).nodes lists them",
            "give the tensors to cut at: --from T1,T2 and/or --to T3; `onnxprobe inspect --nodes MODEL` lists them"))
    for flag, item in ((FROM, empty_in), (TO, empty_out)):
        # left out, `--from ',' --to y` silently cut at the model's inputs
        if item is not None:
            raise setting_error(UsageError, flag, f"{item!r}: an empty tensor name; give names separated by commas")
    _check_names(model, ins, FROM, main)
    _check_names(model, outs, TO, main)
    default_inputs, default_outputs = not ins, not outs
    if default_inputs:
        ins = list(real_inputs)
    if not outs:
        outs = [o.name for o in g.output]
    cut_set = set(ins)

    nodes: set[int] = set()
    used_inits: dict[str, None] = {}
    reached: dict[str, None] = {}
    seen: set[str] = set()
    stack = list(reversed(outs))
    while stack:
        t = stack.pop()
        if t in seen:
            continue
        seen.add(t)
        if t in cut_set:
            continue
        if t in producer:
            i = producer[t]
            if i not in nodes:
                nodes.add(i)
                stack.extend(reversed(node_inputs(g.node[i])))
        elif t in inits:
            used_inits.setdefault(t)
        elif t in real_inputs:
            reached.setdefault(t)
    if reached:
        if not advise:
            raise UsageError("not a cut")
        wrong = ((swap and _upstream_message(model, ins, outs, default_outputs))
                 or _unreached_message(model, ins, outs, default_outputs))
        if wrong:
            err = settings_error(UsageError, wrong)
            err.line_limit = CutLeaks.line_limit  # its advice is a list to paste: whole, as a leak's (a name of 300 chars was cut)
            raise err
        raise _leak_error(model, ins, cut_set, outs, nodes, list(reached))
    if default_inputs:
        ins = [i for i in ins if i in seen]
    if not nodes and default_outputs:  # every model output is a --from: no --to was given, none to blame
        raise settings_error(UsageError, lambda say: f"{say(FROM)} {', '.join(repr(o) for o in outs)}: "
                             f"{'is the model output' if len(outs) == 1 else 'are the model outputs'}, so no node lies after it: "
                             f"give a {say(FROM)} the outputs are computed from, or a {say(TO)}")
    if not nodes:  # every --to is a --from, a graph input or a weight: a model of no node, which computes nothing
        stored = [o for o in outs if o in inits and o not in cut_set]  # no input of the cut: no node computes it
        named = stored or outs
        what = ("is a weight (stored in the model, no node computes it)" if len(stored) == 1 else
                "are weights (stored in the model, no node computes them)" if stored else
                "is among the cut's inputs, so no node lies between them" if len(outs) == 1 else
                "are among the cut's inputs, so no node lies between them")
        raise settings_error(UsageError, lambda say: f"{say(TO)} {', '.join(repr(o) for o in named)}: {what}: give a "
                             + (f"{say(TO)} a node computes" if default_inputs else f"{say(TO)} computed from the {say(FROM)} tensors"))
    unused = [i for i in ins if i not in seen]
    return Cut(ins, outs, sorted(nodes), list(used_inits), unused)


def _closure(g: onnx.GraphProto, start: set[str], blocked: set[str]) -> set[str]:
    """Tensors computed from ``start`` (not through ``blocked``), by a fixpoint over the main graph."""
    reach = set(start)
    ins = [node_inputs(n) for n in g.node]
    changed = True
    while changed:
        changed = False
        for n, ni in zip(g.node, ins):
            if any(i in reach for i in ni):
                new = {o for o in n.output if o and o not in reach and o not in blocked}
                if new:
                    reach |= new
                    changed = True
    return reach


def _given(say, flag: tuple[str, str], names: list[str], whole: bool = False) -> str:
    """Tensors given to one side of a cut, to paste: ``cut_inputs=['a', 'b']`` to the API, ``--from a,b`` (quoted
    for a shell) on the command line; ``whole``: a --from list that keeps names with commas whole (``_from_value``)."""
    if not say.cli:
        return f"{flag[0]}={names!r}"
    return _from_value(names) if whole else f"{say.flag(flag[1])} {shlex.quote(','.join(names))}"


def _upstream_message(model: onnx.ModelProto, ins: list[str], outs: list[str], default_outputs: bool = False):
    """The error for a --to tensor that depends on no --from tensor because it is computed before one of
    them (--from and --to given the wrong way round): no tensor added to --from would make that a cut.
    ``default_outputs``: no --to was given, the model's outputs stand for it (none to swap). The message as
    ``say(voice)`` (``settings_error``): the API's argument names to the API, the flags to the command line."""
    g = model.graph
    downstream = _closure(g, set(ins), set())
    for y in outs:
        if y in downstream:
            continue
        after = [x for x in ins if x != y and x in _closure(g, {y}, set())]
        if after:
            one = len(after) == 1
            xs = ", ".join(repr(x) for x in after)
            if default_outputs:  # (a graph input given as an output too: no node computes it)
                was = ("a graph input" if y in {i.name for i in g.input} else f"computed before {'it' if one else 'them'}")
                return lambda say: (f"model output {y!r} does not depend on {say(FROM)} {xs}: it is {was}, and without "
                                    f"{say(TO)} the cut ends at every model output; {_outputs_hint(say, outs, downstream)}")
            fro, to, left = _swapped(model, y, after, ins, outs)
            return lambda say: (
                f"{say(TO)} {y!r} does not depend on {say(FROM)} {xs}: it is computed before {'it' if one else 'them'} "
                f"(upstream of {'it' if one else 'them'}), so nothing lies between them; swap them: "
                f"{_given(say, FROM, fro, whole=True)}{'' if say.cli else ','} {_given(say, TO, to)}"  # quoted: a command to paste
                + ("" if not left else f" ({say(TO)} {', '.join(repr(o) for o in left)} left out: the swapped cut "
                                       f"cannot end there too)"))
    return None


def _trial(model: onnx.ModelProto, ins: list[str], outs: list[str]) -> Cut | None:
    """The cut from ``ins`` to ``outs``, or None where it is none (an error's suggestion, tried first)."""
    try:
        return cut(model, ins, outs, advise=False)
    except UsageError:
        return None


def _swapped(model: onnx.ModelProto, y: str, after: list[str], ins: list[str], outs: list[str]) -> tuple[list[str], list[str], list[str]]:
    """The swapped cut for --to ``y`` computed before --from ``after``: from ``y`` (and the other --from tensors
    it still needs), to ``after`` and each other --to it computes as well (they were dropped): (from, to, the
    --to tensors it cannot keep)."""
    base = [y] + [x for x in ins if x not in after]
    to, left = list(after), []
    for o in (o for o in outs if o != y and o not in after):
        (to if _trial(model, base, [*to, o]) is not None else left).append(o)
    c = _trial(model, base, to)
    if c is None:  # the swap leaks too (q_t's cut needs k_t as well): the cut its own error would give, tried
        base = _completed(model, base, to)
        c = _trial(model, base, to) if base else None
    return ([x for x in base if x not in c.unused_inputs] if c is not None else [y]), to, left


def _completed(model: onnx.ModelProto, ins: list[str], outs: list[str]) -> list[str] | None:
    """The --from list that the leak error of the cut from ``ins`` to ``outs`` gives (``CutLeaks.cut_inputs``), or
    None where that cut fails otherwise (asking no swap of its own: a swap's cut is what is being completed)."""
    try:
        cut(model, ins, outs, swap=False)
    except CutLeaks as e:
        return list(e.cut_inputs)
    except UsageError:
        return None
    return list(ins)


def _outputs_hint(say, outs: list[str], downstream: set[str]) -> str:
    """Advice for a cut whose default outputs (the model's) are not all computed from --from."""
    fine = list(dict.fromkeys(o for o in outs if o in downstream))  # an output the model lists twice: once
    if fine:
        return f"give {say(TO)} the outputs you want, e.g. {_given(say, TO, fine)} (computed from {say(FROM)})"
    return f"give {say(TO)} the tensors you want, computed from {say(FROM)}"


def _unreached_message(model: onnx.ModelProto, ins: list[str], outs: list[str], default_outputs: bool):
    """The error for a --to (or, without --to, a model output) that depends on no --from tensor at all and
    lies on no path from one: adding tensors to --from around it would leave nothing to cut, so the
    advice names what it is computed from instead (its node's inputs). As ``_upstream_message``'s, a
    ``say(voice)``."""
    g = model.graph
    downstream = _closure(g, set(ins), set())
    producer = {o: n for n in g.node for o in n.output if o}
    const = constant_tensors(model)
    xs = some(ins)
    for y in outs:
        if y in downstream or y in ins:
            continue
        if default_outputs:
            return lambda say: (f"model output {y!r} does not depend on {say(FROM)} {xs}, and without {say(TO)} the cut "
                                f"ends at every model output; {_outputs_hint(say, outs, downstream)}")
        if y not in producer and y in {i.name for i in g.input}:  # no node computes it: no --from can make it depend
            return lambda say: (f"{say(TO)} {y!r} is a graph input (no node computes it): give a {say(TO)} a node computes")
        src = [t for t in node_inputs(producer[y]) if t not in const] if y in producer else []
        many = len(ins) != 1
        return lambda say: (
            f"{say(TO)} {y!r} does not depend on {say(FROM)} {xs}: it is computed without {'them' if many else 'it'}; "
            f"give a {say(FROM)} it is computed from"
            + (f", e.g. {_given(say, FROM, src)} (its node's inputs)" if src else ""))
    return None


def _leak_error(model: onnx.ModelProto, ins: list[str], cut_set: set[str], outs: list[str], nodes: set[int],
                reached: list[str]) -> CutLeaks:
    g = model.graph
    const = constant_tensors(model)
    downstream = _closure(g, cut_set, set())  # depends on the cut
    around = _closure(g, set(reached), cut_set)  # depends on graph inputs without passing the cut
    leaks: list[str] = []
    for i in sorted(nodes):
        n = g.node[i]
        # a cut input among the node's outputs is no reason to feed the node (a Split cut at one output, another
        # needed): its other outputs are what the leak reaches, not its inputs (--from 'a, x, b' where 'a, b' cuts)
        if any(o in downstream and o not in cut_set for o in n.output):
            leaks += [t for t in node_inputs(n) if t in around and t not in downstream and t not in const and t not in leaks]
    leaks += [o for o in outs if o in around and o not in downstream and o not in leaks]
    leaks = leaks or reached
    whole = list(dict.fromkeys(ins + leaks))
    tried = _trial(model, whole, outs)  # the list that cuts, less what it then leaves unused: the minimal one to give
    if tried is not None:
        whole = [t for t in whole if t not in tried.unused_inputs]
        leaks = [t for t in leaks if t in whole] or leaks
    shown = some(leaks, 5)
    one = len(leaks) == 1
    if set(leaks) <= set(reached):
        what = f"graph input{'' if one else 's'} {shown}"
        origin = ""
    else:
        what = f"{'tensor' if one else 'tensors'} {shown}"
        origin = f" (computed from graph input{'' if len(reached) == 1 else 's'} {some(reached)})"
    # the whole list, where it named 5 'and 4 more' and a transformer's cut took several tries
    return settings_error(lambda msg: CutLeaks(msg, leaks, whole), lambda say: (
        f"{say(FROM)} does not cut the outputs off from the rest of the graph: {what} {'reaches' if one else 'reach'} "
        f"the outputs around them{origin}; add {'it' if one else 'them'} to " + say.either(
            f"cut_inputs: {whole!r} (this error's cut_inputs)", f"--from: {_from_value(whole)}")))


PASTE_LIMIT = 16_000  # a --from value past this many characters is not one to paste: its count is said instead


def _from_value(names: list[str]) -> str:
    """``names`` as --from, quoted for a shell: one value, comma-separated (a space after each comma, so
    that the one line keeps each name whole), or one --from per name where a name holds a comma or spaces
    around it (which a list would split or strip)."""
    if any("," in n or n != n.strip() for n in names):
        text = " ".join(f"--from {shlex.quote(n)}" for n in names)
    else:
        text = f"--from {shlex.quote(', '.join(names))}"
    if len(text) > PASTE_LIMIT:
        return f"{len(names)} tensors, too many for one line (api.extract's error lists them in its cut_inputs)"
    return text


def extract(model: onnx.ModelProto, c: Cut, types: dict[str, onnx.TypeProto]) -> onnx.ModelProto:
    g = model.graph
    nodes = _unwrite_inputs(model, [g.node[i] for i in c.nodes], set(c.inputs))
    kept: set[str] = set(c.inputs) | set(c.outputs)
    for n in nodes:
        kept.update(node_inputs(n))
        kept.update(o for o in n.output if o)
    boundary = set(c.inputs) | set(c.outputs)
    cut_inputs = set(c.inputs)

    out = onnx.ModelProto()
    ng = out.graph
    ng.name = g.name
    ng.doc_string = g.doc_string
    ng.node.extend(nodes)
    ng.initializer.extend(t for t in g.initializer if t.name in c.initializers and t.name not in cut_inputs)
    ng.sparse_initializer.extend(t for t in g.sparse_initializer if t.values.name in c.initializers and t.values.name not in cut_inputs)
    for name in c.inputs:
        ng.input.append(_vi(name, types[name]))
    if model.ir_version < 4:  # IR 3: every initializer is also listed as a graph input
        by_name = {vi.name: vi for vi in g.input}
        for t in ng.initializer:
            ng.input.append(by_name.get(t.name) or onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    for name in c.outputs:
        ng.output.append(_vi(name, types[name]))
    ng.value_info.extend(vi for vi in g.value_info if vi.name in kept and vi.name not in boundary)

    for f in ("ir_version", "producer_name", "producer_version", "domain", "model_version", "doc_string"):
        setattr(out, f, getattr(model, f))
    out.opset_import.extend(model.opset_import)
    single_opsets(out, [])  # the one version the model runs with (loading said so)
    out.functions.extend(model.functions)
    out.metadata_props.extend(p for p in model.metadata_props if p.key != METADATA_KEY)
    out.metadata_props.add(key=METADATA_KEY, value=json.dumps({"inputs": c.inputs, "outputs": c.outputs}))
    prune_record(out)  # a marked model's list of added outputs, for those the cut keeps
    return out


def _unwrite_inputs(model: onnx.ModelProto, nodes: list[onnx.NodeProto], inputs: set[str]) -> list[onnx.NodeProto]:
    """``nodes``, where one writes a cut input (the cut needs it for another output), a copy writing that
    output under a fresh name instead, which nothing reads."""
    names = None
    out = []
    for n in nodes:
        if any(o in inputs for o in n.output):
            names = all_names(model) if names is None else names
            n = onnx.NodeProto.FromString(n.SerializeToString())
            for k, o in enumerate(n.output):
                if o in inputs:
                    n.output[k] = fresh_name(names, f"{o}.cut")
        out.append(n)
    return out


def _vi(name: str, t: onnx.TypeProto) -> onnx.ValueInfoProto:
    vi = onnx.ValueInfoProto(name=name)
    vi.type.CopyFrom(t)
    return vi

