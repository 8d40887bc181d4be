"""Recurrent layers: LSTM, GRU and RNN, every direction, with sequence_lens, initial states and peepholes.

The forward node keeps running as it is (onnxruntime's fused kernel); its output Y (every step's hidden
state, added when the model left it out) gives each step's previous state, so the gate pre-activations
of all steps are recomputed at once by two large MatMuls (x W^T + h_{t-1} R^T + b). Only the LSTM cell
state needs a loop of its own, a few elementwise ops a step. The backward pass is one loop over the
steps in reverse (a Scan, unrolled for a few static steps: rules/timeloop.py) carrying dh (and dc): each
step does its elementwise gate derivatives and one small MatMul with R; dX, dW, dR and dB are then one
large product each over all the steps. (The alternative, a forward written as a Scan that exposes the
gates, is slower than the fused kernel plus this recompute: README's gradient section has the numbers.)

Conventions: time-major [T, B, ...] inside (layout=1 is transposed at the edges), each direction run in
its own time order (the reverse direction reads its input reversed within each sequence's length), and
the step mask m (1 inside a sequence's length) holds the state where a sequence has ended:
h_t = m hn_t + (1 - m) h_{t-1}, Y_t = m hn_t.
"""

from __future__ import annotations

import numpy as np

from onnxprobe.autodiff.registry import rule
from onnxprobe.autodiff.rules.timeloop import (act, activations, dact, direction_slice, directions, flat_gemm, flip,
                                               lengths, previous, stack_directions, step_mask, time_loop)


class _Recurrence:
    """What the three rules share: layout, the step mask, Y and its gradients, the initial states."""

    def __init__(self, g, n_gates: int):
        self.g = g
        self.layout = g.attr("layout", 0)
        x = g.x[0]
        self.x = g.Transpose(x, perm=[1, 0, 2]) if self.layout else x
        rs = g.static_dims(g.x[2])
        self.hidden = int(g.attr("hidden_size") or (rs[2] if rs else 0)) or None
        if self.hidden is None:
            raise g.fail("hidden_size is unknown")
        self.n_gates = n_gates
        xs = g.static_dims(x)
        self.steps = (xs[1] if self.layout else xs[0]) if xs else None
        self.lens = lengths(g, 4)
        self.mask = step_mask(g, self.x, self.lens)
        y = g.forward_output(0, "Y")
        self.y = g.Transpose(y, perm=[1, 2, 0, 3]) if self.layout else y  # [T, D, B, H]
        d = g.dys[0]
        self.dy = (g.Transpose(d, perm=[1, 2, 0, 3]) if self.layout else d) if d else None
        self.dstate = [self._state(g.dys[k]) if k < len(g.dys) and g.dys[k] else None for k in (1, 2)]

    def _state(self, t: str | None) -> str | None:
        """A [D, B, H] state ([B, D, H] with layout=1) in the [D, B, H] layout."""
        if t is None:
            return None
        return self.g.Transpose(t, perm=[1, 0, 2]) if self.layout else t

    def zeros_state(self) -> str:
        g = self.g
        return g.ConstantOfShape(g.Concat(g.shape(self.x, 1, 2), g.ints([self.hidden]), axis=0),
                                 value=_zero(g))

    def initial(self, slot: int, d: int) -> str:
        """Direction d's initial state [B, H] from input ``slot`` (zeros when absent)."""
        g = self.g
        if not g.has(slot):
            return self.zeros_state()
        return direction_slice(g, self._state(g.x[slot]), d)

    def direction(self, d: int, rev: bool) -> dict:
        g = self.g
        y = direction_slice(g, self.y, d, axis=1)
        dy = direction_slice(g, self.dy, d, axis=1) if self.dy else None
        if rev:
            x, y, dy = flip(g, self.x, self.lens), flip(g, y, self.lens), flip(g, dy, self.lens) if dy else None
        else:
            x = self.x
        return {"x": x, "y": y, "dy": dy}

    def masked_dy(self, dy: str | None) -> str | None:
        """dY with the steps past each sequence's length zeroed (Y is 0 there whatever the weights)."""
        if dy is None or self.mask is None:
            return dy
        return self.g.Mul(dy, self.mask)

    def end_state(self, k: int, d: int) -> str | None:
        s = self.dstate[k]
        return direction_slice(self.g, s, d) if s else None

    def time_back(self, t: str, rev: bool) -> str:
        return flip(self.g, t, self.lens) if rev else t

    def x_grad(self, parts: list[str]) -> str:
        g = self.g
        dx = parts[0] if len(parts) == 1 else g.Add(parts[0], parts[1])
        return g.Transpose(dx, perm=[1, 0, 2]) if self.layout else dx

    def state_grad(self, parts: list[str]) -> str | None:
        s = stack_directions(self.g, parts)
        return self.g.Transpose(s, perm=[1, 0, 2]) if (s is not None and self.layout) else s

    def loop(self, step, states, seqs, n_out, reverse):
        g = self.g
        if self.mask is not None:
            seqs = seqs + [self.mask]
        return time_loop(g, step, states, seqs, n_out, reverse=reverse, steps=self.steps, elem=g.elem)


