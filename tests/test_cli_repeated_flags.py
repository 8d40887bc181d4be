"""A single-value flag given twice with different values is refused, as --shape refuses one input's two
shapes: click kept the last (--device tpu --device cpu ran on the CPU while the other order failed on 'tpu';
--range, --json, a --runtime-option KEY twice alike). --json - beside --format table or --wide, which
then do nothing, is refused as beside --format csv. Errors name the flag as given (QA)."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app

runner = CliRunner()


def _refused(args, needle):
    r = runner.invoke(app, [str(a) for a in args])
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.output, r.output
    return lines[0]


MLP = str(sample_path("mlp"))


@pytest.mark.parametrize("args, needle", [
    (["--range", "0:0", "--range", "1:1"], "--range given twice with different values ('0:0' and '1:1')"),
    (["--device", "tpu", "--device", "cpu"], "--device given twice with different values ('tpu' and 'cpu')"),
    (["--device", "cpu", "--device", "tpu"], "--device given twice with different values ('cpu' and 'tpu')"),
    (["--json", "a.json", "--json=b.json"], "--json given twice with different values ('a.json' and 'b.json')"),
    (["--opt-level", "off", "--opt-level", "all"], "--opt-level given twice"),
    (["--runtime-option", "K=1", "--runtime-option", "K=2", "--runtime", "openvino"],
     "--runtime-option K: given twice with different values ('1' and '2')"),
])
def test_a_single_value_flag_given_twice_differently_is_refused(tmp_path, monkeypatch, args, needle):
    monkeypatch.chdir(tmp_path)  # --json a.json: nothing written, but not into the checkout either
    _refused(["layers", MLP, *args], needle)
    assert not list(tmp_path.iterdir())


def test_the_same_value_twice_is_taken():
    r = runner.invoke(app, ["layers", MLP, "--device", "cpu", "--device=cpu", "--json", "-"])
    assert r.exit_code == 0, r.output


def test_a_short_alias_and_values_that_look_like_flags(tmp_path):
    _refused(["extract", MLP, "-o", str(tmp_path / "a.onnx"), f"-o{tmp_path / 'b.onnx'}"], "-o given twice")
    # a value of a repeatable flag is no flag: '--input' twice is fine
    np.save(tmp_path / "x.npy", np.zeros((4, 16), np.float32))
    r = runner.invoke(app, ["layers", MLP, "--input", f"x={tmp_path / 'x.npy'}", "--name", "--range"])
    assert "given twice" not in r.stderr, r.output


@pytest.mark.parametrize("extra, needle", [(["--format", "table"], "--format table"), (["--wide"], "--wide"),
                                           (["--format", "csv"], "both write to stdout")])
def test_json_to_stdout_beside_table_options_is_refused_alike(extra, needle):
    _refused(["layers", MLP, "--json", "-", *extra], needle)


def test_errors_name_the_flag_given(tmp_path):
    assert _refused(["layers", MLP, "--runtime", "reference", "--device", "cuda"], "onnx.reference").startswith(
        "onnxprobe: error: --device cuda:")
    _refused(["layers", MLP, "--runtime", "reference", "--opt-level", "all"], "--opt-level all sets onnxruntime's")
    _refused(["debug", MLP, "--device", "tpu"], "--device tpu: choose one of")  # as typed, as '--device cuda: ...'
    (tmp_path / "ds").mkdir()
    np.savez(tmp_path / "ds" / "b0.npz", x=np.zeros((4, 16), np.float32))
    line = _refused(["layers", MLP, "--inputs-dir", tmp_path / "ds", "--seed", "3"], "takes all inputs")
    assert line.endswith("drop --seed"), line
    # --save is no input flag: it is refused for what it is (one input's tensors), not as an input given twice
    line = _refused(["layers", MLP, "--inputs-dir", tmp_path / "ds", "--save", tmp_path / "o.npz"], "--save writes the tensors of one input")
    assert "takes all inputs" not in line and not (tmp_path / "o.npz").exists(), line
    _refused(["grad", MLP, "--loss", "mse", "--target", tmp_path / "missing.npy"], "--target ")
