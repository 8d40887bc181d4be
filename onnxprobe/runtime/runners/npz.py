"""Saved activations as a runner: values from an ``.npz`` keyed by tensor name (PyTorch hooks, another
runtime's dump), for ``diff --vs-npz``. It runs nothing, so it takes no inputs."""

from __future__ import annotations

import numpy as np

from onnxprobe.runtime.runners.base import Runner


class NpzRunner(Runner):
    kind = "npz"
    takes_feeds = False

    def __init__(self, arrays: dict[str, np.ndarray], label: str = ""):
        super().__init__(None, None, label)
        self.arrays = arrays

    def describe(self) -> str:
        return f"{self.label} (saved activations)"

    def facts(self) -> dict:
        return {**super().facts(), "device": None}  # nothing runs

    def unobservable(self, names: list[str]) -> dict[str, str]:
        return {n: "not in the .npz" for n in names if n not in self.arrays}

    def values(self, names: list[str], feeds: dict[str, np.ndarray], *, keep_on_device: bool = False) -> dict:
        return {n: np.asarray(self.arrays[n]) for n in names if n in self.arrays}
