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
import numpy as np

from onnxprobe.compare.sides import GRADIENT_STOPPED
from onnxprobe.errors import ExecutionError, UsageError, first_line, setting_error
from onnxprobe.match.engine import Matching, Unmatched
from onnxprobe.runtime.runners.base import Runner
from onnxprobe.runtime.userfunc import user_code
from onnxprobe.text import some
from onnxprobe.torch.cuts import Cuts, upstream, watch
from onnxprobe.torch.load import VS_TORCH, FirstState, eval_mode, require_torch
from onnxprobe.torch.runner import from_numpy, parse_probe, permuted, tensors_of, to_numpy

# why torch gives a gradient the ONNX graph computes otherwise, in a few words (``Unmatched.kind``)
DETACHED = "torch autograd gives it no gradient: forward() reads it detached (.detach(), .data, torch.no_grad())"
NUMBER = "upstream of a Python number (or numpy array) forward() takes from a differentiable value"

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
    raise setting_error(UsageError, ("loss", "--loss"), f"{kind!r}: no torch counterpart")


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
        self.no_grad: set[str] = set()  # parameters read detached that autograd left without a gradient, by every name
        self.not_compared: dict[str, str] = {}  # parameters whose torch gradient is not the ONNX graph's function -> why
        self.not_compared_values: dict[str, str] = {}  # the same for inputs and layers' outputs: probe -> why
        self._last: tuple[int, dict] | None = None
        self.state = FirstState(module)  # every pass from the state the module was handed over in

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
        params = list(self.module.named_parameters(remove_duplicate=False))
        flags = {id(p): p.requires_grad for _, p in params}
        grads = {id(p): p.grad for _, p in params}  # the user's accumulated gradients, given back after
        owner = {id(p): name for name, p in reversed(params)}  # a tied tensor: its first name
        state = {**{id(b): n for n, b in reversed(list(self.module.named_buffers(remove_duplicate=False)))}, **owner}
        self.not_compared, self.not_compared_values, self._numbers = {}, {}, []
        try:
            for _, p in params:
                p.requires_grad_(True)
                p.grad = None
            cuts = Cuts()
            self.state.put_back(self.note)
            with watch(owner, state, cuts):
                got, loss = self._pass(feeds, params)
            # no gradient, and read cut: a parameter forward() does not read, or whose reads the loss does not
            # depend on (BERT's pooler under a loss of last_hidden_state), has none either: 0, its true gradient
            # (it was said to be 'read detached' and the weight holding it with others went uncompared)
            cut = cuts.detached | cuts.no_grad | cuts.inference | cuts.data
            self.no_grad = {name for name, p in params if p.grad is None and owner[id(p)] in cut}
            numbers = self._upstream_of_numbers(feeds, params, owner, state, cuts, cuts)
            if cuts.detached - self.no_grad or cuts.cut or cuts.values:
                got.update(self._through_cuts(feeds, params, owner, state, cuts, numbers))
            self._not_compared(numbers)
            if cuts.embedding:
                said = ", ".join(f"{n} ({how})" for n, how in sorted(cuts.embedding.items()))
                self.note(f"torch: an embedding's options change its backward alone ({said}: torch gives the padding "
                          "row no gradient, or scales rows by their count); the ONNX graph's Gather does not, so torch's "
                          "gradient is taken without them, as the ONNX graph computes it")
        except UsageError:
            raise
        except Exception as e:  # noqa: BLE001 - the user's forward may raise anything
            raise ExecutionError(f"the torch module's forward or backward raised {type(e).__name__}: "
                                 f"{first_line(e)[:300]}") from None
        finally:
            self.state.put_back(self.note)
            for _, p in params:  # the module as it was, whatever its forward raised
                p.grad = grads[id(p)]
                p.requires_grad_(flags[id(p)])
        self.loss_value = float(loss.detach())
        return got

    def _pass(self, feeds: dict[str, np.ndarray], params: list, backward: bool = True) -> tuple[dict[str, np.ndarray], object]:
        """One forward and backward pass: the gradients of the parameters (tied ones under each name), of the
        float inputs and of the outputs of the modules asked for; and the loss. ``self._probes``: those
        tensors by probe; ``self._output``: the output the loss is of (all a forward pass gives)."""
        torch = require_torch()
        args = []
        for n in self.input_names:
            if n not in feeds:
                raise setting_error(UsageError, VS_TORCH, f": no value for input {n!r}")
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

        for _, p in params:
            p.grad = None
        hooks = [m.register_forward_hook(post) for m in paths]
        try:
            loss = self._loss(call)
            self._probes = {**{PARAM + n: p for n, p in params}, **{f"{INPUT}{k}": t for k, t in enumerate(args)},
                            **{MODULE + path: t for path, t in kept.items()}}
            if not backward:
                return {}, loss
            loss.backward()
        finally:
            for h in hooks:
                h.remove()
        got: dict[str, np.ndarray] = {}
        with torch._C.DisableTorchFunction():  # onnxprobe's own .detach() calls: not forward()'s (cuts.watch)
            for name, p in params:  # tied parameters: the same gradient under each name
                got[PARAM + name] = to_numpy(p.grad) if p.grad is not None else np.zeros(tuple(p.shape), to_numpy(p).dtype)
            for k, t in enumerate(args):
                if t.grad is not None:
                    got[f"{INPUT}{k}"] = to_numpy(t.grad)
            for path, t in kept.items():
                if t.grad is not None:
                    got[MODULE + path] = to_numpy(t.grad)
        return got, loss

    def _loss(self, call: list):
        torch = require_torch()
        with eval_mode(self.module), torch.enable_grad(), user_code():
            out = tensors_of(self.module(*call))
            if self.output_index >= len(out):
                raise setting_error(UsageError, VS_TORCH, f": the module returns {len(out)} tensor(s); the loss is of "
                                    f"output {self.output_index}")
            with torch._C.DisableTorchFunction():  # unseen by cuts.watch
                self._output = out[self.output_index].detach().clone()
            return torch_loss(out[self.output_index], self.loss, self.extra, self.class_axis, self.probabilities)

    def _through_cuts(self, feeds: dict[str, np.ndarray], params: list, owner: dict[int, str], state: dict[int, str],
                      cuts: Cuts, numbers: set[str]) -> dict[str, np.ndarray]:
        """torch's gradients through every read, as the ONNX graph (no stop-gradient) computes them, where
        forward() cuts a gradient's path: a parameter read both detached (``.detach()``) and not, or a value that
        carries a gradient computed on with gradient off (``torch.no_grad()``, ``torch.set_grad_enabled(False)``:
        a parameter read there and elsewhere, an input, a layer's output). torch's own gradient is then of the
        uncut reads only, another function of the data (it failed the export of a correct model at -12.8 dB). A
        second pass with those cuts undone (``cuts.watch``) gives them all; what forward() wrote in place into
        the module's state with gradient off is put back first (the pass writes it again). Parameters read in
        ``torch.inference_mode()`` and with gradient, whose inference-mode reads no pass differentiates, are not
        compared (``not_compared``); nor, where the second pass raises, those it was for. ``.detach()`` of a
        value that is not a parameter (an input, a layer's output) is kept in the graph too: a parameter with a
        gradient only through such cuts gets it (one read only detached or with gradient off still has none).
        What lies upstream of numbers that pass computes is added to ``numbers``."""
        both = cuts.detached - self.no_grad
        mixed = sorted((both | cuts.no_grad) - self.no_grad)
        torch = require_torch()
        with torch.no_grad():
            for t, value in cuts.before.values():
                t.copy_(value)
        again, how = Cuts(), {"through": both, "grad_on": cuts.cut, "values": cuts.values}
        try:
            self.state.put_back(self.note)
            with watch(owner, state, again, **how):
                got, _ = self._pass(feeds, params)
            direct = cuts.detached | cuts.no_grad | cuts.inference | cuts.data  # read cut, not only through a cut value
            self.no_grad = {name for name, p in params if owner[id(p)] in direct and (p.grad is None or name in self.no_grad)}
            numbers |= self._upstream_of_numbers(feeds, params, owner, state, cuts, again, **how)
        except UsageError:
            raise
        except Exception as e:  # noqa: BLE001 - the user's forward may raise anything
            why = (f"forward() reads it with gradient off (torch.no_grad(), .detach()) and on, and torch's pass with "
                   f"gradient left on there raised {type(e).__name__}: {first_line(e)[:120]}; not compared")
            self.not_compared.update({n: why for n in mixed if n not in self.not_compared})
            self.note("torch: forward() cuts gradient paths (torch.no_grad(), .detach()) that the ONNX graph does not; "
                      f"a pass through them raised {type(e).__name__}, so torch's gradients upstream of those cuts "
                      "(inputs, layers) may be of another function than the ONNX graph's")
            return {}
        for n in sorted(again.inference - self.no_grad):  # inference mode entered otherwise (torch._C._InferenceMode)
            self.not_compared[n] = ("forward() reads it both in inference mode and with gradient: torch's gradient leaves "
                                    "out the inference-mode reads, which the ONNX graph (no stop-gradient) includes, and "
                                    "torch's pass through them stayed in inference mode; not compared")
        names = some(mixed, form=str)
        if both:
            self.note(f"torch: forward() reads {some(sorted(both), form=str)} both detached "
                      "(.detach()) and not; the ONNX graph has no stop-gradient, so torch's gradient of it is taken through "
                      "every read, the detached ones included, as the ONNX graph computes it")
        if cuts.values:
            self.note("torch: forward() detaches values that carry a gradient (.detach() of an input or a layer's output); "
                      "the ONNX graph has no stop-gradient, so torch's gradients are taken through those .detach() calls, "
                      "as the ONNX graph computes them")
        if cuts.cut:
            self.note("torch: forward() computes with gradient off (torch.no_grad(), torch.inference_mode()...) on "
                      f"values that carry one{f' (it reads {names} there and elsewhere)' if names else ''}; the ONNX graph "
                      "has no stop-gradient, so torch's gradients are taken with gradient left on there, as the ONNX graph "
                      "computes them")
        return {k: v for k, v in got.items() if not (k.startswith(PARAM) and k[len(PARAM):] in self.no_grad)}

    def _upstream_of_numbers(self, feeds: dict[str, np.ndarray], params: list, owner: dict[int, str],
                             state: dict[int, str], first: Cuts, cuts: Cuts, **how) -> set[str]:
        """The probes upstream of what the pass that filled ``cuts`` (run with ``how``) turned into Python
        numbers or numpy arrays, if forward() computes on with them: a forward pass with those numbers nudged
        gives another output. ``first``: the first pass's cuts, whose writes into the module's state are put back."""
        if not cuts.numbers:
            return set()
        torch = require_torch()
        reached = {n for n, t in self._probes.items() if upstream(cuts, t)}
        plain = self._output
        try:
            self.state.put_back(self.note)
            with watch(owner, state, Cuts(), perturb=True, **how):
                self._pass(feeds, params, backward=False)
            used = plain.shape != self._output.shape or not torch.equal(plain, self._output)
        except UsageError:
            raise
        except Exception:  # noqa: BLE001 - the user's forward may raise anything: nudged numbers may be used
            used = True
        finally:
            with torch.no_grad():
                for t, value in first.before.values():
                    t.copy_(value)
        if used:
            self._numbers = sorted(set(self._numbers) | cuts.numbers)
        return reached if used else set()

    def _not_compared(self, numbers: set[str]) -> None:
        """What lies upstream of numbers forward() computes on (``_upstream_of_numbers``) is not compared."""
        if not numbers:
            return
        why = (f"forward() turns a value computed from it into a Python number or a numpy array "
               f"({', '.join(self._numbers)}) and computes on with it: a constant to torch autograd, while the ONNX "
               "graph may keep its computation (the dynamo exporter does) and differentiate through it; not compared")
        for probe in sorted(numbers):
            if probe.startswith(PARAM):
                self.not_compared.setdefault(probe[len(PARAM):], why)
            else:
                self.not_compared_values.setdefault(probe, why)
        names = sorted(f"input[{p[len(INPUT):]}]" if p.startswith(INPUT) else p.split(":", 1)[1] for p in numbers)
        self.note(f"torch: forward() turns values that carry a gradient into Python numbers or numpy arrays "
                  f"({', '.join(self._numbers)}); torch's gradients upstream of them ({some(names, form=str)}"
                  ") are not compared")


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
                    ".data, torch.no_grad()), which the ONNX graph does not say; not compared"), GRADIENT_STOPPED, DETACHED))
                continue
            odd = [p for p in read_param_probe(pair.b.probe)[0] if p in runner.not_compared]
            if odd:  # torch's gradient is another function of the data than the ONNX graph's (torch.cuts)
                matching.pairs.remove(pair)
                matching.unmatched_a.append(Unmatched(pair.a, f"torch's gradient of {odd[0]}: {runner.not_compared[odd[0]]}",
                                                      GRADIENT_STOPPED, NUMBER))
        elif pair.b.probe.startswith((INPUT, MODULE)):  # upstream of numbers forward() computes on
            probe = MODULE + parse_probe(pair.b.probe[len(MODULE):])[0] if pair.b.probe.startswith(MODULE) else pair.b.probe
            if probe in runner.not_compared_values:
                matching.pairs.remove(pair)
                matching.unmatched_a.append(Unmatched(pair.a, f"torch's gradient of {pair.b.name}: "
                                                      f"{runner.not_compared_values[probe]}", GRADIENT_STOPPED, NUMBER))


def say_frozen(matching: Matching, module) -> list[str]:
    """The parameters of ``module`` with ``requires_grad=False`` (frozen: Whisper's sinusoidal positions) whose
    gradient is compared, sorted; each such pair's reason says so. The ONNX graph has no such flag: its backward
    graph differentiates every weight, and ``TorchGradRunner.backward`` sets the flag for its pass, so both sides
    give the gradient autograd computes for a trainable parameter; a training loop would not update it."""
    frozen = {n for n, p in module.named_parameters(remove_duplicate=False) if not p.requires_grad}
    said: set[str] = set()
    for pair in matching.pairs if frozen else ():
        if pair.b.probe.startswith(PARAM):
            mine = [p for p in read_param_probe(pair.b.probe)[0] if p in frozen]
            if mine:
                said.update(mine)
                pair.reason += (f" ({', '.join(mine)} frozen in torch, requires_grad=False: compared with the gradient "
                                "autograd gives it with the flag set, which the ONNX graph's backward computes too)")
    return sorted(said)
