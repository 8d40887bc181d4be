"""The finite-difference gradient check: the graph rewrites it needs, and its numerics.

``perturbable(model, loss, tensors)`` returns the forward + loss graph with one new input per checked
tensor t, ``onnxprobe.delta:<t>`` (or a fresh name of that stem, where the model has it: every name it adds is
one the model does not use), added to t before anything reads it (t' = t + delta), and the loss as its only
output: L(t + h v) is one run with delta = h v.

``check_gradients(items, loss, precision)`` is the check itself, a pure function over a callable loss
(``api.grad_check`` runs the perturbable model for it).

``to_float64(model)`` (``autodiff.float64_copy``) is the model in float64 the check runs where onnxruntime can.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper

from onnxprobe.autodiff.check32 import check_direction, check_float32
from onnxprobe.autodiff.float64_copy import to_float64  # noqa: F401 (the check's float64 copy, as callers import it)
from onnxprobe.autodiff.kinks import apart, several_kinks, unit
from onnxprobe.autodiff.nested import rename
from onnxprobe.errors import ExecutionError, first_line
from onnxprobe.graph.builder import all_names, fresh_name
from onnxprobe.graph.walk import toposort

DELTA = "onnxprobe.delta:"


def perturbable(model: onnx.ModelProto, loss: str, tensors: dict[str, tuple[int, list]]) -> tuple[onnx.ModelProto, dict[str, str]]:
    """``tensors``: name -> (elem type, runtime shape). Returns the model and each tensor's delta input."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    names = all_names(out)  # a valid model may use 'W.perturbed' or 'onnxprobe.delta:W' itself
    renamed = {t: fresh_name(names, f"{t}.perturbed") for t in tensors}
    deltas = {t: fresh_name(names, DELTA + t) for t in tensors}
    rename(list(g.node), renamed)  # If / Loop / Scan bodies read weights of the main graph too
    new_nodes = []
    for t, (elem, shape) in tensors.items():
        d = deltas[t]
        # of the tensor's rank, dimensions unknown: onnxruntime's own shape inference can disagree with its
        # kernels (MaxPool with ceil_mode and pads: inferred 5x5, computed 4x4), and a delta of the run's shape
        # then made the Add refuse to load
        g.input.append(helper.make_tensor_value_info(d, elem, [None] * len(shape)))
        new_nodes.append(helper.make_node("Add", [t, d], [renamed[t]], name=fresh_name(names, f"onnxprobe.check/{t}")))
    # the Adds go right after the producers: put them first and let a topological sort place them
    nodes = list(g.node) + new_nodes
    del g.node[:]
    g.node.extend(toposort(nodes, {i.name for i in g.input} | {i.name for i in g.initializer}))
    del g.output[:]
    g.output.append(helper.make_tensor_value_info(loss, 0, None))
    g.output[0].type.tensor_type.elem_type = _elem(model, loss) or TensorProto.FLOAT
    return out, deltas


def _elem(model: onnx.ModelProto, name: str) -> int | None:
    for vi in list(model.graph.value_info) + list(model.graph.output):
        if vi.name == name:
            return vi.type.tensor_type.elem_type
    return None


# --- the finite-difference check itself: pure numerics over a loss function ------------------------------

TOLERANCE = {"float64": 1e-6, "float64 (float32 gradients)": 1e-3, "float32": 5e-2}


@dataclass
class CheckItem:
    """One gradient to check: the analytic gradient ``grad`` (float64), the tensor's own value where it is
    known (weights, inputs, activations: directions then leave its exact zeros alone and scale with its
    magnitude), and its RMS (the step is relative to it)."""

    name: str
    grad: np.ndarray
    value: np.ndarray | None
    rms: float
    # ``value`` is, bit for bit, the tensor the loss perturbs in the check's precision (a weight or input, not an
    # activation read from another run): the perturbation actually applied, fl(t + delta) - t, is then known
    exact: bool = False


