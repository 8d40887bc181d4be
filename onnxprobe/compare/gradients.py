"""``diff --grad``: a model's gradients as the observables of a comparison.

``grad_side`` builds a ``Side`` whose values are the backward tensors of the model with its loss and
backward graph (an ``api.GradPlan``, one onnxruntime run for all of them). Its observables stand for the
forward tensors they are the gradients of, with ``_grad`` appended to the names and keys:

- weights: ``<weight>_grad``; in a quantized model the float weight is a DequantizeLinear of a constant,
  keyed by the weight it was quantized from (``fc1.weight_DequantizeLinear_Output`` -> ``fc1.weight``);
- activations and graph inputs: ``<tensor>_grad``, keyed as ``match.observe`` keys the tensor itself (the
  gradient of QDQ's DequantizeLinear output stands for the float tensor X's gradient);

so that ``match`` pairs the gradients of A and B exactly as ``diff`` pairs their activations. Gradients
flow through QuantizeLinear / DequantizeLinear by the straight-through estimator (autodiff/rules/quant.py)
and stop at ops without a rule (ConvInteger, QLinearConv...): what lies behind them gets no gradient and
stays unmatched. Weight gradients are the results of a backward pass, as outputs are of a forward one:
``is_output`` is set on them, so the diff verdict (exit code 1) is about them.
"""

from __future__ import annotations

import math

import numpy as np
import onnx

from onnxprobe.autodiff import registry
from onnxprobe.autodiff.select import WRT, weights
from onnxprobe.compare.sides import GRADIENT_STOPPED, Side
from onnxprobe.errors import UsageError, in_words, said, setting_error
from onnxprobe.graph.constants import constants
from onnxprobe.graph.model import Model
from onnxprobe.graph.shapes import static_shape, value_types
from onnxprobe.graph.walk import first_readers, slot_readers, walk
from onnxprobe.match.engine import DIFFERENT_FUNCTION, NO_COUNTERPART, NO_GRADIENT
from onnxprobe.match.observe import FLOAT_TYPES, Observable, Observation, stem
from onnxprobe.match.ops import VALUE_PRESERVING, canonical
from onnxprobe.runtime.runners.base import Runner
from onnxprobe.runtime.runners.named import NamedRunner
from onnxprobe.runtime.runners.once import OnceRunner
from onnxprobe.text import matches, some
from onnxprobe.types import element_count, forward_name, grad_name


