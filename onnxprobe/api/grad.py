"""Gradients (``grad``, ``diff --grad``): backward graphs, runs, checks, export."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import onnx

from onnxprobe.errors import ExecutionError, ModelError, OpsetTooOld, first_line
from onnxprobe.graph.expose import expose
from onnxprobe.graph.select import Selection, select
from onnxprobe.graph.shapes import infer_shapes
from onnxprobe.runtime import feeds as _feeds
from onnxprobe.runtime.session import create_session, run_bound
from onnxprobe.stats.tensor_stats import TensorStats
from onnxprobe.types import ProbePlan, RunConfig, RunInfo, TensorRef

from onnxprobe.api.core import Model, load, feeds, run


# ---------------------------------------------------------------------------------------------------
# Gradients (``onnxprobe grad``): attach a loss and a backward graph (onnxprobe.autodiff), run forward and
# backward in one onnxruntime session with in-graph statistics of every gradient, check them against
# finite differences, export the backward model.


# forward + backward run with every onnxruntime graph optimisation unless the caller says otherwise: the
# gradients are the same, and layout (NCHWc) and fusions make the Conv-heavy backward graphs several times faster
GRAD_OPT_LEVEL = "all"


@dataclass
class GradSpec:
    """The loss: ``output`` (default: the model's first output) and ``loss`` (sum | mean | mse |
    cross-entropy | output-grad) with its ``target`` / ``labels`` / ``output_grad`` array; ``wrt``:
    names or globs of the tensors to differentiate (default: weights and probed activations)."""

    output: str | None = None
    loss: str = "sum"
    target: np.ndarray | None = None
    labels: np.ndarray | None = None
    output_grad: np.ndarray | None = None
    wrt: tuple[str, ...] = ()

    @property
    def extra(self) -> np.ndarray | None:
        return {"mse": self.target, "cross-entropy": self.labels, "output-grad": self.output_grad}.get(self.loss)


@dataclass
class GradPlan:
    """The model with its loss and backward graph (``backward.model``: outputs = loss, then gradients)."""

    backward: object  # onnxprobe.autodiff.engine.Backward
    loss: object  # onnxprobe.autodiff.loss.Loss
    targets: list  # [onnxprobe.autodiff.select.Target], topological order
    forward: onnx.ModelProto  # forward graph + loss (no backward), shapes inferred
    extra_feed: dict[str, np.ndarray]
    source: str
    warnings: list[str] = field(default_factory=list)

    @property
    def grads(self) -> dict[str, str]:
        return self.backward.grads


def _pick_output(model: onnx.ModelProto, name: str | None) -> str:
    from onnxprobe.errors import UsageError

    outs = [o.name for o in model.graph.output]
    if name is None:
        if not outs:
            raise UsageError("the model has no outputs")
        return outs[0]
    if name not in outs:
        raise UsageError(f"--output {name!r}: not an output of the model; its outputs are: {', '.join(outs)}")
    return name


def _with_input_shapes(model: onnx.ModelProto, feed: dict[str, np.ndarray]) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.value_info[:]
    for vi in out.graph.input:
        if vi.name in feed and vi.type.HasField("tensor_type"):
            shp = vi.type.tensor_type.shape
            shp.ClearField("dim")
            for d in np.shape(feed[vi.name]):
                shp.dim.add().dim_value = int(d)
    return out


from onnxprobe.errors import OnnxProbeError  # noqa: E402


def _runtime_shapes(model: onnx.ModelProto, feed: dict[str, np.ndarray], warnings: list[str], *,
                    ranks_only: bool = False) -> onnx.ModelProto:
    """Fill in the types of main-graph tensors that shape inference left unknown (e.g. a Reshape whose
    shape is computed) from one forward run."""
    from onnxprobe.graph.shapes import static_shape, value_types

    types = value_types(model)
    missing = [o for n in model.graph.node for o in n.output
               if o and static_shape(types.get(o)) is None and n.op_type not in ("If", "Loop", "Scan")]
    if not missing:
        return model
    refs = [r for r in select(model, Selection(all=True, include_constants=True)) if r.name in set(missing)]
    exposed, probes = expose(model, refs, stats=False, shapes=False, raw=True)
    try:
        out, _ = run_bound(create_session(exposed), feed, [p.raw_output for p in probes if p.raw_output])
    except ExecutionError as e:
        warnings.append(f"could not run the model to learn the shapes inference missed ({e})")
        return model
    m = onnx.ModelProto()
    m.CopyFrom(model)
    known = {vi.name for vi in m.graph.value_info}
    for p in probes:
        if p.raw_output in out:
            a = out[p.raw_output]
            dims = [None] * a.ndim if ranks_only else list(a.shape)
            vi = onnx.helper.make_tensor_value_info(p.ref.name, onnx.helper.np_dtype_to_tensor_dtype(a.dtype), dims)
            if p.ref.name in known:
                for old in m.graph.value_info:
                    if old.name == p.ref.name:
                        old.CopyFrom(vi)
            else:
                m.graph.value_info.append(vi)
    return m


# Gradients of models older than this opset that need newer op versions (Slice with steps, ScatterElements
# with reduction...) are written on a copy converted to it (onnx.version_converter); the user's file is
# not touched, and the exported backward model has this opset.
GRAD_OPSET = 17


def grad_plan(model: Model, spec: GradSpec | None = None, selection: Selection | None = None, *,
              feed: dict[str, np.ndarray] | None = None, names: list[str] | None = None,
              unsupported: str = "raise") -> GradPlan:
    """Attach the loss and the backward graph. With ``feed``, shapes are re-inferred for those input
    shapes first (static shapes make a smaller backward graph); without it the backward graph keeps the
    model's dynamic dimensions (what ``--export`` writes). ``names``: exact tensors to differentiate,
    instead of ``selection`` and ``spec.wrt``; ``unsupported="skip"``: an op without a gradient rule stops
    the gradient (the tensors behind it get none, with a warning) instead of raising. When a gradient
    needs a newer opset than the model's, the plan is made on a copy converted to GRAD_OPSET."""
    try:
        return _grad_plan(model, spec, selection, feed=feed, names=names, unsupported=unsupported)
    except OpsetTooOld as e:
        from onnxprobe.graph.builder import default_opset

        old = default_opset(model.proto)
        if old >= GRAD_OPSET or e.needed > GRAD_OPSET:
            raise
        upgraded, needed = _upgraded(model, old, e), e.needed
    gp = _grad_plan(upgraded, spec, selection, feed=feed, names=names, unsupported=unsupported)
    gp.warnings.insert(0, f"model opset {old}: the gradients need opset {needed} ops, so they are computed on a "
                          f"copy converted to opset {GRAD_OPSET} (onnx.version_converter), which --export writes")
    return gp


