"""A tensor inside an If branch that did not run has no run-time shape: its row shows the shape the model
declares or onnx's inference gives it. A branch output declared only by its rank ([?, ?]) whose dims
inference knows ([p, 6]: a MatMul of a [p, 3] input by a 3x6 weight) must show those dims, not "?x?"."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from typer.testing import CliRunner

from onnxprobe.cli.main import app


def _model(path):
    w = nh.from_array(np.arange(18, dtype=np.float32).reshape(3, 6) / 10, "w")
    then = h.make_graph([h.make_node("Relu", ["x"], ["t_out"], name="relu_t")], "then_branch", [],
                        [h.make_tensor_value_info("t_out", T.FLOAT, [None, None])])
    els = h.make_graph([h.make_node("Neg", ["x"], ["e_neg"], name="neg_e"),
                        h.make_node("MatMul", ["e_neg", "w"], ["e_out"], name="mm_e")], "else_branch", [],
                       [h.make_tensor_value_info("e_out", T.FLOAT, [None, None])])
    g = h.make_graph([h.make_node("If", ["cond"], ["y"], name="if1", then_branch=then, else_branch=els)], "g",
                     [h.make_tensor_value_info("cond", T.BOOL, []), h.make_tensor_value_info("x", T.FLOAT, ["p", 3])],
                     [h.make_tensor_value_info("y", T.FLOAT, [None, None])], [w])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, path)
    return m


def _oracle_shape(m, name):
    """The shape onnx's own inference gives ``name`` (the oracle), as the table writes it."""
    inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    for b in inferred.graph.node[0].attribute:
        for vi in list(b.g.output) + list(b.g.value_info):
            if vi.name == name:
                return [d.dim_value if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim]
    raise AssertionError(name)


def test_idle_branch_output_shows_the_dims_inference_gives_it(tmp_path):
    path = str(tmp_path / "if.onnx")
    m = _model(path)
    assert _oracle_shape(m, "e_out") == [None, 6]  # declared [?, ?]; inference knows the 6
    args = ["layers", path, "--all", "--input", "cond=true", "--shape", "x=2x3"]
    r = CliRunner().invoke(app, [*args, "--json", "-"])
    assert r.exit_code == 0, r.output
    rows = {t["name"]: t for t in json.loads(r.stdout)["tensors"]}
    assert rows["e_out"]["status"] == "not run"
    assert rows["e_out"]["shape"] == [None, 6]
    assert rows["e_neg"]["shape"] == [None, 3]
    assert rows["t_out"]["shape"] == [2, 3]  # the branch that ran: its run-time shape
    table = CliRunner().invoke(app, [*args, "--wide"])
    line = next(ln for ln in table.stdout.splitlines() if " e_out " in ln)
    assert " ?x6 " in line, table.stdout


def test_annotate_fills_only_the_unknown_dims_of_declared_outputs(tmp_path):
    from onnxprobe.graph.shapes import infer_shapes, static_shape
    m = _model(str(tmp_path / "if.onnx"))
    out = infer_shapes(m)
    branches = {a.name: a.g for a in out.graph.node[0].attribute}
    assert static_shape(branches["else_branch"].output[0].type) == ("p", 6)  # inference's, as onnx gives it
    assert static_shape(branches["then_branch"].output[0].type) == ("p", 3)
    # the main graph's outputs keep what the model declares (the If runs: its shape comes from the run), as a
    # Loop's body does (a state that grows): only If branches take inference's dims
    assert static_shape(out.graph.output[0].type) == (None, None)
    assert static_shape(m.graph.output[0].type) == (None, None)  # the model itself untouched
