"""`diff --vs-torch` (and `diff --grad --vs-torch`) with `--include-constants`: the flag was taken and did
nothing (the torch pairing matches module outputs and parameters, never the tensors computed from weights
alone), so the report read as if constants had been compared. Refused instead, in one line naming both
flags, exit 2, as the other conflicting flags are; the API names its own settings."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402

from conftest import legacy_export_of_source  # noqa: E402

from onnxprobe import api  # noqa: E402
from onnxprobe.cli.main import app  # noqa: E402
from onnxprobe.errors import UsageError  # noqa: E402

MODULE = '''
import torch


def build():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU()).eval(), (torch.randn(2, 3),)
'''


@pytest.fixture
def exported(tmp_path):
    return legacy_export_of_source(tmp_path, MODULE)


@pytest.mark.parametrize("grad", [False, True])
def test_cli_refuses_include_constants_with_vs_torch(exported, grad):
    path, spec = exported
    args = ["diff", str(path), "--vs-torch", spec, "--device", "cpu"] + (["--grad"] if grad else [])
    ok = CliRunner().invoke(app, args)
    assert ok.exit_code == 0, ok.output  # the premise: without the flag, it compares
    r = CliRunner().invoke(app, args + ["--include-constants"])
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("onnxprobe: error: ")
    assert "--include-constants" in lines[0] and "--vs-torch" in lines[0] and "Traceback" not in r.output


def test_api_refuses_include_constants_with_vs_torch(exported):
    path, spec = exported
    sel = api.Selection(all=True, include_constants=True)
    for call in (lambda: api.diff(path, vs_torch=spec, selection=sel, config=api.RunConfig(device="cpu")),
                 lambda: api.diff_grad(path, vs_torch=spec, selection=sel, config=api.RunConfig(device="cpu"))):
        with pytest.raises(UsageError, match=r"include_constants \(--include-constants\) is not used by diff"):
            call()
