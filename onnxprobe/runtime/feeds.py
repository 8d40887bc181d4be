"""Model inputs: seeded random data from the model's own input types, or what the user gives.

- ``model_inputs(model)`` lists the real inputs (initializers listed as inputs by IR < 4 models are not).
- ``runtime.input_flags`` reads the flags (``parse_shape_overrides(["x=1x3x224x224"])``, ``parse_input_files``).
- ``make_feeds(model, spec)`` builds one feed dict from an ``InputSpec``: given values first (files,
  literals, arrays), seeded random data for the rest; every value is checked against the model's dtype
  and shape, and sizes against the memory available. Unknown dimensions default to 1; ``Feeds.defaulted``
  says which (a fact, for hints), ``Feeds.notes`` says it in words (for people).
"""

from __future__ import annotations

import copy
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import numpy as np
import onnx

from onnxprobe.errors import (DeviceUnavailable, ExecutionError, ModelError, SessionError, UsageError, error_about, setting_error,
                              said, settings_error, Voice)
from onnxprobe.graph.shapes import static_shape
from onnxprobe.graph.summary import TypeInfo, type_info
from onnxprobe.graph.walk import unread_inputs
from onnxprobe.runtime.random_inputs import RANDOM_CHUNK, random_array  # noqa: F401 (re-exported)
from onnxprobe.runtime.arrays import Position, as_array, by_position, check_fits, literal, literal_as, read_array
from onnxprobe.runtime.input_hints import ARRAYS, FILES, INT_RANGE, SEED, SHAPES, random_hint, shape_hint  # noqa: F401
from onnxprobe.text import clean, quote, some
from onnxprobe.types import InputSpec, array_text, named_dim

# the largest seed: default_rng would take any, but a seed given here is one np.random.seed / RandomState (and
# the tools built on them) take too, so the same number can seed them
MAX_SEED = 2**32 - 1


# element types numpy holds only through ml_dtypes, which onnxruntime's Python API takes no array of (measured,
# onnxruntime 1.32: "Numpy_type 260 can't be converted to MLDataType"); bfloat16 is fed as its bits (runtime.ort)
_NOT_FED = {getattr(onnx.TensorProto, n) for n in ("FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
                                                    "UINT4", "INT4", "FLOAT4E2M1", "FLOAT8E8M0", "UINT2", "INT2")
            if hasattr(onnx.TensorProto, n)}
_KINDS = {"sequence_type": "a sequence", "map_type": "a map", "optional_type": "an optional",
          "sparse_tensor_type": "a sparse tensor", "opaque_type": "an opaque value"}


def type_name(elem_type: int) -> str:
    return onnx.TensorProto.DataType.Name(elem_type) if elem_type in onnx.TensorProto.DataType.values() else "unknown"


@dataclass(frozen=True)
class ModelInput:
    """One graph input as the model declares it."""

    name: str
    elem_type: int
    shape: tuple | None  # ints, symbolic names or None; None: unknown rank
    kind: str | None = "tensor_type"  # which TypeProto it declares; None: no type at all
    info: TypeInfo | None = None  # the whole type as inspect says it (sequence<float32>, its tensors' shape)

    @property
    def dtype(self) -> np.dtype:
        if self.kind is None:
            raise ModelError(f"input {quote(self.name)}: declares no type (onnx's checker requires one): a broken model")
        if self.kind != "tensor_type":  # the model's, as a float8 input is (``check_fed``): no flag changes it
            kind = _KINDS.get(self.kind, self.kind)
            raise settings_error(ModelError, lambda say: f"input {quote(self.name)}: not a tensor ({kind}: onnxprobe "
                                 "feeds tensors only; cut the model after it with "
                                 f"{say.either('api.extract(model, path, cut_inputs=[...])', '`onnxprobe extract --from`')})")
        if self.elem_type == onnx.TensorProto.UNDEFINED:
            raise ModelError(f"input {quote(self.name)}: a tensor of element type UNDEFINED (0): the model does not say "
                             "what it holds")
        try:
            return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(self.elem_type))
        except Exception:  # noqa: BLE001 - a number onnx does not know, float8 without ml_dtypes...
            raise ModelError(f"input {quote(self.name)}: element type {self.elem_type} ({type_name(self.elem_type)}) "
                             "has no numpy type; onnxprobe cannot make or check data for it") from None

    def check_fed(self) -> None:
        """A ModelError for an input of a type onnxprobe cannot feed onnxruntime (float8, int4...)."""
        if self.kind == "tensor_type" and self.elem_type in _NOT_FED:
            raise settings_error(ModelError, lambda say: f"input {quote(self.name)}: element type {type_name(self.elem_type)}, "
                                 "which onnxruntime's Python API takes no array of: onnxprobe cannot feed it (cut the model "
                                 f"after it with {say.either('api.extract(model, path, cut_inputs=[...])', '`onnxprobe extract --from`')}, "
                                 "or give the model a float input and a Cast)")

    def describe(self) -> str:
        """"x float32 [n x 3]"; a value that is not a tensor as inspect says it: "s sequence<float32> [2]"."""
        dt, shape = (self.info.type, self.info.shape) if self.kind != "tensor_type" and self.info and self.info.type else (None, self.shape)
        try:
            dt = dt or ("string" if self.elem_type == onnx.TensorProto.STRING else str(self.dtype))
        except (UsageError, ModelError):
            dt = "?"
        parts = [] if shape is None else [str(d) if d is not None else "?" for d in shape]
        # symbolic dims spaced out, as inspect shows them: "batch x 3 x 8 x 8", not "batchx3x8x8"
        sep = " x " if shape and any(isinstance(d, str) for d in shape) else "x"
        dims = "?" if shape is None else sep.join(parts) or "scalar"
        return f"{clean(self.name)} {dt} [{clean(dims)}]"


