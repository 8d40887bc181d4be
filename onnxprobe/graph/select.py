"""Which tensors to probe: a ``Selection`` (op types, name globs, an index range, all) resolved against a
model into ``TensorRef`` objects in topological order. The one implementation: ``layers``, ``diff``,
``grad``, ``mark`` and the interactive debugger all select through ``select``.

Rules, as people read the flags:
- default (no criteria): outputs of Conv, ConvTranspose, Gemm, MatMul, the attention ops and their
  quantized/fused forms, in the main graph, plus the model's own outputs;
- repeated values of one flag are alternatives (``--op Conv --op Gemm``: either), different flags narrow
  (``--op Softmax --name '*layer.1*'``: Softmax outputs whose node or tensor name matches);
- ``ops``: every node output, subgraphs included, whose producer's op type is listed, or stands for one
  (``Conv`` picks QLinearConv, ConvInteger, FusedConv: ``graph.ops.canonical``);
- ``names``: node outputs whose node or tensor name matches a glob, and graph inputs (and, with
  ``include_constants``, weights) whose name matches;
- ``all``: every node output, subgraphs included (with ``include_constants``, every weight too);
- ``range``: keeps only (alone: selects all) nodes whose index (as ``inspect --nodes`` and the ``layers``
  table number them) lies in ``[start, end]``; either end may be a node name;
- weights (initializers, Constant/ConstantOfShape outputs and what is computed from them alone) are left
  out unless ``include_constants``.

A criterion that matches nothing (an op type the model does not have, a glob that matches no name, a
range outside the model) is a UsageError, with a suggestion where one is close.
"""

from __future__ import annotations

import difflib

import onnx

from onnxprobe.errors import (GLOB_QUOTES, LIST_NODES, LIST_OPS, ModelError, UsageError, error_about,
                             hinted_setting_error, setting_error, settings_error)
from onnxprobe.graph.ops import OP_ABBREVIATIONS, canonical
from onnxprobe.graph.shapes import dtype_name, static_shape, value_types
from onnxprobe.graph.walk import NodeSite, all_graphs, constant_tensors, first_readers, walk
from onnxprobe.text import as_typed, clean, matches, one_glob_each, quote, some, unclean
from onnxprobe.types import TensorRef

ATTENTION_OPS = {
    "Attention", "MultiHeadAttention", "GroupQueryAttention", "PackedAttention",
    "PackedMultiHeadAttention", "DecoderMaskedMultiHeadAttention", "DecoderMaskedSelfAttention",
    "QAttention", "SparseAttention", "LongformerAttention", "PagedAttention",
}
DEFAULT_OPS = {
    "Conv", "ConvTranspose", "Gemm", "MatMul",
    # the same layers after quantization or fusion
    "QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger", "QGemm", "FusedConv",
    "FusedGemm", "FusedMatMul", "MatMulIntegerToFloat", "DynamicQuantizeMatMul",
} | ATTENTION_OPS
# Selection (which tensors to probe) lives in types, onnx-free: a cached `layers` run (api.lean) builds it without
# importing onnx; re-exported here, where every caller has it from
from onnxprobe.types import NAMES, OPS, RANGE, Selection, op_types  # noqa: E402,F401


class NodePositions(dict):
    """Node name -> index (``node_positions``); ``ambiguous``: bare names several nodes bear (sibling bodies'
    nodes named alike, or a model's duplicate names) -> their (path, index)."""

    ambiguous: dict[str, list[tuple[str, int]]]


def node_positions(sites: list[NodeSite]) -> NodePositions:
    """Node name -> index for ``parse_range``: a body node by its bare name or the path listings show. A bare
    name several nodes bear is left out and listed in ``ambiguous`` (it resolved to the last of them, silently)."""
    out = NodePositions({s.path: s.index for s in sites if s.scope})
    shared = shared_node_names(sites)
    out.ambiguous = {n: paths for n, paths in shared.items() if n not in out}
    out.update({s.name: s.index for s in sites if s.name not in shared})
    return out


def shared_node_names(sites: list[NodeSite]) -> dict[str, list[tuple[str, int]]]:
    """Node names several nodes bear (sibling bodies' nodes named alike, or a model's duplicate names) -> the
    (path, index) of those nodes: a bare such name is ambiguous (``ambiguous_node``)."""
    bearers: dict[str, list[tuple[str, int]]] = {}
    for s in sites:
        bearers.setdefault(s.name, []).append((s.path, s.index))
    return {n: nodes for n, nodes in bearers.items() if len(nodes) > 1}


