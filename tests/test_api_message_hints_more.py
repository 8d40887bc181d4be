"""More of the advice errors give, said in the caller's words: from the API, messages named the command
line's flags and commands ("--vs-torch: the example arguments hold 2 tensor(s)... give the inputs with
--input", "--map: 'qq' is not...", "merge-stats: give at least one report", "write one with `onnxprobe
layers ...`", "cut the model after it with `onnxprobe extract --from`"); the command line still says them
word for word (``errors.settings_error``). Each case: the API's message names no bare flag or command, the
command line's (``cli_message``) is the same line it printed, one line and a non-zero exit. QA."""

from __future__ import annotations

import json
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import OnnxProbeError

runner = CliRunner()

MODULES = '''
import torch

class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 3)

    def forward(self, x):
        return torch.softmax(torch.relu(self.fc(x)), -1)

class Two(M):
    def forward(self, x):
        y = super().forward(x)
        return y, y

class Other(M):
    def forward(self, x):
        return super().forward(x).reshape(3, 2)

def module(): return M()
def notmodule(): return 3
def dictargs(): return M(), {"x": torch.zeros(2, 3)}
def script(): return torch.jit.script(M())
def toomany(): return M(), (torch.zeros(2, 3), torch.zeros(2, 3))
def meta_args(): return M(), (torch.empty(2, 3, device="meta"),)
def meta_module():
    with torch.device("meta"):
        return M()
def two(): return Two()
def other(): return Other()
'''

GEN = '''
import numpy as np
def gen():
    yield {"x": np.zeros((2, 3), np.float32)}
def notdicts():
    yield 3
'''


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict:
    pytest.importorskip("torch")
    d = tmp_path_factory.mktemp("hints_more")
    vi = helper.make_tensor_value_info
    w = helper.make_tensor("w", TensorProto.FLOAT, [3, 3], [0.1 * i for i in range(9)])
    m = make_model([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"), helper.make_node("Relu", ["h"], ["r"], name="relu"),
                    helper.make_node("Softmax", ["r"], ["y"], name="sm", axis=-1)],
                   [vi("x", TensorProto.FLOAT, [2, 3])], [vi("y", TensorProto.FLOAT, [2, 3])], [w])
    onnx.save(m, d / "m.onnx")
    half = make_model([helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT), helper.make_node("MatMul", ["xf", "w"], ["h"]),
                       helper.make_node("Relu", ["h"], ["r"]), helper.make_node("Softmax", ["r"], ["y"], axis=-1)],
                      [vi("x", TensorProto.FLOAT16, [2, 3])], [vi("y", TensorProto.FLOAT, [2, 3])], [w])
    onnx.save(half, d / "half.onnx")
    f8 = make_model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)],
                    [vi("x", TensorProto.FLOAT8E4M3FN, [2, 3])], [vi("y", TensorProto.FLOAT, [2, 3])], opset=19, ir=9)
    onnx.save(f8, d / "f8.onnx")
    (d / "mods.py").write_text(MODULES)
    (d / "gen.py").write_text(GEN)
    (d / "map.json").write_text(json.dumps({"qq": "fc"}))
    (d / "data").mkdir()
    np.savez(d / "data" / "b0.npz", x=np.zeros((2, 3), np.float32))
    (d / "data2").mkdir()  # two batches failing for different reasons: each said with its own
    np.savez(d / "data2" / "b0.npz", x=np.zeros((2, 3), np.float32))
    (d / "data2" / "b1.npz").write_bytes(b"not an npz")
    np.save(d / "target.npy", np.zeros((2, 3), np.float32))
    (d / "npz").mkdir()
    zzz = numpy_helper.from_array(np.zeros((2, 3), np.float32), "zzz")
    (d / "npz" / "input_0.pb").write_bytes(zzz.SerializeToString())
    (d / "npz" / "output_0.pb").write_bytes(numpy_helper.from_array(np.zeros((2, 3), np.float32), "y").SerializeToString())
    for name, text in {"list": [1], "nothing": {"a": 1}, "pairs": {"pairs": []}, "grads": {"gradients": []}}.items():
        (d / f"{name}.json").write_text(json.dumps(text))
    return {k: str(d / v) for k, v in {"M": "m.onnx", "HALF": "half.onnx", "F8": "f8.onnx", "MODS": "mods.py", "GEN": "gen.py",
                                       "MAP": "map.json", "DATA": "data", "DATA2": "data2", "TARGET": "target.npy", "NPZ": "npz",
                                       "LIST": "list.json", "NOTHING": "nothing.json", "PAIRS": "pairs.json",
                                       "GRADS": "grads.json"}.items()}


