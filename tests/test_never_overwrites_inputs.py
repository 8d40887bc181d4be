"""No output of any command or API call replaces a file onnxprobe read as input: the model, model B of a
diff, a model's external-data file, an input .npz (``fileio.protect``), whichever flag named it."""

from __future__ import annotations

import hashlib
import shutil

import pytest
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import UsageError

runner = CliRunner()


def digest(p) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture
def copies(tmp_path):
    for f in ("external_data.onnx", "external_data.onnx.data", "cnn.onnx", "mlp.onnx"):
        shutil.copy(sample_path("external_data").parent / f, tmp_path / f)
    shutil.copy(tmp_path / "cnn.onnx", tmp_path / "cnn_b.onnx")
    return tmp_path


@pytest.mark.parametrize("argv,target", [
    (["layers", "external_data.onnx", "--save", "external_data.onnx.data"], "external_data.onnx.data"),
    (["layers", "external_data.onnx", "--json", "external_data.onnx.data"], "external_data.onnx.data"),
    (["layers", "external_data.onnx", "--html", "external_data.onnx.data"], "external_data.onnx.data"),
    (["inspect", "external_data.onnx", "--json", "external_data.onnx.data"], "external_data.onnx.data"),
    (["diff", "cnn.onnx", "cnn_b.onnx", "--json", "cnn_b.onnx"], "cnn_b.onnx"),
    (["diff", "cnn.onnx", "cnn_b.onnx", "--html", "cnn_b.onnx"], "cnn_b.onnx"),
    (["grad", "mlp.onnx", "--export", "mlp.onnx"], "mlp.onnx"),
], ids=["save-data", "json-data", "html-data", "inspect-data", "diff-json-b", "diff-html-b", "grad-export-model"])
def test_the_command_line_refuses_to_write_over_an_input(copies, monkeypatch, argv, target):
    monkeypatch.chdir(copies)
    before = digest(copies / target)
    r = runner.invoke(app, argv)
    assert r.exit_code == 2 and target in r.output and "refusing to overwrite" in r.output, r.output
    assert digest(copies / target) == before
    assert runner.invoke(app, ["layers", argv[1]]).exit_code == 0  # the model still loads


@pytest.mark.parametrize("argv,flag", [
    (["layers", "external_data.onnx", "--json"], "--json"),
    (["layers", "external_data.onnx", "--save"], "--save"),
    (["layers", "external_data.onnx", "--html"], "--html"),
    (["inspect", "external_data.onnx", "--json"], "--json"),
    (["mark", "external_data.onnx", "--all", "-o"], "-o/--output"),
    (["extract", "external_data.onnx", "--to", "relu1_out", "-o"], "-o/--output"),
])
def test_a_refused_external_data_file_is_said_with_its_flag(copies, monkeypatch, argv, flag):
    """The model's external data, known as an input only once the model is read, was refused with the path
    alone ("external_data.onnx.data: is an input model's external data; ..."), where every other refused
    output names its flag first ("--json PATH: ...") (QA): the write's refusal is led by the flag as a failed
    write is (``errors.OutputRefused``, ``errors.writing_as``)."""
    monkeypatch.chdir(copies)
    before = digest(copies / "external_data.onnx.data")
    r = runner.invoke(app, argv + ["external_data.onnx.data"])
    lines = r.stderr.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1, r.output
    assert lines[0].startswith(f"onnxprobe: error: {flag} external_data.onnx.data: is an input model's external data; "
                               "refusing to overwrite it"), lines
    assert digest(copies / "external_data.onnx.data") == before


def test_a_written_models_data_file_that_is_the_inputs_is_said_with_the_flag(copies, monkeypatch):
    """mark -o b.onnx writes its weights to b.onnx.data: where that is the input model's external data, the
    refusal names -o/--output and the file it would write."""
    import onnx

    monkeypatch.chdir(copies)
    m = onnx.load("external_data.onnx")
    onnx.save(m, "m.onnx", save_as_external_data=True, location="b.onnx.data", size_threshold=0)
    before = digest(copies / "b.onnx.data")
    r = runner.invoke(app, ["mark", "m.onnx", "-o", "b.onnx", "--all"])
    lines = r.stderr.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1 and not (copies / "b.onnx").exists(), r.output
    assert lines[0].startswith("onnxprobe: error: -o/--output b.onnx: its data file b.onnx.data is the input model's "
                               "external data"), lines
    assert digest(copies / "b.onnx.data") == before