def _upgraded(model: Model, old: int, cause: OpsetTooOld) -> Model:
    from onnx import version_converter

    from onnxprobe.graph.shapes import annotate

    try:
        proto = version_converter.convert_version(model.proto, GRAD_OPSET)
    except Exception as e:  # noqa: BLE001 - the converter raises many kinds
        raise ModelError(f"{first_line(cause)}; converting the model from opset {old} to {GRAD_OPSET} failed: "
                         f"{first_line(e)[:200]}") from e
    warnings = list(model.warnings)
    annotate(proto, warnings)
    return Model(proto, proto, model.source, warnings)


def _grad_plan(model: Model, spec: GradSpec | None, selection: Selection | None, *,
               feed: dict[str, np.ndarray] | None, names: list[str] | None, unsupported: str) -> GradPlan:
    from onnxprobe.autodiff.engine import _all_names, attach_backward
    from onnxprobe.graph.builder import default_opset
    from onnxprobe.autodiff.loss import attach_loss
    from onnxprobe.autodiff.select import named_targets, targets

    spec = spec or GradSpec()
    warnings = list(model.warnings)
    output = _pick_output(model.proto, spec.output)
    base = infer_shapes(_with_input_shapes(model.proto, feed), warnings) if feed is not None else model.inferred
    if feed is not None:
        base = _runtime_shapes(base, feed, warnings)
    else:  # keep the dynamic dimensions, learn only the missing ranks (from a run on default inputs)
        try:
            base = _runtime_shapes(base, _feeds.make_feeds(model.proto, notes=[]), warnings, ranks_only=True)
        except OnnxProbeError:
            pass
    tg = named_targets(base, names) if names is not None else targets(base, selection, tuple(spec.wrt))
    fwd = onnx.ModelProto()
    fwd.CopyFrom(base)
    loss = attach_loss(fwd, output, spec.loss, extra=spec.extra, opset=default_opset(fwd), names=_all_names(fwd))
    fwd = infer_shapes(fwd, warnings)
    bw = attach_backward(fwd, loss.seeds, [t.ref.name for t in tg], outputs=[loss.loss], unsupported=unsupported)
    if bw.stopped:
        warnings.append(f"no gradient rule for {len(bw.stopped)} op(s) on the way, the gradient stops there: "
                        f"{', '.join(bw.stopped[:3])}{' …' if len(bw.stopped) > 3 else ''}")
    for name in bw.unused if names is None else ():
        warnings.append(f"{name}: the loss does not depend on it; no gradient")
    if spec.loss in ("sum", "mean"):
        prod = next((n for n in base.graph.node if output in n.output), None)
        if prod is not None and prod.op_type == "Softmax":
            warnings.append(f"output {output!r} is a Softmax: its {spec.loss} is constant, so every gradient is ~0; "
                            "use --loss cross-entropy --labels, --loss mse --target or --output-grad")
    extra = {loss.input: spec.extra} if loss.input else {}
    return GradPlan(bw, loss, [t for t in tg if t.ref.name in bw.grads], fwd, extra, model.source, warnings)


