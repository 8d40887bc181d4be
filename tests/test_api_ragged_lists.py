"""A ragged nested list where the API takes an array (an input, a GradSpec's target, labels or output gradient,
histogram_of's values) reached the user as numpy's bare ValueError ("setting an array element with a sequence"); it
is one UsageError naming the argument, as api.layers_dataset's inputs_from already said it."""

from __future__ import annotations

import pytest

from conftest import sample_path
from onnxprobe import api
from onnxprobe.errors import UsageError

RAGGED = [[1.0, 2.0], [3.0]]


@pytest.mark.parametrize("call, named", [
    (lambda: api.layers(sample_path("mlp"), inputs={"x": RAGGED}), "input 'x'"),
    (lambda: api.InputSpec(arrays={"x": RAGGED}) and api.layers(sample_path("mlp"), inputs=api.InputSpec(arrays={"x": RAGGED})),
     "input 'x'"),
    (lambda: api.GradSpec(loss="mse", target=RAGGED), "GradSpec target"),
    (lambda: api.GradSpec(loss="cross-entropy", labels=RAGGED), "GradSpec labels"),
    (lambda: api.GradSpec(output_grad=RAGGED), "GradSpec output_grad"),
    (lambda: api.histogram_of(RAGGED), "values"),
])
def test_a_ragged_list_is_one_usage_error(call, named):
    with pytest.raises(UsageError) as e:
        call()
    assert str(e.value).startswith(f"{named}") and "not an array" in str(e.value), str(e.value)
