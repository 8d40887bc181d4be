"""Results computed from a model, kept for the next call with the same arguments: a dataset's samples
mostly share their shapes, so shape inference (``graph.shapes.concrete_sizes``) and derived graphs (the
introduced-error cones) are made once, not per sample.

Our own few lines rather than ``functools.lru_cache``: the model, a protobuf, is not hashable and is
keyed by identity, held with its entry so that its id is not reused while the entry lives.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable

import numpy as np


def feed_key(feeds: dict) -> tuple:
    """The feeds' names, shapes and dtypes (not their values), as a hashable key."""
    return tuple(sorted((k, tuple(np.shape(v)), str(getattr(v, "dtype", type(v).__name__))) for k, v in feeds.items()))


class ModelMemo:
    """Values made from a model, for the last ``keep`` (model, key) pairs; ``dropped`` is called with
    the value of each entry let go (to remove its temporary files)."""

    def __init__(self, keep: int = 8, dropped: Callable[[Any], None] | None = None):
        self.keep = keep
        self.dropped = dropped
        self._items: OrderedDict = OrderedDict()

    def get(self, model, key, make: Callable[[], Any]):
        """The value kept for (``model``, ``key``), else ``make()``, kept."""
        k = (id(model), key)
        have = self._items.get(k)
        if have is not None and have[0] is model:
            self._items.move_to_end(k)
            return have[1]
        value = make()
        self._items[k] = (model, value)
        while len(self._items) > self.keep:
            _model, old = self._items.popitem(last=False)[1]
            if self.dropped is not None:
                self.dropped(old)
        return value
