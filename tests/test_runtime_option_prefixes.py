"""--runtime-option RUNTIME:KEY=VALUE with a RUNTIME that is none, and the words for runtimes that take no
options."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import UsageError

runner = CliRunner()


@pytest.mark.parametrize("runtime", ["ort", "reference", "openvino"])
def test_an_unknown_runtime_prefix_is_named(runtime):
    """foo:x=1 was sent to OpenVINO as the property 'foo:x' (refused in OpenVINO's words)."""
    if runtime == "openvino":
        pytest.importorskip("openvino")
    with pytest.raises(UsageError, match="'foo' is not a runtime .*ort, openvino, tensorrt, reference"):
        api.layers(sample_path("mlp"), runtime=runtime, runtime_options={"foo:x": "1"})
    with pytest.raises(UsageError, match="'foo' is not a runtime"):
        api.diff(sample_path("mlp"), runtime=runtime, vs_runtime="ort", runtime_options={"foo:x": "1"})


def test_a_runtime_without_options_says_what_sets_it():
    """reference was told its settings are --device and --opt-level, which it does not take."""
    r = runner.invoke(app, ["layers", str(sample_path("mlp")), "--runtime", "reference", "--runtime-option", "x=1"])
    assert r.exit_code == 2 and "--opt-level" not in r.stderr and "onnx.reference has no settings" in r.stderr, r.stderr
    with pytest.raises(UsageError, match="--device and --opt-level"):
        api.layers(sample_path("mlp"), runtime="ort", runtime_options={"x": "1"})
