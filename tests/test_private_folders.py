"""The temporary folders onnxprobe makes for itself (a weight copy while a session builds, a local Ray cluster's
session) are named with their process's id, and a later one removes those whose process has ended without removing
its own: a SIGKILL, or a signal that landed while Ray's processes still wrote in it (6 of 25 interrupted Ray runs left
45 log files and an auth token in /tmp, for good)."""

from __future__ import annotations

import os
import tempfile

from onnxprobe.fileio import private_folder


def _dead_pid() -> int:
    pid = 999_999
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except OSError:
            pass
        pid -= 1


def test_a_new_private_folder_sweeps_those_of_ended_processes(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead, live, other = (tmp_path / f"onnxprobe-ray-{_dead_pid()}-x", tmp_path / f"onnxprobe-ray-{os.getppid()}-y",
                         tmp_path / "onnxprobe-ray-notapid")
    for d in (dead, live, other):
        d.mkdir()
        (d / "session.log").write_text("...")
    made = private_folder("onnxprobe-ray-")
    assert os.path.basename(made).startswith(f"onnxprobe-ray-{os.getpid()}-") and os.path.isdir(made)
    assert not dead.exists() and live.exists() and other.exists()
    assert (os.stat(made).st_mode & 0o777) == 0o700
