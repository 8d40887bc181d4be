"""More of a diff's verdict and tables said in the words of whoever reads them: through the API, a diff that
compared nothing said "--json lists them" and "(--json: uncompared)", a pair of ``user_map`` not compared
"the pairs given in --map" (in the verdict and the table's footer), a table cut short "(see --json)", an
inspect listing "--nodes or --json lists them all": the API now names what it gives (the result's
``uncompared``, ``user_map``, ``api.report(result)``); the command line, its --json and the debugger keep
their flags (``errors.said``, ``errors.report_voice``). QA."""

from __future__ import annotations

import json
import re

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model, transposing_model
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import cli_words

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def _flags(text: str) -> list[str]:
    """The command-line flags and commands a text names outside the API's "param (--flag)" form."""
    rest = re.sub(r"\w+ \((--[\w-]+(/--[\w-]+)?( [A-Z:]+)?)\)", "", text)
    return re.findall(r"(?<![\w-])--[a-z][\w-]*|`(?:onnxprobe |diff |layers )[^`]*`", rest)


def _save(tmp_path, name: str, m: onnx.ModelProto) -> str:
    path = tmp_path / f"{name}.onnx"
    onnx.save(m, path)
    return str(path)


def _matmul(tmp_path, n: int) -> str:
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, n)).astype(np.float32), "W")
    return _save(tmp_path, f"mm{n}", make_model([helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")],
                                                [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                                                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, n])], [w]))


def test_nothing_compared_with_no_counterpart_says_where_they_are_listed():
    from onnxprobe.compare.uncompared import nothing_compared

    why = nothing_compared([{"cause": "no-counterpart", "why": "no counterpart", "in_a": 2, "in_b": 1, "pairs": 0,
                             "examples": ["t"]}])
    assert "(2 unmatched in A, 1 in B, none with a counterpart; the result: unmatched_in(side) lists them)" in why, why
    assert _flags(why) == [], why
    assert "none with a counterpart; --json lists them)" in cli_words(why)


def test_nothing_compared_by_cause_names_the_results_uncompared(tmp_path):
    a, b = _matmul(tmp_path, 3), _matmul(tmp_path, 5)
    res = api.diff(a, b)
    verdict, why = res.verdict()
    assert verdict == "error" and why.endswith("(the result: uncompared)") and _flags(why) == [], why
    assert res.uncompared and res.uncompared[0]["cause"] == "shape"  # what the words send the user to
    assert cli_words(why).endswith("(--json: uncompared)")
    r = runner.invoke(app, ["diff", a, b, "--json", "-"], env=ENV)
    assert r.exit_code == 1 and json.loads(r.stdout)["verdict_reason"].endswith("(--json: uncompared)"), r.output


def test_a_mapped_pair_not_compared_is_said_in_the_api_words(tmp_path):
    m = _save(tmp_path, "m", transposing_model())
    res = api.diff(m, m, user_map={"r": "t"}, inputs=api.InputSpec(shapes={"x": (512, 256)}))
    verdict, why = res.verdict()
    assert verdict == "error" and "1 of the pairs given in user_map (--map) could not be compared: 'r' -> 't'" in why, why
    assert _flags(why) == [], why
    assert "1 of the pairs given in --map could not be compared: 'r' -> 't'" in cli_words(why)
    table = api.text(res, width=200)
    assert "outputs pass, but 1 pair(s) given in user_map (--map) not compared" in table, table
    assert api.report(res)["verdict_reason"] == str(why)
    (tmp_path / "map.json").write_text(json.dumps({"r": "t"}))
    r = runner.invoke(app, ["diff", m, m, "--map", str(tmp_path / "map.json"), "--shape", "x=512,256"], env=ENV)
    assert r.exit_code == 1, r.output
    assert "outputs pass, but 1 pair(s) given in --map not compared" in r.stdout and "user_map" not in r.output, r.output


def test_a_namesake_paired_away_by_the_map_says_user_map(tmp_path):
    """y1 of A and y1 of B: the map pairs A's y1 with B's y2, so B's y1 is left alone, and an output not compared."""
    m = _save(tmp_path, "m", transposing_model())
    res = api.diff(m, m, user_map={"y1": "y2"}, fuse=False)
    reasons = [u.reason for u in res.matching.unmatched_b if u.obs.name == "y1"]
    assert reasons and reasons[0].endswith("is paired with 'y2' by user_map (--map)"), reasons
    assert cli_words(reasons[0]).endswith("is paired with 'y2' by --map")
    verdict, why = res.verdict()
    assert "by user_map (--map)" in why and _flags(why) == [], why
    assert "by --map" in cli_words(why)


def _chain(tmp_path, name: str, n_extra: int) -> str:
    """x -> Relu -> r, then ``n_extra`` Neg nodes the other model lacks (unmatched in B), -> y."""
    vi = helper.make_tensor_value_info
    nodes, prev = [helper.make_node("Relu", ["x"], ["r"], name="relu")], "r"
    for i in range(n_extra):
        nodes.append(helper.make_node("Neg", [prev], [f"neg{i}"], name=f"neg{i}"))
        prev = f"neg{i}"
    nodes.append(helper.make_node("Identity", [prev], ["y"], name="out"))
    return _save(tmp_path, name, make_model(nodes, [vi("x", TensorProto.FLOAT, [2, 4])], [vi("y", TensorProto.FLOAT, [2, 4])]))


def test_a_table_cut_short_sends_the_api_to_its_report(tmp_path):
    a, b = _chain(tmp_path, "a", 0), _chain(tmp_path, "b", 6)
    table = api.text(api.diff(a, b, selection=api.Selection(all=True)), width=200)
    assert "more (see api.report(result))" in table and "--json" not in table, table
    r = runner.invoke(app, ["diff", a, b, "--all"], env=ENV)
    assert "more (see --json)" in r.stdout and "api.report" not in r.stdout, r.output


def test_an_inspect_listing_cut_short_names_the_results_field(tmp_path):
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Mystery", ["x"], [f"u{i}"], name=f"n{i}", domain="my.domain") for i in range(15)]
    nodes.append(helper.make_node("Identity", ["x"], ["y"], name="out"))
    m = make_model(nodes, [vi("x", TensorProto.FLOAT, [2])], [vi("y", TensorProto.FLOAT, [2])])
    m.opset_import.append(helper.make_opsetid("my.domain", 1))
    path = _save(tmp_path, "custom", m)
    res = api.inspect(path)
    assert len(res.summary.uninferred) == 15
    table = api.text(res, width=200)
    assert "more (the result's summary.uninferred lists them all)" in table and "--nodes" not in table, table
    r = runner.invoke(app, ["inspect", path], env=ENV)
    assert r.exit_code == 0 and "more (--nodes or --json lists them all)" in r.stdout, r.output
