"""The OpenVINO worker process does not outlive onnxprobe: killed with SIGKILL (out of memory, a CI
timeout's kill -9), the parent cannot end it, and a worker in the middle of a long run would compute on
until its reply found the pipe closed. Skipped without the openvino extra."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytest.importorskip("openvino")
pytestmark = pytest.mark.openvino

PARENT = textwrap.dedent("""
    import pickle, sys
    import numpy as np
    from onnx import TensorProto as T, helper as h, numpy_helper as nh
    from onnxprobe.runtime.runners.openvino import WorkerProcess

    body = h.make_graph([h.make_node("Identity", ["c_in"], ["c_out"]), h.make_node("Add", ["v_in", "one"], ["v_out"])], "body",
                        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c_in", T.BOOL, []),
                         h.make_tensor_value_info("v_in", T.FLOAT, [1])],
                        [h.make_tensor_value_info("c_out", T.BOOL, []), h.make_tensor_value_info("v_out", T.FLOAT, [1])],
                        [nh.from_array(np.float32([1]), "one")])
    g = h.make_graph([h.make_node("Loop", ["n", "c", "x"], ["y"], body=body)], "g",
                     [h.make_tensor_value_info("n", T.INT64, []), h.make_tensor_value_info("c", T.BOOL, []),
                      h.make_tensor_value_info("x", T.FLOAT, [1])], [h.make_tensor_value_info("y", T.FLOAT, [1])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    w = WorkerProcess()
    w.request(op="load", key="m", source=m.SerializeToString())
    feeds = {"n": np.array(10**9, np.int64), "c": np.array(True), "x": np.float32([0])}  # minutes of looping
    pickle.dump({"op": "run", "key": "m", "outputs": ["y"], "feeds": feeds, "device": "CPU", "config": {}, "stats": [],
                 "raw": ["y"]}, w.proc.stdin)
    w.proc.stdin.flush()
    print(w.proc.pid, flush=True)
    sys.stdin.read()  # until killed
""")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_worker_mid_run_ends_when_onnxprobe_is_killed():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                        os.environ.get("PYTHONPATH", "")])}
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    worker = int(parent.stdout.readline())
    try:
        time.sleep(0.5)  # the worker is looping now
        assert _alive(worker)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 5
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(worker), "the OpenVINO worker outlived its parent"
    finally:
        if _alive(worker):
            os.kill(worker, signal.SIGKILL)
