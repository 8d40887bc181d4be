"""Device resolution without a GPU: auto falls back to CPU; asking for CUDA is a clear error."""

from __future__ import annotations

import numpy as np
import pytest

from onnxprobe.errors import ExecutionError, OnnxProbeError, UsageError
from onnxprobe.runtime import ort as session


def test_auto_is_cpu_when_cuda_is_not_usable(monkeypatch):
    monkeypatch.setattr(session, "cuda_usable", lambda: False)
    assert session.resolve_device("auto") == "cpu"
    with pytest.raises(ExecutionError, match="no usable CUDA provider"):
        session.resolve_device("cuda")
    with pytest.raises(UsageError):
        session.resolve_device("gpu")


def test_listed_but_broken_cuda_provider_is_not_usable(monkeypatch):
    """onnxruntime-gpu lists CUDA even when its libraries are missing: the session's providers decide."""
    import onnxruntime as ort

    class FakeSession:
        def __init__(self, *a, **k):
            pass

        def get_providers(self):
            return ["CPUExecutionProvider"]  # what ORT does when CUDA libraries fail to load

    session.cuda_usable.cache_clear()
    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    monkeypatch.setattr(ort, "InferenceSession", FakeSession)
    try:
        assert session.cuda_usable() is False
    finally:
        session.cuda_usable.cache_clear()


