"""`onnxprobe debug` in a real pseudo-terminal (pexpect): Tab completion, Ctrl-C during a long run, a bad
command, Ctrl-D, and the history file."""

from __future__ import annotations

import os
import re
import signal
import sys
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import ROOT, sample_path

pexpect = pytest.importorskip("pexpect")
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")

# After sending a command, tests wait for its output before the prompt: prompt_toolkit may redraw the
# previous prompt, and keys sent while a command runs (the terminal in cooked mode) can be lost.
PROMPT = r"onnxprobe [^\n]*?>"
TIMEOUT = 60  # generous: the first start imports onnx and onnxruntime
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>78]|\r")


class Term:
    """A pexpect child whose output is matched with the terminal's escape sequences taken out (colours,
    cursor moves), so patterns read like what the user sees."""

    def __init__(self, child):
        self.child = child
        self.raw = ""
        self.pos = 0

    def __getattr__(self, name):
        return getattr(self.child, name)

    @property
    def text(self) -> str:
        return ANSI.sub("", self.raw)

    def expect(self, pattern: str, timeout: float = TIMEOUT) -> re.Match:
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            text = self.text
            m = rx.search(text, self.pos)
            if m:
                self.pos = m.end()
                return m
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {pattern!r}; screen so far: {text[-1500:]!r}")
            try:
                self.raw += self.child.read_nonblocking(65536, timeout=0.1)
            except pexpect.TIMEOUT:
                pass
            except pexpect.EOF:
                text = self.text
                if rx.search(text, self.pos):
                    continue
                raise AssertionError(f"the session ended while waiting for {pattern!r}: {text[-1500:]!r}") from None

    def expect_eof(self, timeout: float = TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.raw += self.child.read_nonblocking(65536, timeout=0.1)
            except pexpect.TIMEOUT:
                pass
            except pexpect.EOF:
                return
        raise AssertionError(f"the session did not end: {self.text[-1500:]!r}")


def loop_model(n: int = 128) -> onnx.ModelProto:
    """y = Loop(trips) { s = tanh(s @ w) }: as long a run as the trip count asks for, deterministic."""
    body = helper.make_graph(
        [helper.make_node("MatMul", ["s_in", "w"], ["mm"], name="body/matmul"),
         helper.make_node("Tanh", ["mm"], ["s_out"], name="body/tanh"),
         helper.make_node("Identity", ["c_in"], ["c_out"], name="body/cond")],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [n, n])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [n, n])])
    w = numpy_helper.from_array((np.eye(n) * 0.9).astype(np.float32), "w")
    g = helper.make_graph(
        [helper.make_node("Constant", [], ["t"], name="true", value=numpy_helper.from_array(np.array(True))),
         helper.make_node("Loop", ["trips", "t", "x"], ["y"], name="loop", body=body)],
        "long", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, n]), helper.make_tensor_value_info("trips", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, n])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def spawn(tmp_path, *models, sigint=signal.SIG_DFL):
    """``sigint``: the child's SIGINT disposition as it starts (SIG_IGN: as a shell without job control
    starts a command put in the background, and a test runner started so passes on)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ONNXPROBE_", "NO_COLOR", "COLUMNS", "LINES"))}
    env.update({"ONNXPROBE_HISTORY": str(tmp_path / "history"), "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm",
                "PYTHONPATH": str(ROOT), "ONNXPROBE_CACHE_DIR": str(tmp_path / "cache")})
    child = pexpect.spawn(sys.executable, ["-m", "onnxprobe", "debug", *map(str, models), "--device", "cpu"],
                          env=env, cwd=str(tmp_path), dimensions=(50, 160), encoding="utf-8", timeout=TIMEOUT,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, sigint))
    term = Term(child)
    term.expect(PROMPT)
    return term


def quit_(term) -> None:
    term.sendcontrol("d")
    term.expect_eof()
    term.child.close()
    assert term.child.exitstatus == 0


def test_tab_completes_commands_and_tensor_names(tmp_path):
    c = spawn(tmp_path, sample_path("cnn"))
    c.send("hel\t")
    c.expect("help")
    c.send("\r")
    c.expect("help COMMAND for its options")  # help's last line: the command ran as `help`
    c.expect(PROMPT)
    c.send("show relu1_o\t")
    c.expect("relu1_out")
    c.send("\r")
    c.expect("relu1_out  from node relu1 \\(Relu\\)")
    c.expect("histogram")
    c.expect(PROMPT)
    c.send("goto po\t")  # node names complete too
    c.expect("pool1")
    c.send("\r")
    c.expect("#3/8 pool1")
    c.expect(PROMPT)
    quit_(c)


@pytest.mark.parametrize("sigint", [signal.SIG_DFL, signal.SIG_IGN], ids=["sigint-default", "sigint-ignored"])
def test_ctrl_c_cancels_a_long_run_and_the_session_goes_on(tmp_path, sigint):
    """Also when the session starts with SIGINT ignored (`pytest &` in a script passed that on: Ctrl-C
    did nothing and the run went on)."""
    path = tmp_path / "long.onnx"
    onnx.save(loop_model(), path)
    c = spawn(tmp_path, path, sigint=sigint)
    c.sendline("input trips 1000000000")
    c.expect(r"input trips ← 1000000000")
    c.expect(PROMPT)
    c.sendline("run")
    c.expect("running")  # the spinner: the run has started
    time.sleep(1.0)
    c.sendintr()
    # onnxruntime stops within one node; the 10^9 iterations would outlast these expects by far
    c.expect("cancelled", timeout=20)
    c.expect(PROMPT, timeout=20)
    c.sendline("input trips 3")
    c.expect(r"input trips ← 3")
    c.expect(PROMPT)
    c.sendline("run")
    c.expect(r"ran \d+ tensors? \(first run\)")  # nothing of the cancelled run was kept
    c.expect(PROMPT)
    quit_(c)


def test_bad_command_is_one_line_and_the_session_goes_on(tmp_path):
    c = spawn(tmp_path, sample_path("mlp"))
    c.sendline("frobnicate now")
    c.expect(r"\nerror: unknown command 'frobnicate' \(try help\)\n")
    c.expect(PROMPT)
    assert "Traceback" not in c.text
    c.sendline("show y [0, :2]")
    c.expect(r"values\[0, :2\] → \[2\]")
    c.expect(PROMPT)
    c.sendline("seed banana")
    c.expect("seed: N must be an integer")
    c.expect(PROMPT)
    c.sendline("info")
    c.expect("Sigmoid")
    c.expect(PROMPT)
    quit_(c)


def test_ctrl_c_at_the_prompt_clears_the_line_and_ctrl_d_quits(tmp_path):
    c = spawn(tmp_path, sample_path("cnn"))
    c.send("nodes half-typed")
    c.expect("half-typed")
    c.sendintr()
    c.expect(r"half-typed[^\n]*\n")  # the line is abandoned, a fresh prompt follows
    c.expect(PROMPT)
    c.sendline("seed")
    c.expect("seed 0")
    c.expect(PROMPT)
    quit_(c)


def test_history_persists_across_sessions(tmp_path):
    c = spawn(tmp_path, sample_path("cnn"))
    c.sendline("seed 42")
    c.expect(r"seed 42 \(random inputs")  # wait for the command's output, not a redrawn prompt
    c.expect(PROMPT)
    quit_(c)
    assert "seed 42" in (tmp_path / "history").read_text()
    c = spawn(tmp_path, sample_path("cnn"))
    c.sendcontrol("p")  # previous history entry (as Up does): the last command of the previous session
    c.expect("seed 42")
    c.send("\r")
    c.expect(r"seed 42 \(random inputs: image\)")
    c.expect(PROMPT)
    quit_(c)


def test_completer_offers_what_each_argument_takes():
    """The completion logic itself, without a terminal: what Tab offers at each position."""
    from prompt_toolkit.document import Document

    from onnxprobe import api
    from onnxprobe.session.repl import make_completer
    from onnxprobe.session.state import State

    state = State([api.load(sample_path("cnn"))], device="cpu")
    comp = make_completer(state)

    def offers(text: str) -> list[str]:
        return [c.text for c in comp.get_completions(Document(text, len(text)), None)]

    assert offers("sh") == ["show"]
    assert "probe" in offers("pro") and "where" in offers("wh")
    assert offers("show relu1") == ["relu1_out"]
    assert offers("show conv1.w") == ["conv1.weight"]  # weights are tensors too
    assert offers("goto po") == ["pool1"]
    assert offers("nodes op:Co") == ["op:Conv"]
    assert offers("probe ") == ["add", "rm", "list", "clear"]
    assert "op:Relu" in offers("probe add op:") and "--include-constants" in offers("probe add --i")
    assert offers("probe add --op Gl") == ["GlobalAveragePool"]
    assert offers("input ") == ["image"] and offers("input image ") == ["random"]
    assert offers("device c") == ["cpu", "cuda"]
    assert offers("where n") == ["nan", "nonfinite"]
    assert set(offers("show --")) == {"--bins", "--log", "--full", "--model"}
    assert offers("help wh") == ["where"]
    assert "logits" in offers("save ") and offers("save a")[0] == "all"
    assert offers("frobnicate x") == []
    state.goto(state.a, "relu1")
    assert offers("show ")[:2] == ["relu1_out", "bn1_out"]  # the tensors at the cursor come first


def test_the_history_file_is_never_an_input_a_folder_or_a_new_folder(tmp_path):
    """$ONNXPROBE_HISTORY naming the model appended history lines to it; a folder printed prompt_toolkit's
    traceback; a missing folder was created. Each now keeps the history in memory, with a note."""
    import io

    from prompt_toolkit.history import FileHistory, InMemoryHistory
    from rich.console import Console

    from onnxprobe.fileio import protect
    from onnxprobe.session.repl import _history

    model = tmp_path / "m.onnx"
    model.write_bytes(b"model bytes")
    protect(model, "an input model")
    for path, why in ((model, "a file this session reads"), (tmp_path, "not a regular file"),
                      (tmp_path / "no" / "h", "does not exist")):
        buf = io.StringIO()
        h = _history(path, FileHistory, InMemoryHistory, Console(file=buf, width=200))
        assert isinstance(h, InMemoryHistory) and why in buf.getvalue(), buf.getvalue()
    assert model.read_bytes() == b"model bytes" and not (tmp_path / "no").exists()
    assert isinstance(_history(tmp_path / "h", FileHistory, InMemoryHistory, Console(file=io.StringIO())), FileHistory)


def test_a_history_file_that_fails_to_take_a_line_leaves_the_session_going(tmp_path):
    """A history file that exists but takes no appends (a full disk, /proc/version as root) made
    prompt_toolkit print its traceback and could hang the prompt: now one note, the line kept in memory,
    and no more attempts."""
    import io

    from prompt_toolkit.history import FileHistory, InMemoryHistory
    from rich.console import Console

    from onnxprobe.session.repl import _history

    class Full(FileHistory):
        writes = 0

        def store_string(self, string: str) -> None:
            Full.writes += 1
            raise OSError(28, "No space left on device")

    buf = io.StringIO()
    h = _history(tmp_path / "h", Full, InMemoryHistory, Console(file=buf, width=200))
    for line in ("info", "show x", "quit"):
        h.append_string(line)
    assert buf.getvalue().count("cannot be written (No space left on device)") == 1
    assert Full.writes == 1 and list(h.get_strings())[-3:] == ["info", "show x", "quit"]


def test_without_a_home_folder_the_history_is_kept_in_memory(tmp_path, monkeypatch):
    """HOME unset and no entry in the password database (a container run as a uid of its own): Path.home()
    raised 'Could not determine home directory' and the debugger ended in an internal error before its first
    prompt; '~/h' in $ONNXPROBE_HISTORY too. The history is kept in memory, with a note saying why."""
    import io
    import pwd

    from prompt_toolkit.history import FileHistory, InMemoryHistory
    from rich.console import Console

    from onnxprobe.session.repl import _history, history_path

    def no_entry(uid):
        raise KeyError(uid)

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    for setting in (None, "~/h"):
        if setting is None:
            monkeypatch.delenv("ONNXPROBE_HISTORY", raising=False)
        else:
            monkeypatch.setenv("ONNXPROBE_HISTORY", setting)
        buf = io.StringIO()
        h = _history(history_path(), FileHistory, InMemoryHistory, Console(file=buf, width=200))
        assert isinstance(h, InMemoryHistory) and "no home folder" in buf.getvalue(), buf.getvalue()
        assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # with one: the file there, '~' expanded
    assert history_path() == tmp_path / "home" / "h"
    monkeypatch.delenv("ONNXPROBE_HISTORY")
    assert history_path() == tmp_path / "home" / ".onnxprobe_history"
