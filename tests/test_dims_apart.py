"""diff's one run keeps apart the symbolic dims A's and B's tensors share by name but not by size
(graph.dims_apart): shape inference names the dims it invents per model ("unk__0" in both), and
onnxruntime's allocation planner takes two tensors whose dims share a name for the same size. Merged as
they were, a NonZero count that differs between A and B (one input, other thresholds) made onnxruntime
re-use A's buffer for B's tensor: "Shape mismatch attempting to re-use buffer {61} != {512}", the one
run failed and ``diff`` fell back to separate runs. Names that stand for one size in the run stay shared
(renaming those too cost PP-OCRv4 det 25 MB: no buffer of A's reused for B's tensors)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from onnxprobe import api
from onnxprobe.graph.dims_apart import keep_apart_in_place
from onnxprobe.graph.merge import PREFIX, side_by_side
from onnxprobe.graph.shapes import shapes_with_folded

X = np.random.default_rng(0).random((8, 64)).astype(np.float32)


def _model(thr: float, scale: float, in_dims=("n", 64)) -> onnx.ModelProto:
    """s = x * scale; the values of x above ``thr`` (NonZero, GatherND: a count of the data), squared."""
    nodes = [helper.make_node("Mul", ["x", "scale"], ["s"]),
             helper.make_node("Greater", ["s", "thr"], ["m"]),
             helper.make_node("NonZero", ["m"], ["nz"]),
             helper.make_node("Transpose", ["nz"], ["nzt"]),
             helper.make_node("GatherND", ["s", "nzt"], ["g"]),
             helper.make_node("Relu", ["g"], ["r"]),
             helper.make_node("Mul", ["r", "r"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, list(in_dims))],
                          [helper.make_tensor_value_info("y", T.FLOAT, None)],
                          [numpy_helper.from_array(np.array(thr, np.float32), "thr"),
                           numpy_helper.from_array(np.array(scale, np.float32), "scale")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return onnx.shape_inference.infer_shapes(m)  # "unk__0" dims, as an exporter's model has them


def _dim_params(g: onnx.GraphProto) -> dict[str, list[str]]:
    return {vi.name: [d.dim_param for d in vi.type.tensor_type.shape.dim]
            for vi in (*g.input, *g.value_info, *g.output) if vi.type.HasField("tensor_type")}


def test_diff_measures_pairs_of_differing_counts_in_one_run(tmp_path):
    a, b = _model(0.9, 1.0), _model(-10.0, 1.0 + 2 ** -10)
    assert "unk__0" in _dim_params(a.graph)["g"] and _dim_params(a.graph)["g"] == _dim_params(b.graph)["g"]
    onnx.save(a, str(tmp_path / "a.onnx"))
    onnx.save(b, str(tmp_path / "b.onnx"))
    res = api.diff(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), selection=api.Selection(all=True),
                   config=api.RunConfig(device="cpu", cache=False), inputs=api.InputSpec(arrays={"x": X}))
    assert not any("one-run diff failed" in n for n in res.notes), res.notes
    assert res.in_graph == len(res.results) > 0
    by = {r.pair.a.name: r for r in res.results}
    # the oracle: onnx's reference evaluator, each model alone
    ra = dict(zip(["s", "g"], ReferenceEvaluator(a).run(["s", "g"], {"x": X})))
    rb = dict(zip(["s", "g"], ReferenceEvaluator(b).run(["s", "g"], {"x": X})))
    assert ra["g"].shape != rb["g"].shape
    for t in ("nz", "nzt", "g", "r", "y"):
        assert by[t].metrics is None and "shapes differ at run time" in by[t].problem, (t, by[t].problem)
    assert f"[{len(ra['g'])}] vs [{len(rb['g'])}]" in by["g"].problem
    s = by["s"].metrics
    assert s is not None and s.max_abs == np.abs(ra["s"].astype(np.float64) - rb["s"]).max()


def test_only_the_names_of_no_single_size_are_renamed():
    """In the merged graph of A and B, with B's input naming "n" as A's does and its dims for the run known:
    "n" (8 everywhere) and a name of one size stay shared; "unk__0" (A's count 61-ish, B's 512, unknown to
    inference: data-dependent) becomes B's own on B's tensors, and A's keep theirs."""
    a, b = _model(0.9, 1.0), _model(-10.0, 1.0)
    merged, an, bn = side_by_side(a, b, [])
    concrete, folded = shapes_with_folded(merged, {"x": (8, 64)}, fold=True)  # as compare.fused.build has them
    assert an["g"] not in concrete and bn["g"] not in concrete  # data-dependent: no size for these inputs
    renamed = keep_apart_in_place(merged, {**folded, **concrete}, {"x": (8, 64)}, PREFIX)
    dims = _dim_params(merged.graph)
    assert renamed > 0
    assert dims["x"][0] == "n" and dims[bn["s"]][0] == "n" == dims[an["s"]][0]  # one size: shared
    assert dims[an["g"]][0] == "unk__0" and dims[bn["g"]][0] == PREFIX + "unk__0"
    assert all(not d.startswith(PREFIX) for n, ds in dims.items() if not n.startswith(PREFIX) for d in ds)
    # and onnxruntime runs the merged graph with each model's own count
    merged.graph.output.extend(onnx.ValueInfoProto(name=n) for n in (an["y"], bn["y"]))
    s = ort.InferenceSession(merged.SerializeToString(), providers=["CPUExecutionProvider"])
    ya, yb = s.run([an["y"], bn["y"]], {"x": X})[-2:]
    assert ya.shape != yb.shape
