"""A cut that must be swapped, or that ends at a tensor no cut input computes, is advised in the words of
whoever asked: through the API ``cut_inputs``/``cut_outputs`` and a call's arguments to paste, on the command
line ``--from``/``--to`` and flags to paste (``graph.extract``'s messages, one check for both). The API's
message named the command line's flags. QA."""

from __future__ import annotations

import re

import onnx
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

from conftest import mm_relu_softmax
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import UsageError

runner = CliRunner()


def _command_line_words(message: str) -> list[str]:
    """The flags a message names outside the API's "param (--flag)" form."""
    rest = re.sub(r"\w+ \((--[\w-]+(/--[\w-]+)?( [A-Z:]+)?)\)", "", message)
    return re.findall(r"(?<![\w-])--[a-z][\w-]*|`onnxprobe [^`]*`", rest)


def _two_branches(folder) -> str:
    """x -> Relu -> a and z -> Neg -> b: b is computed without x."""
    vi = helper.make_tensor_value_info
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["z"], ["b"])], "g",
                          [vi("x", TensorProto.FLOAT, [2]), vi("z", TensorProto.FLOAT, [2])],
                          [vi("a", TensorProto.FLOAT, [2]), vi("b", TensorProto.FLOAT, [2])])
    path = str(folder / "two.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


# (model, cut_inputs, cut_outputs, what the API's message says, what the command line's says)
CASES = {
    "swap": ("mm", ["r"], ["h"], "swap them: cut_inputs=['h'], cut_outputs=['r']", "swap them: --from h --to r"),
    "swap, one output kept": ("mm", ["r"], ["h", "y"], "swap them: cut_inputs=['h'], cut_outputs=['r', 'y']",
                              "swap them: --from h --to r,y"),
    "computed without": ("two", ["x"], ["b"], "give a cut_inputs (--from) it is computed from, e.g. cut_inputs=['z']",
                         "give a --from it is computed from, e.g. --from z"),
    "model output computed without": ("two", ["x"], None, "give cut_outputs (--to) the outputs you want, e.g. cut_outputs=['a']",
                                      "give --to the outputs you want, e.g. --to a"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_wrong_cut_is_advised_in_the_callers_words(case, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    which, ins, outs, said, cli_said = CASES[case]
    model = mm_relu_softmax(tmp_path) if which == "mm" else _two_branches(tmp_path)
    with pytest.raises(UsageError) as e:
        api.extract(model, "unused.onnx", cut_inputs=ins, cut_outputs=outs)
    message = str(e.value)
    assert said in message, message
    assert _command_line_words(message) == [], message
    assert cli_said in (e.value.cli_message or message), e.value.cli_message
    args = ["extract", model, "-o", str(tmp_path / "out.onnx"), "--from", ",".join(ins)] + (["--to", ",".join(outs)] if outs else [])
    r = runner.invoke(app, args)
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.output, r.output
    assert cli_said in lines[0], lines[0]
