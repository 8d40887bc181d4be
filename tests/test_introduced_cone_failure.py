"""One of B's cones that fails when fed A's values (B's Gather reading indices that A's paired tensor holds
out of range: BERT legacy against dynamo, a GatherND 'invalid index') took every other layer's introduced
error with it: the cones run apart where they fail, and only the failing one is named. The construction is
the oracle: every other layer's intro is measured, the Add's (fed A's own Gather output) exact."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api


def _model(path, a: bool):
    """t = int(x * k) (k 10 in A, 0 in B); g = Gather(data of 3, t in B, t * 0 in A); y = g + 1."""
    inits = [numpy_helper.from_array(np.array(10.0 if a else 0.0, np.float32), "k"),
             numpy_helper.from_array(np.array([1.0, 2.0, 3.0], np.float32), "data"),
             numpy_helper.from_array(np.array(0, np.int64), "zero"), numpy_helper.from_array(np.array(1.0, np.float32), "one")]
    nodes = [helper.make_node("Mul", ["x", "k"], ["xk"]), helper.make_node("Cast", ["xk"], ["t"], to=TensorProto.INT64)]
    if a:
        nodes += [helper.make_node("Mul", ["t", "zero"], ["tz"]), helper.make_node("Gather", ["data", "tz"], ["g"])]
    else:
        nodes += [helper.make_node("Gather", ["data", "t"], ["g"])]
    nodes += [helper.make_node("Add", ["g", "one"], ["y"])]
    onnx.save(make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], inits), path)


def test_a_failing_cone_leaves_the_others_measured(tmp_path):
    _model(tmp_path / "a.onnx", True)
    _model(tmp_path / "b.onnx", False)
    x = np.array([0.3, 0.5, 0.7, 0.9], np.float32)  # A's t up to 9: out of range for B's Gather of 3
    res = api.diff(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), selection=api.Selection(all=True),
                   inputs=api.InputSpec(arrays={"x": x}), config=api.RunConfig(device="cpu", cache=False))
    r = {p.pair.a.name: p for p in res.results}
    assert r["g"].introduced is None  # its cone cannot run on A's values
    assert r["y"].introduced is not None and r["y"].introduced.exact  # B's Add of A's g is A's y
    assert r["xk"].introduced is not None and not r["xk"].introduced.exact  # x * 10 against x * 0
    notes = [n for n in res.notes if "introduced error not computed" in n]
    assert len(notes) == 1 and "'g'" in notes[0], res.notes