SHOWN = 8  # inputs a Feeds' repr names; the rest are counted


@dataclass
class Feeds:
    """One feed dict and what was decided to make it."""

    values: dict[str, np.ndarray]
    defaulted: dict[str, list[str]] = field(default_factory=dict)  # input -> its dimensions that were set to 1
    notes: list[str] = field(default_factory=list)
    random_ints: list[str] = field(default_factory=list)  # integer and bool inputs made of seeded random data
    about: dict[str, list[str]] = field(default_factory=dict)  # input -> the notes about it (in ``notes`` too)
    guessed: dict[str, str] = field(default_factory=dict)  # input -> the note on its ``defaulted`` dimensions
    zeros_note: str | None = None  # the note on inputs no node reads, fed zeros (in ``notes`` too; a diff says it per model)
    int_range: tuple[int, int] = (0, 100)  # the [low, high) the random integer inputs were drawn from

    @property
    def notes_but_zeros(self) -> list[str]:
        """``notes`` without ``zeros_note``: for a diff, whose own note names the model that declares them."""
        return [n for n in self.notes if n != self.zeros_note]

    def __repr__(self) -> str:  # a notebook's view of api.feeds(...): each input's type and shape, not its values
        shown = [f"{clean(n)} {array_text(v)}" for n, v in list(self.values.items())[:SHOWN]]
        more = [f"... {len(self.values) - SHOWN} more"] if len(self.values) > SHOWN else []
        notes = f": {len(self.notes)} note{'s' if len(self.notes) != 1 else ''}" if self.notes else ""
        return f"Feeds({', '.join(shown + more)}{notes})"

    def guess_note(self, name: str, fix: str) -> str:
        """The note on input ``name``'s ``defaulted`` dimensions, as ``guessed`` says it, with ``fix`` (what
        gives real sizes, in the reader's words: the debugger's `input NAME random DIMS`) for --shape's."""
        return guess_note(name, self.defaulted[name], fix)

    def explained(self, e: ExecutionError) -> ExecutionError:
        """``e``, a run's error, with ``hint`` after its message where there is one (not after an error that
        is about the device rather than the model and its inputs): a copy of it, of its class, with its
        attributes (the ``side`` a diff names, ``NamedRunner``), so that callers still catch and read it."""
        if isinstance(e, (DeviceUnavailable, SessionError)) or not self.hint():  # not about the inputs
            return e
        told = copy.copy(e)  # (e stays as it was: the cause of the one raised)
        told.args = (f"{e}{self.hint()}",) + tuple(e.args[1:])
        told.cli_message = f"{e.cli_message or e}{self.hint(Voice(cli=True))}"
        return told

    @contextmanager
    def explaining(self):
        """``explained`` for every run in the block: grad_plan's shape-learning run too, not just the main one."""
        try:
            yield
        except ExecutionError as e:
            if (told := self.explained(e)) is e:
                raise
            raise told from e

    def hint(self, say=Voice(cli=False)) -> str:
        """A suffix for errors a run raises when dimensions were guessed, or when integer or bool inputs
        (counts, indices, conditions) were random: they may be the cause. ``say``: whose words (``errors.Voice``)."""
        empty = [n for n, v in self.values.items() if 0 in np.shape(v)]
        if empty:  # legal in ONNX, but few models run on an empty tensor: the likelier cause, said first
            return f" (input {clean(empty[0])} has a dimension of 0, {list(np.shape(self.values[empty[0]]))}: an empty tensor)"
        # each guess that may be the cause (both: the ints were hidden); the input by its name where one was guessed
        said = [shape_hint(say, *self.defaulted) if len(self.defaulted) == 1 else shape_hint(say)] if self.defaulted else []
        if self.random_ints:
            ints = [n for n in self.random_ints if n not in self.values or np.asarray(self.values[n]).dtype.kind in "iu"]
            said.append(random_hint(say, self.random_ints, ints, self.int_range))
        return f" ({'; '.join(said)})" if said else ""


