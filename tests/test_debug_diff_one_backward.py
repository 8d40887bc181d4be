"""The debugger's `diff` after `grad` on one model only: model a carried its loss and backward graph and b
none, so the forward tensors lost their pairs (conv1_out 'no counterpart in B', B's read as a Conv 'A has
folded its BatchNormalization into': the backward nodes read A's) and the verdict counted a's gradients as
outputs not compared. The two models are compared as loaded, with a note; `grad --model b` too compares
the gradients."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import numpy_helper
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app

runner = CliRunner()


def pairs(r) -> dict:
    d = json.loads(r)
    return {"pairs": sorted(p["a"] for p in d["pairs"]), "unmatched": len(d["unmatched_a"]) + len(d["unmatched_b"]),
            "verdict": d["verdict_reason"]}


def test_diff_after_grad_on_one_model_compares_the_models_as_loaded(tmp_path):
    m = onnx.load(str(sample_path("cnn")))
    for t in m.graph.initializer:
        if t.name == "conv2.weight":
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t) * np.float32(1.01), t.name))
    b = tmp_path / "b.onnx"
    onnx.save(m, b)
    out = []
    for lines in (["diff --json -"], ["grad", "diff --json -"]):
        r = runner.invoke(app, ["debug", str(sample_path("cnn")), str(b), "--script", "-"], input="\n".join(lines) + "\n",
                          env={"COLUMNS": "200", "NO_COLOR": "1"})
        report = r.stdout[r.stdout.index("{"):] if lines[0] == "grad" else r.stdout
        assert r.exit_code == (0 if json.loads(report)["verdict"] == "pass" else 1), r.output  # as `onnxprobe diff`
        out.append(report)
    before, after = pairs(out[0]), pairs(out[1])
    assert after == before and "conv1_out" in after["pairs"] and after["unmatched"] == 0, (before, after)
    r = runner.invoke(app, ["debug", str(sample_path("cnn")), str(b), "--script", "-"], input="grad\ndiff\n",
                      env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert "not compared" not in r.stdout and "grad --model b" in r.stdout, r.stdout
