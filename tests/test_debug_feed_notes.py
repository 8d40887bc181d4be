"""The debugger's notes on its inputs (``session.inputs.session_notes``): the guessed dimensions said once,
in the session's words, and every other note of the feeds kept, whatever the input's name holds. They
were told apart by the wording of the notes ('input NAME:'), so a name that prints escaped (a backslash)
had its guess said twice, and a note about a defaulted input that was no guess (not in the .npz given,
so random) was dropped."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper
from typer.testing import CliRunner

from conftest import make_model, relu_n4
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.session.inputs import session_notes

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def _relu(path, name: str) -> str:
    return relu_n4(path, name)


def _add(path) -> str:
    """y = x + z, x [N, 4] and z [M, 4]: z's M is a dimension of its own."""
    vi = helper.make_tensor_value_info
    onnx.save(make_model([helper.make_node("Add", ["x", "z"], ["y"], name="add")],
                         [vi("x", TensorProto.FLOAT, ["N", 4]), vi("z", TensorProto.FLOAT, ["M", 4])],
                         [vi("y", TensorProto.FLOAT, ["N", 4])]), str(path))
    return str(path)


def _debug(tmp_path, args: list[str], lines=("inputs",)):
    f = tmp_path / "s.txt"
    f.write_text("\n".join(lines) + "\n")
    r = runner.invoke(app, ["debug", *args, "--script", str(f)], env=ENV)
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output
    return r


def test_a_guessed_dimension_of_an_input_named_with_a_backslash_is_said_once(tmp_path):
    path = _relu(tmp_path / "m.onnx", "in\\put")
    notes = session_notes(api.feeds(api.load(path)))
    assert len(notes) == 1 and "dimension 'N' unknown, set to 1" in notes[0], notes
    r = _debug(tmp_path, [path])
    said = [ln for ln in r.output.splitlines() if "'N'" in ln]
    assert len(said) == 2, r.output  # once at the start (stderr), once under the `inputs` table (stdout)
    assert all("dimension 'N' unknown, set to 1" in ln for ln in said), said


def test_a_note_on_a_defaulted_input_that_is_no_guess_is_kept(tmp_path):
    path = _add(tmp_path / "m.onnx")
    np.savez(tmp_path / "x.npz", x=np.ones((2, 4), np.float32))
    fs = api.feeds(api.load(path), api.InputSpec(arrays={"x": np.ones((2, 4), np.float32)}))
    assert fs.defaulted == {"z": ["'M'"]}
    notes = session_notes(fs)
    assert any("not in" in n and "seeded random data" in n for n in notes), notes
    assert sum("'M'" in n for n in notes) == 1, notes
    r = _debug(tmp_path, [path, "--inputs", str(tmp_path / "x.npz")])
    assert "input z: not in" in r.stderr and "so seeded random data" in r.stderr, r.stderr
    assert "input z: not in" in r.stdout, r.stdout  # under the `inputs` table


def test_the_input_command_says_the_notes_of_its_input_once_as_names_are_listed(tmp_path):
    path = _add(tmp_path / "m.onnx")
    np.savez(tmp_path / "x.npz", x=np.ones((2, 4), np.float32))
    out = _debug(tmp_path, [path, "--inputs", str(tmp_path / "x.npz")], ["input z"]).stdout
    assert out.count("input z: not in") == 1 and out.count("dimension 'M' unknown, set to 1") == 1, out
    out = _debug(tmp_path, [_relu(tmp_path / "b.onnx", "in\\put")], ["input in\\put"]).stdout
    assert out.count("'N'") == 1 and "note: input in\\\\put: dimension 'N' unknown" in out, out  # as `inputs` lists it


def _two_dims(path) -> str:
    """y = Relu(x), x ['batch', 'seq', 4] and r of no rank known (Identity): two guessed dimensions, one guessed rank."""
    vi = helper.make_tensor_value_info
    r = helper.ValueInfoProto()
    r.name, r.type.tensor_type.elem_type = "r", TensorProto.FLOAT
    onnx.save(make_model([helper.make_node("Relu", ["x"], ["y"], name="relu"), helper.make_node("Identity", ["r"], ["s"], name="id")],
                         [vi("x", TensorProto.FLOAT, ["batch", "seq", 4]), r],
                         [vi("y", TensorProto.FLOAT, ["batch", "seq", 4]), vi("s", TensorProto.FLOAT, None)]), str(path))
    return str(path)