def export_backward(model: Model, out: str | os.PathLike, spec: GradSpec | None = None,
                    selection: Selection | None = None) -> GradPlan:
    """Write the model with its backward graph: inputs = the model's inputs (+ target / labels / output
    gradient), outputs = the loss and the gradients (``<tensor>_grad``); weights stay initializers."""
    from onnxprobe.graph.io import save_model

    gp = grad_plan(model, spec, selection)
    m = gp.backward.model
    m.producer_name = m.producer_name or "onnxprobe"
    doc = f"onnxprobe backward graph: loss {gp.loss.kind} of {gp.loss.output}"
    m.doc_string = (m.doc_string + "\n" + doc) if m.doc_string else doc
    save_model(m, out)
    return gp


@dataclass
class GradRow:
    target: object  # onnxprobe.autodiff.select.Target
    grad: str  # the gradient tensor's name in the backward model
    stats: TensorStats | None
    value_norm: float | None  # |tensor| (weights, inputs, activations)
    check: dict | None = None  # finite-difference check: error, tolerance, ok

    @property
    def name(self) -> str:
        return self.target.ref.name

    @property
    def norm(self) -> float | None:
        return None if self.stats is None else float(np.sqrt(self.stats.sumsq))

    @property
    def ratio(self) -> float | None:
        if self.norm is None or not self.value_norm:
            return None
        return self.norm / self.value_norm


@dataclass
class GradResult:
    plan: GradPlan
    rows: list[GradRow]
    loss: float
    info: RunInfo
    notes: list[str] = field(default_factory=list)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)  # forward tensor name -> gradient (save/check)
    check_mode: str | None = None  # "float64", "float64 (float32 gradients)" or "float32"


def _norm(a) -> float:
    a = np.asarray(a, dtype=np.float64)
    return float(np.sqrt(np.sum(a * a)))


def grad(
    path: str | os.PathLike,
    selection: Selection | None = None,
    config: RunConfig | None = None,
    spec: GradSpec | None = None,
    *,
    save: bool = False,
    check: bool = False,
    seed: int = 0,
    int_range: tuple[int, int] = (0, 100),
    shapes: dict[str, tuple[int, ...]] | None = None,
    files: dict[str, str] | None = None,
    arrays: dict[str, np.ndarray] | None = None,
) -> GradResult:
    """Load a model, attach a loss and its backward graph, run forward and backward in one session and
    return the statistics of every gradient: what ``onnxprobe grad`` does."""
    from onnxprobe.autodiff.select import weight_value

    spec = spec or GradSpec()
    config = config or RunConfig(opt_level=GRAD_OPT_LEVEL)
    model = load(path)
    notes: list[str] = []
    feed = feeds(model, seed=seed, int_range=int_range, shapes=shapes, files=files, arrays=arrays, notes=notes)
    gp = grad_plan(model, spec, selection, feed=feed)
    bw = gp.backward
    refs = []
    for t in gp.targets:
        r = t.ref
        refs.append(TensorRef(name=bw.grads[r.name], node=r.node, op_type=r.op_type, index=r.index, dtype=r.dtype,
                              shape=r.shape, direction="backward", grad_of=r.name))
    acts = [t.ref for t in gp.targets if t.kind == "activation"]
    scored = onnx.ModelProto()
    scored.CopyFrom(bw.model)
    del scored.graph.output[1:]  # gradients leave the device as statistics (or raw, when asked)
    raw = {r.name for r in refs} | ({r.name for r in acts} if check else set()) if (save or check) else False
    exposed, probes = expose(scored, refs + acts, stats=True, raw=raw, warnings=gp.warnings, nonfinite="deferred")
    result = run(ProbePlan(exposed, probes, gp.source, gp.warnings, base=scored), {**feed, **gp.extra_feed}, config, notes=notes)
    loss = float(np.asarray(result.outputs[gp.loss.loss]).reshape(-1)[0])
    rows, saved = [], {}
    for t, ref in zip(gp.targets, refs):
        name = t.ref.name
        if t.kind == "weight":
            v = weight_value(model.proto, name)
            vn = _norm(v) if v is not None else None
        elif t.kind == "input":
            vn = _norm(feed[name]) if name in feed else None
        else:
            st = result.stats.get(name)
            vn = float(np.sqrt(st.sumsq)) if st is not None else None
        rows.append(GradRow(t, ref.name, result.stats.get(ref.name), vn))
        if ref.name in result.arrays:
            saved[name] = result.arrays[ref.name]
    res = GradResult(gp, rows, loss, result.info, list(result.notes), saved if (save or check) else {})
    if check:
        values = {a.name: result.arrays[a.name] for a in acts if a.name in result.arrays}
        res.check_mode = grad_check(model, gp, feed, res, device=result.info.device, seed=seed, values=values)
    return res


