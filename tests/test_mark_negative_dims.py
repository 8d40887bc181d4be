"""A model that declares a dynamic dimension as -1 (as Paddle's exporter writes its batch: the rapidocr
models), which onnxruntime runs as a dynamic one: the marked copy (statistics rows included, whose
nodes concatenate along the leading axis) and the extracted one must pass onnx's full check, which
propagated the -1 into a Concat and failed ("Negative dimension value on Concat axis")."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app

runner = CliRunner()


def _model(path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 8, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [-1, 8, 4, 4])
    h = helper.make_tensor_value_info("h", TensorProto.FLOAT, [-1, 8, 4, 4])  # declared, as Paddle does
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Sigmoid", ["h"], ["y"])],
                          "g", [x], [y], value_info=[h])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)  # the model itself passes
    onnx.save(m, str(path))


def _run(path, x):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    return dict(zip(names, s.run(names, {"x": x})))


def test_marked_stats_of_a_model_with_minus_one_dims_pass_the_full_check(tmp_path):
    src, out = tmp_path / "m.onnx", tmp_path / "stats.onnx"
    _model(src)
    before = src.read_bytes()
    r = runner.invoke(app, ["mark", str(src), "-o", str(out), "--all", "--stats"])
    assert r.exit_code == 0, r.output
    onnx.checker.check_model(str(out), full_check=True)
    assert src.read_bytes() == before
    x = np.random.default_rng(0).standard_normal((3, 8, 4, 4)).astype(np.float32)
    got = _run(out, x)
    row = got["onnxprobe.stats:h"][0]
    h = np.maximum(x, 0).astype(np.float64)
    assert row[0] == h.size and row[3] == h.min() and row[4] == h.max()
    np.testing.assert_array_equal(got["y"], _run(src, x)["y"])


def test_extracted_and_marked_raw_copies_pass_the_full_check(tmp_path):
    src = tmp_path / "m.onnx"
    _model(src)
    for args in (["extract", str(src), "-o", str(tmp_path / "e.onnx"), "--from", "h"],
                 ["mark", str(src), "-o", str(tmp_path / "r.onnx"), "--all"]):
        r = runner.invoke(app, args)
        assert r.exit_code == 0, r.output
        onnx.checker.check_model(args[3], full_check=True)
