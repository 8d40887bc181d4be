"""LSTM, GRU and RNN as their specification says, for the reference runner (``corrected_ops``).

onnx.reference (1.23 at least) ignores ``sequence_lens`` (a shorter sequence ran on through the padding,
its Y_h the state after T steps), ``activations`` (Relu for RNN: "Unknown activation function"; LSTM and GRU
ran their defaults) and ``clip``; ``diff --vs-reference`` blamed onnxruntime for it.

Here: sequence b is read for t < sequence_lens[b] only (the reverse direction from sequence_lens[b] - 1 down
to 0), Y is 0 beyond it and Y_h / Y_c hold its last state; ``clip`` bounds every activation's input to
[-clip, clip]; ``activation_alpha`` / ``activation_beta`` are taken in order by the activations that have
such a parameter (defaults: those of the ONNX operator of that name); LSTM's gates i, o, f, c with peepholes
P = [p_i, p_o, p_f] and ``input_forget`` (f = 1 - i); GRU's z, r, h with ``linear_before_reset``; ``layout``
1 puts the batch first. Computed in float64, returned in X's type."""

from __future__ import annotations

import numpy as np

from onnx.reference.op_run import OpRun

# name: (function of (x, alpha, beta), default alpha, default beta); None: the activation has no such parameter
_ACTIVATIONS = {
    "relu": (lambda x, a, b: np.maximum(x, 0.0), None, None),
    "tanh": (lambda x, a, b: np.tanh(x), None, None),
    "sigmoid": (lambda x, a, b: 1.0 / (1.0 + np.exp(-x)), None, None),
    "affine": (lambda x, a, b: a * x + b, 1.0, 0.0),
    "leakyrelu": (lambda x, a, b: np.where(x >= 0, x, a * x), 0.01, None),
    "thresholdedrelu": (lambda x, a, b: np.where(x > a, x, 0.0), 1.0, None),
    "scaledtanh": (lambda x, a, b: a * np.tanh(b * x), 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: np.clip(a * x + b, 0.0, 1.0), 0.2, 0.5),
    "elu": (lambda x, a, b: np.where(x >= 0, x, a * (np.exp(x) - 1.0)), 1.0, None),
    "softsign": (lambda x, a, b: x / (1.0 + np.abs(x)), None, None),
    "softplus": (lambda x, a, b: np.log1p(np.exp(x)), None, None),
}
_DEFAULTS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}


def _functions(names, alphas, betas, clip):
    """The activations as functions of x (clipped first when ``clip`` is set)."""
    alphas, betas = list(alphas or []), list(betas or [])
    out = []
    for name in names:
        name = name.decode() if isinstance(name, bytes) else name
        if name.lower() not in _ACTIVATIONS:
            raise ValueError(f"unknown activation {name!r}")
        fn, da, db = _ACTIVATIONS[name.lower()]
        a = (alphas.pop(0) if alphas else da) if da is not None else None
        b = (betas.pop(0) if betas else db) if db is not None else None
        out.append(lambda x, fn=fn, a=a, b=b: fn(x if clip is None else np.clip(x, -clip, clip), a, b))
    return out


class _Recurrent(OpRun):
    op_domain = ""

    def _run(self, X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None, activation_alpha=None,
             activation_beta=None, activations=None, clip=None, direction=None, hidden_size=None, input_forget=None,
             layout=None, linear_before_reset=None, **_):
        op = type(self).__name__
        x = X.astype(np.float64)
        h0 = None if initial_h is None else initial_h.astype(np.float64)
        c0 = None if initial_c is None else initial_c.astype(np.float64)
        if layout:
            x = x.transpose(1, 0, 2)
            h0 = None if h0 is None else h0.transpose(1, 0, 2)
            c0 = None if c0 is None else c0.transpose(1, 0, 2)
        T, nb = x.shape[:2]
        D, H = W.shape[0], R.shape[-1]
        k = len(_DEFAULTS[op])
        names = list(activations) if activations else _DEFAULTS[op] * D
        names = names * D if len(names) == k else names
        fns = _functions(names, activation_alpha, activation_beta, clip)
        lens = np.full(nb, T, np.int64) if sequence_lens is None else np.asarray(sequence_lens, np.int64)
        Y = np.zeros((T, D, nb, H))
        Yh, Yc = np.zeros((D, nb, H)), np.zeros((D, nb, H))
        for d in range(D):
            rev = direction == "reverse" or (direction == "bidirectional" and d == 1)
            f = fns[k * d:k * d + k]
            w, r = W[d].astype(np.float64), R[d].astype(np.float64)
            ng = w.shape[0] // H
            b = np.zeros(2 * ng * H) if B is None else B[d].astype(np.float64)
            wb, rb = b[:ng * H], b[ng * H:]
            p = np.zeros(3 * H) if P is None else P[d].astype(np.float64)
            h = np.zeros((nb, H)) if h0 is None else h0[d].copy()
            c = np.zeros((nb, H)) if c0 is None else c0[d].copy()
            for s in range(T):
                t = np.where(lens - 1 - s >= 0, lens - 1 - s, 0) if rev else np.full(nb, s)
                live = (s < lens)[:, None]
                xt = x[t, np.arange(nb)]
                hn, cn = self.step(xt, h, c, w, r, wb, rb, p, f, H, input_forget, linear_before_reset)
                h, c = np.where(live, hn, h), np.where(live, cn, c)
                for n in np.flatnonzero(live[:, 0]):
                    Y[t[n], d, n] = h[n]
            Yh[d], Yc[d] = h, c
        if layout:
            Y, Yh, Yc = Y.transpose(2, 0, 1, 3), Yh.transpose(1, 0, 2), Yc.transpose(1, 0, 2)
        outs = [Y.astype(X.dtype), Yh.astype(X.dtype), Yc.astype(X.dtype)]
        return tuple(outs[:len(self.onnx_node.output)])


class LSTM(_Recurrent):
    @staticmethod
    def step(x, h, c, w, r, wb, rb, p, f, H, input_forget, _lbr):
        gi, go, gf, gc = np.split(x @ w.T + h @ r.T + wb + rb, 4, axis=1)
        i = f[0](gi + p[:H] * c)
        fg = 1.0 - i if input_forget else f[0](gf + p[2 * H:] * c)
        cn = fg * c + i * f[1](gc)
        o = f[0](go + p[H:2 * H] * cn)
        return o * f[2](cn), cn


class GRU(_Recurrent):
    @staticmethod
    def step(x, h, c, w, r, wb, rb, p, f, H, _input_forget, linear_before_reset):  # noqa: ARG004
        xz, xr, xh = np.split(x @ w.T + wb, 3, axis=1)
        rz, rr, rh = np.split(r, 3, axis=0)
        bz, br, bh = np.split(rb, 3)
        z = f[0](xz + h @ rz.T + bz)
        rt = f[0](xr + h @ rr.T + br)
        pre = rt * (h @ rh.T + bh) if linear_before_reset else (rt * h) @ rh.T + bh
        return (1 - z) * f[1](xh + pre) + z * h, c


class RNN(_Recurrent):
    @staticmethod
    def step(x, h, c, w, r, wb, rb, p, f, H, _input_forget, _lbr):  # noqa: ARG004
        return f[0](x @ w.T + h @ r.T + wb + rb), c
