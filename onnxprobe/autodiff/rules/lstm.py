"""LSTM, every direction, with sequence_lens, initial states and peepholes (conventions: rules/recurrent.py).

The backward pass needs each step's gates and cell state, which the LSTM node does not output. Two ways
to have them (``STATES``):

- "expose" (the default): the forward LSTM is written with standard ops, x W^T for all the steps in one
  MatMul and a loop (rules/timeloop.py) of a dozen ops a step, whose scan outputs are each step's
  pre-activations and cell state; it replaces the LSTM node in the forward graph (same output names).
  It costs a quarter more than onnxruntime's LSTM kernel, and saves more than that in the backward pass
  (README: forward+backward 31-33 ms against 37 ms recomputing, 2 layers of 256 units over 100 steps);
- "recompute": the LSTM node keeps running, and its Y gives every step's previous hidden state, from which
  the gates of all steps are recomputed at once; the cell state needs a loop of its own (2 ops a step).

Either way the backward pass is one loop over the steps in reverse carrying (dh, dc), 7 ops a step with
coefficients computed for all the steps beforehand, and dX, dW, dR, dB, dP are one large product each.
"""

from __future__ import annotations

from onnxprobe.autodiff.registry import rule
from onnxprobe.autodiff.rules.timeloop import (Recurrence, act, activations, add, collect, dact, direction_slice,
                                               directions, held, masked_grad, param_grads, previous)

STATES = "expose"


def _forward(g, rec: Recurrence, x: str, w: str, r: str, bias: str | None, peeps, h0: str, c0: str, acts):
    """The forward pass of one direction with standard ops: (h of every step, c of every step, the
    pre-activations a = x W^T + h_{t-1} R^T + b of every step, final h, final c)."""
    hh = rec.hidden
    fa, ga, ha = acts
    gx = g.MatMul(x, g.Transpose(w, perm=[1, 0]))
    if bias is not None:
        gx = g.Add(gx, bias)
    rt = g.Transpose(r, perm=[1, 0])
    split3 = g.ints([3 * hh, hh])
    split_h3 = g.ints([hh] * 3)
    split_h4 = g.ints([hh] * 4)

    def cell(b, st, xs):
        h, c = st
        m = xs[1] if len(xs) > 1 else None
        a = b.op("Add", xs[0], b.op("MatMul", h, rt))
        if peeps is None:  # one activation for the three sigmoid gates
            ifo, ac = b.op("Split", a, split3, n_out=2, axis=1)
            i, o, f = b.op("Split", act(b, fa, ifo), split_h3, n_out=3, axis=1)
        else:
            pi, po, pf = peeps
            ai, ao, af, ac = b.op("Split", a, split_h4, n_out=4, axis=1)
            i = act(b, fa, b.op("Add", ai, b.op("Mul", pi, c)))
            f = act(b, fa, b.op("Add", af, b.op("Mul", pf, c)))
        cn = held(b, b.op("Add", b.op("Mul", f, c), b.op("Mul", i, act(b, ga, ac))), c, m)
        if peeps is not None:
            o = act(b, fa, b.op("Add", ao, b.op("Mul", peeps[1], cn)))
        hn = b.op("Mul", o, act(b, ha, cn))
        y = hn if m is None else b.op("Mul", hn, m)
        return [held(b, hn, h, m), cn], [y, cn, a]

    (h_end, c_end), (ys, cs, pre) = rec.loop(cell, [h0, c0], [gx], 3, reverse=False)
    return ys, cs, pre, h_end, c_end


def _gates(g, rec, pre: str, cs: str, cprev: str, peeps, acts):
    """i, f, z, o of every step from the pre-activations (peepholes: and the cell states)."""
    hh = rec.hidden
    fa, ga, _ = acts
    ai, ao, af, ac = g.split(pre, 2, [hh] * 4, 4)
    if peeps is not None:
        pi, po, pf = peeps
        ai, af, ao = g.Add(ai, g.Mul(pi, cprev)), g.Add(af, g.Mul(pf, cprev)), g.Add(ao, g.Mul(po, cs))
    return act(g, fa, ai), act(g, fa, af), act(g, ga, ac), act(g, fa, ao)


