"""An API call with a bad setting is told in the API's words: the message names the parameter the caller
gave, with its flag in parentheses ("ops (--op) Conv2: ..."), where it named the command-line flag alone
("--op Conv2: ...", a flag a notebook never typed). The command line still says the flag alone, word for
word as before (``errors.setting_error``: ``cli_message``). QA."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from conftest import mm_relu_softmax
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import UsageError

runner = CliRunner()


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    return mm_relu_softmax(tmp_path_factory.mktemp("names"))


# (the API call, the command line's arguments after the model, the message after "PARAM (FLAG)" / "FLAG")
CASES = {
    "op": (lambda m: api.layers(m, api.Selection(ops=("Conv2",))), ["layers", "--op", "Conv2"],
           ("ops", "--op", " Conv2: no node of the model has this op type")),
    "name": (lambda m: api.layers(m, api.Selection(names=("zzz",))), ["layers", "--name", "zzz"],
             ("names", "--name", " 'zzz': matches no node, tensor or input name of the model")),
    "range reversed": (lambda m: api.layers(m, api.Selection(range="2:1")), ["layers", "--range", "2:1"],
                       ("range", "--range", " 2:1: reversed (node 2 comes after node 1)")),
    "range unknown node": (lambda m: api.layers(m, api.Selection(range="nosuch:")), ["layers", "--range", "nosuch:"],
                           ("range", "--range", " nosuch:: no node named 'nosuch'")),
    "shape rank": (lambda m: api.layers(m, inputs=api.InputSpec(shapes={"x": (1, 2, 3)})), ["layers", "--shape", "x=1x2x3"],
                   ("shapes", "--shape", " x: 3 dimensions given, the model expects 2")),
    "shape fixed dim": (lambda m: api.layers(m, inputs=api.InputSpec(shapes={"x": (2, 4)})), ["layers", "--shape", "x=2x4"],
                        ("shapes", "--shape", " x: dimension 1 is fixed to 3 in the model, got 4")),
    "input file": (lambda m: api.layers(m, inputs=api.InputSpec(files={"x": "/nonexistent/x.npy"})),
                   ["layers", "--input", "x=/nonexistent/x.npy"], ("files", "--input", " x=/nonexistent/x.npy: no such input file")),
    "wrt": (lambda m: api.grad(m, spec=api.GradSpec(wrt=("zzz",))), ["grad", "--wrt", "zzz"],
            ("wrt", "--wrt", " 'zzz': no float weight, input or node output of the main graph matches it")),
    "target file": (lambda m: api.grad(m, spec=api.GradSpec(loss="mse", target="/nonexistent/t.npy")),
                    ["grad", "--loss", "mse", "--target", "/nonexistent/t.npy"], ("target", "--target", " /nonexistent/t.npy: no such input file")),
    "sort": (lambda m: api.text(api.diff(m, m), sort="bad"), ["diff", "SAME", "--sort", "bad"],
             ("sort", "--sort", " bad: choose topo, introduced, accumulated")),
    "map file": (lambda m: api.read_map("/nonexistent/map.json"), ["diff", "SAME", "--map", "/nonexistent/map.json"],
                 ("path", "--map", " /nonexistent/map.json: no such JSON file")),
    "cut input": (lambda m: api.extract(m, "unused.onnx", cut_inputs=["zzz"]), ["extract", "-o", "OUT", "--from", "zzz"],
                  ("cut_inputs", "--from", ": no tensor named 'zzz' in the main graph")),
    "cut at an output": (lambda m: api.extract(m, "unused.onnx", cut_inputs=["y"]), ["extract", "-o", "OUT", "--from", "y"],
                         ("cut_inputs", "--from", " 'y': is the model output, so no node lies after it")),
    "columns": (lambda m: api.text(api.layers(m), columns="tensor,zzz"), ["layers", "--columns", "tensor,zzz"],
                ("columns", "--columns", ": no column 'zzz'")),
    "format": (lambda m: api.text(api.layers(m), format="zzz"), ["layers", "--format", "zzz"],
               ("format", "--format", " zzz: choose table, csv, markdown, json")),
    "inputs dir": (lambda m: api.layers_dataset(m, "/nonexistent/batches"), ["layers", "--inputs-dir", "/nonexistent/batches"],
                   ("inputs", "--inputs-dir", " /nonexistent/batches: no such folder or file")),
    "grad wrt in diff": (lambda m: api.diff_grad(m, m, api.GradSpec(wrt=("zzz",))), ["diff", "SAME", "--grad", "--wrt", "zzz"],
                         ("wrt", "--wrt", " 'zzz': no gradient of either model matches it")),
}


def _cli_line(model: str, args: list[str], out: str = "/nonexistent/out.onnx") -> str:
    args = [model if a == "SAME" else out if a == "OUT" else a for a in args]
    r = runner.invoke(app, [args[0], model, *args[1:]])
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.output, r.output
    return lines[0]


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_api_names_its_parameter_and_the_command_line_its_flag(model, case, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # extract's output path, never written (the cut is refused first)
    call, args, (param, flag, rest) = CASES[case]
    with pytest.raises(UsageError) as e:
        call(model)
    assert str(e.value).startswith(f"{param} ({flag}){rest}"), str(e.value)
    assert e.value.cli_message.startswith(f"{flag}{rest}"), e.value.cli_message
    line = _cli_line(model, args, str(tmp_path / "out.onnx"))
    assert f"error: {flag}{rest}" in line, line
    assert f"{param} (" not in line, line


def test_the_messages_that_name_settings_inside_say_both_in_the_api(model):
    """A setting named within the message (not first) is named as the API's parameter too; the command line
    keeps its flags."""
    with pytest.raises(UsageError) as e:
        api.layers(model, inputs=api.InputSpec(shapes={"z": (1,)}))
    assert "unknown input name 'z' (shapes (--shape))" in str(e.value), str(e.value)
    assert "unknown input name 'z' (--shape)" in e.value.cli_message
    with pytest.raises(UsageError) as e:
        api.diff(model, model, per_tensor={"zzz": api.Tolerance("max_abs", atol=0.1)})
    assert "(per_tensor (--atol/--rtol NAME:VALUE)) names 'zzz', which neither model observes" in str(e.value), str(e.value)
    line = _cli_line(model, ["diff", "SAME", "--atol", "zzz:0.1"])
    assert "error: a per-tensor tolerance (--atol/--rtol NAME:VALUE) names 'zzz', which neither model observes" in line, line
    with pytest.raises(UsageError) as e:
        api.Tolerance.from_flags(min_sqnr=20.0, min_cosine=0.9)
    assert str(e.value) == ("min_sqnr (--min-sqnr) and min_cosine (--min-cosine) set different criteria; give one "
                            "(or metric (--metric))")
    assert e.value.cli_message == "--min-sqnr and --min-cosine set different criteria; give one (or --metric)"


def test_labels_checked_against_the_output_name_the_field(model):
    """The checks of a loss's array against the output (run after the model's shapes are known) name
    GradSpec's field, and the flag on the command line."""
    with pytest.raises(UsageError) as e:
        api.grad(model, spec=api.GradSpec(loss="cross-entropy", labels=np.array([7, 0])))
    assert str(e.value).startswith("labels (--labels): class index 7 is not one of the 3 classes"), str(e.value)
    assert e.value.cli_message.startswith("--labels: class index 7 is not one of the 3 classes")


