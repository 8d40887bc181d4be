"""Ctrl-C stops a command while onnxruntime runs, in every command (not only the debugger): onnxruntime's run
is one C call, which Python's signal handler waits for, so a run that was not made interruptible
(``runtime.interrupt``) kept a `diff` going for as long as the run took, here for ever."""

from __future__ import annotations

import subprocess
import sys

import onnx
import pytest
from onnx import TensorProto, helper


def endless(path) -> None:
    """x -> a Loop of 10^15 iterations, each adding 1 to its carried value: a run that never ends."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["v_in", "one"], ["v_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [1])],
        [helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])])
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]),
         helper.make_node("Loop", ["n", "c", "r"], ["y"], body=body)],
        "endless",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        [helper.make_tensor("n", TensorProto.INT64, [], [10**15]), helper.make_tensor("c", TensorProto.BOOL, [], [True])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


# Ctrl-C half a second after onnxruntime made a session: while the run goes
CTRL_C_IN_RUN = ("import os, signal, threading\n"
                 "import onnxprobe.runtime.ort as O\n"
                 "made = O.create_session\n"
                 "def create_session(*a, **k):\n"
                 "    s = made(*a, **k)\n"
                 "    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()\n"
                 "    return s\n"
                 "O.create_session = create_session\n")


@pytest.mark.parametrize("args", [["diff", "M", "M", "--no-cache"], ["layers", "M", "--all", "--no-cache"]])
def test_ctrl_c_stops_a_run_that_never_ends(tmp_path, args):
    model = tmp_path / "endless.onnx"
    endless(model)
    argv = [str(model) if a == "M" else a for a in args]
    code = f"import sys\n{CTRL_C_IN_RUN}sys.argv = ['onnxprobe', *{argv!r}]\nfrom onnxprobe.cli.main import run\nrun()\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 130 and r.stderr.strip().splitlines()[-1] == "onnxprobe: error: interrupted", (r.returncode, r.stderr)