def _command_line_words(message: str) -> list[str]:
    """The flags and commands a message names outside the API's "param (--flag)" form."""
    rest = re.sub(r"\w+ \((--[\w-]+(/--[\w-]+)?( [A-Z:]+)?)\)", "", message).replace("ray start --head", "")  # Ray's own command
    return re.findall(r"(?<![\w-])--[a-z][\w-]*|`onnxprobe [^`]*`", rest)


def _torch(f, func):
    return f"{f['MODS']}:{func}"


# (the API call, the command line's arguments (None: the command line cannot say it), what the API's message says,
# what the command line's says)
CASES = {
    "not a module": (lambda f: api.diff(f["M"], vs_torch=_torch(f, "notmodule")), ["diff", "M", "--vs-torch", "MODS:notmodule"],
                     "vs_torch (--vs-torch) ", "--vs-torch "),
    "no such function": (lambda f: api.diff(f["M"], vs_torch=_torch(f, "nope")), ["diff", "M", "--vs-torch", "MODS:nope"],
                         "has no function 'nope'", "has no function 'nope'"),
    "dict example args": (lambda f: api.diff(f["M"], vs_torch=_torch(f, "dictargs")), ["diff", "M", "--vs-torch", "MODS:dictargs"],
                          "dictargs() returned its example arguments as a dict", "dictargs() returned its example arguments as a dict"),
    "torchscript": (lambda f: api.diff(f["M"], vs_torch=_torch(f, "script")), ["diff", "M", "--vs-torch", "MODS:script"],
                    "a TorchScript module", "a TorchScript module"),
    "too many example args": (lambda f: api.diff(f["M"], vs_torch=_torch(f, "toomany")), ["diff", "M", "--vs-torch", "MODS:toomany"],
                              "vs_torch (--vs-torch): the example arguments hold 2 tensor(s), the ONNX model takes 1 input(s) (x); "
                              "give the inputs with inputs (--input)",
                              "--vs-torch: the example arguments hold 2 tensor(s), the ONNX model takes 1 input(s) (x); give the "
                              "inputs with --input (inputs= from Python)"),
    "meta example args": (lambda f: api.diff(f["M"], vs_torch=_torch(f, "meta_args")), ["diff", "M", "--vs-torch", "MODS:meta_args"],
                          "give tensors with values, or the inputs with inputs (--input)",
                          "--vs-torch: the example argument 0 holds no data (meta tensors, device='meta'): give tensors with "
                          "values, or the inputs with --input"),
    "meta module": (lambda f: api.diff(f["M"], vs_torch=_torch(f, "meta_module")), ["diff", "M", "--vs-torch", "MODS:meta_module"],
                    "vs_torch (--vs-torch): the module's fc.weight holds no data", "--vs-torch: the module's fc.weight holds no data"),
    "module returns two": (lambda f: api.diff(f["M"], vs_torch=_torch(f, "two")), ["diff", "M", "--vs-torch", "MODS:two"],
                           "vs_torch (--vs-torch): the module returns 2 tensor(s), the ONNX model has 1 output(s)",
                           "--vs-torch: the module returns 2 tensor(s), the ONNX model has 1 output(s)"),
    "other output shape": (lambda f: api.diff(f["M"], vs_torch=_torch(f, "other")), ["diff", "M", "--vs-torch", "MODS:other"],
                           "vs_torch (--vs-torch): output 0 of the module has shape [3, 2]", "--vs-torch: output 0 of the module has shape [3, 2]"),
    "map, no such tensor": (lambda f: api.diff(f["M"], vs_torch=_torch(f, "module"), user_map={"qq": "fc"}),
                            ["diff", "M", "--vs-torch", "MODS:module", "--map", "MAP"],
                            "user_map (--map): 'qq' is not an observable tensor", "--map: 'qq' is not an observable tensor"),
    "map with diff_grad vs_torch": (lambda f: api.diff_grad(f["M"], vs_torch=_torch(f, "module"), user_map={"qq": "fc"}),
                                    ["diff", "M", "--grad", "--vs-torch", "MODS:module", "--map", "MAP"],
                                    "user_map (--map) is not used by diff_grad with vs_torch",
                                    "--map is not used by diff --grad --vs-torch: parameters pair by value, modules by scope"),
    "fp32_sensitivity with vs_torch": (lambda f: api.diff(f["M"], vs_torch=_torch(f, "module"), fp32_sensitivity=1),
                                       ["diff", "M", "--vs-torch", "MODS:module", "--fp32-sensitivity", "1"],
                                       "fp32_sensitivity (--fp32-sensitivity) reruns a QDQ model A against a float model B: not with vs_torch",
                                       "--fp32-sensitivity reruns a QDQ model A against a float model B: not with --vs-torch"),
    "diff_grad, another float type": (lambda f: api.diff_grad(f["M"], f["HALF"]), ["diff", "M", "HALF", "--grad"],
                                      "diff_grad: input 'x' is of another float type in A than in B; the gradients of a float16 "
                                      "model and its float32 original are compared by api.diff (layer outputs)",
                                      "diff --grad: input 'x' is of another float type in A than in B; the gradients of a float16 "
                                      "model and its float32 original are compared by diff without --grad (layer outputs)"),
    "vs_npz, unknown input": (lambda f: api.diff(f["M"], vs_npz=f["NPZ"]), ["diff", "M", "--vs-npz", "NPZ"],
                              "unknown input name 'zzz' (from vs_npz (--vs-npz) ", "unknown input name 'zzz' (from --vs-npz "),
    "inputs_from, no such function": (lambda f: api.layers_dataset(f["M"], inputs_from=f"{f['GEN']}:nope"),
                                      ["layers", "M", "--inputs-from", "GEN:nope"], "has no function 'nope'", "has no function 'nope'"),
    "ray with inputs_from": (lambda f: api.layers_dataset(f["M"], inputs_from=f"{f['GEN']}:gen", ray=True),
                             None,  # the command line refuses --ray without --inputs-dir itself
                             "ray (--ray) shards the batches of inputs (--inputs-dir); inputs_from (--inputs-from) runs in this process",
                             "--ray shards the batches of --inputs-dir; --inputs-from runs in this process"),
    "dataset from both": (lambda f: api.layers_dataset(f["M"], f["DATA"], inputs_from=f"{f['GEN']}:gen"), None,
                          "a dataset comes from inputs (--inputs-dir) or from inputs_from (--inputs-from) (one of them)",
                          "a dataset comes from --inputs-dir or from --inputs-from (one of them; from Python: inputs= or inputs_from=)"),
    "dataset with a target": (lambda f: api.grad_dataset(f["M"], f["DATA"], spec=api.GradSpec(loss="mse", target=np.zeros((2, 3), np.float32))),
                              ["grad", "M", "--inputs-dir", "DATA", "--loss", "mse", "--target", "TARGET"],
                              "a dataset: target (--target) holds one input's values", "a dataset: --target holds one input's values"),
    "float8 input": (lambda f: api.layers(f["F8"]), ["layers", "F8"],
                     "cut the model after it with api.extract(model, path, cut_inputs=[...])",
                     "cut the model after it with `onnxprobe extract --from`"),
    "float8 input, dataset": (lambda f: api.layers_dataset(f["F8"], f["DATA"]), ["layers", "F8", "--inputs-dir", "DATA"],
                              "cut the model after it with api.extract(model, path, cut_inputs=[...])",
                              "cut the model after it with `onnxprobe extract --from`"),
    "float8 input, dataset, two reasons": (lambda f: api.layers_dataset(f["F8"], f["DATA2"]),
                                           ["layers", "F8", "--inputs-dir", "DATA2"],
                                           "cut the model after it with api.extract(model, path, cut_inputs=[...])",
                                           "cut the model after it with `onnxprobe extract --from`"),
    "float8 input, dataset, on its first batch": (lambda f: api.grad_dataset(f["F8"], f["DATA"], spec=api.GradSpec(loss="sum")),
                                                  ["grad", "F8", "--inputs-dir", "DATA", "--loss", "sum"],
                                                  "cut the model after it with api.extract(model, path, cut_inputs=[...])",
                                                  "cut the model after it with `onnxprobe extract --from`"),
    "merge nothing": (lambda f: api.merge_stats([]), None, "merge_stats: give at least one report", "merge-stats: give at least one report"),
    "merge a list": (lambda f: api.merge_stats([f["LIST"]]), ["merge-stats", "LIST"],
                     "not a dataset report (a JSON object api.report(result) returns)",
                     "not a dataset report (a JSON object written with --json)"),
    "merge no layers report": (lambda f: api.merge_stats([f["NOTHING"]]), ["merge-stats", "NOTHING"],
                               "not a dataset report (api.layers_dataset(model, inputs=DIR) makes one)",
                               "not a dataset report (write one with `onnxprobe layers MODEL --inputs-dir DIR --json FILE`)"),
    "merge no diff report": (lambda f: api.merge_stats([f["PAIRS"]]), ["merge-stats", "PAIRS"],
                             "not a dataset diff report (api.diff_dataset(a, b, inputs=DIR) makes one)",
                             "not a dataset diff report (write one with `onnxprobe diff A B --inputs-dir DIR --json FILE`)"),
    "merge a grad report": (lambda f: api.merge_stats([f["GRADS"]]), ["merge-stats", "GRADS"],
                            "merge_stats merges the dataset reports of layers and diff (a dataset's gradients come from one "
                            "api.grad_dataset run",
                            "merge-stats merges the dataset reports of layers and diff (a dataset's gradients come from one "
                            "`grad --inputs-dir` run"),
    "inputs_from, an item not a dict": (lambda f: api.layers_dataset(f["M"], inputs_from=f"{f['GEN']}:notdicts"),
                                        ["layers", "M", "--inputs-from", "GEN:notdicts"],
                                        "inputs_from (--inputs-from) ", "--inputs-from "),
    "ray address malformed": (lambda f: api.layers_dataset(f["M"], f["DATA"], ray=api.RayOptions(address="bad")),
                              ["layers", "M", "--inputs-dir", "DATA", "--ray", "--ray-address", "bad"],
                              "address (--ray-address) 'bad': expected auto", "--ray-address 'bad': expected auto"),
    "ray address unanswered": (lambda f: api.layers_dataset(f["M"], f["DATA"], ray=api.RayOptions(address="127.0.0.1:1")),
                               ["layers", "M", "--inputs-dir", "DATA", "--ray", "--ray-address", "127.0.0.1:1"],
                               "address (--ray-address) 127.0.0.1:1: nothing answers there", "--ray-address 127.0.0.1:1: nothing answers there"),
    "runtime option malformed": (lambda f: api.parse_runtime_options(["x"]), ["layers", "M", "--runtime-option", "x"],
                                 "runtime_options (--runtime-option) 'x': expected KEY=VALUE", "--runtime-option 'x': expected KEY=VALUE"),
    "runtime option twice": (lambda f: api.parse_runtime_options(["a=1", "a=2"]),
                             ["layers", "M", "--runtime-option", "a=1", "--runtime-option", "a=2"],
                             "runtime_options (--runtime-option) a: given twice", "--runtime-option a: given twice"),
    "profile, models apart": (lambda f: api.diff(f["HALF"], f["M"], profile=True), ["diff", "HALF", "M", "--profile"],
                              "profile times diff's one run of both models, which these models cannot take",
                              "--profile times diff's one run of both models, which these models cannot take"),
    "loss without its target": (lambda f: api.GradSpec(loss="mse"), ["grad", "M", "--loss", "mse"],
                                "loss (--loss) mse needs target (--target): the values",
                                "--loss mse needs --target FILE.npy: the values"),
}


