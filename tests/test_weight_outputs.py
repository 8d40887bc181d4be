"""A graph output that is a dense weight itself: an initializer listed as a graph output (QA). ``diff`` never
compared it, so two models whose output weight differs read "outputs pass"; ``layers`` left it out of the
model's outputs it probes by default (a Constant's output given as an output was in both). Each now treats it
as the output it is. Oracle: the weights themselves, numpy float64, onnxruntime's outputs.
A diff's load notes (a weight held twice) say which model they are about: "A: ", "B: " or "A and B: "."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as H
from onnx import numpy_helper
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.cli.main import app

runner = CliRunner()
X = np.array([[1.0, -2.0, 0.5]], np.float32)
W = np.eye(3, dtype=np.float32)


def model(path, w: np.ndarray, kind: str = "init", dup: bool = False, reads: bool = False) -> str:
    """y = Relu(x), which reads no weight (``reads``: y = x W), and the weight W given as an output: an
    initializer ("init") or a Constant's value ("const"); ``dup``: W held twice (onnxruntime runs the last: W)."""
    nodes = [H.make_node("MatMul", ["x", "W"], ["y"], name="mm") if reads else H.make_node("Relu", ["x"], ["y"], name="r")]
    inits = [numpy_helper.from_array(w, "W")]
    if kind == "const":
        nodes.insert(0, H.make_node("Constant", [], ["W"], name="c", value=numpy_helper.from_array(w, "W")))
        inits = []
    if dup:
        inits.insert(0, numpy_helper.from_array(2 * w, "W"))
    g = H.make_graph(nodes, "g", [H.make_tensor_value_info("x", T.FLOAT, [1, 3])],
                     [H.make_tensor_value_info("y", T.FLOAT, [1, 3]), H.make_tensor_value_info("W", T.FLOAT, [3, 3])], inits)
    m = H.make_model(g, opset_imports=[H.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


def other_w() -> np.ndarray:
    w = W.copy()
    w[0, 1] = 5
    return w


@pytest.mark.parametrize("kind", ["init", "const"])
def test_diff_compares_an_output_weight(tmp_path, kind):
    a, b = model(tmp_path / "a.onnx", W, kind), model(tmp_path / "b.onnx", other_w(), kind)
    res = api.diff(a, b, inputs={"x": X})
    assert res.verdict()[0] == "fail", res.verdict()
    got = {r.pair.a.name: r for r in res.results}
    assert set(got) == {"y", "W"}
    assert got["W"].passed is False and got["y"].passed is True
    want = np.abs(W.astype(np.float64) - other_w()).max()
    assert got["W"].metrics.max_abs == pytest.approx(want)
    assert got["W"].pair.a.is_output


@pytest.mark.parametrize("fuse", [True, False])
def test_diff_of_equal_output_weights_passes_them(tmp_path, fuse):
    a, b = model(tmp_path / "a.onnx", W), model(tmp_path / "b.onnx", W)
    res = api.diff(a, b, inputs={"x": X}, fuse=fuse)
    assert res.verdict()[0] == "pass"
    got = {r.pair.a.name: r for r in res.results}
    assert got["W"].passed is True and got["W"].metrics.exact


def test_diff_cli_fails_on_the_output_weight(tmp_path):
    a, b = model(tmp_path / "a.onnx", W), model(tmp_path / "b.onnx", other_w())
    r = runner.invoke(app, ["diff", a, b, "--json", "-"])
    assert r.exit_code == 1, r.output
    d = json.loads(r.stdout)
    assert {p["a"] for p in d["pairs"] if p["passed"] is False} == {"W"}, d["pairs"]


def test_diff_vs_reference_compares_it(tmp_path):
    a = model(tmp_path / "a.onnx", W)
    res = api.diff(a, vs_reference=True, inputs={"x": X})
    got = {r.pair.a.name: r for r in res.results}
    assert got["W"].passed is True and got["W"].metrics.exact


@pytest.mark.parametrize("kind", ["init", "const"])
def test_layers_probes_it_as_an_output(tmp_path, kind):
    p = model(tmp_path / "m.onnx", other_w(), kind)
    np.save(tmp_path / "x.npy", X)
    r = runner.invoke(app, ["layers", p, "--input", f"x={tmp_path / 'x.npy'}", "--json", "-"])
    assert r.exit_code == 0, r.output
    rows = {t["name"]: t for t in json.loads(r.stdout)["tensors"]}
    want = ort.InferenceSession(p, providers=["CPUExecutionProvider"]).run(["W"], {"x": X})[0].astype(np.float64)
    assert rows["W"]["max"] == want.max() and rows["W"]["mean"] == pytest.approx(want.mean())
    assert set(rows) == {"y", "W"}


def test_diff_names_the_side_of_each_load_note(tmp_path):
    """A's, B's or both models' load notes ("holds initializers of one name more than once") say which."""
    plain, dup = model(tmp_path / "a.onnx", W), model(tmp_path / "d.onnx", W, dup=True)
    for a, b, side in ((dup, plain, "A"), (plain, dup, "B"), (dup, dup, "A and B")):
        notes = [n for n in api.diff(a, b, inputs={"x": X}).notes if "more than once" in n]
        assert len(notes) == 1 and notes[0].startswith(f"{side}: "), (side, notes)
    plain, dup = model(tmp_path / "a.onnx", W, reads=True), model(tmp_path / "d.onnx", W, dup=True, reads=True)
    r = runner.invoke(app, ["diff", plain, dup, "--grad"])
    assert r.exit_code == 0, r.output
    assert sum("more than once" in line for line in r.stderr.splitlines()) == 1, r.stderr
    assert "note: B: " in r.stderr, r.stderr


def test_dataset_diff_compares_it_and_names_the_side_of_each_load_note(tmp_path):
    for i in range(2):
        np.savez(tmp_path / f"s{i}.npz", x=(X * (i + 1)).astype(np.float32))
    a, b = model(tmp_path / "a.onnx", W, dup=True), model(tmp_path / "b.onnx", other_w())
    res = api.diff_dataset(a, b, str(tmp_path))
    got = {r.pair.a.name: r for r in res.results}
    assert got["W"].passed is False and got["y"].passed is True
    assert [n for n in res.notes if "more than once" in n][0].startswith("A: "), res.notes
