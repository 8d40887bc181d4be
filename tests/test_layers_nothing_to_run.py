"""layers of a model with nothing of its graph to read back (its outputs sequences, no tensor selected: a
SplitToSequence fed to a SequenceMap) ran nothing and never loaded the model: one onnxruntime refuses (the
SequenceMap's output declared seq(float) where its body gives int64: "Type (seq(tensor(float))) of output
arg (r) ... does not match expected type (seq(tensor(int64)))") printed an empty table, exit 0 (QA
fuzzing). The runner now loads the plan's model when a plan asks for nothing, so the refusal is said as a
run says it (and the load checks, which know sequences of tensors, say it before that). The oracle: onnxruntime refuses the one model and loads the other."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from typer.testing import CliRunner

from conftest import ort_loads
from onnxprobe.cli.main import app


def _model(path, declared: int) -> str:
    body = h.make_graph([h.make_node("Shape", ["e"], ["o"])], "body", [h.make_tensor_value_info("e", T.FLOAT, None)],
                        [h.make_tensor_value_info("o", T.INT64, None)])
    g = h.make_graph([h.make_node("SplitToSequence", ["x"], ["sq"]), h.make_node("SequenceMap", ["sq"], ["r"], body=body)], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [2])], [h.make_tensor_sequence_value_info("r", declared, None)])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8), str(path))
    return str(path)



@pytest.mark.parametrize("declared,refused", [(T.FLOAT, True), (T.INT64, False)])
def test_layers_loads_a_model_it_has_nothing_to_read_from(tmp_path, declared, refused):
    path = _model(tmp_path / "m.onnx", declared)
    assert ort_loads(path) is not refused, "the oracle: onnxruntime refuses the one and loads the other"
    r = CliRunner().invoke(app, ["layers", path, "--all"])
    if refused:
        assert r.exit_code == 1, r.output
        errors = [ln for ln in r.stderr.splitlines() if ln.startswith("onnxprobe: error:")]
        # said at load since the checks know sequences of tensors (graph.declared_types), in the model's words;
        # onnxruntime's own line (seq(tensor(int64))) where a check lets it through
        assert len(errors) == 1 and ("seq(tensor(int64))" in errors[0] or "sequence of INT64" in errors[0]), r.stderr
    else:  # loaded, and run: then nothing it selects is a tensor, which is said (an empty table, exit 0, was: QA)
        assert r.exit_code == 1 and "nothing to probe: " in r.stderr and "a sequence" in r.stderr, r.output
