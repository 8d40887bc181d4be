"""In-graph pair metrics: the nodes that reduce two tensors a (under test) and b (the reference) of one
shape to three small outputs (the maxima, the argmax and the float64 sums; their fields ``PAIR_ROW``),
so that only scalars leave the run; the host turns them into the same ``PairMetrics`` as the host's
``stats.host_sums.pair_sums`` (``compare.fused``).

d = a - b in float32 (as the host's fast path), the flat argmax of |d| and |d| there (its maximum), max
|b|, the allclose excess max(|d| - rtol |b|), max |d| / max(|b|, float32's smallest subnormal) (``stats.metrics``: |d| / |b|,
subnormal b too; inf where b = 0 past |d| 4.8e-7); the sums Σ|d|, Σd², Σa², Σb² are
float32 partials over the shortest suffix of axes holding >= 16 elements, added in float64 (the
statistics' two-level summation: relative error about 1e-7 on rows of ~100 elements, at worst (a
constant) 1e-6 at 1024 and 2e-5 at BLOCK_MAX; longer rows are summed in float64 from the start); Σab
is (Σa² + Σb² - Σd²) / 2, taken on the host in float64 (one product and one sum fewer per pair). A NaN or Inf on either side shows as a
non-finite Σd², Σa² or Σb²: the caller measures that pair on the host instead (masked, float64).

An introduced error's row (``light``) leaves out |b| and the three maxima that need it (max |b|, the
allclose excess, max relative error: ``stats.metrics.IntroducedError``): its maxima output is max |d| alone.
A row without ``extras`` (a report that shows none of them, ``api.diff(extras=False)``) leaves out the max
relative error, Σ|d| and the argmax (``EXTRAS``): a pair's maxima [3], sums without Σ|d|, max |d| by a ReduceMax
over the tensor as it is (three passes over the tensor fewer, no Gather, and no flat Reshape views of |d| and b:
those views, aliases in onnxruntime, raised the run's peak memory, PP-OCRv4 det 800x608 diff --all 370 -> 328
MB); an introduced error's row without them is max |d| by a ReduceMax, Σd² and Σb² (the table shows its SQNR alone).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from onnxprobe.graph.stats_nodes import CHUNK_ELEMENTS, StatsBuilder, suffix_axes
from onnxprobe.stats.metrics import REL_TINY
from onnxprobe.types import element_count

PAIR_ROW = ("max_abs", "b_absmax", "excess", "max_rel", "argmax", "dd", "bb", "aa", "sum_abs")
MAXIMA, SUMS = PAIR_ROW[:4], PAIR_ROW[5:]  # the float32 [4, 1...] and float64 [3 or 4] outputs; argmax is int64 [1]
EXTRAS = ("max_rel", "sum_abs", "argmax")  # what a row without extras leaves out: the last maximum, the last sum, the index


class PairBuilder(StatsBuilder):
    def __init__(self, graph, opset: int, names: set[str]):
        super().__init__(graph, opset, names)
        self._summed: set[str] = set()  # tensors whose Σa² an earlier row summed

    def row_sums(self, head: "RowHead", intro: "RowHead | None" = None) -> str:
        """The float64 sums of a row (``row_head``: its partial sums), and with ``intro`` those of its pair's
        introduced error (its light row of (a, c), c being B's node recomputed on A's inputs), in one tail (one
        Concat, Cast, Reshape and ReduceSum for both: four nodes per pair fewer, a tenth of PP-OCRv4 det's merged
        graph), in the order ``tail_order`` says: each row's squares first, then each row's Σ|d|, so that a row
        without extras sums the squares in the rows a full one sums them in, to the same bits (onnxruntime's float64
        ReduceSum along a row of odd length rounds by where the row starts in its buffer: the comment on Σ|d| in
        row_head)."""
        if intro is None:
            return self._tail(list(head.parts.values()), head.base, head.to64)
        if intro.to64 != head.to64:  # pragma: no cover - two tensors of one shape, summed alike
            raise AssertionError(head.base)
        parts = {("", tag): p for tag, p in head.parts.items()} | {("i", tag): p for tag, p in intro.parts.items()}
        order = tail_order("aa" in head.parts, True, "sum_abs" in head.parts)
        return self._tail([parts[k] for k in order], head.base, head.to64)

    def row_head(self, a: str, b: str, shape: tuple, rtol: float, base: str, light: bool = False,
                 sizes: tuple | None = None, extras: bool = True) -> "RowHead":
        """The row of the pair (a, b), float32 tensors of the static rank of ``shape``, but its tail (``row_sums``): its
        maxima (``MAXIMA``, float32 [4]), the flat argmax of |a - b| (int64 [1]) and the partial sums of ``SUMS``
        (without Σa² when an earlier row of the same ``a`` summed it: the reader takes it from that row); with
        ``row_sums``, three outputs instead of one row: no Reshape and Cast nodes to assemble it. ``rtol`` 0: no
        allclose excess (it is max |d|). ``light``: an introduced error's row, whose maxima output is max |d| alone
        (the module doc): eight passes over the tensor fewer. ``sizes``: the concrete shape for the input shapes the
        graph is built for, where ``shape`` has symbolic dims: it tells the partial sums' length (float32 up to
        BLOCK_MAX elements, else float64), never their axes. ``extras`` False: no max relative error, Σ|d| nor
        argmax (``EXTRAS``, the module doc): the argmax is None."""
        flat = lambda: self.const(np.array([-1], np.int64))  # noqa: E731  (made once, where a row reshapes)
        key = a
        whole = sizes if sizes is not None and len(sizes) == len(shape) else shape
        if shape and self.opset >= 10 and all(isinstance(s, (int, np.integer)) and s > 0 for s in whole) \
                and element_count(whole) > CHUNK_ELEMENTS:
            return self._chunked(a, b, tuple(int(s) for s in whole), rtol, base, light, extras)
        if not shape:  # scalars: as [1]
            a, b, shape, sizes = (self.node("Reshape", [a, flat()], f"{base}.a1"), self.node("Reshape", [b, flat()], f"{base}.b1"),
                                  (1,), (1,))
        axes, row = suffix_axes(shape)
        if row is None and sizes is not None and len(sizes) == len(shape) and all(isinstance(s, int) and s >= 0 for s in sizes):
            row = element_count([sizes[ax] for ax in axes])
        d = self.node("Sub", [a, b], f"{base}.d")
        ad = self.node("Abs", [d], f"{base}.ad")
        # ArgMax of no element fails the whole run (a Loop of no iterations: an empty scan output): where the size
        # may be 0, a trailing 0 (|d| >= 0, and ArgMax takes the first of ties) gives 0 elements index 0 and max 0
        # (the reader leaves an empty pair to the host, which says it is empty); a copy, so only where it may be
        known = sizes if sizes is not None and len(sizes) == len(shape) else shape
        filled = all(isinstance(s, (int, np.integer)) and s > 0 for s in known)
        # the maxima over flat views, so that they stack as [3 or 4], where a row needs the flat index (extras) or
        # the pad; else they keep the tensors' rank ([1, ..., 1] each, stacked on axis 0): no view (the module doc)
        flats = extras or not filled
        ad_flat = self.node("Reshape", [ad, flat()], f"{base}.ad_flat") if flats else ad
        ad_arg = ad_flat if filled else \
            self.node("Concat", [ad_flat, self.const(np.zeros(1, np.float32))], f"{base}.ad_padded", axis=0)
        if extras:
            argmax = self.node("ArgMax", [ad_arg], f"{base}.argmax", axis=0, keepdims=1)
            # max |d| read at its argmax: one element, where a ReduceMax is one more pass over the tensor
            max_abs = self.node("Gather", [ad_arg, argmax], f"{base}.max_abs", axis=0)
        else:  # no index asked for: a ReduceMax (and no Gather)
            argmax, max_abs = None, self.red("ReduceMax", ad_arg, f"{base}.max_abs", keepdims=1)
        terms = [("ReduceSumSquare", d, "dd"), ("ReduceSumSquare", b, "bb")]
        if key not in self._summed:
            terms.append(("ReduceSumSquare", a, "aa"))
            self._summed.add(key)
        # Σ|d| last: a row without it sums the others in the rows the full row sums them in, to the same bits
        # (onnxruntime's float64 ReduceSum along a row of odd length rounds by where the row starts in its buffer:
        # with Σ|d| first, a light diff's SQNR and cosine were not the full diff's in the last bits, QA)
        if extras:
            terms.append(("ReduceSum", ad, "sum_abs"))
        # the partial sums right behind max |d|, before the maxima of b: their squares then go, and d with them, before
        # |b| and the allclose excess are made (made after those, d was held through them: one tensor more at the run's
        # peak, PP-OCRv4 det 800x608 diff --all 304 -> 316 MB); each term's square freed before the next is made
        # (StatsBuilder._parts)
        parts, to64 = self._parts(terms, base, axes, row)
        done = lambda maxima: RowHead(maxima, argmax, dict(zip((tag for _, _, tag in terms), parts)), to64, base)  # noqa: E731
        if light:
            return done(max_abs)
        absb = self.node("Abs", [self.node("Reshape", [b, flat()], f"{base}.b_flat") if flats else b], f"{base}.absb")
        return done(self.maxima(ad_flat, absb, max_abs, rtol, base, extras))

    def _chunked(self, a: str, b: str, shape: tuple[int, ...], rtol: float, base: str, light: bool, extras: bool) -> "RowHead":
        """``row_head`` of a pair of more than CHUNK_ELEMENTS elements, a slice of the rows of its partial sums at a time:
        a slice's a - b, |a - b| and squares are the row's only temporaries (whole, they were the tensors' size, several at
        once: a diff of 128-256 MB activations peaked at 3x plain inference). Each slice's maxima, their maximum; the
        argmax the slice's of the largest max |d| (the first), plus where that slice starts; the partial sums the
        slices', in row order (the layout ``row_sums`` sums)."""
        axes, row = suffix_axes(shape)
        rows, per = element_count(shape) // row, max(1, CHUNK_ELEMENTS // row)
        two = self.const(np.array([-1, row], np.int64))
        a2, b2 = (self.node("Reshape", [t, two], f"{base}.{tag}2") for t, tag in ((a, "a"), (b, "b")))
        aa = a not in self._summed
        self._summed.add(a)
        tags = ["dd", "bb", *(["aa"] if aa else []), *(["sum_abs"] if extras else [])]
        maxima, args, parts, to64 = [], [], {t: [] for t in tags}, True
        for k, start in enumerate(range(0, rows, per)):
            c = f"{base}.c{k}"
            ac, bc = self.slice(a2, [start], [min(rows, start + per)], [0]), self.slice(b2, [start], [min(rows, start + per)], [0])
            d = self.node("Sub", [ac, bc], f"{c}.d")
            ad = self.node("Abs", [d], f"{c}.ad")
            ad_flat = self.node("Reshape", [ad, self.const(np.array([-1], np.int64))], f"{c}.ad_flat")
            arg = self.node("ArgMax", [ad_flat], f"{c}.argmax", axis=0, keepdims=1)
            most = self.node("Gather", [ad_flat, arg], f"{c}.max_abs", axis=0)
            terms = [("ReduceSumSquare", d, "dd"), ("ReduceSumSquare", bc, "bb"), *([("ReduceSumSquare", ac, "aa")] if aa else []),
                     *([("ReduceSum", ad, "sum_abs")] if extras else [])]
            got, to64 = self._parts(terms, c, [1], row)
            for t, p in zip(tags, got):
                parts[t].append(p)
            if not light:
                absb = self.node("Abs", [self.node("Reshape", [bc, self.const(np.array([-1], np.int64))], f"{c}.b_flat")], f"{c}.absb")
                most = self.maxima(ad_flat, absb, most, rtol, c, extras)
            maxima.append(self.unsqueeze(most, [0]))  # [1, W]
            args.append(arg)
        stacked = self.node("Concat", maxima, f"{base}.maxima_chunks", axis=0)  # [slices, W]
        out = self.red("ReduceMax", stacked, f"{base}.maxima", axes=[0], keepdims=0)
        argmax = None
        if extras:  # the first slice of the largest max |d|, and the place of it there
            firsts = self.node("Gather", [stacked, self.const(np.array([0], np.int64))], f"{base}.max_abs_chunks", axis=1)
            which = self.node("ArgMax", [self.node("Reshape", [firsts, self.const(np.array([-1], np.int64))], f"{base}.max_abs_flat")],
                              f"{base}.slice", axis=0, keepdims=1)
            local = self.node("Gather", [self.node("Concat", args, f"{base}.argmaxes", axis=0), which], f"{base}.local", axis=0)
            argmax = self.node("Add", [local, self.node("Mul", [which, self.const(np.array([per * row], np.int64))], f"{base}.start")],
                               f"{base}.argmax")
        joined = {t: self.node("Concat", ps, f"{base}.{t}.slices", axis=0) if len(ps) > 1 else ps[0] for t, ps in parts.items()}
        return RowHead(out, argmax, joined, to64, base)

    def maxima(self, ad: str, absb: str, max_abs: str, rtol: float, base: str, extras: bool, axes: list[int] | None = None,
               axis: int = 0) -> str:
        """A row's ``MAXIMA`` from |a - b| (``ad``), |b| (``absb``) and max |d|: max |b|, the allclose excess
        max(|d| - rtol |b|) (max |d| itself where ``rtol`` is 0) and, with ``extras``, max |d| / max(|b|, REL_TINY),
        each a ReduceMax over ``axes`` (None: all), concatenated on ``axis``: a pair's row (``row_head``) and a stack's
        (``graph.stack_nodes``, one row per pair along axis 1)."""
        def most(x: str, tag: str) -> str:
            return self.red("ReduceMax", x, f"{base}.{tag}", axes=axes, keepdims=1)

        cols = [max_abs, most(absb, "b_absmax")]
        cols.append(most(self.node("Sub", [ad, self.node("Mul", [absb, self.f32(rtol)], f"{base}.rtol_b")], f"{base}.excess_el"),
                         "excess") if rtol else max_abs)
        if extras:
            cols.append(most(self.node("Div", [ad, self.node("Max", [absb, self.f32(REL_TINY)], f"{base}.absb_tiny")], f"{base}.rel"),
                             "max_rel"))
        return self.node("Concat", cols, f"{base}.maxima", axis=axis)


class RowHead(NamedTuple):
    """A row's maxima and argmax outputs (argmax None without extras), its partial sums (tag -> tensor, in the
    terms' order: ``StatsBuilder._parts``), whether its tail casts them to float64, and its node-name base."""
    maxima: str
    argmax: str | None
    parts: dict
    to64: bool
    base: str


def tail_order(aa: bool, intro: bool, extras: bool) -> list[tuple[str, str]]:
    """The order of a row's sums (``PairBuilder.row_sums``): (row, ``SUMS`` name) each, row "" the pair's and "i"
    its introduced error's; ``aa``: the pair's row summed Σa² (the introduced error's never does: it is the
    pair's)."""
    sq = [("", "dd"), ("", "bb"), *([("", "aa")] if aa else []), *([("i", "dd"), ("i", "bb")] if intro else [])]
    return sq + ([("", "sum_abs"), *([("i", "sum_abs")] if intro else [])] if extras else [])
