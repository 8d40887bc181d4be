"""PyTorch as a runner: the module runs on the ONNX model's inputs (in the ONNX input order, as positional
arguments) and forward hooks keep the outputs of the modules asked for. One forward pass answers every
request made with the same feeds; only the requested modules' outputs are kept (the diff asks chunk by
chunk within its memory budget).

Probe names: ``output:K`` is the K-th tensor of what the module returns (tuples, lists, dicts and
``ModelOutput``s flattened in order); any other name is a module path, whose first returned tensor (an
LSTM's output sequence, an attention's output) is its value, at its first call. ``PATH@1,0,2`` is that
value with its axes permuted (an ONNX tensor that holds it in another layout).

``replay`` runs the module again with the outputs of the given modules replaced by the ONNX model's
values (teacher forcing): each module then computes from what the ONNX model fed it, and the difference
of its own output is the error it introduces.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np

from onnxprobe.errors import ExecutionError, UsageError, first_line, setting_error
from onnxprobe.runtime.runners.base import Runner
from onnxprobe.runtime.userfunc import user_code
from onnxprobe.torch.load import VS_TORCH, FirstState, eval_mode, require_torch

OUTPUT = "output:"
PERM = "@"


def parse_probe(name: str) -> tuple[str, tuple[int, ...] | None]:
    """(module path, axis permutation or None) of a probe name."""
    path, sep, perm = name.rpartition(PERM)
    if not sep or not perm or not all(p.isdigit() for p in perm.split(",")):
        return name, None
    return path, tuple(int(p) for p in perm.split(","))


def permuted(value: np.ndarray, perm: tuple[int, ...] | None) -> np.ndarray:
    return value if perm is None else np.ascontiguousarray(value.transpose(perm))


def unpermuted(value: np.ndarray, perm: tuple[int, ...] | None) -> np.ndarray:
    return value if perm is None else np.ascontiguousarray(value.transpose(np.argsort(perm)))


def tensors_of(value) -> list:
    """The tensors of a module's return value, flattened in order."""
    torch = require_torch()
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in tensors_of(v)]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in tensors_of(v)]
    if hasattr(value, "to_tuple"):
        return tensors_of(value.to_tuple())
    return []


def to_numpy(t) -> np.ndarray:
    """A torch tensor as numpy; bfloat16, which numpy lacks, as ml_dtypes' bfloat16 (onnx's own mapping;
    widening to float32 and back is exact)."""
    t = t.detach().cpu()
    if str(t.dtype) == "torch.bfloat16":
        import ml_dtypes

        return t.float().numpy().astype(ml_dtypes.bfloat16)
    return t.numpy().copy()


def from_numpy(a: np.ndarray):
    """A torch tensor of its own (a copy: an in-place op in the module must not write into the feeds);
    ml_dtypes' bfloat16 through float32 (exact)."""
    torch = require_torch()
    a = np.asarray(a)
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(a.astype(np.float32))).to(torch.bfloat16)
    return torch.from_numpy(np.array(a, copy=True, order="C"))


@dataclass
class Forward:
    """What one forward pass saw: the outputs, the kept module values, and for every module its calls and
    the shape of its first output, in the order the calls began."""

    outputs: list[np.ndarray]
    values: dict[str, np.ndarray] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    # modules that return several tensors of their first one's shape: which ONNX tensor is which cannot be told
    # (a (p, q) pair of 3x4s compared p with ONNX's q): path -> how many
    ambiguous: dict[str, int] = field(default_factory=dict)
    # module path -> the module whose output (the very tensor, at its first call) is its first argument: which
    # layer a BatchNorm normalizes, whatever ran in between (conv1, conv2, bn(conv1's output))
    fed_by: dict[str, str] = field(default_factory=dict)


