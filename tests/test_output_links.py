"""An output path that is a symbolic link is written through, never replaced by a file of its own (every
writer renamed a temporary file over the path itself: ``--json /dev/stdout`` with stdout redirected to
a file replaced the machine's /dev/stdout link with a regular file). A link to this process's standard
output redirected to a file is refused in one line (rewriting that file would clobber the stream);
one to a pipe is written into the pipe. The oracle: os.lstat, json, onnx and numpy reading the files."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import onnx
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app

runner = CliRunner()
CNN = str(sample_path("cnn"))


def _is_link(p) -> bool:
    return os.path.islink(p)


def test_json_save_and_a_model_go_through_links_to_files(tmp_path):
    links = {}
    for name in ("r.json", "acts.npz", "m.onnx"):
        (tmp_path / f"link_{name}").symlink_to(tmp_path / f"real_{name}")
        links[name] = tmp_path / f"link_{name}"
    r = runner.invoke(app, ["layers", CNN, "--json", str(links["r.json"]), "--save", str(links["acts.npz"])])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["mark", CNN, "-o", str(links["m.onnx"]), "--all"])
    assert r.exit_code == 0, r.output
    for name, link in links.items():
        assert _is_link(link), f"{name}: the link was replaced by a file"
    assert json.loads((tmp_path / "real_r.json").read_text())["tensors"]
    assert set(np.load(tmp_path / "real_acts.npz").files) >= {"conv1_out", "logits"}
    onnx.checker.check_model(onnx.load(str(tmp_path / "real_m.onnx")))


def _cli(args, stdout) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "100"}
    return subprocess.run([sys.executable, "-m", "onnxprobe", *args], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, env=env, timeout=300)


def test_a_link_to_a_redirected_stdout_is_refused_and_stays_a_link(tmp_path):
    link = tmp_path / "mystdout"
    link.symlink_to("/proc/self/fd/1")
    # named by its flag, as every bad flag value is; '-' offered to --json alone, which takes it (mark's -o said "give
    # '-' for stdout", which -o refuses)
    for args, lead, dash in ((["layers", CNN, "--json", str(link)], "--json", True),
                             (["mark", CNN, "-o", str(link), "--all"], "-o/--output", False)):
        with open(tmp_path / "out.txt", "w") as out:
            r = _cli(args, out)
        assert r.returncode == 2, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "standard output" in lines[0] and ("--json -" in lines[0]) == dash, r.stderr
        assert lines[0].startswith(f"onnxprobe: error: {lead} {link}: "), lines[0]
        assert _is_link(link) and os.readlink(link) == "/proc/self/fd/1"


def test_a_link_to_stdout_on_a_pipe_writes_into_the_pipe(tmp_path):
    link = tmp_path / "mystdout"
    link.symlink_to("/proc/self/fd/1")
    r = _cli(["layers", CNN, "--json", str(link), "--format", "csv"], subprocess.PIPE)
    assert r.returncode == 0, r.stderr
    assert '"tensors"' in r.stdout and _is_link(link)


def test_the_file_stdout_or_stderr_is_redirected_to_is_refused_by_its_own_name(tmp_path):
    """`layers M --format csv --json same.txt > same.txt`: the JSON replaced the file the CSV was being written to
    (the CSV lost, exit 0), where the same file named through /dev/stdout is refused; so it is by its own name now,
    and stderr's file too (its note lost)."""
    same = tmp_path / "same.txt"
    with open(same, "w") as out:
        r = _cli(["layers", CNN, "--format", "csv", "--json", str(same)], out)
    assert r.returncode == 2 and "is this command's standard output" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    err = tmp_path / "err.txt"
    with open(err, "w") as e:
        r = subprocess.run([sys.executable, "-m", "onnxprobe", "layers", CNN, "--json", str(err)], stdout=subprocess.PIPE,
                           stderr=e, text=True, env={**os.environ, "COLUMNS": "100"}, timeout=300)
    assert r.returncode == 2 and "is this command's standard error" in err.read_text()


def test_a_file_written_again_keeps_its_permissions(tmp_path):
    """The temporary-and-rename write gave a report locked to 0600 the umask's 0644; a model written by mark too."""
    import stat

    out, model = tmp_path / "r.json", tmp_path / "m.onnx"
    out.write_text("{}")
    model.write_bytes(b"old")
    os.chmod(out, 0o600)
    os.chmod(model, 0o640)
    r = runner.invoke(app, ["layers", CNN, "--json", str(out)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["mark", CNN, "-o", str(model), "--all"])
    assert r.exit_code == 0, r.output
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and json.loads(out.read_text())["tensors"]
    assert stat.S_IMODE(model.stat().st_mode) == 0o640 and onnx.load(str(model)).graph.node
