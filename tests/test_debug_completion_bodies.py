"""The debugger's Tab completion of node names inside If/Loop/Scan bodies: it offers each node by the path
the listings show and every command takes ('if2/then_branch/mul'), so that what Tab writes is a name the
command accepts: the bare name that sibling bodies' nodes share is refused as ambiguous."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from prompt_toolkit.document import Document

from conftest import make_model
from onnxprobe import api
from onnxprobe.session import commands as C
from onnxprobe.session.repl import make_completer
from onnxprobe.session.state import State

F = TensorProto.FLOAT


def two_ifs() -> onnx.ModelProto:
    """Two unnamed If nodes whose four branches each hold a node named 'mul'."""

    def branch(name: str, k: float) -> onnx.GraphProto:
        c = helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array([k], np.float32)))
        mul = helper.make_node("Mul", ["x", "c"], ["t"], name="mul")
        return helper.make_graph([c, mul], name, [], [helper.make_tensor_value_info("t", F, [2])])

    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "s"], ["cond"]),
             helper.make_node("If", ["cond"], ["y1"], then_branch=branch("a", 2.0), else_branch=branch("b", -1.0)),
             helper.make_node("If", ["cond"], ["y2"], then_branch=branch("c", 3.0), else_branch=branch("d", -2.0)),
             helper.make_node("Add", ["y1", "y2"], ["y"])]
    return make_model(nodes, [helper.make_tensor_value_info("x", F, [2])], [helper.make_tensor_value_info("y", F, [2])])


def test_tab_offers_body_nodes_by_the_path_every_command_takes(tmp_path):
    p = tmp_path / "ifs.onnx"
    onnx.save(two_ifs(), p)
    state = State([api.load(p)], device="cpu")
    comp = make_completer(state)

    def offers(text: str) -> list[str]:
        return [c.text for c in comp.get_completions(Document(text, len(text)), None)]

    paths = [s.path for s in state.a.index.sites if s.name == "mul"]
    assert len(paths) == 4 and all("/" in q for q in paths)
    for cmd in ("goto", "node", "probe add --range"):
        assert sorted(offers(f"{cmd} mu")) == sorted(paths), cmd  # not the one bare 'mul', which is ambiguous
    then = [q for q in paths if q.startswith(paths[1].split("/")[0] + "/then_branch/")]
    assert offers("goto " + then[0][:-1]) == then  # a path typed so far completes
    env = C.Env(state, 120)
    for q in offers("goto mu"):  # what Tab writes is taken
        assert C.execute(env, f"node {q}")
    assert offers("goto Gre") == ["Greater_1"]  # a node of the main graph: its name is its path
