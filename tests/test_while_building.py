"""What a front end leaves to do while a repeated request's session builds (``runtime.direct.while_building``): the
command line's report and Rich are imported in the build's shadow, after the session starts and before it runs,
not on the way to it nor after the run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from conftest import sample_path
from onnxprobe.runtime import direct

_PROBE = """
import sys
from onnxprobe.runtime import direct
seen = []
init, run = direct.Pending.__init__, direct.Pending.run
def look(when):
    seen.append((when, *(m in sys.modules for m in ("onnx", "rich.console", "{report}"))))
def at_start(self, *a, **k):
    look("start")
    init(self, *a, **k)
def at_run(self, *a, **k):
    look("run")
    return run(self, *a, **k)
direct.Pending.__init__, direct.Pending.run = at_start, at_run
from onnxprobe.cli.main import app
try:
    app(sys.argv[1:], prog_name="onnxprobe")
except SystemExit as e:
    code = e.code
print("SEEN", seen, file=sys.stderr)
sys.exit(code)
"""


def _scaled(src: Path, dst: Path) -> str:
    m = onnx.load(str(src))
    for t in m.graph.initializer:
        a = numpy_helper.to_array(t)
        if a.dtype == np.float32:
            t.CopyFrom(numpy_helper.from_array((a * 1.01).astype(np.float32), t.name))
    onnx.save(m, str(dst))
    return str(dst)


@pytest.mark.parametrize("command", ["layers", "diff"])
def test_a_served_command_starts_its_session_first_and_imports_its_report_while_it_builds(tmp_path, command):
    """The second run of a command is served from the plan cache (runtime.direct; api.diff_lean for diff): its session
    starts before onnx, the comparison code and the report's renderer (Rich's console) are imported (a heavy import
    put back on the way to the API would start it after them), and the report is in by the run (imported while the
    session builds, ``while_building``), not after it. The first run prepares nothing (no entry yet)."""
    env = {**os.environ, "ONNXPROBE_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    env.pop("ONNXPROBE_NO_CACHE", None)
    model = str(sample_path("cnn"))
    args = [command, model, *([_scaled(sample_path("cnn"), tmp_path / "b.onnx")] if command == "diff" else []),
            "--all", "--device", "cpu"]
    code = _PROBE.replace("{report}", f"onnxprobe.report.{command}")
    runs = [subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=300)
            for _ in range(2)]
    table = [[ln for ln in r.stdout.splitlines() if " · run " not in ln] for r in runs]  # the footer's times differ
    assert runs[0].returncode == runs[1].returncode and table[0] == table[1] and len(table[0]) > 3, runs[1].stderr[-2000:]
    seen = [[ln for ln in r.stderr.splitlines() if ln.startswith("SEEN")] for r in runs]
    assert seen[0] == ["SEEN []"], runs[0].stderr[-2000:]
    # onnx comes in before the run only with diff's normal path, which checks the request (layers never imports it)
    assert seen[1] == [f"SEEN [('start', False, False, False), ('run', {command == 'diff'}, True, True)]"], runs[1].stderr[-2000:]


def test_the_work_runs_once_inside_and_a_failure_is_left_to_the_caller():
    done = []

    def bad():
        raise ImportError("no such module")

    direct.meanwhile()  # outside: nothing to do
    with direct.while_building(lambda: done.append(1), bad, lambda: done.append(2)):
        direct.meanwhile()
        direct.meanwhile()  # once: the first session started within
    assert done == [1, 2]
    with direct.while_building(lambda: done.append(3)):
        pass
    direct.meanwhile()  # left behind by no context
    assert done == [1, 2]


def test_a_ctrl_c_in_the_work_ends_the_request():
    def interrupted():
        raise KeyboardInterrupt

    with direct.while_building(interrupted), pytest.raises(KeyboardInterrupt):
        direct.meanwhile()