def grad_side(label: str, model: Model, plan, runner: Runner, candidates: list[tuple[str, Observable]],
              role: str = "A", who: tuple[str, str] | None = None) -> Side:
    """The side whose values are ``plan``'s gradients (an ``api.GradPlan`` of ``model`` made for
    ``candidates``), computed by ``runner`` over the backward model in one run with the loss. Its hidden
    entries say which weights got no gradient (so the other model's gradient of them is explained);
    ``role`` ("A" or "B") is how those reasons name this side; ``who``: its name and file, which each error
    of its runner starts with (``compare.sides.model_side``'s, ``NamedRunner``)."""
    # a gradient that sums only some of its ways to the loss (another passes an op without a rule) is a part
    # of the real one: not compared, as one that gets none is not
    partial = getattr(plan.backward, "partial", {})
    grads = {t: g for t, g in plan.grads.items() if t not in partial}
    seen: set[str] = set()
    slot = _slots(model.proto)
    ordered = []
    for t, o in candidates:
        if t in grads and o.key not in seen:
            seen.add(o.key)
            # what a node reads (its weights, a graph input) before what it writes, as in the forward graph: an input's
            # gradient sorted after its first reader's output was an anchor between a folded Conv and its tail
            reads = o.is_output or o.op_type == "input"
            ordered.append(((o.index, not reads, slot.get(t, 0), o.name), Observable(
                key=grad_name(o.key), name=grad_name(o.name), probe=grads[t], node=o.node, op_type=o.op_type,
                effective_op=o.effective_op, index=o.index, shape=o.shape, kind=o.kind, is_output=o.is_output,
                # what its node reads, by the gradients' names: the structural matching pairs by it as diff does
                tails_after=o.tails_after, conv_bn=o.conv_bn, data=o.data, weights=o.weights, weight_sizes=o.weight_sizes,
                weight_samples=o.weight_samples,  # its node's weights: two Convs of one weight took no tail in
                sources=tuple(x if x.startswith("input:") else grad_name(x) for x in o.sources))))
    # the weights of one node in the order it reads them (W before B), not by name: structural alignment
    # pairs by order, and names sort apart ('onnx::Conv_16' < 'onnx::Conv_17' but '0.bias' < '0.weight')
    observables = [o for _, o in sorted(ordered, key=lambda x: x[0])]
    no_gradient = {o.key: t for t, o in candidates if o.is_output and t not in plan.grads and o.key not in seen}
    hidden = {grad_name(k): f"no gradient for {t} in {role}" for k, t in no_gradient.items()}
    stopped = stopped_at(model.proto, list(no_gradient.values()))
    causes = {}
    for k, t in no_gradient.items():
        if stopped.get(t):  # the loss reads it, but an op without a rule stops its gradient: not compared
            hidden[grad_name(k)] += f": the gradient stops at {some(stopped[t], form=str)}"
            causes[grad_name(k)] = GRADIENT_STOPPED
    for t, o in candidates:
        if t in partial and grad_name(o.key) not in hidden:
            hidden[grad_name(o.key)] = (f"only a part of the gradient of {t} in {role}: one of its ways to the loss "
                                        f"passes {partial[t]}, which has no gradient rule")
            causes[grad_name(o.key)] = GRADIENT_STOPPED
    for i in model.proto.graph.initializer:
        if i.data_type not in FLOAT_TYPES:
            hidden.setdefault(grad_name(stem(i.name)), f"an integer (quantized) weight in {role}: it has no gradient")
    # a note that gives advice (errors.said: a GradSpec to the API, --loss on the command line) keeps both wordings
    notes = [said(lambda say, w=w: f"{label}: {in_words(w, say)}") for w in plan.warnings if w not in model.warnings]
    stops = gradient_stops(model.proto)
    if no_gradient:
        names = list(no_gradient.values())
        notes.append(f"{label}: no gradient for {len(names)} weight(s) ({some(names, form=str)})"
                     + (f": the gradient stops at {stops}" if stops else ""))
    elif stops:  # integer weights (QLinearConv's), which are no candidates: the stops said all the same, as grad says them
        notes.append(f"{label}: the backward pass stops at {stops} (integer and quantized ops pass no gradient back): "
                     "what lies behind them gets none")
    once = OnceRunner(runner, [plan.loss.loss] + [o.probe for o in observables], plan.extra_feed)
    return Side(label, model, once if who is None else NamedRunner(once, who), Observation(observables, [], hidden), notes, hidden_cause=NO_GRADIENT,
                hidden_causes=causes)


def _slots(model: onnx.ModelProto) -> dict[str, int]:
    """Tensor -> its input position in the first node that reads it (as ``candidates`` finds that node)."""
    out: dict[str, int] = {}
    for s in walk(model):
        if not s.chain:
            for k, i in enumerate(s.node.input):
                out.setdefault(i, k)
    return out


def loss_value(side: Side, feeds: dict) -> float:
    """The loss of a gradient side on ``feeds`` (from its one forward+backward run)."""
    runner = side.runner
    name = runner.names[0]
    value = runner.values([name], feeds)[name]
    return float(np.asarray(value, np.float64).reshape(-1)[0])


def half_outputs(model: onnx.ModelProto) -> bool:
    """Whether every output of ``model`` is float16 or bfloat16 (its loss is then a half-precision one)."""
    outs = [o.type.tensor_type.elem_type for o in model.graph.output if o.type.HasField("tensor_type")]
    return bool(outs) and all(t in (onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16) for t in outs)