def _zero(g):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.zeros([1], g.dtype))


def _held(b, new: str, old: str, m: str | None) -> str:
    """m new + (1 - m) old: the state held where the sequence has ended."""
    return new if m is None else b.op("Add", old, b.op("Mul", m, b.op("Sub", new, old)))


def _masked_grad(b, d: str, m: str | None, dy: str | None = None) -> tuple[str, str | None]:
    """(m d + dy, (1 - m) d): the gradient of the step's new value (the state's, plus Y_t's, which
    ``masked_dy`` has zeroed where the sequence has ended), and the part of the state's that passes to
    the previous step there."""
    if m is None:
        return _add(b, d, dy), None
    md = b.op("Mul", d, m)
    return _add(b, md, dy), b.op("Sub", d, md)


def _add(b, a: str, c: str | None) -> str:
    return a if c is None else b.op("Add", a, c)


def _param_grads(g, wants, da: str, x: str, hprev: str) -> dict:
    """dW = sum da^T x, dR = sum da^T h_{t-1}, d(Wb) = sum da, over every step and batch row."""
    out = {}
    if wants(1):
        out["W"] = flat_gemm(g, da, x)
    if wants(2):
        out["R"] = flat_gemm(g, da, hprev)
    if wants(3):
        out["Wb"] = g.reduce_sum(da, [0, 1], keepdims=0)
    return out


def _collect(g, rec, per_dir: list[dict], states: tuple[int, ...]) -> dict:
    """The rule's gradients from each direction's: X summed, W / R / B / initial states / P stacked."""
    grads: dict = {}
    if g.wants(0):
        grads[0] = rec.x_grad([p["x"] for p in per_dir])
    for slot, key in ((1, "W"), (2, "R"), (3, "B"), (7, "P")):
        if g.wants(slot) and all(key in p for p in per_dir):
            grads[slot] = stack_directions(g, [p[key] for p in per_dir])
    for k, slot in enumerate(states):
        if g.wants(slot):
            grads[slot] = rec.state_grad([p["h0" if k == 0 else "c0"] for p in per_dir])
    return grads


