"""A shape onnxprobe pins to the size onnxruntime computes (``autodiff.pin``: where onnx's inference says another) is
no stale declaration of the model's: the note 'the model declares shapes these inputs contradict' named onnxprobe's
own tensor ('s/onnxprobe.run_shape': 1x7x5x2 declared, 1x7x8x2 for these inputs), for an STFT whose onesided
output onnx infers at the full length (QA). Oracle: onnxruntime's own output shape."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from typer.testing import CliRunner

from onnxprobe.cli.main import app


def test_no_note_names_a_pinned_tensor(tmp_path):
    rng = np.random.default_rng(3)
    g = h.make_graph([h.make_node("Mul", ["x", "W"], ["xw"]), h.make_node("STFT", ["xw", "step", "", "flen"], ["s"]),
                      h.make_node("ReduceSum", ["s"], ["r"], keepdims=0)], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [1, 32, 1])], [h.make_tensor_value_info("r", T.FLOAT, [])],
                     [nh.from_array(np.array(4, np.int64), "step"), nh.from_array(np.array(8, np.int64), "flen"),
                      nh.from_array(rng.normal(size=(1, 32, 1)).astype(np.float32), "W")])
    p = str(tmp_path / "stft.onnx")
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8), p)
    inferred = onnx.shape_inference.infer_shapes(onnx.load(p))
    declared = [tuple(d.dim_value for d in v.type.tensor_type.shape.dim) for v in inferred.graph.value_info if v.name == "s"]
    o = onnx.load(p)
    o.graph.output.append(h.make_tensor_value_info("s", T.FLOAT, None))
    (run,) = ort.InferenceSession(o.SerializeToString(), providers=["CPUExecutionProvider"]).run(["s"], {"x": np.ones((1, 32, 1), np.float32)})
    r = CliRunner().invoke(app, ["diff", "--grad", p, p, "--no-cache"])
    if declared and declared[0] != run.shape:  # onnx's inference and onnxruntime disagree: onnxprobe pins the run's size
        assert "onnxprobe." not in r.stderr and "declares shapes these inputs contradict" not in r.stderr, r.stderr
    assert "Traceback" not in r.output