def test_ir_version_newer_than_onnxruntime_is_lowered(monkeypatch):
    """Simulate an onnxruntime that reads IR <= 9 (as onnxruntime-gpu 1.31 reads <= 13 while onnx 1.23 writes 14)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    real = ort.InferenceSession

    def picky(model, *a, **k):
        import onnx

        ir = onnx.load_from_string(model).ir_version
        if ir > 9:
            raise RuntimeError(f"[ONNXRuntimeError] : 1 : FAIL : Unsupported model IR version: {ir}, max supported IR version: 9")
        return real(model, *a, **k)

    monkeypatch.setattr(ort, "InferenceSession", picky)
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 14
    s = session.create_session(m, device="cpu")
    assert any("lowered to 9" in n for n in s.notes)


def test_opset_newer_than_onnxruntime_is_converted_down(monkeypatch):
    """Simulate an onnxruntime whose ai.onnx support stops at opset 13, given an opset-17 model."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    real = ort.InferenceSession

    def picky(model, *a, **k):
        opset = next(o.version for o in onnx.load_from_string(model).opset_import if o.domain in ("", "ai.onnx"))
        if opset > 13:
            raise RuntimeError(f"[ONNXRuntimeError] : 1 : FAIL : ONNX Runtime only *guarantees* support for models stamped "
                               f"with official released onnx opset versions. Opset {opset} is under development and support for "
                               f"this is limited. Current official support for domain ai.onnx is till opset 13.")
        return real(model, *a, **k)

    monkeypatch.setattr(ort, "InferenceSession", picky)
    g = helper.make_graph([helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
                          initializer=[onnx.numpy_helper.from_array(np.array([1], np.int64), "axes")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    s = session.create_session(m, device="cpu")
    assert any("opset 13" in n for n in s.notes)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(s.sess.run(None, {"x": x})[0], x.sum(axis=1))


def test_an_unusable_device_is_one_line_without_the_inputs_hint(monkeypatch, tmp_path):
    """--device cuda where no CUDA provider works: the message is about the device alone, not followed by
    the hint about guessed dimensions that a failed run of the model gets (the model here has a dynamic
    batch dimension, so the hint would apply to a run)."""
    import onnx
    from onnx import TensorProto, helper
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app
    from onnxprobe.errors import DeviceUnavailable
    from onnxprobe.runtime.feeds import Feeds

    monkeypatch.setattr(session, "cuda_usable", lambda: False)
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    p = tmp_path / "dyn.onnx"
    onnx.save(m, p)
    r = CliRunner().invoke(app, ["layers", str(p), "--device", "cuda"])
    assert r.exit_code == 1
    assert "no usable CUDA provider" in r.output and "--shape" not in r.output, r.output
    fs = Feeds(values={}, defaulted={"x": ["N"]})
    assert fs.hint()  # a run's error gets it
    assert "--shape" in str(fs.explained(ExecutionError("onnxruntime: Reshape failed")))
    e = DeviceUnavailable("no usable CUDA provider")
    assert fs.explained(e) is e


def test_a_run_failing_on_an_empty_input_says_so(tmp_path):
    """--shape with a 0 dimension is legal ONNX; when the run fails on it, the error says the input is empty."""
    import onnx
    from onnx import TensorProto, helper
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    shape = helper.make_tensor("s", TensorProto.INT64, [2], [0, -1])  # -1 of an empty tensor: ambiguous, onnxruntime refuses
    g = helper.make_graph([helper.make_node("Reshape", ["x", "s"], ["y"])], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[shape])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    p = tmp_path / "reshape.onnx"
    onnx.save(m, p)
    r = CliRunner().invoke(app, ["layers", str(p), "--shape", "x=0x3"])
    assert r.exit_code == 1 and "input x has a dimension of 0, [0, 3]: an empty tensor" in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1
    r = CliRunner().invoke(app, ["layers", str(p), "--shape", "x=2x3", "--all"])
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("args, words", [
    (["diff", "--vs-device", "bogus"], "--vs-device bogus: choose one of"),
    (["diff", "--vs-device", "cuda"], "--vs-device cuda: onnxruntime has no usable CUDA provider"),
    (["diff", "--vs-opt-level", "bogus"], "--vs-opt-level bogus: choose one of"),
    (["layers", "--opt-level", "bogus"], "--opt-level bogus: choose one of"),
    (["layers", "--device", "cuda"], "--device cuda: onnxruntime has no usable CUDA provider"),
])
def test_the_reference_device_is_named_as_the_flag_it_came_from(monkeypatch, args, words):
    """--vs-device's errors named --device, which the user had not given (QA); then the API's parameter
    beside the flag ("vs_device (--vs-device) cuda"), which the command line has not (QA): the flag alone, as
    --vs-runtime's say. The API's own message names both."""
    from typer.testing import CliRunner

    from conftest import sample_path
    from onnxprobe import api
    from onnxprobe.cli.main import app

    monkeypatch.setattr(session, "cuda_usable", lambda: False)
    r = CliRunner().invoke(app, [args[0], str(sample_path("mlp")), *args[1:]])
    param = args[1][2:].replace("-", "_")
    assert r.exit_code != 0 and r.output.startswith(f"onnxprobe: error: {words}"), r.output
    assert f"{param} (" not in r.output and "(--" not in r.output, r.output
    call = api.diff if args[0] == "diff" else api.layers
    kw = {param: args[2]} if args[0] == "diff" else {"config": api.RunConfig(**{param: args[2]})}
    with pytest.raises(OnnxProbeError) as e:
        call(str(sample_path("mlp")), **kw)
    assert e.value.cli_message.startswith(words) and str(e.value) == f"{param} ({args[1]}) {e.value.cli_message[len(args[1]) + 1:]}"


@pytest.mark.parametrize("args, words", [
    (["layers", "MLP", "--seed", "-1"], "--seed -1: seeds are non-negative integers"),
    (["layers", "MLP", "--int-range", "5:5"], "--int-range 5:5: LOW must be below HIGH"),
    (["layers", "MLP", "--runtime-option", "A=B"], "--runtime-option A: ort takes only tf32"),
    (["layers", "MLP", "--range", ""], "--range '': expected 'START:END'"),
    (["grad", "MLP", "--loss", "foo"], "--loss foo: choose one of"),
    (["grad", "MLP", "--loss", "mse"], "--loss mse needs --target FILE.npy: the values it is computed against"),
    (["grad", "MLP", "--loss-output", "nope"], "--loss-output 'nope': not an output of the model"),
    (["grad", "MLP", "--loss", "mse", "--output-grad", "DY"], "--output-grad gives dL/dy directly: it replaces --loss"),
])
def test_a_bad_setting_names_the_flag_alone_on_the_command_line(tmp_path, args, words):
    """The API's messages name its parameter and the flag ("seed (--seed) -1: ..."); on the command line the
    parameter is a name the user never typed: the flag alone, for every setting (QA found --vs-device's;
    --seed, --int-range, --loss and the others said 'seed (--seed)' too)."""
    from typer.testing import CliRunner

    from conftest import sample_path
    from onnxprobe.cli.main import app

    np.save(tmp_path / "dy.npy", np.ones((1, 4), np.float32))
    r = CliRunner().invoke(app, [str(sample_path("mlp")) if a == "MLP" else str(tmp_path / "dy.npy") if a == "DY" else a for a in args])
    assert r.exit_code == 2 and r.output.startswith(f"onnxprobe: error: {words}"), r.output
    assert len(r.output.strip().splitlines()) == 1


def test_fp32_sensitivity_names_its_flag_alone():
    """--fp32-sensitivity -1 said 'fp32_sensitivity (--fp32-sensitivity) -1' on the command line (QA)."""
    from typer.testing import CliRunner

    from conftest import sample_path
    from onnxprobe.cli.main import app

    cnn = str(sample_path("cnn"))
    r = CliRunner().invoke(app, ["diff", cnn, cnn, "--fp32-sensitivity", "-1"])
    assert r.exit_code == 2 and r.output.startswith("onnxprobe: error: --fp32-sensitivity -1: "), r.output
