"""Model inputs: seeded random data from the model's own input types, or files.

- ``input_specs(model)`` lists the real inputs (initializers listed as inputs by IR < 4 models are not).
- ``parse_shape_overrides(["x=1x3x224x224"])`` fixes dynamic dimensions.
- ``make_feeds(...)`` builds one feed dict: files first (``.npy``, ONNX TensorProto ``.pb``, ``.npz``),
  seeded random data for the rest; every value is checked against the model's dtype and shape.
  Unknown dimensions default to 1, and each default is reported in ``notes``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import onnx
from onnx import numpy_helper

from onnxprobe.errors import UsageError, first_line
from onnxprobe.graph.shapes import static_shape


@dataclass(frozen=True)
class InputSpec:
    name: str
    elem_type: int
    shape: tuple | None  # ints, symbolic names or None; None: unknown rank

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(self.elem_type))

    def describe(self) -> str:
        dims = "?" if self.shape is None else "x".join(str(d) if d is not None else "?" for d in self.shape) or "scalar"
        return f"{self.name} {self.dtype} [{dims}]"


def input_specs(model: onnx.ModelProto) -> list[InputSpec]:
    inits = {i.name for i in model.graph.initializer}
    specs = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        specs.append(InputSpec(vi.name, tt.elem_type, static_shape(vi.type)))
    return specs


def parse_shape_overrides(items: list[str] | None) -> dict[str, tuple[int, ...]]:
    out: dict[str, tuple[int, ...]] = {}
    for item in items or []:
        name, sep, dims = item.rpartition("=")
        if not sep or not name:
            raise UsageError(f"--shape {item!r}: expected NAME=DIMS, e.g. image=1x3x224x224")
        try:
            shape = tuple(int(d) for d in dims.replace(",", "x").split("x")) if dims.strip() else ()
        except ValueError:
            raise UsageError(f"--shape {item!r}: dimensions must be integers separated by 'x', e.g. 1x3x224x224") from None
        if any(d < 0 for d in shape):
            raise UsageError(f"--shape {item!r}: dimensions must be non-negative")
        out[name] = shape
    return out


def parse_input_files(items: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"--input {item!r}: expected NAME=FILE (.npy or .pb) or NAME=VALUE (a number or JSON list)")
        out[name] = path
    return out


def _literal(text: str) -> np.ndarray | None:
    """``16000``, ``0.5``, ``[1, 2, 3]``, ``true``: a value given on the command line instead of a file."""
    if Path(text).exists():
        return None
    try:
        v = json.loads(text)
    except ValueError:
        return None
    if isinstance(v, (bool, int, float, list)):
        return np.array(v)
    return None


def read_array(path: str | Path) -> np.ndarray:
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{p}: no such input file")
    try:
        if p.suffix == ".npy":
            return np.load(p, allow_pickle=False)
        if p.suffix == ".pb":
            t = onnx.TensorProto()
            t.ParseFromString(p.read_bytes())
            return numpy_helper.to_array(t)
    except Exception as e:  # noqa: BLE001
        raise UsageError(f"{p}: cannot read as {p.suffix} tensor ({first_line(e)})") from e
    raise UsageError(f"{p}: unsupported input file type {p.suffix!r} (use .npy, .pb or --inputs FILE.npz)")


def read_npz(path: str | Path) -> dict[str, np.ndarray]:
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{p}: no such inputs file")
    try:
        with np.load(p, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except Exception as e:  # noqa: BLE001
        raise UsageError(f"{p}: not a readable .npz file") from e


def _resolve_shape(spec: InputSpec, override: tuple[int, ...] | None, dim_values: dict[str, int], notes: list[str]) -> tuple[int, ...]:
    if override is not None:
        if spec.shape is not None and len(override) != len(spec.shape):
            raise UsageError(f"--shape {spec.name}: {len(override)} dimensions given, the model expects {len(spec.shape)} ({spec.describe()})")
        for i, (want, got) in enumerate(zip(spec.shape or (), override)):
            if isinstance(want, int) and want != got:
                raise UsageError(f"--shape {spec.name}: dimension {i} is fixed to {want} in the model, got {got}")
            if isinstance(want, str):
                dim_values.setdefault(want, got)
        return override
    if spec.shape is None:
        notes.append(f"input {spec.name}: rank unknown, using a scalar (use --shape {spec.name}=...)")
        return ()
    dims = []
    for i, d in enumerate(spec.shape):
        if isinstance(d, int) and d > 0:
            dims.append(d)
        elif isinstance(d, str) and d in dim_values:
            dims.append(dim_values[d])
        else:
            label = f"'{d}'" if isinstance(d, str) else f"{i}"
            notes.append(f"input {spec.name}: dimension {label} unknown, set to 1 (use --shape {spec.name}=...)")
            if isinstance(d, str):
                dim_values[d] = 1
            dims.append(1)
    return tuple(dims)


def random_array(shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator, int_range: tuple[int, int]) -> np.ndarray:
    if dtype.kind == "f":
        return rng.random(shape, dtype=np.float64).astype(dtype)
    if dtype.kind in "iu":
        lo, hi = int_range
        info = np.iinfo(dtype)
        return rng.integers(max(lo, info.min), min(hi, int(info.max) + 1), size=shape).astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind == "c":
        return (rng.random(shape) + 1j * rng.random(shape)).astype(dtype)
    raise UsageError(f"cannot make random data of dtype {dtype}; give this input with --input NAME=FILE")


def check_value(spec: InputSpec, value: np.ndarray, origin: str) -> np.ndarray:
    value = np.asarray(value)
    if value.dtype != spec.dtype:
        raise UsageError(f"input {spec.name} ({origin}): dtype {value.dtype}, the model expects {spec.dtype}")
    if spec.shape is not None:
        if value.ndim != len(spec.shape):
            raise UsageError(f"input {spec.name} ({origin}): shape {list(value.shape)} has rank {value.ndim}, the model expects {spec.describe()}")
        for i, (want, got) in enumerate(zip(spec.shape, value.shape)):
            if isinstance(want, int) and want > 0 and want != got:
                raise UsageError(f"input {spec.name} ({origin}): shape {list(value.shape)}, but dimension {i} must be {want} ({spec.describe()})")
    return value


def make_feeds(
    model: onnx.ModelProto,
    *,
    seed: int = 0,
    int_range: tuple[int, int] = (0, 100),
    shapes: dict[str, tuple[int, ...]] | None = None,
    files: dict[str, str] | None = None,
    arrays: dict[str, np.ndarray] | None = None,
    notes: list[str] | None = None,
) -> dict[str, np.ndarray]:
    notes = notes if notes is not None else []
    specs = input_specs(model)
    by_name = {s.name: s for s in specs}
    expected = ", ".join(s.describe() for s in specs) or "none"
    given: dict[str, tuple[np.ndarray, str]] = {}
    for name, value in (arrays or {}).items():
        given[name] = (value, "from --inputs")
    for name in list(files or {}) + list(arrays or {}) + list(shapes or {}):
        if name not in by_name:
            raise UsageError(f"unknown input name {name!r}; the model's inputs are: {expected}")
    for name, path in (files or {}).items():
        literal = _literal(path)
        if literal is not None:  # NAME=VALUE: a literal takes the model's dtype
            given[name] = (literal.astype(by_name[name].dtype), f"value {path}")
        else:
            given[name] = (read_array(path), path)
    if int_range[0] >= int_range[1]:
        raise UsageError(f"--int-range {int_range[0]}:{int_range[1]}: LOW must be below HIGH")
    rng = np.random.default_rng(seed)
    dim_values: dict[str, int] = {}
    feeds: dict[str, np.ndarray] = {}
    for spec in specs:  # given values first, so their sizes name the symbolic dims
        if spec.name in given:
            value, origin = given[spec.name]
            feeds[spec.name] = check_value(spec, value, origin)
            for d, got in zip(spec.shape or (), feeds[spec.name].shape):
                if isinstance(d, str):
                    dim_values.setdefault(d, got)
        elif spec.name in (shapes or {}):
            for d, got in zip(spec.shape or (), shapes[spec.name]):
                if isinstance(d, str):
                    dim_values.setdefault(d, got)
    for spec in specs:
        if spec.name in feeds:
            continue
        shape = _resolve_shape(spec, (shapes or {}).get(spec.name), dim_values, notes)
        feeds[spec.name] = random_array(shape, spec.dtype, rng, int_range)
    return {s.name: feeds[s.name] for s in specs}


def dataset_samples(path: str | Path, specs: list[InputSpec]) -> tuple[int, "Iterator[tuple[str, dict[str, np.ndarray]]]"]:
    """Batches for dataset mode: a folder of .npz files (one batch each, sorted by name), or one .npz
    whose arrays have a leading sample axis (an array of the input's own rank is split along its first
    axis instead, one batch of 1 per row). Returns (number of batches, iterator of (label, feeds))."""
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.suffix == ".npz")
        if not files:
            raise UsageError(f"--inputs-dir {p}: no .npz files in this folder")

        def from_files():
            for f in files:
                yield f.name, read_npz(f)

        return len(files), from_files()
    if p.suffix == ".npz" and p.is_file():
        arrays = read_npz(p)
        by_name = {s.name: s for s in specs}
        n = None
        for name, a in arrays.items():
            if name not in by_name:
                raise UsageError(f"--inputs-dir {p}: unknown input name {name!r}")
            k = a.shape[0] if a.ndim else 0
            if n is not None and k != n:
                raise UsageError(f"--inputs-dir {p}: arrays disagree on the number of samples ({n} vs {k} for {name})")
            n = k
        if not n:
            raise UsageError(f"--inputs-dir {p}: no samples (arrays need a leading sample axis)")

        def rows():
            for i in range(n):
                feed = {}
                for name, a in arrays.items():
                    rank = len(by_name[name].shape) if by_name[name].shape is not None else a.ndim - 1
                    feed[name] = a[i] if a.ndim == rank + 1 else a[i:i + 1]
                yield f"sample {i}", feed

        return n, rows()
    raise UsageError(f"--inputs-dir {p}: expected a folder of .npz files or one .npz with a leading sample axis")
