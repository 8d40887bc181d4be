"""Getting a PyTorch module from where the user says it is: ``FILE.py:FUNC``, where ``FUNC()`` returns an
``nn.Module`` or ``(module, example_args)``. torch is imported here and in the rest of onnxprobe/torch/
only, and only when a command asks for it."""

from __future__ import annotations

import contextlib

from onnxprobe.errors import MissingExtra, UsageError, setting_error
from onnxprobe.runtime.userfunc import call_function, load_function
from onnxprobe.text import clean, some


VS_TORCH = ("vs_torch", "--vs-torch")  # the module to compare with, as the API and the command line name it


def require_torch(what: tuple[str, str] = VS_TORCH):
    """The torch module, or a MissingExtra naming the extra to install (``what``: (API parameter, flag))."""
    try:
        import torch
    except ImportError:
        e = MissingExtra(f"{what[0]} ({what[1]})", "torch", "PyTorch")
        e.cli_message = MissingExtra(what[1], "torch", "PyTorch").args[0]
        raise e from None
    return torch


def load_module(spec: str) -> tuple[object, tuple | None]:
    """(module, example_args or None) from ``FILE.py:FUNC``. The module is put in eval mode, as exports are."""
    torch = require_torch()
    fn, func = load_function(spec, VS_TORCH, "a function that returns an nn.Module or (module, example_args)")
    got = call_function(fn, func, spec, VS_TORCH)
    if isinstance(got, tuple) and len(got) == 3 and isinstance(got[0], torch.nn.Module) and isinstance(got[2], dict):
        raise setting_error(UsageError, VS_TORCH, f"{clean(spec)}: {clean(func)}() returned (module, args, kwargs): "
                            f"{KEYWORDS}")
    module, args = (got[0], got[1]) if isinstance(got, tuple) and len(got) == 2 else (got, None)
    if not isinstance(module, torch.nn.Module):
        what = (f"a tuple ({', '.join(type(x).__name__ for x in got)})" if isinstance(got, tuple)
                else type(got).__name__)  # what it returned as a whole: (Tensor, Tensor) is no module and args
        raise setting_error(UsageError, VS_TORCH, f"{clean(spec)}: {clean(func)}() returned {what}, not an nn.Module "
                            "(or a tuple (module, example_args))")
    if args is not None and not isinstance(args, (tuple, list, dict)):
        args = (args,)
    return module, (positional(args, f"{clean(spec)}: {clean(func)}() returned ") if args is not None else None)


# what the example arguments may be, said where they hold keyword arguments
KEYWORDS = ("keyword arguments are not taken; return (module, (x, y, ...)): the example arguments as a tuple, "
            "in the order of the ONNX model's inputs")


def positional(args, where: str = "") -> tuple:
    """``args`` (the example arguments) as a tuple, or a UsageError where they are or hold a dict: keyword
    arguments (torch.onnx.export's trailing dict of named inputs), which onnxprobe does not feed. ``where``:
    what gave them, as the message starts ("m.py: build() returned ")."""
    if hasattr(args, "shape") and hasattr(args, "dtype"):  # one tensor: the one argument, as torch.onnx.export takes it
        return (args,)  # (tuple() of it made its rows the arguments)
    if not isinstance(args, (tuple, list, dict)):
        raise setting_error(UsageError, VS_TORCH, f": {where}example arguments {type(args).__name__}: expected a tuple of "
                            "forward()'s positional arguments (or one tensor)")
    if isinstance(args, dict) or any(isinstance(a, dict) for a in args):
        what = (("its example arguments as a dict" if isinstance(args, dict) else "example arguments holding a dict")
                if where else "the example arguments are a dict" if isinstance(args, dict) else "the example arguments hold a dict")
        raise setting_error(UsageError, VS_TORCH, f"{': ' if not where else ''}{where}{what}: {KEYWORDS}")
    return tuple(args)


@contextlib.contextmanager
def eval_mode(module):
    """``module`` in eval mode for the block, then each submodule back in its own mode: ``module.train(was)``
    would set every child to the root's (a frozen eval-mode BatchNorm in a training model would train)."""
    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        yield module
    finally:
        for m, training in modes:
            m.training = training


def training_note(module) -> list[str]:
    """A note where ``module`` (or a submodule) is in training mode: it is run in eval mode, as exports are
    (``eval_mode``), which the header's "eval mode" says but not that the mode was switched. Names the
    submodules in training mode that eval mode changes (dropout: the identity; batch norms: the running
    statistics); a submodule of the user's own may read ``self.training`` too, which no one can list."""
    torch = require_torch()
    training = [(p, m) for p, m in module.named_modules() if m.training]
    if not training:
        return []
    kinds = (torch.nn.modules.dropout._DropoutNd, torch.nn.modules.batchnorm._BatchNorm,
             torch.nn.modules.instancenorm._InstanceNorm)
    changed = [f"{p or '(the module)'!r} ({type(m).__name__})" for p, m in training
               if isinstance(m, kinds) and (not isinstance(m, torch.nn.modules.instancenorm._InstanceNorm)
                                            or m.track_running_stats)]
    which = (f": eval mode changes {some(changed, form=str)} (dropout is the identity, batch norms use their running "
             "statistics)" if changed else "")
    return [f"the module was in training mode (train()); it was run in eval mode, as it is exported, and each "
            f"submodule given its own mode back{which}"]