def losses_differ(grad: dict | None, half: bool = False) -> bool:
    """Whether the two losses differ beyond float32's rounding (with ``half``, float16's: a loss one float16
    step apart is no disagreement), or one is NaN or infinite and the other not: the forward passes disagree."""
    la, lb = (grad or {}).get("loss_a"), (grad or {}).get("loss_b")
    rel = 5e-3 if half else 1e-4
    if not all(isinstance(v, float) for v in (la, lb)):
        return False
    if math.isfinite(la) != math.isfinite(lb):  # NaN or Inf on one side only: one forward pass went wrong
        return True
    return math.isfinite(la) and abs(la - lb) > rel * max(1.0, abs(lb))


def forward_note(grad: dict, half: bool = False, b: str = "B",
                 where: tuple[str, str] = ("api.diff(a, b)", "`diff A B` (without --grad)"), weights: list[str] = ()) -> list[str]:
    """A note when the two losses differ, or (``weights``: those that hold other values than the torch parameters they
    stand for) where they moved less than their rounding: the forward passes disagree, so the gradients need not agree
    anywhere, and no failing one is where the error starts (a changed weight upstream shows first in the
    gradients of the weights after it: ``gradient_origin`` marks none). ``b``: how B is called; ``where``:
    what shows where the forward passes part, as the API and the command line say it (``errors.said``)."""
    if losses_differ(grad, half):
        why = f"the losses differ (A {grad['loss_a']:.6g}, {b} {grad['loss_b']:.6g})"
    elif weights:  # (a Conv channel 10% off moved the loss by 4e-5 of it)
        why = f"weights hold other values than the {b} parameters ({some(weights)})"
    else:
        return []
    return [said(lambda say: f"{why}: the forward passes disagree, so the gradients need not agree and their differences "
                 f"start in the forward pass, not at a backward step; {say.either(*where)} shows where the forward goes wrong")]


def candidates(model: onnx.ModelProto, obs: Observation, extra: frozenset[str] | set[str] = frozenset(),
               no_weights: frozenset[str] | set[str] | dict = frozenset()) -> list[tuple[str, Observable]]:
    """(tensor to differentiate, the forward observable it stands for): weights (float initializers and
    Constants, and DequantizeLinear outputs of constants, keyed by the float weight), float graph inputs,
    and the activations ``observe`` lists (through the model's own tensor: the DequantizeLinear output of
    a QDQ pair, the rescaled result of a dynamic-quantization chain). ``extra``: one-element initializers
    that are weights all the same (they hold a torch parameter: ``--vs-torch``); ``no_weights``: constants
    that are not (an RNN's zero initial state: ``graph.rnn_states``)."""
    types = value_types(model)
    sites = [s for s in walk(model) if not s.chain]
    # a body reads weights of the main graph too (those hoist_constants moved out of it)
    first_use = first_readers(sites, implicit=True)
    produced = {o for s in sites for o in s.node.output if o}
    inits = {i.name for i in model.graph.initializer}
    consts = inits | {s.node.output[0] for s in sites if s.node.op_type == "Constant" and s.node.output}

    def is_float(t: str) -> bool:
        tp = types.get(t)
        return tp is not None and tp.HasField("tensor_type") and tp.tensor_type.elem_type in FLOAT_TYPES

    def weight_obs(t: str, key: str, kind: str) -> Observable | None:
        s = first_use.get(t)
        if s is None:
            return None
        op = s.node.op_type
        # "Conv weight": a weight's gradient pairs with weights' gradients only, never with an activation's
        return Observable(key=key, name=t, probe=t, node=s.name, op_type=op, effective_op=f"{canonical(op)} weight",
                          index=s.index, shape=static_shape(types.get(t)), kind=kind, is_output=True)

    out: list[tuple[str, Observable]] = []
    held = weights(model)
    for w in [w for w in held if w not in no_weights] + sorted(set(extra) - set(held)):  # quantization params are left out there
        o = weight_obs(w, w, "float")
        if o is not None:
            out.append((w, o))
    for s in sites:  # a dequantized constant stands for the float weight it was quantized from
        n = s.node
        if n.op_type == "DequantizeLinear" and n.input and n.input[0] in consts and n.output and is_float(n.output[0]):
            shape = static_shape(types.get(n.output[0]))
            if shape is not None and (size := element_count(shape)) is not None and size < 2:
                continue  # one value: a constant of the formula (a dropout scale), as a float one is (``weights``)
            o = weight_obs(n.output[0], stem(n.output[0]), "qdq")
            if o is not None:
                out.append((n.output[0], o))
    for i in model.graph.input:
        if i.name not in inits and is_float(i.name) and i.name in first_use:
            s = first_use[i.name]
            out.append((i.name, Observable(key=i.name, name=i.name, probe=i.name, node=s.name, op_type="input",
                                           effective_op="input", index=s.index, shape=static_shape(types.get(i.name)),
                                           kind="float")))
    for o in obs.observables:
        t = o.name if o.name in produced else (o.probe if o.probe in produced else None)
        if t is not None and is_float(t):
            # a Conv with its BatchNormalization folded in is the tail's function, whose gradient its own is; one
            # the tail follows is not (match.folds): without the marks the two Convs' gradients paired, a false FAIL;
            # without what each node reads, the structural matching paired by op and shape alone
            out.append((t, Observable(key=o.key, name=o.name, probe=t, node=o.node, op_type=o.op_type,
                                      effective_op=o.effective_op, index=o.index, shape=o.shape, kind=o.kind,
                                      tails_after=o.tails_after, conv_bn=o.conv_bn, sources=o.sources, data=o.data,
                                      weights=o.weights, weight_sizes=o.weight_sizes, weight_samples=o.weight_samples)))
    return out


