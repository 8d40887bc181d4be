"""The debugger's inputs as its models take them, with no I/O beyond reading the files the user names
(through the API): which inputs the session's models have, each model's feed from the session's input
specification (``session.inputs``; made again only when that changed, a second model taking the first
model's values where they fit), and changes to the specification, adopted only when every model can be
fed from it. ``Feeding`` is that part of ``state.State``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from onnxprobe import api
from onnxprobe.errors import OnnxProbeError, UsageError, plain_class
from onnxprobe.session.inputs import SessionInputs
from onnxprobe.session.targets import Target
from onnxprobe.text import as_typed, clean, quote
from onnxprobe.types import named_dim

CHOSEN = "random by request"  # SessionInputs.origins of an input `input X random` made seeded random data


class Feeding:
    """The inputs' part of ``State`` (its base class): it works on the State's ``targets``, ``a``,
    ``inputs`` and ``replace_model``."""

    targets: dict[str, Target]
    inputs: SessionInputs

    def specs(self, t: Target):
        return api.model_inputs(t.model.proto)

    def specs_of(self, model: api.Model):
        return api.model_inputs(model.proto)

    def input_names(self) -> set[str]:
        """The inputs of every model of the session, as loaded or with its backward graph (its loss's labels)."""
        return {s.name for t in self.targets.values() for m in (t.model, t.forward) if m is not None for s in self.specs_of(m)}

    def input_name(self, typed: str) -> str:
        """The input ``typed`` names, typed as listings print it (``text.as_typed``); refused when no model
        of the session takes it."""
        name = as_typed(typed, self.input_names())
        if name not in self.input_names():
            raise self._unknown_input(name)
        return name

    def _unknown_input(self, name: str, where: str = "") -> UsageError:
        expected = ", ".join(s.describe() for s in self.specs(self.a)) or "none"
        return UsageError(f"unknown input name {quote(name)}{where}; the model's inputs are: {expected}")

    def _check_inputs(self, flags: bool = False) -> None:
        """Every input the session's inputs name is one of a model's; ``flags``: they are the command line's,
        whose flag the error names as `layers` names it ('(--input)', '(--shape)')."""
        known = self.input_names()
        given = [(n, " (--input)") for n in self.inputs.files] + [(n, " (--shape)") for n in self.inputs.shapes] + [
            (n, f" (from {clean(self.inputs.spec.arrays_from)})") for n in self.inputs.arrays]
        for name, where in given:
            if name not in known:
                raise self._unknown_input(name, where if flags else "")

    def feed(self, t: Target) -> tuple[dict[str, np.ndarray], str, api.Feeds]:
        """(feed, digest, Feeds) for a target, recomputed only when the input specification changed.
        A second model takes the first model's values for inputs of the same name, dtype and shape."""
        key = self.inputs.key()
        other = self.targets.get("b") if t.label == "a" else None
        if t.label != "a":
            key = key + (self.feed(self.a)[1],)
        elif other is not None:  # A's values rounded where B takes an input in a narrower float type
            key = key + (tuple((s.name, s.elem_type) for s in self.specs(other)),)
        if t.feed_cache is not None and t.feed_cache[0] == key:
            return t.feed_cache[1], t.feed_cache[2], t.feed_cache[3]
        names = {s.name for s in self.specs(t)}
        spec = self.inputs
        arrays = {k: v for k, v in spec.arrays.items() if k in names}
        files = {k: v for k, v in spec.files.items() if k in names and k not in arrays}
        shapes = {k: v for k, v in spec.shapes.items() if k in names}
        if t.label != "a":
            a_feed = self.feed(self.a)[0]
            for s in self.specs(t):
                given = arrays.get(s.name)
                # arrays given in A's float type (--inputs of a float32 model A, B its float16 copy): A's values
                other_float = (isinstance(given, np.ndarray) and given.dtype.kind == "f" and s.kind == "tensor_type"
                               and s.dtype.kind == "f" and given.dtype != s.dtype)
                if s.name in a_feed and (s.name not in arrays or other_float):
                    value = a_feed[s.name]
                    if s.kind == "tensor_type" and isinstance(value, np.ndarray) and value.dtype.kind == "f" and s.dtype.kind == "f":
                        value = value.astype(s.dtype)  # another float type: A's values, which both types hold (feed)
                    try:
                        arrays[s.name] = api.check_value(s, value, "from model a")
                        files.pop(s.name, None)
                    except UsageError:
                        pass
        fs = api.feeds(t.model, api.InputSpec(seed=spec.seed, int_range=spec.int_range, shapes=shapes, files=files,
                                              arrays=arrays, arrays_from=spec.arrays_from(arrays),
                                              arrays_complete=spec.spec.arrays_complete))
        if other is not None:  # what diff feeds both models: values each of their float types holds exactly
            fs = dataclasses.replace(fs, values=api.same_float_values(t.model, other.model, fs.values))
        # an input made random by `input X random` after `inputs FILE.npz` is no input the file lacks: the feeds' note
        # 'input X: not in FILE.npz, so seeded random data' was false (the file holds it)
        chosen = {n for n, o in self.inputs.origins.items() if o == CHOSEN and n not in arrays and n not in files}
        if chosen & set(fs.about):
            said_of = {m for n in chosen for m in fs.about.get(n, [])}
            fs = dataclasses.replace(fs, notes=[m for m in fs.notes if m not in said_of],
                                     about={n: ms for n, ms in fs.about.items() if n not in chosen})
        digest = api.feed_digest(fs.values)
        t.feed_cache = (key, fs.values, digest, fs)
        return fs.values, digest, fs

    def set_input(self, name: str, how: str, shape: tuple[int, ...] | None = None) -> list[str]:
        """``how``: 'random' (optionally with a new ``shape``; without one, the model's own shape again), a
        .npy/.pb file, or a value, which replaces an earlier random shape (it held the value to that shape).
        Returns notes (``_try_inputs``)."""
        name = self.input_name(name)
        arrays = {k: v for k, v in self.inputs.arrays.items() if k != name}
        files = {k: v for k, v in self.inputs.files.items() if k != name}
        shapes = {k: v for k, v in self.inputs.shapes.items() if k != name}
        if how == "random":
            if shape is not None:
                shapes[name] = shape
        else:
            files[name] = how
        origins = {**self.inputs.origins, name: CHOSEN} if how == "random" else None  # (see feed)
        new = self.inputs.changed(arrays=arrays, files=files, shapes=shapes, origins=origins)
        notes = self._follow(name, new, shape) if how != "random" or shape is not None else []
        return notes + self._try_inputs(new)

    def _follow(self, name: str, new: SessionInputs, shape: tuple[int, ...] | None) -> list[str]:
        """The other inputs of seeded random data that share a named dimension with input ``name`` follow
        the size its new value (``shape``, else its file or value) gives it: their own shapes in ``new``
        (``input X random DIMS``, --shape) changed to it, in place; notes name each one redrawn. An input the
        user gave (a file, a value, ``inputs FILE.npz``) of another size is refused, saying how to change it."""
        shared = []  # (target, the spec of name, the other inputs sharing a named dimension with it)
        for t in self.targets.values():
            specs = self.specs(t)
            mine = next((s for s in specs if s.name == name and s.shape is not None), None)
            dims = {d for d in (mine.shape if mine else ()) if named_dim(d)}
            others = [s for s in specs if s.name != name and s.shape is not None and dims & set(s.shape)]
            if others:
                shared.append((t, mine, others))
        if not shared:
            return []
        if shape is None:  # a file or a value: its shape, fed with the inputs sharing its dimensions left to follow it
            t, mine, others = shared[0]
            drop = {s.name for s in others}
            probe = dataclasses.replace(new.spec, arrays_complete=False, **{
                f: {k: v for k, v in getattr(new, f).items() if k not in drop} for f in ("shapes", "files", "arrays")})
            try:
                shape = tuple(np.shape(api.feeds(t.model, probe).values[name]))
            except OnnxProbeError:
                return []  # adopting ``new`` says what is wrong
        notes = []
        for t, mine, others in shared:
            sizes = {d: n for d, n in zip(mine.shape, shape) if named_dim(d)}
            try:
                old = self.feed(t)[0]
            except OnnxProbeError:
                continue
            for o in others:
                if o.name not in old:
                    continue
                was = tuple(np.shape(old[o.name]))
                moved = [(d, n) for d, n in zip(o.shape, was) if named_dim(d) and d in sizes and sizes[d] != n]
                if not moved:
                    continue
                d, n = moved[0]
                if o.name in new.files or o.name in new.arrays:
                    raise UsageError(
                        f"dimension {quote(d)} is {sizes[d]} for input {clean(name)} ({clean(new.source(name))}) but {n} "
                        f"for input {clean(o.name)} ({clean(new.source(o.name))}), which was given: one named dimension has "
                        f"one size; give input {clean(o.name)} at that size too (input {clean(o.name)} FILE|VALUE|random), "
                        "or load every input with `inputs FILE.npz`")
                now = tuple(sizes.get(d, n) if named_dim(d) else n for d, n in zip(o.shape, was))
                if o.name in new.shapes:
                    new.shapes[o.name] = tuple(sizes.get(d, n) if named_dim(d) else n
                                               for d, n in zip(o.shape, new.shapes[o.name]))
                    now = new.shapes[o.name]
                which = ", ".join(quote(x) for x, _ in moved)
                notes.append(f"input {clean(o.name)}: redrawn at {'x'.join(map(str, now))} (dimension{'s' if len(moved) > 1 else ''} "
                             f"{which} of input {clean(name)})")
        return list(dict.fromkeys(notes))

    def set_seed(self, seed: int) -> list[str]:
        return self._try_inputs(self.inputs.changed(seed=seed))

    def set_all_inputs(self, arrays: dict[str, np.ndarray], origin: str, complete: bool = False) -> list[str]:
        """The arrays of a file (``api.given_inputs``), each from ``origin`` ("from FILE"), in place of what the
        session had for those inputs. ``complete``: they are every input the models take (``InputSpec.arrays_complete``:
        a test data set of a model without inputs): they replace all the session had, and a model that takes an
        input they lack is refused, naming it, as --inputs refuses it (never seeded random data in its place)."""
        if complete:
            return self._try_inputs(self.inputs.changed(arrays=dict(arrays), files={}, shapes={}, origins={k: origin for k in arrays},
                                                        arrays_complete=True, arrays_from=origin.removeprefix("from ")))
        new_arrays = {**self.inputs.arrays, **arrays}
        files = {k: v for k, v in self.inputs.files.items() if k not in arrays}
        origins = {**self.inputs.origins, **{k: origin for k in arrays}}
        shapes = {k: v for k, v in self.inputs.shapes.items() if k not in arrays}  # the arrays are their shapes
        return self._try_inputs(self.inputs.changed(arrays=new_arrays, files=files, origins=origins, shapes=shapes,
                                                    arrays_complete=False))

    def _of_model(self, t: Target, e: OnnxProbeError) -> OnnxProbeError:
        """``e``, which feeding model ``t`` raised, naming that model where the session has two: the inputs are
        both models' (`inputs FILE --model b` that fits b but not a said "the model expects" a's shape)."""
        if len(self.targets) < 2:
            return e
        head = f"model {t.label} ({clean(str(t.model.source))}), whose inputs the other model shares: "
        out = plain_class(e)(head + str(e))
        out.cli_message = head + (e.cli_message or str(e))
        return out

    def _try_inputs(self, new: SessionInputs) -> list[str]:
        """Adopt ``new`` only if every model can be fed from it (a bad file or shape leaves things as they
        were). A backward graph (``grad``) is made for the input shapes it was attached at: inputs of other
        shapes that the model as loaded takes drop it (the notes returned say so: run ``grad`` again)."""
        old = self.inputs
        saved = {lbl: (t.feed_cache, t.model) for lbl, t in self.targets.items()}
        self.inputs = new
        stale = []
        try:
            self._check_inputs()
            for t in self.targets.values():
                t.feed_cache = None
                try:
                    fed = self.feed(t)[0]
                    # inputs the backward graph takes but of other shapes than it was made for (a 0-size batch
                    # fixes no dimension that the next feed check could catch): stale too
                    if t.forward is not None and t.grad_shapes and any(
                            tuple(np.shape(fed[k])) != v for k, v in t.grad_shapes.items() if k in fed):
                        raise UsageError("the backward graph was made for other input shapes")
                except OnnxProbeError as e:
                    if t.forward is None:
                        raise self._of_model(t, e) from None
                    t.model, t.feed_cache = t.forward, None  # can the model as loaded take them?
                    self.feed(t)
                    stale.append(t)
        except BaseException:
            self.inputs = old
            for lbl, t in self.targets.items():
                t.feed_cache, t.model = saved[lbl]
            raise
        for t in stale:
            self.replace_model(t, t.forward)
        return [f"{'model ' + t.label + ': ' if len(self.targets) > 1 else ''}the backward graph was made for the old "
                "input shapes and is dropped; run `grad` again for these" for t in stale]
