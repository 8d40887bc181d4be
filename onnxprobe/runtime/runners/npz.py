"""Saved activations as a runner: values from an ``.npz`` keyed by tensor name (PyTorch hooks, another
runtime's dump), for ``diff --vs-npz``. It runs nothing, so it takes no inputs."""

from __future__ import annotations

import os

import numpy as np

from onnxprobe.runtime.runners.base import Runner


def numeric(a) -> bool:
    """Whether saved values can be compared: numbers (strings or objects have no difference to measure),
    those of ml_dtypes' narrow types too (``narrow``)."""
    a = np.asarray(a)
    return a.dtype.kind in "biuf" or narrow(a.dtype)


def narrow(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is one of ml_dtypes' (bfloat16, float8, float4, int4: what onnx reads those
    TensorProtos as, from an ONNX test data set's output_N.pb): numbers, though numpy sees most as void."""
    return dtype.type.__module__.split(".")[0] == "ml_dtypes"


def as_numbers(a) -> np.ndarray:
    """Saved values as numpy computes with them: those of ml_dtypes' narrow types as float32, exactly (the
    same numbers, as onnxprobe reads every bfloat16 tensor back); others as they are."""
    a = np.asarray(a)
    return a.astype(np.float32) if narrow(a.dtype) else a


class NpzRunner(Runner):
    kind = "npz"
    takes_feeds = False

    def __init__(self, arrays: dict[str, np.ndarray], label: str = "", made_by: tuple | None = None,
                 from_file: bool = True):
        super().__init__(None, None, label)
        # what a tensor the arrays lack is said to be missing from: an .npz, a test data set's folder, or a dict
        self.missing = ("not in the activations given" if not from_file else
                        "not in the test data set" if os.path.isdir(label) else "not in the .npz")
        self.arrays = {k: as_numbers(v) for k, v in arrays.items()}
        # (runtime kind, device, float precision or None) that computed the values, where the archive says
        self.made_by = made_by

    def inference_precision(self) -> str | None:
        """The precision the values were computed in, where the archive says (``layers --save`` on OpenVINO: 'bf16')."""
        return self.made_by[2] if self.made_by else None

    def describe(self) -> str:
        return f"{self.label} (saved activations)"

    def facts(self) -> dict:
        return {**super().facts(), "device": None}  # nothing runs

    def unobservable(self, names: list[str]) -> dict[str, str]:
        out = {n: self.missing for n in names if n not in self.arrays}
        for n in names:
            if n in self.arrays and not numeric(self.arrays[n]):
                out[n] = f"saved as {np.asarray(self.arrays[n]).dtype} values, not numbers: not compared"
        return out

    def values(self, names: list[str], feeds: dict[str, np.ndarray], *, keep_on_device: bool = False) -> dict:
        return {n: np.asarray(self.arrays[n]) for n in names if n in self.arrays}
