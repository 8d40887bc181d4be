"""Reading arrays that users give: ``.npy``, ONNX TensorProto ``.pb``, ``.npz`` and literal values.

Sizes are checked from the headers before anything is allocated or decompressed: an array that would
need more memory than is available (or that a small file merely declares) is refused with one line that
names the size. numpy's own readers then read what passed.
"""

from __future__ import annotations

import json
import math
import zipfile
from pathlib import Path

import numpy as np
import onnx

from onnxprobe.errors import UsageError, Voice, error_about, first_line, settings_error
from onnxprobe.fileio import checked_path, input_file, protect
from onnxprobe.graph.tensor_data import to_array
from onnxprobe.text import clean, clip, human_bytes, quote


def as_array(value, what, within: str = "") -> np.ndarray:
    """``np.asarray(value)``, or one UsageError about ``what`` (text, a setting or ``what(voice)``, as
    ``errors.error_about`` takes it; ``within``: the part of it the value is, ": item 2, input 'x'") where numpy
    makes no array of it: a ragged nested list (numpy's own "setting an array element with a sequence" reached the
    user bare), or a user's object whose ``__array__`` raises."""
    try:
        return np.asarray(value)
    except Exception as e:  # noqa: BLE001 - a value of any type, its __array__ the user's code
        numpy = f"numpy: {first_line(e).split('. ')[0][:100]}" if isinstance(e, (ValueError, TypeError)) else type(e).__name__
        raise error_about(UsageError, what, f"{within}: not an array ({numpy}); give a numpy array, or a nested list whose "
                          "rows are all of one length") from None


