"""``diff --grad --vs-torch``: one torch parameter held by several initializers, each it alone (``ParamMap.ties``):
a tied weight (GPT-2's ``lm_head.weight`` is ``transformer.wte.weight``) that the exporter stores as it is
for the embedding's Gather and transposed for the head's MatMul, or as two copies; or one parameter a
MatMul reads transposed and a Gemm as it is. torch's gradient of it is the sum over all its reads; the
ONNX graph splits that sum among the initializers. The backward graph gets one more tensor, the Sum of
their gradients, each brought back to the parameter's layout (a Transpose, a Reshape dropping unit
axes), and that sum is compared with torch's gradient, as parameters merged into one initializer are
compared with the sum of theirs. Its name says what was summed: ``head.weight_grad+val_2_grad^T``."""

from __future__ import annotations

from dataclasses import dataclass, replace

from onnxprobe.compare.sides import Side
from onnxprobe.graph.builder import GraphBuilder, all_names, opset_version
from onnxprobe.match.engine import FOLDED, Pair, Unmatched
from onnxprobe.match.observe import Observable
from onnxprobe.torch.params import ParamLink
from onnxprobe.types import grad_name


@dataclass
class Tie:
    param: str  # the torch parameter
    links: list[ParamLink]  # the initializers that hold it
    tensor: str  # the sum of their gradients in the backward graph, in the parameter's layout
    name: str  # as reported: the gradients summed, '^T' where transposed back

    def how(self) -> str:
        parts = [f"{link.init} ({'transposed back' if link.transposed else 'reshaped back' if link.shape else _summed(link) if link.broadcast is not None else 'as it is'})"
                 for link in self.links]
        if len(parts) == 1:
            return (f"gradient of the parameter {self.param}, which the initializer {parts[0]} holds broadcast (the "
                    "exporter's copy): torch's gradient is the sum over the copies")
        return (f"gradient of the parameter {self.param}, which {len(self.links)} initializers hold (a tied weight, or "
                f"the exporter's copies): torch's gradient is the sum over its reads, compared with the sum of "
                f"theirs, {', '.join(parts[:-1])} and {parts[-1]}")


def add_tie_sums(plan, ties: dict[str, list[ParamLink]], shapes: dict[str, tuple],
                 cands: list[tuple[str, Observable]]) -> tuple[list[Tie], list[tuple[str, Observable]]]:
    """Adds to ``plan``'s backward graph, for each parameter of ``ties`` (``shapes``: its shape), the sum of
    its initializers' gradients, and to ``plan.grads`` that sum under its own name; returns the ties and
    the candidates (``compare.gradients.candidates``' form) that ``grad_side`` makes their observables of.
    A parameter one of whose initializers has no gradient of its own in the plan (none, or a part only:
    an op without a gradient rule on one of its ways) is left out: its sum would be another function."""
    bw = plan.backward.model
    partial = getattr(plan.backward, "partial", {})
    first: dict[str, Observable] = {}
    for t, o in cands:
        first.setdefault(t, o)
    b = GraphBuilder(all_names(bw), opset_version(bw, default=13), nodes=bw.graph.node, scope="onnxprobe_tie")

    out, extra = [], []
    for p, links in ties.items():
        if any(link.init not in plan.grads or link.init in partial or link.init not in first for link in links):
            continue
        parts = []
        for link in links:
            g = plan.grads[link.init]
            if link.transposed:
                g = b.node("Transpose", [g], f"{g}_T")
            elif link.broadcast is not None:  # summed over the axes it was broadcast along, then in the parameter's shape
                g = b.node("Reshape", [b.reduce_sum(g, list(link.broadcast)), b.ints(shapes[p])], f"{g}_as_param")
            elif link.shape is not None:
                g = b.node("Reshape", [g, b.ints(shapes[p])], f"{g}_as_param")
            parts.append(g)
        tensor = b.node("Sum", parts, f"{p}_grad_tied_sum")
        plan.grads[tensor] = tensor  # its own key: grad_side reads each candidate's gradient there
        extra.append((tensor, replace(first[links[0].init], key=tensor, name=tensor, shape=tuple(shapes[p]))))
        out.append(Tie(p, list(links), tensor, "+".join(grad_name(link.init) + ("^T" if link.transposed else "") + (
            f"^sum({','.join(map(str, link.broadcast))})" if link.broadcast is not None else "") for link in links)))
    return out, extra


def _summed(link: ParamLink) -> str:
    return f"the exporter's copy broadcast along axes {', '.join(map(str, link.broadcast))}, summed over them"


def name_ties(side: Side, ties: list[Tie]) -> None:
    """The sums' observables of ``side`` (``grad_side``'s, named after their tensor) named as reported."""
    by_probe = {t.tensor: t for t in ties}
    obs = side.observation.observables
    obs[:] = [replace(o, key=by_probe[o.probe].name, name=by_probe[o.probe].name) if o.probe in by_probe else o
              for o in obs]


def pair_ties(obs_a: list[Observable], ties: list[Tie], b_obs) -> tuple[list[Pair], list[Unmatched], set[str], set[str]]:
    """The sums paired with torch's gradient of their parameter (``b_obs(a, parameter)``: B's observable),
    the initializers' own gradients unmatched (compared in the sum); and the observables and parameters done."""
    by_probe = {t.tensor: t for t in ties}
    summed = {grad_name(link.init): t for t in ties for link in t.links}
    pairs, un_a, done = [], [], set()
    for o in obs_a:
        if o.probe in by_probe:
            t = by_probe[o.probe]
            pairs.append(Pair(o, b_obs(o, t.param), "torch-param", t.how()))
            done.add(o.name)
        elif o.name in summed:
            t = summed[o.name]
            link = next(k for k in t.links if grad_name(k.init) == o.name)
            copy = (f" broadcast along axes {', '.join(map(str, link.broadcast))} (the exporter's copy of it)"
                    if link.broadcast is not None else "")
            un_a.append(Unmatched(o, f"holds the parameter {t.param}{copy}, which {len(t.links)} initializer"
                                     f"{'s hold' if len(t.links) > 1 else ' holds'}: compared as a part of their sum, {t.name}", FOLDED))
            done.add(o.name)
    return pairs, un_a, done, {by_probe[o.probe].param for o in obs_a if o.probe in by_probe}
