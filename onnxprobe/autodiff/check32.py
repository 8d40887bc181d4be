"""The float32 finite-difference check of one gradient along one direction (``check.check_gradients``).

float32 rounds the loss at ~1e-7 of itself, and a model's sums round far above that; a step large enough to
rise above the rounding is one over which the loss curves (or crosses Relu kinks). The verdict is taken at
ONE step, chosen by how well it resolves the loss's slope, never by how well it agrees with the gradient
(keeping the best agreement over several steps let a gradient 10% wrong pass where a noisy step agreed by
chance). Each step h gives the Richardson-extrapolated central difference fd = (4 D(h/2) - D(h)) / 3 and an
estimate of its error:

- rounding: measured, not assumed: L(2 e v) - 2 L(e v) + L(0) at three tiny steps e (~1e-5 of the values:
  the loss's change there is its rounding; one-sided, so that a kink at the point is not read as noise),
  never below half an ulp of the loss; 3 standard deviations of fd (3.8 sigma / h), plus the rounding of
  t + h v (the delta is added in float32: eps |g t| / h). A loss curved at the probes' own steps (exp(k w),
  k ~ 1e4: k e ~ 0.3) makes them read its curvature (~1e-1 for a rounding of ~5e-7), and every step noise; such
  probes (of one sign, growing as e^2, matching the two smallest steps' second differences: ``_curvature``) give
  way to the floors, the forward's rounding R and an ulp of the loss (smaller probes would leave t unchanged);
- truncation: |D(h) - D(h/2)|, which bounds fd's where the loss is smooth over the step, plus half the 4th
  difference (a Relu kink crossed inside the step shifts D(h) and D(h/2) alike, by up to half its jump).

A step resolves the slope where that error is below RESOLVES x tol of it. The verdict (pass within the
tolerance, fail beyond it) is taken at a step up to h0 that resolves it to tol / 4, or at a resolving step
that another step bears out (their differences agree within their errors), else at the smallest resolving
step up to h0; where none resolves it, REFINE's smaller steps are tried while their rounding allows (``_fine``);
else there is no verdict (``unresolved``, saying whether rounding or the loss's nonlinearity
stood in the way), unless the one-sided slopes show a kink at the point: a gap wider than tolerance and
noise, the same at the two smallest steps that can see it, with the gradient between them (a subgradient:
pass) or outside (fail). A failing verdict looks for that kink too.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from onnxprobe.autodiff.kinks import apart, several_kinks, unit

EPS = float(np.finfo(np.float32).eps)
TINY = float(np.finfo(np.float32).smallest_subnormal)
STEPS = (1.0, 0.3, 10.0, 3.0, 0.1, 30.0, 100.0, 0.03, 1000.0, 0.01)  # x h0 (1e-3 RMS), in the order tried
PROBES = (0.0113, -0.0113, 0.0171)  # x h0: the tiny one-sided steps that measure the loss's rounding
REFINE = (0.003, 0.001)  # x h0: smaller steps where none of STEPS resolves the slope, while their rounding allows
COARSE = (3000.0, 10000.0, 30000.0, 100000.0)  # x h0: larger ones where rounding still swamps the largest of STEPS (values tiny next to the loss's)
R_SD = float(np.sqrt(2 * (8 / 3) ** 2 + 2 * (1 / 6) ** 2))  # sd of (4 D(h/2) - D(h)) / 3, in units of sigma / h
D1_SD = float(np.sqrt(0.5))  # sd of D(h) = (L(h v) - L(-h v)) / 2 h, sigma / h
# a step resolves the slope where its estimated error is below 3/4 of the tolerance: a gradient passes within
# the tolerance of it, so one wrong by more than 1.75 x the tolerance (8.75%) cannot
RESOLVES = 0.75
SIDE_SD = float(np.sqrt(4 ** 2 + 3 ** 2 + 1))  # sd of a one-sided extrapolated difference, sigma / h


def check_float32(name: str, g: np.ndarray, directions: list[np.ndarray], along: Callable[[np.ndarray], dict],
                  rng: np.random.Generator) -> dict:
    """The float32 check of ``g``: ``along(v)`` (``check_direction`` at v of RMS 1) on the direction weighted by the
    gradient, then, where it passes, on the entries whose gradient is 0 (``directions[1]``, if any: <g, v> = 0 there;
    a rule that drops a contribution leaves zeros that the first never moves, and passed with half of a Conv's input
    gradient zeroed). That one only ever FAILs (a slope measured where the gradient says none); a loss that does not
    move there resolves nothing, and the first direction's verdict stands. A direction that fails at a kink is taken
    apart (``autodiff.kinks``)."""
    out = None
    for v in map(unit, directions):
        r = along(v)
        if r.pop("kinked", False):  # a kink measured and the gradient outside it: several kinks along v?
            failed, parts, agreed = apart(v, lambda w: _judged(along, w), rng)
            r = failed or {**r, "ok": None, "unresolved": several_kinks(parts, agreed), "several_kinks": True}
        if out is None:
            out = r
        elif r["ok"] is False:
            out = {**r, "zeros": True}  # where the gradient is 0
        if not out["ok"]:
            break
    return out


def _judged(along, w: np.ndarray) -> tuple:
    """``autodiff.kinks.apart``'s judge: ``along`` at ``w`` (made RMS 1)."""
    r = along(unit(w))
    return r.get("ok"), bool(r.get("kink") or r.pop("kinked", False)), r


