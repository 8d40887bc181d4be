"""A diff that compared nothing says why, by cause, with counts and an example of each.

``diff --grad --vs-torch`` of a module that turns a differentiable value into a Python number
(``k = float(y.max()); return y * k``), exported with the dynamo exporter: every gradient is left
uncompared with a reason (upstream of the number), yet the error line read "nothing was compared: no
tensor of A could be paired with one of B", which is false, and the table listed generic unmatched
entries (``max_1_grad``, no counterpart) first, so the real reason showed only in --json. Two models
whose tensors pair only with candidates of another shape, or whose integer outputs are other functions
of the data, said the same generic line. The line now groups the uncompared tensors by cause (count and
an example each), the JSON has them (``uncompared``), and unmatched entries with a specific cause are
listed before the generic "no counterpart" ones.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app

runner = CliRunner()


def _save(path, nodes, inputs, outputs, inits=()):
    m = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(inits)),
                          opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


def _matmul(path, n):
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, n)).astype(np.float32), "W")
    return _save(path, [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, n])], [w])


def _gather(path, idx, out):
    i = numpy_helper.from_array(np.array(idx, np.int64), "i")
    return _save(path, [helper.make_node("Shape", ["x"], ["s"], name="sh"),
                        helper.make_node("Gather", ["s", "i"], [out], name=f"g_{out}")],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                 [helper.make_tensor_value_info(out, TensorProto.INT64, [])], [i])


def _error_line(r) -> str:
    lines = [x for x in r.stderr.splitlines() if x.startswith("onnxprobe: error:")]
    assert len(lines) == 1, r.output
    return lines[0]


@pytest.mark.parametrize("grad", [False, True])
def test_pairs_refused_for_their_shapes_say_so(tmp_path, grad):
    a, b = _matmul(tmp_path / "a.onnx", 3), _matmul(tmp_path / "b.onnx", 5)
    out = tmp_path / "d.json"
    r = runner.invoke(app, ["diff", str(a), str(b), "--json", str(out)] + (["--grad"] if grad else []))
    assert r.exit_code == 1, r.output
    line = _error_line(r)
    n = 2 if grad else 1  # y (and W's gradient with --grad)
    assert "nothing was compared" in line and "another shape" in line and f"{n} in A, {n} in B" in line, line
    assert "no tensor of A could be paired" not in line, line
    d = json.loads(out.read_text())
    assert d["verdict"] == "error" and d["verdict_reason"] in line
    assert [(c["cause"], c["in_a"], c["in_b"]) for c in d["uncompared"]] == [("shape", n, n)], d["uncompared"]


def test_integer_outputs_of_other_functions_say_so(tmp_path):
    a, b = _gather(tmp_path / "a.onnx", 0, "y"), _gather(tmp_path / "b.onnx", 1, "z")
    r = runner.invoke(app, ["diff", str(a), str(b)])
    assert r.exit_code == 1, r.output
    line = _error_line(r)
    assert "nothing was compared" in line and "another function of the data" in line and "1 in A, 1 in B" in line, line
    assert "'y'" in line, line


def test_tensors_the_other_side_cannot_observe_say_so(tmp_path):
    a = _matmul(tmp_path / "a.onnx", 3)
    npz = tmp_path / "acts.npz"
    np.savez(npz, unrelated=np.zeros(3, np.float32))
    out = tmp_path / "d.json"
    r = runner.invoke(app, ["diff", str(a), "--vs-npz", str(npz), "--json", str(out)])
    assert r.exit_code == 1, r.output
    line = _error_line(r)
    # A's y is not in the .npz (a cause), B's entry has no counterpart
    assert "nothing was compared" in line and "not observable" in line and "1 in A" in line, line
    assert line.index("not observable") < line.index("no counterpart"), line
    d = json.loads(out.read_text())
    causes = {c["cause"]: c for c in d["uncompared"]}
    assert causes["not-observable"]["in_a"] == 1 and causes["no-counterpart"]["in_b"] == 1, d["uncompared"]


torch = pytest.importorskip("torch")


class ToNumber(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        y = self.fc(x)
        k = float(y.max())
        return y * k


def test_gradients_left_uncompared_upstream_of_a_python_number_say_why(tmp_path):
    pytest.importorskip("onnxscript")
    torch.manual_seed(0)
    m, x = ToNumber().eval(), torch.randn(5, 4)
    path = tmp_path / "m.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=True, input_names=["x"])
    (tmp_path / "mm.py").write_text(
        "import torch\n"
        "class ToNumber(torch.nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.fc = torch.nn.Linear(4, 3)\n"
        "    def forward(self, x):\n        y = self.fc(x)\n        k = float(y.max())\n        return y * k\n"
        "def build():\n    torch.manual_seed(0)\n    return ToNumber().eval(), (torch.randn(5, 4),)\n")
    out = tmp_path / "d.json"
    r = runner.invoke(app, ["diff", "--grad", str(path), "--vs-torch", f"{tmp_path / 'mm.py'}:build", "--json", str(out)],
                      env={"COLUMNS": "80"})
    assert r.exit_code == 1, r.output
    line = _error_line(r)
    assert "no tensor of A could be paired" not in line, line
    # fc.weight, fc.bias, fc's output and x: upstream of k
    assert "nothing was compared" in line and "Python number" in line and "4 in A" in line, line
    d = json.loads(out.read_text())
    stopped = [c for c in d["uncompared"] if c["cause"] == "gradient-stopped"]
    assert len(stopped) == 1 and stopped[0]["in_a"] == 4 and "Python number" in stopped[0]["why"], d["uncompared"]
    # the unmatched with a reason of their own come before those with no counterpart
    causes = [u["cause"] for u in d["unmatched_a"]]
    assert causes[:4] == ["gradient-stopped"] * 4 and set(causes[4:]) == {"no-counterpart"}, causes
    upstream = {u["name"] for u in d["unmatched_a"][:4]}
    assert {"x_grad", "fc.weight_grad", "fc.bias_grad"} <= upstream, upstream
    assert any(f"e.g. '{n}'" in line for n in upstream), line  # the example is one of them
    r = runner.invoke(app, ["diff", "--grad", str(path), "--vs-torch", f"{tmp_path / 'mm.py'}:build"], env={"COLUMNS": "80"})
    shown = r.stdout[r.stdout.index("unmatched in A:"):]
    assert shown.split()[3].rstrip(",") in upstream, r.stdout
