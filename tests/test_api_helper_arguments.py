"""The low-level helpers api.__all__ offers failed deep inside on a wrong type: has_statistics(5) and
check_shape(5, ...) raised AttributeError, feed_digest(5) and raw_batches(model, 5) TypeError, and
histogram_of(5) and Executor(5) took it. Each is one UsageError naming the parameter and what it takes. QA."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import mm_relu_softmax
from onnxprobe import api


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    return mm_relu_softmax(tmp_path_factory.mktemp("helpers"))


def test_wrong_types_are_named(model):
    spec = api.model_inputs(model)[0]
    cases = [(lambda: api.has_statistics(5), r"^dtype: expected a numpy dtype.*got int 5$"),
             (lambda: api.has_statistics(None), r"^dtype: expected a numpy dtype"),
             (lambda: api.check_shape(5, (2, 3), "x"), r"^spec: expected an input of the model .*got int 5$"),
             (lambda: api.check_shape(spec, 5, "x"), r"^shape: expected a tuple of ints, got int 5$"),
             (lambda: api.check_shape(spec, (2, 3), 5), r"^what: expected what the shape is about"),
             (lambda: api.feed_digest(5), r"^arrays: expected a dict of input name -> numpy array, got int 5$"),
             (lambda: api.raw_batches(model, 5), r"^tensors: expected a list of \(name, shape or None, dtype or None\)"),
             (lambda: api.histogram_of(5), r"^values: expected an array of numbers .*got int 5$"),
             (lambda: api.Executor(5), r"^Executor engine: expected 'local' or 'ray', got int 5$"),
             (lambda: api.Executor(workers=0), r"^Executor workers: expected a positive int, got int 0$")]
    for call, said in cases:
        with pytest.raises(api.UsageError, match=said):
            call()


def test_right_values_still_work(model):
    spec = api.model_inputs(model)[0]
    assert api.has_statistics(np.dtype(np.float32)) and api.has_statistics("int8") and not api.has_statistics(np.dtype("U3"))
    assert api.check_shape(spec, (2, 3), "x") == (2, 3) and api.check_shape(spec, [2, 3], ("shapes", "--shape", "x")) == (2, 3)
    with pytest.raises(api.UsageError, match=r"dimension 1 is fixed to 3 in the model, got 4"):
        api.check_shape(spec, (2, 4), ("shapes", "--shape", "x"))
    a = {"x": np.ones((2, 3), np.float32)}
    assert api.feed_digest(a) == api.feed_digest({"x": np.ones((2, 3), np.float32)}) != api.feed_digest({"x": np.zeros((2, 3), np.float32)})
    assert api.raw_batches([("a", (2, 3), "float32"), ("b", None, None)], 2**20) == [["a", "b"]]
    assert sum(api.histogram_of([1.0, 2.0, 3.0])["values"]["counts"]) == 3
    e = api.Executor("ray", 2)
    assert e.to_dict() == {"engine": "ray", "workers": 2}


def test_a_path_that_is_not_one_is_shown_as_python_writes_it(tmp_path):
    """api.html(d, 5) and api.merge_stats([5]) said "expected a file path, got int '5'": quoted as if a name."""
    with pytest.raises(api.UsageError, match=r"reports\[0\]: expected a report path, a dict or a dataset result, got int 5$"):
        api.merge_stats([5])
    with pytest.raises(api.UsageError, match=r"output path: expected a file path, got NoneType None$"):
        api.save_npz({"a": np.zeros(2)}, None)
    with pytest.raises(api.UsageError, match=r"expected a file path, got bytes b'r\.npz'$"):
        api.save_npz({"a": np.zeros(2)}, b"r.npz")


def test_feed_digest_takes_the_numpy_scalars_a_zero_d_input_is_read_as():
    """The debugger digests its feeds through api.feed_digest: a 0-d input read from an .npz (np.bool_,
    np.int64) was refused as no array, so `inputs all.npz` failed on any model with a scalar input."""
    assert api.feed_digest({"c": np.bool_(False)}) != api.feed_digest({"c": np.bool_(True)})
    assert api.feed_digest({"n": np.int64(2)}) == api.feed_digest({"n": np.int64(2)})
