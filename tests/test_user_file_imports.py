"""The user's FILE.py of --inputs-from and --vs-torch imports what lies beside it, as `python FILE.py` would
(`from model import Net` failed with ModuleNotFoundError unless onnxprobe ran from that folder), at its top or
later (in FUNC, in a generator's items); and what it imports from there is an input too: never overwritten
by a report. Run as a user runs it: another process, from another folder."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

from conftest import sample_path

ROOT = Path(__file__).resolve().parents[1]


def _onnxprobe(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "onnxprobe", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def test_an_inputs_from_file_imports_its_helpers_at_the_top_and_in_its_items(tmp_path):
    user, elsewhere = tmp_path / "user", tmp_path / "elsewhere"
    user.mkdir(), elsewhere.mkdir()
    (user / "helper_data_x7.py").write_text("import numpy as np\n\ndef batch(i):\n"
                                            "    return {'x': np.full((4, 16), float(i), np.float32)}\n")
    (user / "lazy_helper_x7.py").write_text("SCALE = 3.0\n")
    (user / "pipe.py").write_text("from helper_data_x7 import batch\n\ndef gen():\n"
                                  "    from lazy_helper_x7 import SCALE\n"
                                  "    for i in (1, 2):\n        b = batch(i)\n        yield {'x': b['x'] * SCALE}\n")
    r = _onnxprobe(elsewhere, "layers", str(sample_path("mlp")), "--inputs-from", f"{user / 'pipe.py'}:gen",
                   "--json", "-")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    ref = ReferenceEvaluator(onnx.load(str(sample_path("mlp"))))  # the oracle: the batches the helpers make
    want = np.concatenate([ref.run(None, {"x": np.full((4, 16), 3.0 * i, np.float32)}, intermediate=True)["fc1_out"]
                           .astype(np.float64).ravel() for i in (1, 2)])
    fc1 = next(t for t in d["tensors"] if t["name"] == "fc1_out")
    assert d["batches"] == 2 and fc1["count"] == want.size and fc1["mean"] == pytest.approx(want.mean(), rel=1e-5), fc1
    assert sorted(p.name for p in user.iterdir()) == ["helper_data_x7.py", "lazy_helper_x7.py", "pipe.py"]


def test_a_vs_torch_file_imports_its_model_module_and_that_module_is_never_overwritten(tmp_path):
    torch = pytest.importorskip("torch")
    user, elsewhere = tmp_path / "user", tmp_path / "elsewhere"
    user.mkdir(), elsewhere.mkdir()
    (user / "models_x7.py").write_text("import torch\n\nclass Net(torch.nn.Module):\n    def __init__(self):\n"
                                       "        super().__init__()\n        self.fc = torch.nn.Linear(16, 8)\n\n"
                                       "    def forward(self, x):\n        return torch.relu(self.fc(x))\n")
    (user / "build.py").write_text("from models_x7 import Net\nimport torch\n\ndef build():\n    torch.manual_seed(0)\n"
                                   "    return Net().eval(), (torch.ones(2, 16),)\n")
    sys.path.insert(0, str(user))
    try:
        from models_x7 import Net
    finally:
        sys.path.remove(str(user))
        sys.modules.pop("models_x7", None)
    torch.manual_seed(0)
    net = Net().eval()
    onnx_path = tmp_path / "net.onnx"
    torch.onnx.export(net, (torch.ones(2, 16),), str(onnx_path), input_names=["x"], output_names=["y"], dynamo=False)
    r = _onnxprobe(elsewhere, "diff", str(onnx_path), "--vs-torch", f"{user / 'build.py'}:build", "--json", "-")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["verdict"] == "pass" and d["compared"] >= 1, d["verdict_reason"]
    before = hashlib.sha256((user / "models_x7.py").read_bytes()).hexdigest()
    r = _onnxprobe(elsewhere, "diff", str(onnx_path), "--vs-torch", f"{user / 'build.py'}:build",
                   "--json", str(user / "models_x7.py"))
    errors = [line for line in r.stderr.splitlines() if line.startswith("onnxprobe: error")]
    assert r.returncode == 2 and len(errors) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "models_x7.py" in errors[0] and "refusing to overwrite it" in errors[0], errors
    assert hashlib.sha256((user / "models_x7.py").read_bytes()).hexdigest() == before
