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

- ``core``: ``load``, ``plan``, ``feeds``, ``run``, ``layers``, ``save_tensors``, ``layers_dataset``,
  ``merge_stats`` (statistics of probed tensors, of one input or a dataset);
- ``diff``: ``diff`` (against another model, device, opt level, onnx.reference, saved activations or the
  PyTorch module) and ``diff_grad`` (the gradients of two models, or of a model and torch autograd);
  ``sort_results``, ``Tolerance``;
- ``diff_dataset`` / ``grad_dataset``: ``diff`` and ``grad`` over a dataset (``--inputs-dir``,
  ``--inputs-from``), the metrics pooled over every sample, the gradients of the dataset's loss;
  ``datasets`` runs the batches here or on Ray actors (``RayOptions``);
- ``torch``: ``diff_torch``, ``diff_grad_torch`` (an export against its nn.Module, module by module),
  ``torch_module``;
- ``grad_plan`` / ``grad``: ``GradSpec``, ``grad_spec``, ``grad_plan``, ``export_backward``, ``grad``,
  ``grad_check``;
- ``surgery``: ``inspect``, ``mark``, ``extract``;
- ``pictures``: what the HTML report and the overlays need: histograms of a few tensors
  (``layers_histograms``, ``diff_histograms``, ``grad_histograms``), ``describe_inputs``,
  ``explorer_ids`` (Model Explorer's node ids);
- ``explore``: what the debugger needs: ``index`` (GraphIndex), ``model_info``, ``where``, ``Prober``;
- ``inputs``: ``input_spec`` and the parsers of the input flags.

Every function that runs a model takes an ``InputSpec`` (seed, integer range, shapes, files or values,
arrays) and a ``RunConfig`` (device, opt level); ``layers``, ``run`` and ``diff`` also take a ``runtime``
(``ort``, ``openvino``, ``tensorrt``, ``reference``; ``RUNTIMES``) and its ``runtime_options``.
"""

from onnxprobe.api.core import (
    DatasetResult, LayersResult, Model, feeds, layers, layers_dataset, load, merge_stats, plan, raw_chunks, run, runner,
    save_tensors,
)
from onnxprobe.api.diff import diff, diff_grad
from onnxprobe.api.diff_dataset import diff_dataset
from onnxprobe.api.grad_dataset import REDUCE, grad_dataset
from onnxprobe.api.explore import Prober, interruptibly, model_info, where
from onnxprobe.api.grad import GradResult, GradRow, grad, grad_check
from onnxprobe.api.grad_plan import GRAD_OPT_LEVEL, GradPlan, GradSpec, export_backward, grad_plan, grad_spec
from onnxprobe.api.inputs import (
    Feeds, ModelInput, check_value, input_spec, model_inputs, parse_input_files, parse_int_range, parse_shape_overrides, parse_size,
    read_array, read_npz, save_npz,
)
from onnxprobe.api.pictures import (
    ExplorerIds, describe_inputs, diff_histograms, explorer_ids, grad_histograms, histogram_of, layers_histograms,
)
from onnxprobe.api.profile import LayersProfile, RowTime, profile_layers
from onnxprobe.api.torch import diff_grad_torch, diff_torch, torch_module
from onnxprobe.api.surgery import ExtractResult, InspectResult, MarkResult, SurgeryResult, extract, inspect, mark
from onnxprobe.compare.diff import SORTS, DiffResult, PairResult, sort_results
from onnxprobe.graph.index import GraphIndex, NodeInfo, TensorInfo, attribute_text, index
from onnxprobe.graph.model import as_model
from onnxprobe.graph.select import Selection, select
from onnxprobe.runtime.ort import DEVICES, OPT_LEVELS, resolve_device
from onnxprobe.runtime.ray_pool import Executor, RayOptions
from onnxprobe.runtime.runners import RUNTIMES, parse_runtime_options
from onnxprobe.stats.conditions import EXAMPLES as CONDITION_EXAMPLES
from onnxprobe.stats.conditions import Condition, parse_condition
from onnxprobe.stats.metrics import METRICS, IntroducedError, PairMetrics, Tolerance
from onnxprobe.stats.tensor_stats import TensorStats
from onnxprobe.types import BACKWARD_TAG, GRAD_SUFFIX, InputSpec, ProbePlan, ProbeResult, RunConfig, RunInfo, TensorRef

__all__ = [
    # data
    "Model", "Selection", "RunConfig", "InputSpec", "TensorRef", "ProbePlan", "ProbeResult", "LayersResult", "RunInfo",
    "TensorStats", "Feeds", "ModelInput", "DatasetResult", "Tolerance", "PairMetrics", "IntroducedError", "DiffResult", "PairResult",
    "GradSpec", "GradPlan", "GradResult", "GradRow", "InspectResult", "SurgeryResult", "MarkResult", "ExtractResult",
    "GraphIndex", "TensorInfo", "NodeInfo", "Condition", "Prober", "ExplorerIds", "LayersProfile", "RowTime",
    "RayOptions", "Executor",
    # constants
    "DEVICES", "OPT_LEVELS", "RUNTIMES", "METRICS", "SORTS", "GRAD_OPT_LEVEL", "REDUCE", "BACKWARD_TAG", "GRAD_SUFFIX",
    "CONDITION_EXAMPLES",
    # workflows
    "load", "as_model", "select", "plan", "feeds", "runner", "run", "layers", "raw_chunks", "save_tensors",
    "layers_dataset", "merge_stats", "diff", "diff_grad", "diff_dataset", "grad_dataset", "diff_torch", "diff_grad_torch",
    "torch_module", "profile_layers", "sort_results", "grad_spec", "grad_plan", "export_backward",
    "grad", "grad_check", "inspect", "mark", "extract", "index", "attribute_text", "model_info", "where",
    "parse_condition", "interruptibly", "layers_histograms", "diff_histograms", "grad_histograms", "describe_inputs",
    "histogram_of", "explorer_ids",
    # inputs
    "input_spec", "parse_int_range", "parse_size", "parse_shape_overrides", "parse_input_files", "read_array", "read_npz",
    "save_npz", "model_inputs", "check_value", "resolve_device", "parse_runtime_options",
]
