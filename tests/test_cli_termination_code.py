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


# a module whose import is hit by SIGTERM (or Ctrl-C) while it runs: raised there, the exception broke the import (a
# C extension's: onnxruntime's 'ImportError: initialization failed', onnx's abort or segfault)
IMPORTED = """
import os, signal, sys, time
sys.path.insert(0, sys.argv[1])
from onnxprobe.cli.termination import exit_on_termination
exit_on_termination()
try:
    import slow_module
    print("imported", slow_module.DONE, flush=True)
    time.sleep(5)
    print("went on")
except SystemExit as e:
    print("ended", e.code)
except KeyboardInterrupt:
    print("interrupted")
"""


@pytest.mark.skipif(not hasattr(signal, "SIGTERM") or os.name != "posix", reason="POSIX signals")
@pytest.mark.parametrize("sig, said", [("SIGTERM", "ended 143"), ("SIGHUP", "ended 129"), ("SIGINT", "interrupted")])
def test_a_signal_during_an_import_lands_after_it(tmp_path, sig, said):
    (tmp_path / "slow_module.py").write_text(f"import os, signal, time\nos.kill(os.getpid(), signal.{sig})\n"
                                             "for _ in range(30):\n    time.sleep(0.01)\nDONE = True\n")
    r = subprocess.run([sys.executable, "-c", IMPORTED, str(tmp_path)], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.stdout.split("\n")[:2] == ["imported True", said], (r.stdout, r.stderr)


# a terminal that hung up: every write to stderr fails (EIO), the handlers' own messages too; the exception left run()
# without finish, and the interpreter's teardown aborted (exit 134) or exited 1, not 129
HUNG_UP = """
import errno, sys
from onnxprobe.cli import main
from onnxprobe.cli.termination import SIGNALLED

class Gone:
    def write(self, s):
        raise OSError(errno.EIO, "Input/output error")
    def flush(self):
        raise OSError(errno.EIO, "Input/output error")

def hung_up(argv):
    def app():
        SIGNALLED.append(129)  # the SIGHUP the closed terminal sent, whose SystemExit the failed write displaced
        sys.stderr = Gone()
        raise OSError(errno.EIO, "Input/output error")
    return app

main.app_for = hung_up
main.run()
"""


@pytest.mark.skipif(os.name != "posix", reason="POSIX exit codes")
def test_a_terminal_that_hung_up_ends_the_command_with_129():
    r = _run(HUNG_UP)
    assert (r.returncode, r.stdout) == (129, ""), (r.returncode, r.stderr[-500:])