def model_inputs(model: onnx.ModelProto) -> list[ModelInput]:
    inits = {i.name for i in model.graph.initializer}
    out = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        out.append(ModelInput(vi.name, vi.type.tensor_type.elem_type, static_shape(vi.type), vi.type.WhichOneof("value"),
                              type_info(vi.name, vi.type)))
    return out


def weight_inputs(model: onnx.ModelProto) -> frozenset[str]:
    """The initializers ``model`` lists as graph inputs too (overridable in onnxruntime; weights here)."""
    return frozenset(vi.name for vi in model.graph.input) & frozenset(i.name for i in model.graph.initializer)


def unread_value(s: ModelInput) -> np.ndarray:
    """The value an input no node reads is fed (``graph.walk.unread_inputs``): zeros of its declared type and
    shape, a dynamic dimension as 1."""
    shape = tuple(d if isinstance(d, int) and d >= 0 else 1 for d in (s.shape or ()))
    return np.full(shape, "", dtype=object) if s.elem_type == onnx.TensorProto.STRING else np.zeros(shape, s.dtype)


def fed(model: onnx.ModelProto, feeds: dict, takes: set[str] | None = None) -> dict:
    """``feeds`` as ``model`` takes them (each runner's run): names it does not declare left out (onnxruntime
    refuses them), and zeros for its inputs no node reads that are not fed (``unread_value``: onnxruntime
    requires every one), so that a model with such inputs runs on another model's feeds. ``takes``: the
    names the runtime's session takes, where it tells (onnxruntime drops some inputs nothing reads)."""
    names = {i.name for i in model.graph.input} if takes is None else takes
    lacking = [s for s in model_inputs(model) if s.name not in feeds and s.name in names]
    if not lacking and names.issuperset(feeds):
        return feeds
    unread = set(unread_inputs(model)) if lacking else set()
    return {**{k: v for k, v in feeds.items() if k in names}, **{s.name: unread_value(s) for s in lacking if s.name in unread}}


def check_value(spec: ModelInput, value: np.ndarray, origin: str) -> np.ndarray:
    """``value`` for input ``spec`` as the model takes it, or a UsageError naming the input and ``origin``
    (where the value came from): the model's dtype (strings converted), rank and fixed dimensions."""
    if not isinstance(spec, ModelInput):
        raise UsageError(f"spec: expected a ModelInput (api.model_inputs(model) lists them), got {type(spec).__name__}")
    value = np.asarray(value)
    spec.check_fed()
    if spec.elem_type == onnx.TensorProto.STRING:
        value = as_strings(value, f"input {clean(spec.name)} ({clean(origin)})")
    elif value.dtype != spec.dtype and value.dtype.newbyteorder("=") == spec.dtype:
        value = value.astype(spec.dtype)  # big-endian (np.save of '>f4'): the same values, exactly, in native order
    elif spec.dtype.name == "bfloat16" and value.dtype.kind == "f":
        value = _as_bfloat16(spec, value, origin)
    elif value.dtype != spec.dtype:
        raise UsageError(f"input {clean(spec.name)} ({clean(origin)}): dtype {value.dtype}, the model expects {spec.dtype}")
    if spec.shape is not None:
        if value.ndim != len(spec.shape):
            raise UsageError(f"input {clean(spec.name)} ({clean(origin)}): shape {list(value.shape)} has rank {value.ndim}, "
                             f"the model expects {spec.describe()}")
        for i, (want, got) in enumerate(zip(spec.shape, value.shape)):
            if isinstance(want, int) and want >= 0 and want != got:  # (0 is fixed too: onnxruntime refuses another)
                raise UsageError(f"input {clean(spec.name)} ({clean(origin)}): shape {list(value.shape)}, but dimension {i} "
                                 f"must be {want} ({spec.describe()})")
    return value


