"""Two body types onnxruntime refuses at load that the load check (``graph.node_check`` through
``graph.declared_types``) let through, so that layers / diff / grad showed onnxruntime's raw error while
inspect and mark went on as if the model were fine:

- an If whose branches give one output as sequences of different element types (sequence<float> and
  sequence<int64>), declared so or only computed ("Mismatched tensor element type: inferred=int64
  declared=float");
- a Loop's carried value that its body gives back of another element type than the Loop feeds it, the body's
  input left untyped (fed INT64, a Cast to FLOAT in the body: "Input element type of 1 does not match existing
  output type of 7").

Each is refused with one line naming the node and both types. The oracle: onnxruntime refuses each model
refused here and loads each one taken (a Scan's state that changes type, among them). QA."""

from __future__ import annotations

import subprocess
import sys

import onnx
import pytest
from onnx import TensorProto as T, helper as h

from conftest import load_check_agrees_with_ort

F, I64, B = T.FLOAT, T.INT64, T.BOOL
vi = h.make_tensor_value_info


def _untyped(name: str) -> onnx.ValueInfoProto:
    return h.make_value_info(name, onnx.TypeProto())


def _seq(name: str, elem: int) -> onnx.ValueInfoProto:
    return h.make_tensor_sequence_value_info(name, elem, None) if elem else _untyped(name)


def _model(nodes, inputs, outputs) -> onnx.ModelProto:
    return h.make_model(h.make_graph(nodes, "g", inputs, outputs), opset_imports=[h.make_opsetid("", 17)], ir_version=8)


def _seq_out(declared):
    """A main-graph SequenceConstruct of a FLOAT Constant, its output declared a sequence of ``declared``."""
    c = h.make_node("Constant", [], ["c"], value=h.make_tensor("v", F, [1], [1]))
    return _model([c, h.make_node("SequenceConstruct", ["c"], ["s"], name="pack")], [], [_seq("s", declared)])


def _if(then_t=F, else_t=I64, declared=True, out=F):
    """If(c): each branch a SequenceConstruct of a Constant of its element type; ``declared``: the branches'
    outputs declared sequences of it (else untyped); ``out``: the If's output's declared sequence type."""
    def branch(name, t):
        c = h.make_node("Constant", [], [f"{name}_c"], value=h.make_tensor(f"{name}_v", t, [1], [1]))
        s = h.make_node("SequenceConstruct", [f"{name}_c"], [f"{name}_s"])
        return h.make_graph([c, s], name, [], [_seq(f"{name}_s", t if declared else 0)])

    node = h.make_node("If", ["c"], ["y"], name="choose", then_branch=branch("then", then_t), else_branch=branch("else", else_t))
    return _model([node], [vi("c", B, [])], [_seq("y", out)])


def _loop(to=F, body_out=0, out=None, body_in=0, op="Cast"):
    """Loop(n, "", v0 INT64): its body's carried input ``v_in`` (untyped unless ``body_in``) goes through
    ``op`` (Cast to ``to``, or Identity) to ``v_out`` (declared ``body_out``, untyped if 0); the Loop's output
    declared ``out`` (None: INT64, 0: untyped)."""
    body_node = h.make_node("Cast", ["v_in"], ["v_out"], to=to) if op == "Cast" else h.make_node(op, ["v_in"], ["v_out"])
    body = h.make_graph([h.make_node("Identity", ["cin"], ["cout"]), body_node], "body",
                        [vi("i", I64, []), vi("cin", B, []), vi("v_in", body_in, None) if body_in else _untyped("v_in")],
                        [vi("cout", B, []), vi("v_out", body_out, None) if body_out else _untyped("v_out")])
    out = I64 if out is None else out
    return _model([h.make_node("Loop", ["n", "", "v0"], ["v"], body=body, name="loop")],
                  [vi("n", I64, []), vi("v0", I64, [2])], [vi("v", out, None) if out else _untyped("v")])


def _scan(to):
    """Scan over xs with an untyped state fed INT64 that the body Casts to ``to``."""
    body = h.make_graph([h.make_node("Cast", ["s_in"], ["s_out"], to=to), h.make_node("Identity", ["x_in"], ["x_out"])], "body",
                        [_untyped("s_in"), vi("x_in", F, [2])], [_untyped("s_out"), vi("x_out", F, [2])])
    node = h.make_node("Scan", ["s0", "xs"], ["s", "ys"], name="scan", body=body, num_scan_inputs=1)
    return _model([node], [vi("s0", I64, [2]), vi("xs", F, [3, 2])], [_untyped("s"), vi("ys", F, [3, 2])])


REFUSED = {  # model, the words its line holds: the node and both types
    "if_sequences_declared": (lambda: _if(), ("'choose'", "sequence of FLOAT", "sequence of INT64")),
    "if_sequences_computed": (lambda: _if(declared=False, out=0), ("'choose'", "sequence of FLOAT", "sequence of INT64")),
    "if_sequences_other_way": (lambda: _if(then_t=I64, else_t=F, out=I64), ("'choose'", "sequence of FLOAT", "sequence of INT64")),
    "loop_carried_untyped_cast": (lambda: _loop(), ("'loop'", "FLOAT", "INT64")),
    "loop_carried_untyped_out_float": (lambda: _loop(body_out=F, out=F), ("'loop'", "FLOAT", "INT64")),
    "loop_carried_output_undeclared": (lambda: _loop(out=0), ("'loop'", "FLOAT", "INT64")),
    "loop_carried_input_declared": (lambda: _loop(body_in=I64, body_out=F, out=F), ("'loop'", "FLOAT", "INT64")),
    # the sequence types the walk now computes are held to declarations as tensors' are ("Type (seq(tensor(int64)))
    # of output arg (s) of node () does not match expected type (seq(tensor(float)))")
    "sequence_declared_otherwise": (lambda: _seq_out(I64), ("'pack'", "sequence of FLOAT", "sequence of INT64")),
}

TAKEN = {
    "if_sequences_alike": lambda: _if(else_t=F),
    "if_sequences_alike_computed": lambda: _if(else_t=F, declared=False, out=0),
    "loop_carried_untyped_kept": lambda: _loop(op="Identity", out=0),
    "loop_carried_untyped_cast_to_its_type": lambda: _loop(to=I64),
    "scan_state_changing_type": lambda: _scan(F),  # onnxruntime loads it (measured)
    "sequence_declared_alike": lambda: _seq_out(F),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_body_type_onnxruntime_refuses_is_refused_at_load(name):
    build, words = REFUSED[name]
    load_check_agrees_with_ort(build(), refused=words)


@pytest.mark.parametrize("name", sorted(TAKEN))
def test_a_body_onnxruntime_loads_is_taken(name):
    load_check_agrees_with_ort(TAKEN[name]())


@pytest.mark.parametrize("build", [_if, _loop], ids=["if", "loop"])
def test_every_command_refuses_it_with_the_same_line(tmp_path, build):
    path = str(tmp_path / "m.onnx")
    onnx.save(build(), path)
    lines = set()
    for args in (["inspect", path], ["layers", path, "--device", "cpu"], ["mark", path, "-o", str(tmp_path / "o.onnx")]):
        out = subprocess.run([sys.executable, "-m", "onnxprobe", *args], capture_output=True, text=True)
        errors = [ln for ln in out.stderr.splitlines() if ln.startswith("onnxprobe: error:")]
        assert out.returncode != 0 and "Traceback" not in out.stderr and len(errors) == 1, (args, out.stderr)
        lines.add(errors[0])
    assert len(lines) == 1, lines