def _about(where: str | tuple[str, ...], rest: str) -> UsageError:
    """``rest`` after ``where`` (``errors.error_about``: a setting and its value, or nothing)."""
    return error_about(UsageError, where, f": {rest}") if where else UsageError(rest)


def ambiguous_node(name: str, nodes: list[tuple[str, int]], where: str | tuple[str, ...] = "") -> UsageError:
    """The one-line error for a bare node name that several nodes bear (``shared_node_names``): their paths,
    or, where the paths are one name too (a model's duplicate names in its main graph), their indices.
    ``where``: the setting (and its value) the name was given in, said first."""
    if len({p for p, _ in nodes}) == len(nodes):
        return _about(where, f"{len(nodes)} nodes are named {quote(name)} ({some((p for p, _ in nodes), 4, quote)}"
                      "): name one by its path, or give its index (#N)")
    return _about(where, f"{len(nodes)} nodes are named {quote(name)} ({some((f'#{i}' for _, i in nodes), 4, str)}"
                  "): give one's index (#N)")


def index_or_name(text: str, index: int, named: int, where: str | tuple[str, ...] = "") -> UsageError:
    """The one-line error for a bare number that is both a node index and another node's name ('1' read
    as an index silently missed the node named '1'): ``#N`` is always the index."""
    return _about(where, f"{quote(text)} is both node index {index} and the name of node #{named}; "
                  f"write #{index} for the index, or #{named} for the node named {quote(text)}")


def parse_range(spec: str, node_index: dict[str, int], last: int) -> tuple[int, int]:
    """'START:END' -> (start, end), inclusive; each end an index (``12`` or ``#12``), a node name, or empty
    (the first / ``last`` node). A number that is also another node's name is ambiguous: ``#N`` is always an
    index. A node name may hold ':' itself (tf2onnx's do): the split is the one ':' where both
    ends name something; two such splits are ambiguous. A reversed range, or one past the end of the
    model, is a UsageError."""
    if ":" not in spec:
        raise setting_error(UsageError, RANGE, f"{quote(unclean(spec))}: expected START:END (node indices or node names), e.g. 10:40")

    def index_of(x: str) -> int | None:
        """The index ``x`` writes (``12``, ``#12``), or None."""
        digits = x[1:] if x.startswith("#") else x
        return int(digits) if digits.lstrip("-").isdigit() else None

    ambiguous = getattr(node_index, "ambiguous", {})
    shown = clean(unclean(spec))  # the spec as typed: node names as listed (clean again would double a backslash)

    def typed(x: str) -> str:
        """The node name an end stands for, typed as listings print it (``text.as_typed``)."""
        return as_typed(as_typed(x.strip(), node_index), ambiguous)

    def known(x: str) -> bool:
        x = typed(x)
        return not x or index_of(x) is not None or x in node_index or x in ambiguous

    colons = [i for i, ch in enumerate(spec) if ch == ":"]
    cuts = [i for i in colons if known(spec[:i]) and known(spec[i + 1:])]
    if len(cuts) > 1:
        options = " or ".join(f"{quote(typed(spec[:i]))} to {quote(typed(spec[i + 1:]))}" for i in cuts[:2])
        raise setting_error(UsageError, RANGE, f"{shown}: ambiguous (node names hold ':'): {options}; use node indices")
    # no cut names both ends: the error below names the end that is not known, at a cut where the other is
    cut = (cuts or [i for i in colons if known(spec[:i]) or known(spec[i + 1:])] or colons)[0]
    a, b = spec[:cut], spec[cut + 1:]

    def bound(x: str, default: int) -> int:
        x = typed(x)
        if not x:
            return default
        if x in ambiguous and index_of(x) is None:
            raise ambiguous_node(x, ambiguous[x], (*RANGE, shown))
        i = index_of(x)
        if i is not None:
            named = None if x.startswith("#") else node_index.get(x)  # '#N' is an index, even beside a node named '#N'
            if named is not None and named != i:  # '1' read as an index silently missed the node named '1'
                raise index_or_name(x, i, named, (*RANGE, shown))
            if not 0 <= i <= last:
                raise setting_error(UsageError, RANGE, f"{shown}: node index {i} is outside the model (its nodes are 0..{last})")
            return i
        if x in node_index:
            return node_index[x]
        close = difflib.get_close_matches(x, list(node_index), n=1)
        raise hinted_setting_error(UsageError, RANGE, f"{shown}: no node named {quote(unclean(x))}", lambda say: (
            f"; did you mean {quote(close[0])}?" if close else
            f" (use an index or a node name from {say.either('api.inspect(model).nodes', '`onnxprobe inspect --nodes`', LIST_NODES)})"))

    lo, hi = bound(a, 0), bound(b, last)
    if lo > hi:
        raise setting_error(UsageError, RANGE, f"{shown}: reversed (node {lo} comes after node {hi}); give START:END with START first")
    return lo, hi