def _recomputed(g, rec, y: str, x: str, w: str, r: str, bias: str | None, peeps, h0: str, c0: str, acts):
    """(c of every step, i, f, z, o) from the LSTM node's Y: the gates at once, the cell state by a loop."""
    hh = rec.hidden
    fa, ga, _ = acts
    hprev = previous(g, y, g.unsqueeze(h0, [0]))
    a = g.Add(g.MatMul(x, g.Transpose(w, perm=[1, 0])), g.MatMul(hprev, g.Transpose(r, perm=[1, 0])))
    a = g.Add(a, bias) if bias is not None else a
    ai, ao, af, ac = g.split(a, 2, [hh] * 4, 4)
    z = act(g, ga, ac)
    if peeps is not None:
        pi, po, pf = peeps

        def cell(b, st, xs):
            c = st[0]
            i_ = act(b, fa, b.op("Add", xs[0], b.op("Mul", pi, c)))
            f_ = act(b, fa, b.op("Add", xs[1], b.op("Mul", pf, c)))
            cn = held(b, b.op("Add", b.op("Mul", f_, c), b.op("Mul", i_, xs[2])), c, xs[3] if len(xs) > 3 else None)
            return [cn], [i_, f_, cn]

        (_,), (i, f, cs) = rec.loop(cell, [c0], [ai, af, z], 3, reverse=False)
        return cs, i, f, z, act(g, fa, g.Add(ao, g.Mul(po, cs)))
    i, f, o = act(g, fa, ai), act(g, fa, af), act(g, fa, ao)

    def cell2(b, st, xs):
        c = st[0]
        cn = held(b, b.op("Add", b.op("Mul", xs[0], c), xs[1]), c, xs[2] if len(xs) > 2 else None)
        return [cn], [cn]

    (_,), (cs,) = rec.loop(cell2, [c0], [f, g.Mul(i, z)], 1, reverse=False)
    return cs, i, f, z, o


def _replace_forward(g, rec, ys: list[str], yhs: list[str], ycs: list[str]) -> None:
    """The forward pass written here takes the LSTM node's place: each output the model uses is now an
    Identity of its value, the node's own outputs are renamed and left to be pruned (the engine sorts the
    graph again, as these nodes come after the ones that read them)."""
    y = g.Concat(*[g.unsqueeze(t, [1]) for t in ys], axis=1) if len(ys) > 1 else g.unsqueeze(ys[0], [1])
    outs = [g.Transpose(y, perm=[2, 0, 1, 3]) if rec.layout else y,
            rec.state_grad(yhs), rec.state_grad(ycs)]  # [D, B, H] stacked (layout=1: [B, D, H]), as the node's
    for k, name in enumerate(list(g.node.output)):
        if name and k < 3:
            g.node.output[k] = g.b.fresh(f"{name}.replaced")
            g.b.op("Identity", outs[k], out=name)
    g.engine.reorder = True


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
    expose = STATES == "expose"
    rec = Recurrence(g, 4, y_from_node=not expose)
    hh = rec.hidden
    per_dir, fwd = [], ([], [], [])
    for d, rev in enumerate(directions(g)):
        da_ = acts[3 * d:3 * d + 3]
        fa, ga, ha = da_
        v = rec.direction(d, rev)
        w, r = direction_slice(g, g.x[1], d), direction_slice(g, g.x[2], d)
        h0, c0 = rec.initial(5, d), rec.initial(6, d)
        bias = None
        if g.has(3):
            wb, rb = g.split(direction_slice(g, g.x[3], d), 0, [4 * hh, 4 * hh], 2)
            bias = g.Add(wb, rb)
        peep = g.has(7)
        peeps = g.split(direction_slice(g, g.x[7], d), 0, [hh] * 3, 3) if peep else None
        if expose:
            y, cs, pre, h_end, c_end = _forward(g, rec, v["x"], w, r, bias, peeps, h0, c0, da_)
            for lst, t in zip(fwd, (rec.time_back(y, rev), h_end, c_end)):
                lst.append(t)
            cprev = previous(g, cs, g.unsqueeze(c0, [0]))
            i, f, z, o = _gates(g, rec, pre, cs, cprev, peeps, da_)
        else:
            y = v["y"]
            cs, i, f, z, o = _recomputed(g, rec, y, v["x"], w, r, bias, peeps, h0, c0, da_)
            cprev = previous(g, cs, g.unsqueeze(c0, [0]))
        hprev = previous(g, y, g.unsqueeze(h0, [0]))
        hc = act(g, ha, cs)
        # every step's coefficients at once (the loop then does 7 ops a step): dcn = dc + dhn A,
        # da = [dcn, dhn, dcn, dcn] K, dc_{t-1} = dcn F
        coef_o = g.Mul(hc, dact(g.b, fa, o, g.dtype))
        coef_i, coef_f = g.Mul(z, dact(g.b, fa, i, g.dtype)), g.Mul(cprev, dact(g.b, fa, f, g.dtype))
        ca = g.Mul(o, dact(g.b, ha, hc, g.dtype))
        cf = f
        if peep:
            pi, po, pf = peeps
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
            dhn, dh_pass = masked_grad(b, dh, m, xs[0] if dy else None)
            dcn, dc_pass = masked_grad(b, dc, m)
            dcn = b.op("Add", dcn, b.op("Mul", dhn, at))
            da = b.op("Mul", b.op("Concat", dcn, dhn, dcn, dcn, axis=1), kt)
            return [add(b, b.op("MatMul", da, r), dh_pass), add(b, b.op("Mul", dcn, ft), dc_pass)], [da]

        dh_end = rec.end_state(0, d) or rec.zeros_state()
        dc_end = rec.end_state(1, d) or rec.zeros_state()
        (dh0, dc0), (da,) = rec.loop(back, [dh_end, dc_end], seqs, 1, reverse=True)
        out = param_grads(g, g.wants, da, v["x"], hprev)
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
    if expose:
        _replace_forward(g, rec, *fwd)
    return collect(g, rec, per_dir, (5, 6))