def applied(loss: Callable[[str, np.ndarray], float], name: str, g: np.ndarray, value: np.ndarray, dt) -> Callable:
    """``loss`` read at the perturbation it was asked for: L(fl(t + d) - t) - <g, (fl(t + d) - t) - d>, the
    difference computed exactly on the host (t + d rounds to t's grid in ``dt``; at a step of 1e-9 of |t| in
    float64, 1e-5 in float32, that rounding is a large share of the step). The finite differences are then compared
    with <g, fl(t + h v) - t>, the change the gradient predicts for the perturbation applied, instead of h <g, v>:
    for the right gradient the rounding of t + h v cancels; for one wrong by (g* - g) it leaves <g* - g, e> / h, a
    share of the disagreement itself (the callers count it in their error estimates)."""
    t = np.asarray(value, dt)
    t64 = t.astype(np.float64)

    def corrected(n: str, d: np.ndarray) -> float:
        d = np.asarray(d, np.float64)
        a = (t + d.astype(dt)).astype(np.float64) - t64
        off = a - d
        # only where the step was rounded: an entry applied exactly adds nothing, even where g is not finite
        # (an infinite d/dx of sqrt at 0 times 0 is NaN, which made every step of a gradient with one read as noise)
        moved = off != 0
        if not moved.any() or not np.isfinite(g[moved]).all():  # nothing rounded, or no finite change to predict
            return loss(n, d)
        return loss(n, d) - float(np.sum(g[moved] * off[moved]))
    return corrected