class TorchRunner(Runner):
    kind = "torch"

    def __init__(self, module, input_names: list[str], label: str = "torch", template: list | None = None):
        super().__init__(None, None, label)
        self.module = module
        self.input_names = list(input_names)
        self.template = template  # the example arguments, None in the tensors' places (api.torch._prepare)
        self.paths = {m: p for p, m in module.named_modules()}
        self._last: tuple[int, Forward] | None = None
        self.state = FirstState(module)  # every pass from the state the module was handed over in

    def describe(self) -> str:
        return f"{self.label} (PyTorch {type(self.module).__name__}, eval mode)"

    def args(self, feeds: dict[str, np.ndarray]) -> list:
        missing = [n for n in self.input_names if n not in feeds]
        if missing:
            raise setting_error(UsageError, VS_TORCH, f": no value for input {missing[0]!r}")
        # copies: torch.from_numpy shares memory, and an in-place op in the module (x.relu_()) would write into
        # the feeds, which the ONNX side reads too
        tensors = [from_numpy(feeds[n]) for n in self.input_names]
        if self.template is None or sum(x is None for x in self.template) != len(tensors):
            return tensors
        it = iter(tensors)  # the other arguments (a float the exporter baked in) as the example gave them
        return [next(it) if x is None else x for x in self.template]

    def forward(self, feeds: dict[str, np.ndarray], keep: set[str],
                replace: dict[str, np.ndarray] | None = None) -> Forward:
        """One forward pass in eval mode, without autograd, keeping the values of ``keep`` (module paths);
        ``replace``: module path -> the value its output is replaced with, once recorded."""
        torch = require_torch()
        seen = Forward([])
        replace = replace or {}
        made: dict[int, tuple[str, weakref.ref]] = {}  # id of a module's output tensor -> (module, the tensor)

        def pre(mod, args):
            path = self.paths.get(mod)
            if path is not None:
                if path not in seen.calls:
                    seen.order.append(path)
                    first = args[0] if args else None
                    maker = made.get(id(first)) if isinstance(first, torch.Tensor) else None
                    if maker is not None and maker[1]() is first:  # the same tensor, not a freed one's id reused
                        seen.fed_by[path] = maker[0]
                seen.calls[path] = seen.calls.get(path, 0) + 1

        def post(mod, _args, out):
            path = self.paths.get(mod)
            if path is None or path in seen.shapes:
                return None
            ts = tensors_of(out)
            if not ts:
                return None
            if id(ts[0]) not in made or made[id(ts[0])][1]() is not ts[0]:  # the innermost module that made it
                made[id(ts[0])] = (path, weakref.ref(ts[0]))
            seen.shapes[path] = tuple(ts[0].shape)
            if any(tuple(t.shape) == tuple(ts[0].shape) for t in ts[1:]):
                seen.ambiguous[path] = len(ts)
            if path in keep:
                seen.values[path] = to_numpy(ts[0])
            if path in replace and tuple(replace[path].shape) == tuple(ts[0].shape):
                # a copy: the value is A's own, which an in-place op after this module (ReLU(inplace=True))
                # would overwrite, and the introduced error would compare the overwritten one
                new = from_numpy(replace[path]).to(ts[0].dtype)
                return new if isinstance(out, torch.Tensor) else _with_first(out, ts[0], new)
            return None

        hooks = []
        for mod in self.paths:
            hooks.append(mod.register_forward_pre_hook(pre))
            hooks.append(mod.register_forward_hook(post))
        try:
            self.state.restore()
            with eval_mode(self.module), torch.no_grad(), user_code():
                out = self.module(*self.args(feeds))
        except UsageError:
            raise
        except Exception as e:  # noqa: BLE001 - the user's forward may raise anything
            raise ExecutionError(f"the torch module's forward raised {type(e).__name__}: {first_line(e)[:300]}") from None
        finally:
            for h in hooks:
                h.remove()
            self.state.put_back(self.note)
        seen.outputs = [to_numpy(t) for t in tensors_of(out)]
        return seen

    def values(self, names: list[str], feeds: dict[str, np.ndarray], *, keep_on_device: bool = False) -> dict:
        wanted = {parse_probe(n)[0] for n in names if not n.startswith(OUTPUT)}
        if self._last is None or self._last[0] != id(feeds) or not wanted <= set(self._last[1].values):
            self._last = (id(feeds), self.forward(feeds, wanted))
        return self._read(names, self._last[1])

    def remember(self, feeds: dict[str, np.ndarray], fw: Forward) -> None:
        """Answer the next requests made with these feeds from ``fw`` (a pass made elsewhere)."""
        self._last = (id(feeds), fw)

    replays = True

    def replay(self, names: list[str], known: dict, feeds: dict[str, np.ndarray]) -> dict:
        replace = {}
        for probe, value in known.items():
            if not probe.startswith(OUTPUT):
                path, perm = parse_probe(probe)
                replace[path] = unpermuted(np.asarray(value), perm)
        fw = self.forward(feeds, {parse_probe(n)[0] for n in names if not n.startswith(OUTPUT)}, replace)
        return self._read(names, fw)

    @staticmethod
    def _read(names: list[str], fw: Forward) -> dict:
        out = {}
        for n in names:
            if n.startswith(OUTPUT):
                k = int(n[len(OUTPUT):])
                if k < len(fw.outputs):
                    out[n] = fw.outputs[k]
                continue
            path, perm = parse_probe(n)
            if path in fw.values:
                out[n] = permuted(fw.values[path], perm)
        return out


def _with_first(out, old, new):
    """``out`` (a tuple or list, possibly nested) with the tensor ``old`` replaced by ``new``."""
    if out is old:
        return new
    if isinstance(out, (tuple, list)) and not hasattr(out, "_fields"):
        return type(out)(_with_first(v, old, new) for v in out)
    return out
