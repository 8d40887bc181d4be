"""Declared shapes that the run's input shapes contradict, and a copy of the model without them.

An exporter writes value_info (and output shapes) for the input it traced with; a model whose inputs
are dynamic and is run at another size then declares, say, 1x64x111x111 for a tensor that is 1x64x79x79
in the run. onnxruntime plans buffers from declared shapes (a contradicted one can fail the run) and
onnxprobe sizes statistics rows from them. ``stale_shapes`` compares every declared main-graph shape with
the one onnx's inference gives for the run's input shapes (``graph.shapes.concrete_shapes``, inferred
from the inputs alone); ``without_shapes`` returns a copy whose contradicted entries keep their element
type and rank but no dims (the rank too where it is what disagrees). The input model is never changed.
A declared shape that only the fed values contradict (a Range to a fed limit) shows after the run:
(``runtime.runners.readback.misplanned`` tells a statistics row laid out for dims the run's tensor does not have.)
"""

from __future__ import annotations

import onnx

from onnxprobe.graph.shapes import static_shape


# the doc_string of a value_info onnxprobe declares at the size onnxruntime computes where onnx's inference says
# another (``autodiff.pin``): that inference contradicts it by design, and the note named onnxprobe's own tensor
# ('s/onnxprobe.run_shape': 1x7x5x2 declared, 1x7x8x2 for these inputs: an STFT, QA)
PINNED = "onnxprobe: the size onnxruntime computes"


def stale_shapes(model: onnx.ModelProto, concrete: dict[str, tuple[int, ...]]) -> dict[str, tuple[tuple, tuple]]:
    """Main-graph tensors whose declared shape (value_info, graph outputs) has a dim, or a rank, that
    ``concrete`` (the shapes for the run's inputs) contradicts: name -> (declared, concrete); not those onnxprobe
    pinned to the run's sizes (``PINNED``)."""
    out: dict[str, tuple[tuple, tuple]] = {}
    for vi in (*model.graph.value_info, *model.graph.output):
        have, want = static_shape(vi.type), concrete.get(vi.name)
        if have is None or want is None or vi.doc_string == PINNED:
            continue
        if len(have) != len(want) or any(isinstance(a, int) and a != b for a, b in zip(have, want)):
            out[vi.name] = (have, tuple(want))
    return out


def without_shapes(model: onnx.ModelProto, names) -> onnx.ModelProto:
    """A copy of ``model`` whose value_info and outputs named in ``names`` have unknown dims: the rank kept
    where ``names`` maps a name to (declared, concrete) of one rank, the whole shape dropped otherwise."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for vi in (*out.graph.value_info, *out.graph.output):
        if vi.name not in names or not vi.type.HasField("tensor_type"):
            continue
        t = vi.type.tensor_type
        pair = names[vi.name] if isinstance(names, dict) else None
        rank = len(pair[0]) if pair is not None and len(pair[0]) == len(pair[1]) else None
        t.ClearField("shape")
        if rank is not None:
            for _ in range(rank):
                t.shape.dim.add()
    return out


def from_inputs(model: onnx.ModelProto, names, declared: dict[str, onnx.TypeProto]) -> dict[str, onnx.TypeProto]:
    """The types of ``names`` whose declared shape (``declared``: value_info, graph outputs) fixes a dim that the
    model's inputs leave free or size otherwise, with that dim as inference gives it from the inputs alone: a stale
    export's value_info says 1x4 for a tensor of an Nx4 input, and a cut there (``api.extract``) declared its input
    1x4, which onnxruntime then holds every feed to. Inference runs on a skeleton of ``model`` without its
    value_info and output shapes (never on ``model``); a dim it cannot tell keeps the declared one."""
    from onnxprobe.graph.shapes import annotate
    from onnxprobe.graph.skeleton import skeleton
    from onnxprobe.graph.summary import all_types

    sk = skeleton(model, constants=True)
    sk.graph.ClearField("value_info")
    for o in sk.graph.output:
        if o.type.HasField("tensor_type"):
            o.type.tensor_type.ClearField("shape")
    annotate(sk, [])
    inferred = all_types(sk)
    out = {}
    for n in names:
        d, i = declared.get(n), inferred.get(n)
        if d is None or i is None or not d.HasField("tensor_type") or not i.HasField("tensor_type"):
            continue
        dd, di = d.tensor_type.shape.dim, i.tensor_type.shape.dim
        if not d.tensor_type.HasField("shape") or not i.tensor_type.HasField("shape") or len(dd) != len(di):
            continue
        dims = [b if a.HasField("dim_value") and (b.HasField("dim_param") or (b.HasField("dim_value") and b.dim_value != a.dim_value))
                else a for a, b in zip(dd, di)]
        if any(x is not a for x, a in zip(dims, dd)):
            t = onnx.TypeProto()
            t.CopyFrom(d)
            t.tensor_type.shape.ClearField("dim")
            for x in dims:
                t.tensor_type.shape.dim.add().CopyFrom(x)
            out[n] = t
    return out


def stale_note(stale: dict[str, tuple[tuple, tuple]]) -> str:
    """One line for the report: how many declared shapes the inputs contradict, with the first one."""
    name, (have, want) = next(iter(stale.items()))

    def fmt(s: tuple) -> str:
        return "x".join("?" if d is None else str(d) for d in s) or "scalar"

    more = f" and {len(stale) - 1} more" if len(stale) > 1 else ""
    return (f"the model declares shapes these inputs contradict ({name!r}: {fmt(have)} declared, {fmt(want)} "
            f"for these inputs{more}): those declarations are ignored")


__all__ = ["stale_shapes", "without_shapes", "from_inputs", "stale_note", "PINNED"]
