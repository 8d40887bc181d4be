"""Smaller things QA found about bad models and files: an opset onnxruntime cannot run (0 does not exist;
3 predates the 7 it supports) was an 'unknown op' or a 'no cpu kernel'; grad of a model with no outputs
exited 2 (a model problem is 1); layers of such a model printed '0 tensors' where --all on a model of no
nodes was refused; external data whose location is the model file read its protobuf bytes as weights;
/dev/null as a report was 'a device, pipe or socket' where pipes are taken; a dataset batch that is no
.npz named its file twice."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app

runner = CliRunner()
X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])


def _model(path, nodes, outputs=(Y,), opset=17, inits=()):
    m = helper.make_model(helper.make_graph(nodes, "g", [X], list(outputs), initializer=list(inits)),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return m


def _one_line(args, code):
    r = runner.invoke(app, [str(a) for a in args])
    assert r.exit_code == code, r.output
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.output, r.output
    return r.stderr


def test_an_opset_that_does_not_exist_or_is_too_old(tmp_path):
    _model(tmp_path / "o0.onnx", [helper.make_node("Relu", ["x"], ["y"])], opset=0)
    assert "imports ai.onnx opset 0, which does not exist" in _one_line(["layers", tmp_path / "o0.onnx"], 1)
    m = _model(tmp_path / "o3.onnx", [helper.make_node("Relu", ["x"], ["y"])], opset=3)
    with pytest.raises(Exception, match="Could not find an implementation"):  # the oracle: onnxruntime cannot
        ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    err = _one_line(["layers", tmp_path / "o3.onnx"], 1)
    assert "the model's opset 3 is older than onnxruntime supports (7 and up)" in err and "try another device" not in err


def test_a_model_with_no_outputs(tmp_path):
    _model(tmp_path / "m.onnx", [helper.make_node("Relu", ["x"], ["r"])], outputs=())
    assert "the model has no outputs" in _one_line(["grad", tmp_path / "m.onnx"], 1)
    assert "matches no tensor" in _one_line(["layers", tmp_path / "m.onnx"], 2)  # as --all on a model of no nodes
    r = runner.invoke(app, ["layers", str(tmp_path / "m.onnx"), "--all"])
    assert r.exit_code == 0 and "1 tensor" in r.stdout, r.output
    _model(tmp_path / "none.onnx", [], outputs=(helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4]),))
    # no nodes: no selection takes anything, the model's doing (exit 1; it was 2, a usage error: QA)
    assert "the model has no nodes: nothing to probe" in _one_line(["layers", tmp_path / "none.onnx"], 1)
    assert "the model has no nodes: nothing to probe" in _one_line(["layers", tmp_path / "none.onnx", "--all"], 1)


def test_external_data_in_the_model_file_itself_is_refused(tmp_path):
    w = numpy_helper.from_array(np.ones((1, 4), np.float32), "w")
    m = _model(tmp_path / "self.onnx", [helper.make_node("Add", ["x", "w"], ["y"])], inits=[w])
    t = m.graph.initializer[0]
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "self.onnx"), ("offset", "0"), ("length", "16")):
        t.external_data.add(key=k, value=v)
    onnx.save(m, str(tmp_path / "self.onnx"))
    for cmd in ("layers", "inspect"):
        assert "external data location 'self.onnx' is the model file itself" in _one_line([cmd, tmp_path / "self.onnx"], 1)


def test_dev_null_is_said_to_be_a_device():
    assert "/dev/null: is a device, not a regular file" in _one_line(["merge-stats", "/dev/null"], 2)


def test_a_batch_that_is_no_npz_is_named_once(tmp_path):
    _model(tmp_path / "m.onnx", [helper.make_node("Relu", ["x"], ["y"])])
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "junk.npz").write_bytes(b"not a zip")
    err = _one_line(["layers", tmp_path / "m.onnx", "--inputs-dir", tmp_path / "ds"], 2)
    assert err.count("junk.npz") == 1, err


def test_a_model_whose_only_output_is_a_sequence_or_its_input(tmp_path):
    """QA: layers of a model whose only output is a sequence printed an empty table, '0 tensors', exit 0; diff of a
    model of no nodes (its output its input) said 'no tensor of A could be paired with one of B (0 unmatched in A,
    0 in B, ...)', and layers of it exited 2, a usage error, for the model's doing; inspect said 'nothing to probe'."""
    seq = helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, None)
    _model(tmp_path / "seq.onnx", [helper.make_node("SequenceConstruct", ["x", "x"], ["seq"])], outputs=(seq,))
    assert "nothing to probe: seq: a sequence, not a tensor" in _one_line(["layers", tmp_path / "seq.onnx"], 1)
    assert "nothing to probe: seq: a sequence" in _one_line(["layers", tmp_path / "seq.onnx", "--all"], 1)
    assert "nothing to probe: seq: a sequence" in _one_line(["layers", tmp_path / "seq.onnx", "--name", "seq"], 2)
    _model(tmp_path / "pass.onnx", [], outputs=(X,))
    line = _one_line(["diff", tmp_path / "pass.onnx", tmp_path / "pass.onnx"], 1)
    assert "neither model has a tensor to pair" in line and "0 unmatched" not in line, line
    onnx.save(helper.make_model(helper.make_graph([], "g", [], []), opset_imports=[helper.make_opsetid("", 17)]),
              tmp_path / "empty.onnx")
    line = _one_line(["inspect", tmp_path / "empty.onnx"], 1)
    assert "no nodes and no outputs (an empty graph)" in line and "nothing to probe" not in line, line
