"""``OnceRunner``: a runner whose model gives every wanted value in one run (``diff --grad``'s backward
graphs), answering later calls on the same feeds from that run."""

from __future__ import annotations

import numpy as np

from onnxprobe.runtime.runners.base import Runner


class OnceRunner(Runner):
    """A runner whose model gives every wanted value in one run (a backward graph: the loss and all the
    gradients): the first ``values`` call on a feed computes all of ``names`` (with ``extra`` inputs
    added to the feeds), later calls on the same feed are answered from that run."""

    def __init__(self, inner: Runner, names: list[str], extra: dict | None = None):
        super().__init__(inner.model, inner.config, inner.label)
        self.inner = inner
        self.kind = inner.kind
        self.runs_graphs = False  # the cached run is what it serves; derived graphs are not run through it
        self.names = list(dict.fromkeys(names))
        self.extra = dict(extra or {})
        self.device = inner.device
        self.notes = inner.notes
        self._feed_id = None
        self.cached: dict = {}

    def describe(self) -> str:
        return self.inner.describe()

    def facts(self) -> dict:
        return self.inner.facts()

    def integer_kernels(self) -> dict[str, int]:
        return self.inner.integer_kernels()

    def values(self, names: list[str], feeds: dict[str, np.ndarray], *, keep_on_device: bool = False) -> dict:
        if self._feed_id != id(feeds):
            self.cached = self.inner.values(self.names, {**feeds, **self.extra})
            self._feed_id = id(feeds)
        return {n: self.cached[n] for n in names if n in self.cached}