def _as_bfloat16(spec: ModelInput, value: np.ndarray, origin: str) -> np.ndarray:
    """A float array for a bfloat16 input, which numpy has no type for (onnxprobe itself saves a bfloat16
    tensor widened to float32): taken where bfloat16 holds every value exactly, as a VALUE is."""
    narrow = value.astype(spec.dtype)
    back = narrow.astype(value.dtype)
    lost = ~((back == value) | (np.isnan(back) & np.isnan(value)))
    if lost.any():
        x = value[lost].flat[0]
        raise UsageError(f"input {clean(spec.name)} ({clean(origin)}): dtype {value.dtype}, the model expects bfloat16, "
                         f"which does not hold {int(lost.sum())} of its values exactly ({float(x)!r} reads "
                         f"{float(x.astype(spec.dtype))!r} there): round them to bfloat16 first (ml_dtypes.bfloat16), or give "
                         "a BFLOAT16 .pb")
    return narrow


def as_strings(value: np.ndarray, what: str) -> np.ndarray:
    """A string input's value as onnxruntime takes it: an object array of str. numpy's unicode (<U) and
    bytes (|S) arrays (an .npy saves strings so, without pickle) and a string TensorProto's object array
    of bytes are converted; bytes are UTF-8 (onnxruntime turns a bytes object into the text "b'...'")."""
    if value.dtype.kind not in "USO":
        raise UsageError(f"{what}: dtype {value.dtype}, the model expects strings")
    flat = value.reshape(-1)
    out = np.empty(flat.shape, dtype=object)
    for i, v in enumerate(flat):
        if isinstance(v, (bytes, np.bytes_)):
            try:
                v = bytes(v).decode("utf-8")
            except UnicodeDecodeError:
                raise UsageError(f"{what}: element {i} is not UTF-8 text; onnxruntime takes strings as text") from None
        elif not isinstance(v, str):
            raise UsageError(f"{what}: element {i} is {type(v).__name__}, not a string")
        out[i] = str(v)
    return out.reshape(value.shape)


class _Dims:
    """Sizes of the model's named dimensions, as the given values and --shape fix them: one named
    dimension (``batch``) must have one size across all inputs."""

    def __init__(self) -> None:
        self.values: dict[str, tuple[int, str, str]] = {}  # dim name -> (size, input, where it came from)

    def fix(self, spec: ModelInput, shape: tuple[int, ...], origin: str) -> None:
        own: dict[str, int] = {}  # one input's own: [n, n] given 2x3 was taken, and another input's n read 2
        for d, got in zip(spec.shape or (), shape):
            if not named_dim(d):
                continue
            if own.setdefault(d, got) != got:
                raise UsageError(f"dimension {quote(d)} is {own[d]} and {got} in input {clean(spec.name)} ({clean(origin)}, "
                                 f"{spec.describe()}); one named dimension has one size")
            if d in self.values and self.values[d][0] != got and self.values[d][1] != spec.name:
                size, other, how = self.values[d]
                raise UsageError(f"dimension {quote(d)} is {size} for input {clean(other)} ({clean(how)}) but {got} for "
                                 f"input {clean(spec.name)} ({clean(origin)}); one named dimension has one size")
            self.values.setdefault(d, (got, spec.name, origin))


def check_shape(spec: ModelInput, shape: tuple[int, ...], what: str | tuple[str, ...]) -> tuple[int, ...]:
    """``shape`` if input ``spec`` can take it (its rank, its fixed dimensions), else a UsageError that starts
    with ``what``: the setting and its value (``errors.error_about``) or the debugger's command the user wrote."""
    if spec.shape is not None and len(shape) != len(spec.shape):
        raise error_about(UsageError, what, f": {len(shape)} dimension{'s' if len(shape) != 1 else ''} given, the model expects "
                         f"{len(spec.shape)} ({spec.describe()})")
    for i, (want, got) in enumerate(zip(spec.shape or (), shape)):
        if isinstance(want, int) and want >= 0 and want != got:
            raise error_about(UsageError, what, f": dimension {i} is fixed to {want} in the model, got {got}")
    return shape


