"""Seeded random inputs, without onnx: the values ``runtime.feeds.make_feeds`` draws for an input of a dtype and
shape, and that a cached ``layers`` run (``runtime.direct``) draws again from its recipe, bit for bit."""

from __future__ import annotations

import numpy as np

from onnxprobe.errors import UsageError, setting_error, settings_error

FILES = ("files", "--input")  # an InputSpec's given values, as the API and the command line name them (runtime.feeds)


RANDOM_CHUNK = 1 << 22  # elements drawn at once for a float input


def int_bounds(dtype: np.dtype, int_range: tuple[int, int]) -> tuple[int, int]:
    """The [low, high) an integer input of ``dtype`` is drawn from: ``int_range`` within the values the dtype holds
    (a uint8 input given -5:300 gets [0, 256)); empty (low >= high) where none of them lies in it."""
    info = np.iinfo(dtype)
    return max(int_range[0], int(info.min)), min(int_range[1], int(info.max) + 1)


def random_array(shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator, int_range: tuple[int, int]) -> np.ndarray:
    if dtype.kind == "f" or dtype.name == "bfloat16":  # bfloat16: ml_dtypes' type, which onnx maps it to
        out = np.empty(shape, dtype)
        flat = out.reshape(-1)
        # drawn in float64 chunks (the values of one draw: the generator's stream is sequential), so that the
        # float64 draw never holds twice the input's float32 size (an 8 GiB input took 24 GiB)
        for i in range(0, flat.size, RANDOM_CHUNK):
            flat[i:i + RANDOM_CHUNK] = rng.random(min(RANDOM_CHUNK, flat.size - i), dtype=np.float64)
        return out
    if dtype.kind in "iu":
        lo, hi = int_bounds(dtype, int_range)
        if lo >= hi:
            raise setting_error(UsageError, ("int_range", "--int-range"), f"{int_range[0]}:{int_range[1]}: no value of dtype {dtype} lies in it")
        if hi > 2 ** 63:  # a uint64 range past int64's: drawn as uint64 ('high is out of bounds for int64' otherwise)
            return rng.integers(lo, hi, size=shape, dtype=np.uint64)
        return rng.integers(lo, hi, size=shape).astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind == "c":
        return (rng.random(shape) + 1j * rng.random(shape)).astype(dtype)
    raise settings_error(UsageError, lambda say: f"cannot make random data of dtype {dtype}; give this input with "
                         + say.either("an InputSpec's files or arrays", say.given(FILES, "NAME", "FILE")))


def draw(recipe: list[tuple[str, str, tuple[int, ...]]], seed: int, int_range: tuple[int, int]) -> dict[str, np.ndarray]:
    """The inputs ``make_feeds`` draws when every input is drawn: (name, numpy dtype, shape) in the model's input
    order, from one generator seeded with ``seed``."""
    rng = np.random.default_rng(seed)
    return {name: random_array(tuple(shape), np.dtype(dtype), rng, tuple(int_range)) for name, dtype, shape in recipe}
