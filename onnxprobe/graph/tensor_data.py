"""Whether a tensor the model holds is whole: of a data type onnx knows, and holding as many values as its
dims call for (``data_problem``), and its values read so (``tensor_values``). A damaged weight (a typed
field of 2 values for dims [2, 3], raw_data of 3 bytes for a float32 [2, 3]) was read by numpy deep inside
matching or autodiff: 'internal error: cannot reshape array of size 2 into shape (2,3)'. The loader checks
the typed fields, whose length protobuf knows without copying (``graph.io.check_graph``); raw_data, which
Python copies on each access (1.3 s per GB), is checked where it is read anyway (``tensor_values``).
External data is ``graph.extents``' job; a weight left in its external data file (``graph.weight_files.leave``) is
read from there (``tensor_values``).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from onnxprobe.errors import ModelError
from onnxprobe.graph.extents import dims_nbytes, is_external
from onnxprobe.graph.weight_files import data, is_left
from onnxprobe.text import quote
from onnxprobe.types import element_count

# the typed field of each data type, and how many of its entries one value takes (complex: 2)
_FIELDS = {TensorProto.FLOAT: ("float_data", 1), TensorProto.COMPLEX64: ("float_data", 2),
           TensorProto.DOUBLE: ("double_data", 1), TensorProto.COMPLEX128: ("double_data", 2),
           TensorProto.INT64: ("int64_data", 1), TensorProto.UINT32: ("uint64_data", 1),
           TensorProto.UINT64: ("uint64_data", 1), TensorProto.STRING: ("string_data", 1)}
for _t in ("INT32", "INT16", "INT8", "UINT16", "UINT8", "BOOL", "FLOAT16", "BFLOAT16", "FLOAT8E4M3FN",
           "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "FLOAT8E8M0"):
    if hasattr(TensorProto, _t):
        _FIELDS[getattr(TensorProto, _t)] = ("int32_data", 1)
_PACKED = {getattr(TensorProto, k) for k in ("INT4", "UINT4", "FLOAT4E2M1", "INT2", "UINT2", "FLOAT6E2M3", "FLOAT6E3M2")
           if hasattr(TensorProto, k)}  # several values to an entry or a byte: only an empty one is told apart


def known_type(data_type: int) -> bool:
    return data_type in _FIELDS or data_type in _PACKED


def data_problem(t: TensorProto, *, raw: bool = True) -> str | None:
    """Why ``t`` is no whole tensor (None: it is, or its data lies in an external file): its data type, or
    the values it holds against those its dims need. ``raw=False`` leaves raw_data's length unchecked."""
    if not known_type(t.data_type):
        why = "UNDEFINED" if t.data_type == 0 else f"which onnx {onnx.__version__} does not know"
        return f"has data type {t.data_type} ({why})"
    if is_external(t) or t.HasField("segment") or is_left(t):
        return None
    need = element_count(t.dims) or 0
    if t.HasField("raw_data"):
        if not raw or t.data_type in _PACKED and not need:
            return None
        if t.data_type == TensorProto.STRING:
            return "is a string tensor stored as raw_data, which strings cannot be"
        want, got = dims_nbytes(t), len(t.raw_data)
        if t.data_type not in _PACKED and got != want or t.data_type in _PACKED and got == 0:
            return f"holds {got} bytes, and its dims {list(t.dims)} need {want}"
        return None
    field, per = _FIELDS.get(t.data_type, ("int32_data", 0))
    got = len(getattr(t, field))
    if per == 0:  # packed: entries hold several values
        return f"holds no values, and its dims {list(t.dims)} need {need}" if need and not got else None
    if got != need * per:
        return f"holds {got} entries in {field}, and its dims {list(t.dims)} need {need * per}"
    return None


def check_tensor(t: TensorProto, where: str = "", *, raw: bool = True) -> None:
    """A ModelError naming ``t`` (and ``where``: the model file) when ``data_problem`` finds one."""
    why = data_problem(t, raw=raw)
    if why is not None:
        raise ModelError(f"{where + ': ' if where else ''}tensor {quote(t.name)} {why}: a broken model")


def tensor_values(t: TensorProto, *, check: bool = True) -> np.ndarray:
    """``numpy_helper.to_array(t)``, a damaged tensor refused by name first (``check_tensor``; ``check`` False: not
    checked, for a caller that has, or a small value of the model's), a weight left in its file read there."""
    if is_left(t):
        whole = TensorProto(name=t.name, data_type=t.data_type, dims=t.dims, raw_data=data(t))
        return numpy_helper.to_array(whole)
    if check:
        check_tensor(t)
    return numpy_helper.to_array(t)


def to_array(t: TensorProto) -> np.ndarray:
    """``numpy_helper.to_array(t)`` for any tensor of a model, a weight left in its file read there (unchecked:
    ``tensor_values`` checks first). onnxprobe reads a model's values through this or ``tensor_values``, never
    numpy_helper's own, which reads a left weight as no data."""
    return tensor_values(t, check=False)


def tensor_bytes(t: TensorProto) -> bytes:
    """``t``'s values as raw_data lays them out: raw_data itself, a weight left in its file read there (no numpy
    copy of it), typed fields (float_data...) converted."""
    if t.HasField("raw_data"):
        return t.raw_data
    if is_left(t):
        return data(t)
    return numpy_helper.to_array(t).tobytes()


def array_digest(a: np.ndarray) -> tuple:
    """The key of ``a``'s exact values: its shape, dtype and a hash of its bytes (C order), for finding arrays of
    the very same values by a dict lookup."""
    import hashlib  # here: layers, which reads arrays through this module, loads no OpenSSL (tests/test_architecture.py)

    a = np.ascontiguousarray(a)
    return a.shape, a.dtype.str, hashlib.blake2b(a.tobytes(), digest_size=16).digest()