def test_an_input_npz_is_not_written_over(copies, monkeypatch):
    monkeypatch.chdir(copies)
    assert runner.invoke(app, ["layers", "cnn.onnx", "--save", "acts.npz"]).exit_code == 0
    before = digest(copies / "acts.npz")
    r = runner.invoke(app, ["diff", "cnn.onnx", "--vs-npz", "acts.npz", "--json", "acts.npz"])
    assert r.exit_code == 2 and "refusing to overwrite" in r.output
    assert digest(copies / "acts.npz") == before


def test_the_api_refuses_to_write_over_its_model(copies):
    before = digest(copies / "mlp.onnx")
    m = api.load(copies / "mlp.onnx")
    with pytest.raises(UsageError, match="refusing to overwrite"):
        api.export_backward(m, copies / "mlp.onnx")
    with pytest.raises(UsageError, match="refusing to overwrite"):
        api.layers(copies / "mlp.onnx", save_to=copies / "mlp.onnx")
    assert digest(copies / "mlp.onnx") == before
    api.layers(copies / "mlp.onnx", save_to=copies / "acts.npz")  # elsewhere: written
    assert (copies / "acts.npz").stat().st_size > 0


def test_every_kind_of_input_file_is_refused_as_an_output(copies, monkeypatch):
    """.npy/.pb inputs, grad's loss files, the --map file, FILE.py:FUNC sources, merge-stats reports."""
    import numpy as np

    monkeypatch.chdir(copies)
    np.save(copies / "x.npy", np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32))
    np.save(copies / "dy.npy", np.ones((1, 10), np.float32))
    (copies / "map.json").write_text('{"logits": "logits"}')
    (copies / "gen.py").write_text("import numpy as np\n\ndef gen():\n    return [{'image': np.zeros((1, 3, 32, 32), np.float32)}]\n\n"
                                   "def gen1():\n    return [{'image': np.ones((1, 3, 32, 32), np.float32)}]\n")
    cases = [(["layers", "cnn.onnx", "--input", "image=x.npy", "--json", "x.npy"], "x.npy"),
             (["grad", "cnn.onnx", "--output-grad", "dy.npy", "--json", "dy.npy"], "dy.npy"),
             (["diff", "cnn.onnx", "cnn_b.onnx", "--map", "map.json", "--json", "map.json"], "map.json"),
             (["layers", "cnn.onnx", "--inputs-from", "gen.py:gen", "--json", "gen.py"], "gen.py")]
    for argv, target in cases:
        before = digest(copies / target)
        r = runner.invoke(app, argv)
        assert r.exit_code == 2 and "refusing to overwrite" in r.output, (argv, r.output)
        assert digest(copies / target) == before, argv
    for k in range(2):
        assert runner.invoke(app, ["diff", "cnn.onnx", "cnn_b.onnx", "--inputs-from", f"gen.py:{['gen', 'gen1'][k]}", "--json", f"s{k}.json"]).exit_code == 0
    before = digest(copies / "s1.json")
    r = runner.invoke(app, ["merge-stats", "s0.json", "s1.json", "--json", "s1.json"])  # the second report too
    assert r.exit_code == 2 and "is an input report" in r.output, r.output
    assert digest(copies / "s1.json") == before


