"""A loaded model: the one object the API's workflows pass around.

``load(path)`` reads the model (and its external data) and annotates it with inferred shapes in place:
the ModelProto was read for this Model alone, so annotating it costs no copy of the weights. Passes that
rewrite a model (expose, mark, attach_backward...) copy it first and never touch ``Model.proto``.
"""

from __future__ import annotations

import os

import onnx

from onnxprobe.errors import UsageError
from onnxprobe.graph.extents import all_tensors
from onnxprobe.graph.io import check_graph, ir_notes, load_model
from onnxprobe.graph.shapes import annotate
from onnxprobe.text import clip, controls, quote
from onnxprobe.types import Model as LoadedModel


class Model(LoadedModel):
    """``types.Model`` (its fields: the model as read and annotated, its source, what loading had to say), and
    ``Model.of`` for an in-memory ModelProto."""

    @classmethod
    def of(cls, proto: onnx.ModelProto, source: str, warnings: list[str] | None = None) -> "Model":
        """A Model of an in-memory ModelProto (a copy, annotated with inferred shapes; a weight a lazy read left in its
        file, ``graph.weight_files``, read into the copy: a result's ``plan.base`` given back comes back whole)."""
        from onnxprobe.graph.weight_files import fill

        out = onnx.ModelProto()
        out.CopyFrom(proto)
        fill(out.graph.initializer)
        w = list(warnings or []) + ir_notes(out)
        annotate(out, w)
        return cls(out, source, w)


def load(path: str | os.PathLike, lazy: bool = False) -> Model:
    """Read a model and annotate it with inferred shapes (see the module docstring). ``lazy``: its big weights in
    external data files stay there (``graph.io.load_model``), for a command's own model that only onnxprobe and
    onnxruntime read."""
    proto = load_model(path, lazy=lazy)
    warnings = ir_notes(proto)
    annotate(proto, warnings)
    return Model(proto, str(path), warnings)


def check_loaded(proto: onnx.ModelProto, what: str = "model") -> None:
    """The checks a file gets when it is read (``graph.io.check_graph``: the same function, so that a proto
    is refused as its file is, one ModelError), and a UsageError for an in-memory model whose weights stayed
    in their external file (``onnx.load(..., load_external_data=False)``): where that file is, the proto does
    not say."""
    from onnxprobe.graph.skeleton import is_stub  # onnxprobe's own stubbed weights, filled from the model later

    # every tensor (Constant values, bodies' initializers, sparse tensors): onnxruntime, handed the proto as
    # bytes, read an external one relative to the working directory
    lacking = next((t.name for t in all_tensors(proto)
                    if t.data_location == onnx.TensorProto.EXTERNAL and not t.raw_data and not is_stub(t)), None)
    check_graph(proto, "<in-memory model>")
    if lacking is not None:
        raise UsageError(f"{what}: an onnx.ModelProto whose weights were not loaded (tensor {quote(lacking)} is in "
                         "an external data file): load it with onnx.load(path) (load_external_data=True), or give the path")


def as_model(model: "Model | str | os.PathLike | onnx.ModelProto", what: str = "model", lazy: bool = False) -> Model:
    """What every API function that takes a model accepts: a loaded Model (as it is), a path (loaded; ``lazy``: see
    ``load``), or an onnx.ModelProto (copied and annotated: ``Model.of``); anything else is one UsageError naming
    ``what`` (the argument) and what came."""
    if isinstance(model, Model):
        return model
    if isinstance(model, onnx.ModelProto):
        check_loaded(model, what)
        return Model.of(model, model.graph.name or "<in-memory model>")
    if isinstance(model, (str, os.PathLike)):
        return load(model, lazy)
    raise UsageError(f"{what}: expected a path, an api.Model or an onnx.ModelProto, "
                     f"got {type(model).__name__} {clip(controls(repr(model)), 40)}")
