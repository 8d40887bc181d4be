"""`--include-constants --name W` selects weights (README: a weight is an initializer or a Constant's output,
left out unless asked), and a Constant inside an If/Loop/Scan body was selectable so, but an initializer of a
body, dense or sparse, was not: '--name B2: matches no node, tensor or input name' (and, named otherwise, 'no node
produces it'), since selection looked at the main graph's weights only. A body's weight is now selected as a
main-graph one is, its statistics computed on the host (a sparse one's densified, as nodes read it).
Oracle: numpy float64 over the stored values (the sparse one made dense here by its indices)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as H
from onnx import numpy_helper as N
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.graph.select import select

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
B2 = np.array([[0.0, 5.0], [0.0, 0.0]], np.float32)
S_VALUES, S_INDICES = np.array([7.0], np.float32), np.array([1], np.int64)


def model(path) -> str:
    """x = x0 W; y = If(sum(x) > 0, then: x B2 + S (B2 dense, S sparse, both the branch's initializers), else: -x)."""
    s = H.make_sparse_tensor(N.from_array(S_VALUES, "S"), N.from_array(S_INDICES, "S_idx"), [1, 2])
    then = H.make_graph([H.make_node("MatMul", ["x", "B2"], ["t0"], name="tmm"),
                         H.make_node("Add", ["t0", "S"], ["t"], name="tadd")],
                        "then", [], [H.make_tensor_value_info("t", T.FLOAT, [1, 2])],
                        initializer=[N.from_array(B2, "B2")], sparse_initializer=[s])
    other = H.make_graph([H.make_node("Neg", ["x"], ["e"], name="eneg")], "else", [],
                         [H.make_tensor_value_info("e", T.FLOAT, [1, 2])])
    nodes = [H.make_node("MatMul", ["x0", "W"], ["x"], name="mm"),
             H.make_node("ReduceSum", ["x"], ["s"], name="rs", keepdims=0),
             H.make_node("Greater", ["s", "zero"], ["c"], name="gt"),
             H.make_node("If", ["c"], ["y"], name="if1", then_branch=then, else_branch=other)]
    g = H.make_graph(nodes, "g", [H.make_tensor_value_info("x0", T.FLOAT, [1, 2])],
                     [H.make_tensor_value_info("y", T.FLOAT, [1, 2])],
                     initializer=[N.from_array(np.eye(2, dtype=np.float32), "W"), N.from_array(np.array(0.0, np.float32), "zero")])
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, str(path))
    return str(path)


def _dense_s() -> np.ndarray:
    d = np.zeros(2, np.float64)
    d[S_INDICES] = S_VALUES
    return d.reshape(1, 2)


@pytest.mark.parametrize("name,want", [("B2", B2.astype(np.float64)), ("S", _dense_s())])
def test_a_body_weight_is_selected_with_include_constants(tmp_path, name, want):
    p = model(tmp_path / "m.onnx")
    r = runner.invoke(app, ["layers", p, "--include-constants", "--name", name, "--seed", "0", "--json", "-"], env=ENV)
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["tensors"]
    assert [t["name"] for t in rows] == [name]
    row = rows[0]
    assert row["shape"] == list(want.shape) and row["count"] == want.size
    assert row["min"] == pytest.approx(want.min()) and row["max"] == pytest.approx(want.max())
    assert row["mean"] == pytest.approx(want.mean()) and row["std"] == pytest.approx(want.std())
    assert row["zero_fraction"] == pytest.approx(float(np.mean(want == 0)))


def test_a_body_weight_is_left_out_unless_asked(tmp_path):
    p = model(tmp_path / "m.onnx")
    proto = onnx.load(p)
    assert not {"B2", "S"} & {r.name for r in select(proto, api.Selection(all=True))}
    assert not {"B2", "S"} & {r.name for r in select(proto, api.Selection(names=("*",)))}
    res = api.layers(p, api.Selection(names=("B2",), include_constants=True))
    assert res.stats["B2"].mean == pytest.approx(B2.astype(np.float64).mean())


def test_a_body_weight_gets_a_gradient(tmp_path):
    """grad --include-constants --name B2: the If branch's initializer is moved to the main graph as a body's
    Constants are (autodiff.hoist), so it is a weight like any other ('the loss does not depend on B2' was said
    of it). Oracle: torch-free, by hand: loss = sum(x B2 + S) with the then branch taken, dL/dB2[i, j] = x[i]."""
    p = model(tmp_path / "m.onnx")
    x0 = np.array([[0.5, 1.5]], np.float32)
    res = api.grad(p, api.Selection(names=("B2",), include_constants=True), inputs=api.InputSpec(arrays={"x0": x0}))
    rows = {r.target.ref.name: r for r in res.rows}
    assert set(rows) == {"B2"}, res.notes
    want = np.repeat(x0.astype(np.float64).T, 2, axis=1)  # x = x0 (W is the identity)
    assert rows["B2"].stats.mean == pytest.approx(want.mean()) and rows["B2"].stats.max == pytest.approx(want.max())
