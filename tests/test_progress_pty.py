"""Progress on stderr whenever stderr is a terminal, whatever stdout is: run in a pseudo-terminal (pexpect)
with stdout piped to a file, the counts of what is being done show on the terminal (runs of a chunked
--save, gradients checked by grad --check, batches of a dataset); the piped stdout gets the table and no
control sequence; with stderr not a terminal, nothing is drawn."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import ROOT, sample_path

pexpect = pytest.importorskip("pexpect")
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
ONNXPROBE = str(ROOT / ".venv" / "bin" / "onnxprobe") if (ROOT / ".venv" / "bin" / "onnxprobe").exists() else "onnxprobe"
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\r")
Q = shlex.quote  # a checkout or temporary folder may have spaces in its path: every path in a command is quoted


def terminal_env(tmp_path) -> dict[str, str]:
    """The environment of a command in the pseudo-terminal: a terminal that draws (TERM=xterm: CI may have
    TERM=dumb or none, for which Rich draws nothing), no width or colour settings of the caller's, and the
    plan cache in this test's folder (not ~/.cache/onnxprobe: ONNXPROBE_ settings are left out)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ONNXPROBE_", "NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES"))}
    env.update(TERM="xterm", ONNXPROBE_CACHE_DIR=str(tmp_path / "cache"))
    return env


def in_terminal(command: str, tmp_path) -> tuple[str, str]:
    """(what the terminal showed, what went to the pipe) for ``command | cat > file``."""
    out = tmp_path / "stdout.txt"
    child = pexpect.spawn("/bin/bash", ["-c", f"{command} | cat > {Q(str(out))}"], encoding="utf-8", timeout=300,
                          dimensions=(40, 160), env=terminal_env(tmp_path))
    screen = child.read()
    child.close()
    assert child.exitstatus == 0, screen[-2000:]
    return ANSI.sub("", screen), out.read_text()


def test_chunked_save_shows_runs(tmp_path):
    screen, piped = in_terminal(f"{Q(ONNXPROBE)} layers {Q(str(sample_path('cnn')))} --all --save {Q(str(tmp_path / 'x.npz'))} "
                                "--max-memory 1K", tmp_path)
    counts = [tuple(map(int, m)) for m in re.findall(r"(\d+)/(\d+) runs", screen)]
    assert counts and counts[-1][0] == counts[-1][1] > 1, screen[-1000:]
    assert "\x1b" not in piped and "min" in piped and "NaN" in piped


def test_grad_check_shows_gradients_checked(tmp_path):
    screen, piped = in_terminal(f"{Q(ONNXPROBE)} grad {Q(str(sample_path('cnn')))} --check", tmp_path)
    counts = [tuple(map(int, m)) for m in re.findall(r"(\d+)/(\d+) gradients checked", screen)]
    assert counts and counts[-1][0] == counts[-1][1] == 13, screen[-1000:]
    assert "\x1b" not in piped and "check" in piped


def test_dataset_shows_batches(tmp_path):
    data = tmp_path / "d"
    data.mkdir()
    for i in range(4):
        np.savez(data / f"b{i}.npz", image=np.random.default_rng(i).random((1, 3, 32, 32), dtype=np.float32))
    screen, _ = in_terminal(f"{Q(ONNXPROBE)} layers {Q(str(sample_path('cnn')))} --inputs-dir {Q(str(data))}", tmp_path)
    assert re.search(r"4/4 batches", screen), screen[-1000:]


