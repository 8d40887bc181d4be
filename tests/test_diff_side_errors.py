"""QA: a diff where one side's runtime refuses the model (or fails while running it) said only
"onnxruntime: ..." without saying whether A or B failed: every error of one side names the side and its file,
on the command line and through the API (the exception keeps its class)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T, helper as h, numpy_helper

from onnxprobe import api
from onnxprobe.errors import ExecutionError, SessionError


def _save(nodes, path, inits=()) -> str:
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2, 3])], initializer=list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return str(path)


def good(tmp_path) -> str:
    return _save([h.make_node("Relu", ["x"], ["y"], name="r")], tmp_path / "good.onnx")


def refused(tmp_path) -> str:
    """Passes onnx.checker and onnxprobe's load checks; onnxruntime refuses it: a Relu of int16, which the ONNX
    spec allows and onnxruntime's CPU provider has no kernel for (a model typed wrongly, the case this fixture
    once used, is now refused when the model is read, before either side runs)."""
    return _save([h.make_node("Cast", ["x"], ["xi"], to=T.INT16, name="c"), h.make_node("Relu", ["xi"], ["ri"], name="r"),
                  h.make_node("Cast", ["ri"], ["y"], to=T.FLOAT, name="back")], tmp_path / "refused.onnx")


def fails_running(tmp_path) -> str:
    """Loads; fails while running: a Gather index past the end of the axis."""
    idx = numpy_helper.from_array(np.array([0, 1, 5], np.int64), "idx")
    return _save([h.make_node("Gather", ["x", "idx"], ["y"], axis=1, name="g")], tmp_path / "fails.onnx", [idx])


FEEDS = api.InputSpec(arrays={"x": np.ones((2, 3), np.float32)})


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "onnxprobe", "diff", *args], capture_output=True, text=True)


@pytest.mark.parametrize("bad", [refused, fails_running])
def test_the_side_that_fails_is_named_with_its_file(tmp_path, bad):
    a, b = good(tmp_path), bad(tmp_path)
    for x, y, side in ((a, b, "B"), (b, a, "A")):
        with pytest.raises(ExecutionError) as e:
            api.diff(x, y, config=api.RunConfig(device="cpu"), inputs=FEEDS)
        assert str(e.value).startswith(f"{side} ({b}): onnxruntime"), str(e.value)
        if bad is refused:
            assert type(e.value) is SessionError  # its class kept
        out = cli(x, y, "--device", "cpu")
        assert out.returncode == 1 and "Traceback" not in out.stderr
        assert out.stderr.startswith(f"onnxprobe: error: {side} ({b}): onnxruntime"), out.stderr


def test_a_separate_runs_diff_names_the_side_too(tmp_path):
    a, b = good(tmp_path), fails_running(tmp_path)
    with pytest.raises(ExecutionError, match=r"^B \(.*fails\.onnx\): onnxruntime"):
        api.diff(a, b, config=api.RunConfig(device="cpu"), inputs=FEEDS, fuse=False)


def test_one_model_on_two_runtimes_names_the_runtime_side(tmp_path):
    """--vs-reference: onnx.reference runs the half-converted model (B), onnxruntime refuses it (A)."""
    m = refused(tmp_path)
    with pytest.raises(SessionError) as e:
        api.diff(m, vs_reference=True, config=api.RunConfig(device="cpu"), inputs=FEEDS)
    assert str(e.value).startswith(f"A ({m}): onnxruntime"), str(e.value)
    out = cli(m, "--vs-reference", "--device", "cpu")
    assert out.stderr.startswith(f"onnxprobe: error: A ({m}): onnxruntime"), out.stderr


def test_the_reference_side_that_fails_names_its_runtime(tmp_path):
    """--vs-runtime reference where onnx.reference fails and onnxruntime does not: B, on the reference runtime."""
    m = fails_running(tmp_path)
    try:
        api.diff(m, vs_runtime="reference", config=api.RunConfig(device="cpu"), inputs=FEEDS)
    except ExecutionError as e:
        assert str(e).startswith("A (") or str(e).startswith(f"B ({m}, vs_runtime='reference'): "), str(e)
    out = cli(m, "--vs-runtime", "reference", "--device", "cpu")
    assert out.returncode != 0
    assert out.stderr.startswith((f"onnxprobe: error: A ({m}): ", f"onnxprobe: error: B ({m}, --vs-runtime reference): ")), out.stderr


@pytest.mark.parametrize("refused_side", ["A", "B"])
def test_diff_grad_names_the_side_onnxruntime_refuses(tmp_path, refused_side):
    """diff --grad builds each side's backward graph: onnxruntime refusing one of them named no side."""
    ok, bad = good(tmp_path), refused(tmp_path)
    a, b = (bad, ok) if refused_side == "A" else (ok, bad)
    with pytest.raises(ExecutionError) as e:
        api.diff_grad(a, b, config=api.RunConfig(device="cpu"), inputs=FEEDS)
    assert str(e.value).startswith(f"{refused_side} ({bad}): onnxruntime"), str(e.value)
    out = cli(a, b, "--grad", "--device", "cpu")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.startswith(f"onnxprobe: error: {refused_side} ({bad}): onnxruntime"), out.stderr


