"""A bad runtime setting from Python is named as the parameter and its flag (``vs_runtime (--vs-runtime)
foo: ...``), as README says of every setting; the command line names the flag alone."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import UsageError

MLP = str(sample_path("mlp"))


@pytest.mark.parametrize("call, said", [
    (lambda: api.layers(MLP, runtime="foo"), "runtime (--runtime) foo: choose one of"),
    (lambda: api.diff(MLP, vs_runtime="foo"), "vs_runtime (--vs-runtime) foo: choose one of"),
    (lambda: api.diff(MLP, runtime="foo", vs_reference=True), "runtime (--runtime) foo: choose one of"),
    (lambda: api.diff(MLP, vs_reference=True, runtime_options={"A": "1"}),
     "runtime_options (--runtime-option) A: "),
    (lambda: api.diff(MLP, vs_runtime="openvino", runtime_options={"frob:A": "1"}),
     "runtime_options (--runtime-option) frob:A: "),
])
def test_api_names_the_parameter_and_its_flag(call, said):
    with pytest.raises(UsageError) as e:
        call()
    assert str(e.value).startswith(said), str(e.value)


@pytest.mark.parametrize("args, said", [
    (["layers", MLP, "--runtime", "foo"], "--runtime foo: choose one of"),
    (["diff", MLP, "--vs-runtime", "foo"], "--vs-runtime foo: choose one of"),
    (["diff", MLP, "--vs-reference", "--runtime-option", "A=1"], "--runtime-option A: "),
])
def test_the_command_line_names_the_flag(args, said):
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2 and f"onnxprobe: error: {said}" in r.output and "(--" not in r.output, r.output