def test_a_guessed_dimension_is_said_in_one_wording_by_layers_and_debug(tmp_path):
    """`layers` said "input x: dimensions 'batch' and 'seq' unknown, set to 1 (use --shape x=...)" and `debug`
    "input x: unknown dimensions 'batch', 'seq' set to 1 (input x random ...)": one note, one wording; only
    what fixes it is each reader's (the debugger's own command, and --shape at its start)."""
    import json
    import re

    path = _two_dims(tmp_path / "m.onnx")
    r = runner.invoke(app, ["layers", path, "--json", str(tmp_path / "l.json")], env=ENV)
    assert r.exit_code == 0, r.output
    layers = [n for n in json.loads((tmp_path / "l.json").read_text())["notes"] if "unknown" in n]
    debug = [ln.removeprefix("note: ").removeprefix("onnxprobe: note: ") for ln in _debug(tmp_path, [path]).stderr.splitlines()
             if "unknown" in ln]
    said = sorted(re.sub(r" \(.*\)$", "", n) for n in layers)
    assert said == sorted(re.sub(r" \(.*\)$", "", n.split("note: ")[-1]) for n in debug), (layers, debug)
    assert "input x: dimensions 'batch' and 'seq' unknown, set to 1" in said, said
    assert any(n.startswith("input r: rank unknown") for n in said), said
    assert all("input x random DIMS" in n or "input r random DIMS" in n for n in debug), debug


def test_an_input_made_random_is_not_said_to_be_missing_from_the_file(tmp_path):
    """`inputs ab.npz` then `input x random 2x4`: the note said 'input x: not in ab.npz, so seeded random data', which
    ab.npz holds; an input the file really lacks is still said to be random for that reason."""
    path = _add(tmp_path / "m.onnx")
    np.savez(tmp_path / "xz.npz", x=np.ones((2, 4), np.float32), z=np.ones((2, 4), np.float32))
    np.savez(tmp_path / "z.npz", z=np.ones((2, 4), np.float32))
    r = _debug(tmp_path, [path], [f"inputs {tmp_path / 'xz.npz'}", "input x random 2x4", "run"])
    assert "not in" not in r.output and "x ← random" in r.output, r.output
    r = _debug(tmp_path, [path], [f"inputs {tmp_path / 'z.npz'}", "run"])
    assert "input x: not in" in r.output and "so seeded random data" in r.output, r.output


def test_save_all_leaves_out_an_output_that_is_no_tensor(tmp_path):
    """A classifier's ZipMap output (a sequence of maps) is a default probe of the debugger: `save all` wrote nothing
    ('output_probability: no value (a tensor whose type is unknown)', exit 1) where layers --save skips it with a note;
    `show` said the same. It is left out, and said to be a sequence."""
    seq = helper.make_sequence_type_proto(helper.make_map_type_proto(TensorProto.INT64, helper.make_tensor_type_proto(TensorProto.FLOAT, [])))
    nodes = [helper.make_node("Softmax", ["x"], ["p"], name="sm", axis=1),
             helper.make_node("ArgMax", ["x"], ["label"], name="am", axis=1, keepdims=0),
             helper.make_node("ZipMap", ["p"], ["probs"], name="zm", domain="ai.onnx.ml", classlabels_int64s=[0, 1, 2])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("label", TensorProto.INT64, [2]), helper.make_value_info("probs", seq)])
    path = tmp_path / "zm.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 1)]), path)
    out = tmp_path / "all.npz"
    r = _debug(tmp_path, [str(path)], ["run", f"save all {out}"])
    assert "probs left out: a sequence, not a tensor" in r.output, r.output
    assert sorted(np.load(out).files) == ["label"]
    f = tmp_path / "s2.txt"
    f.write_text("show probs\n")
    r = runner.invoke(app, ["debug", str(path), "--script", str(f)], env=ENV)
    assert r.exit_code == 1 and "probs: a sequence, not a tensor" in r.stderr and "Traceback" not in r.output, r.output