def op_matches(op_type: str, ops: tuple[str, ...], domain: str = "") -> bool:
    """``op_type`` by its name, what it stands for, the short name tables show for it ('BatchNorm'), or its name
    qualified by its domain as ``inspect`` lists ops outside the standard one ('com.microsoft.QLinearMul',
    'my.dom.Swish')."""
    return (op_type in ops or canonical(op_type) in ops or OP_ABBREVIATIONS.get(op_type) in ops
            or (domain not in ("", "ai.onnx") and f"{domain}.{op_type}" in ops))


def selects_op(sel: Selection, op_type: str) -> bool:
    """Whether ``sel``'s op criterion alone (the default's layer ops, or ``ops``) takes an output of
    ``op_type``: what a quantized value that stands for that op's output (``match.observe``: a
    dequantized QLinearConv, the rescaled float result of a ConvInteger) is selected by, where the node
    that holds it is a DequantizeLinear or an Add. False for a selection by names or range."""
    if sel.names or sel.range or sel.all:
        return False
    return op_type in DEFAULT_OPS if sel.is_default else op_matches(op_type, sel.ops)


def _name_matches(globs: tuple[str, ...], *names: str) -> bool:
    return any(matches(n, g) for g in globs for n in names if n)


def _ref(name: str, site: NodeSite | None, types: dict, outputs: set[str], kind: str, index: int = -1,
         shared: frozenset | set = frozenset()) -> TensorRef:
    tp = types.get(name)
    return TensorRef(
        name=name, node=site.name if site is not None and kind == "node" else "",
        op_type=site.node.op_type if site is not None and kind == "node" else "",
        index=site.index if site is not None else index, scope=site.scope if site is not None and kind == "node" else (),
        dtype=dtype_name(tp.tensor_type.elem_type) if tp is not None else None,
        shape=static_shape(tp), is_output=name in outputs, kind=kind, qualified=kind == "node" and name in shared,
    )


def check_criteria(models: list[onnx.ModelProto], sel: Selection) -> None:
    """Each ``--op`` must be an op type of one of ``models`` (or stand for one), and each ``--name`` glob
    must match a node, tensor or input name of one of them; else a UsageError with a suggestion."""
    if not sel.ops and not sel.names:  # nothing to find (--all, --range, the default): no walk of the models
        return
    sites = [walk(m) for m in models]
    present = {(s.node.op_type, s.node.domain) for ss in sites for s in ss}
    ops_present = {t for t, _ in present} | {f"{d}.{t}" for t, d in present if d not in ("", "ai.onnx")}
    for op in sel.ops:
        if not any(op_matches(t, (op,), d) for t, d in present):
            lower = {t.lower(): t for t in ops_present}
            close = [lower[op.lower()]] if op.lower() in lower else difflib.get_close_matches(op, sorted(ops_present), n=1)
            raise hinted_setting_error(UsageError, OPS, f"{clean(op)}: no node of the model has this op type", lambda say: (
                f"; did you mean {close[0]!r}?" if close else
                f" ({say.either('api.inspect(model).summary.op_histogram', '`onnxprobe inspect MODEL`', LIST_OPS)} lists its op types)"))
    for glob in sel.names:
        names = {n for m, ss in zip(models, sites) for n in _all_names(m, ss)}
        if not any(matches(n, glob) for n in names):
            close = difflib.get_close_matches(glob, sorted(names), n=1)

            def hint(say, glob=glob, names=names, close=close) -> str:
                listed = one_glob_each(NAMES, glob, names, say)
                return (f"; {listed}" if listed else f"; did you mean {quote(close[0])}?" if close else
                        say.either(" (names are case-sensitive)", " (names are case-sensitive; quote globs such as '*attn*')",
                                   GLOB_QUOTES))
            raise hinted_setting_error(UsageError, NAMES, f"{quote(glob)}: matches no node, tensor or input name of the model", hint)


