"""The debugger's ``save TENSOR /dev/stdout`` on a pipe: np.save asks the file for its position after the
header, which a pipe refuses; the header went out and then "obtaining file position failed; nothing
written". Every format save takes is written whole (fileio.write_file buffers an unseekable stream)."""

from __future__ import annotations

import io
import os
import shlex
import subprocess
import sys
import zipfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_save_to_a_pipe_writes_every_format_whole(tmp_path):
    m = make_model([helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Neg", ["r"], ["y"], name="neg")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    onnx.save(m, str(tmp_path / "m.onnx"))
    x = np.array([[-1.5, 2.0, -3.0], [4.25, 0.5, -0.25]], np.float32)
    np.save(tmp_path / "x.npy", x)
    want = np.maximum(x.astype(np.float64), 0)
    env = {**os.environ, "PYTHONPATH": ROOT, "NO_COLOR": "1"}
    for fmt, read in ((".npy", lambda b: np.load(io.BytesIO(b))),
                      (".pb", lambda b: numpy_helper.to_array(onnx.TensorProto.FromString(b))),
                      (".npz", lambda b: np.load(io.BytesIO(b))["r"])):
        target = str(tmp_path / f"out{fmt}")  # the pipe under a name with that suffix: a link to the stream
        os.symlink("/dev/stdout", target)
        script = tmp_path / "s.txt"
        script.write_text(f"save r {shlex.quote(target)}\n")
        p = subprocess.run([sys.executable, "-m", "onnxprobe", "debug", str(tmp_path / "m.onnx"), "--input",
                            f"x={tmp_path / 'x.npy'}", "--script", str(script)], capture_output=True, env=env, timeout=120)
        assert p.returncode == 0 and b"nothing written" not in p.stderr, p.stderr.decode()
        data = p.stdout[:p.stdout.rindex(b"saved r ")]
        if fmt == ".npz":
            assert zipfile.is_zipfile(io.BytesIO(data))
        np.testing.assert_array_equal(read(data), want.astype(np.float32))


def _cli(args, env, tmp_path):
    return subprocess.run([sys.executable, "-m", "onnxprobe", *args], capture_output=True, env=env, timeout=180, cwd=tmp_path)


def test_a_file_written_to_stdout_takes_it_alone(tmp_path):
    """A file written to /dev/stdout on a pipe had the command's table (or CSV rows) after it: `mark -o /dev/stdout |`
    gave a model onnx could not read, `layers --json /dev/stdout | jq` failed on the table. The file takes stdout alone
    (the report stays off it, as with --json -), and two outputs to stdout at once are refused."""
    m = make_model([helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Neg", ["r"], ["y"], name="neg")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    onnx.save(m, str(tmp_path / "m.onnx"))
    env = {**os.environ, "PYTHONPATH": ROOT, "NO_COLOR": "1"}
    for args in (["mark", "m.onnx", "-o", "/dev/stdout", "--all"], ["extract", "m.onnx", "-o", "/dev/stdout", "--to", "r"],
                 ["extract", "m.onnx", "-o", "/dev/stdout", "--to", "r", "--format", "csv"],
                 ["grad", "m.onnx", "--export", "/dev/stdout"]):
        p = _cli(args, env, tmp_path)
        assert p.returncode == 0, p.stderr.decode()
        onnx.checker.check_model(onnx.ModelProto.FromString(p.stdout))  # the model alone
        assert b"wrote /dev/stdout" in p.stderr
    p = _cli(["layers", "m.onnx", "--json", "/dev/stdout"], env, tmp_path)
    assert p.returncode == 0 and {r["name"] for r in __import__("json").loads(p.stdout)["tensors"]} >= {"y"}, p.stdout[-300:]
    p = _cli(["layers", "m.onnx", "--all", "--save", "/dev/stdout"], env, tmp_path)
    assert p.returncode == 0 and set(np.load(io.BytesIO(p.stdout))) >= {"r", "y"}
    p = _cli(["grad", "m.onnx", "--json", "-", "--export", "/dev/stdout"], env, tmp_path)
    assert p.returncode == 2 and not p.stdout and b"is standard output, where --json - writes too" in p.stderr, p.stderr
    p = _cli(["layers", "m.onnx"], env, tmp_path)  # no file there: the table, as always
    assert p.returncode == 0 and b"Neg" in p.stdout
