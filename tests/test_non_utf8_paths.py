"""File names that are not UTF-8 (bytes a Linux file name may hold: Python gives them as lone surrogates,
'\\udcff'): a model or output so named is read and written, or refused in one line; never an internal
UnicodeEncodeError (QA)."""

from __future__ import annotations

import os
import shutil

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model, sample_path
from onnxprobe.cli.main import app

runner = CliRunner()
ODD = os.fsdecode(b"odd\xff")  # 'odd\udcff'


@pytest.mark.parametrize("argv", [["layers", "{m}", "--html", "{o}"], ["diff", "{m}", "{m}", "--html", "{o}"],
                                  ["grad", "{m}", "--html", "{o}"]], ids=["layers", "diff", "grad"])
def test_an_html_report_of_a_model_whose_name_is_not_utf8(tmp_path, argv):
    model = tmp_path / f"{ODD}.onnx"
    shutil.copy(sample_path("mlp"), model)
    out = tmp_path / "r.html"
    r = runner.invoke(app, [a.format(m=model, o=out) for a in argv])
    assert r.exit_code == 0, r.output
    page = out.read_text(encoding="utf-8")  # UTF-8 throughout, the name escaped as the terminal shows it
    assert "odd\\udcff.onnx" in page


def test_mark_refuses_a_data_file_name_that_is_not_utf8_in_one_line(tmp_path):
    """An ONNX model names its data file in UTF-8 text: OUT.data beside an OUT so named cannot be named."""
    m = make_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64])], [numpy_helper.from_array(np.ones(64, np.float32), "w")])
    onnx.save_model(m, tmp_path / "m.onnx", save_as_external_data=True, location="m.data", size_threshold=0)
    out = tmp_path / "out"
    out.mkdir()
    r = runner.invoke(app, ["mark", str(tmp_path / "m.onnx"), "--all", "--stats", "-o", str(out / f"{ODD}.onnx")])
    assert r.exit_code == 2, r.output
    assert len(r.stderr.strip().splitlines()) == 1 and "UTF-8" in r.stderr and "internal" not in r.stderr, r.stderr
    assert os.listdir(out) == []