def _all_names(model: onnx.ModelProto, sites: list[NodeSite]) -> set[str]:
    names = {i.name for i in model.graph.input} | set(_weights(model))
    for s in sites:
        names.update((s.name, s.path))
        names.update(o for o in s.node.output if o)
    return names | set(scoped_tensors(sites))  # a name sibling bodies share, by each body's key too


def select(model: onnx.ModelProto, sel: Selection | None = None, *, sites: list[NodeSite] | None = None,
           strict: bool = True) -> list[TensorRef]:
    """Resolve ``sel`` against ``model`` (ideally one with inferred shapes). ``strict``: a criterion that
    matches nothing in this model, or a selection that leaves nothing, is a UsageError (``diff`` checks
    its two models together instead, with ``check_criteria``)."""
    sel = sel or Selection()
    sites = sites if sites is not None else walk(model)
    if strict:
        check_criteria([model], sel)
    types = value_types(model)
    const = set() if sel.include_constants else constant_tensors(model, sites)
    outputs = {o.name for o in model.graph.output}
    last = len(sites) - 1
    lo, hi = parse_range(sel.range, node_positions(sites), last) if sel.range else (0, last)

    refs: list[TensorRef] = []
    # a tensor is its name within its scope: sibling bodies (two If nodes' branches, or one If's then and
    # else branch) may each name a tensor 'o', and each is a tensor of its own
    seen: set[tuple[tuple[str, ...], str]] = set()
    shared = shared_names(sites)
    for site in sites:
        if not lo <= site.index <= hi:
            continue
        for t in site.node.output:
            if not t or (site.scope, t) in seen or (t in const and t not in outputs):
                continue
            if sel.is_default:
                take = bool(sel.range) or (not site.chain and site.node.op_type in DEFAULT_OPS) or t in outputs
            else:
                take = (not sel.ops or op_matches(site.node.op_type, sel.ops, site.node.domain)) and (
                    not sel.names or _name_matches(sel.names, site.name, site.path, t, "/".join(site.scope + (t,)) if t in shared else ""))
            if take:
                seen.add((site.scope, t))
                refs.append(_ref(t, site, types, outputs, "node", shared=shared))
    if sel.names and not sel.ops:
        refs += _named_values(model, sel, sites, types, outputs, lo, hi)
    elif sel.is_default or sel.all:  # a weight given as a model output, which no node writes: an output all the same
        refs += _named_values(model, sel, sites, types, outputs, lo, hi, every=True)
    refs.sort(key=lambda r: (r.index, r.kind == "node"))
    if strict and not refs and not model.graph.node:  # no selection could take anything: the model's doing (exit 1)
        raise ModelError("the model has no nodes: nothing to probe")
    if strict and (not sel.is_default or sel.range) and not refs:  # asked for, and nothing: not an empty report
        raise _matches_nothing(sel, "this model")
    if strict and not refs:  # the default, on a model no node of which writes an output: refused as --all is
        raise UsageError("the default selection (the model's outputs and its layers) matches no tensor: no node writes "
                         "a model output, and it has no layers; give --all, --op or --name")
    return refs


def _matches_nothing(sel: Selection, where: str) -> UsageError:
    return settings_error(UsageError, lambda say: (
        f"the selection ({sel.describe(cli=say.cli)}) matches no tensor in {where}"
        + ("" if sel.include_constants else f" (weights are left out unless {say(('include_constants', '--include-constants'))})")))


def check_selects(a: onnx.ModelProto, b: onnx.ModelProto | None, sel: Selection) -> None:
    """``diff``'s selection, refused as ``select`` refuses one for ``layers`` when it is asked for and leaves no
    tensor of A (a range counts A's nodes) nor, without --range, of B: the outputs alone are not what it asked."""
    two = b is not None and b is not a
    check_criteria([a, b] if two else [a], sel)  # an --op or --name of neither model: said so first
    if sel.is_default and not sel.range:
        return
    found = select(a, sel, strict=False)
    if any(r.kind == "node" for r in found):  # a node's tensor of A: B need not be resolved too
        return
    found += select(b, sel, strict=False) if two and not sel.range else []
    if any(r.kind == "node" for r in found):
        return
    if found:  # graph inputs and weights as stored: the feeds are the same on both sides
        kinds = " and ".join(sorted({"weights" if r.kind == "initializer" else "graph inputs" for r in found}))
        raise UsageError(f"the selection ({sel.describe()}) matches only {kinds} ({some(sorted({r.name for r in found}), form=str)}): "
                         "diff compares what nodes compute from them, not the inputs it feeds both models nor the "
                         "weights as stored; select the tensors that read them")
    raise _matches_nothing(sel, "either model" if two else "this model")


