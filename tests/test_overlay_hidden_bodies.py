"""Model Explorer shows the main graph and its own Loop/Scan bodies, not bodies inside those: the rows of a deeper
body fell back to a lookup by tensor name and landed on a shown node writing a tensor of the same name (loopA's
body Mul 't' showed the max of the 't' of loopC's body, inside loopB's: 2.97 for 0.32). They go nowhere. Oracle: the
same run's --json rows."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from onnxprobe import api


def _deep(path):
    def vi(n, s=(4,), t=T.FLOAT):
        return helper.make_tensor_value_info(n, t, list(s))

    def body(gname, k, wname):
        return helper.make_graph([helper.make_node("Identity", ["ci"], ["co"]),
                                  helper.make_node("Mul", ["s", wname], ["t"], name="mul_" + gname),
                                  helper.make_node("Tanh", ["t"], ["so"], name="tanh_" + gname)],
                                 gname, [vi("i", (), T.INT64), vi("ci", (), T.BOOL), vi("s")], [vi("co", (), T.BOOL), vi("so")],
                                 [numpy_helper.from_array(np.full(4, k, np.float32), wname)])

    body_b = helper.make_graph([helper.make_node("Identity", ["ci_b"], ["co_b"]),
                                helper.make_node("Loop", ["n", "ci_b", "s_b"], ["so_b"], name="loopC", body=body("bodyC", 3.0, "wc"))],
                               "bodyB", [vi("i_b", (), T.INT64), vi("ci_b", (), T.BOOL), vi("s_b")], [vi("co_b", (), T.BOOL), vi("so_b")])
    g = helper.make_graph([helper.make_node("Loop", ["n", "c", "x"], ["la"], name="loopA", body=body("bodyA", 0.5, "wa")),
                           helper.make_node("Loop", ["n", "c", "la"], ["y"], name="loopB", body=body_b)], "deep",
                          [vi("x"), vi("c", (), T.BOOL), vi("n", (), T.INT64)], [vi("y")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return str(path)


def test_rows_of_a_body_the_viewer_does_not_show_go_nowhere(tmp_path):
    path = _deep(tmp_path / "deep.onnx")
    feed = {"x": np.linspace(0.1, 0.7, 4, dtype=np.float32), "c": np.array(True), "n": np.array(2, np.int64)}
    res = api.layers(path, api.Selection(all=True), inputs=api.InputSpec(arrays=feed))
    ov = api.overlay(res, path)
    shown = ov["loopA/body"]["results"]
    want = {r["node"]: r for r in api.report(res)["tensors"]}
    for node in ("mul_bodyA", "tanh_bodyA"):
        row = next(r for r in api.report(res)["tensors"] if r.get("node", "").endswith(node))
        assert shown[node]["value"] == max(abs(row["min"]), abs(row["max"])), (node, shown[node], row)
    assert want  # the report has the rows the overlay is checked against


def test_the_quartile_colours_give_each_quarter_its_own_and_the_largest_the_darkest():
    """The cuts were one place up: [1, 2, 3, 4] took 2, 3, 4 and three colours, the darkest never drawn, and the
    largest value (the one a user looks for) mid-blue; with 8 values the darkest covered only the maximum."""
    from onnxprobe.report.overlay import QUARTILE_COLOURS, _quartiles

    def colour(v, th):  # Model Explorer's rule: the first threshold the value is at most
        return next(t["bgColor"] for t in th if v <= t["value"])

    th = _quartiles([1.0, 2.0, 3.0, 4.0])
    assert [colour(v, th) for v in (1, 2, 3, 4)] == list(QUARTILE_COLOURS)
    th = _quartiles([float(v) for v in range(1, 9)])
    assert [colour(v, th) for v in range(1, 9)] == [c for c in QUARTILE_COLOURS for _ in range(2)]
    assert colour(5.0, _quartiles([1.0, 1.0, 1.0, 5.0])) == QUARTILE_COLOURS[-1]
    assert colour(3.0, _quartiles([3.0])) == QUARTILE_COLOURS[-1]
