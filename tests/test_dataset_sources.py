"""Where a dataset comes from: `--inputs-from FILE.py:FUNC` (the user's own pipeline) gives the numbers of
the same arrays in a folder; `--ray` without the ray extra names the extra to install."""

from __future__ import annotations

import json
import sys

import numpy as np
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app

runner = CliRunner()


def _run(*args, code=(0,)):
    r = runner.invoke(app, [str(a) for a in args])
    assert r.exit_code in code, r.output
    return r


def test_layers_from_a_pipeline_equal_layers_from_a_folder(tmp_path):
    ds = tmp_path / "ds"
    ds.mkdir()
    rng = np.random.default_rng(2)
    for i in range(3):
        np.savez(ds / f"b{i}.npz", image=rng.random((1, 3, 32, 32), dtype=np.float32))
    (tmp_path / "prep.py").write_text(
        "import numpy as np, pathlib\n"
        "def images():\n"
        f"    for f in sorted(pathlib.Path({str(ds)!r}).glob('*.npz')):\n"
        "        x = np.load(f)['image'].astype(np.float64)  # a pipeline's own arithmetic, then the model's dtype\n"
        "        yield {'image': x.astype(np.float32)}\n")
    folder = json.loads(_run("layers", sample_path("cnn"), "--all", "--inputs-dir", ds, "--json", "-").stdout)
    pipe = json.loads(_run("layers", sample_path("cnn"), "--all", "--inputs-from", f"{tmp_path / 'prep.py'}:images",
                           "--json", "-").stdout)
    assert pipe["batches"] == 3
    assert pipe["tensors"] == folder["tensors"]


def test_a_pipelines_bad_item_is_named(tmp_path):
    (tmp_path / "p.py").write_text("import numpy as np\n"
                                   "def gen():\n    yield {'image': np.zeros((1, 3, 32, 32), np.float32)}\n    yield [1, 2]\n"
                                   "def wrong_dtype():\n    yield {'image': np.zeros((1, 3, 32, 32))}\n"
                                   "def broken():\n    yield {'image': np.zeros((1, 3, 32, 32), np.float32)}\n    raise OSError('camera gone')\n")
    r = _run("layers", sample_path("cnn"), "--inputs-from", f"{tmp_path / 'p.py'}:gen", code=(2,))
    assert "item 1 is a list" in r.stderr
    r = _run("layers", sample_path("cnn"), "--inputs-from", f"{tmp_path / 'p.py'}:wrong_dtype", code=(2,))
    assert "item 0" in r.stderr and "float64" in r.stderr
    r = _run("diff", sample_path("cnn"), "--vs-reference", "--inputs-from", f"{tmp_path / 'p.py'}:broken", code=(2,))
    assert "item 1: the pipeline raised OSError: camera gone" in r.stderr


def test_a_pipeline_that_calls_sys_exit_is_one_line_not_a_silent_exit(tmp_path):
    """sys.exit() in the user's function, its generator or its file ended onnxprobe with that code and
    printed nothing: it is one line naming the function, exit 2."""
    (tmp_path / "p.py").write_text("import sys\nimport numpy as np\n"
                                   "def now():\n    sys.exit(3)\n"
                                   "def later():\n    yield {'image': np.zeros((1, 3, 32, 32), np.float32)}\n    sys.exit(3)\n")
    (tmp_path / "q.py").write_text("import sys\nsys.exit('bye')\ndef f():\n    pass\n")
    for spec, needle in (("p.py:now", "now() raised SystemExit (sys.exit(3))"), ("p.py:later", "item 1: the pipeline raised SystemExit"),
                         ("q.py:f", "importing it raised SystemExit (sys.exit('bye'))")):
        r = _run("layers", sample_path("cnn"), "--inputs-from", f"{tmp_path / spec}", code=(2,))
        assert needle in r.stderr and r.stderr.count("\n") == 1, (spec, r.output)


def test_ray_without_the_extra_names_it(tmp_path, monkeypatch):
    ds = tmp_path / "ds"
    ds.mkdir()
    np.savez(ds / "b0.npz", image=np.zeros((1, 3, 32, 32), np.float32))
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    r = _run("layers", sample_path("cnn"), "--inputs-dir", ds, "--ray", code=(2,))
    assert "pip install 'onnxprobe[ray]'" in r.stderr
