"""The advice an error gives is said in the words of whoever called: from the API, a message named the
command line's flags and commands in its hints ("`onnxprobe inspect --nodes MODEL` lists the tensors",
"repeat it, --name a --name b", "give exactly one reference: a second model B, --vs-device, ..."), which a
notebook never typed; the command line still says them word for word (``errors.settings_error``: the
message and its ``cli_message`` from one check). QA."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from conftest import mm_relu_softmax
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import UsageError

runner = CliRunner()


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    return mm_relu_softmax(tmp_path_factory.mktemp("hints"))


def _command_line_words(message: str) -> list[str]:
    """The flags and commands a message names outside the API's "param (--flag)" form."""
    rest = re.sub(r"\w+ \((--[\w-]+(/--[\w-]+)?( [A-Z:]+)?)\)", "", message)
    return re.findall(r"(?<![\w-])--[a-z][\w-]*|`onnxprobe [^`]*`", rest)


# (the API call, the command line's arguments after the model, what the API's message says, what the command line's says)
CASES = {
    "op, no close one": (lambda m: api.layers(m, api.Selection(ops=("Qzzz",))), ["layers", "--op", "Qzzz"],
                         "api.inspect(model).summary.op_histogram lists its op types", "`onnxprobe inspect MODEL` lists its op types"),
    "range, no close node": (lambda m: api.layers(m, api.Selection(range="qqqqqqqq:")), ["layers", "--range", "qqqqqqqq:"],
                             "a node name from api.inspect(model).nodes", "a node name from `onnxprobe inspect --nodes`"),
    "name, a list in one glob": (lambda m: api.layers(m, api.Selection(names=("mm,relu",))), ["layers", "--name", "mm,relu"],
                                 "names takes one glob each (names may hold commas): give names=('mm', 'relu')",
                                 "--name takes one glob (names may hold commas): repeat it, --name mm --name relu"),
    "wrt, a list in one glob": (lambda m: api.grad(m, spec=api.GradSpec(wrt=("w,x",))), ["grad", "--wrt", "w,x"],
                                "wrt takes one glob each (names may hold commas): give wrt=('w', 'x')",
                                "--wrt takes one glob (names may hold commas): repeat it, --wrt w --wrt x"),
    "cut at no tensor": (lambda m: api.extract(m, "unused.onnx", cut_outputs=["qqqqqqqq"]), ["extract", "-o", "OUT", "--to", "qqqqqqqq"],
                         "api.inspect(model).nodes lists the tensors", "`onnxprobe inspect --nodes MODEL` lists the tensors"),
    "no cut": (lambda m: api.extract(m, "unused.onnx"), ["extract", "-o", "OUT"],
               "give the tensors to cut at: cut_inputs and/or cut_outputs",
               "give the tensors to cut at: --from T1,T2 and/or --to T3; `onnxprobe inspect --nodes MODEL` lists them"),
    "no reference": (lambda m: api.diff(m), ["diff"],
                     "give exactly one reference: b (a second model), vs_device, vs_opt_level, vs_runtime (vs_reference), vs_npz or vs_torch",
                     "give exactly one reference: a second model B, --vs-device, --vs-opt-level, --vs-runtime (--vs-reference), "
                     "--vs-npz or --vs-torch"),
    "two references": (lambda m: api.diff(m, m, vs_device="cpu"), ["diff", "SAME", "--vs-device", "cpu"],
                       "give exactly one reference: b (a second model), vs_device,", "give exactly one reference: a second model B, --vs-device,"),
    "vs_reference and vs_device": (lambda m: api.diff(m, vs_reference=True, vs_device="cpu"), ["diff", "--vs-reference", "--vs-device", "cpu"],
                                   "give exactly one reference: vs_device or vs_reference (onnx.reference has no devices)",
                                   "give exactly one reference: --vs-device or --vs-reference (onnx.reference has no devices)"),
    "vs_reference and vs_runtime": (lambda m: api.diff(m, vs_reference=True, vs_runtime="ort"), ["diff", "--vs-reference", "--vs-runtime", "ort"],
                                    "vs_reference=True is vs_runtime='reference': give one of them, not vs_runtime='ort'",
                                    "--vs-reference is --vs-runtime reference: give one of them, not --vs-runtime ort"),
    "diff_grad without b": (lambda m: api.diff_grad(m), ["diff", "--grad"],
                            "diff_grad compares two models: give b (the reference model) or vs_torch (one of them)",
                            "diff --grad compares two models: give the reference model B or --vs-torch"),
    "vs_torch on another runtime": (lambda m: api.diff(m, vs_torch="m.py:make", runtime="reference"),
                                    ["diff", "--vs-torch", "m.py:make", "--runtime", "reference"],
                                    "vs_torch runs the export on onnxruntime: drop runtime",
                                    "--vs-torch runs the export on onnxruntime: drop --runtime"),
    "profile vs_reference": (lambda m: api.diff(m, vs_reference=True, profile=True), ["diff", "--vs-reference", "--profile"],
                             "profile times onnxruntime's kernels: not with vs_reference",
                             "--profile times onnxruntime's kernels: not with --vs-reference"),
    "profile another runtime": (lambda m: api.diff(m, vs_runtime="reference", profile=True),
                                ["diff", "--vs-runtime", "reference", "--profile"],
                                "profile times onnxruntime's kernels: not with vs_runtime='reference'",
                                "--profile times onnxruntime's kernels: not with --vs-runtime reference"),
    "profile separate runs": (lambda m: api.diff(m, m, profile=True, fuse=False), ["diff", "SAME", "--separate-runs", "--profile"],
                              "profile times diff's one run of both models: not with fuse=False",
                              "--profile times diff's one run of both models: not with --separate-runs"),
    "profile vs_device": (lambda m: api.diff(m, vs_device="cpu", profile=True), ["diff", "--vs-device", "cpu", "--profile"],
                          "profile times diff's one run of both models: not with vs_device",
                          "--profile times diff's one run of both models: not with --vs-device"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_api_advises_in_its_own_words(model, case, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # extract's output path, never written (the cut is refused first)
    call, args, said, cli_said = CASES[case]
    with pytest.raises(UsageError) as e:
        call(model)
    message = str(e.value)
    assert said in message, message
    assert _command_line_words(message) == [], message
    assert cli_said in (e.value.cli_message or message), e.value.cli_message
    args = [model if a == "SAME" else str(tmp_path / "out.onnx") if a == "OUT" else a for a in args]
    r = runner.invoke(app, [args[0], model, *args[1:]])
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.output, r.output
    assert cli_said in lines[0], lines[0]
