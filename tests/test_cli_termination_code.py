"""A SIGTERM ends any command with exit 143, whatever turns the handler's SystemExit into another on its way out:
Ray's wait (`--ray`) caught it inside its C++ loop and raised SystemExit(1) of its own (a killed CI job read as a
failed verdict, nothing said), and Ray's own handler, in place while Ray starts, exited with 15."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from onnxprobe.runtime import ray_pool

ROOT = Path(__file__).resolve().parents[1]

# a command that, as Ray's wait does, turns the SystemExit raised in it into a SystemExit(1)
SCRIPT = """
import os, signal, sys, time
from onnxprobe.cli import main

def swallowing(argv):
    def app():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        except SystemExit:
            raise SystemExit(1)
    return app

main.app_for = swallowing
main.run()
"""


def _run(script: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.skipif(not hasattr(signal, "SIGTERM") or os.name != "posix", reason="POSIX signals")
def test_sigterm_exits_143_when_a_library_turns_it_into_exit_1():
    r = _run(SCRIPT)
    assert r.returncode == 143, (r.returncode, r.stderr)


def test_a_sigterm_while_ray_starts_exits_143(monkeypatch):
    class Exceptions:
        RayError = RuntimeError

    class FakeRay:
        exceptions = Exceptions

        @staticmethod
        def init(**kw):
            raise SystemExit(signal.SIGTERM)  # Ray's handler: sys.exit(signum)

    def ours(signum, frame):
        raise SystemExit(128 + signum)

    old = signal.signal(signal.SIGTERM, ours)
    try:
        with pytest.raises(SystemExit) as e:
            ray_pool._init(FakeRay, ray_pool.RayOptions(workers=1), None)
        assert e.value.code == 128 + signal.SIGTERM
    finally:
        signal.signal(signal.SIGTERM, old)


# a command in which the SIGTERM lands inside a __del__ (as in subprocess.Popen's while Ray shuts down), where Python
# prints "Exception ignored in ..." and swallows the handler's SystemExit: the command went on, and ended with exit 0
SWALLOWED = """
import os, signal, sys, time
from onnxprobe.cli import main

class Finalized:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(3):
            pass

def landing_in_a_del(argv):
    def app():
        f = Finalized()
        del f
        time.sleep(5)
        print("went on")
    return app

main.app_for = landing_in_a_del
main.run()
"""


@pytest.mark.skipif(not hasattr(signal, "SIGTERM") or os.name != "posix", reason="POSIX signals")
def test_a_sigterm_swallowed_in_a_finalizer_still_ends_the_command_with_143_and_says_nothing():
    r = _run(SWALLOWED)
    assert (r.returncode, r.stdout, r.stderr) == (143, "", ""), (r.returncode, r.stdout, r.stderr)
