"""A diff's matching and criteria as JSON and back (``freeze``, ``thaw``): what the plan cache keeps of a diff
so that a repeated one is served without reading the models again (``api.diff_direct``).

JSON, not pickle: an entry is data that is checked, never code that runs, whoever could write to the cache's
folder. Only the classes in ``CLASSES`` come back, each from its own fields (a field it does not have, or one it
needs missing, is a ValueError: the entry is then a miss); tuples, sets and dicts whose keys are not strings are
tagged, so that what comes back compares equal to what went in. An object met twice (a pair of the report and of
the matching, an observable of a pair and of an unmatched entry) is written once and comes back as one object.
"""

from __future__ import annotations

import functools
import importlib
import math
from dataclasses import fields, is_dataclass

# the classes kept, by name, and the module of each: imported when one is met (a key of a request that holds a
# Tolerance alone, ``api.diff_lean``, is made before onnx and the matching's modules are)
CLASSES = {"Observable": "onnxprobe.match.observe", "Pair": "onnxprobe.match.pairs", "Unmatched": "onnxprobe.match.pairs",
           "Matching": "onnxprobe.match.pairs", "Tolerance": "onnxprobe.stats.metrics"}
_TAGS = ("~", "~t", "~s", "~m", "~f", "~r")
_PLAIN = (str, int, bool, type(None))


@functools.lru_cache(maxsize=None)
def _kept(name: str) -> tuple[type, tuple[str, ...], bool]:
    """The class kept as ``name`` (``CLASSES``), its fields' names, and whether its constructor takes them in that
    order, by position (every field an ``__init__`` one, none keyword-only)."""
    c = getattr(importlib.import_module(CLASSES[name]), name)
    own = fields(c)
    return c, tuple(f.name for f in own), all(f.init and not getattr(f, "kw_only", False) for f in own)


def freeze(x) -> dict:
    """``x`` as JSON-able data ({"objects": [...], "value": ...}); a ValueError for what ``thaw`` could not make again."""
    objects: list = []
    seen: dict[int, int] = {}
    keep = []  # the objects seen, alive till the end (an id is unique only among live objects)

    def walk(x):
        if x is None or type(x) in (bool, int, str):  # their subclasses (an IntEnum, numpy's) are refused below
            return x
        if type(x) is float:  # JSON has no inf or nan
            return x if math.isfinite(x) else {"~f": repr(x)}
        if is_dataclass(x) and not isinstance(x, type):
            name = type(x).__name__
            # its own module first: a class of another module is refused without importing the one kept
            if CLASSES.get(name) != type(x).__module__ or _kept(name)[0] is not type(x):
                raise ValueError(f"{name} is not kept in the cache")
            if id(x) not in seen:
                body = [walk(getattr(x, f)) for f in _kept(name)[1]]
                seen[id(x)] = len(objects)
                keep.append(x)
                objects.append([name, body])
            return {"~r": seen[id(x)]}
        if type(x) is tuple:
            return {"~t": [walk(v) for v in x]}
        if type(x) in (set, frozenset):
            return {"~s": [walk(v) for v in sorted(x, key=repr)]}
        if type(x) is list:
            return [walk(v) for v in x]
        if type(x) is dict:
            if all(type(k) is str and k not in _TAGS for k in x):
                return {k: walk(v) for k, v in x.items()}
            return {"~m": [[walk(k), walk(v)] for k, v in x.items()]}
        raise ValueError(f"a {type(x).__name__} is not kept in the cache")

    value = walk(x)
    return {"objects": objects, "value": value}


def thaw(data: dict):
    """What ``freeze`` made ``data`` from; a ValueError (or TypeError, KeyError) for anything it could not have made."""
    if not isinstance(data, dict) or not isinstance(data.get("objects"), list):
        raise ValueError("not an entry's value")
    made: list = []

    def walk(x):
        t = type(x)
        if t in _PLAIN or t is float:
            return x
        if t is list:
            return x if all(type(v) in _PLAIN for v in x) else [walk(v) for v in x]
        if t is not dict:
            raise ValueError("not an entry's value")
        if len(x) == 1:
            tag, v = next(iter(x.items()))
            if tag == "~r":
                if type(v) is not int or not 0 <= v < len(made):
                    raise ValueError("not an entry's value")
                return made[v]
            if tag == "~t" and type(v) is list:
                return tuple(v) if all(type(e) in _PLAIN for e in v) else tuple(walk(e) for e in v)
            if tag == "~s" and type(v) is list:
                return {walk(e) for e in v}
            if tag == "~f" and v in ("inf", "-inf", "nan"):
                return float(v)
            if tag == "~m" and type(v) is list and all(type(e) is list and len(e) == 2 for e in v):
                return {walk(k): walk(w) for k, w in v}
            if tag in _TAGS:
                raise ValueError("not an entry's value")
        return {k: walk(v) for k, v in x.items()}

    plain = (*_PLAIN, float)
    for entry in data["objects"]:  # each made from those before it (freeze writes an object after what it holds)
        if type(entry) is not list or len(entry) != 2 or type(entry[0]) is not str or entry[0] not in CLASSES \
                or type(entry[1]) is not list or len(entry[1]) != len(_kept(entry[0])[1]):
            raise ValueError("not an entry's value")
        c, names, positional = _kept(entry[0])
        # a plain field as it is, without a call of walk (most are: 36,000 objects of a deep model's diff, 0.98 ->
        # 0.45 s), and the fields by position where the constructor takes them so
        values = [v if type(v) in plain else walk(v) for v in entry[1]]
        made.append(c(*values) if positional else c(**dict(zip(names, values))))
    return walk(data["value"])
