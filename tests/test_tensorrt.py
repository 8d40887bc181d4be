"""`--runtime tensorrt` and `diff --vs-runtime tensorrt`. The GPU tests are skipped without TensorRT,
cuda-python and a GPU; bench/gpu_check.sh runs them (UNTESTED ON HARDWARE so far). The first tests run
everywhere: the errors a machine without TensorRT gives."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

from conftest import SAMPLE_NAMES, sample_feeds, sample_path
from onnxprobe import api
from onnxprobe.errors import MissingExtra, UsageError
from onnxprobe.runtime.runners.tensorrt import resolve_device


def test_without_tensorrt_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorrt", None)
    with pytest.raises(MissingExtra, match=r"pip install 'onnxprobe\[tensorrt\]'"):
        api.layers(sample_path("mlp"), runtime="tensorrt")


def test_tensorrt_devices_are_cuda_devices():
    assert resolve_device("auto") == 0 and resolve_device("cuda") == 0 and resolve_device("cuda:3") == 3
    for bad in ("cpu", "CPU", "cuda:x", "npu"):
        with pytest.raises(UsageError, match="TensorRT runs on CUDA GPUs"):
            resolve_device(bad)


def _usable() -> str | None:
    """Why the GPU tests cannot run here, or None."""
    for module in ("tensorrt", "cuda"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install 'onnxprobe[tensorrt]')"
    try:
        from onnxprobe.runtime.runners.tensorrt_engine import Cuda, modules

        trt, cudart = modules()
        Cuda(cudart, 0)
    except Exception as e:  # noqa: BLE001 - no driver, no device
        return f"no usable GPU for TensorRT: {type(e).__name__}: {e}"
    return None


WHY = _usable()
gpu = pytest.mark.skipif(WHY is not None, reason=WHY or "")


@gpu
@pytest.mark.tensorrt
@pytest.mark.parametrize("mode", ["debug", "output"])
@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_layers_on_tensorrt_agree_with_onnxruntime_on_the_cpu(name, mode):
    feeds = sample_feeds(name)
    kw = dict(inputs=api.InputSpec(arrays=feeds), save=True)
    cpu = api.layers(sample_path(name), api.Selection(all=True), api.RunConfig(device="cpu"), **kw)
    trt = api.layers(sample_path(name), api.Selection(all=True), runtime="tensorrt",
                     runtime_options={"mode": mode, "tf32": "0"}, **kw)
    assert trt.info.runtime == "tensorrt"
    for ref, st in trt.rows():
        if ref.name in trt.unobserved:
            assert "not observable" in trt.unobserved[ref.name] or "fused" in trt.unobserved[ref.name]
            continue
        want = cpu.arrays[ref.name]
        got = trt.arrays[ref.name]
        assert got.shape == want.shape, ref.name
        if want.dtype.kind == "f":
            scale = max(float(np.abs(want).max()), 1e-6)
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * scale, err_msg=ref.name)
            assert st.mean == pytest.approx(float(np.mean(got, dtype=np.float64)), rel=1e-6, abs=1e-9)
    body = {r.name for r, _ in cpu.rows() if r.scope}
    assert body <= set(trt.unobserved), "tensors inside If/Loop bodies cannot be marked"


@gpu
@pytest.mark.tensorrt
@pytest.mark.parametrize("name", ["cnn", "transformer_block", "mlp"])
def test_diff_vs_tensorrt_passes_its_default_criterion(name):
    res = api.diff(sample_path(name), vs_runtime="tensorrt", selection=api.Selection(all=True))
    assert res.b.runner.kind == "tensorrt" and res.verdict()[0] == "pass", (res.verdict(), res.criterion)
    assert res.compared >= 3 and ("two runtimes" in res.criterion or "tf32" in res.criterion)
    f32 = api.diff(sample_path(name), vs_runtime="tensorrt", selection=api.Selection(all=True), runtime_options={"tf32": "0"})
    assert f32.criterion.startswith("SQNR >= 60 dB") and f32.verdict()[0] == "pass", f32.verdict()


@gpu
@pytest.mark.tensorrt
def test_the_memory_budget_splits_tensorrt_runs():
    feeds = sample_feeds("cnn")
    one = api.layers(sample_path("cnn"), api.Selection(all=True), inputs=api.InputSpec(arrays=feeds), runtime="tensorrt")
    many = api.layers(sample_path("cnn"), api.Selection(all=True), inputs=api.InputSpec(arrays=feeds), runtime="tensorrt",
                      max_memory=20_000)
    assert set(many.stats) == set(one.stats)
    for n, st in one.stats.items():
        assert many.stats[n].count == st.count and many.stats[n].mean == pytest.approx(st.mean, rel=1e-3, abs=1e-5), n


def _fake_tensorrt(monkeypatch, *, lose_debug: bool = False) -> list:
    """TensorRtRunner over a stand-in for TensorRT and CUDA (none installed here): parse, build and run
    record what they are given; the returned list collects each model written for the parser (``save_beside``,
    every model taken as over 2 GB)."""
    from onnxprobe.runtime.runners import tensorrt, tensorrt_engine

    class Version:
        __version__ = "fake"

    written: list = []

    def save_beside(model, folder):
        written.append(folder)
        return f"{folder}/model.onnx"

    def run(trt, cuda, engine, feeds, names, stats, raw, mode):
        got = [] if lose_debug and mode == "debug" else names
        return {"stats": {}, "shapes": {n: (1,) for n in got}, "values": {n: np.zeros(1) for n in got if n in raw}, "seconds": 0.0}

    monkeypatch.setattr(tensorrt, "require_tensorrt", lambda flag="--runtime": None)
    monkeypatch.setattr(tensorrt, "is_large", lambda model: True)
    monkeypatch.setattr(tensorrt, "save_beside", save_beside)
    monkeypatch.setattr(tensorrt_engine, "modules", lambda: (Version, None))
    monkeypatch.setattr(tensorrt_engine, "Logger", lambda trt: None)
    monkeypatch.setattr(tensorrt_engine, "Cuda", lambda rt, gpu: None)
    monkeypatch.setattr(tensorrt_engine, "parse", lambda trt, logger, source: (None, source, None))
    monkeypatch.setattr(tensorrt_engine, "all_tensors", lambda network: dict.fromkeys(["h", "y"]))
    monkeypatch.setattr(tensorrt_engine, "build_time_tensors", lambda trt, network: set())
    monkeypatch.setattr(tensorrt_engine, "build", lambda trt, logger, source, names, *a: (object(), 0.0))
    monkeypatch.setattr(tensorrt_engine, "run", run)
    return written


def _two_relus():
    from onnx import TensorProto, helper

    from conftest import make_model

    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1]) for n in ("x", "y")]
    return make_model([helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Relu", ["h"], ["y"])], io[:1], io[1:])


@pytest.mark.parametrize("mode", ["debug", "output"])
def test_tensorrt_writes_a_model_for_its_parser_once(monkeypatch, mode):
    from onnxprobe.runtime.runners.tensorrt import TensorRtRunner
    from onnxprobe.types import TensorRef

    written = _fake_tensorrt(monkeypatch, lose_debug=mode == "debug")
    model = _two_relus()
    runner = TensorRtRunner(model, options={"mode": mode})
    feeds = {"x": np.ones(1, np.float32)}
    h, y = (TensorRef(name=n, node=n, op_type="Relu", index=0) for n in ("h", "y"))
    for refs in ([h], [h, y], [h]):  # the readable check, two engines, an engine reused; the debug fallback's rebuilds
        runner.probe(refs, feeds)
    assert runner.unobservable(["h", "y", "x"]) == {}
    assert len(written) == 1, written
    other = _two_relus()  # a derived model (a cone of diff) is written once too
    runner.collect(other, ["h"], feeds, stats=[], raw=["h"])
    runner.collect(other, ["y"], feeds, stats=[], raw=["y"])
    assert len(written) == 2


def test_tensorrt_removes_the_folders_of_models_it_no_longer_keeps(monkeypatch):
    from pathlib import Path

    from onnxprobe.runtime.runners import tensorrt

    written = _fake_tensorrt(monkeypatch)
    runner = tensorrt.TensorRtRunner(_two_relus())
    models = [_two_relus() for _ in range(tensorrt.MAX_SOURCES + 1)]
    for m in models:
        runner._source(m)
    assert len(written) == len(models) and not Path(written[0]).exists()
    assert all(Path(w).is_dir() for w in written[1:])
    runner._source(models[-1])
    assert len(written) == len(models)


def test_without_tensorrt_the_reference_runtime_is_named_by_its_flag(monkeypatch):
    """diff --vs-runtime tensorrt said '--runtime tensorrt needs tensorrt': a flag the user never typed."""
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    monkeypatch.setitem(sys.modules, "tensorrt", None)
    r = CliRunner().invoke(app, ["diff", str(sample_path("mlp")), "--vs-runtime", "tensorrt"])
    assert r.exit_code == 2 and r.stderr.strip().startswith("onnxprobe: error: --vs-runtime tensorrt needs tensorrt"), r.stderr
    with pytest.raises(MissingExtra, match=r"^runtime \(--runtime\) tensorrt needs"):
        api.layers(sample_path("mlp"), runtime="tensorrt")
