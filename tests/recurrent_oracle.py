"""LSTM, GRU and RNN as the ONNX operators define them, in float64 numpy, for the gradient tests:
``run(op, inputs, attrs)`` and onnx.reference overrides (``ORACLE_OPS``). onnx.reference's own ignore
sequence_lens, activations and linear_before_reset. test_recurrent_oracle_matches_onnxruntime checks this
one against onnxruntime's kernels (float32) on every direction, with and without sequence_lens.

Semantics (onnxruntime's too): a sequence b is read for t < sequence_lens[b] only (the reverse
direction from sequence_lens[b] - 1 down to 0); Y is 0 beyond it and Y_h / Y_c hold the last state.
"""

from __future__ import annotations

import numpy as np
from onnx.reference.op_run import OpRun


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


ACT = {"Sigmoid": _sig, "Tanh": np.tanh, "Relu": lambda x: np.maximum(x, 0.0)}
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
DEFAULT_ACTS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}


def run(op: str, X, W, R, B=None, lens=None, h0=None, c0=None, P=None, *, direction="forward",
        linear_before_reset=0, layout=0, activations=None):
    """(Y, Y_h, Y_c) of an ONNX LSTM / GRU / RNN (Y_c is None except for LSTM)."""
    if layout:
        X = X.transpose(1, 0, 2)
        h0 = None if h0 is None else h0.transpose(1, 0, 2)
        c0 = None if c0 is None else c0.transpose(1, 0, 2)
    T, nb, _ = X.shape
    D, H, ng = W.shape[0], R.shape[2], GATES[op]
    k = len(DEFAULT_ACTS[op])
    acts = list(activations) if activations else DEFAULT_ACTS[op] * D
    lens = np.full(nb, T) if lens is None else np.asarray(lens).astype(np.int64)
    Y = np.zeros((T, D, nb, H), X.dtype)
    Yh = np.zeros((D, nb, H), X.dtype)
    Yc = np.zeros((D, nb, H), X.dtype)
    for d in range(D):
        rev = direction == "reverse" or (direction == "bidirectional" and d == 1)
        f = [ACT[a] for a in acts[k * d:k * d + k]]
        w, r = W[d], R[d]
        b = np.zeros(2 * ng * H, X.dtype) if B is None else B[d]
        wb, rb = b[:ng * H], b[ng * H:]
        p = np.zeros(3 * H, X.dtype) if P is None else P[d]
        h = np.zeros((nb, H), X.dtype) if h0 is None else h0[d].copy()
        c = np.zeros((nb, H), X.dtype) if c0 is None else c0[d].copy()
        for s in range(T):
            # step s of this direction: position t of each sequence (reversed within its length)
            t_of = np.where(lens - 1 - s >= 0, lens - 1 - s, 0) if rev else np.full(nb, s)
            live = (s < lens)[:, None]
            x = X[t_of, np.arange(nb)]
            if op == "RNN":
                hn = f[0](x @ w.T + h @ r.T + wb + rb)
                cn = c
            elif op == "LSTM":
                gi, go, gf, gc = np.split(x @ w.T + h @ r.T + wb + rb, 4, axis=1)
                i = f[0](gi + p[:H] * c)
                fg = f[0](gf + p[2 * H:] * c)
                cn = fg * c + i * f[1](gc)
                o = f[0](go + p[H:2 * H] * cn)
                hn = o * f[2](cn)
            else:
                xz, xr, xh = np.split(x @ w.T + wb, 3, axis=1)
                rz, rr, rh = np.split(r, 3, axis=0)
                bz, br, bh = np.split(rb, 3)
                z = f[0](xz + h @ rz.T + bz)
                rt = f[0](xr + h @ rr.T + br)
                pre = rt * (h @ rh.T + bh) if linear_before_reset else (rt * h) @ rh.T + bh
                hn = (1 - z) * f[1](xh + pre) + z * h
                cn = c
            h = np.where(live, hn, h)
            c = np.where(live, cn, c)
            for n in range(nb):
                if live[n, 0]:
                    Y[t_of[n], d, n] = h[n]
        Yh[d], Yc[d] = h, c
    if layout:
        return Y.transpose(2, 0, 1, 3), Yh.transpose(1, 0, 2), Yc.transpose(1, 0, 2)
    return Y, Yh, (Yc if op == "LSTM" else None)


class _Recurrent(OpRun):
    op_domain = ""
    kind = ""

    def _run(self, X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None, activation_alpha=None,
             activation_beta=None, activations=None, clip=None, direction=None, hidden_size=None, input_forget=None,
             layout=None, linear_before_reset=None):
        acts = [a.decode() if isinstance(a, bytes) else a for a in activations] if activations else None
        y, yh, yc = run(self.kind, X, W, R, B, sequence_lens, initial_h, initial_c, P, direction=direction or "forward",
                        linear_before_reset=linear_before_reset or 0, layout=layout or 0, activations=acts)
        outs = [y, yh] + ([yc] if self.kind == "LSTM" else [])
        return tuple(outs[:len(self.onnx_node.output)])


class LSTM(_Recurrent):
    kind = "LSTM"


class GRU(_Recurrent):
    kind = "GRU"

    def _run(self, X, W, R, B=None, sequence_lens=None, initial_h=None, activation_alpha=None, activation_beta=None,
             activations=None, clip=None, direction=None, hidden_size=None, layout=None, linear_before_reset=None):
        return super()._run(X, W, R, B, sequence_lens, initial_h, None, None, activation_alpha, activation_beta,
                            activations, clip, direction, hidden_size, None, layout, linear_before_reset)


class RNN(_Recurrent):
    kind = "RNN"

    def _run(self, X, W, R, B=None, sequence_lens=None, initial_h=None, activation_alpha=None, activation_beta=None,
             activations=None, clip=None, direction=None, hidden_size=None, layout=None):
        return super()._run(X, W, R, B, sequence_lens, initial_h, None, None, activation_alpha, activation_beta,
                            activations, clip, direction, hidden_size, None, layout, None)


ORACLE_OPS = [LSTM, GRU, RNN]
