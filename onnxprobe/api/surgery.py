"""Graph surgery: ``inspect``, ``mark``, ``extract``."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import onnx

from onnxprobe.api.inputs import as_inputs, as_names, as_selection, model_file
from onnxprobe.errors import ModelError, OnnxProbeError, UsageError, in_words, said, settings_error
from onnxprobe.graph import external
from onnxprobe.graph.external import load_lazy, materialize, write_model
from onnxprobe.graph.extract import cut, extract as extract_pass
from onnxprobe.graph.integrity import (cut_problems, duplicate_producers, graph_problems, outputs_listed_twice,
                                       refuse_to_write)
from onnxprobe.graph.io import check_output_path, ir_notes
from onnxprobe.graph.walk import in_if_branch
from onnxprobe.graph.expose import unsure_stack
from onnxprobe.graph.mark import mark as mark_pass, record, untyped, with_output_types, without_outputs
from onnxprobe.graph.select import Selection, select
from onnxprobe.graph.shapes import infer_shapes
from onnxprobe.graph.stale_shapes import from_inputs
from onnxprobe.graph.summary import all_types, known, node_rows, sparse_declared_dense, summarize, type_info
from onnxprobe.runtime import compat
from onnxprobe.runtime import feeds as _feeds
from onnxprobe.runtime.runners.ort import OrtRunner
from onnxprobe.text import some
from onnxprobe.types import InputSpec, check_bool



# --- graph surgery: inspect, mark, extract ---------------------------------------------------------------
# These work on a lazy model (external weights stay on disk until written), so models over 2 GB cost
# little memory. Each writes atomically beside OUT, at an IR version the installed onnxruntime reads, and
# only after onnx.checker accepted the temporary file.


@dataclass
class InspectResult:
    """What ``api.inspect`` found in a model file: the file's size, the model's summary (producer, opsets,
    inputs, outputs, ops, weights), its nodes in walk order and warnings (missing external data...)."""

    source: str
    file_bytes: int
    summary: object  # graph.summary.ModelSummary
    nodes: list  # graph.summary.NodeRow, in walk order
    warnings: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # why onnxruntime would refuse the graph (graph.integrity)

    def __repr__(self) -> str:  # a notebook shows this, not every node row (114 KB for a tiny BERT)
        return (f"InspectResult({os.path.basename(self.source)}: {len(self.nodes)} nodes, {self.file_bytes} bytes, "
                f"{len(self.warnings)} warnings)")


def inspect(path: str | os.PathLike) -> InspectResult:
    """What ``onnxprobe inspect`` shows: versions, inputs/outputs, weights, op histogram, nodes whose
    shapes inference could not find, subgraphs, external data, custom domains; and every node. ``path``:
    a model file, or a Model loaded from one."""
    path = model_file(path)
    lazy = load_lazy(path, require_data=False)
    warnings: list[str] = ir_notes(lazy.proto) + [f"external data file missing: {f.path}" for f in lazy.external if not f.exists]
    warnings += lazy.problems  # a data file too short for its tensors, a length entry that disagrees
    warnings += lazy.notes  # initializers of one name: the copy onnxruntime runs with kept
    inferred = infer_shapes(lazy.proto, warnings)
    warnings += outputs_listed_twice(lazy.proto.graph) + sparse_declared_dense(lazy.proto)
    rows = node_rows(lazy.proto, inferred)
    summary = summarize(lazy.proto, inferred, base_dir=lazy.base_dir, external=lazy.external, rows=rows)
    too_new, convertible = _opset_past_runtime(lazy.proto)
    return InspectResult(str(path), Path(path).stat().st_size, summary, rows, warnings + convertible,
                         too_new + graph_problems(lazy.proto))


def _opset_past_runtime(model: onnx.ModelProto) -> tuple[list[str], list[str]]:
    """(problems, notes) of a model whose ai.onnx opset is newer than the installed onnxruntime loads: a problem
    where onnx knows no conversion down either (layers refuses it), a note where layers, diff and grad convert it
    (a copy mark or extract writes keeps the model's opset). inspect said nothing, and mark and extract wrote a copy
    onnxruntime does not load with exit 0."""
    from onnxprobe.graph.builder import opset_version

    declared, top = opset_version(model), compat.max_opset()
    if declared is None or top is None or declared <= top:
        return [], []
    known = onnx.defs.onnx_opset_version()
    if declared > known:
        return [f"the model's opset {declared} is newer than this onnxruntime (up to {top}) and this onnx (up to {known}) "
                "know: no conversion down to it is possible; upgrade onnxruntime and onnx"], []
    return [], [f"the model's opset {declared} is newer than this onnxruntime loads (up to {top}): layers, diff and grad "
                f"run a copy converted down to it (onnx.version_converter); a copy mark or extract writes keeps opset {declared}"]


def _refuse_opset(model: onnx.ModelProto, path, notes: list[str]) -> None:
    """``_opset_past_runtime`` for a surgery about to write a copy: one line and no file where no conversion exists,
    a note where one does."""
    too_new, convertible = _opset_past_runtime(model)
    if too_new:
        raise ModelError(f"{path}: {too_new[0]}; nothing written")
    notes += convertible


@dataclass
class SurgeryResult:
    """What ``mark`` or ``extract`` wrote."""

    source: str
    path: str  # the model written
    data_path: str | None  # its external data file (OUT.data), if any
    bytes: int  # model + data
    ir_version: int
    inputs: list  # graph.summary.TypeInfo of the written model's inputs
    outputs: list  # ... and outputs
    nodes: int  # nodes of the written main graph
    notes: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({os.path.basename(self.source)} -> {self.path}: {self.nodes} nodes, "
                f"{len(self.inputs)} inputs, {len(self.outputs)} outputs, {self.bytes} bytes)")


@dataclass(repr=False)  # SurgeryResult's one line
class MarkResult(SurgeryResult):
    """The model ``api.mark`` wrote: one entry per exposed tensor (its new output, "raw" or "stats") and the
    types the new outputs were written with."""

    marked: list = field(default_factory=list)  # graph.mark.Marked, one per exposed tensor
    types: dict = field(default_factory=dict)  # output name -> graph.summary.TypeInfo as written
    not_marked: list = field(default_factory=list)  # TensorRefs selected but not node outputs (graph inputs, weights)


@dataclass(repr=False)
class ExtractResult(SurgeryResult):
    """The sub-model ``api.extract`` wrote (the fields of ``SurgeryResult``) and the inputs the cut leaves
    unused."""

    unused_inputs: list[str] = field(default_factory=list)


def _check_inputs(model: onnx.ModelProto, inputs: InputSpec | None):
    """The input options checked as ``layers`` checks them (names, shapes, dtypes, seed, integer range),
    whether or not a run needs them (a wrong one was accepted silently when shape inference typed it all):
    the feeds they make (``_observe_types`` runs on them), or None for the default options, and where a
    string input is not given: its feed is refused only when a run needs it (a model with a string input is
    marked or cut without one)."""
    if inputs is None or replace(inputs, arrays_from=InputSpec().arrays_from) == InputSpec():  # the CLI names its source
        return None
    fs = _feeds.make_feeds(model, inputs, strings=False)
    return fs if len(fs.values) == len(_feeds.model_inputs(model)) else None


def _observe_types(model: onnx.ModelProto, lazy, names: list[str], spec: InputSpec | None, notes: list[str],
                   skip_empty: set[str] = frozenset(), fs=None, also: list[str] = ()) -> tuple[dict[str, onnx.TypeProto], str | None]:
    """Types of ``names`` (graph inputs or outputs of ``model``) seen in one run on seeded random (or
    given) inputs: the element type and rank of the run, and only the dimensions shape inference gives
    (one run's sizes may hang on input values: a Loop's trip count, an If's branch, a Range), the others
    left unknown. An empty value of a name in ``skip_empty`` (carried out of an If branch that did not run)
    says nothing. Returns what it could type and, where the run failed, why (a note too, not an error:
    the callers say it where it leaves them without a type). ``fs``: the feeds, when ``_check_inputs``
    made them already; ``also``: outputs fetched in the same run, typed already, to see that the run gives them."""
    fs = fs or _feeds.make_feeds(lazy.proto, spec)
    feed = fs.values
    declared = {vi.name: vi.type for vi in list(model.graph.output) + list(model.graph.input)}
    values = {n: feed[n] for n in names if n in feed}
    want = [n for n in dict.fromkeys(list(names) + list(also)) if n not in values]
    failed = None
    if want:
        try:
            m = materialize(model, lazy.base_dir)
            got, _ = OrtRunner(m).execute(m, feed, want)
            values.update(got)
        except UsageError:
            raise
        except OnnxProbeError as e:
            err = e
            failed = said(lambda say: f"{(err.cli_message or err) if say.cli else err}{fs.hint(say)}")
            notes.append(said(lambda say: f"could not run the model to find the types shape inference left unknown"
                              f"{fs.hint(say)}: {(err.cli_message or err) if say.cli else err}"))
    types = {}
    for n, v in ((n, v) for n, v in values.items() if n in names):
        if n in skip_empty and np.size(v) == 0:
            continue
        try:
            elem = onnx.helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype)
        except Exception:  # noqa: BLE001
            continue
        types[n] = onnx.helper.make_tensor_type_proto(elem, _inferred_dims(declared.get(n), np.ndim(v)))
    if types:
        how = " (their dimensions only where shape inference gives them)"
        notes.append(f"{len(types)} type(s) shape inference could not find were taken from a run on "
                     f"{'the given' if spec is not None and (spec.files or spec.arrays) else 'seeded random'} inputs{how}: "
                     + some(types, 5, str))
    return types, failed


def _inferred_dims(t: onnx.TypeProto | None, rank: int) -> list:
    """The dimensions of ``t`` that inference gave (a size or a symbol), None for the others, at ``rank``."""
    tt = t.tensor_type if t is not None and t.HasField("tensor_type") else None
    if tt is None or not tt.HasField("shape") or len(tt.shape.dim) != rank:
        return [None] * rank
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim]


def _write_checked(model: onnx.ModelProto, lazy, out, source, notes: list[str]):
    """Lower the IR version for the installed onnxruntime, write atomically (weights in OUT.data when the
    input kept them outside too, or past 2 GB), and let onnx.checker see the temporary file before it
    replaces OUT."""
    top = compat.max_ir_version()
    if model.ir_version > top:
        notes.append(f"IR version {model.ir_version} lowered to {top}, the newest the installed onnxruntime reads")
        model.ir_version = top  # our own copy, made by the pass that produced it

    def check(tmp):
        err = external.check_model_file(tmp)
        if err is None:
            return
        src_err = external.check_model_file(source)
        if src_err is None:
            raise ModelError(f"the model to write fails onnx.checker ({err}); nothing written. "
                             "This is a bug in onnxprobe: please report it")
        notes.append(f"written although onnx.checker rejects it, as it rejects the input model: {src_err}")

    return write_model(model, out, base_dir=lazy.base_dir, external=True if lazy.external else None, check=check,
                       protect=[f.path for f in lazy.external])


def _result(cls, model: onnx.ModelProto, written, source, notes, **extra):
    types = all_types(model)
    inits = {t.name for t in model.graph.initializer}
    return cls(
        source=str(source), path=str(written.path), data_path=str(written.data_path) if written.data_path else None,
        bytes=written.bytes, ir_version=model.ir_version,
        inputs=[type_info(vi.name, types.get(vi.name)) for vi in model.graph.input if vi.name not in inits],
        outputs=[type_info(vi.name, types.get(vi.name)) for vi in model.graph.output],
        nodes=len(model.graph.node), notes=notes, **extra,
    )


def mark(
    path: str | os.PathLike,
    out: str | os.PathLike,
    selection: Selection | None = None,
    *,
    stats: bool = False,
    inputs: InputSpec | None = None,
) -> MarkResult:
    """Write a copy of the model at ``path`` to ``out`` with the selected tensors (or, with ``stats``,
    their in-graph statistics rows) as extra, typed graph outputs. Where shape inference cannot type an
    output, the model runs once on seeded random inputs (or the given ones) to find it. ``path``: a model
    file, or a Model loaded from one; ``inputs``: an InputSpec or a dict of arrays by input name."""
    path, selection, inputs = model_file(path), as_selection(selection), as_inputs(inputs)
    stats = check_bool(stats, "mark stats")
    check_output_path(out, source=path)
    lazy = load_lazy(path)
    # the copy keeps the whole graph: what onnxruntime refuses in it (two nodes writing one tensor) is refused
    # here, as extract refuses it, where a copy no runtime loads was written with a note and exit 0
    refuse_to_write(graph_problems(lazy.proto), str(path))
    fs = _check_inputs(lazy.proto, inputs)
    notes: list[str] = list(lazy.notes)
    _refuse_opset(lazy.proto, path, notes)
    inferred = infer_shapes(lazy.proto, notes)
    chosen = select(inferred, selection or Selection())
    refs = [r for r in chosen if r.kind == "node"]
    # graph inputs and weights: the caller has their values already (fed, or in the model file)
    not_marked = [r for r in chosen if r.kind != "node"]
    before = list(notes)  # a second marking (below) starts again from these
    model, marked, missing, stacked, found, run_failed = _mark_and_run(inferred, refs, stats, lazy, inputs, notes, fs)
    if run_failed and stacked:
        # an If branch inside a Loop body, a body value whose shape changes between iterations: the copy does not run
        # (its Loop cannot stack them), and took the model's own outputs with it. Without them, if it runs
        retry = list(before)
        again = _mark_and_run(inferred, [r for r in refs if r not in {m.ref for m in stacked}], stats, lazy, inputs, retry, fs)
        if not again[5]:
            (model, marked, missing, _, found, run_failed), notes = again, retry
            notes.append(f"{len(stacked)} tensor(s) of a Loop or Scan body left out: the copy that stacks them, one "
                         "per iteration, does not run on these inputs (an If branch not taken in some iteration, a "
                         "shape that changes between them, a Scan body's tensor of a rank shape inference does not know); "
                         "--stats marks them: " + some([m.ref.key for m in stacked], 5, str))
    model = with_output_types(model, found)
    failed = [n for n in missing if n not in found]
    if failed:
        model = without_outputs(model, set(failed))
        marked = [m for m in marked if m.output not in set(failed)]
        # an element type known without a rank (com.microsoft's ops, typed from onnxruntime's schemas) is no output
        # declaration onnx's checker takes: said as such, not as a type nobody tells (inspect gives it)
        types = all_types(inferred)
        rankless = [n for n in failed if _elem_known(types.get(n))]
        untold = [n for n in failed if n not in rankless]
        if untold:
            notes.append(f"{len(untold)} tensor(s) left out: neither shape inference nor the run (an If branch that "
                         "did not run, or a failed run) tells their type: " + some(untold, 5, str))
        if rankless:
            notes.append(f"{len(rankless)} tensor(s) left out: their element type is known but not their rank, which a "
                         "graph output must declare, and the run that would tell it failed: " + some(rankless, 5, str))
    # a model output already (a sequence output too, which mark_pass leaves out unmarked) adds nothing
    outputs = {o.name for o in lazy.proto.graph.output} | {m.output for m in marked if not m.added}
    pending = [r for r in refs if r.name not in outputs]
    if pending and not any(m.added for m in marked):
        # asked for, and none of what is not an output already could be added: no file that reads as marked
        why = (said(lambda say: f"shape inference does not type them and the run to find their types failed: "
                                f"{in_words(run_failed, say)}") if run_failed else notes[-1] if notes else "")
        raise settings_error(ModelError, lambda say: f"none of the {len(pending)} selected tensor(s) that are not model "
                             "outputs could be marked as an output" + (f": {in_words(why, say)}" if why else ""))
    if not any(m.added for m in marked):
        # only inputs, weights and model outputs already: a file that adds none of them read as marked, exit 0
        why = _why_not_added(not_marked, [m.output for m in marked]) or "it selects no node output"
        raise UsageError(f"the selection ({(selection or Selection()).describe()}) adds no output: {why}"
                         + ("; mark adds node outputs" if not_marked else ""))
    del inferred
    model = record(model, marked)
    notes += _unfused(model, [m.output for m in marked if m.added])
    written = _write_checked(model, lazy, out, path, notes)
    types = all_types(model)
    return _result(MarkResult, model, written, path, notes, marked=marked, not_marked=not_marked,
                   types={m.output: type_info(m.output, types.get(m.output)) for m in marked})


def _mark_and_run(inferred: onnx.ModelProto, refs: list, stats: bool, lazy, inputs: InputSpec | None, notes: list[str], fs):
    """``refs`` marked on ``inferred`` (``graph.mark``), and the copy run once where shape inference leaves an output
    untyped or a Loop / Scan stacks body values it may refuse to stack (``expose.unsure_stack``): (model, marked,
    the untyped outputs, the stacked ones, the types the run found, why the run failed or None)."""
    model, marked = mark_pass(inferred, refs, stats=stats, warnings=notes)
    missing = untyped(model, [m.output for m in marked if m.added])
    stacked = [m for m in marked if m.added and m.kind == "raw" and unsure_stack(m.ref)]
    if not (missing or stacked):
        return model, marked, missing, stacked, {}, None
    in_if = in_if_branch(lazy.proto)
    found, run_failed = _observe_types(model, lazy, missing, inputs, notes, also=[m.output for m in stacked],
                                       skip_empty={m.output for m in marked if m.ref.name in in_if}, fs=fs)
    return model, marked, missing, stacked, found, run_failed


def _why_not_added(not_marked: list, outputs: list[str]) -> str:
    """What each selected tensor that adds nothing is: a graph input, a weight, or a model output already."""
    shown = (lambda names: some(names, form=str))
    inputs = [r.name for r in not_marked if r.kind == "input"]
    weights = [r.name for r in not_marked if r.kind != "input"]
    parts = [f"{shown(names)} {'is' if len(names) == 1 else 'are'} {what}" for names, what in (
        (inputs, "fed (graph input)"), (weights, "in the model file (weight)"), (outputs, "already a model output"))
        if names]
    return "; ".join(parts)


def _unfused(model: onnx.ModelProto, added: list[str]) -> list[str]:
    """A note when outputs added to a QDQ model sit in its quantize/dequantize groups: a float tensor that a
    QuantizeLinear reads, or a DequantizeLinear writes, must now be computed, so onnxruntime's default
    optimisations no longer fuse those groups into int8 kernels, and the marked model's outputs can
    differ from the original's as deployed (they equal the original run unoptimised)."""
    g = model.graph
    into_q = {i for n in g.node if n.op_type == "QuantizeLinear" for i in n.input[:1]}
    from_dq = {o for n in g.node if n.op_type == "DequantizeLinear" for o in n.output}
    inside = [t for t in added if t in into_q or t in from_dq]
    if not inside:
        return []
    return [f"{len(inside)} marked tensor(s) sit in the model's quantize/dequantize groups ({some(inside, form=str)}"
            "): exposed, they stop onnxruntime fusing those groups into int8 kernels, "
            "so the marked model computes as the QDQ graph is written (its outputs can differ from the original's "
            "as onnxruntime runs it optimised)"]


def _cut_types(lazy, c, types: dict[str, onnx.TypeProto], need: list[str], notes: list[str]) -> dict[str, onnx.TypeProto]:
    """Types of ``need`` (outputs of cut ``c``, whose inputs ``types`` gives) seen in one run of the cut alone
    on seeded random values of its inputs (its note added to ``notes``); {} where that run fails or leaves one
    untyped (the model's own run is tried then, and says why where it fails too)."""
    sub = extract_pass(lazy.proto, c, {**types, **{n: onnx.TypeProto() for n in need}})
    try:
        fs = _feeds.make_feeds(sub, None)
    except OnnxProbeError:
        return {}
    tried: list[str] = []
    found, failed = _observe_types(sub, lazy, need, None, tried, fs=fs)
    if failed or len(found) < len(need):
        return {}
    notes += [f"{t} (of the cut alone, fed at its inputs)" for t in tried]
    return found


def extract(
    path: str | os.PathLike,
    out: str | os.PathLike,
    cut_inputs: list[str] | None = None,
    cut_outputs: list[str] | None = None,
    *,
    inputs: InputSpec | None = None,
) -> ExtractResult:
    """Write the subgraph of the model at ``path`` (a file, a Model loaded from one, or an in-memory ModelProto) between the tensors
    ``cut_inputs`` and ``cut_outputs`` to ``out``. Each is a name, a list of names, or names separated by
    commas (``"a,b"``); give at least one of them: ``cut_inputs`` left out means the model's inputs (those
    the outputs need), ``cut_outputs`` left out its outputs. ``inputs`` (an InputSpec or a dict of arrays)
    makes the feeds of the run that types what shape inference cannot. Raises UsageError when the cut
    inputs do not cut the outputs off from the rest of the graph."""
    path, inputs = model_file(path), as_inputs(inputs)
    cut_inputs, cut_outputs = as_names(cut_inputs, "cut_inputs") or None, as_names(cut_outputs, "cut_outputs") or None
    check_output_path(out, source=path)
    lazy = load_lazy(path)
    fs = _check_inputs(lazy.proto, inputs)
    notes: list[str] = list(lazy.notes)
    _refuse_opset(lazy.proto, path, notes)
    inferred = infer_shapes(lazy.proto, notes)
    # which producer the cut kept was chance: onnxruntime and onnx's checker refuse the model
    refuse_to_write(duplicate_producers(lazy.proto.graph), str(path))
    c = cut(lazy.proto, cut_inputs, cut_outputs)
    # a dangling read or a cycle inside the cut: no runtime would load what it wrote
    refuse_to_write(cut_problems(lazy.proto, c.nodes, set(c.inputs) | set(c.initializers)), str(path),
                    "the cut holds what onnxruntime will not load: ")
    types = all_types(inferred)
    boundary = list(dict.fromkeys(c.inputs + c.outputs))
    loosened = from_inputs(lazy.proto, boundary, types)  # a stale 1x4 of an Nx4 input: the cut takes N too
    if loosened:
        types.update(loosened)
        notes.append(f"{len(loosened)} declared shape(s) of the cut fix a dimension the model's inputs leave free or "
                     f"size otherwise (a stale export): written as the inputs give them, {some(loosened)}")
    need = [n for n in boundary if not known(types.get(n))]
    found: dict[str, onnx.TypeProto] = {}
    if need and not set(need) & set(c.inputs):
        # the cut's inputs are typed: the cut alone, on seeded random values of them, types its outputs, so that
        # an op outside it (a custom op the run cannot load) does not matter; else the model's run, as before
        found = _cut_types(lazy, c, types, need, notes)
    if need and len(found) < len(need):
        refs = [r for r in select(inferred, Selection(all=True, include_constants=True), strict=False) if r.name in need]
        probe_model, _ = mark_pass(inferred, refs)
        found, run_failed = _observe_types(probe_model, lazy, need, inputs, notes, fs=fs)
        left = [n for n in need if n not in found]
        if left:  # the run's own failure where it failed (a custom op, no opset import), not a guess at the inputs
            rankless = [n for n in left if _elem_known(types.get(n))]
            what = ("its element type is known but not its rank, which the cut's inputs and outputs must declare,"
                    if len(rankless) == len(left) else "shape inference does not know it")
            raise settings_error(ModelError, lambda say: f"cannot find the type of {some(left, 5)}: {what} and " + (
                f"the run to see it failed: {in_words(run_failed, say)}" if run_failed else
                "the run on these inputs did not give it (an If branch that did not run, an empty value: give inputs "
                f"with {say.either('inputs', '--input/--shape')})"))
    types.update(found)
    del inferred
    sub = extract_pass(lazy.proto, c, types)
    if c.unused_inputs:
        notes.append(f"--from {', '.join(c.unused_inputs)}: not needed to compute the outputs (kept as unused inputs)")
    written = _write_checked(sub, lazy, out, path, notes)
    return _result(ExtractResult, sub, written, path, notes, unused_inputs=c.unused_inputs)


def _elem_known(t: onnx.TypeProto | None) -> bool:
    """Whether ``t`` is a tensor type with its element type (its rank may be unknown: a com.microsoft op's output,
    typed from onnxruntime's schemas)."""
    return t is not None and t.HasField("tensor_type") and bool(t.tensor_type.elem_type)