class FirstState:
    """A module's state as the caller handed it over, put back before and after each of onnxprobe's forward
    passes (``restore``): its parameters and buffers (written in place, through ``.data`` too, or reassigned; one
    registered by forward() itself is removed again) and its plain attributes that are numbers or tensors (a Python
    counter, ``self.t = self.t + 1``). A forward() that updates its state would otherwise give each pass another
    function, the comparison judging torch's 2nd or 4th call and not the one the export was made of, and leave the
    caller's module changed. One copy of the state is held."""

    def __init__(self, module):
        torch = require_torch()
        self.torch = torch
        self.slots = []  # [owner module, "_parameters" | "_buffers" | "__dict__", name, the object, its values]
        self.registered = []  # (owner, kind, the names it had)
        with torch.no_grad():
            for owner in module.modules():
                for kind in ("_parameters", "_buffers"):
                    held = getattr(owner, kind)
                    self.registered.append((owner, kind, set(held)))
                    self.slots += [[owner, kind, n, t, t.detach().clone()] for n, t in held.items() if t is not None]
                for n, v in vars(owner).items():  # plain attributes: numbers and tensors (not 'training': eval_mode's;
                    # not a tensor subclass: an export leaves FakeTensors behind in what forward() assigned, which
                    # compare with nothing)
                    tensor = type(v) is torch.Tensor and not v.is_meta
                    if n != "training" and not n.startswith("_") and (tensor or type(v) in (bool, int, float)):
                        self.slots.append([owner, "__dict__", n, v, v.detach().clone() if tensor else v])
        self.paths = {id(m): p for p, m in module.named_modules()}
        self.after_first: dict[int, object] | None = None  # the parameters and buffers the first pass changed, as it left them

    @contextlib.contextmanager
    def after_first_call(self):
        """The module, for the block, with its parameters and buffers as its first call left them (a weight forward()
        clamps: the values the export computed with, which the weight checks compare), then as handed over again."""
        torch = self.torch
        with torch.no_grad():
            for owner, kind, name, obj, _ in self.slots:
                if self.after_first and id(obj) in self.after_first:
                    obj.copy_(self.after_first[id(obj)])
        try:
            yield
        finally:
            self.restore()

    def put_back(self, note) -> None:
        """``restore``, saying what the pass had changed (``state_note``) through ``note`` (a runner's, said once)."""
        changed = self.restore()
        if changed:
            note(state_note(changed))

    def restore(self) -> list[str]:
        """Put the state back; returns the names ('cnt', 'bn.running_mean') of what the pass had changed."""
        torch = self.torch
        changed = []

        def said(owner, name):
            path = self.paths.get(id(owner), "")
            changed.append(f"{path}.{name}" if path else name)

        first: dict[int, object] = {}
        with torch.no_grad():
            for owner, kind, names in self.registered:  # what forward() registered: gone again
                held = getattr(owner, kind)
                for n in [n for n in held if n not in names]:
                    del held[n]
                    said(owner, n)
            for owner, kind, name, obj, values in self.slots:
                held = getattr(owner, kind) if kind != "__dict__" else vars(owner)
                moved = held.get(name) is not obj
                if moved:  # reassigned (self.cnt = self.cnt + 1): the object back
                    held[name] = obj
                if isinstance(obj, torch.Tensor) and not _same(torch, obj, values):
                    if kind != "__dict__" and self.after_first is None and obj.shape == values.shape:
                        first[id(obj)] = obj.detach().clone()
                    obj.data = values.clone() if obj.shape != values.shape else obj.data  # (resized through .data)
                    obj.copy_(values)  # written in place, .data or a numpy view of it too
                    moved = True
                if moved:
                    said(owner, name)
        if changed and self.after_first is None:
            self.after_first = first
        return list(dict.fromkeys(changed))


def _same(torch, t, values) -> bool:
    """``t`` holds ``values``: of one shape and dtype, equal, NaN to NaN (a weight holding NaN is no change)."""
    if t.shape != values.shape or t.dtype != values.dtype:
        return False
    if torch.equal(t, values):
        return True
    return t.is_floating_point() and bool(torch.equal(torch.isnan(t), torch.isnan(values))) and bool(
        torch.equal(torch.nan_to_num(t, nan=0.0), torch.nan_to_num(values, nan=0.0)))


def state_note(changed: list[str]) -> str:
    """The note where a forward() changed the module's state (``FirstState.restore``)."""
    return (f"torch: forward() changes the module's state ({some(changed, form=str)}); each of onnxprobe's passes "
            "starts from the state the module was handed over in, so torch's side is the module's first call "
            "from it, and the module is left as it was")
