"""diff --vs-torch with example arguments holding a dict (torch.onnx.export's convention: a trailing dict of
named inputs) or FUNC returning (module, args, kwargs): it said "the example arguments hold 0 tensor(s)" (or
that FUNC returned no module), which misled (QA). onnxprobe takes the example arguments positionally: one line
says so, and what shape of return value is taken, from the command line and from the API alike."""

from __future__ import annotations

import textwrap

import pytest

torch = pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402

from onnxprobe import api  # noqa: E402
from onnxprobe.api.torch import export_and_diff  # noqa: E402
from onnxprobe.cli.main import app  # noqa: E402
from onnxprobe.errors import UsageError  # noqa: E402

SOURCE = textwrap.dedent("""
    import torch

    class Add(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 3)

        def forward(self, x, y):
            return self.fc(x) + y

    X, Y = torch.ones(2, 4), torch.ones(2, 3)

    def dict_only():
        return Add(), ({"x": X, "y": Y},)

    def trailing():
        return Add(), (X, {"y": Y})

    def three():
        return Add(), (X,), {"y": Y}
""")


def _setup(tmp_path):
    src = tmp_path / "mk.py"
    src.write_text(SOURCE)
    ns: dict = {}
    exec(compile(SOURCE, str(src), "exec"), ns)
    m = ns["Add"]().eval()
    path = tmp_path / "add.onnx"
    torch.onnx.export(m, (ns["X"], ns["Y"]), str(path), dynamo=False, opset_version=17, input_names=["x", "y"])
    return src, path, m, ns


def _said(text: str) -> None:
    assert "tensor(s)" not in text and "not an nn.Module" not in text, text
    assert "keyword" in text and "(module, (x, y, ...))" in text, text


@pytest.mark.parametrize("func", ["dict_only", "trailing", "three"])
def test_the_command_line_says_keyword_arguments_are_not_taken(tmp_path, func):
    src, path, _, _ = _setup(tmp_path)
    r = CliRunner().invoke(app, ["diff", str(path), "--vs-torch", f"{src}:{func}"])
    assert r.exit_code != 0 and "Traceback" not in r.output, r.output
    lines = [ln for ln in r.output.splitlines() if "error" in ln]
    assert len(lines) == 1, r.output
    _said(lines[0])


@pytest.mark.parametrize("args", ["dict_only", "trailing"])
def test_the_api_says_it_too(tmp_path, args):
    _, path, m, ns = _setup(tmp_path)
    given = ({"x": ns["X"], "y": ns["Y"]},) if args == "dict_only" else (ns["X"], {"y": ns["Y"]})
    for call in (lambda: api.diff_torch(path, (m, given)), lambda: api.diff_torch(path, m, example_args=given)):
        with pytest.raises(UsageError) as got:
            call()
        assert "\n" not in str(got.value)
        _said(str(got.value))


def test_export_and_diff_says_it_before_exporting(tmp_path):
    _, _, m, ns = _setup(tmp_path)
    with pytest.raises(UsageError) as got:
        export_and_diff(m, (ns["X"], {"y": ns["Y"]}), dynamo=False, path=tmp_path / "never.onnx")
    _said(str(got.value))
    assert not (tmp_path / "never.onnx").exists()


def test_one_tensor_as_the_example_arguments_is_that_argument(tmp_path):
    """example_args=tensor (torch.onnx.export takes one tensor so) was iterated into its rows: 'the example
    arguments hold 2 tensor(s), the ONNX model takes 1 input(s)'. Oracle: the tuple form's verdict."""
    import numpy as np

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).eval()
    ex = torch.randn(2, 4)
    p = tmp_path / "net.onnx"
    torch.onnx.export(net, (ex,), str(p), input_names=["x"], dynamo=False)
    want = api.diff_torch(p, net, example_args=(ex,))
    for one in (ex, ex.numpy()):
        got = api.diff_torch(p, net, example_args=one)
        assert got.verdict() == want.verdict() and got.verdict()[0] == "pass"
        assert np.array_equal(got.feed["x"], ex.numpy())
    with pytest.raises(UsageError, match="example arguments int: expected a tuple"):
        api.diff_torch(p, net, example_args=5)
