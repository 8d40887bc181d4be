"""The tensors of If branches as a diff observes them, each with the record of what it reads.

A branch runs once or not at all, so each of its tensors holds one value or none, which a diff can pair
(``GraphRunner.values`` leaves out the ones whose branch did not run). Like the main graph's, each records
what its node reads (``Observable.sources``: the nearest observed tensors upstream, found through the
scopes that enclose it, so that the outer tensors a branch reads implicitly count), and an integer
tensor (a shape computation, an index) its operands and values (``slots``, ``attrs``, ``values``:
``match.integers``), so that branch integers pair only where they are one function of the data, as the
main graph's do. Loop and Scan bodies are left out: their tensors hold one value per iteration
(``match.bodies``)."""

from __future__ import annotations

from dataclasses import replace

import onnx

from onnxprobe.graph.constants import constants
from onnxprobe.graph.select import shared_names
from onnxprobe.graph.shapes import own_type, static_shape
from onnxprobe.graph.summary import not_a_tensor
from onnxprobe.match.integers import attributes, int_constants, slots_of, symbolic
from onnxprobe.match.ops import VALUE_PRESERVING, canonical

_FLOATS = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16, onnx.TensorProto.DOUBLE}


def _quantized_codes(op: str) -> bool:
    """An integer tensor a quantizer wrote: its codes mean nothing without the scale (no quantized form is
    worked out inside a branch, so it is not compared)."""
    return "Quant" in op or op.startswith("QLinear") or op in ("QGemm", "QAttention")


def branch_observables(sites: list, types: dict, const: set[str], every_type: dict, hidden: dict, bare: list,
                       main: list, producer: dict, inputs: set[str], ints: dict[str, str], observable) -> list:
    """The observables of If branches (at any depth; ``observable(**fields)`` makes one), given the main
    graph's (``main``, its ``producer`` sites by tensor, its ``inputs`` and small integer constants ``ints``).
    A name that sibling bodies share (two If nodes' branches each naming 'o') is each body's tensor by its
    ``TensorRef.key`` ('if1/then_branch/o'): its name, probe and key, so that each pairs with its own
    counterpart and the runner returns its own value (``graph.select.refs_by_key``). Sequences, optionals and
    strings go to ``bare`` (and ``hidden``), as the main graph's do."""
    br = _Branches(sites, types, const, main, producer, inputs, ints)
    found = _branch_outputs(br, every_type, hidden, bare, observable)
    br.observed = {o.name for o in main} | {k for _, _, k, _, _ in found}
    return [_branch_observable(br, s, t, k, tp, data, observable) for s, t, k, tp, data in found]


