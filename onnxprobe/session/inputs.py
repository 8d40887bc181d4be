"""The debugger's inputs: an ``api.InputSpec`` that changes as the user types (``input``, ``seed``,
``inputs FILE.npz``), with a version that moves on each change and where each given array came from.
No I/O beyond reading the files the user names (through the API)."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field


from onnxprobe.errors import cli_words
from onnxprobe import api
from onnxprobe.text import clean


@dataclass
class SessionInputs:
    spec: api.InputSpec = field(default_factory=api.InputSpec)
    version: int = 0  # bumped on every change
    origins: dict[str, str] = field(default_factory=dict)  # name -> where an array came from

    # the spec's fields, read-only here
    @property
    def seed(self) -> int:
        return self.spec.seed

    @property
    def int_range(self) -> tuple[int, int]:
        return self.spec.int_range

    @property
    def shapes(self) -> dict:
        return self.spec.shapes

    @property
    def files(self) -> dict:
        return self.spec.files

    @property
    def arrays(self) -> dict:
        return self.spec.arrays

    def source(self, name: str) -> str:
        if name in self.arrays:
            return self.origins.get(name, f"from {self.spec.arrays_from}")  # the command line's: --inputs FILE
        if name in self.files:
            return self.files[name]
        extra = f", shape {'x'.join(map(str, self.shapes[name]))}" if name in self.shapes else ""
        return f"random (seed {self.seed}{extra})"

    def arrays_from(self, names) -> str:
        """Where the arrays of ``names`` came from, as a feed's errors name it ('input x (from all.npz)')."""
        said = {self.source(n).removeprefix("from ") for n in names if n in self.arrays}
        if not said and self.spec.arrays_complete:  # a file of no inputs (a test data set of outputs alone)
            return self.spec.arrays_from
        return said.pop() if len(said) == 1 else "the session's inputs"

    def changed(self, *, origins: dict[str, str] | None = None, **changes) -> "SessionInputs":
        """A copy with the spec's fields in ``changes`` replaced (dicts copied) and the next version."""
        base = dict(shapes=dict(self.shapes), files=dict(self.files), arrays=dict(self.arrays))
        base.update(changes)
        return SessionInputs(dataclasses.replace(self.spec, **base), self.version + 1,
                             dict(self.origins) if origins is None else origins)

    def key(self) -> tuple:
        stamps = []
        for name, f in sorted(self.files.items()):
            try:
                st = os.stat(f)
                stamps.append((name, f, st.st_mtime_ns, st.st_size))
            except OSError:
                stamps.append((name, f, None, None))
        return (self.version, self.seed, self.int_range, tuple(sorted(self.shapes.items())), tuple(stamps))


def session_notes(fs: api.Feeds, name: str | None = None) -> list[str]:
    """Feed notes in the session's words (those about input ``name`` alone, when given): one line per input
    with guessed dimensions, and the command that fixes it, instead of the feeds' own (``Feeds.guessed``)."""
    guesses = set(fs.guessed.values())
    out = [cli_words(n) for n in (fs.notes if name is None else fs.about.get(name, [])) if n not in guesses]
    for n in fs.defaulted:
        if name is None or n == name:  # the feeds' wording, with the session's commands for the fix
            out.append(fs.guess_note(n, f"input {clean(n)} random DIMS, or start with --shape {clean(n)}=DIMS"))
    return out