def grad_check(model: Model, gp: GradPlan, feed: dict[str, np.ndarray], result: GradResult, *,
               device: str = "cpu", seed: int = 0, values: dict[str, np.ndarray] | None = None) -> str:
    """Check each gradient in ``result`` against central finite differences of the loss along random
    directions: one weighted by the gradient (v = g u |t| / rms(t), u uniform in [0.5, 1.5]) and, in
    float64, a Gaussian one. Fills ``row.check`` and returns the precision used.

    float64: the forward graph (and, when onnxruntime can, the backward graph) converted to float64,
    step h = 1e-6 RMS(tensor); tolerance 1e-6 (1e-3 when the gradients themselves are float32).
    float32 (onnxruntime lacks a double kernel for some op, e.g. Conv): Richardson-extrapolated central
    differences with h = 1e-3 RMS(tensor); tolerance 5e-2, the level of float32 rounding in the loss over
    such a step (a wrong rule is off by far more; the rule tests check each rule to 1e-6 in float64). Differences below the noise floor of the loss (machine epsilon x |L| / h) count as 0.

    Relu and MaxPool are not differentiable everywhere: a Relu output's zeros are ties of the MaxPool that
    reads them. Directions therefore leave the tensor's exact zeros alone; three step sizes are tried and
    the best agreement kept; and where the one-sided differences disagree (a kink), a gradient between
    them passes.
    """
    with np.errstate(all="ignore"):  # inf / NaN in a degenerate model's losses make failed rows, not warnings
        return _grad_check(model, gp, feed, result, device=device, seed=seed, values=values)


