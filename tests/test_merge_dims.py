"""graph.merge.side_by_side keeps A's and B's symbolic dims apart: shape inference names the dims it
invents per model ("unk__0" in both), and onnxruntime's allocation planner takes two tensors whose dims
share a name for the same size. Merged as they were, a NonZero count that differs between A and B (one
input, other thresholds) made onnxruntime re-use A's buffer for B's tensor: "Shape mismatch attempting
to re-use buffer {61} != {512}", the one run failed and ``diff`` fell back to separate runs. The dims
named on the shared inputs stay shared (the same tensors)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from onnxprobe import api
from onnxprobe.graph.merge import PREFIX, side_by_side

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


def test_merge_keeps_the_dims_of_each_model_apart():
    # B's input names its first dim as A's does ("n": kept, one size), its second unlike A's ("c" where A
    # has 64: B's own); B's "unk__0" and "c" become B's, A's stay as they are
    a, b = _model(0.9, 1.0), _model(-10.0, 1.0, in_dims=("n", "c"))
    merged, an, bn = side_by_side(a, b, [])
    dims = _dim_params(merged.graph)
    assert dims["x"] == ["n", ""]  # the shared input: A's declaration
    assert dims[an["g"]] == ["unk__0"] and dims[bn["g"]] == [PREFIX + "unk__0"]
    assert dims[bn["s"]] == ["n", PREFIX + "c"]
    assert _dim_params(b.graph)["g"] == ["unk__0"]  # B itself untouched
    # onnxruntime runs it, with buffers planned apart: each model's count
    so = ort.SessionOptions()
    s = ort.InferenceSession(merged.SerializeToString(), so, providers=["CPUExecutionProvider"])
    ya, yb = s.run([an["y"], bn["y"]], {"x": X})
    assert ya.shape == ((X > 0.9).sum(),) and yb.shape == (X.size,)


def test_merge_renames_dims_inside_bodies():
    # B's dims inside an If body get B's prefix too
    a = _model(0.9, 1.0)
    then = helper.make_graph([helper.make_node("Relu", ["g"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", T.FLOAT, ["unk__0"])])
    other = helper.make_graph([helper.make_node("Neg", ["g"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", T.FLOAT, ["unk__0"])])
    b = onnx.ModelProto()
    b.CopyFrom(a)
    b.graph.input.append(helper.make_tensor_value_info("c", T.BOOL, []))
    a.graph.input.append(helper.make_tensor_value_info("c", T.BOOL, []))
    b.graph.node.append(helper.make_node("If", ["c"], ["o"], then_branch=then, else_branch=other))
    merged, _, _ = side_by_side(a, b, [])
    body = next(n for n in merged.graph.node if n.op_type == "If").attribute
    for att in body:
        assert [d.dim_param for d in att.g.output[0].type.tensor_type.shape.dim] == [PREFIX + "unk__0"]
