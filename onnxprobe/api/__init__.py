"""The plain Python API. The CLI, the interactive session and notebooks call these same functions.

    from onnxprobe import api
    model = api.load("model.onnx")
    plan = api.plan(model, api.Selection(ops=("Conv",)))
    result = api.run(plan, api.feeds(model, seed=0))
    for ref, stats in result.rows():
        print(ref.name, stats.mean)

One module per workflow: ``core`` (load, plan, run, layers, dataset statistics), ``diff``, ``grad`` (and
``diff --grad``), ``surgery`` (inspect, mark, extract), ``session`` (what ``onnxprobe debug`` needs).
"""

from onnxprobe.graph.select import Selection, select
from onnxprobe.types import ProbePlan, RunConfig, TensorRef
from onnxprobe.api.core import Model, load, plan, feeds, LayersResult, run, rerun_masked, layers, save_tensors, DatasetResult, layers_dataset
from onnxprobe.api.session import TensorInfo, NodeInfo, BACKWARD_NODE_PREFIX, GraphIndex, index, attribute_text, model_info, Runner, where
from onnxprobe.api.diff import diff
from onnxprobe.api.surgery import InspectResult, inspect, SurgeryResult, MarkResult, ExtractResult, mark, extract
from onnxprobe.api.grad import GRAD_OPT_LEVEL, GradSpec, GradPlan, grad_plan, export_backward, GradRow, GradResult, grad, grad_check, diff_grad

__all__ = [
    "Selection",
    "select",
    "ProbePlan",
    "RunConfig",
    "TensorRef",
    "Model",
    "load",
    "plan",
    "feeds",
    "LayersResult",
    "run",
    "rerun_masked",
    "layers",
    "save_tensors",
    "DatasetResult",
    "layers_dataset",
    "TensorInfo",
    "NodeInfo",
    "BACKWARD_NODE_PREFIX",
    "GraphIndex",
    "index",
    "attribute_text",
    "model_info",
    "Runner",
    "where",
    "diff",
    "InspectResult",
    "inspect",
    "SurgeryResult",
    "MarkResult",
    "ExtractResult",
    "mark",
    "extract",
    "GRAD_OPT_LEVEL",
    "GradSpec",
    "GradPlan",
    "grad_plan",
    "export_backward",
    "GradRow",
    "GradResult",
    "grad",
    "grad_check",
    "diff_grad",
]
