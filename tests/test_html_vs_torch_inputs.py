"""diff --vs-torch --html on a model that takes token ids: the page's histograms ran model A again on the spec's
random integers in [0, 100) instead of the module's example arguments the result measured, and the command
stopped with onnxruntime's 'indices element out of data bounds' (an Embedding of 20 rows); its inputs line said
'random integers'. The page now reruns the result's own inputs and says where they came from."""

from __future__ import annotations

import html
import textwrap

import pytest
from typer.testing import CliRunner

from onnxprobe.cli.main import app

torch = pytest.importorskip("torch")

BUILD = textwrap.dedent("""
    import torch

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(20, 8)
            self.fc = torch.nn.Linear(8, 4)

        def forward(self, ids):
            return self.fc(self.emb(ids))

    def build():
        torch.manual_seed(0)
        return M().eval(), (torch.tensor([[2, 3, 5, 7]]),)
""")


def test_the_page_of_an_export_of_token_ids_runs_the_example_arguments(tmp_path, monkeypatch):
    (tmp_path / "build.py").write_text(BUILD)
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    exec(compile(BUILD, "build.py", "exec"), ns)  # the module as the command line builds it, not imported here
    m, args = ns["build"]()
    torch.onnx.export(m, args, str(tmp_path / "emb.onnx"), dynamo=False, opset_version=17, input_names=["ids"])
    r = CliRunner().invoke(app, ["diff", "emb.onnx", "--vs-torch", "build.py:build", "--html", "page.html"])
    assert r.exit_code == 0, r.output
    page = html.unescape((tmp_path / "page.html").read_text())
    assert "ids int64 [1x4] from the example arguments of build.py:build" in page
    assert "random integers" not in page
