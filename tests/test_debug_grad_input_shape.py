"""After `grad`, `input x random DIMS` with another batch was refused: "dimension 0 is fixed to 1 in the model",
false of the model (it declares [batch x 3 x 8 x 8]): the backward graph, made for the input shapes it was attached
at, declares them fixed. The shape is checked against the model as loaded; the backward graph is dropped, with the
note `input x FILE` of the same shape already gave. A dimension the model fixes is still refused."""

from __future__ import annotations

from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app


def test_after_grad_another_batch_of_random_inputs_drops_the_backward_graph(tmp_path):
    script = tmp_path / "s.txt"
    script.write_text("grad\ninput x random 3x3x8x8\nrun\nstats --format csv --columns tensor,shape\n")
    r = CliRunner().invoke(app, ["debug", str(sample_path("dynamic_batch")), "--script", str(script)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "the backward graph was made for the old input shapes and is dropped" in r.stdout, r.stdout
    assert "3x3x8x8" in r.stdout and "fixed to" not in r.output
    script.write_text("grad\ninput x random 3x4x8x8\n")
    r = CliRunner().invoke(app, ["debug", str(sample_path("dynamic_batch")), "--script", str(script)], env={"COLUMNS": "200"})
    assert r.exit_code == 1 and "dimension 1 is fixed to 3 in the model, got 4" in r.stderr, r.output
