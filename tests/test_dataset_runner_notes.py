"""A dataset diff's samples carry the runners' notes back (OpenVINO's, found where the sample ran): on a Ray
actor the driver's own runners never run, and its report lacked them (QA). The worker Ray builds is called
here directly, from the paths and settings an actor gets."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api
from onnxprobe.api.diff_dataset import DiffWorkerFactory
from onnxprobe.compare.dataset import Pool

pytest.importorskip("openvino")
pytestmark = pytest.mark.openvino


def int64_model(path):
    """y = x + 1 in int64: OpenVINO's CPU plugin computes it in int32, which its runner notes."""
    m = make_model([helper.make_node("Add", ["x", "one"], ["y"], name="add")],
                   [helper.make_tensor_value_info("x", TensorProto.INT64, [4])],
                   [helper.make_tensor_value_info("y", TensorProto.INT64, [4])],
                   [numpy_helper.from_array(np.array(1, np.int64), "one")])
    onnx.save(m, str(path))
    return path


def test_a_sample_measured_elsewhere_brings_the_runners_notes(tmp_path):
    p = int64_model(tmp_path / "m.onnx")
    driver = DiffWorkerFactory(api.load(p), None, None, None, "openvino", api.RunConfig(), api.Selection(all=True),
                               api.Tolerance(), None, None, True, None, True, shapes={"x": (4,)})
    _, plan = driver.plan()
    # the actor's worker: built from the model's path, as Ray builds it
    actor = DiffWorkerFactory(str(p), None, None, None, "openvino", api.RunConfig(), api.Selection(all=True),
                              plan.tolerance, None, None, True, None, True, threads=1, shapes={"x": (4,)})()
    part = actor.process(0, "s0", {"x": np.array([1, 2, 3, 2**40], np.int64)})
    assert any("int64 tensors in int32" in n for n in part.notes), part.notes
    pool = Pool(plan)
    pool.add(part)
    res = pool.result()
    assert sum("int64 tensors in int32" in n for n in res.notes) == 1, res.notes
    assert not any("int64" in n for n in plan.a.runner.notes + plan.b.runner.notes)  # the driver ran nothing