def check_gradients(items: list[CheckItem], loss: Callable[[str, np.ndarray], float], precision: str, *,
                    seed: int = 0, progress: Callable[[int, int], None] | None = None,
                    rounding: dict[str, tuple[float, str]] | None = None) -> dict[str, dict]:
    """Compare each gradient g with central finite differences of ``loss(name, delta)`` (the loss with
    ``delta`` added to tensor ``name``) along random directions: one weighted by the gradient (v = g u
    |t| / rms(t), u uniform in [0.5, 1.5]) and, in float64, Gaussian ones over every entry and over the
    entries whose gradient is 0 (a wrong 0 moves the loss there). Returns name -> {error,
    tolerance, ok, fd, grad_dot, step, kink, precision}.

    float64: step h = 1e-6 RMS(tensor); tolerance 1e-6 (1e-3 when the gradients are float32).
    float32: ``check32.check_direction`` (one direction, the verdict at a step chosen by its estimated error,
    not by its agreement; tolerance 5e-2); the rest of this docstring is float64's rule. A step where both the
    difference and <g, v> are below the noise floor of the loss (machine epsilon x |L| / h) says nothing; a
    gradient that no step resolves gets no verdict (``unresolved``). At a kink (Relu at 0, MaxPool ties) the one-sided
    differences (Richardson-extrapolated from h and h / 2, so that curvature does not open a gap) disagree and
    a gradient between them passes; several step sizes are tried and the best
    agreement kept. A gradient that disagrees only at steps where the difference quotient is not settled
    (halving the step changes it beyond the tolerance: the loss is not linear over the step) gets no verdict:
    ``ok`` None and ``unresolved``, the reason; ``flat``: a failing gradient along which the loss did not
    change at all, at any step. ``rounding``: name -> (R, A), the loss's rounding read from the forward pass
    (``autodiff.rounding``: rounding activation A, downstream of the tensor, moves the loss by ~R), a floor under
    the measured one (a perturbation absorbed by a huge A leaves the loss as it is); an unresolved row names A
    (``rounded_by``). ``progress(done, total)`` is called after each gradient."""
    dt = np.float64 if precision.startswith("float64") else np.float32
    eps = np.finfo(dt).eps
    tol = TOLERANCE[precision]
    rng = np.random.default_rng(seed + 12345)
    L0 = loss(items[0].name, np.zeros(items[0].grad.shape)) if items else 0.0
    out: dict[str, dict] = {}
    if progress is not None:
        progress(0, len(items))
    def one(it: CheckItem) -> None:
        g = it.grad
        R, by = (rounding or {}).get(it.name, (0.0, None))
        R = R if np.isfinite(R) else 0.0
        # relative to the tensor (weights ~1e-36 get steps ~1e-39, not 1e-4); a tensor of zeros has no scale:
        # a step as for values ~0.1
        scale = it.rms if np.isfinite(it.rms) and it.rms > 0 else 0.1
        h0 = (1e-6 if dt == np.float64 else 1e-3) * scale
        support = np.ones(g.shape, bool)
        rel = 1.0
        if it.value is not None and np.shape(it.value) == g.shape and np.any(it.value != 0):
            support = np.asarray(it.value) != 0
            # relative perturbations where the values are known: a variance stays positive, zeros stay put
            rel = np.abs(np.asarray(it.value, np.float64)) / max(it.rms, 1e-30)
        known = it.exact and it.value is not None and np.shape(it.value) == g.shape
        f = applied(loss, it.name, g, it.value, dt) if known else loss
        directions = [g * rng.uniform(0.5, 1.5, g.shape) * support * rel]
        # over the entries whose gradient is 0 alone: a rule that drops a contribution leaves zeros, which a direction
        # weighted by the gradient never moves (float64: beside a Gaussian one over every entry, whose signal drowns
        # in float32's rounding noise)
        zero = (g == 0) & support
        zero_v = rng.standard_normal(g.shape) * zero * rel if zero.any() and not zero.all() else None
        if dt == np.float64:
            directions.append(rng.standard_normal(g.shape) * support * rel)
            directions += [zero_v] if zero_v is not None else []
        if dt == np.float32:  # one direction, one step chosen by its resolution (check32), and the zeros'
            val = None if it.value is None or np.shape(it.value) != g.shape else np.asarray(it.value, np.float64)
            r = check_float32(it.name, g, [directions[0]] + ([zero_v] if zero_v is not None else []),
                              lambda w: check_direction(it.name, g, w, h0, f, L0, tol, val, R, known), rng)
            out[it.name] = {**r, "tolerance": tol, "precision": precision}
            _rounded_by(out[it.name], R, by, L0, eps)
            if progress is not None:
                progress(len(out), len(items))
            return
        worst, detail, settled, flat, swamped, hmin, kinks = 0.0, None, False, False, None, h0 / 1000, None
        for v in directions:
            v = unit(v)
            best = _best_step(it.name, g, v, h0, f, L0, dt, eps, tol, scale, R, known)
            if best[9]:  # a kink measured and the gradient outside it: several kinks along v? Each part alone
                best = _apart64(it.name, g, v, h0, f, L0, dt, eps, tol, scale, R, known, rng, best)
                kinks = best[9:]
            hmin = min(hmin, best[8])
            if not best[7]:  # this direction says nothing (float64's extra Gaussian ones may not move a big loss)
                swamped = swamped or best[1:]
                continue
            settled |= best[0] > tol and best[5]  # a disagreement finite differences really measured
            flat |= best[6]
            if detail is None or best[0] >= worst:
                worst, detail = best[0], best[1:]
        if detail is None:  # no direction rose above the loss's rounding at any step
            worst, detail = float("inf"), swamped
        ok = bool(worst <= tol) if worst <= tol or settled else None
        out[it.name] = {"error": float(worst), "tolerance": tol, "ok": ok, "fd": detail[0],
                        "grad_dot": detail[1], "step": detail[2], "kink": detail[3], "precision": precision}
        if flat:  # the loss did not move at all: its slope is 0 (or below the loss's rounding)
            out[it.name]["flat"] = True
        if kinks is not None and kinks[0] and ok is None:  # several kinks along a direction (``autodiff.kinks``)
            out[it.name].update(unresolved=several_kinks(*kinks[1:]), several_kinks=True)
        if ok is None and swamped is not None and worst == float("inf"):
            out[it.name]["error"] = None
            out[it.name]["unresolved"] = (f"the loss's rounding ({dt.__name__}, |L| = {abs(L0):.3g}) swamps its change at "
                                          f"every step tried ({_steps(h0, hmin)}); e.g. a gradient that is 0 in exact arithmetic")
        elif ok is None and not (kinks is not None and kinks[0]):  # no step where the loss is linear enough: no verdict
            out[it.name]["unresolved"] = (f"halving the step changes the finite difference by more than {tol:g} of it at "
                                          f"every step tried ({_steps(h0, hmin)}): the loss is not linear over them; e.g. a Softmax of huge "
                                          "logits: a step function at every step tried")
        _rounded_by(out[it.name], R, by, L0, eps)
        if progress is not None:
            progress(len(out), len(items))

    for it in items:
        try:
            one(it)
        except ExecutionError as e:  # a step moved the model where it does not run (a Range's count, a shape)
            out[it.name] = {"error": None, "tolerance": tol, "ok": None, "fd": None, "grad_dot": None, "step": None,
                            "kink": None, "precision": precision,
                            "unresolved": f"the model does not run with {it.name!r} moved by a step: {first_line(e)[:200]}"}
            if progress is not None:
                progress(len(out), len(items))
    return out


def _apart64(name, g, v, h0, f, L0, dt, eps, tol, scale, R, known, rng, whole) -> tuple:
    """``_best_step``'s answer for direction ``v`` taken apart (``autodiff.kinks.apart``), + (parts checked, parts
    that agreed away from the kinks): the failing part's answer where one fails away from the kinks, else
    ``whole`` (v's own) unsettled: no verdict."""
    def judge(w):
        b = _best_step(name, g, unit(w), h0, f, L0, dt, eps, tol, scale, R, known)
        ok = True if b[0] <= tol else (False if b[5] or b[9] else None)
        return (ok if b[7] else None), b[4] or b[9], b

    failed, parts, agreed = apart(v, judge, rng)
    if failed is not None:
        return failed[:10] + (parts, agreed)
    return whole[:5] + (False,) + whole[6:9] + (True, parts, agreed)


