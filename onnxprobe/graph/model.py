"""A loaded model: the one object the API's workflows pass around.

``load(path)`` reads the model (and its external data) and annotates it with inferred shapes in place:
the ModelProto was read for this Model alone, so annotating it costs no copy of the weights. Passes that
rewrite a model (expose, mark, attach_backward...) copy it first and never touch ``Model.proto``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import onnx

from onnxprobe.graph.io import load_model
from onnxprobe.graph.shapes import annotate


@dataclass
class Model:
    """``proto``: the model as read, with shape inference's value_info filled in (nothing else changed);
    ``source``: the path (or a label); ``warnings``: what loading had to say (shape inference degraded...)."""

    proto: onnx.ModelProto
    source: str
    warnings: list[str] = field(default_factory=list)

    @property
    def inferred(self) -> onnx.ModelProto:
        """The annotated model (the same object as ``proto``)."""
        return self.proto

    @property
    def name(self) -> str:
        return os.path.basename(self.source)

    @classmethod
    def of(cls, proto: onnx.ModelProto, source: str, warnings: list[str] | None = None) -> "Model":
        """A Model of an in-memory ModelProto (a copy, annotated with inferred shapes)."""
        out = onnx.ModelProto()
        out.CopyFrom(proto)
        w = list(warnings or [])
        annotate(out, w)
        return cls(out, source, w)


def load(path: str | os.PathLike) -> Model:
    """Read a model and annotate it with inferred shapes (see the module docstring)."""
    proto = load_model(path)
    warnings: list[str] = []
    annotate(proto, warnings)
    return Model(proto, str(path), warnings)


def as_model(model: "Model | str | os.PathLike") -> Model:
    """A Model as it is, or loaded from a path: API functions take either."""
    return model if isinstance(model, Model) else load(model)
