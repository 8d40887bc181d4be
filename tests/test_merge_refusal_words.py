"""``merge-stats`` of shards run otherwise: the refusal names the setting that differs and its two values as JSON writes
them. Two diff shards at --opt-level off and all were refused with two 200-character Python reprs of their ``sides``
(``None`` for null), the opt level nowhere named; a layers shard's precision read 'None'."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import SAMPLES
from onnxprobe import api
from onnxprobe.errors import UsageError


def _shard(tmp_path, name: str, level: str) -> dict:
    d = tmp_path / name
    d.mkdir()
    np.savez(d / "b.npz", x=np.ones((4, 16), np.float32))
    res = api.diff_dataset(str(SAMPLES / "mlp.onnx"), str(SAMPLES / "mlp.onnx"), str(d), config=api.RunConfig(device="cpu", opt_level=level))
    return api.report(res)


def test_diff_shards_at_other_opt_levels_are_refused_naming_the_opt_level(tmp_path):
    s0, s1 = _shard(tmp_path, "s0", "off"), _shard(tmp_path, "s1", "all")
    with pytest.raises(UsageError) as e:
        api.merge_stats([s0, s1])
    msg = str(e.value)
    assert "another opt level" in msg and 'A and B: opt_level "all" vs "off"' in msg and "None" not in msg and "\n" not in msg


def test_a_layers_shard_of_another_precision_says_null_not_none(tmp_path):
    d = tmp_path / "ds"
    d.mkdir()
    np.savez(d / "b.npz", x=np.ones((4, 16), np.float32))
    r0 = api.report(api.layers_dataset(str(SAMPLES / "mlp.onnx"), str(d)))
    r1 = {**r0, "precision": "bf16"}
    with pytest.raises(UsageError) as e:
        api.merge_stats([r0, r1])
    msg = str(e.value)
    assert "another floating-point precision" in msg and 'precision "bf16" vs null' in msg and "None" not in msg
