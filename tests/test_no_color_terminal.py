"""NO_COLOR (no-color.org: set and not empty) on a terminal: the table, notes and errors are plain text, no
SGR sequence (bold, dim, colour) at all, as on a plain pipe; the progress spinner on stderr (cursor control,
no style) may still be drawn. Without NO_COLOR the same terminal gets the bold header: the check can fail."""

from __future__ import annotations

import os
import re
import sys

import pytest

from conftest import ROOT, sample_path

pexpect = pytest.importorskip("pexpect")
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
SGR = re.compile(r"\x1b\[[0-9;]*m")


def on_terminal(args: list[str], tmp_path, **extra: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ONNXPROBE_", "NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES"))}
    env.update(TERM="xterm", ONNXPROBE_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT), **extra)
    child = pexpect.spawn(sys.executable, ["-m", "onnxprobe", *args], encoding="utf-8", timeout=300,
                          dimensions=(40, 160), env=env)
    screen = child.read()
    child.close()
    return screen


@pytest.mark.parametrize("args", [
    ["layers", str(sample_path("cnn"))],
    ["diff", str(sample_path("cnn")), str(sample_path("cnn"))],
    ["inspect", str(sample_path("mlp"))],
])
def test_no_color_means_no_styles(args, tmp_path):
    styled = on_terminal(args, tmp_path)
    assert SGR.search(styled), styled[-1000:]  # a terminal: bold header, dim rule
    plain = on_terminal(args, tmp_path, NO_COLOR="1")
    assert not SGR.search(plain), repr(plain[-1000:])
    assert "conv" in plain or "fc" in plain or "Gemm" in plain


def test_empty_no_color_is_unset(tmp_path):
    # no-color.org: an empty NO_COLOR does not count
    assert SGR.search(on_terminal(["layers", str(sample_path("cnn"))], tmp_path, NO_COLOR=""))


def test_no_color_error_line_is_plain(tmp_path):
    screen = on_terminal(["layers", str(tmp_path / "missing.onnx")], tmp_path, NO_COLOR="1")
    assert "onnxprobe: error:" in screen and not SGR.search(screen), repr(screen)


def test_no_color_help_is_plain(tmp_path):
    # Typer's help console is its own: Rich's NO_COLOR kept its bold options and dim boxes
    assert SGR.search(on_terminal(["mark", "--help"], tmp_path))
    plain = on_terminal(["mark", "--help"], tmp_path, NO_COLOR="1")
    assert "--output" in plain and not SGR.search(plain), repr(plain[:500])


def test_a_dumb_terminal_keeps_its_width(tmp_path):
    """TERM=dumb on a 60-column terminal: Rich takes a dumb terminal as 80 wide whatever it is, and the table ran
    past the screen's edge; the table keeps to the terminal's width (or $COLUMNS), as on any other terminal."""
    import onnx
    from onnx import TensorProto, helper

    from conftest import make_model

    name = "t" * 150
    m = make_model([helper.make_node("Relu", ["x"], [name], name="n" * 150), helper.make_node("Neg", [name], ["y"], name="neg")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
    onnx.save(m, tmp_path / "m.onnx")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ONNXPROBE_", "NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES"))}
    env.update(TERM="dumb", ONNXPROBE_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    child = pexpect.spawn(sys.executable, ["-m", "onnxprobe", "layers", str(tmp_path / "m.onnx"), "--all"], encoding="utf-8",
                          timeout=300, dimensions=(40, 60), env=env)
    screen = child.read()
    child.close()
    lines = [ln.rstrip("\r") for ln in screen.split("\n") if ln.strip()]
    assert any("neg" in ln for ln in lines), screen
    assert max(len(ln) for ln in lines) <= 60, max(lines, key=len)