@rule("LSTM", inputs=(0, 1, 2, 3, 5, 6, 7))
def lstm(g):
    """Gates (order i, o, f, c): a = x W^T + h_{t-1} R^T + Wb + Rb, i = f(a_i + P_i c_{t-1}),
    f_ = f(a_f + P_f c_{t-1}), z = g(a_c), c_t = f_ c_{t-1} + i z, o = f(a_o + P_o c_t), h_t = o h(c_t)  ->
    backward over t (reverse), carrying dh, dc:
      dhn = m (dh + dY_t), da_o = dhn h(c_t) f'(o), dcn = m dc + dhn o h'(c_t) + da_o P_o,
      da_i = dcn z f'(i), da_f = dcn c_{t-1} f'(f_), da_c = dcn i g'(z),
      dh_{t-1} = (1 - m) dh + da R,  dc_{t-1} = (1 - m) dc + dcn f_ + da_i P_i + da_f P_f;
    then dX = da W, dW = sum da^T x, dR = sum da^T h_{t-1}, dB = [sum da, sum da],
    dP = [sum da_i c_{t-1}, sum da_o c_t, sum da_f c_{t-1}], d initial_h / initial_c = the final dh / dc.
    (f, g, h: Sigmoid, Tanh, Tanh by default; the derivatives are written from the outputs.)"""
    if g.attr("input_forget", 0):
        raise g.fail("input_forget=1 is not supported")
    acts = activations(g, ["Sigmoid", "Tanh", "Tanh"])
    rec = _Recurrence(g, 4)
    hh = rec.hidden
    per_dir = []
    for d, rev in enumerate(directions(g)):
        fa, ga, ha = acts[3 * d:3 * d + 3]
        v = rec.direction(d, rev)
        w, r = direction_slice(g, g.x[1], d), direction_slice(g, g.x[2], d)
        h0, c0 = rec.initial(5, d), rec.initial(6, d)
        hprev = previous(g, v["y"], g.unsqueeze(h0, [0]))
        a = g.Add(g.MatMul(v["x"], g.Transpose(w, perm=[1, 0])), g.MatMul(hprev, g.Transpose(r, perm=[1, 0])))
        if g.has(3):
            bb = direction_slice(g, g.x[3], d)
            wb, rb = g.split(bb, 0, [4 * hh, 4 * hh], 2)
            a = g.Add(a, g.Add(wb, rb))
        ai, ao, af, ac = g.split(a, 2, [hh] * 4, 4)
        peep = g.has(7)
        z = act(g, ga, ac)
        if peep:
            pi, po, pf = g.split(direction_slice(g, g.x[7], d), 0, [hh] * 3, 3)

            def cell(b, st, xs):
                c = st[0]
                i_ = act(b, fa, b.op("Add", xs[0], b.op("Mul", pi, c)))
                f_ = act(b, fa, b.op("Add", xs[1], b.op("Mul", pf, c)))
                cn = _held(b, b.op("Add", b.op("Mul", f_, c), b.op("Mul", i_, xs[2])), c, xs[3] if len(xs) > 3 else None)
                return [cn], [i_, f_, cn]

            (_,), (i, f, cs) = rec.loop(cell, [c0], [ai, af, z], 3, reverse=False)
            o = act(g, fa, g.Add(ao, g.Mul(po, cs)))
        else:
            i, f, o = act(g, fa, ai), act(g, fa, af), act(g, fa, ao)

            def cell(b, st, xs):
                c = st[0]
                cn = _held(b, b.op("Add", b.op("Mul", xs[0], c), xs[1]), c, xs[2] if len(xs) > 2 else None)
                return [cn], [cn]

            (_,), (cs,) = rec.loop(cell, [c0], [f, g.Mul(i, z)], 1, reverse=False)
        cprev = previous(g, cs, g.unsqueeze(c0, [0]))
        hc = act(g, ha, cs)
        # every step's coefficients at once (the loop then does 7 ops a step): dcn = dc + dhn A,
        # da = [dcn, dhn, dcn, dcn] K, dc_{t-1} = dcn F
        coef_o = g.Mul(hc, dact(g.b, fa, o, g.dtype))
        coef_i, coef_f = g.Mul(z, dact(g.b, fa, i, g.dtype)), g.Mul(cprev, dact(g.b, fa, f, g.dtype))
        ca = g.Mul(o, dact(g.b, ha, hc, g.dtype))
        cf = f
        if peep:
            ca = g.Add(ca, g.Mul(coef_o, po))
            cf = g.Add(f, g.Add(g.Mul(coef_i, pi), g.Mul(coef_f, pf)))
        ck = g.Concat(coef_i, coef_o, coef_f, g.Mul(i, dact(g.b, ga, z, g.dtype)), axis=2)
        dy = rec.masked_dy(v["dy"])
        seqs = ([dy] if dy else []) + [ca, ck, cf]

        def back(b, st, xs):
            dh, dc = st
            k = 1 if dy else 0
            at, kt, ft = xs[k:k + 3]
            m = xs[k + 3] if len(xs) > k + 3 else None
            dhn, dh_pass = _masked_grad(b, dh, m, xs[0] if dy else None)
            dcn, dc_pass = _masked_grad(b, dc, m)
            dcn = b.op("Add", dcn, b.op("Mul", dhn, at))
            da = b.op("Mul", b.op("Concat", dcn, dhn, dcn, dcn, axis=1), kt)
            return [_add(b, b.op("MatMul", da, r), dh_pass), _add(b, b.op("Mul", dcn, ft), dc_pass)], [da]

        dh_end = rec.end_state(0, d) or rec.zeros_state()
        dc_end = rec.end_state(1, d) or rec.zeros_state()
        (dh0, dc0), (da,) = rec.loop(back, [dh_end, dc_end], seqs, 1, reverse=True)
        out = _param_grads(g, g.wants, da, v["x"], hprev)
        if "Wb" in out:
            out["B"] = g.Concat(out["Wb"], out["Wb"], axis=0)
        if g.wants(0):
            out["x"] = rec.time_back(g.MatMul(da, w), rev)
        if peep and g.wants(7):
            dai, dao, daf, _ = g.split(da, 2, [hh] * 4, 4)
            s = lambda t, c: g.reduce_sum(g.Mul(t, c), [0, 1], keepdims=0)  # noqa: E731
            out["P"] = g.Concat(s(dai, cprev), s(dao, cs), s(daf, cprev), axis=0)
        out["h0"], out["c0"] = dh0, dc0
        per_dir.append(out)
    return _collect(g, rec, per_dir, (5, 6))


