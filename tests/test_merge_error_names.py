"""An onnxruntime error in diff's one run of both models names the model's node: "onnxprobe.a/X" and
"onnxprobe.b/X" are model A's and model B's own node X in the merged graph (graph.merge), and
"onnxprobe.cone3/onnxprobe.b/X" is B's node X run again on A's tensors (compare.fused). The message
said of every node named "onnxprobe." that onnxprobe adds it for this model (its backward graph, loss
or statistics), which sent the user looking for a bug of onnxprobe's in a node of their own model. The
nodes onnxprobe does add ("onnxprobe/ReduceSum/...", "onnxprobe.pair3.d") keep that wording."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T, helper, numpy_helper

from onnxprobe.errors import ExecutionError, SessionError
from onnxprobe.graph.merge import cone_node_name, cone_prefix, origin, side_by_side
from onnxprobe.runtime.ort import create_session, explain_ort_error, run_bound

ADDS = "which onnxprobe adds"


def _model(nodes, inits=()) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, ["n", 64])],
                          [helper.make_tensor_value_info("y", T.FLOAT, None)], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _reshaping(rows: int) -> onnx.ModelProto:
    return _model([helper.make_node("Reshape", ["x", "shape"], ["r"], name="to_rows"),
                   helper.make_node("Relu", ["r"], ["y"], name="relu")],
                  [numpy_helper.from_array(np.array([rows, 64], np.int64), "shape")])


def test_a_run_that_fails_in_b_names_b_node():
    # B's Reshape cannot take this input: the merged graph's run fails at B's own node "to_rows"
    merged, _, bn = side_by_side(_reshaping(8), _reshaping(7), [])
    s = create_session(merged)
    with pytest.raises(ExecutionError) as e:
        run_bound(s, {"x": np.ones((8, 64), np.float32)}, [bn["y"]])
    msg = str(e.value)
    assert "node 'to_rows' of model B" in msg and ADDS not in msg, msg
    assert "onnxprobe.b/to_rows" not in msg.split(":", 1)[0]


def test_a_kernel_b_lacks_names_b_node():
    # onnxruntime has no CPU Abs for bfloat16: the merged graph's session fails at B's node "abs"
    a = _model([helper.make_node("Abs", ["x"], ["y"], name="abs")])
    b = _model([helper.make_node("Cast", ["x"], ["h"], to=T.BFLOAT16, name="to_bf16"),
                helper.make_node("Abs", ["h"], ["ah"], name="abs"),
                helper.make_node("Cast", ["ah"], ["y"], to=T.FLOAT, name="to_f32")])
    merged, _, _ = side_by_side(a, b, [])
    with pytest.raises(SessionError) as e:
        create_session(merged)
    msg = str(e.value)
    assert "no cpu kernel for op Abs" in msg and "node 'abs' of model B" in msg and ADDS not in msg, msg
    # the op's version onnxruntime names (Abs-13 for this opset-17 model), not said as the model's opset
    assert "op Abs (version 13)" in msg and "opset 13" not in msg, msg


RUNNING = ("Non-zero status code returned while running {op} node. Name:'{name}' Status Message: "
           "/onnxruntime/core/providers/cpu/tensor/reshape_helper.h:47 The input tensor cannot be reshaped")
NO_KERNEL = "Could not find an implementation for {op}(13) node with name '{name}'"


@pytest.mark.parametrize("name, says", [
    ("onnxprobe.a/to_rows", "node 'to_rows' of model A"),
    ("onnxprobe.b/to_rows", "node 'to_rows' of model B"),
    (cone_prefix(3) + "onnxprobe.b/to_rows", "node 'to_rows' of model B, fed with model A's tensors"),
])
@pytest.mark.parametrize("template", [RUNNING, NO_KERNEL])
def test_model_nodes_are_named_as_the_model_has_them(name, says, template):
    msg = explain_ort_error(template.format(op="Reshape", name=name))
    assert says in msg and ADDS not in msg, msg


def test_an_unnamed_node_of_a_cone():
    # the merge leaves unnamed nodes unnamed; their copies in a cone are named by op and output
    n = helper.make_node("Relu", ["onnxprobe.b/r"], ["onnxprobe.b/y"])
    name = cone_node_name(cone_prefix(2), n)
    assert origin(name) is not None and origin(name).side == "B" and origin(name).cone
    msg = explain_ort_error(RUNNING.format(op="Relu", name=name))
    assert "model B's unnamed Relu node that writes 'y', fed with model A's tensors" in msg and ADDS not in msg, msg


@pytest.mark.parametrize("name", ["onnxprobe/ReduceSum/onnxprobe.b/y", "onnxprobe.pair3.d", "onnxprobe.intro3.sum",
                                  cone_prefix(3) + "onnxprobe.a/x.cast"])
@pytest.mark.parametrize("template", [RUNNING, NO_KERNEL])
def test_nodes_onnxprobe_adds_keep_their_wording(name, template):
    assert origin(name) is None
    msg = explain_ort_error(template.format(op="ReduceSum", name=name))
    assert ADDS in msg and "of model" not in msg, msg
