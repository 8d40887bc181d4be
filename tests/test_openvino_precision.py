"""The precision OpenVINO reports for a compiled model: EXECUTION_MODE_HINT=ACCURACY and
INFERENCE_PRECISION_HINT=undefined compile with no inference precision (the property reads back the
'dynamic' type): the model computes in its own types, which reports show as no precision (null), as for
onnxruntime, never as a precision named 'dynamic'. Skipped without the openvino extra."""

from __future__ import annotations

import pytest

from conftest import sample_feeds, sample_path
from onnxprobe import api

pytest.importorskip("openvino")
pytestmark = pytest.mark.openvino


@pytest.mark.parametrize("options", [{"EXECUTION_MODE_HINT": "ACCURACY"}, {"INFERENCE_PRECISION_HINT": "undefined"}])
def test_no_inference_precision_is_the_models_own_types(options):
    res = api.layers(sample_path("cnn"), runtime="openvino", runtime_options=options)
    assert res.info.precision is None
    assert not any("dynamic" in n for n in res.notes), res.notes
    d = api.diff(sample_path("cnn"), vs_runtime="openvino", runtime_options=options,
                 inputs=api.InputSpec(arrays=sample_feeds("cnn")))
    assert d.b.runner.inference_precision() is None and "dynamic" not in d.b.runner.describe()
    assert not any("dynamic" in n for n in d.notes), d.notes


@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("command", ["layers", "diff"])
def test_a_key_given_plain_and_with_its_runtime_prefix_with_two_values_is_refused(order, command):
    """KEY=f32 and openvino:KEY=bf16 both reach OpenVINO: the one given last won, silently (as KEY given twice
    with two values is refused, so is this)."""
    from onnxprobe.errors import UsageError

    items = [("INFERENCE_PRECISION_HINT", "f32"), ("openvino:INFERENCE_PRECISION_HINT", "bf16")]
    options = dict(items[::-1] if order else items)
    run = (lambda: api.layers(sample_path("cnn"), runtime="openvino", runtime_options=options)) if command == "layers" else (
        lambda: api.diff(sample_path("cnn"), vs_runtime="openvino", runtime_options=options))
    with pytest.raises(UsageError, match="INFERENCE_PRECISION_HINT.*two values for openvino"):
        run()


@pytest.mark.parametrize("hint", ["f32", "bf16"])
def test_the_layers_table_says_the_precision_openvino_compiled(hint, tmp_path):
    """diff's labels say it ('OpenVINO CPU, f32'); the layers table said nothing where no note was due."""
    import json

    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    out = tmp_path / "l.json"
    r = CliRunner().invoke(app, ["layers", str(sample_path("cnn")), "--runtime", "openvino", "--runtime-option",
                                 f"INFERENCE_PRECISION_HINT={hint}", "--json", str(out)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    compiled = json.loads(out.read_text())["precision"]
    r = CliRunner().invoke(app, ["layers", str(sample_path("cnn")), "--runtime", "openvino", "--runtime-option",
                                 f"INFERENCE_PRECISION_HINT={hint}"], env={"COLUMNS": "200"})
    footer = [ln for ln in r.stdout.splitlines() if "runtime openvino" in ln]
    assert footer and f"precision {compiled}" in footer[0], r.stdout
