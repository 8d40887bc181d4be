"""Shared fixtures: the bundled sample models, small builders for test-only models, the CLI runner."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_models"
SAMPLE_NAMES = ["cnn", "transformer_block", "mlp", "control_flow", "dynamic_batch", "external_data"]


@pytest.fixture(params=SAMPLE_NAMES)
def sample(request) -> Path:
    return SAMPLES / f"{request.param}.onnx"


def sample_path(name: str) -> Path:
    return SAMPLES / f"{name}.onnx"


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def sample_feeds(name: str, seed: int = 3) -> dict[str, np.ndarray]:
    """Inputs for the sample models, made here independently of onnxprobe's own feed code."""
    rng = np.random.default_rng(seed)
    if name == "control_flow":
        return {"x": rng.random((2, 4), dtype=np.float32), "n": np.array(3, np.int64), "cond": np.array(True)}
    m = onnx.load(str(sample_path(name)), load_external_data=False)
    feeds = {}
    for vi in m.graph.input:
        dims = [d.dim_value if d.HasField("dim_value") else 2 for d in vi.type.tensor_type.shape.dim]
        feeds[vi.name] = rng.random(dims, dtype=np.float32)
    return feeds


def make_model(nodes, inputs, outputs, initializers=(), opset=17, ir=8) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "test", inputs, outputs, initializer=list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="onnxprobe-tests")
    m.ir_version = ir
    return m


def nan_model() -> onnx.ModelProto:
    """y = Relu(Log(x) * w): Log of a negative input gives NaN, Log(0) gives -inf, so the counts are known."""
    w = numpy_helper.from_array(np.full((4,), 2.0, np.float32), "w")
    return make_model(
        [helper.make_node("Log", ["x"], ["logx"], name="log"),
         helper.make_node("Mul", ["logx", "w"], ["scaled"], name="scale"),
         helper.make_node("Relu", ["scaled"], ["y"], name="relu")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [w],
    )