def scalars(model: onnx.ModelProto) -> set[str]:
    """The one-element float constants of ``model``: constants of the formula, unless ``--wrt`` names one (a
    learnable clamp's bound, as ``grad --wrt`` takes it: autodiff.select)."""
    many = weights(model)
    return {n for n in weights(model, smallest=1) if n not in many}


def wrt_scalars(models: list[onnx.ModelProto], wrt: tuple[str, ...]) -> list[set[str]]:
    """Each model's scalars to take as weights for ``wrt`` (names or globs): where it names one in either
    model, every scalar of both, so that the one named pairs with the other model's, named otherwise
    (legacy's 'onnx::Clip_9' is dynamo's 'linear_min'; ``wrt_pairing`` then keeps the pairs it names)."""
    found = [scalars(m) if wrt else set() for m in models]
    named = any(matches(n, pat) for f in found for n in f for pat in wrt)
    return found if named else [set() for _ in models]


def _stops(n: onnx.NodeProto, types) -> bool:
    """``n`` reads a float tensor and passes no gradient back (quantization, integer layers, no rule)."""
    st = registry.status(n.op_type, n.domain)
    if st == "rule" or n.op_type == "Constant":
        return False
    if st == "non-differentiable" and registry.structural(n.op_type):
        return False
    tps = [types.get(i) for i in n.input if i]
    return any(tp is not None and tp.HasField("tensor_type") and tp.tensor_type.elem_type in FLOAT_TYPES for tp in tps)


def gradient_stops(model: onnx.ModelProto) -> str:
    """The ops of the model that read a float tensor and pass no gradient back (quantization, integer
    layers, ops without a rule), e.g. 'DynamicQuantizeLinear x3, MatMulInteger x3'."""
    from collections import Counter

    types = value_types(model)
    c: Counter = Counter(registry.key(n.op_type, n.domain) for n in model.graph.node if _stops(n, types))
    return ", ".join(f"{op} x{k}" for op, k in c.most_common())


