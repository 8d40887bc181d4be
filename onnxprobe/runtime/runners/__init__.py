"""One runner class per backend behind one interface (``base.Runner``): ``OrtRunner`` (onnxruntime, CPU or
CUDA), ``ReferenceRunner`` (onnx.reference), ``NpzRunner`` (saved activations). ``make_runner`` picks
one by name, so the commands never switch on a backend themselves."""

from __future__ import annotations

import onnx

from onnxprobe.errors import UsageError
from onnxprobe.types import RunConfig

RUNTIMES = ("ort", "reference")


def make_runner(runtime: str, model: onnx.ModelProto, config: RunConfig | None = None, label: str = "", **kw):
    """The runner for ``runtime`` (``ort`` | ``reference``) over ``model``."""
    if runtime == "ort":
        from onnxprobe.runtime.runners.ort import OrtRunner

        return OrtRunner(model, config, label, **kw)
    if runtime == "reference":
        from onnxprobe.runtime.runners.reference import ReferenceRunner

        return ReferenceRunner(model, config, label)
    raise UsageError(f"--runtime {runtime!r}: choose one of {', '.join(RUNTIMES)}")