def _resolve_shape(spec: ModelInput, override: tuple[int, ...] | None, dims: _Dims, defaulted: dict[str, list[str]]) -> tuple[int, ...]:
    if override is not None:
        return check_shape(spec, override, (*SHAPES, clean(spec.name)))
    if spec.shape is None:
        defaulted[spec.name] = ["rank"]
        return ()
    out = []
    for i, d in enumerate(spec.shape):
        if isinstance(d, int) and d >= 0:  # 0 too: a dimension the model fixes at 0 (an empty input)
            out.append(d)
        elif named_dim(d) and d in dims.values:
            out.append(dims.values[d][0])
        else:
            defaulted.setdefault(spec.name, []).append(f"'{d}'" if named_dim(d) else f"axis {i}")  # "?" says nothing: its axis
            if named_dim(d):
                dims.values[d] = (1, spec.name, "the default of 1")
            out.append(1)
    return tuple(out)


def feed_digest(arrays: dict[str, np.ndarray]) -> str:
    """16 hex digits that name a set of inputs by their values (names, dtypes, shapes, bytes): a dataset's
    reports list their samples by it (merge-stats sees a sample two shards both hold), and the debugger
    keys its results by it."""
    import hashlib

    h = hashlib.blake2b(digest_size=8)
    for name in sorted(arrays):
        a = np.asarray(arrays[name])
        h.update(f"{name}\0{a.dtype.str}\0{a.shape}\0".encode())
        h.update(repr(a.tolist()).encode() if a.dtype.kind in "OUS" else np.ascontiguousarray(a).reshape(-1).view(np.uint8))
    return h.hexdigest()


def _notes(defaulted: dict[str, list[str]]) -> dict[str, str]:
    """Each input of ``defaulted`` -> the note saying which of its dimensions were set to 1."""
    # in each reader's words: the API's shapes={...} (shapes (--shape) x=...), the command line's --shape x=...
    return {name: said(lambda say, name=name, labels=labels: guess_note(name, labels, say.given(SHAPES, clean(name), "...")))
            for name, labels in defaulted.items()}


def guess_note(name: str, labels: list[str], fix: str) -> str:
    """The one wording of the note on input ``name`` whose dimensions ``labels`` were set to 1 (a name
    quoted, "'batch'", or an unnamed one's axis, "axis 2"; ``["rank"]``: its rank unknown, fed as a scalar), for every reader; ``fix``: what gives real sizes, in that reader's words."""
    if labels == ["rank"]:
        return f"input {clean(name)}: rank unknown, using a scalar (use {fix})"
    axes = all(x.startswith("axis ") for x in labels)  # only unnamed ones: "axes 0, 2 and 3"
    words = [clean(x[5:] if axes and len(labels) > 1 else x) for x in labels]
    said = ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else words[0]
    what = ("axes " if len(labels) > 1 else "") if axes else f"dimension{'s' if len(labels) > 1 else ''} "
    return f"input {clean(name)}: {what}{said} unknown, set to 1 (use {fix})"


def named_files(spec: InputSpec, names: list[str]) -> InputSpec:
    """``spec`` with each --input NAME=FILE split after the longest prefix that is one of the model's input
    ``names`` (``parse_input_files`` splits at the first '=', knowing no model): an input named 'a=b' takes
    `--input a=b=v.npy` as `--shape 'a=b=2x4'` takes its dimensions; the first '=' where no prefix is a name."""
    known, files = set(names), {}
    for name, path in spec.files.items():
        if name not in known:
            item = f"{name}={path}"
            cuts = [i for i, c in enumerate(item) if c == "=" and item[:i] in known]
            if cuts:
                name, path = item[:cuts[-1]], item[cuts[-1] + 1:]
        files[name] = path
    return spec if files == spec.files else replace(spec, files=files)