def stopped_at(model: onnx.ModelProto, tensors: list[str]) -> dict[str, list[str]]:
    """Tensor -> the ops ('MatMulInteger mm2', 'com.microsoft:QAttention attn') where the way from it forward
    first meets one that passes no gradient back: why a weight the loss reads got none ([] where nothing stops it: the loss does not read it)."""
    types = value_types(model)
    readers: dict[str, list[onnx.NodeProto]] = {}
    for n in model.graph.node:
        for i in set(n.input):
            readers.setdefault(i, []).append(n)
    out = {}
    for t in tensors:
        todo, seen, found = [t], {t}, []
        while todo:
            for n in readers.get(todo.pop(0), []):
                if _stops(n, types):
                    found.append(f"{registry.key(n.op_type, n.domain)} {n.name}".strip())
                    continue
                todo += [o for o in n.output if o and o not in seen]
                seen.update(n.output)
        out[t] = list(dict.fromkeys(found))
    return out


def grad_reason(pair) -> str:
    """The pairing reason, said of gradients."""
    base = forward_name(pair.b.key) or pair.b.key
    if pair.strategy == "qdq":
        return f"gradient of the dequantized {base}"
    if pair.strategy == "name":
        return f"gradient of {base} in both"
    return f"gradients: {pair.reason}"


# ops that hand a weight on unchanged in value (a copy, another layout or type): the nodes that read their
# output read the weight (the matcher's value-preserving moves, less Expand, which repeats it)
PASS_ON = tuple(sorted(VALUE_PRESERVING - {"Expand"}))


def _readers(model: onnx.ModelProto) -> dict[str, list[str]]:
    """Tensor -> the ops of the nodes that read it (domain:op outside the default domain), looking through
    ``PASS_ON`` ops (an Identity copy of a weight is the weight), in the whole model (subgraph bodies read outer tensors by name)."""
    direct: dict[str, list] = {}
    for s in walk(model):
        for i in {i for i in s.node.input if i}:
            direct.setdefault(i, []).append(s.node)

    def through(t: str, depth: int = 0) -> list[str]:
        out = []
        for n in direct.get(t, []):
            if n.op_type in PASS_ON and n.output and depth < 32:
                out += through(n.output[0], depth + 1)
            else:
                out.append(registry.key(n.op_type, n.domain))
        return out

    return {t: through(t) for t in direct}


def shared_weights(a: onnx.ModelProto, b: onnx.ModelProto):
    """A pair filter for weight gradients: a weight's gradient is the sum over the nodes that read it, so
    two weights read by different numbers of nodes are different functions of the data, and so are their
    gradients, even with the same values (GPT-2's legacy export reads one zero tensor as 5 LayerNorm
    biases and, through Identity, as 4 Gemm biases; dynamo's as the 5 LayerNorm biases only: B's gradient
    was A's plus the four Gemm bias gradients, a false FAIL). Only the count is compared, not the ops:
    exporters read the same weight with other ops (Gemm or MatMul+Add, LayerNormalization or Mul/Add)."""
    ra, rb = _readers(a), _readers(b)

    def said(ops: list[str]) -> str:
        from collections import Counter

        return ", ".join(f"{k} {op}" for op, k in sorted(Counter(ops).items()))

    def reject(pair) -> str | None:
        if not (pair.a.effective_op.endswith(" weight") and pair.b.effective_op.endswith(" weight")
                and pair.a.kind == "float" and pair.b.kind == "float"):
            return None
        oa, ob = ra.get(forward_name(pair.a.name) or ""), rb.get(forward_name(pair.b.name) or "")
        if not oa or not ob or len(oa) == len(ob):
            return None
        return (f"the two weights are read by different nodes ({len(oa)} in A: {said(oa)}; {len(ob)} in B: "
                f"{said(ob)}): a weight's gradient sums over its readers, so these are different functions of "
                "the data, and so are their gradients", DIFFERENT_FUNCTION)

    return reject


