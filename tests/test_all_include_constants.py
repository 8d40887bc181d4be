"""`--all --include-constants` takes every weight: each initializer of the model (a body's too) and each
Constant's output gets a row with the statistics of the weight itself, as `--name W --include-constants`
gives one weight. It listed only the node outputs, so a user asking for "all tensors, constants included"
saw no weight at all. Oracle: numpy float64 statistics of the stored arrays."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model, sample_path
from onnxprobe import api
from onnxprobe.cli.main import app

runner = CliRunner()
CPU = api.RunConfig(device="cpu")


def _check(stats, arr: np.ndarray) -> None:
    a = arr.astype(np.float64)
    assert stats.min == a.min() and stats.max == a.max()
    assert stats.mean == pytest.approx(a.mean(), rel=1e-9, abs=1e-12)
    assert stats.std == pytest.approx(a.std(), rel=1e-7, abs=1e-12)


def _constant_model() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    rng = np.random.default_rng(5)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    m = make_model(
        [helper.make_node("Constant", [], ["W"], name="cw", value=numpy_helper.from_array(w)),
         helper.make_node("Constant", [], ["B"], name="cb", value=numpy_helper.from_array(b)),
         helper.make_node("MatMul", ["x", "W"], ["xw"], name="mm"),
         helper.make_node("Add", ["xw", "B"], ["y"], name="add")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
    return m, {"W": w, "B": b}


def test_api_layers_all_with_constants_gives_every_initializer_its_statistics():
    proto = onnx.load(sample_path("mlp"))
    weights = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    res = api.layers(sample_path("mlp"), api.Selection(all=True, include_constants=True), CPU)
    for name, arr in weights.items():
        assert name in res.stats, f"{name} has no row"
        _check(res.stats[name], arr)
    # node outputs are still there, and without the flag no weight is
    assert "fc1_out" in res.stats and "y" in res.stats
    plain = api.layers(sample_path("mlp"), api.Selection(all=True), CPU)
    assert not set(weights) & set(plain.stats)


def test_api_layers_all_with_constants_gives_constant_nodes_their_statistics():
    m, weights = _constant_model()
    res = api.layers(m, api.Selection(all=True, include_constants=True), CPU)
    for name, arr in weights.items():
        _check(res.stats[name], arr)


def test_cli_layers_all_with_constants_lists_every_weight(tmp_path):
    proto = onnx.load(sample_path("mlp"))
    weights = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    r = runner.invoke(app, ["layers", str(sample_path("mlp")), "--all", "--include-constants", "--device", "cpu", "--json", "-"])
    assert r.exit_code == 0, r.output
    rows = {t["name"]: t for t in json.loads(r.stdout)["tensors"]}
    for name, arr in weights.items():
        a = arr.astype(np.float64)
        assert (rows[name]["min"], rows[name]["max"]) == (a.min(), a.max())
        assert rows[name]["mean"] == pytest.approx(a.mean(), rel=1e-9)
    # the same row as --name W --include-constants gives
    one = runner.invoke(app, ["layers", str(sample_path("mlp")), "--name", "fc2.weight", "--include-constants",
                              "--device", "cpu", "--json", "-"])
    assert one.exit_code == 0, one.output
    assert json.loads(one.stdout)["tensors"][0] == rows["fc2.weight"]


def test_a_bare_range_with_constants_takes_the_weights_read_in_it():
    # nodes 0..1 of mlp: fc1 (reads fc1.weight, fc1.bias) and relu1; fc2's weights are read after the range
    res = api.layers(sample_path("mlp"), api.Selection(range="0:1", include_constants=True), CPU)
    assert {"fc1.weight", "fc1.bias"} <= set(res.stats) and "fc2.weight" not in res.stats
