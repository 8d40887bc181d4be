"""The onnxprobe.torch API runs the user's module in eval mode and gives each submodule its own mode back:
a frozen eval-mode BatchNorm inside a model in training stays in eval mode (``module.train(was)`` set
every child to the root's)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import onnxprobe.torch as opt  # noqa: E402


def _model():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.BatchNorm1d(6), torch.nn.ReLU(), torch.nn.Dropout(0.5),
                            torch.nn.Linear(6, 3))
    m.train()
    m[1].eval()  # frozen statistics
    return m, torch.randn(5, 4)


def _modes(m) -> dict[str, bool]:
    return {name: sub.training for name, sub in m.named_modules()}


@pytest.mark.parametrize("call", ["diff", "diff_grad", "export_and_diff"])
def test_each_submodule_keeps_its_own_training_flag(tmp_path, call):
    m, x = _model()
    before = _modes(m)
    assert before["1"] is False and before[""] is True
    if call == "export_and_diff":
        opt.export_and_diff(m, (x,), dynamo=False, introduced=False)
    else:
        path = tmp_path / "m.onnx"
        with torch.no_grad():
            was = _modes(m)
            m.eval()
            torch.onnx.export(m, (x,), str(path), dynamo=False, opset_version=17, input_names=["x"])
            for name, sub in m.named_modules():
                sub.training = was[name]
        getattr(opt, call)(m, (x,), path)
    assert _modes(m) == before
