"""api.merge_stats from a notebook: the dataset results of api.layers_dataset and api.diff_dataset merge as
the reports `--json` writes of them do, and pool to numpy float64 over the concatenated samples."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import sample_path
from onnxprobe import api
from onnxprobe.errors import UsageError
from onnxprobe.report.io import json_default
from onnxprobe.report.layers import dataset_dict

MLP = str(sample_path("mlp"))


def _shards(tmp_path):
    rng = np.random.default_rng(0)
    m = api.load(MLP)
    (name,) = [i.name for i in m.proto.graph.input]
    dims = [d.dim_value or 2 for d in m.proto.graph.input[0].type.tensor_type.shape.dim]
    folders = []
    for k in range(2):
        d = tmp_path / f"w{k}"
        d.mkdir()
        for j in range(2):
            api.save_npz({name: (1000.0 * k + rng.standard_normal(dims)).astype(np.float32)}, d / f"b{j}.npz")
        folders.append(d)
    return folders


def test_layers_dataset_results_merge_as_their_reports(tmp_path):
    w0, w1 = _shards(tmp_path)
    sel = api.Selection(all=True)
    r0, r1 = api.layers_dataset(MLP, w0, sel), api.layers_dataset(MLP, w1, sel)
    merged = api.merge_stats([r0, r1])
    as_json = [json.loads(json.dumps(dataset_dict(r), default=json_default)) for r in (r0, r1)]
    want = api.merge_stats(as_json)
    assert merged["batches"] == 4
    assert [t["moments"] for t in merged["tensors"]] == [t["moments"] for t in want["tensors"]]
    # and what they pool is numpy float64 over the four batches' outputs, computed here by onnxruntime
    import onnxruntime as ort

    sess = ort.InferenceSession(MLP, providers=["CPUExecutionProvider"])
    out = sess.get_outputs()[0].name
    ys = np.concatenate([sess.run([out], dict(np.load(f)))[0].ravel() for w in (w0, w1) for f in sorted(w.glob("*.npz"))])
    (t,) = [t for t in merged["tensors"] if t["name"] == out]
    y = ys.astype(np.float64)
    assert t["count"] == y.size and t["min"] == y.min() and t["max"] == y.max()
    assert t["mean"] == pytest.approx(y.mean(), rel=1e-6) and t["std"] == pytest.approx(y.std(), rel=1e-6)


def test_diff_dataset_results_merge_as_their_reports(tmp_path):
    from onnxprobe.report.diff_dataset import diff_dataset_dict

    w0, w1 = _shards(tmp_path)
    d0 = api.diff_dataset(MLP, inputs=w0, vs_reference=True)
    d1 = api.diff_dataset(MLP, inputs=w1, vs_reference=True)
    merged = api.merge_stats([d0, d1])
    want = api.merge_stats([json.loads(json.dumps(diff_dataset_dict(d), default=json_default)) for d in (d0, d1)])
    assert merged["samples"] == 4
    assert [p["sums"] for p in merged["pairs"]] == [p["sums"] for p in want["pairs"]]


def test_a_one_input_result_is_refused_in_one_line(tmp_path):
    res = api.layers(MLP)
    with pytest.raises(UsageError, match="dataset") as e:
        api.merge_stats([res])
    assert "\n" not in str(e.value)
    one = api.diff(MLP, vs_reference=True)
    with pytest.raises(UsageError, match="dataset") as e:
        api.merge_stats([one])
    assert "\n" not in str(e.value)
