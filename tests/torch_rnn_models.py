"""torch LSTM and GRU models for the recurrent gradient tests and bench/grad.py: built, exported with both
exporters (TorchScript opset 17, dynamo opset 18) and differentiated by torch.autograd on the nn.Module
itself, the oracle for onnxprobe's weight gradients.

    python tests/torch_rnn_models.py OUT_DIR [NAME ...]

writes OUT_DIR/NAME_legacy.onnx, OUT_DIR/NAME_dynamo.onnx (when onnxscript is installed) and
OUT_DIR/NAME.npz: the input x, the output cotangent dy, every parameter (``param:<name>``) and torch's
gradient of <y, dy> for it (``grad:<name>``), in float64 from a float64 copy of the module. Run in its own
process: importing torch into the pytest process raises its peak memory for the whole session.

``onnx_grads_from_module`` maps those gradients onto the exported model's initializers: the exporters
write W = the gates reordered (LSTM: torch i, f, g, o -> ONNX i, o, f, c; GRU: r, z, n -> z, r, h) with a
leading direction axis, B = [b_ih, b_hh], and Linear weights as they are or transposed; each initializer
is matched to its parameters by value, and its gradient is the same rearrangement of theirs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

LSTM_ORDER = [0, 3, 1, 2]  # ONNX gate k = torch gate LSTM_ORDER[k]
GRU_ORDER = [1, 0, 2]

# name -> (kind, input size, hidden, layers, bidirectional, batch, steps)
MODELS = {
    "lstm": ("LSTM", 16, 32, 2, False, 2, 7),
    "gru": ("GRU", 16, 24, 1, True, 2, 7),
    "lstm_bench": ("LSTM", 80, 256, 2, False, 4, 100),
    "gru_bench": ("GRU", 80, 256, 2, False, 4, 100),
}


def build(name: str):
    import torch
    from torch import nn

    kind, i, h, layers, bidi, _, _ = MODELS[name]

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = getattr(nn, kind)(i, h, num_layers=layers, batch_first=True, bidirectional=bidi)
            self.head = nn.Linear(h * (2 if bidi else 1), 5)

        def forward(self, x):
            y = self.rnn(x)[0]
            return self.head(y[:, -1])

    torch.manual_seed(0)
    return Net().eval()


def export(name: str, out: Path) -> list[Path]:
    import torch

    net = build(name)
    _, i, _, _, _, batch, steps = MODELS[name]
    x = torch.randn(batch, steps, i)
    paths = []
    p = out / f"{name}_legacy.onnx"
    torch.onnx.export(net, (x,), str(p), dynamo=False, opset_version=17, input_names=["x"], output_names=["y"])
    paths.append(p)
    try:
        import onnxscript  # noqa: F401
    except ImportError:
        return paths
    p = out / f"{name}_dynamo.onnx"
    torch.onnx.export(net, (x,), str(p), dynamo=True, opset_version=18, input_names=["x"], output_names=["y"])
    paths.append(p)
    return paths


def reference(name: str, out: Path) -> Path:
    """x, dy, the parameters and torch's float64 gradients of <net(x), dy>."""
    import torch

    net = build(name).double()
    _, i, _, _, _, batch, steps = MODELS[name]
    g = torch.Generator().manual_seed(1)
    x = torch.randn(batch, steps, i, generator=g, dtype=torch.float64)
    dy = torch.randn(batch, 5, generator=g, dtype=torch.float64)
    params = dict(net.named_parameters())
    grads = torch.autograd.grad((net(x) * dy).sum(), list(params.values()))
    arrays = {"x": x.numpy(), "dy": dy.numpy(), "kind": np.array(MODELS[name][0])}
    for (k, v), gr in zip(params.items(), grads):
        arrays[f"param:{k}"] = v.detach().numpy()
        arrays[f"grad:{k}"] = gr.numpy()
    p = out / f"{name}.npz"
    np.savez(p, **arrays)
    return p


def _reorder(a: np.ndarray, order: list[int]) -> np.ndarray:
    parts = np.split(a, len(order), axis=0)
    return np.concatenate([parts[k] for k in order], axis=0)


def _candidates(ref: dict) -> list[tuple[np.ndarray, np.ndarray]]:
    """(value, gradient) of every tensor the exporters may have made from the parameters."""
    params = {k[6:]: v for k, v in ref.items() if k.startswith("param:")}
    grads = {k[5:]: v for k, v in ref.items() if k.startswith("grad:")}
    out = []
    for k, v in params.items():
        out += [(v, grads[k]), (v.T, grads[k].T)] if v.ndim == 2 else [(v, grads[k])]
    layers = sorted({int(k.split("_l")[1].split("_")[0]) for k in params if k.startswith("rnn.weight_ih_l")})
    order = LSTM_ORDER if str(ref["kind"]) == "LSTM" else GRU_ORDER
    for layer in layers:
        dirs = [s for s in ("", "_reverse") if f"rnn.weight_ih_l{layer}{s}" in params]
        for what in ("weight_ih", "weight_hh"):
            vs = [_reorder(params[f"rnn.{what}_l{layer}{s}"], order) for s in dirs]
            gs = [_reorder(grads[f"rnn.{what}_l{layer}{s}"], order) for s in dirs]
            out.append((np.stack(vs), np.stack(gs)))
        if f"rnn.bias_ih_l{layer}" in params:
            vs = [np.concatenate([_reorder(params[f"rnn.{b}_l{layer}{s}"], order) for b in ("bias_ih", "bias_hh")]) for s in dirs]
            gs = [np.concatenate([_reorder(grads[f"rnn.{b}_l{layer}{s}"], order) for b in ("bias_ih", "bias_hh")]) for s in dirs]
            out.append((np.stack(vs), np.stack(gs)))
    return out


def onnx_grads_from_module(weights: dict[str, np.ndarray], ref: dict) -> dict[str, np.ndarray]:
    """For each exported initializer matched by value: torch's gradient, rearranged as the initializer is."""
    cands = _candidates(ref)
    out = {}
    for name, w in weights.items():
        w = np.asarray(w, np.float64)
        for v, gr in cands:
            if v.shape == w.shape and np.allclose(v, w, rtol=1e-6, atol=1e-7):
                out[name] = gr
                break
    return out


if __name__ == "__main__":
    dst = Path(sys.argv[1])
    dst.mkdir(parents=True, exist_ok=True)
    for n in sys.argv[2:] or ["lstm", "gru"]:
        export(n, dst)
        reference(n, dst)
    raise SystemExit(0)
