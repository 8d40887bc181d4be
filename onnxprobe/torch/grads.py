"""PyTorch autograd as the reference for gradients: the module runs in eval mode (as it was exported) on
the ONNX model's inputs, gets the same loss as ``autodiff.loss`` builds in ONNX, and one backward pass
gives the gradients of its parameters, of its float inputs and of the outputs of the modules asked for.

Probe names: ``param:NAME`` (a parameter, under any of its names when tied), ``input:K`` (the K-th
input), ``module:PATH`` (the first tensor a module returns, at its first call; ``module:PATH@1,0,2``
permuted as ``torch.runner`` probes are). A module output that a
later op modifies in place (``ReLU(inplace=True)``) is cloned by the hook so that its own gradient is
kept, not that of what overwrote it.
"""

from __future__ import annotations

import re
from contextlib import contextmanager

import numpy as np

from onnxprobe.compare.sides import GRADIENT_STOPPED
from onnxprobe.errors import ExecutionError, UsageError, first_line
from onnxprobe.match.engine import Matching, Unmatched
from onnxprobe.runtime.runners.base import Runner
from onnxprobe.runtime.userfunc import user_code
from onnxprobe.torch.load import eval_mode, require_torch
from onnxprobe.torch.runner import from_numpy, parse_probe, permuted, tensors_of, to_numpy

PARAM, INPUT, MODULE = "param:", "input:", "module:"
MERGED, TRANSPOSED, RESHAPED = "|", "^T", "@"


def param_probe(params: list[str], transposed: bool = False, shape: tuple[int, ...] | None = None) -> str:
    return PARAM + MERGED.join(params) + (TRANSPOSED if transposed else "") + (
        RESHAPED + "x".join(map(str, shape)) if shape is not None else "")


def read_param_probe(probe: str) -> tuple[list[str], bool, tuple[int, ...] | None]:
    """The inverse of ``param_probe``: (parameters, transposed, shape). The shape is what follows the last
    '@' when that is one (a parameter's name may hold an '@' itself)."""
    body, sep, dims = probe[len(PARAM):].rpartition(RESHAPED)
    if not sep or not re.fullmatch(r"\d+(x\d+)*", dims):
        body, dims = probe[len(PARAM):], ""
    body, transposed = (body[:-len(TRANSPOSED)], True) if body.endswith(TRANSPOSED) else (body, False)
    return body.split(MERGED), transposed, tuple(int(d) for d in dims.split("x")) if dims else None


def torch_loss(y, kind: str, extra: np.ndarray | None, class_axis: int | None, probabilities: bool = False):
    """The loss of ``autodiff.loss`` in torch, term for term (``probabilities``: cross-entropy of an output
    that is a Softmax's, -log p clamped at the smallest normal number)."""
    torch = require_torch()
    if kind == "sum":
        return y.sum()
    if kind == "mean":
        return y.mean()
    e = torch.from_numpy(np.ascontiguousarray(extra))
    if kind == "mse":
        return ((y - e) ** 2).mean()
    if kind == "output-grad":
        return (y * e).sum()
    if kind == "cross-entropy":
        axis = class_axis if class_axis is not None else 1
        r = y.ndim
        axis = axis + r if axis < 0 else axis
        yt = y.movedim(axis, -1)
        lsm = torch.log(yt.clamp_min(torch.finfo(yt.dtype).tiny)) if probabilities else torch.log_softmax(yt, dim=-1)
        if e.dtype.is_floating_point:
            target = e.movedim(axis, -1)
        else:
            target = torch.nn.functional.one_hot(e.long(), lsm.shape[-1]).to(lsm.dtype)
        return -(target * lsm).sum(-1).mean()
    raise UsageError(f"--loss {kind!r}: no torch counterpart")