def _grad_check(model: Model, gp: GradPlan, feed: dict[str, np.ndarray], result: GradResult, *,
                device: str, seed: int, values: dict[str, np.ndarray] | None) -> str:
    from onnxprobe.autodiff.check import DELTA, perturbable, to_float64
    from onnxprobe.autodiff.select import weight_value
    from onnxprobe.errors import ExecutionError

    from onnxprobe.autodiff.engine import shaped_types

    types = shaped_types(gp.forward)
    tensors = {}
    for row in result.rows:
        g = result.arrays.get(row.name)
        tp = types.get(row.name)
        if g is None or tp is None:
            continue
        tensors[row.name] = (tp.tensor_type.elem_type, list(g.shape))
    pm = perturbable(gp.forward, gp.loss.loss, tensors)
    mode, session, grads64 = "float32", None, None
    try:
        pm64 = to_float64(pm)
        session = create_session(pm64, device=device)
        mode = "float64"
    except ExecutionError:
        session = create_session(pm, device=device)
    base = {**feed, **gp.extra_feed}
    if mode == "float64":
        base = {k: (v.astype(np.float64) if v.dtype == np.float32 else v) for k, v in base.items()}
        grads64 = _grads_float64(gp, base, device)
        if grads64 is None:
            mode = "float64 (float32 gradients)"
    dt = np.float64 if mode.startswith("float64") else np.float32
    zeros = {DELTA + n: np.zeros(s, dt) for n, (_, s) in tensors.items()}
    loss_name = gp.loss.loss

    def L(name, delta) -> float:
        f = dict(base)
        f.update(zeros)
        f[DELTA + name] = delta.astype(dt)
        out, _ = run_bound(session, f, [loss_name])
        return float(np.asarray(out[loss_name], np.float64).reshape(-1)[0])

    L0 = L(next(iter(tensors)), np.zeros(tensors[next(iter(tensors))][1])) if tensors else 0.0
    rng = np.random.default_rng(seed + 12345)
    eps = np.finfo(dt).eps
    tol = {"float64": 1e-6, "float64 (float32 gradients)": 1e-3, "float32": 5e-2}[mode]
    for row in result.rows:
        if row.name not in tensors:
            continue
        g = (grads64 or {}).get(row.name, result.arrays[row.name]).astype(np.float64)
        if row.target.kind == "weight":
            val = weight_value(model.proto, row.name)
            rms = float(np.sqrt(np.mean(np.square(val, dtype=np.float64)))) if val is not None and val.size else 1.0
        elif row.name in feed:
            rms = float(np.sqrt(np.mean(np.square(feed[row.name], dtype=np.float64))))
        else:
            st = row.value_norm
            rms = (st / np.sqrt(max(g.size, 1))) if st else 1.0
        h0 = (1e-6 if dt == np.float64 else 1e-3) * max(rms, 0.1)
        worst, detail = 0.0, None
        support = g != 0
        val = values.get(row.name) if values else (feed.get(row.name) if row.target.kind == "input" else None)
        if row.target.kind == "weight":
            val = weight_value(model.proto, row.name)
        if val is not None and np.shape(val) == g.shape and np.any(val != 0):
            support = support & (np.asarray(val) != 0)
        # relative perturbations where the values are known: a variance stays positive, zeros stay put
        rel = 1.0
        if val is not None and np.shape(val) == g.shape and np.any(val != 0):
            rel = np.abs(np.asarray(val, np.float64)) / max(rms, 1e-30)
        directions = [g * rng.uniform(0.5, 1.5, g.shape) * support * rel]
        if dt == np.float64:  # in float32 a Gaussian direction's signal drowns in rounding noise
            directions.append(rng.standard_normal(g.shape) * support * rel)
        for v in directions:
            v = v / max(float(np.sqrt(np.mean(v * v))), 1e-300)
            an = float(np.sum(g * v))
            best = None
            # kinks (Relu at 0, MaxPool ties) favour small steps, float32 rounding favours large ones:
            # try three steps and keep the best agreement
            for h in (h0, h0 / 10, h0 * 10, h0 / 100, h0 / 1000):
                lp, lm = L(row.name, h * v), L(row.name, -h * v)
                d1 = (lp - lm) / (2 * h)
                if dt == np.float64:
                    fd = d1
                else:
                    d2 = (L(row.name, 0.5 * h * v) - L(row.name, -0.5 * h * v)) / h
                    fd = (4 * d2 - d1) / 3
                floor = 50 * eps * max(abs(L0), 1e-30) / h
                big = max(abs(fd), abs(an))
                err = 0.0 if big <= floor else abs(fd - an) / big
                if not np.isfinite(err):
                    err = float("inf")
                kink = False
                if err > tol:
                    # at a kink the one-sided derivatives differ, and a valid (sub)gradient lies between them
                    dp, dm = (lp - L0) / h, (L0 - lm) / h
                    lo, hi = min(dp, dm), max(dp, dm)
                    if hi - lo > tol * big and lo - tol * big <= an <= hi + tol * big:
                        err, kink = 0.0, True
                if best is None or err < best[0]:
                    best = (err, fd, h, kink)
                if err <= tol:
                    break
            if detail is None or best[0] >= worst:
                worst, detail = best[0], (float(best[1]), an, float(best[2]), best[3])
        row.check = {"error": float(worst), "tolerance": tol, "ok": bool(worst <= tol), "fd": detail[0], "grad_dot": detail[1],
                     "step": detail[2], "kink": detail[3], "precision": mode}
    return mode


def _grads_float64(gp: GradPlan, feed64: dict[str, np.ndarray], device: str) -> dict[str, np.ndarray] | None:
    """The gradients recomputed by the float64 backward graph, or None when onnxruntime cannot run it."""
    from onnxprobe.autodiff.check import to_float64
    from onnxprobe.errors import ExecutionError

    from onnxprobe.autodiff.engine import attach_backward
    from onnxprobe.errors import ModelError

    try:
        fwd = infer_shapes(to_float64(gp.forward))
        bw = attach_backward(fwd, gp.loss.seeds, list(gp.grads), outputs=[gp.loss.loss])
        s = create_session(bw.model, device=device)
        names = list(bw.grads.values())
        out, _ = run_bound(s, feed64, names)
    except (ExecutionError, ModelError):
        return None
    return {t: out[g] for t, g in bw.grads.items()}


