"""What the debugger keeps per loaded model, with no I/O: one ``Target`` per model (label ``a``, and ``b``
for a second model) holds the model, its ``GraphIndex``, its probe set (tensor names, in topological
order), its cached ``Results`` (per run key, ``state.State``) and a cursor (a node index, for
goto/step/back); a ``RunReport`` says what a request for results did.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from onnxprobe import api
from onnxprobe.types import RunInfo

RAW_CACHE_BYTES = 512 * 2**20  # raw tensors kept for show/save, per model


@dataclass
class Results:
    """What runs computed for one run key."""

    key: tuple | None = None
    stats: dict[str, api.TensorStats | None] = field(default_factory=dict)  # None: no statistics for this dtype
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    raw: OrderedDict = field(default_factory=OrderedDict)  # name -> array, least recently used first
    not_run: set[str] = field(default_factory=set)  # tensors of bodies that did not run: no value
    info: RunInfo | None = None
    notes: list[str] = field(default_factory=list)
    runs: int = 0

    def reset(self, key: tuple) -> None:
        self.__init__(key=key)

    def keep_raw(self, name: str, value: np.ndarray, limit: int = RAW_CACHE_BYTES) -> None:
        self.raw[name] = value
        self.raw.move_to_end(name)
        while len(self.raw) > 1 and sum(v.nbytes for v in self.raw.values()) > limit:
            self.raw.popitem(last=False)

    def keep_within(self, limit: int, keep: set[str] = frozenset()) -> None:
        """Drop the least recently used values kept, but those named in ``keep``, until they take at most ``limit``
        bytes (room for a run beside them)."""
        for name in [n for n in self.raw if n not in keep]:
            if sum(v.nbytes for v in self.raw.values()) <= limit:
                break
            del self.raw[name]


@dataclass
class RunReport:
    """What a request for results did."""

    computed: list[str]  # tensors computed now
    cached: int  # tensors already known
    reason: str  # why anything ran: "first run", "inputs changed", "3 new tensors"...
    info: RunInfo | None = None

    @property
    def ran(self) -> bool:
        return bool(self.computed)


@dataclass
class Target:
    label: str
    model: api.Model
    index: api.GraphIndex
    probes: list[str] = field(default_factory=list)
    results: Results = field(default_factory=Results)
    prober: api.Prober | None = None  # runs on the session's device, keeps its last sessions
    cursor: int | None = None
    feed_cache: tuple | None = None  # (spec key, feed, digest, Feeds)
    last_key: tuple | None = None
    forward: api.Model | None = None  # the model as loaded, once `grad` replaced it with its backward graph
    grad_shapes: dict | None = None  # the input shapes the backward graph was made for
    # the backward model that runs, where ``model`` is only its view in the model's own numbering (a copy
    # converted to a newer opset: GradPlan.numbered_as); None when ``model`` runs itself
    runs: api.Model | None = None
    # (the cursor a `where` hit left, the hit's position in topological order): `where --next` from there goes on
    # after that tensor, not after the node the cursor went to (a graph input's reader, whose outputs come later)
    where_hit: tuple[int | None, int] | None = None

    @property
    def name(self) -> str:
        return os.path.basename(self.model.source)
