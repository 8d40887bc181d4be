"""What a diff judges by and says it measured: the default criterion for what is compared (two float
models, quantized models, one model run two ways, two runtimes, reduced precision), the check that both
models take the same inputs, and the label of what each side measured (simulated or deployed
quantization, or plain floats)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import onnx
from onnx import TensorProto

from onnxprobe.compare.gradients import half_outputs
from onnxprobe.compare.measure import FLOATS
from onnxprobe.compare.sides import Side
from onnxprobe.errors import UsageError, settings_error
from onnxprobe.graph.constants import constants
from onnxprobe.graph.select import Selection, select
from onnxprobe.graph.skeleton import large_initializers, raw_bytes, skeleton
from onnxprobe.graph.walk import unread_extras
from onnxprobe.runtime.feeds import model_inputs
from onnxprobe.runtime.input_hints import SHAPES
from onnxprobe.stats.metrics import Tolerance
from onnxprobe.text import clean, quote, some

QUANTIZED_MIN_SQNR = 10.0
# two runtimes on one float32 model (README, "Runtimes"): measured OpenVINO 2026.4 CPU against onnxruntime
# on the 6 samples and 27 real models, every node output: SQNR 90-145 dB wherever the tensor carries signal,
# so 60 dB leaves 30 dB of headroom; the one exception is a saturated sigmoid near zero (PP-OCRv4 det,
# max|b| 8e-6, max|a-b| 1e-7, 21.5 dB; onnxruntime's own optimised run gives 19.5 dB on it), pure
# rounding noise that the absolute floor lets through
CROSS_RUNTIME_MIN_SQNR = 60.0
CROSS_RUNTIME_ABS_FLOOR = 1e-6
REDUCED_PRECISION_MIN_SQNR = 20.0  # a runtime computing in float16 / bfloat16 / TF32 (README: measured in bf16)


def default_tolerance(a: Side, b: Side) -> Tolerance:
    """The criterion when none is given, chosen by what is compared: a quantized model against a float one
    is judged by SQNR (int8 rounding is never within 1e-4: |a-b| <= atol + rtol|b| fails every layer of a
    healthy int8 model); one model on two runtimes by SQNR with an absolute floor (a runtime that fuses
    and reorders sums moves near-zero elements by more than allclose allows, at 100+ dB of SQNR);
    anything else by allclose."""
    if a.own_snapshot or b.own_snapshot:  # the model's own tensors saved: one computation, exact
        elsewhere = saved_elsewhere(a, b)
        if elsewhere is None:
            return Tolerance(why="the default for a model against its own saved tensors", default=True)
        what, low = elsewhere
        if a.observation.quantized or b.observation.quantized:  # int8 kernels on one, simulated on the other
            return _quantized(f"for a quantized model against its own tensors {what}")
        return (_reduced if low else _two_runtimes)(f"for a model against its own tensors {what}")
    qa, qb = a.observation.quantized, b.observation.quantized
    # two models, one quantized weights only (float activations): int8 weights are no closer than 1e-4 either
    wa, wb = qa or a.observation.weights_quantized, qb or b.observation.weights_quantized
    if wa != wb or (wa and wb and not one_model(a, b) and not same_content(a, b)):  # one model run two ways: below
        what = ("two quantized models" if wa and wb else "a quantized model against a float one" if wa else
                "a float model against a quantized one")
        return _quantized(f"for {what}")
    if qa and a.runner.kind == b.runner.kind and (a.runner.config.opt_level != b.runner.config.opt_level or a.runner.device != b.runner.device):
        return _quantized("for a quantized model run two ways (fused int8 kernels against the QDQ graph as written, or "
                          "two devices)")
    # (one model run alike on both sides, in one precision, is one computation: its rounding is not compared)
    low = [p for p in (_precision(a), _precision(b)) if p in LOW_PRECISIONS and not (one_model(a, b) and not run_two_ways(a, b))]
    halves = (half(a), half(b))
    # a half model against a float one; or one half model run two ways (runtimes, devices or levels that keep
    # float32 between nodes against ones that round every tensor to half: fp16 rounding alone is ~60 dB)
    low += [h for h in halves if h] if halves[0] != halves[1] or run_two_ways(a, b) else []
    if low and not a.observation.quantized:  # also one runtime on two devices (OpenVINO's GPU computes in f16)
        who = "a model" if low[0] in ("float16", "bfloat16") else "a runtime"
        # the floor as across runtimes: near-zero elements round no less in half than in float32 (a sigmoid
        # near -18, all below 1e-7, differs by 4e-8 on OpenVINO in f32 and in bf16 alike, at about -2 dB)
        return _reduced(f"when {who} computes in {low[0]}")
    if a.runner.kind != b.runner.kind and a.runner.takes_feeds and b.runner.takes_feeds:
        if a.observation.quantized:
            return _quantized(f"for a quantized model on two runtimes ({a.runner.kind}, {b.runner.kind}): one may run int8 "
                              "kernels where the other simulates them")
        return _two_runtimes(f"for one float model on two runtimes ({a.runner.kind}, {b.runner.kind})")
    if wa:  # one quantized model (or a copy) against itself, run the same way (one runtime, level, device): one computation
        return Tolerance(why="the default for one model against itself or its copy, run the same way", default=True)
    return Tolerance(why="the default for float models", default=True)


# the three SQNR defaults; ``what``: the rest of the criterion's why after "the default " ("for two quantized models")
def _quantized(what: str) -> Tolerance:
    """The default where one side is quantized and the other not (or runs it otherwise): SQNR >= 10 dB."""
    return Tolerance(metric="sqnr", min_sqnr=QUANTIZED_MIN_SQNR, why=f"the default {what}", default=True)


def _two_runtimes(what: str) -> Tolerance:
    """The default for one float computation made by two runtimes: SQNR >= 60 dB, with the absolute floor."""
    return Tolerance(metric="sqnr", min_sqnr=CROSS_RUNTIME_MIN_SQNR, abs_floor=CROSS_RUNTIME_ABS_FLOOR,
                     why=f"the default {what}", default=True)


def _reduced(what: str) -> Tolerance:
    """The default where one side computes in float16, bfloat16 or TF32: SQNR >= 20 dB, with the absolute floor
    (near-zero elements round no less in half than in float32)."""
    return Tolerance(metric="sqnr", min_sqnr=REDUCED_PRECISION_MIN_SQNR, abs_floor=CROSS_RUNTIME_ABS_FLOOR,
                     why=f"the default {what}", default=True)


# the metrics a light diff leaves out (``api.diff(extras=False)``: ``graph.pair_nodes.EXTRAS`` in the one run)
EXTRA_METRICS = ("max_rel", "mean_abs")


def chosen(given: Tolerance | None, default: Tolerance) -> Tolerance:
    """The criterion of a comparison whose default is ``default``, asked to judge by ``given`` (None: the default):
    ``given`` over it (``Tolerance.over``: flags that name some thresholds keep the default's others)."""
    return given.over(default) if given else default


def judged_by_extras(tolerance: Tolerance, per_tensor: dict[str, Tolerance] | None) -> bool:
    """Whether a pair's criterion (the whole-model one, or a per-tensor one) judges by a metric a light diff
    leaves out: then it keeps them (a verdict is never made without its number)."""
    return any(t.metric in EXTRA_METRICS for t in [tolerance, *(per_tensor or {}).values()])


def gradient_tolerance(a: Side, b: Side) -> Tolerance:
    """``diff --grad``'s default: ``default_tolerance``'s, where that is allclose, with its atol a fraction of
    each gradient's own max|b| (at least 1e-2 of the run's largest: ``Tolerance.at_scale``),
    |a-b| <= 1e-4 max(max|b|, F) + 1e-3 |b|. Gradients span many orders of magnitude
    (a saturated Sigmoid's are ~1e-9): an absolute 1e-4 cannot fail on values all far below it, and passed
    PP-OCRv4 det's weight gradients against its onnxruntime-optimised copy at cosine 0.55. Relative to the
    tensor's largest value, float32 rounding (~1e-6 of it) still passes and a disagreement fails, at any
    scale. SQNR defaults (quantized models, half precision) are scale-free already, but for a gradient that is 0 in
    exact arithmetic: float32 noise on both sides, a max|a-b| of at most 1e-6 of the run's scale passes
    (``Tolerance.at_scale``, ``stats.metrics.NOISE_FLOOR``)."""
    t = default_tolerance(a, b)
    if t.metric == "sqnr":
        return replace(t, atol_relative=True, scale="the max|a-b| floor 1e-6 of the largest weight gradient's max|b|, as a "
                                                    "gradient 0 in exact arithmetic is float32 noise in each model")
    if t.metric != "allclose":
        return t
    return replace(t, atol_relative=True, why="the default for gradients", scale="atol relative to each gradient's largest "
                                              "|b|, at least 1e-2 of the largest weight gradient's, as gradients span "
                                              "many orders of magnitude", default=True)


LOW_PRECISIONS = ("f16", "bf16", "tf32")


def saved_elsewhere(a: Side, b: Side) -> tuple[str, bool] | None:
    """A model against its own saved tensors (``layers --save``) that another runtime, device or float precision
    computed than the one running it now: (how, in words; whether either computed in reduced precision), else None
    (one computation). An archive that does not say what computed it is taken as this run's, unless this run
    computes in reduced precision (then no float32 run matches it exactly)."""
    live, saved = (a, b) if b.runner.kind == "npz" else (b, a)
    r = live.runner
    now = (r.kind, str(getattr(r, "device", None) or "").lower(), _precision(live))
    made = getattr(saved.runner, "made_by", None)
    if made is None:
        return ("saved by a run that did not say its precision", True) if now[2] in LOW_PRECISIONS else None
    made = (made[0], str(made[1] or "").lower(), made[2])
    if made == now:
        return None
    low = made[2] in LOW_PRECISIONS or now[2] in LOW_PRECISIONS

    def say(m):
        return " ".join(w for w in (m[0], m[1], m[2]) if w)
    return f"computed by {say(made)} (this run: {say(now)})", low


def run_two_ways(a: Side, b: Side) -> bool:
    """One model run two ways: on two runtimes, devices or opt levels, or against values saved elsewhere. The
    same file given twice and run alike is one computation, judged as two float models are (a copy of it at
    another path was; the same file got the half rule of a model run two ways)."""
    def how(s: Side) -> tuple:
        r = s.runner
        return r.kind, getattr(r, "device", None), getattr(getattr(r, "config", None), "opt_level", None), _precision(s)
    return one_model(a, b) and how(a) != how(b)


def one_model(a: Side, b: Side) -> bool:
    """The two sides run one model (--vs-opt-level, --vs-device, --vs-runtime): one Model, or one file."""
    return a.model is b.model or a.model.proto is b.model.proto or bool(a.model.source and a.model.source == b.model.source)


def same_content(a: Side, b: Side) -> bool:
    """Two files that hold one model (a copy at another path): the same graph, small tensors and metadata, and the
    same bytes in every large weight, so that a copy is judged as the file given twice is. A weight in an external data
    file as onnx refers to it (by a path relative to each model) is not read here: such models are not called one."""
    pa, pb = a.model.proto, b.model.proto
    big = [large_initializers(pa), large_initializers(pb)]
    if any(t.data_location == TensorProto.EXTERNAL for t in [*pa.graph.initializer, *pb.graph.initializer]):
        return False
    if len(big[0]) != len(big[1]) or skeleton(pa).SerializeToString() != skeleton(pb).SerializeToString():
        return False  # the skeletons hold the nodes, small tensors and the large ones' names, types and dims
    return all(np.array_equal(raw_bytes(x), raw_bytes(y)) for x, y in zip(*big))


def half(side: Side) -> str | None:
    """'float16' or 'bfloat16' when most of the model's float weights (initializers and Constant values)
    and inputs are of that type (a model converted to half precision; one that keeps float32 inputs and
    outputs too, its weights in Constant nodes: QA), or else most of the float tensors its nodes compute (as
    shape inference typed them: a converted model whose weights are built at load by ConstantOfShape, its
    biases kept float32, computes in float16 all the same: QA), else None."""
    g = side.model.proto.graph
    weights = [t.data_type for t in constants(g).values()] + [i.type.tensor_type.elem_type for i in g.input]
    computed = [v.type.tensor_type.elem_type for v in list(g.value_info) + list(g.output)]
    for types in (weights, computed):
        counts = {t: types.count(t) for t in (TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.FLOAT, TensorProto.DOUBLE)}
        top = max(counts, key=counts.get)
        if counts[top] and top in (TensorProto.FLOAT16, TensorProto.BFLOAT16):
            return "float16" if top == TensorProto.FLOAT16 else "bfloat16"
    return None


def _precision(side: Side) -> str | None:
    return side.runner.inference_precision()


def check_same_inputs(a: onnx.ModelProto, b: onnx.ModelProto) -> dict[str, tuple[int, int]]:
    """Two models that run on the same feeds take the same input names, dtypes and static dimensions;
    returns the inputs whose float types differ (a float16 model against its float32 original), name ->
    (A's elem type, B's): each side takes the same values in its own type."""
    sa = {s.name: s for s in model_inputs(a)}
    sb = {s.name: s for s in model_inputs(b)}
    ua, ub = unread_extras(a, b)  # inputs one model declares, no node of it reads and the other lacks: not taken
    sa = {k: v for k, v in sa.items() if k not in ua}
    sb = {k: v for k, v in sb.items() if k not in ub}
    if set(sa) != set(sb):
        only = [f"only {k} takes {some(sorted(x - y), form=quote)}" for k, x, y in (("A", set(sa), set(sb)), ("B", set(sb), set(sa))) if x - y]
        raise UsageError(f"the models take different inputs: {'; '.join(only)}; both run on the same feeds")
    floats = {}
    for n in sa:
        if sa[n].elem_type != sb[n].elem_type and sa[n].elem_type in FLOATS and sb[n].elem_type in FLOATS:
            floats[n] = (sa[n].elem_type, sb[n].elem_type)
        elif sa[n].elem_type != sb[n].elem_type:
            raise UsageError(f"input {n}: dtype {sa[n].dtype} in A but {sb[n].dtype} in B")
        x, y = sa[n].shape, sb[n].shape
        if x is not None and y is not None and (len(x) != len(y) or any(
                isinstance(p, int) and isinstance(q, int) and p > 0 and q > 0 and p != q for p, q in zip(x, y))):
            raise UsageError(f"input {n}: shape {list(x)} in A but {list(y)} in B; both run on the same feeds")
    return floats


def unread_note(a: onnx.ModelProto, b: onnx.ModelProto) -> list[str]:
    """The note on ``unread_extras``, once for each model that has them."""
    return [f"{k} declares {len(u)} input{'s' if len(u) > 1 else ''} no node reads ({some(u, form=quote)}): fed zeros"
            for k, u in zip("AB", unread_extras(a, b)) if u]


def stored_weights_note(models: list[tuple[onnx.ModelProto, Selection]]) -> list[str]:
    """With --include-constants, the stored weights (initializers, a body's too) the selection takes in each
    (model, its selection) that diff does not compare themselves: ``match.observe`` observes what nodes
    compute (from weights alone too, with the flag) and a weight given as a graph output, not a stored one,
    which enters only through what nodes compute from it (the README's ``--include-constants``)."""
    if not any(sel.include_constants for _, sel in models):
        return []
    left = list(dict.fromkeys(r.name for m, sel in models if sel.include_constants for r in select(m, sel, strict=False)
                              if r.kind == "initializer" and not r.is_output))
    if not left:
        return []
    s = "s" if len(left) > 1 else ""
    return [f"--include-constants: {len(left)} stored weight{s} ({some(left, form=quote)}) not compared "
            f"as such, only through the tensors nodes compute from {'them' if s else 'it'}: diff compares a "
            f"Constant's value, what nodes compute from weights alone, and a weight given as a graph output"]


def check_feed_shapes(shapes: dict[str, tuple], models: dict[str, onnx.ModelProto]) -> None:
    """The feeds' shapes (made against A's declared inputs) fit every model's declared ones: a dimension
    only B fixes was run on B as given (onnxruntime does not check it), a FAIL table of nothing."""
    for label, model in models.items():
        for s in model_inputs(model):
            got = shapes.get(s.name)
            if got is None or s.shape is None:
                continue
            if len(got) != len(s.shape):
                raise UsageError(f"input {clean(s.name)}: shape {list(got)}, but {label} takes rank {len(s.shape)} "
                                 f"({s.describe()})")
            for i, (want, g) in enumerate(zip(s.shape, got)):
                if isinstance(want, int) and want >= 0 and want != g:
                    # the shape that fits, said: A's dynamic dimensions set to 1 (no --shape given) read as a shape the
                    # user gave, with no way out named
                    fits = "x".join(str(w if isinstance(w, int) and w >= 0 else h) for w, h in zip(s.shape, got)) or "scalar"
                    raise settings_error(UsageError, lambda say, i=i, want=want: (
                        f"input {clean(s.name)}: shape {list(got)}, but {label} fixes dimension {i} to {want}: give the "
                        f"sizes {label} takes, {say.given(SHAPES, clean(s.name), fits)} (a dynamic dimension of A that no "
                        "shape or value gives is 1)"))


def float_note(floats: dict[str, tuple[int, int]]) -> list[str]:
    if not floats:
        return []
    name = lambda t: TensorProto.DataType.Name(t).lower()  # noqa: E731
    said = some(floats.items(), form=lambda kv: f"{kv[0]} ({name(kv[1][0])} in A, {name(kv[1][1])} in B)")
    return [f"the models take inputs of different float types, {said}: both get the same values, ones the narrower "
            "type holds exactly (A's values rounded to it), each in its own type"]


def measured_label(a: Side, b: Side) -> str:
    """What A's numbers are (simulated quantization, deployed int8 kernels, float); where B is the same
    model run otherwise (--vs-opt-level extended: fused), what B's are too."""
    mine = _measured(a)
    theirs = _measured(b) if b.observation.quantized and one_model(a, b) else mine
    return mine if theirs == mine else f"A {mine}; B {theirs}"


def _measured(a: Side) -> str:
    kinds = {o.kind for o in a.observation.observables}
    integer_ops = bool(kinds & {"qoperator", "dynamic"})
    if "qdq" in kinds:
        ort = a.runner.kind == "onnxruntime"
        if ort and a.runner.config.opt_level in ("extended", "layout", "all"):
            return f"deployed: onnxruntime's int8 kernels (QDQ fused at opt-level {a.runner.config.opt_level})"
        ints = a.runner.integer_kernels()  # OpenVINO fuses QDQ into integer kernels itself, with no opt level
        if ints:
            what = ", ".join(f"{n} in {p}" for p, n in sorted(ints.items()))
            return f"deployed: {getattr(a.runner, 'title', a.runner.kind)}'s integer kernels ({what} compute layers)"
        if integer_ops:
            return "deployed: integer operators as written; its QDQ pairs are simulated" + (" (opt-level off)" if ort else "")
        # only onnxruntime's graph optimisations fuse QDQ at an opt level
        return "simulated: the QDQ graph as written, not fused" + (
            " (use --opt-level extended for the deployed int8 kernels)" if ort else "")
    if integer_ops:
        return "deployed: the integer operators as written"
    if a.observation.weights_quantized:
        return "weight-only quantization: integer weights, float activations"
    return "float"


# float32 kernels of two runtimes differ by up to ~2.5e-6 on a 2-layer GPT-2 (measured); a wrong pairing
# or a broken layer is >= 0.5 off: allclose with these leaves a 4x margin, and an atol is needed near zero
EXPORT_TOLERANCE = Tolerance(atol=1e-5, rtol=1e-4, why="the default for an export against its module",
                              default=True)
# float16: each tensor rounds at ~1e-3 of its own scale; a faithful export of a 2-layer GPT-2 or BERT is within
# 7e-4 of each tensor's max|b| beyond its rtol. An atol of 1e-2 in absolute terms judged nothing of a tensor of
# small values (a softmax over 300 classes passed a logit scale 1.5x off): it is relative to each tensor's scale
HALF_TOLERANCE = Tolerance(atol=1e-2, rtol=1e-2, atol_relative=True,
                           why="the default for a float16 export against its module", scale="atol relative to each tensor's "
                               "largest |b|, at least 1e-2 of the largest output's", default=True)
# gradients sum over the batch and the positions: their float32 rounding grows with those sizes; their
# atol is relative to each one's scale (at least 1e-2 of the largest weight gradient's), as diff --grad's
GRAD_TOLERANCE = Tolerance(atol=1e-4, rtol=1e-3, atol_relative=True,
                           why="the default for gradients against torch autograd", scale="atol relative to each gradient's "
                               "largest |b|, at least 1e-2 of the largest weight gradient's", default=True)
# float16 gradients: a float16 weight's gradient rounds at 1e-3 of itself, summed over the batch
HALF_GRAD_TOLERANCE = Tolerance(atol=1e-2, rtol=1e-2, atol_relative=True,
                                why="the default for the gradients of a float16 export against torch autograd", scale="atol "
                                    "relative to each gradient's largest |b|, at least 1e-2 of the largest weight "
                                    "gradient's", default=True)


def export_tolerance(model, grads: bool = False) -> Tolerance:
    """The default criterion of an export against its torch module (``grads``: of its gradients): looser for
    a float16 export (``model``: a Model)."""
    if half_outputs(model.proto):
        return HALF_GRAD_TOLERANCE if grads else HALF_TOLERANCE
    return GRAD_TOLERANCE if grads else EXPORT_TOLERANCE