def given_values(specs: list[ModelInput], spec: InputSpec, weights: frozenset[str] = frozenset()) -> dict[str, tuple[np.ndarray, str]]:
    """The values ``spec`` gives (arrays, files, literals), read and cast, keyed by input name. ``weights``:
    initializers the model also lists as graph inputs (``model_inputs`` leaves them out), named so where given."""
    by_name = {s.name: s for s in specs}
    expected = ", ".join(s.describe() for s in specs) or "none"
    if any(isinstance(k, Position) for k in spec.arrays):  # a test data set's unnamed input_N.pb
        spec = replace(spec, arrays=by_position(spec.arrays, [s.name for s in specs], "input"))
    for name in spec.names():
        if name not in by_name and name in weights:
            raise settings_error(UsageError, lambda say: f"{quote(name)} is a weight, not an input ({say(FILES if name in spec.files else SHAPES if name in spec.shapes else ARRAYS)}): "
                                 "the model lists this initializer as a graph input too, and onnxprobe runs it with the value "
                                 f"stored in the model; the model's inputs are: {expected}")
        if name not in by_name:
            if name in spec.arrays:
                raise UsageError(f"unknown input name {quote(name)} (from {clean(spec.arrays_from)}); the model's inputs are: {expected}")
            raise settings_error(UsageError, lambda say: f"unknown input name {quote(name)} ({say(FILES if name in spec.files else SHAPES)}); "
                                 f"the model's inputs are: {expected}")
    for name in spec.names():
        if name in spec.arrays or name in spec.files:  # before a literal is read in the input's type
            by_name[name].check_fed()
    given: dict[str, tuple[np.ndarray, str]] = {}
    for name, value in spec.arrays.items():
        given[name] = (as_array(value, f"input {quote(name)} ({clean(spec.arrays_from)})"), f"from {spec.arrays_from}")
    for name, path in spec.files.items():
        if name in given:
            raise settings_error(UsageError, lambda say: f"input {clean(name)}: given both by {say(ARRAYS)} and by {say(FILES)}; give it once")
        try:
            value = literal(path)
        except UsageError as e:  # a number past float64's range (1e400): said with the flag, as every value is
            why = str(e)
            raise settings_error(UsageError, lambda say: f"{say.given(FILES, clean(name), clean(path))}: {why}") from None
        if value is not None:  # NAME=VALUE: a literal takes the model's dtype, where that keeps its value
            try:
                given[name] = (literal_as(value, by_name[name].dtype), f"value {path}")
            except UsageError as e:
                why = str(e)
                raise settings_error(UsageError, lambda say: f"{say.given(FILES, clean(name), clean(path))}: {why}") from None
        else:
            given[name] = (read_array(path, FILES, name), path)
    return given


