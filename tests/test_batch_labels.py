"""A failed batch's error names the batch once, from what the error says it names (``OnnxProbeError.about``,
``.batch``), never from its wording: a message that starts with the batch's words is labelled all the same."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from onnxprobe.api.datasets import labelled, relabel
from onnxprobe.errors import ExecutionError, UsageError
from onnxprobe.runtime.arrays import read_npz


def test_an_error_about_the_batch_file_is_not_labelled_twice(tmp_path):
    bad = tmp_path / "b.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(UsageError) as e:
        read_npz(bad)
    assert e.value.about == str(bad)
    assert labelled(e.value, "b.npz") == str(e.value).splitlines()[0]


def test_relabelled_errors_keep_their_label_across_pickling():
    r = relabel(ExecutionError("input x: wrong shape"), "b.npz")
    assert str(r) == "b.npz: input x: wrong shape"
    back = pickle.loads(pickle.dumps(r))  # Ray returns a batch's error pickled
    assert back.batch == "b.npz" and labelled(back, "b.npz") == str(r)


def test_words_that_look_like_the_label_are_not_read_as_it():
    assert labelled(UsageError("b.npz-like words"), "b.npz") == "b.npz: b.npz-like words"
    np.testing.assert_equal(relabel(UsageError("x"), "sample 3").exit_code, 2)
