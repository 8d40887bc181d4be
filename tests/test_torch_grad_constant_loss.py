"""diff --grad --vs-torch of a loss constant in the weights (the sum of a Softmax's output, the default loss)
is the error diff --grad of two models gives ("nothing was compared meaningfully"), not a pass of zeros
agreeing with zeros; beside a LayerNorm whose scale is 1 everywhere, the gradients before it read 'noise'
(not judged) and the verdict stands on the scale's, as with two models."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402

from onnxprobe.cli.main import app  # noqa: E402

MODULE = '''
import torch


class Net(torch.nn.Module):
    def __init__(self, last):
        super().__init__()
        self.fc = torch.nn.Linear(4, 8)
        self.last = last

    def forward(self, x):
        y = self.fc(x)
        return torch.softmax(y, dim=-1) if self.last == "softmax" else self.ln(y)


def build():
    torch.manual_seed(0)
    net = Net(LAST)
    net.ln = torch.nn.LayerNorm(8)
    return net.eval(), (torch.randn(2, 4),)
'''


def _diff(tmp_path, last: str) -> tuple[int, dict]:
    code = MODULE.replace("LAST", repr(last))
    src = tmp_path / "make.py"
    src.write_text(code)
    ns: dict = {}
    exec(code, ns)
    m, args = ns["build"]()
    path = tmp_path / "m.onnx"
    torch.onnx.export(m, args, str(path), dynamo=False, input_names=["x"], output_names=["y"], opset_version=17)
    js = tmp_path / "d.json"
    r = CliRunner().invoke(app, ["diff", "--grad", str(path), "--vs-torch", f"{src}:build", "--json", str(js), "--no-cache"])
    return r.exit_code, json.loads(js.read_text())


def test_a_softmax_sum_against_torch_is_no_pass(tmp_path):
    code, got = _diff(tmp_path, "softmax")
    assert got["verdict"] == "error" and "nothing was compared meaningfully" in got["verdict_reason"], got["verdict_reason"]
    assert code != 0


def test_beside_a_fresh_layernorm_only_its_gradients_are_judged(tmp_path):
    code, got = _diff(tmp_path, "ln")
    rows = {p["a"]: p for p in got["pairs"]}
    assert rows["fc.weight_grad"]["passed"] is None and rows["fc.weight_grad"]["unjudged"]
    assert rows["ln.weight_grad"]["passed"] is True and not rows["ln.weight_grad"]["unjudged"]
    assert got["verdict"] == "pass" and code == 0
