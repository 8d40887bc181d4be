"""PyTorch as the reference (the ``torch`` extra: ``pip install 'onnxprobe[torch]'``).

    import onnxprobe.torch as opt
    res = opt.diff(module, (x,), "model.onnx")          # the export against its module, module by module
    res = opt.diff_grad(module, (x,), "model.onnx")     # gradients: ONNX backward graph vs torch autograd
    acts = opt.capture(module, (x,), "model.onnx")      # {onnx tensor name: ndarray}, for --vs-npz
    res = opt.export_and_diff(module, (x,), dynamo=True)

Each returns what ``onnxprobe.api`` does (a ``DiffResult``; ``res.verdict()``, ``res.first_failure``).
The functions here are thin doors onto ``onnxprobe.api.torch``; the modules of this package (the
runner, the pairing, the parameter map) are what they use, and the only place onnxprobe imports torch.
"""

from __future__ import annotations


def diff(module, args, model, **kwargs):
    """``api.diff_torch(model, module, example_args=args, **kwargs)``."""
    from onnxprobe.api.torch import diff_torch

    return diff_torch(model, module, example_args=_args(args), **kwargs)


def diff_grad(module, args, model, spec=None, **kwargs):
    """``api.diff_grad_torch(model, module, spec, example_args=args, **kwargs)``."""
    from onnxprobe.api.torch import diff_grad_torch

    return diff_grad_torch(model, module, spec, example_args=_args(args), **kwargs)


def capture(module, args, model, **kwargs):
    """``api.capture_torch``: {ONNX tensor name: torch's value}."""
    from onnxprobe.api.torch import capture_torch

    return capture_torch(model, module, example_args=_args(args), **kwargs)


def export_and_diff(module, args, dynamo: bool = True, **kwargs):
    """``api.export_and_diff``: export, then compare the export with the module."""
    from onnxprobe.api.torch import export_and_diff as run

    return run(module, _args(args), dynamo=dynamo, **kwargs)


def _args(args) -> tuple | None:
    if args is None:
        return None
    return tuple(args) if isinstance(args, (tuple, list)) else (args,)
