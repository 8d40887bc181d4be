"""``diff``: compare a model with a reference, layer by layer."""

from __future__ import annotations

import os

import numpy as np

from onnxprobe.graph.select import Selection
from onnxprobe.runtime import feeds as _feeds
from onnxprobe.types import RunConfig

from onnxprobe.api.core import load, feeds


# --- diff: two sides on the same inputs ------------------------------------------------------------


def diff(
    a_path: str | os.PathLike,
    b_path: str | os.PathLike | None = None,
    *,
    vs_device: str | None = None,
    vs_opt_level: str | None = None,
    vs_reference: bool = False,
    vs_npz: str | os.PathLike | None = None,
    selection: Selection | None = None,
    config: RunConfig | None = None,
    tolerance=None,
    per_tensor: dict | None = None,
    user_map: dict[str, str] | None = None,
    seed: int = 0,
    int_range: tuple[int, int] = (0, 100),
    shapes: dict[str, tuple[int, ...]] | None = None,
    files: dict[str, str] | None = None,
    arrays: dict[str, np.ndarray] | None = None,
    introduced: bool = True,
    max_memory: int | None = None,
    progress=None,
    fp32_sensitivity: int = 0,
):
    """Compare model A against a reference B: another model, the same model on another device or
    optimisation level, onnx.reference, or saved activations. Returns a compare.diff.DiffResult."""
    from dataclasses import replace

    from onnxprobe.compare.diff import diff as _diff
    from onnxprobe.compare.sides import Side
    from onnxprobe.errors import UsageError
    from onnxprobe.stats.metrics import Tolerance

    modes = [b_path is not None, vs_device is not None, vs_opt_level is not None, vs_reference, vs_npz is not None]
    if sum(modes) != 1:
        raise UsageError("give exactly one reference: a second model B, --vs-device, --vs-opt-level, --vs-reference or --vs-npz")
    config = config or RunConfig()
    a_model = load(a_path)
    a = Side(str(a_path), a_model, "ort", config)
    if b_path is not None:
        b = Side(str(b_path), load(b_path), "ort", config)
    elif vs_device is not None:
        b = Side(str(a_path), a_model, "ort", replace(config, device=vs_device))
    elif vs_opt_level is not None:
        b = Side(str(a_path), a_model, "ort", replace(config, opt_level=vs_opt_level))
    elif vs_reference:
        b = Side(str(a_path), a_model, "reference", config)
    else:
        b = Side(str(vs_npz), a_model, "npz", config, npz=_feeds.read_npz(vs_npz))
    notes: list[str] = []
    feed = feeds(a_model, seed=seed, int_range=int_range, shapes=shapes, files=files, arrays=arrays, notes=notes)
    res = _diff(a, b, feed, selection or Selection(), tolerance or Tolerance(), per_tensor, user_map, introduced,
                max_memory=max_memory, progress=progress)
    res.notes[:0] = notes + list(a_model.warnings)
    if fp32_sensitivity:
        from onnxprobe.compare.sensitivity import fp32_sensitivity as sensitivity

        res.sensitivity = sensitivity(res, feed, fp32_sensitivity)
        if not res.sensitivity:
            res.notes.append("--fp32-sensitivity: no QDQ layer of A could be kept in fp32 (it needs a QDQ model A and a model B)")
    return res


