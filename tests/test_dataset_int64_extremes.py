"""``layers --inputs-dir`` with int64 extremes: a batch summarised in the graph (a tensor too big for the host
path: its extremes come back through float64) gave min and max as floats (9.223372036854775e+18 for
2^63 - 1), where a batch summarised on the host and merge-stats of the same batches as shards give the
exact ints; a dataset of both mixed an exact int min with a float max. Now the dataset's int64 statistics
are the exact ones of the values its histograms are made from, whichever way a batch was summarised. QA.

Oracle: numpy's int64 min and max of all the batches, as Python ints."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from onnxprobe import api

I = np.iinfo(np.int64)


def _setup(tmp_path):
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["n"], name="id0"), helper.make_node("Identity", ["n"], ["y"], name="id")],
                          "g", [helper.make_tensor_value_info("x", TensorProto.INT64, ["N"])],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, ["N"])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "m.onnx")
    big = np.arange(100_000, dtype=np.int64) * 3  # past the host path's size: summarised in the graph
    big[7] = I.max - 2
    small = np.array([I.min + 1, 5, -3], np.int64)
    batches = {"b0": big, "b1": small}
    (tmp_path / "all").mkdir()
    for k, v in batches.items():  # each batch a dataset of its own (a shard), and both in one
        (tmp_path / k).mkdir()
        np.savez(tmp_path / k / f"{k}.npz", x=v)
        np.savez(tmp_path / "all" / f"{k}.npz", x=v)
    return tmp_path / "m.onnx", batches


def test_int64_extremes_are_exact_ints_whichever_way_a_batch_was_summarised(tmp_path):
    model, batches = _setup(tmp_path)
    lo, hi = (int(f(np.concatenate(list(batches.values())))) for f in (np.min, np.max))
    sel = api.Selection(all=True)
    whole = api.report(api.layers_dataset(model, tmp_path / "all", selection=sel, config=api.RunConfig(device="cpu")))
    shards = [api.layers_dataset(model, tmp_path / k, selection=sel, config=api.RunConfig(device="cpu")) for k in batches]
    merged = api.merge_stats(shards)
    for d in (whole, merged):
        for t in d["tensors"]:
            assert (t["min"], t["max"]) == (lo, hi) and type(t["min"]) is int and type(t["max"]) is int, (t["name"], t["min"], t["max"])
    # each shard alone too: the big one was summarised in the graph
    big = api.report(shards[0])
    assert all(type(t["max"]) is int and t["max"] == hi for t in big["tensors"]), big["tensors"]
