"""Durations read in the unit that fits after rounding to three significant digits: a time just under a
unit's limit read '1e+03 µs' (999.7 µs), '1e+03 ms', '60 s' and '60 min 00 s' (the footers' 'run ...', the
--profile summary, progress times)."""

from __future__ import annotations

import pytest

from onnxprobe.text import duration


@pytest.mark.parametrize("seconds, words", [
    (0, "0 µs"), (8.4e-4, "840 µs"), (9.994e-4, "999 µs"), (9.997e-4, "1 ms"), (0.0123, "12.3 ms"),
    (0.9994, "999 ms"), (0.9997, "1 s"), (4.56, "4.56 s"), (59.4, "59.4 s"), (59.97, "1 min 00 s"),
    (316, "5 min 16 s"), (3599.7, "1 h 00 min"), (3720, "1 h 02 min"), (None, "-"),
])
def test_a_duration_never_reads_a_unit_past_its_limit(seconds, words):
    assert duration(seconds) == words
    assert "e+" not in duration(seconds)


@pytest.mark.parametrize("n, words", [
    (1023, "1023 B"), (1536, "1.5 KiB"), (1000 * 1024, "1000 KiB"), (1048000, "1023 KiB"), (1048576, "1 MiB"),
    (int(12.34 * 1024 ** 2), "12.3 MiB"), (int(150.4 * 1024 ** 3), "150 GiB"), (2000 * 1024 ** 4, "2000 TiB"),
])
def test_a_byte_count_in_messages_never_reads_in_exponent_notation(n, words):
    """Sizes in messages ('needs 1.02e+03 KiB, more than ...') read as inspect's sizes do: three significant
    digits, whole units from 100 on."""
    from onnxprobe.text import human_bytes

    assert human_bytes(n) == words


@pytest.mark.parametrize("n, words", [
    (1048575, "1 MiB"), (int(1024 * 1023.6), "1 MiB"), (int(1024 ** 2 * 1023.7), "1 GiB"), (1048000, "1023 KiB"),
])
def test_a_byte_count_picks_its_unit_after_rounding(n, words):
    """As a duration does: 1048575 bytes (1023.999 KiB) read '1024 KiB', a unit past its limit."""
    from onnxprobe.text import human_bytes

    assert human_bytes(n) == words


@pytest.mark.parametrize("n, words", [(1023, "1023 B"), (1536, "1.5 KiB"), (1048575, "1 MiB"), (int(1024 ** 2 * 1023.7), "1 GiB")])
def test_inspect_sizes_read_as_messages_do(n, words):
    """inspect's sizes (file, weights, what mark and extract wrote) are the messages' human_bytes: its own copy
    of the rule read 1048575 bytes as '1024 KiB'."""
    from onnxprobe.text import human_bytes as size

    assert size(n) == words


@pytest.mark.parametrize("n, words", [
    (999_999, "999,999"), (1_000_000, "1,000,000 (1M)"), (12_345_678, "12,345,678 (12.3M)"),
    (999_499_999, "999,499,999 (999M)"), (999_500_000, "999,500,000 (1B)"), (999_999_999, "999,999,999 (1B)"),
    (7_240_000_000, "7,240,000,000 (7.24B)"), (999_600_000_000, "999,600,000,000 (1T)"),
    (1_234_567_890_123, "1,234,567,890,123 (1.23T)"),
])
def test_a_parameter_count_picks_its_unit_after_rounding(n, words):
    """inspect's parameter count reads as sizes and durations do: three significant digits, the unit picked after
    rounding; its own rule read 999,999,999 parameters as '(1e+03M)' and 1.2 trillion as '(1.23e+03B)'."""
    from onnxprobe.text import human_count as count

    assert count(n) == words


def test_a_runtime_without_a_session_says_no_session_time():
    """`layers --runtime reference` ended its footer with "(session 0 µs)": onnx.reference makes no session."""
    from typer.testing import CliRunner

    from conftest import sample_path
    from onnxprobe.cli.main import app

    r = CliRunner().invoke(app, ["layers", str(sample_path("cnn")), "--runtime", "reference"], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "run " in r.stdout and "session" not in r.stdout, r.output
    r = CliRunner().invoke(app, ["layers", str(sample_path("cnn"))], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "(session " in r.stdout, r.output
