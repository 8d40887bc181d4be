"""An .npz's onnxprobe.names map (entry -> tensor name, written by `layers --save`) that maps two entries to one
tensor kept whichever came last, silently (the diff's verdict turned on the entries' order); a map that is no JSON
object of names was ignored, and the entries were read under their stored names. Each is one line naming the file."""

from __future__ import annotations

import json

import numpy as np
import pytest

from onnxprobe.errors import UsageError
from onnxprobe.runtime.arrays import read_npz


def _npz(path, names, **arrays):
    np.savez(path, **arrays, **({"onnxprobe.names": np.array(names)} if names is not None else {}))
    return path


@pytest.mark.parametrize("order", [("logits", "t1_x"), ("t1_x", "logits")])
def test_two_entries_of_one_tensor_are_refused(tmp_path, order):
    arrays = {"logits": np.ones(3, np.float32), "t1_x": np.zeros(3, np.float32)}
    p = _npz(tmp_path / "c.npz", json.dumps({"t1_x": "logits"}), **{k: arrays[k] for k in order})
    with pytest.raises(UsageError, match=r"entries '.*' and '.*' both hold the tensor 'logits'"):
        read_npz(p)


@pytest.mark.parametrize("names", ["{not json", json.dumps(["a", "b"]), json.dumps({"t0": 5})])
def test_a_map_that_is_no_object_of_names_is_refused(tmp_path, names):
    p = _npz(tmp_path / "b.npz", names, t0=np.ones(2, np.float32))
    with pytest.raises(UsageError, match="is not a JSON object of names"):
        read_npz(p)


def test_a_good_map_names_the_tensors(tmp_path):
    p = _npz(tmp_path / "g.npz", json.dumps({"t0": "/a/b", "t1": "x"}), t0=np.ones(2, np.float32), t1=np.zeros(1, np.float32))
    got = read_npz(p)
    assert set(got) == {"/a/b", "x"} and got["/a/b"].tolist() == [1.0, 1.0]
