"""diff's one run puts both models in one graph, every name prefixed ('onnxprobe.a/', 'onnxprobe.b/') but the
shared graph inputs': a model whose input is named 'onnxprobe.a/y' beside a tensor 'y' made the merged graph define
a name twice; onnxruntime refused it, the diff fell back to separate runs with a note, and `--profile` (whose README
line says it is refused when diff's one run is not made) was dropped without a word, exit 0. Such models run apart
from the start now (their numbers checked against numpy float64), and `--profile` is refused whenever the one run
is not made, also where it fails at run time."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import ExecutionError, UsageError

runner = CliRunner()


def model(k: float):
    vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3])  # noqa: E731
    nodes = [helper.make_node("Add", ["onnxprobe.a/y", "onnxprobe.b/y"], ["y"]), helper.make_node("Mul", ["y", "k"], ["z"]),
             helper.make_node("Tanh", ["z"], ["out"])]
    return make_model(nodes, [vi("onnxprobe.a/y"), vi("onnxprobe.b/y")], [vi("out")], [numpy_helper.from_array(np.float32(k), "k")])


def feed():
    rng = np.random.default_rng(2)
    return {"onnxprobe.a/y": rng.normal(size=(2, 3)).astype(np.float32), "onnxprobe.b/y": rng.normal(size=(2, 3)).astype(np.float32)}


def test_inputs_named_as_the_merged_graphs_tensors_run_apart_with_right_numbers(tmp_path):
    import onnx

    onnx.save(model(2.0), tmp_path / "a.onnx")
    onnx.save(model(2.5), tmp_path / "b.onnx")
    f = feed()
    res = api.diff(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), selection=api.Selection(all=True),
                   config=api.RunConfig(device="cpu", cache=False), inputs=api.InputSpec(arrays=f))
    assert not any("failed" in n for n in res.notes), res.notes
    y = f["onnxprobe.a/y"].astype(np.float64) + f["onnxprobe.b/y"]
    want = {"z": np.abs(2.0 * y - 2.5 * y).max(), "out": np.abs(np.tanh(2.0 * y) - np.tanh(2.5 * y)).max()}
    got = {r.pair.a.name: r.metrics.max_abs for r in res.results}
    for n, v in want.items():
        assert got[n] == pytest.approx(v, rel=1e-5), (n, got[n], v)
    np.savez(tmp_path / "in.npz", **f)
    r = runner.invoke(app, ["diff", str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), "--all", "--inputs",
                            str(tmp_path / "in.npz"), "--profile"])
    assert r.exit_code == 2 and "--profile times diff's one run of both models" in r.output, r.output
    assert "Traceback" not in r.output and len(r.output.strip().splitlines()) == 1


def test_profile_is_refused_when_the_one_run_fails(tmp_path, monkeypatch):
    from onnxprobe.compare import measure

    def failing(*args, **kwargs):
        raise ExecutionError("onnxruntime: refused the merged graph")

    monkeypatch.setattr(measure, "run", failing)
    from conftest import sample_path

    with pytest.raises(UsageError, match="profile times diff's one run of both models, which failed"):
        api.diff(str(sample_path("mlp")), str(sample_path("mlp")), config=api.RunConfig(device="cpu", cache=False),
                 profile=True)
    res = api.diff(str(sample_path("mlp")), str(sample_path("mlp")), config=api.RunConfig(device="cpu", cache=False))
    assert any("the one-run diff failed" in n for n in res.notes) and res.verdict()[0] == "pass"
