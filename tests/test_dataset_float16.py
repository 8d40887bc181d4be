"""A float16 model's dataset report: its moments and its histograms describe the same values (the tensors
as float16 holds them: onnxruntime's CPU provider may compute a float16 op in float32 and skip the
rounding in the graph's statistics, but the values a dataset run reads back are float16), so the report
agrees with numpy on float16 values and merge-stats takes it."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app

runner = CliRunner()


def _square_model(path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)
    g = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["sq"], name="sq"),
                           helper.make_node("Relu", ["sq"], ["y"], name="relu")], "g", [x], [y])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_a_float16_dataset_report_is_one_merge_stats_takes(tmp_path):
    model = _square_model(tmp_path / "m.onnx")
    ds = tmp_path / "ds"
    ds.mkdir()
    # batches of two shapes (one plan for any shape: statistics in the graph); 300² and 1000² overflow float16,
    # 1e-7² underflows to 0 there
    a = np.array([[1.5, -2, 3, 0.25], [4, 5, -6, 7]], np.float16)
    b = np.array([[300, -1000, 1e-7, 2]], np.float16)
    np.savez(ds / "a.npz", x=a)
    np.savez(ds / "b.npz", x=b)
    out = tmp_path / "r.json"
    r = runner.invoke(app, ["layers", str(model), "--all", "--inputs-dir", str(ds), "--json", str(out)])
    assert r.exit_code == 0, r.output
    report = json.loads(out.read_text())
    sq = next(t for t in report["tensors"] if t["name"] == "sq")
    with np.errstate(over="ignore"):
        values = np.concatenate([(a * a).ravel(), (b * b).ravel()])  # float16 arithmetic
    assert values.dtype == np.float16
    finite = values[np.isfinite(values)].astype(np.float64)
    assert sq["count"] == values.size and sq["inf"] == int(np.isinf(values).sum()) == 2
    assert sq["max"] == finite.max() and sq["min"] == finite.min()
    assert abs(sq["mean"] - finite.mean()) <= 1e-9 * abs(finite.mean())
    merged = runner.invoke(app, ["merge-stats", str(out), "--json", str(tmp_path / "m.json")])
    assert merged.exit_code == 0, merged.output