def test_nothing_drawn_when_stderr_is_not_a_terminal(tmp_path):
    r = subprocess.run([ONNXPROBE, "layers", str(sample_path("cnn")), "--all", "--save", str(tmp_path / "x.npz"),
                        "--max-memory", "1K"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stderr and "runs" not in r.stderr


def test_time_left_only_after_two_seconds():
    from onnxprobe.report.progress import ETA_AFTER, EtaColumn

    early = SimpleNamespace(elapsed=ETA_AFTER / 2, finished=False, time_remaining=30.0, total=10, finished_time=None)
    later = SimpleNamespace(elapsed=ETA_AFTER + 1, finished=False, time_remaining=75.0, total=10, finished_time=None)
    assert EtaColumn().render(early).plain == ""
    assert EtaColumn().render(later).plain == "left 0:01:15"


def _raw_terminal(command: str, columns: int, tmp_path) -> str:
    """What a terminal ``columns`` wide got (escape sequences and all) for ``command > /dev/null``."""
    child = pexpect.spawn("/bin/bash", ["-c", f"{command} > /dev/null"], encoding="utf-8", timeout=300,
                          dimensions=(40, columns), env=terminal_env(tmp_path))
    screen = child.read()
    child.close()
    assert child.exitstatus == 0, screen[-2000:]
    return screen


@pytest.mark.parametrize("columns", [50, 60, 80])
def test_the_count_survives_a_narrow_terminal(columns, tmp_path):
    """The label is shortened (then the bar left out) before the count would be cropped off the line."""
    screen = _raw_terminal(f"{Q(ONNXPROBE)} grad {Q(str(sample_path('cnn')))} --check", columns, tmp_path)
    counts = [tuple(map(int, m)) for m in re.findall(r"(\d+)/(\d+)(?:\x1b\[0m)? gradients checked", screen)]
    assert counts and counts[-1] == (13, 13), screen[-1000:]
    lines = [ANSI.sub("", ln) for ln in re.split(r"\r|\n", screen)]
    assert all(len(ln) <= columns for ln in lines), max(lines, key=len)


@pytest.mark.parametrize("columns", range(20, 201, 7))
def test_a_bar_line_fits_its_width(columns):
    from onnxprobe.report.progress import ETA, TIME, bar_layout

    label, bar, time, eta = bar_layout("checking the gradients of a_model_with_a_long_name.onnx", "gradients checked",
                                       1234, columns)
    used = 1 + 1 + 9 + 1 + len("gradients checked") + (len(label) + 1 if label else 0) + (bar + 1 if bar else 0)
    used += (TIME + 1 if time else 0) + (ETA + 1 if eta else 0)
    # within the width; where the spinner, count and unit alone are wider, nothing else is shown (the count
    # comes before the unit, so a crop takes the unit's end)
    assert used <= columns - 1 or not (label or bar or time or eta), (columns, label, bar, time, eta)
    assert not label or len(label) >= 12


@pytest.mark.parametrize("name", ["st[reverse]x.onnx", "b\x07el{task}.onnx"])
def test_a_file_name_is_shown_as_it_is(tmp_path, name):
    """A model's file name in the progress label is text: '[reverse]' is no Rich markup (reverse video),
    '{task}' no format field, and a bell shows as the escape '\\x07'."""
    import shutil

    path = tmp_path / name
    shutil.copy(sample_path("cnn"), path)
    for command in (f"{Q(ONNXPROBE)} layers {Q(str(path))}", f"{Q(ONNXPROBE)} grad {Q(str(path))} --check"):
        screen = _raw_terminal(command, 160, tmp_path)
        shown = name.replace("\x07", "\\x07")
        assert shown in screen, screen[-1000:]
        assert "\x07" not in screen and "\x1b[7m" not in screen


def test_a_label_that_fits_whole_is_not_cut_for_the_time():
    """At 80 columns `grad --check` showed 'checking the g…ents of transformer_block.onnx 25/25 gradients
    checked 0:00:01': the time so far was laid out first and the label cut mid-word for it."""
    from onnxprobe.report.progress import bar_layout

    label = "checking the gradients of transformer_block.onnx"
    text, bar, time, eta = bar_layout(label, "gradients checked", 25, 80)
    assert text == label and not time and not bar
    text, bar, time, eta = bar_layout("checking transformer_block.onnx", "gradients checked", 25, 80)
    assert text == "checking transformer_block.onnx" and time and eta
    # too long even alone: the label shortened to all the room, the time left out (it goes before the label)
    text, bar, time, eta = bar_layout("checking " + "x" * 100 + ".onnx", "gradients checked", 25, 80)
    assert not time and "…" in text and text.endswith(".onnx") and len(text) == 80 - 1 - 25 - 1  # spinner, count, unit: 25


@pytest.mark.parametrize("columns", [50, 60])
def test_the_time_is_shown_only_beside_the_whole_label(columns, tmp_path):
    """The label says what is running, the count how far: at 50 columns `grad --check` on
    transformer_block.onnx read 'chec…block.onnx 10/13 gradients checked 0:00:00' while at 60 it read the
    label whole and no time. The time (and the bar) go before the label is cut, at every width."""
    import shutil

    path = tmp_path / "transformer_block.onnx"
    shutil.copy(sample_path("cnn"), path)
    screen = _raw_terminal(f"{Q(ONNXPROBE)} grad {Q(str(path))} --check", columns, tmp_path)
    lines = {ANSI.sub("", ln) for ln in re.split(r"\r|\n", screen) if "gradients checked" in ANSI.sub("", ln)}
    assert lines, screen[-1000:]
    for line in lines:
        assert "…" not in line or not re.search(r"\d:\d\d:\d\d", line), line


@pytest.mark.parametrize("label", ["checking cnn.onnx", "checking transformer_block.onnx",
                                   "forward and backward on transformer_block.onnx", "checking " + "x" * 100 + ".onnx"])
def test_a_wider_terminal_never_shows_less(label):
    """Narrowing the terminal leaves out the bar, then the time left, then the time so far, then shortens the
    label, then leaves it out: a wider terminal shows at least what a narrower one does."""
    from onnxprobe.report.progress import bar_layout

    before = None
    for width in range(20, 201):
        text, bar, time, eta = bar_layout(label, "gradients checked", 25, width)
        assert not (time and text != label), (width, text, time)
        assert not (eta and not time) and not (bar and not eta), (width, bar, time, eta)
        if before is not None:
            assert len(text) >= len(before[0]) and bar >= before[1] and time >= before[2] and eta >= before[3], \
                (width, before, (text, bar, time, eta))
        before = text, bar, time, eta
