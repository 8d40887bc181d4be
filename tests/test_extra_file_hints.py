"""A --target / --labels / --output-grad file of the wrong type is named by its flag and pointed at what
that flag takes (.npy or .pb), not at --inputs FILE.npz, which only model inputs take."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app


@pytest.mark.parametrize("flags", [["--loss", "cross-entropy", "--labels"], ["--loss", "mse", "--target"], ["--output-grad"]])
def test_an_extra_file_of_the_wrong_type_names_its_flag(tmp_path, flags):
    f = tmp_path / "x.txt"
    f.write_text("1\n")
    r = CliRunner().invoke(app, ["grad", str(sample_path("cnn")), *flags, str(f)])
    assert r.exit_code == 2, r.output
    line = r.output.strip().splitlines()[-1]
    assert flags[-1] in line and "'.txt'" in line and "--inputs" not in line, line


def test_an_input_file_of_the_wrong_type_points_at_the_input_forms(tmp_path):
    f = tmp_path / "x.txt"
    f.write_text("1\n")
    r = CliRunner().invoke(app, ["layers", str(sample_path("cnn")), "--input", f"image={f}"])
    assert r.exit_code == 2 and "--inputs FILE.npz" in r.output.strip().splitlines()[-1], r.output
