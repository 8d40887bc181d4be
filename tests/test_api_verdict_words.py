"""A diff's verdict and criterion are said in the words of whoever reads them: through the API, the
default criterion's advice said '--metric, --atol, --rtol change it' (or '--metric/--min-sqnr'), diff_grad's
verdict on gradients all 0 'give real inputs (--input, --inputs)', the constant-loss verdict 'use --loss
cross-entropy --labels, ...', flags a notebook never types. The API now says its parameters; the command
line, its --json and its table keep their words (``errors.said``). QA."""

from __future__ import annotations

import json
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model, mm_relu_softmax
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.compare.criteria import GRAD_TOLERANCE
from onnxprobe.errors import cli_words
from onnxprobe.stats.metrics import Tolerance

runner = CliRunner()


def _flags(text: str) -> list[str]:
    """The command-line flags and commands a text names outside the API's "param (--flag)" form."""
    rest = re.sub(r"\w+ \((--[\w-]+(/--[\w-]+)?( [A-Z:]+)?)\)", "", text)
    return re.findall(r"(?<![\w-])--[a-z][\w-]*|`(?:onnxprobe |diff )[^`]*`", rest)


def _pair(tmp_path, scale: float = 1.0, bias: float = 0.0) -> str:
    """x @ w + bias -> Relu: ``scale`` times w."""
    vi = helper.make_tensor_value_info
    w = numpy_helper.from_array((np.arange(9, dtype=np.float32).reshape(3, 3) * 0.1 * scale).astype(np.float32), "w")
    c = numpy_helper.from_array(np.full(3, bias, np.float32), "c")
    m = make_model([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"), helper.make_node("Add", ["h", "c"], ["z"], name="add"),
                    helper.make_node("Relu", ["z"], ["y"], name="relu")],
                   [vi("x", TensorProto.FLOAT, [2, 3])], [vi("y", TensorProto.FLOAT, [2, 3])], [w, c])
    path = tmp_path / f"m_{scale}_{bias}.onnx"
    onnx.save(m, path)
    return str(path)


def test_the_default_criterion_says_the_api_parameters(tmp_path):
    a, b = _pair(tmp_path), _pair(tmp_path, scale=1.5)
    res = api.diff(a, b)
    verdict, why = res.verdict()
    assert verdict == "fail"
    for text in (res.criterion, why, repr(res)):
        assert "tolerance=Tolerance(metric=..., atol=..., rtol=...) changes it" in text, text
        assert _flags(text) == [], text
    assert "the default for float models; --metric, --atol, --rtol change it" in cli_words(res.criterion)
    assert "--metric, --atol, --rtol change it" in cli_words(why)
    assert api.report(res)["criterion"] == str(res.criterion)  # the API's report: the API's words
    assert "tolerance=Tolerance(" in api.text(res, width=200)
    r = runner.invoke(app, ["diff", a, b, "--json", "-"])
    assert r.exit_code == 1, r.output
    data = json.loads(r.stdout)
    assert data["criterion"].endswith("(the default for float models; --metric, --atol, --rtol change it)"), data["criterion"]
    assert "--metric, --atol, --rtol change it" in data["verdict_reason"] and "Tolerance(" not in data["verdict_reason"]
    r = runner.invoke(app, ["diff", a, b, "--wide"])
    assert "criterion: |a-b| <= 0.0001 + 0.001*|b| (the default for float models; --metric, --atol, --rtol change it)" in r.stdout
    assert "Tolerance(" not in r.output


def test_an_html_report_speaks_as_its_door(tmp_path):
    pytest.importorskip("plotly")
    a, b = _pair(tmp_path), _pair(tmp_path, scale=1.5)
    page = api.html(api.diff(a, b))
    assert "tolerance=Tolerance(metric=..., atol=..., rtol=...) changes it" in page and "--atol" not in page
    out = tmp_path / "r.html"
    r = runner.invoke(app, ["diff", a, b, "--html", str(out)])
    assert r.exit_code == 1, r.output
    assert "--metric, --atol, --rtol change it" in out.read_text() and "tolerance=Tolerance(" not in out.read_text()