@rule("GRU", inputs=(0, 1, 2, 3, 5))
def gru(g):
    """Gates (order z, r, h): z = f(x W_z^T + h_{t-1} R_z^T + b_z), r = f(x W_r^T + h_{t-1} R_r^T + b_r),
    n = g(x W_h^T + (r h_{t-1}) R_h^T + Rb_h + Wb_h)  (linear_before_reset=1: g(x W_h^T + Wb_h +
    r (h_{t-1} R_h^T + Rb_h))),  h_t = (1 - z) n + z h_{t-1}  ->  backward over t (reverse), carrying dh:
      dhn = m (dh + dY_t), da_n = dhn (1 - z) g'(n), da_z = dhn (h_{t-1} - n) f'(z),
      lbr=0: q = da_n R_h, da_r = q h_{t-1} f'(r), dh_{t-1} = (1 - m) dh + dhn z + q r + [da_z, da_r] R_zr;
      lbr=1: s = h_{t-1} R_h^T + Rb_h, da_r = da_n s f'(r), dh_{t-1} = (1 - m) dh + dhn z + [da_z, da_r, da_n r] R;
    then dX = [da_z, da_r, da_n] W, dW = sum [da_z, da_r, da_n]^T x, dWb = sum [da_z, da_r, da_n],
    dR_zr = sum [da_z, da_r]^T h_{t-1}, dR_h = sum da_n^T (r h_{t-1}) (lbr=1: sum (da_n r)^T h_{t-1}),
    dRb = [sum da_z, sum da_r, sum da_n (lbr=1: sum da_n r)], d initial_h = the final dh."""
    acts = activations(g, ["Sigmoid", "Tanh"])
    lbr = g.attr("linear_before_reset", 0)
    rec = _Recurrence(g, 3)
    hh = rec.hidden
    per_dir = []
    for d, rev in enumerate(directions(g)):
        fa, ga = acts[2 * d:2 * d + 2]
        v = rec.direction(d, rev)
        w, r = direction_slice(g, g.x[1], d), direction_slice(g, g.x[2], d)
        h0 = rec.initial(5, d)
        hprev = previous(g, v["y"], g.unsqueeze(h0, [0]))
        gx = g.MatMul(v["x"], g.Transpose(w, perm=[1, 0]))
        wb = rb = None
        if g.has(3):
            wb, rb = g.split(direction_slice(g, g.x[3], d), 0, [3 * hh, 3 * hh], 2)
            gx = g.Add(gx, wb)
        gxz, gxr, gxh = g.split(gx, 2, [hh] * 3, 3)
        r_zr, r_h = g.split(r, 0, [2 * hh, hh], 2)
        if lbr:
            gh = g.MatMul(hprev, g.Transpose(r, perm=[1, 0]))
            gh = g.Add(gh, rb) if rb else gh
            ghz, ghr, ghh = g.split(gh, 2, [hh] * 3, 3)
        else:
            ghzr = g.MatMul(hprev, g.Transpose(r_zr, perm=[1, 0]))
            if rb:
                rb_zr, rb_h = g.split(rb, 0, [2 * hh, hh], 2)
                ghzr = g.Add(ghzr, rb_zr)
            ghz, ghr = g.split(ghzr, 2, [hh, hh], 2)
        z, rr = act(g, fa, g.Add(gxz, ghz)), act(g, fa, g.Add(gxr, ghr))
        if lbr:
            n = act(g, ga, g.Add(gxh, g.Mul(rr, ghh)))
        else:
            rh = g.Mul(rr, hprev)
            pre = g.Add(gxh, g.MatMul(rh, g.Transpose(r_h, perm=[1, 0])))
            n = act(g, ga, g.Add(pre, rb_h) if rb else pre)
        # every step's coefficients at once: da_n = dhn p1, da_z = dhn p2, da_r = (lbr=0: q, lbr=1: da_n) p3
        one = g.scalar(1.0)
        p1 = g.Mul(g.Sub(one, z), dact(g.b, ga, n, g.dtype))
        p2 = g.Mul(g.Sub(hprev, n), dact(g.b, fa, z, g.dtype))
        p3 = g.Mul(ghh if lbr else hprev, dact(g.b, fa, rr, g.dtype))
        dy = rec.masked_dy(v["dy"])
        if lbr:  # [da_z, da_r, da_n r] = [dhn, dhn, dhn] K
            ck = g.Concat(p2, g.Mul(p1, p3), g.Mul(p1, rr), axis=2)
            seqs = ([dy] if dy else []) + [z, ck]
        else:
            seqs = ([dy] if dy else []) + [z, p1, p2, p3, rr]

        def back(b, st, xs):
            dh = st[0]
            k = 1 if dy else 0
            zt = xs[k]
            m = xs[-1] if rec.mask is not None else None
            dhn, dh_pass = _masked_grad(b, dh, m, xs[0] if dy else None)
            dhp = b.op("Mul", dhn, zt)
            if lbr:
                dgh = b.op("Mul", b.op("Concat", dhn, dhn, dhn, axis=1), xs[k + 1])
                return [_add(b, b.op("Add", dhp, b.op("MatMul", dgh, r)), dh_pass)], [dhn]
            p1t, p2t, p3t, rt = xs[k + 1:k + 5]
            q = b.op("MatMul", b.op("Mul", dhn, p1t), r_h)
            dzr = b.op("Concat", b.op("Mul", dhn, p2t), b.op("Mul", q, p3t), axis=1)
            dhp = b.op("Add", b.op("Add", dhp, b.op("Mul", q, rt)), b.op("MatMul", dzr, r_zr))
            return [_add(b, dhp, dh_pass)], [dhn, q]

        dh_end = rec.end_state(0, d) or rec.zeros_state()
        (dh0,), douts = rec.loop(back, [dh_end], seqs, 1 if lbr else 2, reverse=True)
        dhn_all = douts[0]
        dan = g.Mul(dhn_all, p1)
        dar = g.Mul(dan if lbr else douts[1], p3)
        daz = g.Mul(dhn_all, p2)
        dgx = g.Concat(daz, dar, dan, axis=2)
        out = {}
        if g.wants(0):
            out["x"] = rec.time_back(g.MatMul(dgx, w), rev)
        if g.wants(1):
            out["W"] = flat_gemm(g, dgx, v["x"])
        if g.wants(2) or g.wants(3):
            if lbr:
                dgh = g.Concat(daz, dar, g.Mul(dan, rr), axis=2)
                dR, dRb = (flat_gemm(g, dgh, hprev) if g.wants(2) else None), g.reduce_sum(dgh, [0, 1], keepdims=0)
            else:
                daz_r, dan = g.split(dgx, 2, [2 * hh, hh], 2)
                dR = g.Concat(flat_gemm(g, daz_r, hprev), flat_gemm(g, dan, rh), axis=0) \
                    if g.wants(2) else None
                dRb = g.reduce_sum(dgx, [0, 1], keepdims=0)
            if dR is not None:
                out["R"] = dR
            if g.wants(3):
                out["B"] = g.Concat(g.reduce_sum(dgx, [0, 1], keepdims=0), dRb, axis=0)
        out["h0"] = dh0
        per_dir.append(out)
    return _collect(g, rec, per_dir, (5,))


