"""Where forward() stops torch's gradient, which an ONNX graph (no stop-gradient) cannot say: ``.detach()`` on
a parameter (or a view of one), and values read with gradient off (``torch.no_grad()``,
``torch.set_grad_enabled(False)``, ``torch.inference_mode()``, as a context or a decorator).

``watch`` sees every torch call forward() makes (a ``TorchFunctionMode``) and fills a ``Cuts``. Given
``through`` (parameters whose ``.detach()`` is to be kept in the graph: a view instead of a detached copy,
the same values) and ``grad_on`` (gradient left on where forward() turns it off: ``torch._C._set_grad_enabled``
is what every one of those calls), the same pass differentiates through those cuts, the function the ONNX
graph computes. A write in place into the module's state made with gradient off (an update of a parameter
or a buffer) still runs with gradient off then: with it on, a parameter's would raise and a buffer's would
keep the graph. ``values`` keeps in the graph every ``.detach()`` of a value that carries a gradient and is
not a parameter (an input, a layer's output), which ``Cuts.values`` says forward() makes.

A value that carries a gradient turned into a Python number or a numpy array (``float()``, ``.item()``,
``.tolist()``, ``.numpy()``: always of a detached tensor, whatever ``values`` keeps) is a constant to torch
autograd; an exporter may keep its computation in the ONNX graph (the dynamo exporter does) and differentiate
through it. ``Cuts.numbers`` names those calls and ``upstream`` says what lies upstream of them; ``perturb``
nudges the numbers, so that a second forward says whether forward() computes on with them at all.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from onnxprobe.torch.load import require_torch


@dataclass
class Cuts:
    detached: set[str] = field(default_factory=set)  # parameters .detach() was called on (or a view of one)
    no_grad: set[str] = field(default_factory=set)  # parameters read with gradient off
    inference: set[str] = field(default_factory=set)  # parameters read in torch.inference_mode()
    data: set[str] = field(default_factory=set)  # parameters read through .data (a cut no second pass undoes)
    writes: set[str] = field(default_factory=set)  # module state (parameters, buffers) written in place with gradient off
    before: dict[str, tuple] = field(default_factory=dict)  # what was written: name -> (the tensor, its value before)
    cut: bool = False  # a value that carries a gradient was computed on with gradient off: its path stops there
    values: bool = False  # .detach() of a value that carries a gradient, not a parameter (an input, a layer's output)
    numbers: set[str] = field(default_factory=set)  # calls that turned a value carrying a gradient into numbers
    nodes: set = field(default_factory=set)  # the autograd nodes upstream of those values
    leaves: dict[int, object] = field(default_factory=dict)  # the leaf tensors upstream of them, by id
    # embedding weights whose backward-only options (padding_idx read, scale_grad_by_freq) were dropped -> what
    embedding: dict[str, str] = field(default_factory=dict)


def upstream(cuts: Cuts, t) -> bool:
    """Whether ``t`` (a parameter, an input, a layer's output) lies upstream of a value turned into numbers."""
    return id(t) in cuts.leaves if t.grad_fn is None else t.grad_fn in cuts.nodes


def _reach(t, cuts: Cuts) -> None:
    if t.grad_fn is None:
        cuts.leaves[id(t)] = t
    stack = [t.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in cuts.nodes:
            continue
        cuts.nodes.add(node)
        var = getattr(node, "variable", None)  # AccumulateGrad: a leaf
        if var is not None:
            cuts.leaves[id(var)] = var
        stack.extend(n for n, _ in node.next_functions)


def _nudged(value):
    """Numbers a little off ``value`` (a float, a complex, a list of them, a numpy array)."""
    if isinstance(value, float):
        return value + (abs(value) + 1.0) * 2.0 ** -8
    if isinstance(value, complex):
        return complex(_nudged(value.real), value.imag)
    if isinstance(value, list):
        return [_nudged(v) for v in value]
    if isinstance(value, np.ndarray) and value.dtype.kind in "fc":
        return value + (np.abs(value) + 1) * value.real.dtype.type(2.0 ** -8)
    return value


def _tensors(value, torch) -> list:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v, torch)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v, torch)]
    return []


def _name(names: dict[int, str], t) -> str | None:
    """The name of ``t`` in ``names`` (id -> name), or of the tensor it is a view of."""
    base = t._base
    return names.get(id(t)) or (names.get(id(base)) if base is not None else None)


def _written(func, args, kwargs, state: dict[int, str], torch) -> set[str]:
    """The module state that a call writes in place (``p.add_(1)``, ``p += 1``, ``p[0] = 3``, ``out=p``)."""
    name = getattr(func, "__name__", "")
    targets = []
    if args and ((name.endswith("_") and not name.startswith("_")) or name == "__setitem__"):
        targets.append(args[0])
    targets += _tensors(kwargs.get("out"), torch)
    return {n for t in targets if isinstance(t, torch.Tensor) and (n := _name(state, t))}


