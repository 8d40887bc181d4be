"""diff --grad --vs-torch: a parameter whose gradient onnxprobe cannot compute (an op without a gradient
rule, here Det with its rule taken out of the table, lies between it and the loss) is not compared, and says so as diff --grad of two models
does (cause gradient-stopped, naming the op), not 'the loss does not depend on it': torch autograd shows
that it does."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402

from conftest import legacy_export_of_source  # noqa: E402

from onnxprobe.cli.main import app  # noqa: E402

MODULE = '''
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(3, 3)
        self.b = torch.nn.Linear(1, 2)

    def forward(self, x):
        return self.b(torch.linalg.det(self.a(x)).unsqueeze(-1))


def build():
    torch.manual_seed(0)
    return Net().eval(), (torch.randn(2, 3, 3),)
'''


def test_a_parameter_behind_an_op_without_a_rule_is_said_stopped(tmp_path, det_without_rule):
    path, module = legacy_export_of_source(tmp_path, MODULE)
    js = tmp_path / "d.json"
    r = CliRunner().invoke(app, ["diff", "--grad", str(path), "--vs-torch", module, "--json", str(js)])
    assert r.exit_code != 0, r.output
    got = json.loads(js.read_text())
    un_b = {u["name"]: u for u in got["unmatched_b"]}
    for p in ("a.weight", "a.bias"):
        assert un_b[p]["cause"] == "gradient-stopped", un_b[p]
        assert "Det" in un_b[p]["reason"] and "does not depend" not in un_b[p]["reason"], un_b[p]
    assert got["verdict"] == "error"
    assert any(p["b"] == "b.weight" and p["passed"] for p in got["pairs"]), got["pairs"]