def shared_names(sites: list[NodeSite]) -> set[str]:
    """Tensor names that nodes of more than one scope write (valid ONNX: sibling bodies, such as an If's two
    branches, may each name an output 'o'); ``TensorRef.key`` tells those tensors apart."""
    scopes: dict[str, tuple] = {}
    shared = set()
    for s in sites:
        for t in s.node.output:
            if t and scopes.setdefault(t, s.scope) != s.scope:
                shared.add(t)
    if shared:  # a key that is another tensor's name would stand for both: their numbers were mixed up, silently
        keyed = {"/".join(s.scope + (t,)): t for s in sites for t in s.node.output if t in shared}
        clash = next((k for k in keyed if k in scopes and k not in shared), None)
        if clash is not None:
            raise ModelError(f"the model names a tensor {quote(clash)}, which is also how onnxprobe names the tensor "
                             f"{quote(keyed[clash])} of a body (sibling bodies each write one of that name): the two cannot "
                             "be told apart; rename one of them")
    return shared


def scoped_tensors(sites: list[NodeSite]) -> dict[str, tuple[tuple[str, ...], str]]:
    """Each tensor of a name that sibling bodies share, by its ``TensorRef.key`` ('if1/then_branch/o') ->
    (its scope, its name): what a key read back from a report or a listing stands for."""
    shared = shared_names(sites)
    return {"/".join(s.scope + (t,)): (s.scope, t) for s in sites for t in s.node.output if t in shared}


def refs_by_key(model: onnx.ModelProto, names: list[str]) -> list[TensorRef]:
    """Bare ``TensorRef`` objects for ``names``, each a tensor's name or its ``TensorRef.key``: a key that
    qualifies a name sibling bodies share is that body's tensor (a runner's ``values`` then keys it so)."""
    bodies = any(a.type == onnx.AttributeProto.GRAPH for n in model.graph.node for a in n.attribute)
    scoped = scoped_tensors(walk(model)) if bodies and any("/" in n for n in names) else {}
    return [TensorRef(name=scoped[n][1], node="", op_type="", index=-1, scope=scoped[n][0], qualified=True)
            if n in scoped else TensorRef(name=n, node="", op_type="", index=-1) for n in names]


def _weights(model: onnx.ModelProto) -> list[str]:
    """The initializers of the main graph and of every If/Loop/Scan body, sparse ones included (nodes read those
    dense: weights as any other; a body's Constant is selected with --include-constants, and so is its initializer)."""
    return list(dict.fromkeys(n for g in all_graphs(model.graph) for n in
                              [i.name for i in g.initializer] + [s.values.name for s in g.sparse_initializer]))


def _named_values(model, sel: Selection, sites, types, outputs, lo: int, hi: int, every: bool = False) -> list[TensorRef]:
    """Graph inputs (and main-graph initializers given as model outputs; with include_constants, every weight, a
    body's too)
    whose name matches a glob, placed at their first consumer (as the debugger's graph index orders them).
    ``every``: no glob, the default selection's and --all's: the initializers given as outputs, and with
    include_constants and --all (or a bare --range) every weight, whatever its name."""
    first_use = first_readers(sites)
    inits = _weights(model)
    out = []
    candidates = [] if every else [(i.name, "input") for i in model.graph.input if i.name not in inits]
    # with include_constants, every weight is a tensor asked for: a glob's, --all's and a bare --range's
    candidates += [(n, "initializer") for n in inits
                   if (sel.include_constants and (not every or sel.all or sel.range)) or n in outputs]
    for name, kind in candidates:
        site = first_use.get(name)
        index = site.index if site is not None else 0
        if lo <= index <= hi and (every or _name_matches(sel.names, name)):
            out.append(_ref(name, site, types, outputs, kind, index))
    return out
