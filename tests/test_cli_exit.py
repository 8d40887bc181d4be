"""How the ``onnxprobe`` process ends (``cli.main.finish``): at once, without the interpreter's teardown,
yet with every byte of stdout and every file written, the exit codes of a normal exit, and what others
registered with ``atexit`` (temporary folders, Ray's shutdown) run."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CNN = REPO / "sample_models" / "cnn.onnx"


def onnxprobe(*args: str, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "onnxprobe", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})}, **kw)


def script(tmp_path: Path, body: str, *argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``body`` and then the console entry point with ``argv``, in a process of its own."""
    code = f"import sys\n{body}\nsys.argv = ['onnxprobe', *{list(argv)!r}]\nfrom onnxprobe.cli.main import run\nrun()\n"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, **(env or {})})


def test_everything_written_arrives(tmp_path):
    out = tmp_path / "r.json"
    r = onnxprobe("layers", str(CNN), "--all", "--json", str(out))
    assert r.returncode == 0, r.stderr
    assert "tensors" in r.stdout.strip().splitlines()[-1]  # the table's summary line, the last thing printed
    assert len(json.loads(out.read_text())["tensors"]) == 9
    r = onnxprobe("layers", str(CNN), "--all", "--json", "-")
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["tensors"]) == 9  # stdout in full, through a pipe


def test_exit_codes_and_messages(tmp_path):
    r = onnxprobe("layers", str(tmp_path / "missing.onnx"))
    assert r.returncode == 1 and r.stderr.strip().count("\n") == 0 and "no such file" in r.stderr
    r = onnxprobe("layers", "--bogus")
    assert r.returncode == 2 and "--bogus" in r.stderr
    r = onnxprobe("--version")
    assert r.returncode == 0 and r.stdout.startswith("onnxprobe ")
    assert onnxprobe().returncode == 2  # no command: the help, with click's usage code


def test_teardown_is_skipped_but_atexit_runs(tmp_path):
    """An object that lives to the end is not finalised (the quick exit: a normal exit would call its
    __del__), while atexit handlers and a TemporaryDirectory kept alive (as the OpenVINO and TensorRT
    runners keep theirs) still run and are removed."""
    body = (
        "import atexit, tempfile, pathlib\n"
        "class Late:\n"
        "    def __del__(self): pathlib.Path('teardown-ran').write_text('x')\n"
        "late = Late()\n"
        "atexit.register(lambda: pathlib.Path('atexit-ran').write_text('x'))\n"
        "kept = tempfile.TemporaryDirectory(dir='.', prefix='kept-')\n"
        "pathlib.Path('kept-name').write_text(kept.name)\n"
    )
    r = script(tmp_path, body, "layers", str(CNN))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "atexit-ran").exists()
    assert not Path((tmp_path / "kept-name").read_text()).exists()
    assert not (tmp_path / "teardown-ran").exists()
    # ONNXPROBE_DEBUG=1 keeps the usual exit, teardown included
    r = script(tmp_path, body, "layers", str(CNN), env={"ONNXPROBE_DEBUG": "1"})
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "teardown-ran").exists()


def test_a_running_thread_is_waited_for(tmp_path):
    body = ("import threading, time, pathlib\n"
            "def late():\n    time.sleep(0.5); pathlib.Path('thread-done').write_text('x')\n"
            "threading.Thread(target=late).start()\n")
    r = script(tmp_path, body, "--version")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "thread-done").exists()