def available_memory() -> int:
    """Bytes of memory available now (MemAvailable on Linux; 8 GiB where that cannot be read)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:  # pragma: no cover - not Linux
        pass
    return 8 * 2**30


def check_fits(nbytes: int, what) -> None:
    """Refuse ``nbytes`` when it exceeds the memory available now; ``what``: what needs it (or ``what(voice)``)."""
    avail = available_memory()
    if nbytes > avail:
        raise settings_error(UsageError, lambda say: f"{_said(what, say)} needs {human_bytes(nbytes)}, more than the "
                             f"{human_bytes(avail)} of memory available")


def _said(what, say: Voice) -> str:
    """``what``: text, or words said by ``say`` (``what(say)``: an input file named as given, "--input x=a.npy")."""
    return what(say) if callable(what) else what


def _npy_header(f) -> tuple[tuple[int, ...], np.dtype]:
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(f)
    else:
        shape, _, dtype = np.lib.format.read_array_header_2_0(f)
    return tuple(shape), np.dtype(dtype)


def _check_header(shape: tuple[int, ...], dtype: np.dtype, what) -> None:
    """``what``: the file, as text or as ``what(voice)`` (``_said``)."""
    if dtype.hasobject:
        raise settings_error(UsageError, lambda say: f"{_said(what, say)}: holds Python objects (pickled data is never loaded)")
    check_fits(int(np.prod(shape, dtype=object)) * dtype.itemsize, lambda say: f"{_said(what, say)} ({dtype} {list(shape)})")


def read_array(path: str | Path, flag: str | tuple[str, str] = "", name: str | None = None) -> np.ndarray:
    """A tensor from a ``.npy`` or ``.pb`` file; ``flag``: the one that named it (or the setting, (API parameter,
    flag)), said first where it is no file. ``name``: the input it is given for, with a setting ``flag``: every
    refusal then names the input and the file as the reader gave them ("--input x=a.npy", the debugger's
    "input x a.npy", the API's "files (--input) x=a.npy")."""
    def about(voice: Voice, shown: str) -> str:
        return voice.given(flag, clean(name), shown) if isinstance(flag, tuple) else f"{flag} {shown}"

    p = input_file(path, "input file", about if name is not None and flag else flag)

    def what(voice: Voice) -> str:  # the file, as the refusals below name it
        return about(voice, clean(p)) if name is not None and flag else clean(p)
    protect(p, "an input file")
    try:
        if p.suffix == ".npy":
            with open(p, "rb") as f:
                shape, dtype = _npy_header(f)
                header = f.tell()
            _check_header(shape, dtype, what)
            declared = int(np.prod(shape, dtype=object)) * dtype.itemsize
            if declared > p.stat().st_size - header:
                raise settings_error(UsageError, lambda say: f"{what(say)}: declares {human_bytes(declared)} ({dtype} {list(shape)}) "
                                     f"but holds {human_bytes(max(p.stat().st_size - header, 0))}: truncated or not what it claims")
            return np.load(p, allow_pickle=False)
        if p.suffix == ".pb":
            return _pb_array(p, what=what)
    except UsageError:
        raise
    except Exception as e:  # noqa: BLE001 - numpy and protobuf raise many kinds
        why = clean(first_line(e))
        raise settings_error(UsageError, lambda say: f"{what(say)}: cannot read as {p.suffix} tensor ({why})") from e
    # a model input (--input, or no flag said) may also come from an .npz of all inputs (--inputs); a --target
    # or --labels file may not
    named = flag[-1] if isinstance(flag, tuple) else flag

    def say(voice: Voice) -> str:
        use = f".npy, .pb or {voice.flag('--inputs')} FILE.npz" if named in ("", "--input") else ".npy or .pb"
        if name is not None and flag:
            return f"{what(voice)}: unsupported file type {quote(p.suffix)} (use {use})"
        given = f"{voice(flag)} " if isinstance(flag, tuple) else f"{flag} " if flag else ""
        return f"{given}{clean(p)}: unsupported file type {quote(p.suffix)} (use {use})"
    raise settings_error(UsageError, say)


def _tensor_proto(p: Path, what=None) -> onnx.TensorProto:
    check_fits(2 * p.stat().st_size, what or clean(p))
    t = onnx.TensorProto()
    t.ParseFromString(p.read_bytes())
    return t


def _pb_array(p: Path, t: onnx.TensorProto | None = None, what=None) -> np.ndarray:
    """The array of the .pb tensor ``p`` (``t``: already parsed); a data_type onnx does not know is said as
    such (numpy_helper raised a bare KeyError: 'cannot read as .pb tensor (999)'). ``what``: the file as the
    refusals name it (``_said``; default its path)."""
    what = what or clean(p)
    t = _tensor_proto(p, what) if t is None else t
    try:
        onnx.helper.tensor_dtype_to_np_dtype(t.data_type)
    except KeyError:
        why = "UNDEFINED" if t.data_type == 0 else f"not one onnx {onnx.__version__} knows"
        raise settings_error(UsageError, lambda say: f"{_said(what, say)}: unknown TensorProto data_type {t.data_type} ({why})") from None
    if any(d < 0 for d in t.dims):  # numpy's reshape would read -1 as "infer from the data", -4 as an empty axis
        raise settings_error(UsageError, lambda say: f"{_said(what, say)}: dims {clip(str(list(t.dims)), 80)} hold a negative "
                             "dimension: not a tensor (a damaged file)")
    return to_array(t)


def read_arrays(path: str | Path, kind: str = "input", flag: str | tuple[str, str] = "") -> dict[str, np.ndarray]:
    """Named arrays from an ``.npz`` (``read_npz``) or from an ONNX test data set folder (the
    ``test_data_set_N`` of onnx's node tests and of model zoo archives): its ``{kind}_0.pb``,
    ``{kind}_1.pb``... TensorProtos, keyed by the names they carry (``kind``: "input" or "output");
    ``flag``: the one that named it, said first where it is no file."""
    p = Path(checked_path(path, ".npz file or test data set folder"))
    return read_test_data_set(p, kind) if p.is_dir() else read_npz(p, flag)


class Position(str):
    """The key of a test data set tensor without a name (``{kind}_{index}.pb``): ONNX's own test runner
    binds those by position, to the model's input or output ``index`` (``by_position``)."""

    def __new__(cls, kind: str, index: int, file: str):
        out = super().__new__(cls, file)
        out.kind, out.index = kind, index
        return out


def by_position(arrays: dict, names: list[str], kind: str) -> dict:
    """``arrays`` with the ``Position`` keys of ``kind`` named after ``names`` (the model's inputs or
    outputs, in order); a UsageError when there is no such position or the name is given twice."""
    out = {}
    for k, v in arrays.items():
        if isinstance(k, Position) and k.kind == kind:
            if k.index >= len(names):
                raise UsageError(f"{k}: a tensor without a name at position {k.index}, and the model has only "
                                 f"{len(names)} {kind}{'s' if len(names) != 1 else ''}")
            k = names[k.index]
            if k in arrays:
                raise UsageError(f"{kind} {quote(k)}: given both by name and by position ({kind}_N.pb)")
        out[k] = v
    return out


def read_test_data_set(folder: Path, kind: str) -> dict[str, np.ndarray]:
    """The ``{kind}_N.pb`` tensors of an ONNX test data set folder, by their names (see ``read_arrays``)."""
    files = sorted((f for f in folder.glob(f"{kind}_*.pb") if f.stem[len(kind) + 1:].isdigit()),
                   key=lambda f: (int(f.stem[len(kind) + 1:]), f.name))  # input_0.pb, then input_00.pb
    if not files and kind == "input" and any(f.stem[7:].isdigit() for f in folder.glob("output_*.pb")):
        return {}  # the data set of a model without inputs (onnx's test_constant): its expected outputs alone
    if not files:
        raise UsageError(f"{clean(folder)}: a folder without {kind}_0.pb, {kind}_1.pb...: not an ONNX test data set "
                         f"(a folder of .npz batches is --inputs-dir's)")
    out: dict[str, np.ndarray] = {}
    unnamed: dict[int, str] = {}  # position -> file: input_0.pb and input_00.pb would both bind to input 0
    for f in files:
        protect(f, "an input file")
        try:
            t = _tensor_proto(f)
            value = _pb_array(f, t)
        except UsageError:
            raise
        except Exception as e:  # noqa: BLE001 - protobuf and numpy raise many kinds
            raise UsageError(f"{clean(f)}: cannot read as a .pb tensor ({clean(first_line(e))})") from e
        # a tensor without a name is the model's input (output) of its position, as ONNX's test runner binds it
        key = t.name or Position(kind, int(f.stem[len(kind) + 1:]), f.name)
        if not t.name and unnamed.setdefault(key.index, f.name) != f.name:
            raise UsageError(f"{clean(folder)}: {kind} position {key.index} given twice ({unnamed[key.index]}, {f.name})")
        if key in out:
            raise UsageError(f"{clean(f)}: a second tensor named {quote(t.name)} in {clean(folder)}")
        out[key] = value
    return out


def read_npz(path: str | Path, flag: str | tuple[str, str] = "", shown: str | None = None) -> dict[str, np.ndarray]:
    """Every array of an ``.npz``, keyed as stored (onnxprobe's own archives map safe entry names back to
    tensor names: see ``runtime.npz``); ``flag``: the one that named it, said first where it is no file;
    ``shown``: what the messages call the file, where not its path (a dataset's batch: its path in the folder)."""
    from onnxprobe.runtime.npz import NAMES_ENTRY, true_names

    try:
        p = input_file(path, ".npz file", flag, shown=shown)
    except UsageError as e:  # its message names the file
        e.about = str(path)
        raise
    name = clean(p if shown is None else shown)
    try:
        with zipfile.ZipFile(p) as z:
            total, entries = 0, {}
            for info in z.infolist():
                if info.is_dir():  # a folder of the zip (``zip -r``): no entry np.load reads
                    continue
                # np.load's key: an entry of another name is read as an array too where it is one, else as bytes
                key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                if key in entries:  # np.load would read one of the two
                    raise UsageError(f"{name}: array {quote(key)} is stored twice ({quote(entries[key])} and "
                                     f"{quote(info.filename)}): which one is meant is not known")
                entries[key] = info.filename
                with z.open(info) as f:
                    if f.read(len(np.lib.format.MAGIC_PREFIX)) != np.lib.format.MAGIC_PREFIX:
                        raise UsageError(f"{name}: entry {quote(info.filename)} is no .npy array (an .npz holds "
                                         "arrays only)")
                with z.open(info) as f:
                    shape, dtype = _npy_header(f)
                    header = f.tell()
                what = f"{name}: array {quote(key)}"
                _check_header(shape, dtype, what)
                declared = int(np.prod(shape, dtype=object)) * dtype.itemsize
                if declared > info.file_size - header:
                    raise UsageError(f"{what} declares {human_bytes(declared)} ({dtype} {list(shape)}) but holds "
                                     f"{human_bytes(max(info.file_size - header, 0))}: truncated or not what it claims")
                total += declared
            check_fits(total, f"{name} (all its arrays)")
        with np.load(p, allow_pickle=False) as z:
            # by the member's own file name: np.load takes a key that is a member's file name as that member (the
            # key 'a.npy' of members a.npy and a.npy.npy read the first)
            arrays = {k: z[entries[k]] for k in z.files if k != NAMES_ENTRY and k in entries}
            if NAMES_ENTRY in z.files:
                arrays = _by_true_names(arrays, true_names(z), name)
    except UsageError as e:  # every message above names the file
        e.about = str(path)
        raise
    except Exception as e:  # noqa: BLE001 - zipfile and numpy raise many kinds
        err = UsageError(f"{name}: not a readable .npz file ({clean(first_line(e))})")
        err.about = str(path)
        raise err from e
    protect(p, "an input file")
    return arrays


def _by_true_names(arrays: dict, names: dict[str, str] | None, name: str) -> dict:
    """``arrays`` keyed by the tensor names the archive's NAMES_ENTRY map gives (``runtime.npz.true_names``: None
    where it is damaged); a damaged map, or two entries it gives one tensor (the last read was kept, silently), is
    a UsageError naming the file ``name``."""
    from onnxprobe.runtime.npz import NAMES_ENTRY

    if names is None:
        raise UsageError(f"{name}: its entry {NAMES_ENTRY} (entry -> tensor name) is not a JSON object of names, so its "
                         "entries' tensors are unknown; write the file again, or drop that entry")
    held: dict[str, str] = {}
    for k in arrays:
        t = names.get(k, k)
        if t in held:
            raise UsageError(f"{name}: entries {quote(held[t])} and {quote(k)} both hold the tensor {quote(t)} "
                             f"(by {NAMES_ENTRY}); keep one")
        held[t] = k
    return {names.get(k, k): v for k, v in arrays.items()}


def literal(text: str) -> np.ndarray | None:
    """``16000``, ``0.5``, ``[1, 2, 3]``, ``true``: a value given on the command line instead of a file, as
    an object array of the very numbers typed (Python bools, ints of any size, floats: ``literal_as`` casts
    them, refusing what the cast would change); None when ``text`` is not one (it is then a file name)."""
    try:
        if Path(text).exists():
            return None
    except OSError:  # a name too long for a file: a value, or nothing
        pass
    try:
        # nan and inf as numpy prints them (JSON has no such words); anything else as JSON
        v = float(text) if text.strip().lower() in NONFINITE_WORDS else json.loads(text, parse_float=_typed_float)
    except RecursionError:  # nested deeper than any input's rank
        return None
    except ValueError as e:  # not JSON: a file name, unless it was meant as a list
        if text.lstrip().startswith("["):
            raise UsageError(f"value {quote(text[:60])}: not a list of numbers ({e.msg} at character {e.pos}), "
                             "and no file of that name") from None
        return None
    if not isinstance(v, (bool, int, float, list)):
        return None
    if _depth(v) > MAX_LITERAL_RANK:
        raise UsageError(f"value {quote(text[:40])}…: lists nested deeper than {MAX_LITERAL_RANK}, more than any tensor's rank")
    shape = _rectangular(v)
    if shape is None:
        raise UsageError(f"value {quote(text)}: nested lists must be rectangular (all rows of the same length)")
    flat = list(_leaves(v))
    if not all(isinstance(x, (bool, int, float)) for x in flat):
        raise UsageError(f"value {quote(text)}: only numbers, true and false can be given")
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(shape)


MAX_LITERAL_RANK = 32
NONFINITE_WORDS = ("nan", "inf", "+inf", "-inf", "infinity", "-infinity")


def _depth(v) -> int:
    """How deep lists nest in ``v``, without recursion (a hostile value nests thousands deep)."""
    depth, level = 0, [v]
    while level:
        level = [x for item in level if isinstance(item, list) for x in item]
        depth += 1
        if depth > MAX_LITERAL_RANK + 1:
            break
    return depth - 1


def _rectangular(v) -> tuple[int, ...] | None:
    """The shape of nested lists whose rows at each depth all have one length; None when ragged."""
    if not isinstance(v, list):
        return ()
    subs = [_rectangular(x) for x in v]
    if any(s is None for s in subs) or len(set(subs)) > 1:
        return None
    return (len(v), *(subs[0] if subs else ()))


def _leaves(v):
    if isinstance(v, list):
        for x in v:
            yield from _leaves(x)
    else:
        yield v


def _typed_float(s: str) -> float:
    """A number typed in a literal: one past float64's range (1e400) is refused, not read as inf (inf and nan
    are given as words: ``inf``, ``nan``)."""
    v = float(s)
    if math.isinf(v):
        raise UsageError(f"value {clean(s)}: beyond float64's range (for an infinity, give inf or -inf)")
    return v


def literal_as(value: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A literal (``literal``) in ``dtype``, the model input's, refused with one line where the cast would
    change what was typed: a fraction, or a number out of range, for an integer input; a number beyond a
    float type's range; anything but true, false, 0 or 1 for a bool input; true or false for a number."""
    dtype = np.dtype(dtype)
    kind = dtype.kind

    def refuse(why: str):
        return UsageError(f"{why} (the input's dtype is {dtype})")

    for x in value.flat:
        if kind == "b":
            if x not in (0, 1) or isinstance(x, float):
                raise refuse(f"{x!r} is not true, false, 0 or 1")
        elif isinstance(x, bool):
            raise refuse(f"{str(x).lower()} is not a number")
        elif kind in "iu":
            if isinstance(x, float) and not x.is_integer():
                raise refuse(f"{x!r} is not an integer")
            info = np.iinfo(dtype)
            if not (info.min <= int(x) <= info.max):
                raise refuse(f"{x!r} is out of range ({info.min}..{info.max})")
        elif kind in "fc":
            info = np.finfo(dtype)
            with np.errstate(over="ignore", under="ignore"):
                cast = np.array(x).astype(dtype)
            if math.isfinite(x) and np.isinf(cast):  # inf and nan were asked for as such; 65510 rounds to 65504
                raise refuse(f"{x!r} rounds to {'-' if x < 0 else ''}inf: beyond its range "
                             f"(±{float(info.max):.17g})".replace(".0)", ")"))
            if x != 0 and cast == 0:  # underflow: a value typed is no zero
                raise refuse(f"{x!r} rounds to 0: below its smallest value ({float(info.smallest_subnormal):.3g})")
    if kind in "iu":
        return np.array([int(x) for x in value.flat], dtype=dtype).reshape(value.shape)
    return np.array([x for x in value.flat], dtype=dtype).reshape(value.shape)


def widened_bfloat16(bits: np.ndarray) -> np.ndarray:
    """bfloat16 values given as their 16 bits (uint16), as float32: exactly the same numbers (a bfloat16 is
    a float32's upper half). A new array: the bits may live in a runtime's buffer that goes away."""
    return (np.asarray(bits).view(np.uint16).astype(np.uint32) << 16).view(np.float32)


# onnxruntime's element types that numpy holds only through ml_dtypes and its Python API reads back as no
# numpy array ("No corresponding Numpy type"): ml_dtypes' type, and how many bits each element takes in the
# buffer (the sub-byte ones packed, the first element in the lowest bits)
NARROW_ORT_TYPES = {"tensor(float8e4m3fn)": ("float8_e4m3fn", 8), "tensor(float8e4m3fnuz)": ("float8_e4m3fnuz", 8),
                    "tensor(float8e5m2)": ("float8_e5m2", 8), "tensor(float8e5m2fnuz)": ("float8_e5m2fnuz", 8),
                    "tensor(float8e8m0)": ("float8_e8m0fnu", 8), "tensor(float4e2m1)": ("float4_e2m1fn", 4),
                    "tensor(int4)": ("int4", 4), "tensor(uint4)": ("uint4", 4), "tensor(int2)": ("int2", 2),
                    "tensor(uint2)": ("uint2", 2)}


def widened_narrow(raw: np.ndarray, ort_type: str, count: int) -> np.ndarray:
    """``count`` elements of a float8 / 4-bit / 2-bit tensor given as the bytes of its buffer (uint8), as
    float32: exactly the same numbers (every such value is a float32), as the probes read them (a Cast to
    float32 in the graph). A new flat array."""
    import ml_dtypes

    name, bits = NARROW_ORT_TYPES[ort_type]
    raw = np.asarray(raw, np.uint8)
    if bits < 8:  # unpacked, the first element in the lowest bits of its byte
        per = 8 // bits
        shifts = (np.arange(per, dtype=np.uint8) * bits)[None, :]
        raw = ((raw[:, None] >> shifts) & ((1 << bits) - 1)).reshape(-1)[:count].astype(np.uint8)
        if name in ("int4", "int2"):  # two's complement in ``bits`` bits
            half = 1 << (bits - 1)
            return ((raw.astype(np.int16) ^ half) - half).astype(np.float32)
        if name in ("uint4", "uint2"):
            return raw.astype(np.float32)
    return raw[:count].view(getattr(ml_dtypes, name)).astype(np.float32)


def narrow_buffer(value: np.ndarray) -> tuple[np.ndarray, int] | None:
    """An ml_dtypes float8 / 4-bit / 2-bit array as onnxruntime's buffer of it and the ONNX element type, for
    ``OrtValue.ortvalue_from_numpy_with_onnx_type`` (its Python API takes no array of these types: "Numpy_type
    260 can't be converted to MLDataType"); None for any other array. The buffer is a uint8 array of the
    value's shape (that call takes the shape from it) whose first bytes hold the elements as
    ``widened_narrow`` reads them back: one byte each, or packed, the first element in the lowest bits."""
    found = next(((t, bits) for t, (name, bits) in NARROW_ORT_TYPES.items() if value.dtype.name == name), None)
    if found is None or value.dtype.itemsize != 1:
        return None
    ort_type, bits = found
    elem = getattr(onnx.TensorProto, ort_type[7:-1].upper(), None)
    if elem is None:
        return None
    raw = np.ascontiguousarray(value).view(np.uint8)
    if bits == 8:
        return raw, elem
    per = 8 // bits
    flat = raw.reshape(-1) & ((1 << bits) - 1)
    flat = np.concatenate([flat, np.zeros(-flat.size % per, np.uint8)]).reshape(-1, per)
    packed = np.bitwise_or.reduce(flat << (np.arange(per, dtype=np.uint8) * bits)[None, :], axis=1).astype(np.uint8)
    buf = np.zeros(value.shape, np.uint8)
    buf.reshape(-1)[:packed.size] = packed
    return buf, elem