@rule("RNN", inputs=(0, 1, 2, 3, 5))
def rnn(g):
    """h_t = f(x W^T + h_{t-1} R^T + Wb + Rb)  (f: Tanh by default)  ->  backward over t (reverse),
    carrying dh: da = m (dh + dY_t) f'(h_t), dh_{t-1} = (1 - m) dh + da R; then dX = da W,
    dW = sum da^T x, dR = sum da^T h_{t-1}, dB = [sum da, sum da], d initial_h = the final dh. The hidden
    states come from the forward node's Y: nothing is recomputed."""
    acts = activations(g, ["Tanh"])
    rec = _Recurrence(g, 1)
    hh = rec.hidden
    per_dir = []
    for d, rev in enumerate(directions(g)):
        fa = acts[d]
        v = rec.direction(d, rev)
        w, r = direction_slice(g, g.x[1], d), direction_slice(g, g.x[2], d)
        h0 = rec.initial(5, d)
        hprev = previous(g, v["y"], g.unsqueeze(h0, [0]))
        dy = rec.masked_dy(v["dy"])
        seqs = ([dy] if dy else []) + [dact(g.b, fa, v["y"], g.dtype)]

        def back(b, st, xs):
            k = 1 if dy else 0
            m = xs[k + 1] if len(xs) > k + 1 else None
            dhn, dh_pass = _masked_grad(b, st[0], m, xs[0] if dy else None)
            da = b.op("Mul", dhn, xs[k])
            return [_add(b, b.op("MatMul", da, r), dh_pass)], [da]

        dh_end = rec.end_state(0, d) or rec.zeros_state()
        (dh0,), (da,) = rec.loop(back, [dh_end], seqs, 1, reverse=True)
        out = _param_grads(g, g.wants, da, v["x"], hprev)
        if "Wb" in out:
            out["B"] = g.Concat(out["Wb"], out["Wb"], axis=0)
        if g.wants(0):
            out["x"] = rec.time_back(g.MatMul(da, w), rev)
        out["h0"] = dh0
        per_dir.append(out)
    return _collect(g, rec, per_dir, (5,))
