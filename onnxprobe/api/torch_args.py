"""The PyTorch module ``diff --vs-torch`` compares with, and the inputs both run on: ``torch_module`` reads
an ``nn.Module``, a ``(module, example_args)`` tuple or ``FILE.py:FUNC``; ``prepare`` makes the feeds from
the example arguments (in the ONNX inputs' order) where no inputs are given otherwise. Their messages name
the module as each reader gave it: ``vs_torch (--vs-torch)`` from the API, ``--vs-torch`` on the command
line (``errors.setting_error``)."""

from __future__ import annotations

import os

import numpy as np

from onnxprobe.api.inputs import TorchLike, as_inputs
from onnxprobe.errors import UsageError, setting_error, settings_error
from onnxprobe.graph.model import Model, as_model
from onnxprobe.graph.walk import all_graphs
from onnxprobe.runtime import feeds as _feeds
from onnxprobe.runtime.runners import check_usable
from onnxprobe.text import clean
from onnxprobe.torch.load import VS_TORCH, load_module, positional, require_torch
from onnxprobe.torch.runner import to_numpy
from onnxprobe.types import InputSpec, RunConfig

INPUT = ("inputs", "--input")  # the inputs given otherwise, as the API and the command line name them


def torch_module(module: TorchLike) -> tuple[object, tuple | None]:
    """(nn.Module, example args or None) from an nn.Module, a ``(module, args)`` tuple, or ``FILE.py:FUNC``."""
    torch = require_torch()
    if isinstance(module, (str, os.PathLike)):
        mod, args = load_module(str(module))
        return eager(mod, str(module)), args
    if isinstance(module, tuple) and len(module) == 2 and isinstance(module[0], torch.nn.Module):
        args = module[1] if isinstance(module[1], (tuple, list, dict)) else (module[1],)
        return eager(module[0]), positional(args)
    if isinstance(module, torch.nn.Module):
        return eager(module), None
    raise setting_error(UsageError, VS_TORCH, f": expected an nn.Module or FILE.py:FUNC, got {type(module).__name__}")


def eager(module, where: str = "the module"):
    """``module``, unless it is TorchScript (torch.jit.script / trace), whose submodules take no hooks."""
    torch = require_torch()
    if isinstance(module, torch.jit.ScriptModule):
        raise setting_error(UsageError, VS_TORCH, f"{where}: a TorchScript module (torch.jit.script or trace); onnxprobe reads "
                            "each submodule's output through forward hooks, which TorchScript does not run: give the eager "
                            "nn.Module")
    return module


def example_inputs(model: Model, inputs: InputSpec | None, example_args: tuple | None, module=None) -> InputSpec | None:
    """The example arguments as the inputs, in the ONNX inputs' order, when none are given otherwise (``module``:
    whose forward()'s parameters name them, ``fed_positions``)."""
    if example_args is None or (inputs is not None and inputs.names()):
        return inputs
    torch = require_torch()
    names = [i.name for i in _feeds.model_inputs(model.proto)]
    # torch tensors, or numpy arrays (a notebook's): the values of the ONNX inputs, which the module is run on too
    meta = [str(i) for i, a in enumerate(example_args) if isinstance(a, torch.Tensor) and a.is_meta]
    if meta:
        raise settings_error(UsageError, lambda say: f"{say(VS_TORCH)}: the example argument{'s' if len(meta) > 1 else ''} "
                             f"{', '.join(meta)} {'hold' if len(meta) > 1 else 'holds'} no data (meta tensors, device='meta'): "
                             f"give tensors with values, or the inputs with {say(INPUT)}")
    specs = _feeds.model_inputs(model.proto)
    fed = fed_positions(model, example_args, module)
    tensors = [to_numpy(example_args[k]) if isinstance(example_args[k], torch.Tensor)
               else _number(example_args[k], specs[j]) if j < len(specs) and not isinstance(example_args[k], np.ndarray)
               else example_args[k] for j, k in enumerate(fed)]
    if len(tensors) != len(names):
        raise settings_error(UsageError, lambda say: f"{say(VS_TORCH)}: the example arguments hold {len(tensors)} tensor(s), "
                             f"the ONNX model takes {len(names)} input(s) ({', '.join(names)}); give the inputs with "
                             f"{say(INPUT)}{say.either('', ' (inputs= from Python)')}")
    arrays = dict(zip(names, tensors))
    base = inputs or InputSpec()
    return InputSpec(seed=base.seed, int_range=base.int_range, arrays=arrays, arrays_from="the example arguments")


