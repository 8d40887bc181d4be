"""Matching with the shapes of the inputs a diff runs on.

``match.engine`` pairs tensors by structure only where both shapes are known (an op type alone is weak
evidence). A model whose shapes are computed at run time (a Reshape to a Concat of Shape values: PP-OCRv4
rec's attention blocks, most transformer exports with a dynamic axis) declares none for whole regions, and
a renamed copy of it left 125 tensors unmatched on each side. ``match_for_inputs`` matches as the engine
does; only when tensors of unknown shape stay unmatched on both sides does it infer each model's shapes
for the run's input shapes (``graph.shapes.shapes_with_folded``, which folds shape computations; a few
hundred milliseconds on such a model, so never when it cannot help) and match again with them. The
observables it returns are the sides' own: the concrete shapes decide pairs, they are not reported.
"""

from __future__ import annotations

from dataclasses import replace

import onnx

from onnxprobe.match.engine import Matching, Pair, Unmatched, match
from onnxprobe.match.observe import Observable


def _static(shape: tuple | None) -> bool:
    return shape is not None and all(isinstance(d, int) for d in shape)


def _concrete(model: onnx.ModelProto, input_shapes: dict) -> dict[str, tuple[int, ...]]:
    from onnxprobe.graph.shapes import shapes_with_folded

    concrete, folded = shapes_with_folded(model, input_shapes, fold=True)
    return {**folded, **concrete}


def _with_shapes(obs: list[Observable], shapes: dict[str, tuple[int, ...]], mapped: set[str]) -> list[Observable]:
    def known(o: Observable) -> tuple | None:
        s = shapes.get(o.name, shapes.get(o.key))
        # an inferred shape only fills in what the declared one leaves open (its rank, its symbolic dims)
        if s is None or (o.shape is not None and (len(s) != len(o.shape) or any(
                isinstance(d, int) and d != e for d, e in zip(o.shape, s)))):
            return o.shape
        return tuple(s)

    # a pair the user gave is made as declared (its shapes may differ only for other samples: checked when run)
    return [o if _static(o.shape) or mapped.intersection((o.name, o.key, o.probe)) else replace(o, shape=known(o))
            for o in obs]


def match_for_inputs(model_a: onnx.ModelProto, model_b: onnx.ModelProto | None, obs_a: list[Observable],
                     obs_b: list[Observable], user_map: dict[str, str] | None, input_shapes: dict | None) -> Matching:
    """``match.engine.match`` of the two observations, helped by the shapes each model's tensors take for
    ``input_shapes`` (name -> shape) where tensors of unknown shape are left unmatched on both sides (the
    module doc). ``model_b`` None: B's observables are not a model's (saved activations: their shapes are
    known)."""
    m = match(obs_a, obs_b, user_map)
    if not input_shapes or not any(not _static(u.obs.shape) for u in m.unmatched_a) or not any(
            not _static(u.obs.shape) for u in m.unmatched_b):
        return m
    shapes_a = _concrete(model_a, input_shapes)
    shapes_b = shapes_a if model_b is None or model_b is model_a else _concrete(model_b, input_shapes)
    mapped = {n for kv in (user_map or {}).items() for n in kv}
    new_a, new_b = _with_shapes(obs_a, shapes_a, mapped), _with_shapes(obs_b, shapes_b, mapped)
    if all(x is y for x, y in zip(new_a, obs_a)) and all(x is y for x, y in zip(new_b, obs_b)):
        return m  # inference could not tell any more either
    m2 = match(new_a, new_b, user_map)
    back = {id(n): o for n, o in [*zip(new_a, obs_a), *zip(new_b, obs_b)]}
    return Matching([Pair(back[id(p.a)], back[id(p.b)], p.strategy, p.reason) for p in m2.pairs],
                    [Unmatched(back[id(u.obs)], u.reason, u.cause) for u in m2.unmatched_a],
                    [Unmatched(back[id(u.obs)], u.reason, u.cause) for u in m2.unmatched_b])
