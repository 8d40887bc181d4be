"""Weights of the types numpy lacks (float8, int4, uint4; bfloat16 already was) are read back widened to float32,
as the README says of every such tensor: `layers --save` and the debugger's `save` wrote a float8_e4m3fn, int4 or
uint4 weight as its raw bytes (numpy void '|V1') and a float8_e5m2 one as a '<f1' .npy that np.load refuses;
those weights had no statistics (e5m2's had), `where --weights` passed them by and `show` of an e5m2 weight was
an internal error. A string tensor saved to .npy by the debugger was an internal error (an object array)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app

# the values each type holds exactly (the oracle: what they stand for, written by hand)
CASES = {"float8_e4m3fn": (TP.FLOAT8E4M3FN, [448.0, -0.3125, 0.001953125, 2.0]),
         "float8_e5m2": (TP.FLOAT8E5M2, [57344.0, -0.3125, 2.0 ** -16, 2.0]),
         "int4": (TP.INT4, [-8, 7, -1, 0]), "uint4": (TP.UINT4, [15, 0, 8, 1]),
         "bfloat16": (TP.BFLOAT16, [3.0, -0.333984375, 256.0, 0.5])}


def _model(path, elem, values):
    w = h.make_tensor("W", elem, [4], values)
    g = h.make_graph([h.make_node("Cast", ["W"], ["y"], to=TP.FLOAT, name="c"), h.make_node("Add", ["x", "y"], ["z"], name="add")],
                     "g", [h.make_tensor_value_info("x", TP.FLOAT, [4])], [h.make_tensor_value_info("z", TP.FLOAT, [4])], [w])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 21)], ir_version=10), path)
    return str(path)


@pytest.mark.parametrize("name", list(CASES))
def test_a_narrow_weight_is_saved_widened_and_has_statistics(tmp_path, name):
    elem, values = CASES[name]
    m = _model(tmp_path / "m.onnx", elem, values)
    want = np.array(values, np.float64)
    r = CliRunner().invoke(app, ["layers", m, "--all", "--include-constants", "--save", str(tmp_path / "s.npz"),
                                 "--json", str(tmp_path / "r.json")])
    assert r.exit_code == 0, r.output
    with np.load(tmp_path / "s.npz", allow_pickle=False) as z:
        assert z["W"].dtype == np.float32 and z["W"].tolist() == values
    row = next(t for t in json.loads((tmp_path / "r.json").read_text())["tensors"] if t["name"] == "W")
    assert row["dtype"] == name and row["status"] == "ran", row
    assert (row["min"], row["max"]) == (want.min(), want.max())
    assert row["mean"] == pytest.approx(want.mean(), rel=1e-12, abs=1e-12)
    assert row["std"] == pytest.approx(want.std(), rel=1e-9)
    script = tmp_path / "s.txt"
    script.write_text(f"show W\nwhere absmax>{np.abs(want).max() / 2} --weights\nsave W {tmp_path / 'w.npy'}\n"
                      f"save W {tmp_path / 'w.pb'}\n")
    r = CliRunner().invoke(app, ["debug", m, "--script", str(script)])
    assert r.exit_code == 0, r.output
    assert "first tensor where" in r.stdout and ": W (" in r.stdout, r.stdout
    assert np.load(tmp_path / "w.npy", allow_pickle=False).tolist() == values
    t = onnx.load_tensor(str(tmp_path / "w.pb"))
    assert t.data_type == elem and numpy_helper.to_array(t).astype(np.float64).tolist() == values


def test_the_debugger_saves_a_string_tensor_as_numpy_unicode(tmp_path):
    s = lambda n: h.make_tensor_value_info(n, TP.STRING, [2])  # noqa: E731
    g = h.make_graph([h.make_node("Identity", ["x"], ["y"], name="i")], "g", [s("x")], [s("y")])
    m = tmp_path / "s.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), m)
    np.save(tmp_path / "x.npy", np.array(["a", "héllo"]))
    script = tmp_path / "s.txt"
    script.write_text(f"run\nsave y {tmp_path / 'y.npy'}\nsave y {tmp_path / 'y.pb'}\n")
    r = CliRunner().invoke(app, ["debug", str(m), "--input", f"x={tmp_path / 'x.npy'}", "--script", str(script)])
    assert r.exit_code == 0, r.output
    assert np.load(tmp_path / "y.npy", allow_pickle=False).tolist() == ["a", "héllo"]
    assert "saved y [2] string to" in r.stdout and "object" not in r.stdout, r.stdout
    assert onnx.load_tensor(str(tmp_path / "y.pb")).data_type == TP.STRING
