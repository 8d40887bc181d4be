"""The torch oracle (tests/test_autodiff_torchref.py) for recurrent layers and control flow: LSTM, GRU and
RNN written with torch ops step by step (the ONNX definitions, as tests/recurrent_oracle.py), and If,
Loop and Scan bodies evaluated by the oracle itself; torch.autograd differentiates through all of it.
Imported only in the torch worker process."""

from __future__ import annotations

import numpy as np
import torch
from onnx import numpy_helper

FLOW_OPS = {"LSTM", "GRU", "RNN", "If", "Loop", "Scan"}
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
DEFAULT_ACTS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}
ACT = {"Sigmoid": torch.sigmoid, "Tanh": torch.tanh, "Relu": torch.relu}


def recurrent(op: str, ins: list, a: dict) -> list:
    X, W, R = ins[0], ins[1], ins[2]
    get = lambda k: ins[k] if len(ins) > k else None  # noqa: E731
    B, lens, h0, c0, P = get(3), get(4), get(5), get(6) if op == "LSTM" else None, get(7) if op == "LSTM" else None
    layout = a.get("layout", 0)
    if layout:
        X = X.transpose(0, 1)
        h0 = None if h0 is None else h0.transpose(0, 1)
        c0 = None if c0 is None else c0.transpose(0, 1)
    T, nb = X.shape[0], X.shape[1]
    D, H, ng = W.shape[0], R.shape[2], GATES[op]
    acts = [x.decode() if isinstance(x, bytes) else x for x in a.get("activations", [])] or DEFAULT_ACTS[op] * D
    k = len(DEFAULT_ACTS[op])
    lens = torch.full((nb,), T, dtype=torch.long) if lens is None else lens.long()
    direction, lbr = a.get("direction", "forward"), a.get("linear_before_reset", 0)
    ys, yhs, ycs = [], [], []
    for d in range(D):
        rev = direction == "reverse" or (direction == "bidirectional" and d == 1)
        f = [ACT[n] for n in acts[k * d:k * d + k]]
        w, r = W[d], R[d]
        b = torch.zeros(2 * ng * H, dtype=X.dtype) if B is None else B[d]
        wb, rb = b[:ng * H], b[ng * H:]
        p = torch.zeros(3 * H, dtype=X.dtype) if P is None else P[d]
        h = torch.zeros(nb, H, dtype=X.dtype) if h0 is None else h0[d]
        c = torch.zeros(nb, H, dtype=X.dtype) if c0 is None else c0[d]
        y = [[None] * nb for _ in range(T)]
        for s in range(T):
            t_of = torch.clamp(lens - 1 - s, min=0) if rev else torch.full((nb,), s, dtype=torch.long)
            live = (s < lens).unsqueeze(1)
            x = X[t_of, torch.arange(nb)]
            if op == "RNN":
                hn, cn = f[0](x @ w.T + h @ r.T + wb + rb), c
            elif op == "LSTM":
                gi, go, gf, gc = torch.split(x @ w.T + h @ r.T + wb + rb, H, dim=1)
                i = f[0](gi + p[:H] * c)
                fg = f[0](gf + p[2 * H:] * c)
                cn = fg * c + i * f[1](gc)
                hn = f[0](go + p[H:2 * H] * cn) * f[2](cn)
            else:
                xz, xr, xh = torch.split(x @ w.T + wb, H, dim=1)
                rz, rr, rh = torch.split(r, H, dim=0)
                bz, br, bh = torch.split(rb, H)
                z, rt = f[0](xz + h @ rz.T + bz), f[0](xr + h @ rr.T + br)
                pre = rt * (h @ rh.T + bh) if lbr else (rt * h) @ rh.T + bh
                hn, cn = (1 - z) * f[1](xh + pre) + z * h, c
            h, c = torch.where(live, hn, h), torch.where(live, cn, c)
            for n in range(nb):
                if bool(live[n, 0]):
                    y[int(t_of[n])][n] = h[n]
        zero = torch.zeros(H, dtype=X.dtype)
        ys.append(torch.stack([torch.stack([v if v is not None else zero for v in row]) for row in y]))
        yhs.append(h)
        ycs.append(c)
    Y, Yh, Yc = torch.stack(ys, 1), torch.stack(yhs), torch.stack(ycs)
    if layout:
        Y, Yh, Yc = Y.permute(2, 0, 1, 3), Yh.transpose(0, 1), Yc.transpose(0, 1)
    return [Y, Yh] + ([Yc] if op == "LSTM" else [])


def run_body(graph, env: dict, feeds: dict, eval_node, opset: int) -> list:
    scope = dict(env)
    for init in graph.initializer:
        scope[init.name] = torch.from_numpy(np.array(numpy_helper.to_array(init)))
    scope.update(feeds)
    for node in graph.node:
        outs = eval_node(node, [scope[i] if i else None for i in node.input], opset, scope)
        for name, v in zip(node.output, outs):
            if name:
                scope[name] = v
    return [scope[o.name] for o in graph.output]


def eval_flow(node, ins: list, a: dict, opset: int, env: dict, eval_node) -> list:
    op = node.op_type
    if op in GATES:
        return recurrent(op, ins, a)
    if op == "If":
        return run_body(a["then_branch"] if bool(ins[0]) else a["else_branch"], env, {}, eval_node, opset)
    if op == "Loop":
        body = a["body"]
        names = [i.name for i in body.input]
        n = len(ins) - 2
        states, scans = list(ins[2:]), None
        m = None if ins[0] is None else int(ins[0])
        go = True if len(ins) < 2 or ins[1] is None else bool(ins[1])
        it = 0
        while go and (m is None or it < m):
            feeds = dict(zip(names, [torch.tensor(it, dtype=torch.long), torch.tensor(go)] + states))
            outs = run_body(body, env, feeds, eval_node, opset)
            go, states = bool(outs[0]), list(outs[1:1 + n])
            scans = [[] for _ in outs[1 + n:]] if scans is None else scans
            for lst, v in zip(scans, outs[1 + n:]):
                lst.append(v)
            it += 1
        return states + [torch.stack(lst) for lst in (scans or [])]
    if op == "Scan":
        body = a["body"]
        m = a["num_scan_inputs"]
        n = len(ins) - m
        k = len(body.output) - n
        di, ai = a.get("scan_input_directions", [0] * m), a.get("scan_input_axes", [0] * m)
        do, ao = a.get("scan_output_directions", [0] * k), a.get("scan_output_axes", [0] * k)
        xs = [torch.movedim(x, ax % x.dim(), 0) for x, ax in zip(ins[n:], ai)]
        xs = [torch.flip(x, [0]) if d else x for x, d in zip(xs, di)]
        names = [i.name for i in body.input]
        states, per = list(ins[:n]), [[] for _ in range(k)]
        for t in range(xs[0].shape[0]):
            outs = run_body(body, env, dict(zip(names, states + [x[t] for x in xs])), eval_node, opset)
            states = list(outs[:n])
            for j in range(k):
                per[j].append(outs[n + j])
        ys = [torch.stack(per[j][::-1] if do[j] else per[j]) for j in range(k)]
        return states + [torch.movedim(y, 0, ax % y.dim()) for y, ax in zip(ys, ao)]
    raise ValueError(op)
