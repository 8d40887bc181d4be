"""bench/grad.py on a model its torch side cannot evaluate (an op the op-by-op evaluator lacks: ArgMax) or whose
weights torch reads nowhere (an If branch not taken): it ended in a traceback and wrote nothing, the onnxruntime
columns already measured lost. Now the torch columns are empty with the reason, and the rest is written."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import ROOT, make_model

pytest.importorskip("torch")


def _bench():
    spec = importlib.util.spec_from_file_location("onnxprobe_bench_grad", ROOT / "bench" / "grad.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _argmax_model():
    w = numpy_helper.from_array(np.random.default_rng(0).normal(size=(4, 4)).astype(np.float32), "W")
    return make_model([helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
                       helper.make_node("ArgMax", ["h"], ["i"], name="am", axis=1, keepdims=1),
                       helper.make_node("Cast", ["i"], ["f"], name="cast", to=TensorProto.FLOAT),
                       helper.make_node("Mul", ["h", "f"], ["y"], name="mul")],
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [w])


def _if_model():
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.normal(size=(4, 4)).astype(np.float32), n) for n in ("W1", "W2")]
    branch = lambda w, name: helper.make_graph([helper.make_node("MatMul", ["x", w], [f"o_{name}"])], name, [],  # noqa: E731
                                               [helper.make_tensor_value_info(f"o_{name}", TensorProto.FLOAT, [2, 4])])
    inits.append(numpy_helper.from_array(np.array(True), "c"))
    return make_model([helper.make_node("If", ["c"], ["y"], name="if", then_branch=branch("W1", "then"),
                                        else_branch=branch("W2", "else"))],
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], inits)


@pytest.mark.parametrize("build, torch_runs", [(_argmax_model, False), (_if_model, True)], ids=["argmax", "if"])
def test_a_model_torch_cannot_evaluate_keeps_its_onnxruntime_columns(tmp_path, capsys, build, torch_runs):
    p = tmp_path / "m.onnx"
    onnx.save(build(), p)
    out = tmp_path / "g.json"
    assert _bench().main([str(p), "--repeat", "2", "--threads", "1", "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["results"]
    assert row["ort_forward_ms"] > 0 and row["ort_forward_backward_ms"] > 0
    printed = capsys.readouterr().out
    if torch_runs:  # W2, in the branch not taken, gets no gradient from torch: no error for it
        assert row["torch_forward_backward_ms"] > 0 and "torch_error" not in row
    else:
        assert row["torch_forward_backward_ms"] is None and "ArgMax" in row["torch_error"]
        assert "torch could not evaluate this model's graph" in printed