def _orientations(model: onnx.ModelProto) -> dict[str, tuple[int, str]]:
    """2-D weight -> (1 where the layers reading it read it transposed, else 0; the first reader, as said): a
    Gemm's transA / transB for its input 0 / 1, MatMul as it is, each Transpose on the way turning it over
    (through Identity and Cast). A weight read both ways, or through another op, is left out."""
    held = constants(model.graph)
    direct = slot_readers(s.node for s in walk(model))

    def ways(t: str, flip: int, depth: int = 0) -> list[tuple[int, str]] | None:
        got = []
        for n, k in direct.get(t, []):
            if n.op_type in ("Identity", "Cast") and depth < 16:
                more = ways(n.output[0], flip, depth + 1)
            elif n.op_type == "Transpose" and depth < 16:
                perm = next((list(a.ints) for a in n.attribute if a.name == "perm"), [1, 0])
                more = ways(n.output[0], 1 - flip, depth + 1) if perm == [1, 0] else None
            elif n.op_type == "Gemm" and k < 2:
                trans = next((a.i for a in n.attribute if a.name == ("transA", "transB")[k]), 0)
                more = [(flip ^ int(bool(trans)), f"Gemm {n.name or n.output[0]!r}" + (f" (trans{'AB'[k]}=1)" if trans else ""))]
            elif n.op_type == "MatMul":
                more = [(flip, f"MatMul {n.name or n.output[0]!r}")]
            else:
                more = None
            if more is None:
                return None
            got += more
        return got

    out = {}
    for w, t in held.items():
        if len(t.dims) == 2 and (got := ways(w, 0)) and len({g[0] for g in got}) == 1:
            out[w] = got[0]
    return out


def transposed_weights(a: onnx.ModelProto, b: onnx.ModelProto):
    """A pair filter for weight gradients: a layer's weight that one model reads transposed (Gemm transB=1:
    torch's legacy export of nn.Linear) and the other holds transposed (dynamo's torch.addmm(b, x, W.t()): its
    Gemm reads W^T, an initializer) is the other's transpose, and so is its gradient: a square one has one
    shape in both, and compared element by element it FAILed on two exports of one module."""
    oa, ob = _orientations(a), _orientations(b)

    def reject(pair):
        if not (pair.a.effective_op.endswith(" weight") and pair.b.effective_op.endswith(" weight")):
            return None
        ra, rb = oa.get(forward_name(pair.a.name) or ""), ob.get(forward_name(pair.b.name) or "")
        if ra is None or rb is None or ra[0] == rb[0]:
            return None
        how = ("as it is", "transposed")
        return (f"the two weights are each other's transpose (A's {ra[1]} reads it {how[ra[0]]}, B's {rb[1]} "
                f"{how[rb[0]]}): so are their gradients, which are not compared element by element", DIFFERENT_FUNCTION)

    return reject


def both(*filters):
    """The pair filter refusing what any of ``filters`` refuses (the first reason)."""
    def reject(pair):
        return next((r for r in (f(pair) for f in filters) if r is not None), None)

    return reject