def fed_positions(model: Model, example_args: tuple, module=None) -> list[int]:
    """The positions of the example arguments that are the ONNX model's inputs: its tensors (torch's or
    numpy's); where the model takes more inputs than that and its Python numbers make up the count (the
    legacy exporter makes ``forward(x, scale: float)``'s scale a 0-d input; dynamo bakes it in), those too;
    where it takes fewer, the arguments of forward()'s parameters that its inputs are named after (the legacy
    exporter drops an argument forward() never reads, ``forward(x, mask)``: ``mask`` then goes to torch alone)."""
    torch = require_torch()
    specs = _feeds.model_inputs(model.proto)
    count = len(specs)
    tensors = [k for k, a in enumerate(example_args) if isinstance(a, (torch.Tensor, np.ndarray))]
    if len(tensors) > count and module is not None:
        named = _by_parameter_names(module, [s.name for s in specs], len(example_args))
        if named is not None:
            return named
    numbers = [k for k, a in enumerate(example_args) if isinstance(a, (torch.Tensor, np.ndarray, int, float, np.generic))]
    return numbers if len(tensors) != count and len(numbers) == count else tensors


def _by_parameter_names(module, names: list[str], n: int) -> list[int] | None:
    """The positions of forward()'s parameters named ``names`` (the ONNX inputs, in their order), where each is
    one of its first ``n`` and they come in forward()'s order (the tensors fill them in that order); else None."""
    import inspect

    try:
        params = [p.name for p in inspect.signature(module.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):  # a forward() whose signature Python cannot read (a C extension)
        return None
    if len(params) < n:  # more arguments than forward() takes: refused as a count that disagrees
        return None
    params = params[:n]
    at = [params.index(m) if m in params else None for m in names]
    return at if None not in at and at == sorted(at) else None


def _number(value, spec) -> np.ndarray:
    """A Python number as the 0-d array of its ONNX input's type (legacy: a float is a double input)."""
    try:
        return np.asarray(value, dtype=spec.dtype)
    except Exception:  # noqa: BLE001 - an input of no numeric type: make_feeds says what is wrong with it
        return np.asarray(value)


def prepare(a, module, example_args, inputs, config):
    """(model, module, feeds, config, template): ``template`` is the example arguments with each tensor's
    place None, where some are not tensors (a float the exporter baked into the graph): torch's forward
    gets those as given, and the feeds in the tensors' places (None when every argument is a tensor)."""
    a_model = as_model(a)
    _exported_in_eval_mode(a_model)
    inputs = as_inputs(inputs)  # a dict of arrays by input name, as every other function takes it
    # onnxruntime's device (A's runs, the export's): CUDA not usable here is said before the module is built
    check_usable("ort", (config or RunConfig()).device)
    mod, args = torch_module(module)
    args = positional(example_args) if example_args is not None else args
    empty = next((n for n, t in [*mod.named_parameters(), *mod.named_buffers()] if t.is_meta), None)
    if empty is not None:  # torch's forward would stop on it (on another device than the inputs)
        raise setting_error(UsageError, VS_TORCH, f": the module's {empty} holds no data (a meta tensor: built under "
                            "torch.device('meta')); load its weights first (load_state_dict(..., assign=True))")
    fs = _feeds.make_feeds(a_model.proto, example_inputs(a_model, inputs, args, mod))
    require_torch()  # a MissingExtra before any work, where torch is not installed
    template = None
    fed = set(fed_positions(a_model, args, mod)) if args is not None else set()
    if args is not None and len(fed) < len(args):
        template = [None if k in fed else x for k, x in enumerate(args)]
    return a_model, mod, fs, config or RunConfig(), template


def _exported_in_eval_mode(model) -> None:
    """A UsageError where ``model`` was exported in training mode (a BatchNormalization with training_mode=1:
    batch statistics, torch.onnx.export(training=TrainingMode.TRAINING)): the module runs in eval mode here, as
    exports are made, and its running statistics against the batch's gave a false FAIL, said "as it is exported"."""
    for g in all_graphs(model.proto.graph):
        for n in g.node:
            # training_mode=1 (opset 14 on); before it, a training BatchNormalization writes its running statistics
            # as outputs too (5 of them at opset 9-13): either is batch statistics
            if n.op_type == "BatchNormalization" and (any(a.name == "training_mode" and a.i for a in n.attribute)
                                                      or sum(1 for o in n.output if o) > 1):
                raise setting_error(UsageError, VS_TORCH, f": the model was exported in training mode (BatchNormalization "
                                    f"{clean(n.name or n.output[0])!r} computes batch statistics); the module "
                                    "is compared in eval mode, as exports are made: export it in eval mode (module.eval(), "
                                    "torch.onnx.export(..., training=torch.onnx.TrainingMode.EVAL))")
