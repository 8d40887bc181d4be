"""The plain Python API: every capability of onnxprobe is a function here first. The command line, the
interactive debugger and notebooks call these same functions, and nothing else of the package.

    from onnxprobe import api
    model = api.load("model.onnx")                              # a Model: the proto with inferred shapes
    res = api.layers(model, api.Selection(ops=("Conv",)), api.RunConfig(device="cpu"),
                     api.InputSpec(seed=0, shapes={"x": (1, 3, 224, 224)}))
    for ref, stats in res.rows():
        print(ref.name, stats.mean, stats.std)
    d = api.diff("model_int8.onnx", "model_fp32.onnx")          # Models or paths
    print(d.verdict())                                          # ("pass" | "fail" | "error", why)

Workflows, one module each:

- ``core``: ``load``, ``plan``, ``feeds``, ``run``, ``layers`` (``api.layers`` is ``lean.layers``: a repeated
  request on a model file served from the plan cache without onnx, else this one), ``save_tensors``, ``layers_dataset``,
  ``merge_stats`` (statistics of probed tensors, of one input or a dataset);
- ``diff``: ``diff`` (against another model, device, opt level, onnx.reference, saved activations or the
  PyTorch module) and ``diff_grad`` (the gradients of two models, or of a model and torch autograd);
  ``sort_results``, ``Tolerance``, ``tolerances_from_flags`` (the criterion flags, parsed);
- ``diff_dataset`` / ``grad_dataset``: ``diff`` and ``grad`` over a dataset (``--inputs-dir``,
  ``--inputs-from``), the metrics pooled over every sample, the gradients of the dataset's loss;
  ``datasets`` runs the batches here or on Ray actors (``RayOptions``);
- ``torch``: ``diff_torch``, ``diff_grad_torch`` (an export against its nn.Module, module by module),
  ``torch_module``;
- ``grad_plan`` / ``grad``: ``GradSpec``, ``grad_spec``, ``grad_plan``, ``export_backward`` (or ``export_plan``
  then ``write_export``), ``grad``, ``grad_check``;
- ``surgery``: ``inspect``, ``mark``, ``extract``;
- ``reports``: ``report``, what ``--json`` writes of any of these results, as a plain dict; ``text``, what the
  command prints (a table at any width, csv, markdown); ``html`` (the
  ``--html`` page), ``overlay`` (``--overlay``: Model Explorer's node data) and ``netron`` (``--netron``);
- ``pictures``: what the HTML report and the overlays need: histograms of a few tensors
  (``layers_histograms``, ``diff_histograms``, ``grad_histograms``), ``describe_inputs``,
  ``explorer_ids`` (Model Explorer's node ids);
- ``explore``: what the debugger needs: ``index`` (GraphIndex), ``model_info``, ``where``, ``Prober``;
- ``inputs``: ``input_spec`` and the parsers of the input flags (``given_inputs``: what ``--inputs`` reads); ``as_model``, what every function that takes
  a model accepts (a Model, a path or an onnx.ModelProto).

Every function that runs a model takes an ``InputSpec`` (seed, integer range, shapes, files or values,
arrays) and a ``RunConfig`` (device, opt level); ``layers``, ``run`` and ``diff`` also take a ``runtime``
(``ort``, ``openvino``, ``tensorrt``, ``reference``; ``RUNTIMES``) and its ``runtime_options``.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the same names, for type checkers and editors
    from onnxprobe.api.core import (
        DatasetResult, LayersResult, Model, feeds, layers_dataset, load, merge_stats, plan, raw_chunks, run, runner,
        save_tensors, select,
    )
    from onnxprobe.api.lean import layers
    from onnxprobe.api.diff_lean import diff
    from onnxprobe.api.diff_grad import diff_grad
    from onnxprobe.api.diff_dataset import diff_dataset
    from onnxprobe.api.grad_dataset import REDUCE, grad_dataset
    from onnxprobe.api.explore import Prober, index, interruptibly, model_info, where
    from onnxprobe.api.grad import GradResult, GradRow, grad, grad_check
    from onnxprobe.api.grad_export import export_backward, export_plan, write_export
    from onnxprobe.api.grad_plan import GRAD_OPT_LEVEL, GradPlan, GradSpec, grad_plan, grad_spec
    from onnxprobe.api.inputs import (
        Feeds, ModelInput, as_model, check_shape, check_value, model_inputs, parse_dims, parse_input_files,
        parse_shape_overrides, parse_size, read_array, read_inputs, read_map, read_npz, save_npz,
        GivenInputs, given_inputs,
        named_by_position, raw_batches, feed_digest, has_statistics, same_float_values,
    )
    from onnxprobe.api.spec import input_spec, parse_int_range, protect_inputs
    from onnxprobe.api.pictures import (
        ExplorerIds, describe_inputs, diff_histograms, explorer_ids, grad_histograms, histogram_of, layers_histograms,
    )
    from onnxprobe.api.profile import LayersProfile, RowTime, check_profile, profile_layers
    from onnxprobe.api.reports import html, netron, overlay, report, text
    from onnxprobe.api.torch import diff_grad_torch, diff_torch, torch_module
    from onnxprobe.api.surgery import ExtractResult, InspectResult, MarkResult, SurgeryResult, extract, inspect, mark
    from onnxprobe.compare.result import DiffResult, PairResult, sort_results
    from onnxprobe.errors import (
        DeviceUnavailable, ExecutionError, MissingExtra, ModelError, NoGradientRule, OnnxProbeError, UsageError,
    )
    from onnxprobe.graph.index import GraphIndex, NodeInfo, TensorInfo, attribute_text
    from onnxprobe.runtime.ort import DEVICES, OPT_LEVELS, resolve_device
    from onnxprobe.runtime.ray_pool import Executor, RayOptions
    from onnxprobe.runtime.runners import RUNTIMES, ort_config, own_options, parse_runtime_options
    from onnxprobe.stats.conditions import EXAMPLES as CONDITION_EXAMPLES
    from onnxprobe.stats.conditions import Condition, parse_condition
    from onnxprobe.stats.metrics import METRICS, IntroducedError, PairMetrics, Tolerance, tolerances_from_flags
    from onnxprobe.stats.tensor_stats import TensorStats
    from onnxprobe.types import BACKWARD_TAG, GRAD_SUFFIX, SORTS, InputSpec, ProbePlan, ProbeResult, RunConfig, RunInfo, Selection, TensorRef


# each public name and the module it lives in, imported on first use (PEP 562): a command pays only
# for the workflows it runs (`layers` never imports diff, grad, surgery or torch). "NAME=SOURCE"
# renames. The TYPE_CHECKING imports above say the same for type checkers (tests/test_architecture.py).
_WHERE = {
    "onnxprobe.api.core": (
        "DatasetResult LayersResult Model feeds layers_dataset load "
        "merge_stats plan raw_chunks run runner save_tensors select"
    ),
    "onnxprobe.api.lean": "layers",  # a cached request served without onnx, else core.layers
    "onnxprobe.api.diff_lean": "diff",  # a cached request's run started before onnx is imported, else api.diff's own
    "onnxprobe.api.diff_grad": "diff_grad",
    "onnxprobe.api.diff_dataset": "diff_dataset",
    "onnxprobe.api.grad_dataset": "REDUCE grad_dataset",
    "onnxprobe.api.explore": "Prober index interruptibly model_info where",
    "onnxprobe.api.grad": "GradResult GradRow grad grad_check",
    "onnxprobe.api.grad_export": "export_backward export_plan write_export",
    "onnxprobe.api.grad_plan": "GRAD_OPT_LEVEL GradPlan GradSpec grad_plan grad_spec",
    "onnxprobe.api.inputs": (
        "Feeds ModelInput as_model check_shape check_value model_inputs parse_input_files "
        "parse_dims parse_shape_overrides parse_size read_array read_inputs read_map "
        "read_npz save_npz named_by_position raw_batches feed_digest has_statistics GivenInputs given_inputs "
        "same_float_values"
    ),
    "onnxprobe.api.spec": "input_spec parse_int_range protect_inputs",
    "onnxprobe.api.pictures": (
        "ExplorerIds describe_inputs diff_histograms explorer_ids "
        "grad_histograms histogram_of layers_histograms"
    ),
    "onnxprobe.api.profile": "LayersProfile RowTime check_profile profile_layers",
    "onnxprobe.api.reports": "html netron overlay report text",
    "onnxprobe.api.torch": "diff_grad_torch diff_torch torch_module",
    "onnxprobe.api.surgery": (
        "ExtractResult InspectResult MarkResult SurgeryResult extract inspect "
        "mark"
    ),
    "onnxprobe.compare.result": "DiffResult PairResult sort_results",
    "onnxprobe.errors": "DeviceUnavailable ExecutionError MissingExtra ModelError NoGradientRule OnnxProbeError UsageError",
    "onnxprobe.graph.index": "GraphIndex NodeInfo TensorInfo attribute_text",
    "onnxprobe.runtime.ort": "DEVICES OPT_LEVELS resolve_device",
    "onnxprobe.runtime.ray_pool": "Executor RayOptions",
    "onnxprobe.runtime.runners": "RUNTIMES ort_config own_options parse_runtime_options",
    "onnxprobe.stats.conditions": "CONDITION_EXAMPLES=EXAMPLES Condition parse_condition",
    "onnxprobe.stats.metrics": "METRICS IntroducedError PairMetrics Tolerance tolerances_from_flags",
    "onnxprobe.stats.tensor_stats": "TensorStats",
    "onnxprobe.types": (
        "BACKWARD_TAG GRAD_SUFFIX SORTS InputSpec ProbePlan ProbeResult RunConfig RunInfo Selection "
        "TensorRef"
    ),
}
_NAMES = {w.partition("=")[0]: (mod, w.partition("=")[2] or w.partition("=")[0]) for mod, names in _WHERE.items() for w in names.split()}
__all__ = sorted(_NAMES)


def __getattr__(name: str):
    try:
        mod, src = _NAMES[name]
    except KeyError:
        # a module of the API (``api.surgery``, ``api.core``, ``api.explore``: README's table of them), imported
        # on first use as its functions are; ``api.diff`` and the like stay the functions of those names
        if name.isidentifier() and not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
            return importlib.import_module(f"{__name__}.{name}")
        raise AttributeError(f"module 'onnxprobe.api' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(mod), src)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Api(types.ModuleType):
    def __setattr__(self, name: str, value) -> None:
        # importing a submodule binds it on the package: ``api.diff``, ``api.grad``, ``api.grad_plan``,
        # ``api.diff_dataset`` and ``api.grad_dataset`` stay the functions of those names
        if name in _NAMES and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Api
