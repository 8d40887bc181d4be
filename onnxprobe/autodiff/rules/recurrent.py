"""Recurrent layers: GRU and RNN (LSTM: rules/lstm.py), every direction, with sequence_lens and initial
states.

The forward node keeps running as it is (onnxruntime's fused kernel); its output Y (every step's hidden
state, added when the model left it out) gives each step's previous state, so every quantity of every
step is recomputed at once, with two large MatMuls (x W^T, h_{t-1} R^T) and elementwise ops; nothing
else needs a loop. The backward pass is one loop over the steps in reverse (a Scan, unrolled for a few
static steps: rules/timeloop.py) carrying dh: a few elementwise ops a step, with coefficients computed
for all the steps beforehand, and one small MatMul with R; dX, dW, dR and dB are then one large product
each over all the steps.

Conventions: time-major [T, B, ...] inside (layout=1 is transposed at the edges), each direction run in
its own time order (the reverse direction reads its input reversed within each sequence's length), and
the step mask m (1 inside a sequence's length) holds the state where a sequence has ended:
h_t = m hn_t + (1 - m) h_{t-1}, Y_t = m hn_t.
"""

from __future__ import annotations


from onnxprobe.autodiff.registry import rule
from onnxprobe.autodiff.rules.timeloop import (Recurrence, act, activations, add, collect, dact, direction_slice,
                                               directions, flat_gemm, masked_grad, param_grads, previous)


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
    rec = Recurrence(g, 3)
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
            dhn, dh_pass = masked_grad(b, dh, m, xs[0] if dy else None)
            dhp = b.op("Mul", dhn, zt)
            if lbr:
                dgh = b.op("Mul", b.op("Concat", dhn, dhn, dhn, axis=1), xs[k + 1])
                return [add(b, b.op("Add", dhp, b.op("MatMul", dgh, r)), dh_pass)], [dhn]
            p1t, p2t, p3t, rt = xs[k + 1:k + 5]
            q = b.op("MatMul", b.op("Mul", dhn, p1t), r_h)
            dzr = b.op("Concat", b.op("Mul", dhn, p2t), b.op("Mul", q, p3t), axis=1)
            dhp = b.op("Add", b.op("Add", dhp, b.op("Mul", q, rt)), b.op("MatMul", dzr, r_zr))
            return [add(b, dhp, dh_pass)], [dhn, q]

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
    return collect(g, rec, per_dir, (5,))


@rule("RNN", inputs=(0, 1, 2, 3, 5))
def rnn(g):
    """h_t = f(x W^T + h_{t-1} R^T + Wb + Rb)  (f: Tanh by default)  ->  backward over t (reverse),
    carrying dh: da = m (dh + dY_t) f'(h_t), dh_{t-1} = (1 - m) dh + da R; then dX = da W,
    dW = sum da^T x, dR = sum da^T h_{t-1}, dB = [sum da, sum da], d initial_h = the final dh. The hidden
    states come from the forward node's Y: nothing is recomputed."""
    acts = activations(g, ["Tanh"])
    rec = Recurrence(g, 1)
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
            dhn, dh_pass = masked_grad(b, st[0], m, xs[0] if dy else None)
            da = b.op("Mul", dhn, xs[k])
            return [add(b, b.op("MatMul", da, r), dh_pass)], [da]

        dh_end = rec.end_state(0, d) or rec.zeros_state()
        (dh0,), (da,) = rec.loop(back, [dh_end], seqs, 1, reverse=True)
        out = param_grads(g, g.wants, da, v["x"], hprev)
        if "Wb" in out:
            out["B"] = g.Concat(out["Wb"], out["Wb"], axis=0)
        if g.wants(0):
            out["x"] = rec.time_back(g.MatMul(da, w), rev)
        out["h0"] = dh0
        per_dir.append(out)
    return collect(g, rec, per_dir, (5,))
