"""`merge-stats` of dataset diff reports in which a pair was measured in no shard: the merged pair says
why, as each shard and one diff over all the samples say it (an If branch that never ran), not a bare
"value not produced"."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app


def if_model(path) -> None:
    """y = If(c): then Relu(x) -> t, else Neg(x) -> e."""
    x = helper.make_tensor_value_info
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="relu")], "then", [], [x("t", TensorProto.FLOAT, [4])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="neg")], "else", [], [x("e", TensorProto.FLOAT, [4])])
    g = helper.make_graph([helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)], "g",
                          [x("x", TensorProto.FLOAT, [4]), x("c", TensorProto.BOOL, [])], [x("y", TensorProto.FLOAT, [4])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_a_branch_that_ran_in_no_shard_keeps_its_reason(tmp_path):
    model = tmp_path / "if.onnx"
    if_model(model)
    rng = np.random.default_rng(0)
    reports = []
    for k in range(2):
        d = tmp_path / f"w{k}"
        d.mkdir()
        np.savez(d / "a.npz", x=rng.standard_normal(4).astype(np.float32), c=np.array(True))
        reports.append(tmp_path / f"r{k}.json")
        r = CliRunner().invoke(app, ["diff", str(model), "--vs-reference", "--all", "--inputs-dir", str(d),
                                     "--json", str(reports[-1])])
        assert r.exit_code == 0, r.output
    merged = tmp_path / "m.json"
    r = CliRunner().invoke(app, ["merge-stats", *map(str, reports), "--json", str(merged)])
    assert r.exit_code == 0, r.output
    shard = {p["a"]: p["problem"] for p in json.loads(reports[0].read_text())["pairs"]}
    got = {p["a"]: p["problem"] for p in json.loads(merged.read_text())["pairs"]}
    assert shard["e"] and "did not run" in shard["e"], shard
    assert got["e"] == shard["e"] and got["t"] is None, got
