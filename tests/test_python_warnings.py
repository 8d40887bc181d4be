"""A Python warning raised while a command runs (here onnx's, for an external data entry with a key it does
not know, which onnxruntime ignores) is a note: one `onnxprobe: note:` line, never Python's own two-line
`path:line: UserWarning: ...` with the source line under it. Run in a fresh process: pytest captures
warnings in its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parent.parent


def _model_with_unknown_key(folder: Path) -> Path:
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3])
    t.data_location = TensorProto.EXTERNAL
    for k, v in {"location": "w.bin", "offset": "0", "length": "24", "bogus_key": "1"}.items():
        e = t.external_data.add()
        e.key, e.value = k, v
    g.initializer.append(t)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    (folder / "w.bin").write_bytes(np.arange(6, dtype=np.float32).tobytes())
    path = folder / "m.onnx"
    path.write_bytes(m.SerializeToString())
    return path


@pytest.mark.parametrize("command", [["layers"], ["inspect"], ["grad"], ["mark", "-o", "{out}", "--all", "--name", "y"],
                                     ["debug", "--script", "-"]])
def test_warning_is_one_note(tmp_path, command):
    model = _model_with_unknown_key(tmp_path)
    argv = [a.replace("{out}", str(tmp_path / "out.onnx")) for a in command]
    env = {**os.environ, "COLUMNS": "120", "PYTHONPATH": str(ROOT), "ONNXPROBE_DEBUG": ""}
    r = subprocess.run([sys.executable, "-m", "onnxprobe", argv[0], str(model), *argv[1:]], capture_output=True,
                       text=True, timeout=300, env=env, input="info\n", cwd=tmp_path)
    lines = r.stderr.splitlines()
    assert all(ln.startswith("onnxprobe: ") for ln in lines), r.stderr
    assert "Warning" not in r.stderr, r.stderr
    warned = [ln for ln in lines if "bogus_key" in ln]
    assert len(warned) == 1 and warned[0].startswith("onnxprobe: note:"), r.stderr
