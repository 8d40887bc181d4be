"""A run that fails on made-up inputs says every guess that may be the cause: dimensions set to 1 and
integer inputs of seeded random data. With both, only the dimensions were named (silero-vad with
`--inputs` holding its audio alone: the random `sr` sent it down a failing branch, and the error asked for
--shape only)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

runner = CliRunner()


def _model(tmp_path):
    data = numpy_helper.from_array(np.arange(3, dtype=np.float32), "data")
    m = make_model([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                    helper.make_node("Gather", ["data", "k"], ["g"], name="gather")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"]),
                    helper.make_tensor_value_info("k", TensorProto.INT64, [])],
                   [helper.make_tensor_value_info("r", TensorProto.FLOAT, ["n"]),
                    helper.make_tensor_value_info("g", TensorProto.FLOAT, [])], [data])
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    return str(path)


def test_a_failing_run_names_both_the_guessed_dimensions_and_the_random_integers(tmp_path):
    path = _model(tmp_path)
    r = runner.invoke(app, ["layers", path, "--int-range", "50:60"])  # k out of Gather's range: the cause
    assert r.exit_code == 1, r.output
    err = r.output.strip().splitlines()[-1]
    assert err.startswith("onnxprobe: error:") and "Traceback" not in r.output, r.output
    assert "--shape" in err and "--input NAME=VALUE" in err and "k" in err, err


def test_each_hint_alone_where_only_it_applies(tmp_path):
    path = _model(tmp_path)
    r = runner.invoke(app, ["layers", path, "--int-range", "50:60", "--shape", "x=4"])
    err = r.output.strip().splitlines()[-1]
    assert r.exit_code == 1 and "--input NAME=VALUE" in err and "--shape" not in err, r.output
    r = runner.invoke(app, ["layers", path, "--input", "k=1"])
    assert r.exit_code == 0, r.output
