"""Every command against the hostile corpus (tests/hostile.py): a non-zero exit code with one clear line
(or exit 0, with at most notes, for inputs that are legitimately fine), no traceback, no "internal error",
at most 5 lines on stderr, no raw control characters on either stream, no line forged by a name, input
files byte-identical, nothing written outside the declared outputs, and bounded memory where a file
claims more than it holds."""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hostile import CASES, SAMPLES
from onnxprobe.cli.main import app

runner = CliRunner()
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f\u202a-\u202e\u2066-\u2069]")
PEAK = """
import atexit, sys
from onnxprobe.cli.main import run

def peak():  # at exit: the console entry point ends the process once atexit handlers ran (cli.main.finish)
    hwm = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1]
    print("PEAK_KB", hwm, file=sys.stderr)

atexit.register(peak)
sys.argv = ["onnxprobe"] + sys.argv[1:]
run()
"""


def _snapshot(folder: Path) -> dict[str, str]:
    out = {}
    for root in (folder, SAMPLES):
        for p in root.rglob("*"):
            if p.is_file() and not p.is_symlink():
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest() if p.stat().st_size < 2**27 else f"size:{p.stat().st_size}"
    return out


class _Timeout(Exception):
    pass


def _run(case, argv: list[str]) -> tuple[int, str, str, int | None]:
    if case.subprocess:
        cap = case.address_space_gb

        def limit() -> None:  # in the child: what it and its own children (a runtime's worker) may map
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (cap * 2**30, cap * 2**30))

        r = subprocess.run([sys.executable, "-c", PEAK, *argv], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "COLUMNS": "120"}, preexec_fn=limit if cap else None)
        lines = [ln for ln in r.stderr.splitlines() if not ln.startswith("PEAK_KB")]
        peak = next(int(ln.split()[1]) for ln in r.stderr.splitlines() if ln.startswith("PEAK_KB")) // 1024
        return r.returncode, r.stdout, "\n".join(lines) + ("\n" if lines else ""), peak

    def alarm(*_):
        raise _Timeout()

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(300)
    try:
        r = runner.invoke(app, argv, env={"COLUMNS": "120", "ONNXPROBE_DEBUG": ""}, input=case.stdin)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    if isinstance(r.exception, _Timeout):
        pytest.fail(f"{case.name}: did not finish within 300 s")
    return r.exit_code, r.stdout, r.stderr, None


def _specials() -> dict[str, bool]:
    return {p: Path(p).is_char_device() for p in ("/dev/null", "/dev/full")}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_input(case, tmp_path):
    if not case.as_root and os.geteuid() == 0:
        pytest.skip("root writes into read-only folders: the case says nothing here (the *_under_a_file cases do)")
    folder = tmp_path / "case"
    folder.mkdir()
    argv = case.build(folder)
    before = _snapshot(folder)
    dev = set(os.listdir("/dev"))
    code, out, err, peak = _run(case, argv)
    try:
        where = f"{case.name}: {argv[:3]} -> exit {code}\nstdout: {out[-2000:]}\nstderr: {err[-2000:]}"
        assert code in case.codes, where
        assert "Traceback" not in out + err and "internal error" not in out + err, where
        assert len(err.splitlines()) <= 5, where
        assert not RAW_CONTROL.search(out + err), where
        assert not any(ln.startswith("onnxprobe: error: FORGED") or ln.startswith("FORGED") for ln in (out + err).splitlines()), where
        if code == 0 or (case.verdict and code == 1 and "onnxprobe: error:" not in err):
            assert all(ln.startswith("onnxprobe: note:") for ln in err.splitlines()), where
        else:
            errors = [ln for ln in err.splitlines() if ln.startswith("onnxprobe: error:")]
            assert errors, where
        if case.needle is not None:
            assert case.needle in err + out, where
        if case.max_peak_mb is not None:
            assert peak is not None and peak <= case.max_peak_mb, f"{where}\npeak {peak} MB"
        assert all(_specials().values()), f"{where}\na device file was replaced: {_specials()}"
        assert set(os.listdir("/dev")) <= dev, f"{where}\nfiles written into /dev: {set(os.listdir('/dev')) - dev}"
        after = _snapshot(folder)
        changed = [p for p, h in before.items() if after.get(p) != h and p in after]
        assert not changed, f"{where}\ninput files changed: {changed}"
        allowed = {str(folder / o) for o in case.outputs} | {o for o in case.outputs if o.startswith("/")}
        new = [p for p in after if p not in before and p not in allowed and not p.endswith(".ro")]
        assert not new, f"{where}\nfiles written outside the declared outputs: {new}"
    finally:
        for p in folder.rglob("*"):  # read-only folders made by a case: let pytest clean them
            if p.is_dir():
                p.chmod(0o755)
