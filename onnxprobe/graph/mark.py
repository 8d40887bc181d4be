"""Mark: a copy of a model whose chosen intermediate tensors are extra graph outputs, typed, so that any
runtime (onnxruntime in Python or C++, TensorRT...) returns them.

Contract: ``mark(model, refs, stats=False)`` returns a new model and one ``Marked`` per exposed tensor;
``model`` (ideally annotated by shape inference) is never modified. Built on ``graph.expose``: raw
tensors are lifted out of If / Loop / Scan bodies (stacked along a leading iteration axis in a Loop or
Scan body, empty when their If branch did not run); ``stats=True`` exposes the in-graph statistics row
([1, 11] float64, layout ``stats.tensor_stats.ROW``) instead of each raw tensor.

Each added output gets the best type known statically (tensor, sequence, optional...). ``untyped``
lists the outputs whose element type or rank is still unknown; ``with_output_types`` fills them (the API
observes them in one run) and ``without_outputs`` drops those nothing could type. ``record`` writes what
was added into the model's metadata under ``onnxprobe.exposed``:
``{"kind": "raw" | "stats", "outputs": {graph output: tensor}, "row": [...] (stats only)}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import onnx

from onnxprobe.errors import OpsetTooOld
from onnxprobe.graph.builder import default_opset, stats_opset
from onnxprobe.graph.expose import expose, unsure_stack
from onnxprobe.graph.stats_nodes import MIN_OPSET
from onnxprobe.graph.summary import all_types, known
from onnxprobe.graph.walk import in_if_branch, walk
from onnxprobe.stats.tensor_stats import ROW
from onnxprobe.text import some
from onnxprobe.types import TensorRef

METADATA_KEY = "onnxprobe.exposed"


@dataclass(frozen=True)
class Marked:
    ref: TensorRef
    output: str  # name of the graph output that carries it
    kind: str  # "raw" or "stats"
    added: bool  # False when the tensor already was a model output


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out


def mark(model: onnx.ModelProto, refs: list[TensorRef], *, stats: bool = False,
         warnings: list[str] | None = None) -> tuple[onnx.ModelProto, list[Marked]]:
    warnings = warnings if warnings is not None else []
    if stats and stats_opset(model) < MIN_OPSET:  # expose would hand the raw tensors to a host that a written model lacks
        raise OpsetTooOld(f"--stats needs opset {MIN_OPSET} or later (IsNaN, Where; the model's is {stats_opset(model)}): "
                          "mark the raw tensors (without --stats), or convert the model to a newer opset first", MIN_OPSET)
    before = {o.name for o in model.graph.output}
    out, probes = expose(model, refs, stats=stats, shapes=False, raw=not stats, warnings=warnings, extremes=False)
    marked = []
    for p in probes:
        name = p.stats_output or p.raw_output
        if name:
            marked.append(Marked(p.ref, name, "stats" if p.stats_output else "raw", name not in before))
    types = all_types(model)
    for vi in out.graph.output:  # sequences, optionals...: expose only knows tensor types
        if vi.name not in before and not known(vi.type) and known(types.get(vi.name)):
            vi.type.CopyFrom(types[vi.name])
    raw = [m for m in marked if m.added and m.kind == "raw"]
    # a Loop/Scan stacks a body tensor's values per iteration: a runtime refuses it where they change shape
    unsure = [m.ref.name for m in raw if unsure_stack(m.ref)]
    if unsure:
        warnings.append(f"{some(unsure)}: "
                        "values of a Loop or Scan body, stacked one per iteration; a runtime refuses the run where their "
                        "shape changes between iterations (or they lie in an If branch there): --stats marks what works always")
    _loosen_if_outputs(model, out, raw)
    _scan8_batch_axis(model, out, raw)
    return out, marked


def _scan8_batch_axis(original: onnx.ModelProto, out: onnx.ModelProto, marked: list[Marked]) -> None:
    """Scan before opset 9 has a batch axis: its scan outputs are [batch, iterations, ...], one more
    leading dimension than per-iteration tensors stacked by a Loop."""
    if default_opset(original) >= 9:
        return
    extra = {o: sum(1 for n, _ in s.chain if n.op_type == "Scan") for s in walk(original) for o in s.node.output if o}
    by_output = {m.output: extra.get(m.ref.name, 0) for m in marked}
    for vi in out.graph.output:
        k = by_output.get(vi.name, 0)
        tt = vi.type.tensor_type
        if k and vi.type.HasField("tensor_type") and tt.HasField("shape"):
            dims = [None] * k + [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim]
            vi.type.CopyFrom(onnx.helper.make_tensor_type_proto(tt.elem_type, dims))


def _loosen_if_outputs(original: onnx.ModelProto, out: onnx.ModelProto, marked: list[Marked]) -> None:
    """A tensor carried out of an If branch is empty when its branch does not run ([0] * rank; a scalar is
    carried as [1], [0] then), so its declared dimensions hold only half the time: ``graph.expose`` types
    it by its rank alone, and the outputs whose types were filled in above from the model's own get the
    same (else onnxruntime warns at every run)."""
    lifted = in_if_branch(original)
    top = {m.output for m in marked if m.ref.name in lifted}
    for vi in out.graph.output:
        tt = vi.type.tensor_type
        if vi.name in top and vi.type.HasField("tensor_type") and tt.HasField("shape"):
            vi.type.CopyFrom(onnx.helper.make_tensor_type_proto(tt.elem_type, [None] * max(len(tt.shape.dim), 1)))


def untyped(model: onnx.ModelProto, names: list[str] | set[str]) -> list[str]:
    """Graph outputs among ``names`` without an element type and a rank."""
    names = set(names)
    return [vi.name for vi in model.graph.output if vi.name in names and not known(vi.type)]


def with_output_types(model: onnx.ModelProto, types: dict[str, onnx.TypeProto]) -> onnx.ModelProto:
    out = _copy(model)
    for vi in out.graph.output:
        if vi.name in types:
            vi.type.CopyFrom(types[vi.name])
    return out


def without_outputs(model: onnx.ModelProto, names: set[str]) -> onnx.ModelProto:
    out = _copy(model)
    keep = [vi for vi in out.graph.output if vi.name not in names]
    del out.graph.output[:]
    out.graph.output.extend(keep)
    return out


def _entry(model: onnx.ModelProto) -> tuple[onnx.StringStringEntryProto | None, dict]:
    """The metadata entry an earlier mark wrote (the last, as onnx reads a key given twice) and its data:
    ``outputs`` kept only for the graph outputs the model still has (a model extracted from a marked one,
    or whose metadata names outputs it lacks), ``kind`` dropped when none is left."""
    entry = None
    for p in model.metadata_props:
        if p.key == METADATA_KEY:
            entry = p
    data: dict = {}
    if entry is not None:
        try:
            data = json.loads(entry.value)
        except ValueError:
            data = {}
    if not isinstance(data, dict) or not isinstance(data.get("outputs"), dict):
        return entry, {}
    present = {o.name for o in model.graph.output}
    data["outputs"] = {k: v for k, v in data["outputs"].items() if k in present}
    return entry, data if data["outputs"] else {}


def prune_record(model: onnx.ModelProto) -> None:
    """In place: the earlier mark's metadata lists only the outputs ``model`` has (``extract``'s cut keeps
    some), and goes when none is left."""
    entry, data = _entry(model)
    if entry is None:
        return
    if data:
        entry.value = json.dumps(data)
    else:
        keep = [p for p in model.metadata_props if p.key != METADATA_KEY]
        del model.metadata_props[:]
        model.metadata_props.extend(keep)


def record(model: onnx.ModelProto, marked: list[Marked]) -> onnx.ModelProto:
    """A copy whose metadata lists the added outputs (merged with an earlier mark's, for the outputs the
    model still has)."""
    out = _copy(model)
    entry, data = _entry(out)
    added = [m for m in marked if m.added]
    kinds = {m.kind for m in added} | ({data["kind"]} if data.get("kind") else set())
    outputs = dict(data.get("outputs") or {})
    outputs.update({m.output: m.ref.key for m in added})  # qualified where sibling bodies share the name
    data = {"kind": "stats" if kinds == {"stats"} else ("raw" if kinds <= {"raw"} else "mixed"), "outputs": outputs}
    if "stats" in kinds:
        data["row"] = list(ROW)
    if entry is None:
        entry = out.metadata_props.add()
        entry.key = METADATA_KEY
    entry.value = json.dumps(data)
    return out
