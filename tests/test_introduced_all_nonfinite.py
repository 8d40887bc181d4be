"""A layer that turns every value NaN where the other model's is finite: its introduced error is that NaN/Inf
mismatch (intro dB 'NaN/Inf', JSON introduced_nonfinite_mismatch = the count), as for a layer that turns some values
NaN. It read '-' (not measured) and null, and ``--sort introduced`` ranked the culprit among exact pairs."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.cli.main import app


def _model(e: float, path) -> str:
    g = h.make_graph([h.make_node("Neg", ["x"], ["t"], name="neg"), h.make_node("Pow", ["t", "e"], ["y"], name="pow"),
                      h.make_node("Mul", ["x", "x"], ["z"], name="sq")],
                     "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2, 3]), h.make_tensor_value_info("z", T.FLOAT, [2, 3])],
                     [nh.from_array(np.array(e, np.float32), "e")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return str(path)


def test_a_layer_that_makes_every_value_nan_introduces_it(tmp_path):
    a, b = _model(0.5, tmp_path / "a.onnx"), _model(2.0, tmp_path / "b.onnx")
    x = np.array([[1, 2, 3], [0.5, 4, 7]], np.float32)  # t = -x < 0 everywhere: t ** 0.5 is NaN at every position
    # the oracle: A's y, and B's Pow fed A's t (the same t), in numpy float64
    ya = np.power(-x.astype(np.float64), 0.5)
    yb_on_a = np.power(-x.astype(np.float64), 2.0)
    mismatch = int(np.sum(~np.isfinite(ya) & np.isfinite(yb_on_a)))
    assert mismatch == 6
    res = api.diff(a, b, inputs=api.InputSpec(arrays={"x": x}), selection=api.Selection(all=True),
                   config=api.RunConfig(device="cpu", cache=False))
    got = {r.pair.a.name: r for r in res.results}
    assert got["y"].introduced is not None and got["y"].introduced.nonfinite_mismatch == mismatch
    assert got["t"].introduced.exact and got["z"].introduced.exact
    np.save(tmp_path / "x.npy", x)
    r = CliRunner().invoke(app, ["diff", a, b, "--input", f"x={tmp_path / 'x.npy'}", "--all", "--json", "-", "--no-cache"])
    rows = {p["a"]: p for p in json.loads(r.stdout)["pairs"]}
    assert rows["y"]["introduced_nonfinite_mismatch"] == mismatch and rows["y"]["introduced_count"] == 0
    # worst first: the layer that put the NaN leads
    r = CliRunner().invoke(app, ["diff", a, b, "--input", f"x={tmp_path / 'x.npy'}", "--all", "--sort", "introduced",
                                 "--format", "csv", "--no-cache"])
    lines = [ln for ln in r.stdout.splitlines() if ln]
    assert lines[1].split(",")[1] == "y" and "NaN/Inf" in lines[1]


def test_the_html_report_draws_that_pair_first(tmp_path):
    import re

    a, b = _model(0.5, tmp_path / "a.onnx"), _model(2.0, tmp_path / "b.onnx")
    np.save(tmp_path / "x.npy", np.array([[1, 2, 3], [0.5, 4, 7]], np.float32))
    page = tmp_path / "r.html"
    r = CliRunner().invoke(app, ["diff", a, b, "--input", f"x={tmp_path / 'x.npy'}", "--all", "--html", str(page), "--no-cache"])
    assert r.exit_code == 1, r.output  # y fails
    hists = json.loads(re.search(r'<script[^>]*id="hists"[^>]*>(.*?)</script>', page.read_text("utf-8"), re.S).group(1))
    assert hists and "".join(part[0] for part in hists[0]["name"]) == "y"
    titles = [p["layout"]["title"]["text"] for p in hists[0]["plots"]]
    assert titles == ["values (6 NaN not drawn)", "error A − B (6 NaN not drawn)"]
