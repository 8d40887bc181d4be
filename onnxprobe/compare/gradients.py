"""``diff --grad``: a model's gradients as the observables of a comparison.

A ``GradSide`` is a ``Side`` whose values are the backward tensors of the model with its loss and
backward graph (``api.grad_plan``, one onnxruntime run for all of them). Its observables stand for the
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

from dataclasses import dataclass, field

import numpy as np
import onnx

from onnxprobe.compare.sides import Side
from onnxprobe.match.observe import FLOAT_TYPES, Observable, Observation, observe, stem
from onnxprobe.match.ops import canonical

SUFFIX = "_grad"


@dataclass
class GradSide(Side):
    kind: str = "grad"
    spec: object = None  # api.GradSpec, the same for both sides
    plan: object = None  # api.GradPlan, made by prepare()
    extra_feed: dict = field(default_factory=dict)
    loss: float | None = None
    no_gradient: dict = field(default_factory=dict)  # key of a weight that got no gradient -> its tensor
    _values: dict | None = None

    def prepare(self, feeds: dict[str, np.ndarray]) -> None:
        """Attach the loss and the backward graph for these inputs, and list the gradient observables."""
        from onnxprobe import api

        obs = observe(self.model.inferred)
        candidates = _candidates(self.model.inferred, obs)
        self.plan = api.grad_plan(self.model, self.spec, feed=feeds, names=[t for t, _ in candidates],
                                  unsupported="skip")
        self.notes += [f"{self.label}: {w}" for w in self.plan.warnings if w not in self.model.warnings]
        self.extra_feed = dict(self.plan.extra_feed)
        grads = self.plan.grads
        seen: set[str] = set()
        observables = []
        for t, o in candidates:
            if t in grads and o.key not in seen:
                seen.add(o.key)
                observables.append(Observable(
                    key=o.key + SUFFIX, name=o.name + SUFFIX, probe=grads[t], node=o.node, op_type=o.op_type,
                    effective_op=o.effective_op, index=o.index, shape=o.shape, kind=o.kind, is_output=o.is_output))
        observables.sort(key=lambda o: (o.index, not o.is_output, o.name))
        self._observation = Observation(observables, [], {})
        self.no_gradient = {o.key: t for t, o in candidates if o.is_output and t not in grads and o.key not in seen}
        if self.no_gradient:
            stops = _stops(self.model.inferred)
            names = list(self.no_gradient.values())
            self.notes.append(f"{self.label}: no gradient for {len(names)} weight(s) ({', '.join(names[:3])}"
                              f"{' …' if len(names) > 3 else ''})" + (f": the gradient stops at {stops}" if stops else ""))

    @property
    def observation(self) -> Observation:
        if self._observation is None:
            raise RuntimeError("GradSide.prepare(feeds) first")
        return self._observation

    def describe(self) -> str:
        return f"{self.label} (gradients, {self.device or self.config.device}, opt-level {self.config.opt_level})"

    def values(self, observables: list[Observable], feeds: dict[str, np.ndarray], keep_on_device: bool = False) -> dict:
        """One forward + backward run gives every gradient; later calls reuse it."""
        if self._values is None:
            from onnxprobe.runtime.session import create_session, resolve_device, run_bound

            self.device = self.device or resolve_device(self.config.device)
            session = create_session(self.plan.backward.model, device=self.device, opt_level=self.config.opt_level)
            self.notes += session.notes
            names = [self.plan.loss.loss] + [o.probe for o in self.observation.observables]
            out, _ = run_bound(session, {**feeds, **self.extra_feed}, list(dict.fromkeys(names)))
            self.loss = float(np.asarray(out[self.plan.loss.loss], np.float64).reshape(-1)[0])
            self._values = out
        return {o.probe: self._values[o.probe] for o in observables if o.probe in self._values}


def _candidates(model: onnx.ModelProto, obs: Observation) -> list[tuple[str, Observable]]:
    """(tensor to differentiate, the forward observable it stands for): weights (float initializers and
    Constants, and DequantizeLinear outputs of constants, keyed by the float weight), float graph inputs,
    and the activations ``observe`` lists (through the model's own tensor: the DequantizeLinear output of
    a QDQ pair, the rescaled result of a dynamic-quantization chain)."""
    from onnxprobe.autodiff.select import weights
    from onnxprobe.graph.shapes import static_shape, value_types
    from onnxprobe.graph.walk import walk

    types = value_types(model)
    sites = [s for s in walk(model) if not s.chain]
    first_use: dict[str, object] = {}
    for s in sites:
        for i in s.node.input:
            first_use.setdefault(i, s)
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

    qparam: dict[str, bool] = {}  # scales and zero points of QuantizeLinear / DequantizeLinear: no gradient by design
    for s in sites:
        for k, i in enumerate(s.node.input):
            quant = s.node.op_type in ("QuantizeLinear", "DequantizeLinear") and k >= 1
            qparam[i] = qparam.get(i, True) and quant
    out: list[tuple[str, Observable]] = []
    for w in weights(model):
        if qparam.get(w):
            continue
        o = weight_obs(w, w, "float")
        if o is not None:
            out.append((w, o))
    for s in sites:  # a dequantized constant stands for the float weight it was quantized from
        n = s.node
        if n.op_type == "DequantizeLinear" and n.input and n.input[0] in consts and n.output and is_float(n.output[0]):
            o = weight_obs(n.output[0], stem(n.output[0]), "qdq")
            if o is not None:
                out.append((n.output[0], o))
    for i in model.graph.input:
        if i.name not in inits and is_float(i.name) and i.name in first_use:
            s = first_use[i.name]
            out.append((i.name, Observable(key=i.name, name=i.name, probe=i.name, node=s.name, op_type="input",
                                           effective_op="input", index=-1, shape=static_shape(types.get(i.name)),
                                           kind="float")))
    for o in obs.observables:
        t = o.name if o.name in produced else (o.probe if o.probe in produced else None)
        if t is not None and is_float(t):
            out.append((t, Observable(key=o.key, name=o.name, probe=t, node=o.node, op_type=o.op_type,
                                      effective_op=o.effective_op, index=o.index, shape=o.shape, kind=o.kind)))
    return out


def _stops(model: onnx.ModelProto) -> str:
    """The ops of the model that read a float tensor and pass no gradient back (quantization, integer
    layers, ops without a rule), e.g. 'DynamicQuantizeLinear x3, MatMulInteger x3'."""
    from collections import Counter

    from onnxprobe.autodiff import registry
    from onnxprobe.graph.shapes import value_types

    types = value_types(model)
    harmless = ("returns", "builds a tensor", "string")  # shape queries, comparisons, indices: no gradient expected
    c: Counter = Counter()
    for n in model.graph.node:
        st = registry.status(n.op_type, n.domain)
        if st == "rule" or n.op_type == "Constant":
            continue
        if st == "non-differentiable" and registry.NON_DIFFERENTIABLE[n.op_type].startswith(harmless):
            continue
        tps = [types.get(i) for i in n.input if i]
        if any(tp is not None and tp.HasField("tensor_type") and tp.tensor_type.elem_type in FLOAT_TYPES for tp in tps):
            c[n.op_type] += 1
    return ", ".join(f"{op} x{k}" for op, k in c.most_common())


def explain_unmatched(matching, a: "GradSide") -> None:
    """An unmatched B gradient whose weight has no gradient in A says so, instead of 'no counterpart'."""
    integer = {i.name for i in a.model.inferred.graph.initializer if i.data_type not in FLOAT_TYPES}
    for u in matching.unmatched_b:
        if not u.reason.startswith("no counterpart"):
            continue
        base = u.obs.key[: -len(SUFFIX)] if u.obs.key.endswith(SUFFIX) else u.obs.key
        if base in a.no_gradient:
            u.reason = f"no gradient for {a.no_gradient[base]} in A"
        elif any(stem(i) == base for i in integer):
            u.reason = "an integer (quantized) weight in A: it has no gradient"


def grad_reason(pair) -> str:
    """The pairing reason, said of gradients."""
    base = pair.b.key[: -len(SUFFIX)] if pair.b.key.endswith(SUFFIX) else pair.b.key
    if pair.strategy == "qdq":
        return f"gradient of the dequantized {base}"
    if pair.strategy == "name":
        return f"gradient of {base} in both"
    return f"gradients: {pair.reason}"
