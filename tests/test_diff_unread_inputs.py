"""diff of two models one of which declares inputs no node reads: onnxruntime's optimized copy of an IR-3 /
opset-9 model (every zoo model: light_squeezenet's 17 'fire3/expand1x1_w_0__SHAPE' inputs) against its
original was refused as "the models take different inputs". Such inputs are no shared feed: each side's
runner feeds them zeros (onnxruntime requires every declared input and refuses an undeclared name), said in
one note; diff and diff --grad, fused and separate runs, A/B swapped. Oracle: onnx.reference and numpy
float64 gradients on the feeds the diff ran; an extra input that IS read is still refused."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.cli.main import app

RNG = np.random.default_rng(5)
X = RNG.standard_normal((2, 4)).astype(np.float32)
W = (RNG.standard_normal((4, 3)) * 0.5).astype(np.float32)
W2 = W + np.float32(0.05)


def _model(path, w, extra: str | None = None, read: bool = False) -> str:
    """y = tanh(x W) (x of a dynamic batch); ``extra``: one more int64 input of a dynamic dim, which a
    node reads where ``read`` (y + Cast(ReduceSum(extra)))."""
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["xw"], name="mm"), helper.make_node("Tanh", ["xw"], ["t"], name="tanh")]
    if extra:
        ins.append(helper.make_tensor_value_info(extra, TensorProto.INT64, ["d"]))
    if extra and read:
        nodes += [helper.make_node("ReduceSum", [extra], ["s"], name="rs", keepdims=0),
                  helper.make_node("Cast", ["s"], ["sf"], name="cast", to=TensorProto.FLOAT),
                  helper.make_node("Add", ["t", "sf"], ["y"], name="add")]
    else:
        nodes.append(helper.make_node("Identity", ["t"], ["y"], name="id"))
    g = helper.make_graph(nodes, "g", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
                          [numpy_helper.from_array(w, "W")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return str(path)


def _ref(path, x) -> np.ndarray:
    m = onnx.load(path)
    feeds = {"x": x, **{i.name: np.zeros((1,), np.int64) for i in m.graph.input if i.name != "x"}}
    return ReferenceEvaluator(m).run(["y"], feeds)[0]


@pytest.fixture
def pair(tmp_path):
    return _model(tmp_path / "plain.onnx", W), _model(tmp_path / "extra.onnx", W2, "W_0__SHAPE")


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("fuse", [True, False])
def test_diff_compares_and_notes_the_unread_input(pair, swap, fuse):
    a, b = pair[::-1] if swap else pair
    res = api.diff(a, b, inputs=api.InputSpec(arrays={"x": X}), fuse=fuse)
    y = next(r for r in res.results if r.pair.a.name == "y")
    want = np.max(np.abs(_ref(a, X).astype(np.float64) - _ref(b, X).astype(np.float64)))
    assert want > 1e-3 and y.metrics.max_abs == pytest.approx(want, rel=1e-4, abs=1e-6)
    assert res.verdict()[0] == "fail"  # the weights differ: measured, not waved through
    side = "A" if swap else "B"
    assert [n for n in res.notes if "no node reads" in n] == [f"{side} declares 1 input no node reads ('W_0__SHAPE'): fed zeros"]


@pytest.mark.parametrize("fuse", [True, False])
def test_same_weights_pass(tmp_path, fuse):
    a, b = _model(tmp_path / "a.onnx", W), _model(tmp_path / "b.onnx", W, "W_0__SHAPE")
    res = api.diff(b, a, inputs=api.InputSpec(arrays={"x": X}), fuse=fuse)
    assert res.verdict()[0] == "pass" and any(r.pair.a.name == "y" and r.metrics is not None for r in res.results)


@pytest.mark.parametrize("swap", [False, True])
def test_diff_grad_compares(pair, swap):
    a, b = pair[::-1] if swap else pair
    res = api.diff_grad(a, b, inputs=api.InputSpec(arrays={"x": X}))
    g = next(r for r in res.results if r.pair.b.name == "W_grad")

    def grad(w):  # d sum(tanh(x W)) / dW in float64
        t = np.tanh(X.astype(np.float64) @ w.astype(np.float64))
        return X.astype(np.float64).T @ (1 - t * t)

    wa, wb = (W2, W) if swap else (W, W2)
    want = np.max(np.abs(grad(wa) - grad(wb)))
    assert want > 1e-3 and g.metrics.max_abs == pytest.approx(want, rel=1e-3)
    assert any("no node reads ('W_0__SHAPE'): fed zeros" in n for n in res.notes)


@pytest.mark.parametrize("args", [[], ["--separate-runs"], ["--grad"]])
@pytest.mark.parametrize("swap", [False, True])
def test_cli_compares(pair, tmp_path, args, swap):
    a, b = pair[::-1] if swap else pair
    np.save(tmp_path / "x.npy", X)
    r = CliRunner().invoke(app, ["diff", a, b, "--device", "cpu", "--input", f"x={tmp_path / 'x.npy'}", *args])
    assert r.exit_code == 1, r.output  # a comparison that fails (the weights differ), not a refusal (2)
    assert "different inputs" not in r.output and "fed zeros" in r.output


@pytest.mark.parametrize("args", [[], ["--grad"]])
def test_an_extra_input_that_is_read_is_refused(tmp_path, args):
    a, b = _model(tmp_path / "a.onnx", W), _model(tmp_path / "b.onnx", W, "u", read=True)
    for x, y in ((a, b), (b, a)):
        r = CliRunner().invoke(app, ["diff", x, y, "--device", "cpu", *args])
        assert r.exit_code == 2 and "the models take different inputs" in r.output and "'u'" in r.output, r.output


# a real third-party model, from the folder ../shared/models/fetch_models.sh fills (as tests/test_real_models.py)
SQUEEZENET = os.path.join(os.environ.get("ONNXPROBE_MODELS", ""), "onnx-light", "light_squeezenet.onnx")


@pytest.mark.skipif(not os.environ.get("ONNXPROBE_MODELS") or not os.path.exists(SQUEEZENET),
                    reason="real models not fetched: run ../shared/models/fetch_models.sh DIR and set ONNXPROBE_MODELS=DIR")
@pytest.mark.parametrize("args", [[], ["--separate-runs"], ["--grad", "--loss", "mse", "--target", "TARGET"]])
def test_squeezenet_against_its_optimized_copy(tmp_path, args):
    """The IR-3 copy onnxruntime writes (17 '..._SHAPE' inputs nothing reads): every pair compared, as A."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    ort.InferenceSession(SQUEEZENET, so, providers=["CPUExecutionProvider"])
    np.save(tmp_path / "t.npy", np.zeros((1, 1000, 1, 1), np.float32))
    args = [str(tmp_path / "t.npy") if a == "TARGET" else a for a in args]
    r = CliRunner().invoke(app, ["diff", str(tmp_path / "opt.onnx"), SQUEEZENET, "--device", "cpu", *args])
    assert "A declares 17 inputs no node reads" in r.output and " 0 failing" in r.output, r.output