# --- diff --grad: the gradients of two models, paired and measured like their activations --------------


def diff_grad(
    a_path: str | os.PathLike,
    b_path: str | os.PathLike,
    spec: GradSpec | None = None,
    *,
    selection: Selection | None = None,
    config: RunConfig | None = None,
    tolerance=None,
    per_tensor: dict | None = None,
    user_map: dict[str, str] | None = None,
    seed: int = 0,
    int_range: tuple[int, int] = (0, 100),
    shapes: dict[str, tuple[int, ...]] | None = None,
    files: dict[str, str] | None = None,
    arrays: dict[str, np.ndarray] | None = None,
    max_memory: int | None = None,
    progress=None,
):
    """Compare the gradients of model A with those of model B (``onnxprobe diff --grad``): both get the
    loss ``spec`` and the same inputs; their weight, input and activation gradients are paired by the
    diff matching (names, QDQ / QOperator keys, node names, structure; see compare.gradients) and measured
    with the diff metrics. ``spec.wrt`` (names or globs of forward tensors) keeps only those gradients;
    ``user_map`` and ``per_tensor`` take forward tensor names (or gradient names). A weight gradient that
    fails the tolerance fails the comparison (``outputs_failed``). Returns a compare.diff.DiffResult."""
    import fnmatch
    from dataclasses import replace

    from onnxprobe.compare.diff import check_inputs
    from onnxprobe.compare.diff import diff as _diff
    from onnxprobe.compare.gradients import SUFFIX, GradSide, explain_unmatched, grad_reason
    from onnxprobe.compare.sides import Side
    from onnxprobe.errors import UsageError
    from onnxprobe.match.observe import Observation
    from onnxprobe.stats.metrics import Tolerance

    spec = spec or GradSpec()
    config = config or RunConfig(opt_level=GRAD_OPT_LEVEL)
    a_model, b_model = load(a_path), load(b_path)
    check_inputs(Side(str(a_path), a_model), Side(str(b_path), b_model))
    notes: list[str] = []
    feed = feeds(a_model, seed=seed, int_range=int_range, shapes=shapes, files=files, arrays=arrays, notes=notes)
    side_spec = replace(spec, wrt=())
    a = GradSide(str(a_path), a_model, "grad", config, spec=side_spec)
    b = GradSide(str(b_path), b_model, "grad", config, spec=side_spec)
    for side in (a, b):
        side.prepare(feed)
    if spec.wrt:
        def wanted(o) -> bool:
            names = [n[: -len(SUFFIX)] for n in (o.name, o.key) if n.endswith(SUFFIX)]
            return any(fnmatch.fnmatchcase(n, pat) for n in names for pat in spec.wrt)

        for side in (a, b):
            side._observation = Observation([o for o in side.observation.observables if wanted(o)], [], {})
        if not a.observation.observables:
            raise UsageError(f"--wrt {', '.join(spec.wrt)}: no gradient of model A matches")

    def as_grad(name: str) -> str:
        return name if name.endswith(SUFFIX) else name + SUFFIX

    gmap = {as_grad(k): as_grad(v) for k, v in (user_map or {}).items()} or None
    per = {as_grad(k): v for k, v in (per_tensor or {}).items()}
    res = _diff(a, b, feed, selection or Selection(), tolerance or Tolerance(), per, gmap, introduced=False,
                max_memory=max_memory, progress=progress)
    for r in res.results:
        r.pair.reason = grad_reason(r.pair)
    explain_unmatched(res.matching, a)
    for side in (a, b):  # the losses, also when no pair needed a value
        if side.loss is None:
            side.values([], feed)
    quantized = any(o.kind != "float" for o in a.observation.observables + b.observation.observables)
    res.measured = (f"gradients of the {spec.loss} loss" + (" (QuantizeLinear / DequantizeLinear: straight-through)"
                                                            if quantized else ""))
    res.grad = {"loss": spec.loss, "output_a": a.plan.loss.output, "output_b": b.plan.loss.output,
                "loss_a": a.loss, "loss_b": b.loss}
    res.notes[:0] = [n for n in notes + list(a_model.warnings) + list(b_model.warnings) if n not in res.notes]
    return res