def _relu_module(tmp_path) -> str:
    f = tmp_path / "mod.py"
    f.write_text("import torch\n\ndef build():\n    return torch.nn.Sequential(torch.nn.ReLU()), (torch.ones(2, 3),)\n")
    return f"{f}:build"


@pytest.mark.parametrize("grad", [False, True])
def test_vs_torch_names_the_onnx_side_onnxruntime_refuses(tmp_path, grad):
    """diff --vs-torch (and --grad --vs-torch): the ONNX side is A, named with its file as in `diff A B`."""
    pytest.importorskip("torch")
    bad, mod = refused(tmp_path), _relu_module(tmp_path)
    run = api.diff_grad if grad else api.diff
    with pytest.raises(ExecutionError) as e:
        run(bad, vs_torch=mod, config=api.RunConfig(device="cpu"))
    assert str(e.value).startswith(f"A ({bad}): onnxruntime"), str(e.value)
    out = cli(bad, "--vs-torch", mod, "--device", "cpu", *(["--grad"] if grad else []))
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.startswith(f"onnxprobe: error: A ({bad}): onnxruntime"), out.stderr


def test_dataset_diff_names_the_side(tmp_path):
    """diff --inputs-dir builds its sides with make_sides in each worker: the failing side is named there too."""
    ok, bad = good(tmp_path), refused(tmp_path)
    d = tmp_path / "ds"
    d.mkdir()
    for i in range(2):
        np.savez(d / f"s{i}.npz", x=np.full((2, 3), i, np.float32))
    with pytest.raises(ExecutionError) as e:
        api.diff_dataset(ok, bad, d, config=api.RunConfig(device="cpu"))
    assert f"B ({bad}): onnxruntime" in str(e.value), str(e.value)


def unknown_and_refused(tmp_path) -> str:
    """onnxruntime refuses it (a Relu of bfloat16, which its CPU provider has no kernel for) and shape inference leaves a rank unknown (a
    Reshape to a computed shape): grad_plan's own run, which was to learn that rank, fails before any side's."""
    nodes = [h.make_node("Shape", ["x"], ["s0"]), h.make_node("Compress", ["s0", "keep"], ["s"], axis=0),
             h.make_node("Reshape", ["x", "s"], ["r"]), h.make_node("Mul", ["r", "w"], ["m"]),
             h.make_node("Cast", ["m"], ["mi"], to=T.BFLOAT16), h.make_node("Relu", ["mi"], ["ri"]),
             h.make_node("Cast", ["ri"], ["y"], to=T.FLOAT)]
    return _save(nodes, tmp_path / "unknown.onnx", [numpy_helper.from_array(np.array([True, True]), "keep"),
                                                    numpy_helper.from_array(np.array([1, 2, 3], np.float32), "w")])


@pytest.mark.parametrize("refused_side", ["A", "B"])
def test_diff_grad_names_the_side_whose_grad_plan_cannot_run_it(tmp_path, refused_side):
    """diff --grad: grad_plan runs each model itself (the shapes inference missed) outside the side's runner;
    its error named no side ("the model does not run, so the shapes ... onnxruntime: ...")."""
    ok, bad = good(tmp_path), unknown_and_refused(tmp_path)
    a, b = (bad, ok) if refused_side == "A" else (ok, bad)
    for inputs in (FEEDS, None):
        with pytest.raises(ExecutionError) as e:
            api.diff_grad(a, b, config=api.RunConfig(device="cpu"), inputs=inputs)
        assert str(e.value).startswith(f"{refused_side} ({bad}): "), str(e.value)
        assert "onnxruntime" in str(e.value) and e.value.side == f"{refused_side} ({bad})"
    out = cli(a, b, "--grad", "--device", "cpu")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.startswith(f"onnxprobe: error: {refused_side} ({bad}): "), out.stderr


def test_grad_of_one_model_names_no_side(tmp_path):
    """`grad MODEL` has no sides: its error stays as it was."""
    bad = unknown_and_refused(tmp_path)
    with pytest.raises(ExecutionError) as e:
        api.grad(bad, config=api.RunConfig(device="cpu"), inputs=FEEDS)
    assert str(e.value).startswith("the model does not run"), str(e.value)
    assert getattr(e.value, "side", None) is None
