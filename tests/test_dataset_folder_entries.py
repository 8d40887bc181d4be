"""What a dataset folder holds beside its batches: dot-files (macOS's ``._x.npz``, ``.hidden.npz``) are not
read (they failed the run), and they, folders and other names (``X.NPZ``) are named in a note (they were
skipped without a word). Counted against the one batch's own shape."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app

runner = CliRunner()


@pytest.fixture
def folder(tmp_path):
    d = tmp_path / "ds"
    (d / "sub").mkdir(parents=True)
    x = np.random.default_rng(0).random((2, 3, 8, 8), np.float32)
    np.savez(d / "b0.npz", x=x)
    np.savez(d / "sub" / "b2.npz", x=x)
    np.save(d / "upper.npy", x)
    (d / "upper.npy").rename(d / "B1.NPZ")
    (d / "._b0.npz").write_bytes(b"\x00\x05\x16\x07Mac OS X resource fork")
    (d / ".hidden.npz").write_bytes(b"not a zip")
    return d, x


@pytest.mark.parametrize("command", [["layers"], ["grad"], ["diff", "--vs-opt-level", "all"]])
def test_dot_files_are_skipped_and_every_skipped_entry_is_named(folder, command):
    d, x = folder
    args = [command[0], str(sample_path("dynamic_batch")), *command[1:], "--inputs-dir", str(d), "--json", "-"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    notes = [n for n in got["notes"] if "skipped" in n]
    assert len(notes) == 1 and all(e in notes[0] for e in ("._b0.npz", ".hidden.npz", "B1.NPZ", "sub/")), got["notes"]
    assert ": b0.npz" not in notes[0] and " b0.npz" not in notes[0] and "4 entries" in notes[0]
    if command[0] == "layers":  # the one batch alone: conv_out is 2 x 4 x 8 x 8 of b0's samples
        row = next(t for t in got["tensors"] if t["name"] == "conv_out")
        assert row["count"] == x.shape[0] * 4 * 8 * 8


def test_a_folder_of_batches_only_has_no_such_note(tmp_path):
    np.savez(tmp_path / "b0.npz", x=np.zeros((1, 3, 8, 8), np.float32))
    r = runner.invoke(app, ["layers", str(sample_path("dynamic_batch")), "--inputs-dir", str(tmp_path), "--json", "-"])
    assert r.exit_code == 0 and not [n for n in json.loads(r.stdout)["notes"] if "skipped" in n], r.output


@pytest.mark.parametrize("command", [["layers"], ["grad"], ["diff", "--vs-opt-level", "all"]])
def test_a_batch_name_whose_link_leads_nowhere_fails_the_run_naming_it(tmp_path, command):
    """``b1.npz`` a symbolic link to a file that is gone (a dataset assembled from links, one target since
    deleted): a batch the user gave that cannot be read, so the run fails naming it, as a truncated .npz does;
    it was skipped with a note that said a batch is a .npz file, which it is by name, and the statistics
    were of the other batches only. A link to a real .npz is read as a batch."""
    d = tmp_path / "ds"
    d.mkdir()
    x = np.random.default_rng(0).random((2, 3, 8, 8), np.float32)
    np.savez(tmp_path / "real.npz", x=x)
    (d / "b0.npz").symlink_to(tmp_path / "real.npz")
    (d / "b1.npz").symlink_to(tmp_path / "gone.npz")
    args = [command[0], str(sample_path("dynamic_batch")), *command[1:], "--inputs-dir", str(d)]
    r = runner.invoke(app, args)
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "b1.npz" in lines[0] and "symbolic link" in lines[0] and "b0.npz" not in lines[0], r.stderr
    assert "Traceback" not in r.output
    (d / "b1.npz").unlink()
    r = runner.invoke(app, [*args, "--json", "-"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["batches"] == 1 if command[0] == "layers" else True


@pytest.mark.parametrize("target", ["gone", "loop"])
def test_an_inputs_dir_whose_link_leads_nowhere_says_so(tmp_path, target):
    """--inputs-dir itself a symbolic link to a folder since removed, or a loop of links: the error said
    "expected a folder of .npz files or one .npz" of a path the user made as one, not what is wrong with it
    (the same link given to --inputs said it leads to no file)."""
    link = tmp_path / "calib"
    link.symlink_to(tmp_path / "gone" if target == "gone" else link)
    for command in (["layers"], ["grad"], ["diff", "--vs-opt-level", "all"]):
        r = runner.invoke(app, [command[0], str(sample_path("dynamic_batch")), *command[1:], "--inputs-dir", str(link)])
        assert r.exit_code == 2, r.output
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "calib" in lines[0] and "symbolic link" in lines[0], r.stderr
        assert "Traceback" not in r.output