def check_direction(name: str, g: np.ndarray, v: np.ndarray, h0: float, loss: Callable[[str, np.ndarray], float],
                    L0: float, tol: float, value: np.ndarray | None, rounding: float = 0.0, known: bool = False) -> dict:
    """The check of ``g`` along ``v`` (RMS 1): {error, fd, grad_dot, step, kink, ok} (+ ``flat`` for a loss that
    did not move at all, ``unresolved`` with the reason where ``ok`` is None). ``rounding``: the loss's rounding read
    from the forward pass (``autodiff.rounding``), a floor under the measured one. ``known``: ``loss`` is corrected for
    the perturbation actually applied (``check.applied``): the rounding of t + h v is left only as a share of the
    disagreement, counted so (a gradient wrong by E shows at least E (1 - share), the share <= est / tol)."""
    an = float(np.sum(g * v))
    at = _cached(loss, name, v)
    # (one-sided, L(2 e v) - 2 L(e v) + L(0): 0 for a kink at the point, which a symmetric one measured as noise)
    probes = [at(2 * e * h0) - 2 * at(e * h0) + L0 for e in PROBES]
    probe_var = sum(p * p for p in probes if np.isfinite(p)) / (6 * len(PROBES))  # each is 3 roundings
    # a loss curved at the probes' own steps (exp(k w), k e ~ 0.3): they measure its curvature, not its rounding (and
    # smaller ones would leave t unchanged): the floors stand in for them, the forward's rounding and an ulp of L
    floor_var = max((rounding / 2) ** 2, (EPS * abs(L0)) ** 2)
    curved = _curvature(probes, at, h0, L0, floor_var)
    if curved:
        probe_var = 0.0
    # (the probes read 0 where a huge intermediate absorbs them: x W + 1e14 leaves the loss as it is)
    measured, probe_var = probe_var, max(probe_var, (rounding / 2) ** 2, floor_var if curved else 0.0)
    t_round = 3 * EPS * float(np.sum(np.abs(g * value))) if value is not None and value.shape == g.shape else 0.0
    rows: list[dict] = []
    resolved = (lambda r: r["linear"] and r["est"] <= RESOLVES * tol * r["big"])  # noqa: E731
    pair, todo, refine = None, list(STEPS), list(REFINE)
    while todo and pair is None:
        r = _row(at, todo.pop(0) * h0, L0, an, tol, probe_var, t_round, measured, known)
        if r is not None:
            rows.append(r)
            pair = _agreeing(r, rows[:-1], tol)
            # a small step alone, where it resolves the slope well (a larger one must be borne out by another)
            if pair is None and resolved(r) and r["h"] <= h0 and r["est"] <= tol / 4 * r["big"]:
                pair = (r,)
        if not todo and pair is None and refine:  # a loss curved over every step: smaller ones, while their
            # rounding (the loss's, and t + h v's) allows
            k = refine.pop(0)
            if _fine(k * h0, an, tol, probe_var, t_round, known):
                todo.append(k)
    coarse = list(COARSE)
    # no step resolved the slope with another bearing it out: larger ones, where the values are tiny next to what the
    # loss adds them to (a bias of ~1e-6, ViT's MLP init, whose rounding at steps of their size swamped the slope:
    # "cannot check", blamed on a loss not linear, QA); a loss not finite there (a variance gone negative) gives no row
    while pair is None and coarse and rows:
        r = _row(at, coarse.pop(0) * h0, L0, an, tol, probe_var, t_round, measured, known)
        if r is not None:
            rows.append(r)
            pair = _agreeing(r, rows[:-1], tol)
    if pair is None:  # a small step alone where it resolves the slope at all
        pair = tuple(x for x in rows if resolved(x) and x["h"] <= h0)[:1] or None
    if pair is not None:
        r = min((x for x in pair if resolved(x)), key=lambda x: x["h"])  # the smaller step: fewer kinks crossed
        out = {"error": float(r["err"]), "fd": float(r["fd"]), "grad_dot": an, "step": float(r["h"]), "kink": False,
               "ok": bool(r["err"] <= tol)}
        if out["ok"]:
            return out
        rows += [x for x in (_row(at, k * h0, L0, an, tol, probe_var, t_round, measured, known) for k in todo) if x]
        kink = _kink(rows, an, tol)  # a FAIL looks further: a kink at the point?
        if kink is None and r["flat"]:
            out["flat"] = True
        return out if kink is None else {**out, **kink}
    if not rows:
        return {"error": None, "fd": float("nan"), "grad_dot": an, "step": float(h0), "kink": False, "ok": None,
                "unresolved": "the loss is not finite at the steps tried"}
    kink = _kink(rows, an, tol)
    best = min(rows, key=lambda r: r["est"] / r["big"] if r["big"] > 0 else 0.0)
    out = {"error": float(best["err"]), "fd": float(best["fd"]), "grad_dot": an, "step": float(best["h"]), "kink": False}
    if kink is not None and "ok" in kink:  # (a kink too narrow to explain a failure, {"kinked"}: there is no FAIL here)
        return {**out, **kink}
    out["ok"] = None
    steps = f"{min(r['h'] for r in rows):.3g} to {max(r['h'] for r in rows):.3g}"
    if sum(map(resolved, rows)) > 1:
        good = sorted((x for x in rows if resolved(x)), key=lambda x: x["h"])
        out["unresolved"] = (f"the finite differences at the steps tried ({steps}) disagree beyond their estimated errors "
                             f"({good[0]['fd']:.4g} at {good[0]['h']:.3g}, {good[1]['fd']:.4g} at {good[1]['h']:.3g}): "
                             "the loss is not linear over them (Relu kinks crossed)")
    elif any(map(resolved, rows)):
        one = next(x for x in rows if resolved(x))
        out["unresolved"] = (f"only the step {one['h']:.3g} resolves the loss's slope ({one['fd']:.4g}), and no other "
                             f"step tried ({steps}) bears it out: a step over 1e-3 of the values alone can cross "
                             "kinks its error estimate misses")
    elif not any(abs(x["fd"]) > x["est"] or x["jumps"] for x in rows):  # no step measured a slope at all
        out["error"] = None
        out["unresolved"] = (f"the loss's rounding (float32, |L| = {abs(L0):.3g}) swamps its change at every step tried "
                             f"({steps}): the finite differences' error would be {best['est'] / best['big']:.2g} of the "
                             "slope; e.g. a gradient that is 0 in exact arithmetic")
    else:
        out["unresolved"] = (f"halving the step changes the finite difference by more than {tol / 2:g} of it at every "
                             f"step tried ({steps}): the loss is not linear over them; e.g. a Softmax of huge logits: "
                             "a step function at every step tried")
    return out


