"""Batches that fail for different reasons: the one error gives each of the first few its own reason (it gave
the first one's, then only names: "a.npz: ...; also b.npz"), the rest counted and named."""

from __future__ import annotations

import numpy as np
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app

runner = CliRunner()


def _layers(folder):
    return runner.invoke(app, ["layers", str(sample_path("dynamic_batch")), "--inputs-dir", str(folder)])


def test_each_failing_batch_says_its_own_reason(tmp_path):
    x = np.zeros((1, 3, 8, 8), np.float32)
    np.savez(tmp_path / "a.npz", x=x.astype(np.float64))  # wrong dtype
    np.savez(tmp_path / "b.npz", x=x, extra=np.zeros(3))  # an input the model lacks
    np.savez(tmp_path / "c.npz", x=np.zeros((1, 3, 8), np.float32))  # wrong rank
    np.savez(tmp_path / "d.npz", x=x)  # fine
    r = _layers(tmp_path)
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.output
    line = r.stderr
    assert "3 of 4 batches failed" in line
    a, b, c = (line.index(f"{k}.npz: ") for k in "abc")
    assert a < b < c, line
    assert "float64" in line[a:b] and "unknown input name 'extra'" in line[b:c] and "'extra'" not in line[a:b]
    assert "d.npz" not in line


def test_many_failures_name_the_first_few_with_reasons_and_count_the_rest(tmp_path):
    for k in range(6):
        np.savez(tmp_path / f"b{k}.npz", x=np.zeros((1, 3, 8, 8), np.float64))
    r = _layers(tmp_path)
    line = r.stderr.strip()
    assert r.exit_code == 2 and len(line.splitlines()) == 1, r.output
    assert all(f"b{k}.npz: " in line for k in range(3)) and "and 3 more (b3.npz, b4.npz, b5.npz)" in line, line


def test_a_batch_named_with_a_newline_keeps_its_reason_on_the_line(tmp_path):
    """A file named 'red\\nline.npz' (a control character too) cut the one line at its newline: the error
    read '1 of 2 batches failed, no result: red' and said nothing of why. Its name is escaped there."""
    x = np.zeros((1, 3, 8, 8), np.float32)
    np.savez(tmp_path / "\x1b[31mred\nline.npz", x=x.astype(np.float64))  # wrong dtype
    np.savez(tmp_path / "ok.npz", x=x)
    r = _layers(tmp_path)
    line = r.stderr.strip()
    assert r.exit_code == 2 and len(line.splitlines()) == 1, r.output
    assert "\x1b" not in line and "red\\nline.npz" in line and "float64" in line, line