class TorchGradRunner(Runner):
    kind = "torch"

    def __init__(self, module, input_names: list[str], output_index: int, loss: str, extra: np.ndarray | None,
                 class_axis: int | None, modules: set[str], label: str = "torch", template: list | None = None,
                 probabilities: bool = False):
        super().__init__(None, None, label)
        self.module = module
        self.template = template  # the example arguments, None in the tensors' places (as TorchRunner's)
        self.input_names = list(input_names)
        self.output_index = output_index
        self.loss, self.extra, self.class_axis, self.probabilities = loss, extra, class_axis, probabilities
        self.modules = set(modules)
        self.loss_value: float | None = None
        self.no_grad: set[str] = set()  # parameters autograd left without a gradient (read detached), by every name
        self._last: tuple[int, dict] | None = None

    def describe(self) -> str:
        return f"{self.label} (PyTorch {type(self.module).__name__} autograd, eval mode)"

    def values(self, names: list[str], feeds: dict[str, np.ndarray], *, keep_on_device: bool = False) -> dict:
        """Also ``param:A|B`` (the sum of the gradients of parameters merged into one initializer) and a
        ``^T`` suffix (the gradient transposed, for a weight stored transposed) and an ``@4x1x1`` one (reshaped
        to the initializer's shape: a parameter stored with unit axes added)."""
        if self._last is None or self._last[0] != id(feeds):
            self._last = (id(feeds), self.backward(feeds))
        got = self._last[1]
        out = {}
        for n in names:
            if n in got:
                out[n] = got[n]
            elif n.startswith(MODULE):
                path, perm = parse_probe(n[len(MODULE):])
                if MODULE + path in got:
                    out[n] = permuted(got[MODULE + path], perm)
            elif n.startswith(PARAM):
                params, transposed, shape = read_param_probe(n)
                parts = [got.get(PARAM + p) for p in params]
                if parts and all(x is not None for x in parts):
                    total = np.sum(np.stack(parts), axis=0) if len(parts) > 1 else parts[0]
                    total = total.T.copy() if transposed else total
                    out[n] = total.reshape(shape) if shape is not None else total
        return out

    def backward(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        torch = require_torch()
        args = []
        for n in self.input_names:
            if n not in feeds:
                raise UsageError(f"--vs-torch: no value for input {n!r}")
            t = from_numpy(feeds[n])
            if t.dtype.is_floating_point:
                t.requires_grad_(True)
            args.append(t)
        call = args
        if self.template is not None and sum(x is None for x in self.template) == len(args):
            it = iter(args)
            call = [next(it) if x is None else x for x in self.template]
        paths = {m: p for p, m in self.module.named_modules() if p in self.modules}
        kept: dict[str, object] = {}

        def post(mod, _args, out):
            path = paths.get(mod)
            if path is None or path in kept:
                return None
            if isinstance(out, torch.Tensor) and out.requires_grad:
                out.retain_grad()
                kept[path] = out
                return out.clone()  # what runs next may modify it in place; this tensor keeps its gradient
            ts = [t for t in tensors_of(out) if t.requires_grad]
            if ts:
                ts[0].retain_grad()
                kept[path] = ts[0]
            return None

        params = list(self.module.named_parameters(remove_duplicate=False))
        flags = {id(p): p.requires_grad for _, p in params}
        grads = {id(p): p.grad for _, p in params}  # the user's accumulated gradients, given back after
        hooks = [m.register_forward_hook(post) for m in paths]
        try:
            for _, p in params:
                p.requires_grad_(True)
                p.grad = None
            owner = {id(p): name for name, p in reversed(params)}  # a tied tensor: its first name
            detached: set[str] = set()
            with _detaches(owner, detached):
                loss = self._loss(call)
                loss.backward()
            got: dict[str, np.ndarray] = {}
            self.no_grad = {name for name, p in params if p.grad is None}
            for name, p in params:  # tied parameters: the same gradient under each name
                got[PARAM + name] = to_numpy(p.grad) if p.grad is not None else np.zeros(tuple(p.shape), to_numpy(p).dtype)
            both = detached - self.no_grad  # read detached and not: torch's gradient is of the undetached reads only
            if both:
                got.update(self._through_detaches(params, call, owner, both))
        except UsageError:
            raise
        except Exception as e:  # noqa: BLE001 - the user's forward may raise anything
            raise ExecutionError(f"the torch module's forward or backward raised {type(e).__name__}: "
                                 f"{first_line(e)[:300]}") from None
        finally:
            for h in hooks:
                h.remove()
            for _, p in params:  # the module as it was, whatever its forward raised
                p.grad = grads[id(p)]
                p.requires_grad_(flags[id(p)])
        self.loss_value = float(loss.detach())
        for k, t in enumerate(args):
            if t.grad is not None:
                got[f"{INPUT}{k}"] = to_numpy(t.grad)
        for path, t in kept.items():
            if t.grad is not None:
                got[MODULE + path] = to_numpy(t.grad)
        return got

    def _loss(self, call: list):
        torch = require_torch()
        with eval_mode(self.module), torch.enable_grad(), user_code():
            out = tensors_of(self.module(*call))
            if self.output_index >= len(out):
                raise UsageError(f"--vs-torch: the module returns {len(out)} tensor(s); the loss is of output "
                                 f"{self.output_index}")
            return torch_loss(out[self.output_index], self.loss, self.extra, self.class_axis, self.probabilities)

    def _through_detaches(self, params: list, call: list, owner: dict[int, str], both: set[str]) -> dict[str, np.ndarray]:
        """The gradients of parameters forward() reads both detached and not, through every read: the ONNX
        graph has no stop-gradient, so the gradient of the initializer that holds such a parameter is the
        sum over all its readers, the detached ones too, and torch's own gradient (of the undetached reads
        only) is another function of the data (it failed the export of a correct model). A second backward
        pass, with those ``.detach()`` calls kept in the graph, gives the gradient the ONNX graph computes;
        the other gradients stay the first pass's (the loss is the same; the extra paths reach only these
        parameters)."""
        torch = require_torch()
        for _, p in params:
            p.grad = None
        plain = [t.detach() if isinstance(t, torch.Tensor) else t for t in call]  # the inputs keep their gradients
        with _detaches(owner, set(), through=both):
            self._loss(plain).backward()
        names = sorted(both)
        self.note(f"torch: forward() reads {', '.join(names[:3])}{' …' if len(names) > 3 else ''} both detached "
                  "(.detach()) and not; the ONNX graph has no stop-gradient, so torch's gradient of it is taken through "
                  "every read, the detached ones included, as the ONNX graph computes it")
        tied = {id(p) for n, p in params if n in both}
        return {PARAM + n: to_numpy(p.grad) for n, p in params if id(p) in tied and p.grad is not None}


@contextmanager
def _detaches(owner: dict[int, str], seen: set[str], through: set[str] = frozenset()):
    """``torch.Tensor.detach`` watched while forward() runs: the parameters it is called on (or on a view
    of one, ``w[:, :3].detach()``) are added to ``seen``; those in ``through`` stay in the graph (a view
    instead of a detached copy: the same values)."""
    torch = require_torch()
    real = torch.Tensor.detach

    def detach(self, *args, **kwargs):
        base = getattr(self, "_base", None)
        name = owner.get(id(self)) or (owner.get(id(base)) if base is not None else None)
        if name is not None:
            seen.add(name)
            if name in through:
                return self.view_as(self)
        return real(self, *args, **kwargs)

    torch.Tensor.detach = detach
    try:
        yield
    finally:
        torch.Tensor.detach = real



def without_torch_gradient(matching: Matching, runner: TorchGradRunner, feeds: dict[str, np.ndarray],
                           branch: dict[str, str] | None = None) -> None:
    """Runs torch's backward pass (once: the runner keeps it for these feeds) and leaves unpaired the weight
    gradients of parameters autograd gives none, though A's loss reads them: forward() reads them detached
    (``.detach()``, ``torch.no_grad()``), which an ONNX graph cannot say, so A's gradient is no export error.
    They were compared with zeros (cause gradient-stopped, as an op without a gradient rule on A's side).
    Not those of a module that did not run because the export traced another branch (``branch``: module ->
    why): torch's loss then does not depend on them, their zeros are its gradient, and the verdict fails."""
    runner.values([], feeds)
    for pair in list(matching.pairs):
        if pair.b.probe.startswith(PARAM):
            dead = [p for p in read_param_probe(pair.b.probe)[0] if p in runner.no_grad
                    and not any(p.startswith(m + ".") for m in branch or {})]
            if dead:
                matching.pairs.remove(pair)
                matching.unmatched_a.append(Unmatched(pair.a, (
                    f"torch autograd gives {', '.join(dead)} no gradient: forward() reads it detached (.detach(), "
                    "torch.no_grad()), which the ONNX graph does not say; not compared"), GRADIENT_STOPPED))
