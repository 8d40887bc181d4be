"""``grad --export``: the model with its backward graph (``grad_plan``, without a feed: dynamic dimensions
stay dynamic), checked in onnxruntime and written for any onnxruntime. ``export_backward`` builds and writes;
``export_plan`` and ``write_export`` are its two halves, for a caller (``grad --export``) that writes only once
the run it makes with the export succeeded."""

from __future__ import annotations

import os

import onnx

from onnxprobe.api.grad_plan import GradPlan, GradSpec, grad_plan
from onnxprobe.api.inputs import ModelLike, as_inputs
from onnxprobe.errors import SessionError
from onnxprobe.graph.select import Selection
from onnxprobe.runtime.runners.ort import OrtRunner
from onnxprobe.types import InputSpec, RunConfig


def _loads_in_onnxruntime(exported: onnx.ModelProto, forward: onnx.ModelProto) -> None:
    """A SessionError, before anything is written, where onnxruntime refuses to load the model to export
    (the runner's session): ``forward``'s own where it is refused too (the model the backward graph was built
    on, after any opset conversion: two nodes writing one tensor, a pool with strides 0), else one blaming
    the backward graph. The export wrote the file, then the run failed on it after a summary of success."""
    try:
        OrtRunner(exported, RunConfig(device="cpu")).session(exported)
    except SessionError as e:
        OrtRunner(forward, RunConfig(device="cpu")).session(forward)  # the model's own refusal, where it is one
        raise SessionError(f"onnxruntime refuses the backward graph onnxprobe built ({e}); nothing written. "
                           "This is a bug in onnxprobe: please report it") from e


def export_plan(model: ModelLike, spec: GradSpec | None = None, selection: Selection | None = None, inputs: InputSpec | None = None) -> GradPlan:
    """The plan whose ``backward.model`` ``export_backward`` writes, checked (onnxruntime loads it) and not
    written: ``grad --export`` builds it before its run and writes it (``write_export``) only once that run
    succeeded, so a model that loads and then fails to run leaves no OUT (an OUT already there stays as it was)."""
    gp = grad_plan(model, spec, selection, probe_inputs=as_inputs(inputs))
    m = gp.backward.model
    m.producer_name = m.producer_name or "onnxprobe"
    doc = f"onnxprobe backward graph: loss {gp.loss.kind} of {gp.loss.output}"
    m.doc_string = (m.doc_string + "\n" + doc) if m.doc_string else doc
    _loads_in_onnxruntime(m, gp.forward)
    return gp


def write_export(gp: GradPlan, out: str | os.PathLike) -> None:
    """Write an ``export_plan``'s model to ``out`` (atomically)."""
    from onnxprobe.graph.external import save_model

    save_model(gp.backward.model, out)


def export_backward(model: ModelLike, out: str | os.PathLike, spec: GradSpec | None = None,
                    selection: Selection | None = None, inputs: InputSpec | None = None) -> GradPlan:
    """Write the model with its backward graph: inputs = the model's inputs (+ target / labels / output
    gradient), outputs = the loss and the gradients (``<tensor>_grad``); weights stay initializers, dynamic
    dimensions dynamic. ``inputs`` (an InputSpec): the inputs of the run that tells the ranks inference
    missed (inside silero-vad's If branches, which its default 1-sample input cannot run)."""
    gp = export_plan(model, spec, selection, inputs)
    write_export(gp, out)
    return gp