def test_an_sqnr_default_names_min_sqnr():
    t = Tolerance("sqnr", min_sqnr=10.0, why="the default for a quantized model against a float one", default=True)
    assert t.describe() == ("SQNR >= 10 dB (the default for a quantized model against a float one; "
                            "tolerance=Tolerance(metric=..., min_sqnr=...) changes it)")
    assert cli_words(t.describe()) == "SQNR >= 10 dB (the default for a quantized model against a float one; --metric/--min-sqnr change it)"
    assert Tolerance(why="given: --atol 1").describe() == "|a-b| <= 0.0001 + 0.001*|b| (given: --atol 1)"  # not a default: no advice


def test_flags_over_a_default_keep_what_it_is_for_whatever_its_words():
    """``over`` took what a default is for by splitting its text at ';' and ':': structure now."""
    assert Tolerance.from_flags(atol=1.0).over(GRAD_TOLERANCE).describe() == (
        "|a-b| <= 1 + 0.001*|b| (--atol given, an absolute atol; the rest the default for gradients against torch autograd)")
    assert Tolerance.from_flags(rtol=0.01).over(GRAD_TOLERANCE).describe() == (
        "|a-b| <= 0.0001*max|b| + 0.01*|b| (--rtol given; the rest the default for gradients against torch autograd: atol "
        "relative to each gradient's largest |b|, at least 1e-2 of the largest weight gradient's)")
    odd = Tolerance(why="the default for a:b; c", scale="atol relative", atol_relative=True, default=True)
    assert "the rest the default for a:b; c)" in Tolerance.from_flags(atol=1.0).over(odd).describe()
    assert "the rest the default for a:b; c: atol relative)" in Tolerance.from_flags(rtol=0.5).over(odd).describe()


def test_per_tensor_criteria_say_where_the_rest_are(tmp_path):
    from onnxprobe.compare.diff import criterion_words

    per = {f"t{k}": Tolerance(atol=0.5) for k in range(6)}
    said = criterion_words(Tolerance(why="the default for float models", default=True), per)
    assert "and 2 more (the result: per_tensor)" in said and _flags(said) == [], said
    assert "and 2 more (--json: per_tensor)" in cli_words(said) and "--metric, --atol, --rtol change it" in cli_words(said)


def test_gradients_all_zero_ask_for_real_inputs_in_the_api_words(tmp_path):
    dead = _pair(tmp_path, bias=-100.0)  # every Relu off: every weight gradient 0 in both models
    verdict, why = api.diff_grad(dead, dead).verdict()
    assert verdict == "error" and "every weight gradient is 0" in why
    assert "give real inputs (an InputSpec of files or arrays)" in why and _flags(why) == [], why
    assert "give real inputs (--input, --inputs) or another loss" in cli_words(why)
    r = runner.invoke(app, ["diff", dead, dead, "--grad"])
    assert r.exit_code == 1 and "give real inputs (--input, --inputs) or another loss" in r.stderr, r.output


def test_a_constant_loss_verdict_says_what_to_use_in_the_api_words(tmp_path):
    m = mm_relu_softmax(tmp_path)  # a softmax summed: the loss is constant
    verdict, why = api.diff_grad(m, m).verdict()
    assert verdict == "error" and "the loss does not depend on the weights" in why
    assert "use a GradSpec with loss='cross-entropy' and labels" in why and _flags(why) == [], why
    assert cli_words(why).endswith("use --loss cross-entropy --labels, --loss mse --target or --output-grad")
    r = runner.invoke(app, ["diff", m, m, "--grad"])
    assert r.exit_code == 1 and "use --loss cross-entropy --labels, --loss mse --target or --output-grad" in r.stderr, r.output
    warned = [w for w in api.grad_plan(m).warnings if "is constant" in w]
    assert warned and _flags(warned[0]) == [] and "--loss cross-entropy" in cli_words(warned[0]), warned