def _cached(loss, name: str, v: np.ndarray) -> Callable[[float], float]:
    """x -> L(x v), each x run once (the curvature test and the steps share their runs)."""
    seen: dict[float, float] = {}

    def at(x: float) -> float:
        if x not in seen:
            seen[x] = loss(name, x * v)
        return seen[x]
    return at


def _curvature(probes: list[float], at, h0: float, L0: float, floor_var: float) -> bool:
    """The rounding probes measure the loss's curvature: well above the floor, of one sign, the third what the
    first two predict (c e^2 + d e^3 from the symmetric pair), and the steps' own second differences (the two
    smallest steps, at h and h / 2: a span of 36 in h^2) what that curvature gives, c h^2; rounding cannot follow."""
    if not all(np.isfinite(probes)) or not (all(p > 0 for p in probes) or all(p < 0 for p in probes)):
        return False
    e, noise = PROBES[0] * h0, 3 * np.sqrt(6 * floor_var)
    c, d = (probes[0] + probes[1]) / 2 / e ** 2, (probes[0] - probes[1]) / 2 / e ** 3
    if abs(c) * e * e <= 10 * noise:  # the probes read the rounding (or near it): nothing to replace
        return False
    e3 = PROBES[2] * h0
    near = (lambda got, want: abs(got - want) <= abs(want) / 2 + noise)  # noqa: E731
    if not near(probes[2], c * e3 ** 2 + d * e3 ** 3):
        return False
    for h in sorted(STEPS)[:2]:
        h *= h0
        if not (near(at(h) + at(-h) - 2 * L0, c * h * h) and near(at(0.5 * h) + at(-0.5 * h) - 2 * L0, c * h * h / 4)):
            return False
    return True


