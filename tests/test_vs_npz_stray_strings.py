"""diff --vs-npz: an entry of strings under a name the model does not hold is listed as unmatched in B, with
why, as every other entry of a name the model does not hold is (README: "listed and counted whatever the
selection"; "arrays of strings are not compared: unmatched, with that reason"). It was dropped silently."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
from typer.testing import CliRunner

from conftest import sample_feeds, sample_path
from onnxprobe.cli.main import app

runner = CliRunner()


def _saved(tmp_path, **extra):
    x = sample_feeds("mlp")["x"]
    m = onnx.load(str(sample_path("mlp")))
    m.graph.output.append(helper.make_tensor_value_info("fc1_out", TensorProto.FLOAT, None))
    fc1, y = ReferenceEvaluator(m).run(["fc1_out", "y"], {"x": x})  # the oracle: onnx.reference
    path = tmp_path / "vs.npz"
    np.savez(path, x=x, fc1_out=fc1, y=y, **extra)
    return str(path)


def test_a_saved_array_of_strings_the_model_does_not_hold_is_listed_with_its_reason(tmp_path):
    npz = _saved(tmp_path, labels=np.array(["cat", "dog"]), extra=np.zeros(3, np.float32))
    for selection in ([], ["--all"]):
        r = runner.invoke(app, ["diff", str(sample_path("mlp")), "--vs-npz", npz, "--json", "-", *selection])
        assert r.exit_code == 0, r.output
        d = json.loads(r.stdout)
        names = {u["name"]: u for u in d["unmatched_b"]}
        assert "extra" in names, d["unmatched_b"]  # a number array of a name the model does not hold: listed
        assert "labels" in names, d["unmatched_b"]  # so is one of strings, saying why it is not compared
        assert "not numbers" in names["labels"]["reason"] and names["labels"]["cause"] == "not-observable", names
        assert d["compared"] >= 1 and all(p["passed"] for p in d["pairs"]), d["pairs"]


def test_the_table_counts_it_and_a_name_selection_leaves_it_out(tmp_path):
    npz = _saved(tmp_path, labels=np.array([b"a", b"b"]))
    r = runner.invoke(app, ["diff", str(sample_path("mlp")), "--vs-npz", npz], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "1 in B" in r.output and "labels (saved as" in r.output, r.output
    r = runner.invoke(app, ["diff", str(sample_path("mlp")), "--vs-npz", npz, "--name", "fc1_out"], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "0 in B" in r.output and "labels" not in r.output, r.output
