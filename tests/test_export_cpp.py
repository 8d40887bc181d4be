"""`grad --export` writes a model that runs "from C++ ... with no training build": tests/cpp/run_model.cc (built
and called by tests/cpp_runner.py), a C++ program that loads the libonnxruntime.so shipped in the onnxruntime
wheel through onnxruntime's C API (no Python in the process), runs the exported forward+backward model; its
outputs are compared with the gradients that `grad --save-grads` reports and with the same model run from
Python. Needs g++ (skips without it). tests/test_real_models_grad.py does the same on the real models."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from typer.testing import CliRunner

import cpp_runner
from conftest import sample_feeds, sample_path
from onnxprobe.cli.main import app


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return cpp_runner.runner(tmp_path_factory.mktemp("cpp"))


@pytest.mark.parametrize("sample, loss", [("cnn", ["--output-grad"]), ("transformer_block", []), ("mlp", ["--loss", "mean"])])
def test_exported_backward_runs_from_cpp(sample, loss, built, tmp_path):
    feeds = sample_feeds(sample)
    model = sample_path(sample)
    extra = {}
    args = list(loss)
    if loss and loss[0] == "--output-grad":
        y = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        dy = np.random.default_rng(5).standard_normal(y.shape).astype(y.dtype)
        np.save(tmp_path / "dy.npy", dy)
        args = ["--output-grad", str(tmp_path / "dy.npy")]
        extra = {"output_grad": dy}
    inputs = []
    for name, v in feeds.items():
        np.save(tmp_path / f"{name}.npy", v)
        inputs += ["--input", f"{name}={tmp_path / f'{name}.npy'}"]
    exported, saved = tmp_path / "backward.onnx", tmp_path / "grads.npz"
    r = CliRunner().invoke(app, ["grad", str(model), "--device", "cpu", *inputs, *args, "--export", str(exported),
                                 "--save-grads", str(saved)])
    assert r.exit_code == 0, r.output

    s = ort.InferenceSession(str(exported), providers=["CPUExecutionProvider"])
    feed = {**feeds, **extra}
    feed = {i.name: feed[i.name] for i in s.get_inputs()}
    cpp = cpp_runner.run(built, exported, feed, tmp_path / "cpp")
    py = dict(zip([o.name for o in s.get_outputs()], s.run(None, feed)))
    assert set(cpp) == set(py) and len(cpp) > 2
    for name in py:
        np.testing.assert_allclose(cpp[name], py[name], rtol=1e-5, atol=1e-6, err_msg=name)

    grads = np.load(saved)
    checked = 0
    for key in grads.files:
        if f"{key}_grad" in cpp:
            scale = max(float(np.abs(grads[key]).max()), 1e-12)
            np.testing.assert_allclose(cpp[f"{key}_grad"], grads[key], rtol=0, atol=1e-5 * scale, err_msg=key)
            checked += 1
    assert checked >= 3, (sorted(cpp), grads.files)
