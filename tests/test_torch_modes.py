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
        getattr(opt, call)(m, (x,), _exported(tmp_path, m, x))
    assert _modes(m) == before


def _exported(tmp_path, m, x):
    path = tmp_path / "m.onnx"
    with torch.no_grad():
        was = _modes(m)
        m.eval()
        torch.onnx.export(m, (x,), str(path), dynamo=False, opset_version=17, input_names=["x"])
        for name, sub in m.named_modules():
            sub.training = was[name]
    return path


@pytest.mark.parametrize("call", ["diff", "diff_grad"])
def test_a_module_in_training_mode_is_said_to_run_in_eval_mode(tmp_path, call):
    """QA: a module left in train() ran in eval mode under an "eval mode" header, and nothing said the mode
    was switched: a note says it, naming the submodules eval mode changes (the Dropout; not the frozen
    BatchNorm, already in eval mode). A module in eval mode gets no such note."""
    m, x = _model()
    path = _exported(tmp_path, m, x)
    res = getattr(opt, call)(m, (x,), path)
    said = [n for n in res.notes if "training mode" in n]
    assert len(said) == 1 and "'3'" in said[0] and "Dropout" in said[0] and "'1'" not in said[0], res.notes
    m.eval()
    res = getattr(opt, call)(m, (x,), path)
    assert not [n for n in res.notes if "training mode" in n], res.notes


@pytest.mark.parametrize("grad, opset", [(False, 17), (True, 17), (False, 12)])
def test_an_export_made_in_training_mode_is_refused_in_one_line(tmp_path, grad, opset):
    """An export made with training=TrainingMode.TRAINING: its BatchNormalization uses the batch's statistics
    (training_mode=1), the module ran in eval mode against it, a false FAIL said to be "as it is exported"."""
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    torch.manual_seed(0)
    m, x = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.BatchNorm1d(6)), torch.randn(5, 4)
    path = tmp_path / "train.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=False, opset_version=opset, input_names=["x"],
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    import onnx

    assert any(n.op_type == "BatchNormalization" and (any(a.name == "training_mode" and a.i for a in n.attribute)
                                                      or len(n.output) > 1)
               for n in onnx.load(str(path)).graph.node)  # else the test proves nothing (opset 12: 5 outputs)
    (tmp_path / "make.py").write_text("import torch\ndef build():\n    torch.manual_seed(0)\n"
                                      "    return torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.BatchNorm1d(6))\n")
    r = CliRunner().invoke(app, ["diff", *(["--grad"] if grad else []), str(path), "--vs-torch", f"{tmp_path / 'make.py'}:build"])
    assert r.exit_code == 2 and "exported in training mode" in r.output and "Traceback" not in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1