_EMBEDDING = ("input", "weight", "padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "sparse")


def _plain_embedding(args: tuple, kwargs: dict, owner: dict[int, str], cuts: Cuts, torch) -> tuple[tuple, dict]:
    """``F.embedding``'s arguments without the options that change its backward alone: ``padding_idx`` (the
    padding row gets no gradient), ``scale_grad_by_freq`` and ``sparse`` (a sparse gradient, of the same values,
    that numpy cannot take); the forward, a lookup, is the same. An ONNX Gather
    says neither, so torch's gradient is taken as the ONNX graph computes it. Where they would have changed a
    parameter's gradient (the padding index is read; the option is on), ``cuts.embedding`` says so."""
    given = dict(zip(_EMBEDDING, args), **kwargs)
    ids, weight, pad = given.get("input"), given.get("weight"), given.get("padding_idx")
    if not isinstance(weight, torch.Tensor) or not isinstance(ids, torch.Tensor) or (
            pad is None and not given.get("scale_grad_by_freq") and not given.get("sparse")):
        return args, kwargs
    name = _name(owner, weight)
    if name is not None and weight.requires_grad and torch.is_grad_enabled():
        if pad is not None and bool((ids == (pad if pad >= 0 else weight.shape[0] + pad)).any()):
            cuts.embedding[name] = f"padding_idx={pad}"
        if given.get("scale_grad_by_freq"):
            cuts.embedding[name] = "scale_grad_by_freq=True"
    given.update(padding_idx=None, scale_grad_by_freq=False, sparse=False)  # sparse: the same values, dense (numpy)
    return (), given


@contextmanager
def watch(owner: dict[int, str], state: dict[int, str], cuts: Cuts, through: set[str] = frozenset(),
          grad_on: bool = False, values: bool = False, perturb: bool = False):
    """``owner``: id of a parameter -> its name; ``state``: the same for parameters and buffers."""
    torch = require_torch()
    from torch.overrides import TorchFunctionMode

    set_grad, detach = torch._C._set_grad_enabled, torch.Tensor.detach
    data_get = torch.Tensor.data.__get__  # (a method-wrapper, made anew at each access: compared with ==)

    class Watch(TorchFunctionMode):
        off = False  # grad_on: forward() asked for gradient off (it stays on)

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is set_grad and grad_on:
                self.off = not bool(args[0] if args else kwargs.get("mode", True))
                return None
            if func is embedding:
                args, kwargs = _plain_embedding(args, kwargs, owner, cuts, torch)
            first = args[0] if args and isinstance(args[0], torch.Tensor) else None
            if func in numbers and first is not None and first.requires_grad and (first.is_floating_point() or first.is_complex()):
                cuts.numbers.add(numbers[func])
                _reach(first, cuts)
                out = func(first.detach(), *args[1:], **kwargs)  # .numpy() of a tensor with gradient would raise
                return _nudged(out) if perturb else out
            if first is not None and func == data_get and (name := _name(owner, first)) is not None:
                cuts.data.add(name)
            if func is detach and first is not None:
                name = _name(owner, first)
                if name is not None:
                    cuts.detached.add(name)
                    if name in through:
                        return first.view_as(first)
                elif first.requires_grad:
                    cuts.values = True
                    if values:
                        return first.view_as(first)
            inference = torch.is_inference_mode_enabled()
            off = (self.off if grad_on else not torch.is_grad_enabled()) or inference
            tensors = _tensors(args, torch) + _tensors(kwargs, torch) if off else []
            if not tensors:
                return func(*args, **kwargs)
            written = _written(func, args, kwargs, state, torch)
            cuts.writes |= written
            for t in _tensors([args[0] if args else None, kwargs.get("out")], torch) if written and not grad_on else ():
                whole = t if id(t) in state else t._base
                if whole is not None and id(whole) in state and state[id(whole)] not in cuts.before:
                    cuts.before[state[id(whole)]] = (whole, whole.detach().clone())
            if written and grad_on:
                with torch.no_grad():
                    return func(*args, **kwargs)
            read = {n for t in tensors if (n := _name(owner, t))}
            if inference:
                cuts.inference |= read
            carried = any(t.requires_grad for t in tensors)
            out = func(*args, **kwargs)
            if not grad_on:
                cuts.no_grad |= read - written
                cuts.cut = cuts.cut or (carried and any(t.is_floating_point() or t.is_complex() for t in _tensors(out, torch)))
            return out

    embedding = torch.nn.functional.embedding
    numbers = {torch.Tensor.item: ".item()", torch.Tensor.__float__: "float()", torch.Tensor.__complex__: "complex()",
               torch.Tensor.tolist: ".tolist()", torch.Tensor.numpy: ".numpy()", torch.Tensor.__array__: "numpy.asarray()"}
    modes = torch.autograd.grad_mode.inference_mode
    enter, leave = modes.__enter__, modes.__exit__
    if grad_on:  # torch.inference_mode() as torch.no_grad(): gradient off, which Watch keeps on
        def _enter(self):
            self.prev = torch.is_grad_enabled()
            if self.mode:
                torch._C._set_grad_enabled(False)

        def _exit(self, *exc):
            if self.mode:
                torch._C._set_grad_enabled(self.prev)

        modes.__enter__, modes.__exit__ = _enter, _exit
    try:
        with Watch():
            yield
    finally:
        modes.__enter__, modes.__exit__ = enter, leave
