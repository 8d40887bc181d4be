"""`grad --check` passed (exit 0, "1 ok") when the only gradient it judged was dL/dy of the loss's own input y:
that gradient is the loss's formula (1 for a sum), so finite differences agree with it whatever the model's
backward pass computes. PP-OCRv4 det showed it: 193 gradients not resolvable, the output's "ok", exit 0. A check
whose only verdicts are of the loss's own input judged nothing of the model: no pass, as "checked nothing" is."""

from __future__ import annotations

import re

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app


def _model(path):
    w = numpy_helper.from_array(np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32), "W")
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"), helper.make_node("Tanh", ["h"], ["y"], name="tanh")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_a_check_of_the_loss_input_alone_is_no_pass(tmp_path):
    page = tmp_path / "g.html"
    r = CliRunner().invoke(app, ["grad", _model(tmp_path / "m.onnx"), "--wrt", "y", "--check", "--device", "cpu",
                                 "--html", str(page)])
    assert r.exit_code == 1, r.output
    assert "checked nothing" in r.stderr and "'y'" in r.stderr and "Traceback" not in r.output, r.stderr
    facts = dict((k, (c, t)) for k, c, t in re.findall(r"<dt>([^<]*)</dt><dd class=\"([^\"]*)\">([^<]*)</dd>",
                                                       page.read_text()))
    assert facts["verdict"][0] == "fail", facts["verdict"]


def test_a_check_that_judges_the_model_still_passes(tmp_path):
    r = CliRunner().invoke(app, ["grad", _model(tmp_path / "m.onnx"), "--wrt", "y", "--wrt", "W", "--check", "--device", "cpu"])
    assert r.exit_code == 0, r.output


def test_the_loss_input_alone_fails_with_a_mean_loss_too(tmp_path):
    r = CliRunner().invoke(app, ["grad", _model(tmp_path / "m.onnx"), "--wrt", "y", "--check", "--loss", "mean",
                                 "--device", "cpu"])
    assert r.exit_code == 1 and "checked nothing" in r.stderr, r.output
