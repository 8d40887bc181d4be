"""Models that declare no graph output (onnx's checker accepts them): `diff --all` compared their tensors, a pair
failed, and the verdict read "outputs pass", exit 0, though no output was compared. Now: a failing pair fails the
run (exit 1, the footer says the pairs failed and no output was compared), agreeing pairs earn no pass (an error,
exit 1). Without --all the line named the empty selection as "no node of A or B computes one"."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def no_outputs(k: float) -> onnx.ModelProto:
    g = helper.make_graph([helper.make_node("Mul", ["x", "k"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])], [],
                          [numpy_helper.from_array(np.float32(k), "k")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m, full_check=True)
    return m


@pytest.mark.parametrize("k, word", [(2.5, "pairs FAIL"), (2.0, None)])
def test_no_outputs_earn_no_outputs_pass(tmp_path, k, word):
    onnx.save(no_outputs(2.0), tmp_path / "a.onnx")
    onnx.save(no_outputs(k), tmp_path / "b.onnx")
    r = runner.invoke(app, ["diff", str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), "--all"], env=ENV)
    assert r.exit_code == 1, r.output
    assert "outputs pass" not in r.output and "Traceback" not in r.output
    assert "the models declare none" in " ".join(r.output.split())
    if word:  # the pair's failure is real: 2x against 2.5x of the same input
        assert word in r.output and "FAIL: 1 of the pairs fail the criterion" in " ".join(r.output.split())


def test_an_empty_default_selection_is_said_as_such(tmp_path):
    onnx.save(no_outputs(2.0), tmp_path / "a.onnx")
    r = runner.invoke(app, ["diff", str(tmp_path / "a.onnx"), str(tmp_path / "a.onnx")], env=ENV)
    assert r.exit_code == 1 and "the selection holds no tensor of A or B to pair" in r.output, r.output
    assert "--all, --op or --name" in r.output


def test_models_that_declare_outputs_are_not_said_to_declare_none():
    # a result whose output pairs were taken out (a caller keeping the float pairs of a QDQ model): its verdict is no
    # pass, and does not claim the models declare no output (they do)
    from conftest import SAMPLES
    from onnxprobe import api

    res = api.diff(str(SAMPLES / "mlp.onnx"), str(SAMPLES / "mlp.onnx"), selection=api.Selection(all=True))
    assert res.verdict()[0] == "pass"
    res.results[:] = [r for r in res.results if not (r.pair.a.is_output or r.pair.b.is_output)]
    assert res.results
    verdict, why = res.verdict()
    assert verdict == "error" and "no model output was compared" in why and "declare none" not in why
