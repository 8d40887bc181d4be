"""Notes on stderr: folded between words at a terminal's width, one line per note on a pipe (for grep)."""

from __future__ import annotations

import fcntl
import io
import os
import select
import struct
import termios

import pytest

from onnxprobe.cli import output

LONG = ("the input 'pixel_values' has dynamic dimensions ['batch', 'height'] that were set to 1; pass --shape "
        "pixel_values=1x3x224x224 for other sizes, or --input with values")


@pytest.fixture
def terminal():
    """(a stream on a pseudo-terminal 80 columns wide, the descriptor its output is read from)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    stream = open(slave, "w", closefd=True)
    yield stream, master
    stream.close()
    os.close(master)


def test_a_note_folds_between_words_at_the_terminal_width(terminal, monkeypatch):
    stream, master = terminal
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr("sys.stderr", stream)  # here, not in the fixture: pytest's capture resumes after it
    output.notes([LONG])
    stream.flush()
    assert select.select([master], [], [], 5)[0], "nothing written to the terminal"
    lines = os.read(master, 65536).decode().replace("\r\n", "\n").rstrip("\n").split("\n")
    assert len(lines) > 1 and all(len(ln) <= 80 for ln in lines)
    assert lines[0].startswith("onnxprobe: note: ") and all(ln.startswith("  ") for ln in lines[1:])
    assert " ".join(ln.strip() for ln in lines) == f"onnxprobe: note: {LONG}"  # no word cut or lost


def test_a_note_on_a_pipe_stays_one_line(monkeypatch):
    buf = io.StringIO()
    monkeypatch.setattr("sys.stderr", buf)
    output.notes([LONG, LONG])  # and the same note once
    assert buf.getvalue() == f"onnxprobe: note: {LONG}\n"
