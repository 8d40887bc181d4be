"""Tensors of the same name in sibling bodies (valid ONNX: two If nodes whose branches each name their
output 'o', one If whose two branches both do) are tensors of their own: each gets its own row with its
own numbers (numpy float64 the oracle), the branch that did not run says so, `--save` keeps each, and
`mark --all` exposes each under a distinct output that plain onnxruntime returns (onnx.reference the oracle)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as H
from onnx.reference import ReferenceEvaluator
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.cli.main import app

OPS = {"Relu": lambda x: np.maximum(x, 0), "Neg": np.negative, "Abs": np.abs, "Exp": np.exp}


def _branch(op: str, tag: str) -> onnx.GraphProto:
    return H.make_graph([H.make_node(op, ["x"], ["o"], name="n")], tag, [],
                        [H.make_tensor_value_info("o", T.FLOAT, [3])])


def two_ifs(path) -> None:
    g = H.make_graph(
        [H.make_node("If", ["c"], ["y1"], name="if1", then_branch=_branch("Relu", "t1"), else_branch=_branch("Neg", "e1")),
         H.make_node("If", ["c"], ["y2"], name="if2", then_branch=_branch("Abs", "t2"), else_branch=_branch("Exp", "e2")),
         H.make_node("Add", ["y1", "y2"], ["y"], name="add")],
        "g", [H.make_tensor_value_info("x", T.FLOAT, [3]), H.make_tensor_value_info("c", T.BOOL, [])],
        [H.make_tensor_value_info("y", T.FLOAT, [3])])
    onnx.save(H.make_model(g, opset_imports=[H.make_opsetid("", 17)]), path)


X = np.array([-1.0, 2.0, -3.0], np.float32)


@pytest.mark.parametrize("cond", [True, False])
def test_each_branch_tensor_has_its_own_numbers(tmp_path, cond):
    path = tmp_path / "two_if.onnx"
    two_ifs(path)
    feeds = {"x": X, "c": np.array(cond)}
    res = api.layers(path, api.Selection(all=True), api.RunConfig(device="cpu"), save=True,
                     inputs=api.InputSpec(arrays=feeds))
    rows = [(ref, st) for ref, st in res.rows() if ref.name == "o"]
    assert len(rows) == 4, [r.key for r, _ in rows]
    assert len({r.key for r, _ in rows}) == 4
    x = X.astype(np.float64)
    for ref, st in rows:
        ran = ref.scope[-1].endswith("then_branch") == cond
        if not ran:
            assert st.count == 0, f"{ref.key}: its branch did not run"
            assert ref.key not in res.arrays
            continue
        want = OPS[ref.op_type](x)
        assert st.count == 3 and st.min == pytest.approx(want.min()) and st.max == pytest.approx(want.max())
        assert st.mean == pytest.approx(want.mean()) and st.std == pytest.approx(want.std())
        np.testing.assert_allclose(res.arrays[ref.key], want, rtol=1e-6)


def test_mark_all_exposes_each_under_its_own_output(tmp_path):
    path, out = tmp_path / "two_if.onnx", tmp_path / "m.onnx"
    two_ifs(path)
    r = CliRunner().invoke(app, ["mark", str(path), "-o", str(out), "--all"])
    assert r.exit_code == 0, r.output
    m = onnx.load(str(out))
    exposed = json.loads({p.key: p.value for p in m.metadata_props}["onnxprobe.exposed"])
    feeds = {"x": X, "c": np.array(True)}
    s = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    got = dict(zip(names, s.run(names, feeds)))
    ref = ReferenceEvaluator(str(out))
    oracle = dict(zip(ref.output_names, ref.run(None, feeds)))
    # the metadata tells the four 'o' apart by their scope
    assert sorted(v for v in exposed["outputs"].values() if v.endswith("/o")) == [
        "if1/else_branch/o", "if1/then_branch/o", "if2/else_branch/o", "if2/then_branch/o"]
    assert len(names) == 7 and len(set(names)) == 7  # y, y1, y2 and four o's
    x = X.astype(np.float64)
    taken = [n for n in names if got[n].size and n not in ("y", "y1", "y2")]
    assert len(taken) == 2
    np.testing.assert_allclose(sorted(got[n].tolist() for n in taken), sorted([np.abs(x).tolist(), np.maximum(x, 0).tolist()]))
    for n in names:
        np.testing.assert_allclose(got[n], oracle[n], rtol=1e-6)
