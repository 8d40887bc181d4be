"""How a dataset's errors name a batch and what it holds:

- one form, the path relative to the --inputs-dir folder: a batch that could not be read was named by the path
  as given (`data/b.npz`, `/abs/data/b.npz`) while one the model refused was named `a.npz`;
- a stacked .npz's array of neither the input's rank nor one more (x [3, 1, 2, 4] for an input [2, 4]) was
  reported with the shape of one row taken from it ([1, 1, 2, 4]), which is in no file: it is now refused
  up front with the shape in the file;
- a stacked .npz with no arrays at all said "no samples (arrays need a leading sample axis)": it says it holds
  no arrays.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

runner = CliRunner()
V = helper.make_tensor_value_info


@pytest.fixture
def model(tmp_path) -> str:
    path = tmp_path / "r.onnx"
    onnx.save(make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [V("x", TensorProto.FLOAT, [2, 4])],
                         [V("y", TensorProto.FLOAT, [2, 4])]), path)
    return str(path)


def _error(r) -> str:
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("onnxprobe: error")]
    assert len(lines) == 1 and "Traceback" not in r.output, r.output
    return lines[0]


@pytest.mark.parametrize("how", ["relative", "absolute"])
def test_every_error_names_a_batch_by_its_path_in_the_folder(tmp_path, model, monkeypatch, how):
    data = tmp_path / "data"
    data.mkdir()
    np.savez(data / "a.npz", x=np.ones((2, 5), np.float32))  # the model refuses it
    (data / "b.npz").write_bytes(b"junk")  # no .npz at all
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["layers", model, "--inputs-dir", "data" if how == "relative" else str(data)])
    err = _error(r)
    assert r.exit_code == 2 and "a.npz: input x" in err and "b.npz: not a readable .npz file" in err, err
    assert "data/b.npz" not in err and str(data) not in err, err


def test_a_stacked_array_of_a_wrong_rank_is_named_with_its_shape_in_the_file(tmp_path, model):
    np.savez(tmp_path / "s.npz", x=np.ones((3, 1, 2, 4), np.float32))
    r = runner.invoke(app, ["layers", model, "--inputs-dir", str(tmp_path / "s.npz")])
    err = _error(r)
    assert r.exit_code == 2 and "[3, 1, 2, 4]" in err and "[1, 1, 2, 4]" not in err, err
    np.savez(tmp_path / "ok.npz", x=np.ones((3, 2, 4), np.float32))  # samples x the input's shape: still read
    assert runner.invoke(app, ["layers", model, "--inputs-dir", str(tmp_path / "ok.npz")]).exit_code == 0


def test_a_stacked_npz_with_no_arrays_says_so(tmp_path, model):
    np.savez(tmp_path / "e.npz")
    r = runner.invoke(app, ["layers", model, "--inputs-dir", str(tmp_path / "e.npz")])
    err = _error(r)
    assert r.exit_code == 2 and "no arrays" in err and "leading sample axis" not in err, err
