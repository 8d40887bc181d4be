"""Two per-tensor rules for one pair, one under A's name and one under B's (--atol ca:5 --atol cb:0), are
refused as a tensor given twice is: one of them judged the pair and the other was dropped in silence,
while the criterion printed both."""

from __future__ import annotations

import numpy as np
from typer.testing import CliRunner

from conftest import matmul_relu
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import UsageError


def _model(path, mid: str, k: float):
    return matmul_relu(path, np.full((4, 4), k), mid=mid)


def test_rules_under_both_names_of_one_pair_are_refused(tmp_path):
    a, b = _model(tmp_path / "a.onnx", "ca", 1.0), _model(tmp_path / "b.onnx", "cb", 1.0)
    res = api.diff(a, b, selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False))
    assert [(r.pair.a.name, r.pair.b.name) for r in res.results if r.pair.a.name == "ca"] == [("ca", "cb")]
    r = CliRunner().invoke(app, ["diff", a, b, "--all", "--atol", "ca:5", "--atol", "cb:0"], env={"COLUMNS": "200"})
    assert r.exit_code == 2, r.output
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and "'ca'" in lines[0] and "'cb'" in lines[0] and "Traceback" not in r.output, r.output


def test_the_api_refuses_them_too(tmp_path):
    a, b = _model(tmp_path / "a.onnx", "ca", 1.0), _model(tmp_path / "b.onnx", "cb", 1.0)
    try:
        api.diff(a, b, selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False),
                 per_tensor={"ca": api.Tolerance("max_abs", atol=5), "cb": api.Tolerance("max_abs", atol=0)})
    except UsageError as e:
        assert "'ca'" in str(e) and "'cb'" in str(e)
    else:
        raise AssertionError("two rules for one pair were taken")


def test_one_rule_per_pair_still_judges_it(tmp_path):
    a, b = _model(tmp_path / "a.onnx", "ca", 1.0), _model(tmp_path / "b.onnx", "cb", 1.5)
    r = CliRunner().invoke(app, ["diff", a, b, "--all", "--metric", "max_abs", "--atol", "1e-6", "--atol", "cb:100",
                                 "--atol", "y:100"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
