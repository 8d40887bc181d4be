"""After `save all`, a tensor of an If branch not taken, of a rank shape inference cannot tell, read shape 'scalar'
(`[]` in JSON) where `stats` had said '?' before: the placeholder the run carries out for it gave its shape. Its
shape stays unknown, whatever ran before."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from typer.testing import CliRunner

from onnxprobe.cli.main import app


def test_a_not_run_tensor_of_unknown_rank_keeps_an_unknown_shape_after_save_all(tmp_path):
    then = h.make_graph([h.make_node("Reshape", ["x", "s"], ["t"], name="then_reshape")], "then", [],
                        [h.make_tensor_value_info("t", T.FLOAT, None)])
    other = h.make_graph([h.make_node("Neg", ["x"], ["e"], name="else_neg")], "else", [], [h.make_tensor_value_info("e", T.FLOAT, None)])
    g = h.make_graph([h.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [4]), h.make_tensor_value_info("s", T.INT64, None),
                      h.make_tensor_value_info("c", T.BOOL, [])], [h.make_tensor_value_info("y", T.FLOAT, None)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "m.onnx")
    np.savez(tmp_path / "in.npz", x=np.arange(4, dtype=np.float32), s=np.array([2, 2], np.int64), c=np.array(False))
    script = tmp_path / "s.txt"
    script.write_text(f"inputs {tmp_path / 'in.npz'}\nprobe add t\nstats --json {tmp_path / 'before.json'}\n"
                      f"save all {tmp_path / 'all.npz'}\nstats --json {tmp_path / 'after.json'}\n")
    r = CliRunner().invoke(app, ["debug", str(tmp_path / "m.onnx"), "--script", str(script)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output

    def shape_of_t(name):
        rows = json.loads((tmp_path / name).read_text())["tensors"]
        (row,) = [t for t in rows if t["name"] == "t"]
        return row["shape"]

    assert shape_of_t("before.json") is None
    assert shape_of_t("after.json") is None