def _fine(h: float, an: float, tol: float, probe_var: float, t_round: float, known: bool) -> bool:
    """A refinement step h is worth its runs: the loss's rounding (the Richardson estimate's noise) under a quarter
    of the tolerance of the slope, and t + h v's under a quarter of the step's change where the perturbation applied
    is known (``check.applied``: a gradient wrong by E then shows >= 3/4 E), under a quarter of the tolerance if not."""
    big = abs(an)
    return 3 * R_SD * np.sqrt(probe_var) / h <= tol / 4 * big and t_round / h <= (0.25 if known else tol / 4) * big


def _row(at, h, L0, an, tol, probe_var, t_round, measured, known=False) -> dict | None:
    """The finite differences at step h and their estimated error (None where the loss is not finite)."""
    lp, lm, hp, hm = (at(s * h) for s in (1, -1, 0.5, -0.5))
    if not all(np.isfinite(x) for x in (lp, lm, hp, hm, L0)):
        return None
    d1, d2 = (lp - lm) / (2 * h), (hp - hm) / h
    sd = np.sqrt(max(probe_var, (0.5 * EPS * max(abs(L0), abs(lp), abs(lm)) + TINY) ** 2))
    # |D(h) - D(h/2)| bounds the truncation where the loss is smooth over the step; a kink inside it (a Relu
    # crossing at s < h / 2) shifts both alike, by up to half its jump, which the 4th difference shows (the
    # one-sided slopes' difference: 0 for a cubic, the jump for a kink)
    q4 = lp + lm - 4 * (hp + hm) + 6 * L0
    kinks = abs(q4) / (2 * h)
    # the Richardson extrapolation (4 D(h/2) - D(h)) / 3 cancels curvature but multiplies the rounding by 5;
    # where the rounding dominates, the central difference D(h) itself is the better estimate (its truncation,
    # 4/3 |D(h) - D(h/2)| where smooth, is bounded by twice that with a kink crossed)
    def share(fd):  # known: what the correction leaves of t + h v's rounding, a share of the disagreement, while
        # that rounding is at most 1/4 of the step's change (so a gradient wrong by E shows at least 3/4 E)
        big = max(abs(fd), abs(an), 1e-300)
        return min(1.0, abs(fd - an) / big) if known and t_round / h <= big / 4 else 1.0
    r4 = (4 * d2 - d1) / 3
    rich = (r4, (3 * R_SD * sd + t_round * share(r4)) / h, abs(d1 - d2) + kinks)
    central = (d1, (3 * D1_SD * sd + t_round / 3 * share(d1)) / h, 2 * abs(d1 - d2) + kinks)
    fd, noise, trunc = min(rich, central, key=lambda c: c[1] + c[2])
    big = max(abs(fd), abs(an))
    # the step is one over which the loss is near-linear: |D(h) - D(h/2)| small next to the slope measured (a
    # Softmax of logits ~1e12 is a step function over every step tried, its quotients tiny and halving with h);
    # and a slope of 0 within the noise is measured only where that noise is rounding (within 100 eps of the
    # loss); beyond, the loss jumps at every scale (that Softmax: by ~1 at steps of 1e7)
    jumps = bool(measured > (100 * EPS * max(abs(L0), abs(lp), abs(lm))) ** 2)
    linear = rich[2] <= tol / 2 * abs(fd) + rich[1] and not (jumps and abs(fd) <= noise + trunc)
    return {"h": h, "fd": fd, "err": abs(fd - an) / big if big > 0 else 0.0, "est": noise + trunc, "linear": linear,
            "jumps": jumps, "noise": noise, "trunc": trunc, "big": big, "dp": (4 * hp - 3 * L0 - lp) / h,
            "dm": (3 * L0 + lm - 4 * hm) / h, "flat": lp == lm == hp == hm == L0,
            "kn": (3 * 2 * SIDE_SD * sd + 2 * t_round) / h}