def _rounded_by(r: dict, R: float, by: str | None, L0: float, eps: float) -> None:
    """A row left unchecked where the forward's rounding (R, of tensor ``by``) is above the loss's own eps |L|
    says so: the intermediate whose rounding swamps the loss's change (``rounded_by``)."""
    if r["ok"] is None and by is not None and R > eps * abs(L0) and not r.get("rounded_by") and not r.get("several_kinks"):
        r["rounded_by"] = by
        r["unresolved"] += (f"; the rounding of {by!r} alone moves the loss by ~{R:.3g} (eps x sqrt(sum (dL/d{by} * {by})^2)): "
                            "a perturbation is absorbed there")


def _steps(h0: float, hmin: float) -> str:
    return f"{hmin:.3g} to {h0 * 10:.3g}"


STEPS64 = (1.0, 0.1, 10.0, 0.01, 0.001)  # x h0 (1e-6 RMS), in the order tried
REFINE64 = 3  # tenfold smaller steps after those, at most (a curved loss), while their rounding allows: bounded runs
COARSEN64 = 5  # tenfold larger ones, at most, where the loss's rounding explains the disagreement (values ~1e-6)


def _best_step(name: str, g: np.ndarray, v: np.ndarray, h0: float, loss, L0: float, dt, eps: float, tol: float,
               scale: float, R: float = 0.0, known: bool = False):
    """(error, fd, <g, v>, step, kink, settled, flat, resolved, smallest step, kinked) for the step size that agrees
    best (float64). Kinks favour small steps, rounding large ones: several are tried (``STEPS64``), then, while
    no step agrees or settles, tenfold smaller ones (``REFINE64`` at most): a loss curved over the steps (exp(k w)
    with k h ~ 1) settles at a smaller one. The refinement stops where the next step's rounding (the loss's,
    50 eps |L| / h, and that of t + h v, 10 eps |t| / h of the slope) would exceed a quarter of the tolerance.
    A step where neither the difference nor <g, v> rises above the loss's rounding (floor = 50 eps max|L| / h,
    L at 0 and +-h) says nothing, never a pass (at a tiny step a float32 loss of 10 read 8.43 vs 7.83 as
    agreement); ``resolved``: some step rose above it. ``flat``: the loss did not change at any step and the
    gradient fails. ``settled``: at some step where the gradient disagrees, the difference quotient is settled,
    so the disagreement is measured, not the loss's curvature: halving the step changes the central difference
    by less than the tolerance (or by noise only), or the Richardson extrapolations at two steps a tenfold apart
    agree within half of it (curvature's share in them shrinks 10^4-fold: a curved loss settles there while its
    central differences still move); a Softmax of logits ~1e12 is a step function over every step tried (its
    quotient doubles with each halving) and earns no FAIL. A kink (one-sided differences apart, the gradient
    between them) passes only where two steps show the same gap: a kink's is the same at every step, the gap
    curvature leaves in the extrapolated one-sided differences shrinks as h^2 (exp(1e6 w), 3% wrong, passed
    as a kink at the step 1e-6)."""
    an = float(np.sum(g * v))
    best, settled, flat, moved, coarse, ups, kinked = None, False, True, False, False, 0, False
    steps, rich, gaps = [h0 * k for k in STEPS64], {}, {}

    def coarsen(i: int) -> int:
        """After the last step: a tenfold larger one (1 added; else 0) where only the loss's rounding made a step
        disagree (``coarse``) and none agreed, while it stays within the tensor's scale (its RMS: each value moved by its own size at most)."""
        up = max(steps) * 10
        if i == len(steps) and coarse and not settled and ups < COARSEN64 and up <= scale and \
                (best is None or best[0] > tol):
            steps.append(up)
            return 1
        return 0

    i = 0
    while i < len(steps):
        h = steps[i]
        i += 1
        lp, lm = loss(name, h * v), loss(name, -h * v)
        flat &= lp == lm == L0
        moved |= lp != lm
        d1, half = (lp - lm) / (2 * h), None
        fd, d2 = d1, None
        # relative to the losses themselves (an absolute clamp of 1e-30 swamped every step of a loss of 1e-40
        # whose slope it resolves), plus the spacing of the subnormals, the rounding of a loss that is one
        # and the forward's rounding R (a perturbation absorbed by a huge intermediate leaves the loss unchanged)
        floor = (50 * (eps * max(abs(L0), abs(lp), abs(lm)) + np.finfo(dt).smallest_subnormal) + 10 * R) / h
        big = max(abs(fd), abs(an))
        if not big > floor:  # (NaN included) the loss's rounding swamps the difference at this step
            if best is None:
                best = (float("inf"), float(fd), an, float(h), False)
            ups += coarsen(i)  # the last step tried may be one of these
            continue
        err = abs(fd - an) / big
        if not np.isfinite(err):
            err = float("inf")
        kink = False
        if err > tol:
            # a disagreement at h is judged on the Richardson extrapolation of h and h / 2 (one more pair of runs,
            # only here), whose truncation error is O(h^4): a strongly curved loss (exp(k w) at a step large next
            # to 1 / k) no longer reads its curvature as a disagreement
            half = (loss(name, 0.5 * h * v), loss(name, -0.5 * h * v))
            d2 = (half[0] - half[1]) / h
            fd = (4 * d2 - d1) / 3
            big = max(abs(fd), abs(an))
            err = abs(fd - an) / big if big > floor else float("inf")
            if not np.isfinite(err):
                err = float("inf")
            # t + h v's rounding: where the perturbation applied is known (``known``) the loss is corrected for it and
            # only <g* - g, e> / h is left, at most that share (10 eps |t| / h of the slope) of the disagreement
            noise = max(floor, 10 * eps * scale / h * (abs(fd - an) if known and np.isfinite(fd) else big))
            if np.isfinite(fd):
                rich[h] = (fd, noise)
            # at a kink the one-sided derivatives differ, and a valid (sub)gradient lies between them. Curvature
            # separates them too (h L''), so they are Richardson-extrapolated from h and h / 2 (2 D(h / 2) - D(h)):
            # curvature's gap cancels to first order, a kink's stays (a wrong gradient between the one-sided
            # differences of a curved loss passed as a kink); the gap must be wider than the rounding of the loss
            # and of t + h v (eps |t| / h of the step, which the extrapolation amplifies), and the same at
            # another step
            dp = 2 * (half[0] - L0) / (0.5 * h) - (lp - L0) / h
            dm = 2 * (L0 - half[1]) / (0.5 * h) - (L0 - lm) / h
            lo, hi = min(dp, dm), max(dp, dm)
            if hi - lo > max(tol * big, noise):
                for lo2, hi2, n2 in gaps.values():
                    if abs(lo - lo2) <= noise + n2 + tol / 4 * (hi - lo) and abs(hi - hi2) <= noise + n2 + tol / 4 * (hi - lo):
                        if lo - tol * big <= an <= hi + tol * big:
                            err, kink = 0.0, True
                        else:  # a kink measured, the gradient outside its sides: several kinks? (``autodiff.kinks``)
                            kinked = True
                gaps[h] = (lo, hi, noise)
        # a disagreement no larger than the loss's rounding at this step (that of the Richardson estimate: ~3 floor) is
        # not measured, however settled the quotient looks: a bias of values ~1e-6 (ViT's MLP init) got steps of
        # 1e-11, whose rounding (3e-6 of the slope) failed a right gradient at tolerance 1e-6 (QA); larger steps follow
        rounded = err > tol and abs(fd - an) <= 3 * floor
        coarse |= rounded
        if err > tol and not settled and not rounded:
            settled = bool(abs(d1 - d2) <= tol * max(abs(d1), abs(d2)) + 2 * floor) or any(
                abs(fd - f2) <= tol / 2 * max(abs(fd), abs(f2)) + 2 * (rich[h][1] + n2)
                for h2, (f2, n2) in rich.items() if h2 != h and max(h, h2) / min(h, h2) < 11)
        if best is None or err < best[0]:
            best = (err, float(fd), an, float(h), kink)
        if err <= tol:
            break
        nxt = min(steps) / 10
        if i == len(steps) and not settled and len(steps) < len(STEPS64) + REFINE64 + ups and np.isfinite(big) and \
                50 * eps * max(abs(L0), abs(lp), abs(lm)) / nxt <= tol / 4 * big and \
                10 * eps * scale / nxt <= (0.25 if known else tol / 4):
            steps.append(nxt)
        ups += coarsen(i)
    resolved = best[0] != float("inf") or settled
    if not resolved and an == 0 and not moved:
        # a gradient of exactly 0 along v and a loss that did not move at all: they agree exactly
        # (a gradient of zeros, whose direction is 0)
        best, resolved = (0.0, 0.0, an, float(h0), False), True
    return best + (settled, flat and best[0] > tol, resolved, min(steps), kinked and best[0] > tol)
