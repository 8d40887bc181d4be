"""onnxruntime's kernels warn through its default logger, not their session's: a RoiAlign in max mode
printed a coloured onnxruntime warning on stderr beside onnxprobe's own output (and beside the one line
of an error). onnxprobe quiets that logger as it quiets its sessions' (ONNXPROBE_DEBUG=1 keeps it)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _roi_max(tmp_path):
    rois = numpy_helper.from_array(np.array([[0.5, 0.5, 4.0, 3.0]], np.float32), "rois")
    bi = numpy_helper.from_array(np.array([0], np.int64), "bi")
    g = helper.make_graph([helper.make_node("RoiAlign", ["x", "rois", "bi"], ["y"], mode="max", output_height=2,
                                            output_width=2, sampling_ratio=2)], "m",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [rois, bi])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])
    m.ir_version = 8
    p = tmp_path / "roi_max.onnx"
    onnx.save(m, p)
    return p


def test_no_onnxruntime_warning_on_stderr(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "ONNXPROBE_DEBUG"}
    r = subprocess.run([sys.executable, "-m", "onnxprobe", "layers", str(_roi_max(tmp_path))], capture_output=True,
                       text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", r.stderr