def _agreeing(r: dict, others: list[dict], tol: float) -> tuple[dict, dict] | None:
    """``r`` and an earlier step whose differences agree within their estimated errors, one of them resolving the
    slope (error below RESOLVES x tol), the other within the tolerance at least: an error estimate that two steps
    bear out (several Relu kinks crossed can hide from one step's)."""
    fit = (lambda x, k: x["linear"] and x["est"] <= k * tol * x["big"])  # noqa: E731
    if not fit(r, 1.0):
        return None
    for x in others:
        if fit(x, 1.0) and (fit(x, RESOLVES) or fit(r, RESOLVES)) and abs(x["fd"] - r["fd"]) <= x["est"] + r["est"]:
            return r, x
    return None


def _kink(rows: list[dict], an: float, tol: float) -> dict | None:
    """A kink at the point itself (a Relu input or a MaxPool tie exactly there): its one-sided slopes
    (Richardson-extrapolated from h and h / 2, so that curvature does not open a gap) differ by more than the
    tolerance at the two smallest steps that can see such a gap above their noise, and by the same amount
    (curvature's gap shrinks as h^2; a kink crossed further along shows at large steps only). The gradient
    between them passes (a subgradient), outside them fails."""
    scale = max([abs(an)] + [max(abs(r["dp"]), abs(r["dm"])) for r in rows])
    usable = sorted((r for r in rows if r["kn"] < tol * scale / 2), key=lambda r: r["h"])[:2]
    if len(usable) < 2:
        return None
    (lo, hi), (lo2, hi2) = (sorted((r["dp"], r["dm"])) for r in usable)
    gap = min(hi - lo, hi2 - lo2)
    noise = usable[0]["kn"] + usable[1]["kn"]
    if abs(lo - lo2) > noise + tol / 4 * gap or abs(hi - hi2) > noise + tol / 4 * gap:
        return None
    if gap <= tol * scale:  # a kink too narrow to explain the failure alone: several, whose gaps cancel? (``kinks``)
        return {"kinked": True} if gap > noise else None
    off = max(max(lo, lo2) - an, an - min(hi, hi2), 0.0)
    ok = off <= noise + tol / 10 * scale
    # ``kinked``: a kink measured with the gradient outside it, which several kinks along v can do to a right one
    # (``autodiff.kinks``)
    return {"error": 0.0 if ok else float(off / scale), "ok": bool(ok), "kink": bool(ok), "fd": float(usable[0]["fd"]),
            "step": float(usable[0]["h"]), "kinked": not ok}
