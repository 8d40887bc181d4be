"""export_and_diff's error when torch.onnx.export fails: one line that names the cause (the dynamo
exporter's first line is only "Failed to export the model with torch.export. This is step 1/3 ... Next
steps:"), where forward() stopped, and the other exporter to try."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import onnxprobe.torch as opt  # noqa: E402
from onnxprobe.errors import ExecutionError  # noqa: E402


class Ctrl(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)

    def forward(self, x):
        if x.sum() > 0:  # data-dependent: torch.export refuses it
            return self.a(x)
        return self.b(x)


def test_a_failed_dynamo_export_names_the_cause_in_one_line():
    pytest.importorskip("onnxscript")
    torch.manual_seed(0)
    with pytest.raises(ExecutionError) as got:
        opt.export_and_diff(Ctrl().eval(), (torch.ones(1, 4),), dynamo=True)
    msg = str(got.value)
    assert "\n" not in msg and "Next steps" not in msg, msg
    assert "data-dependent" in msg and "dynamo=False" in msg, msg
    assert "if x.sum() > 0" in msg, msg  # where forward() stopped


def test_the_cause_is_read_from_the_message_without_a_chain():
    from onnxprobe.torch.export import cause

    e = RuntimeError("Failed to export the model with torch.export. Next steps:\n- Modify the model.\n\n"
                     "## Exception summary\n\n<class 'torch._dynamo.exc.Unsupported'>: Dynamic control flow is not "
                     "supported\n\nThe following call raised this error:\n  File \"m.py\", line 7, in forward\n"
                     "    if x.sum() > 0:\n")
    assert cause(e) == "Unsupported: Dynamic control flow is not supported (at m.py:7 in forward: if x.sum() > 0:)"


def test_a_first_line_that_announces_its_cause_keeps_it():
    """torch's UncapturedHigherOrderOpError (a module with torch.cond) reads '... Got graph break/error:' on its first
    line and the cause on the next: the one line stopped at the colon."""
    from onnxprobe.errors import first_line

    e = RuntimeError("This operator doesn't work unless captured. Got graph break/error:\n  HOP: Unsafe side effect\n\nmore")
    assert first_line(e) == "This operator doesn't work unless captured. Got graph break/error: HOP: Unsafe side effect"
    assert first_line(RuntimeError("plain\nsecond")) == "plain" and first_line(RuntimeError("")) == "RuntimeError"
