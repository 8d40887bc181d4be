"""The ``onnx.reference.ReferenceEvaluator`` runner: onnx's own Python implementation of every op, slow
but independent of onnxruntime, for checking onnxruntime's kernels (``diff --vs-reference``)."""

from __future__ import annotations

import time

import numpy as np
import onnx

from onnxprobe.errors import ExecutionError, first_line
from onnxprobe.runtime.runners.base import GraphRunner


class ReferenceRunner(GraphRunner):
    kind = "onnx.reference"

    def describe(self) -> str:
        return f"{self.label} (onnx.reference)"

    def execute(self, model: onnx.ModelProto, feeds: dict, outputs: list[str], *, device_outputs: list[str] = (),
                keep_on_device: bool = False, key=None) -> tuple[dict, float]:
        from onnx.reference import ReferenceEvaluator

        names = list(dict.fromkeys(list(outputs) + list(device_outputs)))
        t0 = time.perf_counter()
        try:
            res = ReferenceEvaluator(model).run(names, {k: np.asarray(v) for k, v in feeds.items()})
        except Exception as e:  # noqa: BLE001 - the evaluator raises whatever an op implementation raises
            raise ExecutionError(f"onnx.reference could not run the model: {type(e).__name__}: {first_line(e)[:300]}") from e
        return {n: np.asarray(v) for n, v in zip(names, res)}, time.perf_counter() - t0