@pytest.mark.parametrize("call, said", [
    (lambda: api.input_spec(int_range="5"), "int_range (--int-range) '5': expected LOW:HIGH"),
    (lambda: api.input_spec(shape=["x=1xq"]), "shape (--shape) 'x=1xq': dimensions must be integers"),
    (lambda: api.input_spec(shape="x"), "shape (--shape) 'x': expected NAME=DIMS"),
    (lambda: api.input_spec(input_=["x"]), "input_ (--input) 'x': expected NAME=FILE"),
    (lambda: api.parse_size("3x"), "max_memory (--max-memory) '3x': expected a size such as 512M or 2G"),
    (lambda: api.Tolerance.from_flags(atol=-1.0), "atol (--atol) -1.0: thresholds are finite and non-negative"),
    (lambda: api.Tolerance.from_flags(metric="nope"), "metric (--metric) nope: choose one of"),
])
def test_the_readers_of_typed_settings_name_their_parameter(call, said):
    with pytest.raises(UsageError) as e:
        call()
    assert str(e.value).startswith(said), str(e.value)
    flag, rest = said.split(" (", 1)[1].split(")", 1)
    assert e.value.cli_message.startswith(flag + rest), e.value.cli_message


def test_a_user_map_naming_no_tensor_names_user_map(model):
    with pytest.raises(UsageError) as e:
        api.diff(model, model, user_map={"zzz": "y"})
    assert str(e.value).startswith("user_map (--map): tensor 'zzz' is not an observable tensor of model A"), str(e.value)
    assert e.value.cli_message.startswith("--map: tensor 'zzz' is not an observable tensor of model A")


def test_text_takes_columns_as_the_flag_does(model):
    """api.text(columns='tensor,max') is the keys --columns takes: it was read one key per character ("no column 't'")."""
    out = api.text(api.layers(model), format="csv", columns="tensor,max")
    assert out.splitlines()[0] == "tensor,max", out