def wrt_pairing(sides: list[Side], wrt: tuple[str, ...], input_shapes: dict | None = None):
    """``diff``'s ``pair`` for ``wrt`` (names or globs of forward tensors): the two sides' gradients are paired
    as they are without it, then the pairs either of whose tensors ``wrt`` names are kept, and the unmatched
    gradients it names. The exporters name one weight apart (legacy 'onnx::LSTM_117', dynamo 'val_41'): a
    filter before pairing kept the other side's counterparts out, and nothing was compared. A pattern that
    names no gradient of either side is refused, as grad refuses it (a mistake, not a filter to ignore)."""
    from onnxprobe.match.concrete import match_for_inputs
    from onnxprobe.match.engine import Matching

    def names(o) -> list[str]:
        return [f for f in (forward_name(o.name), forward_name(o.key)) if f]

    def wanted(o) -> bool:
        return any(matches(n, pat) for n in names(o) for pat in wrt)

    every = [n for side in sides for o in side.observation.observables for n in names(o)]
    idle = next((pat for pat in wrt if not any(matches(n, pat) for n in every)), None)
    if idle is not None:
        raise setting_error(UsageError, WRT, f"{idle!r}: no gradient of either model matches it (a weight, input or node output name)")
    a, b = sides

    def pair(obs_a, obs_b, user_map) -> Matching:
        m = match_for_inputs(a.model.proto, b.model.proto, obs_a, obs_b, user_map, input_shapes)
        kept = Matching([p for p in m.pairs if wanted(p.a) or wanted(p.b)], [u for u in m.unmatched_a if wanted(u.obs)],
                        [u for u in m.unmatched_b if wanted(u.obs)])
        if not kept.pairs and not kept.unmatched_a:
            raise setting_error(UsageError, WRT, f"{', '.join(wrt)}: no gradient of model A matches, nor one paired with B's it names")
        return kept

    return pair


def nothing_selected(res, selection, models) -> None:
    """A diff --grad report that neither pairs nor lists a gradient (``res``, a DiffResult) has nothing to judge:
    refused in one line saying why, instead of an empty table read as 'nothing could be paired'. The selection's
    tensors are integers or booleans (a UsageError: they carry no gradient), or float ones the loss gives no
    gradient (a ModelError: it does not depend on them, or only through integer values)."""
    from onnxprobe.errors import ModelError
    from onnxprobe.graph.select import select

    ua = [u for u in res.matching.unmatched_a if res.selected_a is None or u.obs.name in res.selected_a]
    ub = [u for u in res.matching.unmatched_b if u.obs.name in res.selected_b]
    if res.results or ua or ub:
        return
    refs = {r.key: r for m in models for r in select(m, selection, strict=False)}
    floats = {"float32", "float16", "bfloat16", "float64", None}
    # a body's tensors get no gradient row (as grad says: autodiff.select), whatever the loss depends on
    body = [r for r in refs.values() if r.scope]
    ints = [r for r in refs.values() if r.dtype not in floats and not r.scope]
    rest = [r for r in refs.values() if r.dtype in floats and not r.scope]

    def shown(rs) -> str:
        return some(rs, form=lambda r: f"{r.key!r} ({r.dtype or 'untyped'})")

    why = f"the selection ({selection.describe()}) holds no gradient of either model"
    if (ints or body) and not rest:
        said = ([f"{len(ints)} integer or boolean tensor(s), which carry no gradient: {shown(ints)}"] if ints else []) + (
            [f"{len(body)} tensor(s) inside If/Loop/Scan bodies, which get no gradient row: {shown(body)}"] if body else [])
        raise UsageError(f"{why}: {'; '.join(said)}")
    raise ModelError(f"{why}: no gradient reaches {shown(rest) if rest else 'its tensors'} (the loss does not depend "
                     "on them, or only through integer values or ops without a gradient)")


def explain_stopped(matching, a: onnx.ModelProto, b: onnx.ModelProto) -> None:
    """A gradient of one model left without a counterpart where the other model's backward pass stops at ops that
    pass no gradient (a QOperator model's QLinearConv, a dynamic one's DynamicQuantizeLinear): the reason says so, as
    "no counterpart in A" alone read as if A lacked the layer (the bias of a Conv that A holds as int32 in its
    QLinearConv)."""
    for unmatched, other, model in ((matching.unmatched_b, "A", a), (matching.unmatched_a, "B", b)):
        stops = gradient_stops(model) if any(u.cause == NO_COUNTERPART for u in unmatched) else ""
        if not stops:
            continue
        short = some(stops.split(", "), 2, form=str)
        for u in unmatched:
            if u.cause == NO_COUNTERPART:
                u.reason += f"; {other}'s backward pass stops at {short} (no gradient behind them)"
