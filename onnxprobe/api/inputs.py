"""Inputs and sizes from what people type: ``--seed``, ``--int-range 0:100``, ``--shape x=1x3x224x224``,
``--input x=x.npy`` / ``--input sr=16000``, ``--inputs batch.npz``, ``--max-memory 2G``; and the arrays
they name. The command line and the debugger build their InputSpec here, so a flag means the same in both.

Also the door of every API function: what it accepts as a model (``as_model``, ``proto_of``,
``model_file``), as inputs (``as_inputs``), as a feed (``checked_feed``), as names (``as_names``, ``as_raw``), as a
memory budget (``as_max_memory``) and as a settings object (``expect``). A notebook passes whatever is at
hand; a wrong kind of value is one UsageError here, never an AttributeError from deep inside."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import NamedTuple, Union

import numpy as np
import onnx

from onnxprobe.errors import UsageError, error_about, setting_error
from onnxprobe.fileio import input_file, protect, read_bounded
from onnxprobe.graph.model import Model, as_model, check_loaded
from onnxprobe.graph.model import load as _load
from onnxprobe.runtime import npz as _npz
from onnxprobe.runtime.arrays import by_position, read_array, read_npz
from onnxprobe.runtime.budget import parse_size
from onnxprobe.runtime.feeds import Feeds, ModelInput, check_value, make_feeds
from onnxprobe.runtime.feeds import check_shape as _check_shape
from onnxprobe.runtime.feeds import feed_digest as _feed_digest
from onnxprobe.stats.tensor_stats import has_statistics as _has_statistics
from onnxprobe.runtime.input_flags import parse_dims, parse_input_files, parse_shape_overrides
from onnxprobe.runtime.feeds import model_inputs as _model_inputs
from onnxprobe.text import clean, one_line, quote
from onnxprobe.graph.select import Selection
from onnxprobe.api.spec import INPUTS, PATH, input_spec, parse_int_range, protect_inputs, read_given, what_came  # noqa: F401 (re-exported)
from onnxprobe.types import InputSpec, ProbeResult, Progress, RunConfig, TorchLike, check_bool

__all__ = ["check_shape", "feed_digest", "has_statistics", "input_spec", "GivenInputs", "given_inputs", "read_inputs", "named_by_position", "parse_int_range", "parse_size", "parse_dims", "parse_shape_overrides", "parse_input_files", "read_array",
           "read_npz", "read_map", "save_npz", "Feeds", "ModelInput", "model_inputs", "check_value", "load", "as_model", "proto_of",
           "model_file", "as_inputs", "checked_feed", "as_names", "expect", "as_selection", "as_config", "as_max_memory", "as_progress", "Progress", "ModelLike", "TorchLike", "as_raw", "same_float_values",
           "as_ray", "as_dataset", "protect_inputs", "as_result", "as_probe_result", "what_came"]

ModelLike = Union[Model, str, os.PathLike, onnx.ModelProto]  # what every function that takes a model takes


def as_result(value, kind: type | tuple, what: str, name: str = "result"):
    """``value`` when it is a ``kind`` (a result or plan class, or a tuple of them); else a UsageError saying
    the argument ``name`` takes ``what``."""
    if not isinstance(value, kind):
        raise UsageError(f"{name}: expected {what}, got {what_came(value)}")
    return value


def as_probe_result(result) -> ProbeResult:
    return as_result(result, ProbeResult, "the result of api.layers (or api.run)")


def of_model(model: Model, names: Iterable[str], what: str) -> None:
    """A UsageError where a tensor of ``names`` (a result's or a plan's) is not in ``model``: the result of another
    model gave an empty file, another model's verdict, or a runtime's error about the feed."""
    from onnxprobe.graph.builder import all_names

    known = all_names(model.proto)
    stray = next((n for n in names if n not in known), None)
    if stray is not None:
        raise UsageError(f"{what}: its tensor {quote(stray)} is not in the model given ({clean(model.source)}): "
                         "a result of another model")


def expect(value, cls: type, what: str, example: str):
    """``value`` when it is a ``cls`` or None; else a UsageError naming what came and the call meant."""
    if value is None or isinstance(value, cls):
        return value
    raise UsageError(f"{what}: expected {example} or None, got {what_came(value)}")


def as_selection(selection) -> Selection | None:
    return expect(selection, Selection, "selection", "an api.Selection, e.g. api.Selection(ops=('Conv',)),")


def as_config(config) -> RunConfig | None:
    return expect(config, RunConfig, "config", "an api.RunConfig, e.g. api.RunConfig(device='cpu'),")


def check_switches(where: str, **switches) -> None:
    """Each of ``switches`` (argument name -> value) is True or False (``types.check_bool``): a switch
    given "no", 0 or None would be read by its truth, not by what it says."""
    for name, value in switches.items():
        check_bool(value, f"{where} {name}")


def as_progress(progress) -> Progress | None:
    """``progress`` when it is None or a function (called ``progress(done, total)`` as the work goes on);
    anything else would fail only once the first run is done, as "'int' object is not callable"."""
    if progress is None or callable(progress):
        return progress
    raise UsageError(f"progress: expected a function progress(done, total) or None, got {what_came(progress)}")


def as_max_memory(max_memory) -> int | None:
    """A memory budget: a positive number of bytes (an int) or None (the default budget). A size as typed
    ('2G') is ``parse_size``'s; 0, a negative number, a float or a bool would fail deep in the run, or
    plan runs of nothing."""
    if max_memory is None:
        return None
    if isinstance(max_memory, (int, np.integer)) and not isinstance(max_memory, (bool, np.bool_)) and max_memory > 0:
        return int(max_memory)
    raise UsageError(f"max_memory: expected a positive number of bytes (an int, e.g. 2**30; api.parse_size('2G') "
                     f"reads a size) or None, got {what_came(max_memory)}")


def as_ray(ray):
    """``ray`` as a RayOptions or None: True is a local cluster with the defaults (``RayOptions()``)."""
    from onnxprobe.runtime.ray_pool import RayOptions

    if ray is None or ray is False:
        return None
    if ray is True:
        return RayOptions()
    if isinstance(ray, RayOptions):
        return ray
    raise UsageError(f"ray: expected api.RayOptions(address=..., workers=...), True (a local cluster) or None, got {what_came(ray)}")


def as_dataset(inputs, inputs_from):
    """A dataset's two sources checked for type: ``inputs`` a path (a folder of .npz batches, or one .npz of
    stacked samples), ``inputs_from`` a ``FILE.py:FUNC`` or, from Python, a function returning an iterable
    of feed dicts, or such an iterable itself (a list of {input name: array}, a generator)."""
    if inputs is not None and not isinstance(inputs, (str, os.PathLike)):
        raise UsageError(f"inputs: expected the path of a folder of .npz batches or of one .npz of stacked samples, got "
                         f"{what_came(inputs)}; arrays in memory go in inputs_from=, as a list of feed dicts "
                         "{input name: array} or a function that returns or yields them")
    if inputs_from is not None and (isinstance(inputs_from, (dict, Mapping, np.ndarray, bytes))
                                    or not (isinstance(inputs_from, (str, os.PathLike)) or callable(inputs_from)
                                            or isinstance(inputs_from, Iterable))):
        raise UsageError(f"inputs_from: expected FILE.py:FUNC, a function that returns or yields feed dicts "
                         f"{{input name: array}}, or a list of them, got {what_came(inputs_from)}")
    protect_inputs(inputs_dir=inputs, inputs_from=inputs_from)


def as_raw(raw) -> bool | set[str]:
    """Which raw values to keep: True (every probed tensor's), False (none), or tensor names, where one
    ``str`` is one name (``as_names``): "logits" is not a true value that keeps them all."""
    if isinstance(raw, (bool, np.bool_)):
        return bool(raw)
    return set(as_names(raw, "raw"))


def load(path: "str | os.PathLike | onnx.ModelProto | Model") -> Model:
    """Read a model and annotate it with inferred shapes (``graph.model.load``); ``path`` is a path, an
    onnx.ModelProto (copied and annotated, never changed) or a Model already loaded (itself), as every other
    API function takes a model. What it returns holds every weight's bytes: a Model a command read from a path
    leaving its big weights in their files (a result's ``DiffResult.a.model``: ``graph.weight_files``) comes back
    as a whole copy."""
    from onnxprobe.graph.weight_files import is_left

    if isinstance(path, Model) and any(is_left(t) for t in path.proto.graph.initializer):
        return Model.of(path.proto, path.source, list(path.warnings))
    if isinstance(path, (onnx.ModelProto, Model)):
        return as_model(path, "load")
    if not isinstance(path, PATH):
        raise UsageError(f"load: expected the path of an .onnx file, an onnx.ModelProto or an api.Model, got {what_came(path)}")
    return _load(path)


def proto_of(model, what: str = "model") -> onnx.ModelProto:
    """The ModelProto of a Model, a path or a ModelProto, not copied: for functions that only read it."""
    return model if isinstance(model, onnx.ModelProto) else as_model(model, what).proto


def model_file(model, what: str = "model") -> str | os.PathLike:
    """The file of a path or of a Model loaded from one: surgery reads the file itself (lazily, external
    weights left on disk); an in-memory model (a ModelProto, a Model of no file) is saved to a temporary
    copy first."""
    if isinstance(model, PATH):
        return model
    if isinstance(model, Model) and os.path.isfile(model.source):
        return model.source
    if isinstance(model, (Model, onnx.ModelProto)):
        proto = model.proto if isinstance(model, Model) else model
        check_loaded(proto, what)
        return _saved_copy(proto)
    raise UsageError(f"{what}: expected the path of an .onnx file or an api.Model loaded from one, got {what_came(model)}")


def _saved_copy(proto: onnx.ModelProto) -> str:
    """An in-memory model written to a temporary folder of its own, removed when the process ends (its
    weights beside it past protobuf's 2 GB); the file is named "in-memory.onnx", as reports show it."""
    import atexit
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="onnxprobe-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = os.path.join(folder, "in-memory.onnx")
    big = proto.ByteSize() > 1_800_000_000
    onnx.save_model(proto, path, save_as_external_data=big, all_tensors_to_one_file=True,
                    location="in-memory.onnx.data" if big else None)
    return path


def as_names(names, what: str) -> list[str]:
    """Tensor names as a list: one ``str`` is one name (never its characters), None is none."""
    if names is None:
        return []
    if isinstance(names, str):
        return [names]
    if isinstance(names, Iterable) and not isinstance(names, (bytes, Mapping)):
        names = list(names)
        if all(isinstance(n, str) for n in names):
            return names
        bad = next(n for n in names if not isinstance(n, str))
        raise UsageError(f"{what}: tensor names are strings, got {what_came(bad)}")
    raise UsageError(f"{what}: expected a tensor name or a list of them, got {what_came(names)}")


def as_inputs(inputs) -> InputSpec | None:
    """An InputSpec as it is; a dict of arrays by input name (or the ``Feeds`` of ``api.feeds``) as the
    InputSpec that gives exactly those arrays."""
    if inputs is None or isinstance(inputs, InputSpec):
        return inputs
    if isinstance(inputs, Feeds):
        inputs = inputs.values
    if isinstance(inputs, Mapping):
        return InputSpec(arrays=dict(inputs), arrays_from="the arrays given")
    raise UsageError(f"inputs: expected an api.InputSpec or a dict of arrays by input name, got {what_came(inputs)}")


def checked_feed(model: onnx.ModelProto, feed) -> dict[str, np.ndarray]:
    """A feed given for a run, checked as ``layers`` checks given arrays (``runtime.feeds.make_feeds``:
    names, dtypes, fixed dimensions) and for completeness, which make_feeds does not check (it fills
    what is missing with random data): onnxruntime would say either in its own terms."""
    if isinstance(feed, Feeds):
        feed = feed.values
    if not isinstance(feed, Mapping):
        raise UsageError(f"feed: expected a dict of arrays by input name, got {what_came(feed)}")
    values = make_feeds(model, InputSpec(arrays=dict(feed), arrays_from="the feed")).values  # unknown names first
    specs = _model_inputs(model)
    missing = [s.name for s in specs if s.name not in feed]
    if missing:
        raise UsageError(f"missing input {quote(missing[0])}: the feed gives every input of the model, "
                         f"which are: {', '.join(s.describe() for s in specs)}")
    return values


def model_inputs(model: ModelLike) -> list[ModelInput]:
    """The inputs the model's user gives (initializers left out) of a Model, a path or a ModelProto."""
    return _model_inputs(proto_of(model))


def named_by_position(arrays: Mapping[str, np.ndarray], model: ModelLike) -> dict[str, np.ndarray]:
    """``arrays`` with a test data set's tensors without a name (its ``input_N.pb``) named after the model's
    inputs of their positions, as the feeds of ``--inputs`` bind them (ONNX's test runner's rule)."""
    return by_position(arrays, [s.name for s in model_inputs(model)], "input")


class GivenInputs(NamedTuple):
    """What ``--inputs`` (and the debugger's ``inputs``) read (``given_inputs``): the arrays by input name, and
    whether they are every input the model takes (``InputSpec.arrays_complete``): an ONNX test data set without
    input_N.pb is the data set of a model without inputs (onnx's test_constant), whose inputs are none, not
    seeded random data."""
    arrays: dict[str, np.ndarray]
    complete: bool


def given_inputs(path: str | os.PathLike, model: ModelLike | None = None) -> GivenInputs:
    """The one reader of ``--inputs PATH`` (``input_spec``) and of the debugger's ``inputs PATH``: an ``.npz``
    keyed by input name, or an ONNX test data set folder (its ``input_N.pb``; with ``model``, one without a name
    bound to the model's input of its position). A file of no arrays is refused (every input would be seeded
    random data, without a word); a folder of expected outputs alone reads as no inputs, complete."""
    given, complete = read_given(path)
    return GivenInputs(named_by_position(given, model) if model is not None else given, complete)


def read_inputs(path: str | os.PathLike, model: ModelLike) -> dict[str, np.ndarray]:
    """The arrays ``--inputs`` reads (``given_inputs``), each named after the model's input it feeds."""
    return given_inputs(path, model).arrays


MAP = ("path", "--map")  # read_map's parameter and the flag it reads, as its messages name them (errors.setting_error)
MAX_MAP_BYTES = 256 * 2**20  # a map of even a million names is far smaller


def read_map(path: str | os.PathLike) -> dict[str, str]:
    """A ``--map`` file: a JSON object {"tensor in A": "tensor in B"} (recorded as an input: never written)."""
    import json

    if not isinstance(path, PATH):
        raise setting_error(UsageError, MAP, f": expected the path of a JSON file, got {what_came(path)} (a dict of names goes in user_map=)")
    path = input_file(path, "JSON file", MAP, pipe_ok=True)  # a missing file, a folder, '-': said so
    try:
        data = read_bounded(path, MAX_MAP_BYTES)
        if len(data) > MAX_MAP_BYTES:
            raise setting_error(UsageError, MAP, f"{clean(str(path))}: over {MAX_MAP_BYTES >> 20} MiB; not a map of tensor names")
        user_map = json.loads(data, object_pairs_hook=_entries)
    except OSError as e:
        raise setting_error(UsageError, MAP, f"{clean(str(path))}: cannot read it ({e.strerror or e})") from None
    except ValueError as e:
        raise setting_error(UsageError, MAP, f"{clean(str(path))}: not JSON ({one_line(str(e))})") from None
    check_map(user_map, (*MAP, str(path)))
    if getattr(user_map, "twice", None):  # json.loads kept the last entry of a key and dropped the others, silently
        k, first, second = user_map.twice
        raise setting_error(UsageError, MAP, f"{clean(str(path))}: tensor {quote(k)} of A is given twice "
                         f"({quote(first)} and {quote(second)}); give one entry per tensor")
    protect(path, "the --map file")
    return dict(user_map)


class _Entries(dict):
    """A JSON object that remembers its first key given twice (``twice``: key, first value, second)."""

    twice: tuple | None = None


def _entries(pairs: list) -> _Entries:
    out = _Entries()
    for k, v in pairs:
        if k in out and out.twice is None:
            out.twice = (k, out[k], v)
        out.setdefault(k, v)
    return out


def check_map(user_map, what: str | tuple[str, ...] = "user_map") -> None:
    """A tensor map (``--map``, ``user_map=``) is a dict of names {tensor of A: tensor of B}, or None; ``what``:
    where it came from, said first (``errors.error_about``)."""
    if user_map is not None and not (isinstance(user_map, Mapping)
                                     and all(isinstance(k, str) and isinstance(v, str) for k, v in user_map.items())):
        bad = (next((f"{k!r}: {v!r}" for k, v in user_map.items() if not (isinstance(k, str) and isinstance(v, str))), None)
               if isinstance(user_map, Mapping) else None)
        got = f"an entry {clean(bad)[:80]} that is not two names" if bad else f"a {type(user_map).__name__}"
        raise error_about(UsageError, what, f": expected a dict {{tensor of A: tensor of B}} of names, got {got}")


def save_npz(arrays: Mapping[str, np.ndarray] | Iterable[Mapping[str, np.ndarray]], path: str | os.PathLike) -> None:
    """Write ``arrays`` (tensor name -> array) to ``path`` (``runtime.npz.save_npz``: any names). ``arrays`` may
    also be an iterable of such dicts (a generator of the runs of a fetch): each is written as it comes, so only
    one of them need be alive at a time; the file appears when the last is written."""
    def named(part) -> Mapping[str, np.ndarray]:
        if not isinstance(part, Mapping) or not all(isinstance(k, str) for k in part):
            raise UsageError(f"save_npz: expected a dict of arrays by tensor name, got {what_came(part)}")
        return part

    if isinstance(arrays, Mapping) or isinstance(arrays, (str, bytes)) or not isinstance(arrays, Iterable):
        return _npz.save_npz(named(arrays), path)
    if isinstance(arrays, (list, tuple)):  # all at hand: refused before the file is started
        if not all(isinstance(p, Mapping) for p in arrays):
            named(arrays)
    with _npz.NpzWriter(path) as out:
        for part in arrays:
            out.add_all(named(part))
            del part  # dropped before the next is made


def check_shape(spec: ModelInput, shape: tuple[int, ...], what: str | tuple[str, ...]) -> tuple[int, ...]:
    """``shape`` (a tuple of ints) if input ``spec`` (one of ``model_inputs(model)``) can take it, else a
    UsageError that starts with ``what`` (a setting as (API parameter, flag[, value]), or text)."""
    as_result(spec, ModelInput, "an input of the model (api.model_inputs(model) lists them)", "spec")
    if not isinstance(shape, (tuple, list)) or not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in shape):
        raise UsageError(f"shape: expected a tuple of ints, got {what_came(shape)}")
    if not isinstance(what, str) and not (isinstance(what, tuple) and len(what) >= 2 and all(isinstance(w, str) for w in what)):
        raise UsageError(f"what: expected what the shape is about, text or (API parameter, flag[, value]), got {what_came(what)}")
    return _check_shape(spec, tuple(int(d) for d in shape), what)


def feed_digest(arrays: Mapping[str, np.ndarray]) -> str:
    """16 hex digits that name a set of inputs by their values (names, dtypes, shapes, bytes), as a dataset's
    reports list their samples (``runtime.feeds.feed_digest``); ``arrays``: input name -> array."""
    # a numpy scalar too: a 0-d input read from a file comes as one (np.bool_, np.int64)
    if not isinstance(arrays, Mapping) or not all(isinstance(k, str) and isinstance(v, (np.ndarray, np.generic)) for k, v in arrays.items()):
        raise UsageError(f"arrays: expected a dict of input name -> numpy array, got {what_came(arrays)}")
    return _feed_digest(arrays)


def has_statistics(dtype: np.dtype) -> bool:
    """Whether values of ``dtype`` (a numpy dtype, or what ``np.dtype`` takes: 'float32') get statistics:
    numbers, booleans and bfloat16, not strings."""
    try:
        made = np.dtype(dtype) if dtype is not None and not isinstance(dtype, (bool, int, float)) else None
    except TypeError:
        made = None
    if made is None:
        raise UsageError(f"dtype: expected a numpy dtype (an array's .dtype, or 'float32'), got {what_came(dtype)}")
    return _has_statistics(made)


def raw_batches(tensors: list[tuple[str, tuple | None, str | None]], max_memory: int | None = None) -> list[list[str]]:
    """The names of ``tensors`` (name, shape, dtype) packed, in order, into runs whose raw values take at most
    half of ``max_memory`` bytes each (default: a quarter of the available memory; onnxruntime's buffers and
    their numpy copies both exist for a moment); a shape not known counts as nothing, a tensor larger than
    that gets a run of its own."""
    from onnxprobe.runtime.budget import default_budget, nbytes, plan_chunks

    max_memory = as_max_memory(max_memory)
    if not isinstance(tensors, (list, tuple)) or not all(
            isinstance(t, (list, tuple)) and len(t) == 3 and isinstance(t[0], str) for t in tensors):
        raise UsageError(f"tensors: expected a list of (name, shape or None, dtype or None), got {what_came(tensors)}")
    sizes = [(n, nbytes(tuple(s), d) if s is not None and all(isinstance(x, (int, np.integer)) for x in s) else 0)
             for n, s, d in tensors]
    return plan_chunks(sizes, (max_memory or default_budget()) // 2)


def same_float_values(a: "ModelLike", b: "ModelLike", feed: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``feed`` (made for model ``a``) as ``diff`` gives it to both models: each input that ``a`` and ``b`` take in
    two float types (a float16 model and its float32 original) holds values both types hold exactly, rounded to
    the narrower one and kept in ``a``'s dtype (UsageError where one rounds to Inf), so that each model, casting
    them to its own type, computes from the same numbers; every other input as given."""
    from onnxprobe.compare.measure import FLOATS, same_values

    take = {s.name: s.elem_type for s in _model_inputs(as_model(b).proto)}
    floats = {s.name: (s.elem_type, take[s.name]) for s in _model_inputs(as_model(a).proto)
              if s.name in take and s.elem_type != take[s.name] and s.elem_type in FLOATS and take[s.name] in FLOATS}
    return same_values(dict(feed), floats)