def make_feeds(model: onnx.ModelProto, spec: InputSpec | None = None, *, strings: bool = True) -> Feeds:
    """``strings`` False: a string input that is not given is left out of the feeds, not refused (the
    options checked for a command that may not run the model at all)."""
    spec = spec or InputSpec()
    if spec.seed < 0:
        raise setting_error(UsageError, SEED, f"{spec.seed}: seeds are non-negative integers")
    if spec.seed > MAX_SEED:
        raise setting_error(UsageError, SEED, f"{spec.seed}: seeds are integers from 0 to {MAX_SEED} "
                            "(2**32 - 1, as numpy's np.random.seed takes them)")
    lo, hi = spec.int_range
    if lo >= hi:
        raise setting_error(UsageError, ("int_range", "--int-range"), f"{lo}:{hi}: LOW must be below HIGH")
    specs = model_inputs(model)
    spec = named_files(spec, [s.name for s in specs])
    given = given_values(specs, spec, weight_inputs(model))
    dims = _Dims()
    feeds: dict[str, np.ndarray] = {}
    for s in specs:  # given values first, so their sizes name the symbolic dims
        if s.name in given:
            value, origin = given[s.name]
            feeds[s.name] = check_value(s, value, origin)
            if s.name in spec.arrays and np.may_share_memory(feeds[s.name], spec.arrays[s.name]):  # the caller's:
                feeds[s.name] = feeds[s.name].copy()  # a result's feed stays its run's when a notebook refills it
            if s.name in spec.shapes and tuple(spec.shapes[s.name]) != tuple(value.shape):
                raise settings_error(UsageError, lambda say: f"input {clean(s.name)}: {say(SHAPES)} {'x'.join(map(str, spec.shapes[s.name]))} "
                                     f"disagrees with the value given ({clean(origin)}, shape {'x'.join(map(str, value.shape)) or 'scalar'})")
            dims.fix(s, feeds[s.name].shape, origin)
    for s in specs:
        if s.name in spec.shapes and s.name not in feeds:
            dims.fix(s, tuple(spec.shapes[s.name]), "--shape")
    defaulted: dict[str, list[str]] = {}
    lacking = [s.name for s in specs if s.name not in feeds]
    # one walk of the graph, where arrays were given: a dataset, or --inputs, need not hold what no node reads (as
    # a diff's runners, ``fed``, feed it zeros, said once: an optimized IR-3 model's 212 `..._SHAPE` inputs were a
    # note each, "seeded random data", beside diff's one note saying they were fed zeros)
    read_by_none = set(unread_inputs(model)) if lacking and (spec.arrays_complete or spec.arrays) else set()
    unread = [s for s in specs if s.name in lacking and s.name in read_by_none and s.name not in spec.files]
    if unread and spec.arrays_complete:  # a batch: zeros of the declared shape, a dynamic dimension 1
        feeds.update({s.name: unread_value(s) for s in unread})
        lacking = [n for n in lacking if n not in feeds]
    zeros = {s.name for s in unread} - set(feeds)  # given arrays lacking them: zeros of the shape a draw would take
    # numpy.random only when something is drawn: its first use imports hashlib, which loads OpenSSL's libcrypto
    # (3.5 MB resident, runtime.plan_cache) for nothing when every input is given
    rng = np.random.default_rng(spec.seed) if lacking else None
    if lacking and spec.arrays_complete:  # a dataset's statistics over random data: a mistake (an empty batch too)
        held = ", ".join(clean(n) for n in spec.arrays) or "nothing"
        raise UsageError(f"input {clean(lacking[0])}: not in {spec.arrays_from}, which holds {held}; "
                         f"every input the model takes must be there")
    about = {n: [said(lambda say, n=n: f"input {clean(n)}: not in {clean(spec.arrays_from)}, so seeded random data "
                                      f"({say(SEED)} {spec.seed})")]
             for n in lacking if spec.arrays and n not in spec.files and n not in zeros}
    zeros_note = (f"{len(unread)} input{'s' if len(unread) > 1 else ''} no node reads not in {clean(spec.arrays_from)} "
                  f"({some([s.name for s in unread], form=quote)}): fed zeros") if unread else None
    notes = [m for ms in about.values() for m in ms] + ([zeros_note] if zeros_note else [])
    random_ints: list[str] = []
    for s in specs:
        if s.name in feeds:
            continue
        if not strings and (s.elem_type == onnx.TensorProto.STRING or s.elem_type in _NOT_FED):
            continue  # left out, not refused: the model may not run at all
        s.check_fed()
        shape = _resolve_shape(s, spec.shapes.get(s.name), dims, defaulted)
        dtype = s.dtype
        check_fits(int(np.prod(shape, dtype=object)) * dtype.itemsize, f"input {clean(s.name)} of shape {list(shape)}")
        if dtype.kind not in "biufc" and dtype.name != "bfloat16":  # strings: no random data means anything
            if not strings:
                continue
            raise UsageError(f"input {quote(s.name)}: a string tensor; onnxprobe cannot make random data "
                             f"for it: give it with --input {clean(s.name)}=FILE.npy")
        if s.name in zeros:  # (its dimensions guessed say nothing: no node reads it)
            feeds[s.name] = np.zeros(shape, dtype)
            defaulted.pop(s.name, None)
            continue
        feeds[s.name] = random_array(shape, dtype, rng, spec.int_range)
        if dtype.kind in "biu":
            random_ints.append(s.name)
    # a seed or integer range given with every input given (or every integer one): it changes nothing, said
    drawn = [n for n in lacking if n in feeds and n not in zeros]
    if spec.seed != 0 and not drawn:
        notes.append(f"--seed {spec.seed} draws nothing: every input is given")
    if tuple(spec.int_range) != (0, 100) and not any(feeds[n].dtype.kind in "iu" for n in random_ints):  # (bools take none)
        notes.append(f"--int-range {spec.int_range[0]}:{spec.int_range[1]} draws nothing: no integer input is drawn at random")
    guessed = _notes(defaulted)
    for n, m in guessed.items():
        about.setdefault(n, []).append(m)
    return Feeds({s.name: feeds[s.name] for s in specs if s.name in feeds}, defaulted, notes + list(guessed.values()),
                 random_ints, about, guessed, zeros_note, tuple(spec.int_range))