@pytest.mark.parametrize("code, rc, err", [(None, 0, ""), (3, 3, ""), ("a message", 1, "a message")])
def test_finish_takes_what_sys_exit_takes(tmp_path, code, rc, err):
    r = subprocess.run([sys.executable, "-c", f"from onnxprobe.cli.main import finish\nprint('out')\nfinish({code!r})"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == rc and r.stdout == "out\n" and r.stderr.strip() == err


def test_a_closed_pipe_is_a_quiet_failure():
    """`onnxprobe layers ... | head -1`: what head does not read goes nowhere; no traceback, no message."""
    p = subprocess.Popen([sys.executable, "-m", "onnxprobe", "layers", str(CNN), "--all"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=300) == 0  # the command's own exit code
    assert "Traceback" not in err and "Exception ignored" not in err


@pytest.mark.parametrize("args", [["layers", str(CNN), "--all", "--json", "-"], ["inspect", str(CNN), "--json", "-"],
                                  ["diff", str(CNN), "--vs-reference"], ["layers", str(CNN), "--format", "csv"],
                                  # a file flag given /dev/stdout: its write met the closed pipe and said "error:
                                  # --json /dev/stdout: cannot write it (Broken pipe); nothing written", exit 2
                                  ["layers", str(CNN), "--all", "--json", "/dev/stdout"],
                                  ["layers", str(CNN), "--html", "/dev/stdout"]])
def test_a_reader_gone_before_anything_is_written_changes_nothing_but_the_output(args):
    """`... | true`: the pipe is closed before the report is written; it read "internal error:
    BrokenPipeError" (QA). What is left goes nowhere and the exit code is the command's own."""
    p = subprocess.Popen([sys.executable, "-m", "onnxprobe", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=300) == 0, err
    assert "error" not in err and "Traceback" not in err and "Exception ignored" not in err, err


def test_a_debug_script_whose_reader_left_goes_on_quietly(tmp_path):
    """`onnxprobe debug m.onnx --script s.txt | true`: each later line read "internal error: BrokenPipeError"
    and the exit code was 1; the script goes on (its save still writes) and the exit code is its own."""
    script = tmp_path / "s.txt"
    saved = tmp_path / "img.npy"
    script.write_text(f"info\nrun\nshow image\nsave image {shlex.quote(str(saved))}\n")  # (TMPDIR may have spaces)
    p = subprocess.Popen([sys.executable, "-m", "onnxprobe", "debug", str(CNN), "--script", str(script)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=300) == 0, err
    assert "error" not in err and "Traceback" not in err, err
    assert saved.exists()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
@pytest.mark.parametrize("args", [["inspect", str(CNN), "--json", "-"], ["layers", str(CNN)]])
def test_a_stdout_that_takes_nothing_is_one_clear_error(args):
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "onnxprobe", *args], stdout=full, stderr=subprocess.PIPE, text=True, timeout=300)
    assert r.returncode == 1 and r.stderr.strip() == "onnxprobe: error: cannot write to standard output (No space left on device)", r.stderr


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_a_termination_signal_while_writing_leaves_no_temporary_file(tmp_path, sig):
    """kill (SIGTERM) or a closed terminal (SIGHUP) while mark writes its model: the command ends as on an
    error, its temporary OUT.tmp is removed (it was left, hidden, beside the output), exit 128 + signal."""
    import signal

    body = ("import os, signal\nimport onnxprobe.graph.external as E\nreal = E._save_header\n"
            f"def slow(m, p):\n    real(m, p)\n    os.kill(os.getpid(), signal.{sig})\nE._save_header = slow\n")
    r = script(tmp_path, body, "mark", str(CNN), "-o", str(tmp_path / "out.onnx"), "--all")
    assert r.returncode == 128 + getattr(signal, sig), (r.returncode, r.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == [], list(tmp_path.iterdir())


@pytest.mark.parametrize("argv", [["layers", "--help"], ["diff", "--help"], ["merge-stats", "--help"],
                                  ["layers", "--no-such-flag"], ["inspect"], ["--version"], ["nosuch"]])
def test_the_app_of_one_command_answers_as_the_whole_app(argv):
    """``run`` builds only the command it runs (``cli.main.app_for``): its help, usage errors and exit
    codes are the whole app's, word for word."""
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app, app_for

    one = app_for(argv)
    if argv[0] in ("layers", "diff", "merge-stats", "inspect"):
        assert one is not app and [c.name for c in one.registered_commands] == [argv[0]]
    else:
        assert one is app
    runner = CliRunner()
    want, got = runner.invoke(app, argv, env={"COLUMNS": "100"}), runner.invoke(one, argv, env={"COLUMNS": "100"})
    assert (got.exit_code, got.output) == (want.exit_code, want.output)
    assert got.output.strip()


def test_a_run_that_cannot_fit_is_refused_before_it_starts(tmp_path, monkeypatch):
    """Inputs that fit but make tensors that do not (the OS killed the process: exit 137, no word) are
    refused in one line naming the largest tensor; with more memory the same run goes. The memory
    available is set small here, so nothing large is allocated."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper
    from typer.testing import CliRunner

    import onnxprobe.runtime.arrays as arrays
    from onnxprobe.cli.main import app

    runner = CliRunner()

    g = helper.make_graph([helper.make_node("Tile", ["x", "reps"], ["t"], name="tile"), helper.make_node("Relu", ["t"], ["y"], name="relu")],
                          "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [onnx.numpy_helper.from_array(np.array([16], np.int64), "reps")])
    p = tmp_path / "tile.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), p)
    monkeypatch.setattr(arrays, "available_memory", lambda: 64 * 2**20)
    r = runner.invoke(app, ["layers", str(p), "--shape", "x=2097152"])  # 8 MiB in, 128 MiB tiled
    assert r.exit_code == 2 and " [33554432], is 128 MiB" in r.stderr and "\n" not in r.stderr.strip(), r.output
    monkeypatch.setattr(arrays, "available_memory", lambda: 2**40)
    r = runner.invoke(app, ["layers", str(p), "--shape", "x=65536"])
    assert r.exit_code == 0, r.output


def test_colour_codes_in_other_libraries_messages_are_dropped():
    """torch.export's errors carry terminal colours; the one line showed them escaped ('[96mThis is step')."""
    from onnxprobe.errors import first_line

    assert first_line(RuntimeError("export failed: \x1b[96mThis is step 1/3\x1b[0m of 3\nmore")) == "export failed: This is step 1/3 of 3"
    assert first_line(ValueError()) == "ValueError"


def test_a_loop_of_links_is_not_called_missing(tmp_path):
    """A symbolic link loop (or a broken link) exists as a path: 'no such file' sent users looking for a
    file that is there; the line says what it is."""
    import os

    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    os.symlink(tmp_path / "b.onnx", tmp_path / "a.onnx")
    os.symlink(tmp_path / "a.onnx", tmp_path / "b.onnx")
    from conftest import sample_path

    for args in (["layers", str(tmp_path / "a.onnx")], ["layers", str(sample_path("cnn")), "--input", f"image={tmp_path / 'a.onnx'}"]):
        r = CliRunner().invoke(app, args)
        assert r.exit_code in (1, 2) and "symbolic link that leads to no file" in r.stderr, r.output


def test_inputs_onnxprobe_cannot_make_are_named_with_what_they_are(tmp_path):
    """A string input read "cannot make random data of dtype object", a sequence input "element type 0
    (UNDEFINED) has no numpy type": each line now names the input and says what it is."""
    import onnx
    from onnx import TensorProto, helper
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    g = helper.make_graph([helper.make_node("Identity", ["s"], ["y"], name="i")], "g",
                          [helper.make_tensor_value_info("s", TensorProto.STRING, [2])], [helper.make_tensor_value_info("y", TensorProto.STRING, [2])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "str.onnx")
    g = helper.make_graph([helper.make_node("SequenceLength", ["q"], ["n"], name="l")], "g",
                          [helper.make_tensor_sequence_value_info("q", TensorProto.FLOAT, None)],
                          [helper.make_tensor_value_info("n", TensorProto.INT64, [])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "seq.onnx")
    # a string input wants data given (a usage error, 2); a sequence input no flag can feed (the model's, 1)
    for name, words, code in (("str", "input 's': a string tensor", 2), ("seq", "input 'q': not a tensor (a sequence", 1)):
        r = CliRunner().invoke(app, ["layers", str(tmp_path / f"{name}.onnx")])
        assert r.exit_code == code and words in r.stderr, r.output


def test_an_error_in_a_node_onnxprobe_added_says_so():
    """A float16 model's backward graph (a ScatterElements onnxprobe adds for MaxPool) or its loss (a
    ReduceSum of bfloat16) that onnxruntime cannot run: the line said "at node 'onnxprobe.loss/...'; check
    the op's input types", which reads as the model's own node. It says onnxprobe added it."""
    from onnxprobe.runtime.ort import explain_ort_error

    scatter = ("[ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running ScatterElements node. "
               "Name:'onnxprobe.grad/node_max_pool2d/ScatterElements' Status Message: MLFloat16 data type is not supported")
    assert "which onnxprobe adds" in explain_ort_error(scatter)
    kernel = "Could not find an implementation for ReduceSum(13) node with name 'onnxprobe.loss/ReduceSum'"
    assert "which onnxprobe adds" in explain_ort_error(kernel)
    own = "Could not find an implementation for Gemm(13) node with name 'node_linear'"
    assert "onnxprobe adds" not in explain_ort_error(own) and "'node_linear'" in explain_ort_error(own)


@pytest.mark.parametrize("args", [["--help"], ["inspect", "--help"], ["--version"]])
def test_help_and_version_into_a_pipe_whose_reader_left_exit_0(args):
    """`onnxprobe --help | head -1`: click and Rich ended such a run with exit code 1 (QA)."""
    p = subprocess.Popen([sys.executable, "-m", "onnxprobe", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=300) == 0, err
    assert "Traceback" not in err and "error" not in err, err


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
@pytest.mark.parametrize("args", [["--version"], ["layers", "--help"]])
def test_help_and_version_into_a_full_stdout_are_one_error(args):
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "onnxprobe", *args], stdout=full, stderr=subprocess.PIPE, text=True, timeout=300)
    assert r.returncode == 1 and r.stderr.strip() == "onnxprobe: error: cannot write to standard output (No space left on device)", r.stderr


@pytest.mark.parametrize("args, code", [
    (["layers", "/nope/m.onnx"], 1), (["diff", "CNN", "/nope/m.onnx"], 1), (["inspect", "/nope/m.onnx"], 1),
    (["layers", "CNN", "--input", "image=/nope/x.npy"], 2), (["layers", "CNN", "--inputs", "/nope/x.npz"], 2),
    (["merge-stats", "/nope/r.json"], 2), (["diff", "CNN", "CNN", "--map", "/nope/m.json"], 2),
    (["debug", "CNN", "--script", "/nope/s.txt"], 2),
])
def test_a_missing_file_exits_as_readme_says(args, code):
    """README's exit codes: a model that cannot be used is 1 (a missing model file too), a missing input,
    JSON, map or script file a usage error, 2; one line each."""
    from conftest import sample_path

    argv = [str(sample_path("cnn")) if a == "CNN" else a for a in args]
    p = subprocess.run([sys.executable, "-m", "onnxprobe", *argv], capture_output=True, text=True)
    assert p.returncode == code, (p.returncode, p.stderr)
    assert p.stderr.startswith("onnxprobe: error: ") and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_onnxruntime_source_locations_are_dropped_wherever_they_stand():
    """An invalid Upsample's message began 'Exception during initialization: /onnxruntime_src/.../upsamplebase.h:314
    onnxruntime::UpsampleBase::UpsampleBase(const KernelInfoType&) [with ...] [ONNXRuntimeError] : 1 : FAIL :
    upsamplebase.h:544 ScalesValidation': only a location at the very start was dropped."""
    from onnxprobe.runtime.ort import explain_ort_error

    msg = ("Exception during initialization: /onnxruntime_src/onnxruntime/core/providers/cpu/tensor/upsamplebase.h:314 "
           "onnxruntime::UpsampleBase::UpsampleBase(const KernelInfoType&) [with KernelInfoType = onnxruntime::OpKernelInfo] "
           "[ONNXRuntimeError] : 1 : FAIL : upsamplebase.h:544 ScalesValidation Scale value should be greater than or equal to 1.")
    assert explain_ort_error(msg) == ("onnxruntime: Exception during initialization: Scale value should be greater than or "
                                      "equal to 1.")
    plain = "[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Got invalid dimensions for input: x for the following indices"
    assert explain_ort_error(plain) == "onnxruntime: Got invalid dimensions for input: x for the following indices"


def closed(args: list[str], fd: int) -> subprocess.CompletedProcess:
    """The command with its stdin (fd 0), stdout (1) or stderr (2) closed, as the shell's ``<&-`` / ``>&-`` /
    ``2>&-`` do."""
    return subprocess.run(["sh", "-c", f'exec "$@" {fd}>&-', "sh", sys.executable, "-m", "onnxprobe", *args],
                          capture_output=fd != 1, stderr=subprocess.PIPE if fd == 1 else None, text=True, timeout=300)


@pytest.mark.parametrize("args", [["--version"], ["inspect", str(CNN)], ["layers", str(CNN), "--json", "-"],
                                  ["diff", "--help"]])
def test_a_closed_stdout_is_one_clear_error(args):
    """`onnxprobe ... >&-`: Python has no sys.stdout then; it read "internal error: AttributeError: 'NoneType'
    object has no attribute 'isatty'" and a traceback (QA). It is the error of any stdout that takes nothing."""
    r = closed(args, 1)
    assert r.returncode == 1 and r.stderr.strip() == "onnxprobe: error: cannot write to standard output (Bad file descriptor)", r.stderr


def test_a_closed_stdout_is_never_a_file_the_command_writes(tmp_path):
    """With fd 1 closed, the first file opened would get it: nothing meant for stdout may land in an output."""
    out = tmp_path / "r.json"
    r = closed(["layers", str(CNN), "--all", "--json", str(out)], 1)
    assert r.returncode == 1, r.stderr
    assert not out.exists() or json.loads(out.read_text())["tensors"]


@pytest.mark.parametrize("args, code", [(["inspect", str(CNN)], 0), (["inspect", "/nope/m.onnx"], 1), (["--version"], 0)])
def test_a_closed_stderr_changes_nothing_but_the_messages(args, code):
    """`onnxprobe ... 2>&-`: the messages go nowhere; the output and the exit code are the command's own
    (it ended with exit code 1 on flushing a stderr Python does not have)."""
    r = closed(args, 2)
    assert r.returncode == code and (code or r.stdout.strip()), (r.returncode, r.stdout)


def test_a_closed_stdin_reads_as_an_empty_one():
    """`onnxprobe debug m.onnx <&-`: "internal error: AttributeError: 'NoneType' object has no attribute
    'isatty'" (QA); it ends as with </dev/null, at once and with exit code 0."""
    r = closed(["debug", str(CNN)], 0)
    assert r.returncode == 0 and "error" not in r.stderr, r.stderr


# a Ctrl-C that lands while Python imports typer: the import raises KeyboardInterrupt (deterministically here)
CTRL_C_IN_IMPORT = ("import sys\n"
                    "class CtrlC:\n"
                    "    def find_spec(self, name, path=None, target=None):\n"
                    "        if name == 'typer':\n            raise KeyboardInterrupt\n"
                    "sys.meta_path.insert(0, CtrlC())\n")


@pytest.mark.parametrize("entry", ["console", "module"])
def test_ctrl_c_while_the_command_line_loads_is_one_line(tmp_path, entry):
    """Ctrl-C in the first few tenths of a second (`timeout -s INT 0.3 onnxprobe inspect m.onnx` on a busy
    machine) printed a KeyboardInterrupt traceback through the imports: the console entry point imported the
    whole command line before it could catch anything. It is one line and exit code 130, as later."""
    if entry == "console":  # what the installed `onnxprobe` script does with pyproject's entry point
        import tomllib

        target = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]["onnxprobe"]
        module, func = target.split(":")
        start = f"from {module} import {func}\nsys.exit({func}())\n"
    else:
        start = "import runpy\nrunpy.run_module('onnxprobe', run_name='__main__')\n"
    code = f"{CTRL_C_IN_IMPORT}sys.argv = ['onnxprobe', 'inspect', {str(CNN)!r}]\n{start}"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 130 and r.stderr == "onnxprobe: error: interrupted\n", (r.returncode, r.stderr)


@pytest.mark.parametrize("where", ["onnxprobe.cli.main.app_for", "onnxprobe.cli.main._single_values"])
def test_ctrl_c_before_the_command_starts_is_one_line(tmp_path, where):
    """Ctrl-C while the app is built (app_for) printed a traceback; while click parses the command's options
    (_single_values) Typer ended with 130 and no word. Both are the line every interrupted command prints."""
    module, name = where.rsplit(".", 1)
    body = f"import {module} as M\ndef ctrl_c(*a, **k):\n    raise KeyboardInterrupt\nM.{name} = ctrl_c\n"
    r = script(tmp_path, body, "inspect", str(CNN))
    assert r.returncode == 130 and r.stderr == "onnxprobe: error: interrupted\n", (r.returncode, r.stderr)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
@pytest.mark.parametrize("stdout", ["full", "closed"])
def test_a_debug_script_whose_stdout_takes_nothing_is_one_clear_error(tmp_path, stdout):
    """`onnxprobe debug m.onnx --script s.txt > /dev/full` printed "line N: internal error: OSError: [Errno 28]"
    for every line (QA): no line can show anything, so the script ends with the error of any such stdout."""
    s = tmp_path / "s.txt"
    s.write_text("info\nrun\nstats\n")
    args = ["debug", str(CNN), "--script", str(s)]
    if stdout == "closed":
        r = closed(args, 1)
        why = "Bad file descriptor"
    else:
        with open("/dev/full", "w") as full:
            r = subprocess.run([sys.executable, "-m", "onnxprobe", *args], stdout=full, stderr=subprocess.PIPE,
                               text=True, timeout=300)
        why = "No space left on device"
    errors = [line for line in r.stderr.splitlines() if "error" in line]
    assert r.returncode == 1 and errors == [f"onnxprobe: error: cannot write to standard output ({why})"], r.stderr


@pytest.mark.parametrize("args", [["layers", str(CNN)], ["inspect", str(REPO / "sample_models" / "transformer_block.onnx"), "--nodes"],
                                  ["diff", str(CNN), "--vs-reference"], ["layers", str(CNN), "--shape", "image=0x3"]],
                         ids=["layers", "inspect", "diff", "refused"])
def test_a_terminal_that_takes_ascii_alone_gets_the_output_not_an_internal_error(args):
    """Standard streams in ASCII (PYTHONIOENCODING=ascii, a C locale where Python does not coerce it to
    UTF-8): the table's '·', '×', '─' and a model's non-ASCII names are written escaped, not an internal
    UnicodeEncodeError with nothing shown."""
    r = onnxprobe(*args, env={"PYTHONIOENCODING": "ascii"})
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    if args[-1] == "image=0x3":
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    else:
        assert r.returncode in (0, 1) and r.stdout.strip(), r.stderr  # diff: 1 is a verdict, not an error
        assert r.returncode == 0 or "FAIL" in r.stdout


@pytest.mark.parametrize("flag", ["--json", "--save", "--html"])
def test_an_output_that_is_a_loop_of_links_is_refused_before_the_run(tmp_path, flag):
    """A loop of symbolic links leads to no file to write through (``fileio.output_target``): it was replaced by
    a regular file after the run, the links of the loop gone; it is refused as the inputs' loop is, before the run."""
    os.symlink(tmp_path / "b.json", tmp_path / "a.json")
    os.symlink(tmp_path / "a.json", tmp_path / "b.json")
    r = onnxprobe("layers", str(REPO / "sample_models" / "dynamic_batch.onnx"), flag, str(tmp_path / "a.json"))
    assert r.returncode == 2 and "loop of symbolic links" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr  # no note of the run before it: refused first
    assert os.path.islink(tmp_path / "a.json") and os.path.islink(tmp_path / "b.json")