class _Branches:
    """The If branches' node sites (``inside``) with what naming and tracing their tensors needs, built once:
    ``key`` and ``type_of`` of a tensor, ``site_of`` its writer as a scope sees it, ``upstream`` what it is
    computed from, ``integers_of`` a scope's integer constants and values. ``observed`` (the observed names,
    the main graph's and the branches') is set once the branches' tensors are found; ``upstream`` reads it."""

    def __init__(self, sites: list, types: dict, const: set[str], main: list, producer: dict, inputs: set[str],
                 ints: dict[str, str]) -> None:
        self.types, self.const, self.producer, self.inputs, self.ints = types, const, producer, inputs, ints
        self.shared = shared_names(sites)
        self.inside = [s for s in sites if s.chain and all(n.op_type == "If" for n, _ in s.chain)]
        self.writers = {(s.scope, t): s for s in self.inside for t in s.node.output if t}
        self.graphs = {s.scope: s.graph for s in self.inside}
        self.observed: set[str] = {o.name for o in main}
        self.memo: dict = {}
        self.scoped: dict[tuple, tuple] = {}

    def key(self, s, t: str) -> str:
        """``t``'s name as written by site ``s``: its scoped key where sibling bodies share the name."""
        return "/".join(s.scope + (t,)) if s.chain and t in self.shared else t

    def type_of(self, s, t: str):
        """``t``'s type as written by site ``s`` (its own body's, where sibling bodies share the name)."""
        return (own_type(s.graph, t) or self.types.get(t)) if s.chain and t in self.shared else self.types.get(t)

    def site_of(self, scope: tuple, t: str):
        """The node that writes ``t`` as a node in ``scope`` sees it: its own body's, an enclosing one's, the main graph's."""
        for n in range(len(scope), 0, -1):
            if (scope[:n], t) in self.writers:
                return self.writers[scope[:n], t]
        return self.producer.get(t)

    def upstream(self, scope: tuple, t: str) -> frozenset:
        """The observed tensors and graph inputs ("input:NAME") nearest upstream of ``t`` as ``scope`` sees it."""
        s = self.site_of(scope, t)
        inputs, memo = self.inputs, self.memo
        if s is None or (not s.chain and t in inputs):
            return frozenset({f"input:{t}"}) if t in inputs else frozenset()
        if t in self.const or (s.scope, t) in memo:
            return memo.get((s.scope, t), frozenset())
        memo[s.scope, t] = frozenset()  # a cycle tells nothing
        k, n = self.key(s, t), s.node
        if k in self.observed and n.op_type not in VALUE_PRESERVING:
            out = frozenset({k})
        else:
            behind = frozenset().union(*(self.upstream(s.scope, i) for i in n.input if i))
            out = frozenset({k}) | behind if k in self.observed else behind
        memo[s.scope, t] = out
        return out

    def integers_of(self, scope: tuple) -> tuple[dict, object]:
        """The small integer constants ``scope`` sees, and ``symbolic``'s values of its tensors."""
        if scope not in self.scoped:
            visible = dict(self.ints)
            for n in range(1, len(scope) + 1):
                visible.update(int_constants(constants(self.graphs.get(scope[:n], onnx.GraphProto()))))
            br = self

            class Visible:  # the writers a node of ``scope`` sees, by tensor name
                def __contains__(self, t):
                    return br.site_of(scope, t) is not None

                def __getitem__(self, t):
                    return br.site_of(scope, t)

            def shape_of(t: str):
                s = br.site_of(scope, t)
                return static_shape(br.type_of(s, t) if s is not None else br.types.get(t))

            def name_of(t: str):
                s = br.site_of(scope, t)
                return (f"input:{t}" if s is None and t in br.inputs
                        else br.key(s, t) if s is not None and br.key(s, t) in br.observed else None)

            self.scoped[scope] = visible, symbolic(Visible(), visible, shape_of, name_of, self.inputs)
        return self.scoped[scope]


def _branch_outputs(br: _Branches, every_type: dict, hidden: dict, bare: list, observable) -> list[tuple]:
    """The branch tensors to observe, as (site, tensor, key, type, holds floats); the ones that are no
    tensor (sequences, optionals) or strings go to ``bare`` and ``hidden`` instead, a quantizer's codes nowhere."""
    found: list[tuple] = []
    for s in br.inside:
        for t in s.node.output:
            if not t or t in br.const:
                continue
            k, tp = br.key(s, t), br.type_of(s, t)
            what = not_a_tensor(every_type.get(t) if tp is None else tp, s.node.op_type)
            et = tp.tensor_type.elem_type if tp is not None and tp.HasField("tensor_type") else 0
            if what or et == onnx.TensorProto.STRING:
                hidden[k] = (f"{what}, not a tensor" if what else "a string tensor") + ": no difference to measure"
                bare.append(observable(key=k, name=k, probe=k, node=s.name, op_type=s.node.op_type,
                                       effective_op=s.node.op_type, index=s.index, shape=None, kind="float",
                                       scope="/".join(s.scope)))
                continue
            if et not in _FLOATS and et and _quantized_codes(s.node.op_type):
                continue
            found.append((s, t, k, tp, et in _FLOATS or not et))
    return found


def _branch_observable(br: _Branches, s, t: str, k: str, tp, data: bool, observable):
    """The observable of branch tensor ``t`` (written by site ``s``, keyed ``k``, of type ``tp``) with what its
    node reads; an integer one (not ``data``) with its operands, attributes and values too."""
    n = s.node
    o = observable(key=k, name=k, probe=k, node=s.name, node_named=bool(n.name), op_type=n.op_type,
                   effective_op=canonical(n.op_type), index=s.index, shape=static_shape(tp), kind="float",
                   scope="/".join(s.scope), data=data,
                   sources=tuple(sorted(frozenset().union(*(br.upstream(s.scope, i) for i in n.input if i)))))
    if not data:
        visible, values_of = br.integers_of(s.scope)
        o = replace(o, slots=slots_of(n, br.const, visible, lambda i, at=s.scope: br.upstream(at, i)) or (("",),),
                    attrs=attributes(n), values=values_of(t))
    return o