def _arg(files: dict, a: str) -> str:
    """A command-line argument with the files named by their keys (``MODS:func``: the function of mods.py)."""
    key, sep, func = a.partition(":")
    return f"{files[key]}:{func}" if sep and key in files else files.get(a, a)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_api_advises_in_its_own_words(files, case, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    call, args, said, cli_said = CASES[case]
    with pytest.raises(OnnxProbeError) as e:
        call(files)
    message = str(e.value)
    assert said in message, message
    assert _command_line_words(message) == [], message
    assert cli_said in (e.value.cli_message or message), e.value.cli_message
    assert "\n" not in message
    if args is None:
        return
    r = runner.invoke(app, [_arg(files, a) for a in args])
    assert r.exit_code == e.value.exit_code != 0, r.output
    lines = [line for line in r.stderr.strip().splitlines() if not line.startswith("onnxprobe: note:")]  # torch's own warnings
    assert len(lines) == 1 and "Traceback" not in r.output, r.output
    assert cli_said in lines[0], lines[0]
    assert lines[0].endswith((e.value.cli_message or message)), (lines[0], e.value.cli_message)


def test_text_names_itself_as_report_does():
    """api.text(None) said 'expected the result of api.layers...' without naming the function, where
    api.report(None) starts 'report: expected ...'."""
    with pytest.raises(api.UsageError, match=r"^text: expected the result of api\.layers"):
        api.text(None)
    with pytest.raises(api.UsageError, match=r"^html: expected the result of api\.layers"):
        api.html(None)


@pytest.mark.parametrize("asked, said, cli_said", [(dict(columns=["x"]), "columns (--columns): this report has no table",
                                                    "--columns: this report has no table"),
                                                   (dict(fmt="csv"), "format (--format) csv: this report has no table",
                                                    "--format csv: this report has no table")])
def test_a_report_without_a_table_names_the_setting_as_the_api_does(asked, said, cli_said):
    """api.text(result, columns=.../format=...) of a report with no table (``grad --export``'s lines) said
    '--columns: this report has no table'."""
    from rich.text import Text

    from onnxprobe.report.table import present

    with pytest.raises(api.UsageError) as e:
        present([Text("wrote x.onnx")], **asked)
    assert str(e.value) == said and e.value.cli_message == cli_said


def test_notes_and_hints_carry_both_wordings(capsys):
    """Notes and hints that are text, not errors, named flags to a notebook: a run's error after guessed
    dimensions ended '(give real sizes with --shape NAME=DIMS)', NoGradientRule said 'Use --wrt', diff_torch's
    note on differing losses said '`diff --vs-torch` shows where...'. Said with errors.said / settings_error:
    the API's words in the text, the command line's in cli_message / cli_words, which the CLI prints."""
    from onnxprobe.cli.output import notes
    from onnxprobe.compare.gradients import forward_note
    from onnxprobe.errors import ExecutionError, NoGradientRule, cli_words
    from onnxprobe.runtime.feeds import Feeds

    e = Feeds(values={"x": np.zeros((1, 3), np.float32)}, defaulted={"x": ["N"]}, random_ints=["k"]).explained(ExecutionError("boom"))
    assert str(e).startswith("boom (dynamic dimensions were set to 1: give real sizes with shapes (--shape) x=DIMS")
    assert "files (--input) NAME=VALUE or arrays (a dict of arrays)" in str(e) and _command_line_words(str(e)) == [], str(e)
    assert e.cli_message == ("boom (dynamic dimensions were set to 1: give real sizes with --shape x=DIMS; integer "
                             "input k: seeded random data, which a model may not take: integers drawn in [0, 100): set the "
                             "range with --int-range LOW:HIGH, or give real values with --input NAME=VALUE or --inputs FILE.npz)")
    assert "int_range (--int-range) LOW:HIGH" in str(e), str(e)
    rule = NoGradientRule("Foo", "n", "no rule", ["w"], ["Add"]).within("Loop body")
    assert "Use wrt (--wrt) to ask" in str(rule) and _command_line_words(str(rule)) == [], str(rule)
    assert "Use --wrt to ask" in rule.cli_message and "(in Loop body)" in rule.cli_message
    [note] = forward_note({"loss_a": 1.0, "loss_b": 2.0}, False, "torch", ("api.diff_torch", "`diff --vs-torch`"))
    assert "api.diff_torch shows where" in note and _command_line_words(note) == [], note
    assert "; `diff --vs-torch` shows where" in cli_words(note)
    [note] = forward_note({"loss_a": 1.0, "loss_b": 2.0})
    assert _command_line_words(note) == [] and "`diff A B` (without --grad) shows where" in cli_words(note)
    notes([note])
    assert "`diff A B` (without --grad) shows where" in capsys.readouterr().err