def test_a_run_writes_nothing_outside_the_folders_it_was_given(tmp_path):
    """A fresh HOME and working folder: after layers, diff and grad, the only files written are the cache's
    (under $ONNXPROBE_CACHE_DIR) and the report asked for; onnxruntime's telemetry queue and device id
    (~/.cache/Microsoft/DeveloperTools, on by default in onnxruntime 1.32) are not written."""
    import os
    import subprocess
    import sys

    home, work, cache = tmp_path / "home", tmp_path / "work", tmp_path / "cache"
    home.mkdir(), work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORT_", "XDG_", "ONNXPROBE_"))}
    env.update(HOME=str(home), ONNXPROBE_CACHE_DIR=str(cache))
    for argv in (["layers", str(sample_path("cnn")), "--json", "r.json"], ["diff", str(sample_path("mlp")), str(sample_path("mlp"))],
                 ["grad", str(sample_path("mlp"))]):
        r = subprocess.run([sys.executable, "-m", "onnxprobe", *argv], cwd=work, env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
    assert [p.name for p in home.rglob("*")] == []
    assert [p.name for p in work.iterdir()] == ["r.json"]


@pytest.fixture
def dataset(copies):
    import numpy as np

    (copies / "data").mkdir()
    np.savez(copies / "data" / "b0.npz", image=np.random.default_rng(0).random((1, 3, 32, 32), dtype=np.float32))
    # a pipeline that leaves a mark when it is run: a refusal must come before any sample is drawn
    (copies / "pipe.py").write_text("import pathlib\nimport numpy as np\n\ndef f():\n"
                                    "    pathlib.Path('ran').touch()\n"
                                    "    yield {'image': np.zeros((1, 3, 32, 32), np.float32)}\n")
    return copies


@pytest.mark.parametrize("argv,target", [
    (["grad", "cnn.onnx", "--inputs-dir", "data", "--export", "data/b0.npz"], "data/b0.npz"),
    (["grad", "cnn.onnx", "--inputs-dir", "data/b0.npz", "--export", "data/b0.npz"], "data/b0.npz"),
    (["grad", "cnn.onnx", "--inputs-from", "pipe.py:f", "--export", "pipe.py"], "pipe.py"),
    (["grad", "cnn.onnx", "--inputs-from", "pipe.py:f", "--save-grads", "pipe.py"], "pipe.py"),
    (["grad", "cnn.onnx", "--inputs-dir", "data", "--save-grads", "data/b0.npz"], "data/b0.npz"),
    (["layers", "cnn.onnx", "--inputs-from", "pipe.py:f", "--json", "pipe.py"], "pipe.py"),
    (["layers", "cnn.onnx", "--inputs-dir", "data", "--overlay", "data/b0.npz"], "data/b0.npz"),
    (["diff", "cnn.onnx", "cnn_b.onnx", "--inputs-from", "pipe.py:f", "--netron", "pipe.py"], "pipe.py"),
], ids=["export-batch", "export-stacked", "export-pipeline", "save-grads-pipeline", "save-grads-batch", "layers-json",
        "layers-overlay", "diff-netron"])
def test_a_dataset_file_is_refused_as_an_output_before_any_work(dataset, monkeypatch, argv, target):
    monkeypatch.chdir(dataset)
    before = digest(dataset / target)
    r = runner.invoke(app, argv)
    assert r.exit_code == 2 and f"{target}: is an input file; refusing to overwrite it" in r.output, r.output
    assert digest(dataset / target) == before
    assert not (dataset / "ran").exists()  # refused before the dataset ran
    assert not (dataset / "cnn_bw.onnx").exists() and "norm" not in r.output  # nothing written, no table


def test_a_debug_script_cannot_save_over_itself(dataset, monkeypatch):
    monkeypatch.chdir(dataset)
    for name in ("s.txt", "s.html"):
        (dataset / name).write_text(f"save html {name}\n")
        before = digest(dataset / name)
        r = runner.invoke(app, ["debug", "cnn.onnx", "--script", name])
        assert r.exit_code == 1 and f"{name}: is the running --script file; refusing to overwrite it" in r.output, r.output
        assert digest(dataset / name) == before


def test_a_users_python_file_gets_no_bytecode_beside_it(tmp_path, monkeypatch):
    """--inputs-from FILE.py:FUNC and --vs-torch FILE.py:FUNC import the user's file: Python wrote its bytecode
    to FILE's folder (__pycache__/FILE.cpython-3XX.pyc), a file the user never asked for, in a folder onnxprobe
    was given only to read. The hostile corpus's --inputs-from cases caught it only where bytecode is written
    (CI), not under PYTHONDONTWRITEBYTECODE=1; this test writes it in any environment."""
    import sys

    pytest.importorskip("torch")
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    user, marks = tmp_path / "user", tmp_path / "marks"
    user.mkdir(), marks.mkdir()
    imported = f"open({str(marks)!r} + '/' + __name__, 'w').close()\n"  # proof that the file was imported
    (user / "pipe.py").write_text("import numpy as np\n" + imported + "\ndef f():\n"
                                  "    yield {'x': np.ones((4, 16), np.float32)}\n")
    (user / "mod.py").write_text("import torch\n" + imported + "\ndef build():\n"
                                 "    return torch.nn.Linear(16, 8), (torch.ones(4, 16),)\n")
    for argv in (["layers", str(sample_path("mlp")), "--inputs-from", f"{user / 'pipe.py'}:f"],
                 ["diff", str(sample_path("mlp")), "--vs-torch", f"{user / 'mod.py'}:build"]):
        CliRunner().invoke(app, argv)  # the verdict is not the point: what is left in the folder is
    assert len(list(marks.iterdir())) == 2
    assert sorted(p.name for p in user.iterdir()) == ["mod.py", "pipe.py"]
    assert not sys.dont_write_bytecode  # restored


@pytest.mark.parametrize("argv", [
    ["layers", "mlp.onnx", "--json", "twin.onnx"],
    ["layers", "mlp.onnx", "--save", "twin.onnx"],
    ["inspect", "mlp.onnx", "--json", "twin.onnx"],
    ["grad", "mlp.onnx", "--export", "twin.onnx"],
    ["mark", "mlp.onnx", "-o", "twin.onnx"],
    ["diff", "cnn.onnx", "cnn_b.onnx", "--json", "twin.onnx"],
], ids=["layers-json", "layers-save", "inspect-json", "grad-export", "mark-o", "diff-model-b"])
def test_a_hard_link_to_an_input_is_that_input(copies, monkeypatch, argv):
    """Another name of the model's file (a hard link: its own real path, the same file) is the model: written
    over, it stops being the model's other name (the write renames a new file over it), so it is refused like
    the model's own path, before any work."""
    import os

    monkeypatch.chdir(copies)
    source = argv[2] if argv[0] == "diff" else argv[1]
    os.link(copies / source, copies / argv[-1])
    before = (copies / argv[-1]).stat().st_ino
    r = runner.invoke(app, argv)
    assert r.exit_code == 2 and "refusing to overwrite" in r.output, r.output
    assert (copies / argv[-1]).stat().st_ino == before == (copies / source).stat().st_ino  # still one file


def test_an_input_deleted_since_leaves_its_inode_to_other_files(tmp_path):
    """A process that goes on (a notebook, a test run) records every input it read; a file deleted since frees its
    inode to the next file made, which is not that input: an output there is written, not refused as "an input
    model" (an output's inode reused from an earlier test's input failed `mark -o` in the suite). The same inode under
    the input's own path, or under another name while that path still names it (a hard link), is still the input."""
    import os

    from onnxprobe import fileio

    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    a.write_bytes(b"read")
    fileio.protect(a, "an input model")
    os.link(a, b)  # b: another name of the input, same inode
    assert fileio.input_kind(b) == "an input model" and fileio.input_kind(a) == "an input model"
    with pytest.raises(UsageError, match="refusing to overwrite"):
        fileio.refuse_inputs(b, "--json")
    os.remove(a)  # the input's path is gone: b's inode no longer names what was read there
    assert fileio.input_kind(b) is None
    fileio.refuse_inputs(b, "--json")  # nothing raised
    a.write_bytes(b"new")  # a new file at the input's path is still refused by its path
    assert fileio.input_kind(a) == "an input model"
