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


class _RaisingArray:
    """A user's object whose ``__array__`` raises something else than numpy's ValueError / TypeError."""

    def __array__(self, *args, **kwargs):
        raise RuntimeError("not today")


def test_an_object_whose_array_raises_is_one_usage_error_wherever_it_is_given():
    """Given as an input array it reached the user as the RuntimeError itself; yielded by inputs_from it was
    said (by a check of its own, now the same as_array): one UsageError naming where it was given, both."""
    with pytest.raises(UsageError, match=r"^input 'x' .*not an array \(RuntimeError\)"):
        api.layers(sample_path("mlp"), inputs=api.InputSpec(arrays={"x": _RaisingArray()}))

    def batches():
        yield {"x": _RaisingArray()}

    with pytest.raises(UsageError, match=r"^inputs_from .*: item 0, input 'x': not an array \(RuntimeError\)"):
        api.layers_dataset(sample_path("mlp"), inputs_from=batches)
    with pytest.raises(UsageError, match=r"^inputs_from .*: item 0, input 'x': not an array \(numpy: setting an array"):
        api.layers_dataset(sample_path("mlp"), inputs_from=lambda: iter([{"x": RAGGED}]))
