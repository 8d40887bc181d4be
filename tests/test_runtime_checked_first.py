"""A runtime or device that cannot run here is refused before any long work: a missing extra (OpenVINO,
TensorRT), CUDA without a usable provider, a TensorRT that is installed but cannot be imported or finds no
GPU. Each is one line naming what is missing (QA on a machine without a GPU: `diff big.onnx --vs-runtime
tensorrt` observed both sides first, 6 s on a 12,000-node model; `grad big.onnx --device cuda` built the
whole backward graph first, 15 s, before saying CUDA was not usable; a TensorRT whose libraries failed to
load was an 'internal error')."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from conftest import sample_path
from onnxprobe import api
from onnxprobe.errors import DeviceUnavailable, ExecutionError, MissingExtra
from onnxprobe.runtime import ort as session


def _no_long_work(monkeypatch):
    """The work these checks must come before: observing a diff's sides, planning a backward graph."""
    def started(*a, **k):
        raise AssertionError("the long work started before the runtime was checked")

    from importlib import import_module

    for module, name in (("compare.sides", "observe"), ("api.grad", "grad_plan"), ("api.grad_dataset", "grad_plan"),
                         ("api.diff_grad", "observe"), ("api.torch_args", "torch_module")):
        monkeypatch.setattr(import_module(f"onnxprobe.{module}"), name, started)


@pytest.mark.parametrize("runtime", ["openvino", "tensorrt"])
def test_a_missing_runtime_is_refused_before_the_sides_are_observed(monkeypatch, runtime):
    monkeypatch.setitem(sys.modules, runtime, None)
    _no_long_work(monkeypatch)
    mlp = str(sample_path("mlp"))
    # the API's words: the parameter, then its flag (the command line's message has the flag alone)
    with pytest.raises(MissingExtra, match=rf"^vs_runtime \(--vs-runtime\) {runtime} needs {runtime}"):
        api.diff(mlp, vs_runtime=runtime)
    with pytest.raises(MissingExtra, match=rf"^runtime \(--runtime\) {runtime} needs {runtime}"):
        api.diff(mlp, runtime=runtime, vs_runtime="ort")
    with pytest.raises(MissingExtra, match=rf"^runtime \(--runtime\) {runtime} needs {runtime}"):
        api.diff(mlp, mlp, runtime=runtime)


def test_unusable_cuda_is_refused_before_the_long_work(monkeypatch, tmp_path):
    monkeypatch.setattr(session, "cuda_usable", lambda: False)
    _no_long_work(monkeypatch)
    mlp = str(sample_path("mlp"))
    cuda = api.RunConfig(device="cuda")
    calls = [
        lambda: api.diff(mlp, vs_device="cpu", config=cuda),
        lambda: api.diff(mlp, mlp, config=cuda),
        lambda: api.diff(mlp, vs_device="cuda"),
        lambda: api.diff(mlp, vs_torch="x.py:build", config=cuda),
        lambda: api.grad(mlp, config=cuda),
        lambda: api.diff_grad(mlp, mlp, config=cuda),
        lambda: api.diff_grad(mlp, vs_torch="x.py:build", config=cuda),
    ]
    for call in calls:
        with pytest.raises(DeviceUnavailable, match="no usable CUDA provider"):
            call()
    np.savez(tmp_path / "batch.npz", **{"x": np.ones((1, 4), np.float32)})
    with pytest.raises(DeviceUnavailable, match="no usable CUDA provider"):
        api.grad_dataset(mlp, tmp_path, config=cuda)


def _tensorrt_package(tmp_path, monkeypatch, body: str) -> None:
    """A package ``tensorrt`` whose import runs ``body``, and cuda-python's ``cuda`` beside it."""
    for name in ("tensorrt", "cuda"):
        (tmp_path / name).mkdir()
        for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            monkeypatch.delitem(sys.modules, mod)
    (tmp_path / "tensorrt" / "__init__.py").write_text(body)
    (tmp_path / "cuda" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))


def test_a_tensorrt_that_cannot_be_imported_is_one_line(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    _tensorrt_package(tmp_path, monkeypatch, 'raise ImportError("libnvinfer.so.10: cannot open shared object file")')
    mlp = str(sample_path("mlp"))
    for args, flag in ((["layers", mlp, "--runtime", "tensorrt"], "--runtime"),
                       (["diff", mlp, "--vs-runtime", "tensorrt"], "--vs-runtime")):
        r = CliRunner().invoke(app, args)
        assert r.exit_code == 1, r.output
        line = r.output.strip()
        assert len(line.splitlines()) == 1 and "internal error" not in line, line
        assert f"{flag} tensorrt: TensorRT is installed but cannot be imported" in line and "libnvinfer.so.10" in line, line
        assert "pip install 'onnxprobe[tensorrt]'" in line, line
    with pytest.raises(ExecutionError, match="cannot be imported"):
        api.layers(mlp, runtime="tensorrt")


def test_tensorrt_without_a_gpu_names_the_device(monkeypatch):
    """cuda-python there, no GPU: cudaSetDevice fails. It said 'CUDA: no CUDA-capable device is detected',
    naming neither the runtime nor the device asked for."""
    from onnxprobe.runtime.runners import tensorrt, tensorrt_engine

    class Runtime:  # cuda-python's runtime API on a machine without a GPU
        @staticmethod
        def cudaSetDevice(device):
            return (100,)

        @staticmethod
        def cudaGetErrorString(err):
            return (0, b"no CUDA-capable device is detected")

    class TensorRT:
        __version__ = "10.9"

    monkeypatch.setattr(tensorrt, "require_tensorrt", lambda flag="--runtime": None)
    monkeypatch.setattr(tensorrt_engine, "modules", lambda: (TensorRT, Runtime))
    monkeypatch.setattr(tensorrt_engine, "Logger", lambda trt: None)
    mlp = str(sample_path("mlp"))
    with pytest.raises(DeviceUnavailable) as e:
        api.layers(mlp, runtime="tensorrt", config=api.RunConfig(device="cuda:1"))
    assert e.value.cli_message == ("--device cuda:1: TensorRT cannot use CUDA device 1 here: no CUDA-capable device is "
                                   "detected (TensorRT needs an NVIDIA GPU and its driver)"), e.value.cli_message
    with pytest.raises(DeviceUnavailable) as e:
        api.diff(mlp, vs_runtime="tensorrt")
    assert "--vs-runtime tensorrt: TensorRT cannot use CUDA device 0 here" in e.value.cli_message, e.value.cli_message
