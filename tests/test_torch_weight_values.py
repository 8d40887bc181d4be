"""`diff --vs-torch` (forward) of an export one of whose weights, named as the module's parameter, holds other
values: the verdict fails and names it, whatever the activations' criterion says. A float16 export's default
criterion (1e-2 + 1e-2 |b|) passed a 1% change of one layer's weight (QA); in float32 the activations fail
anyway, and the weight is named too. Oracle: the module's own parameter, compared with what the file holds."""

from __future__ import annotations

import json
import re

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

torch = pytest.importorskip("torch")

from onnxprobe import api  # noqa: E402


def _export(tmp_path, half: bool, scale: float):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    x = torch.rand(3, 8)
    if half:
        m, x = m.half(), x.half()
    path = tmp_path / "m.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=False, opset_version=17, input_names=["x"])
    model = onnx.load(str(path))
    names = [i.name for i in model.graph.initializer]
    assert "2.weight" in names, names  # the legacy exporter keeps the parameter's name
    for i in model.graph.initializer:
        if i.name == "2.weight" and scale != 1.0:
            v = numpy_helper.to_array(i)
            i.CopyFrom(numpy_helper.from_array((v.astype(np.float32) * scale).astype(v.dtype), i.name))
    onnx.save(model, str(path))
    return path, m, x


@pytest.mark.parametrize("half", [False, True])
def test_a_weight_with_other_values_than_its_parameter_fails(tmp_path, half):
    path, m, x = _export(tmp_path, half, 1.01)
    want = (m[2].weight.detach().float().numpy() * 1.01)
    got = numpy_helper.to_array(next(i for i in onnx.load(str(path)).graph.initializer if i.name == "2.weight"))
    assert np.allclose(got.astype(np.float32), want, rtol=2e-3)  # the file holds the changed values
    res = api.diff_torch(path, m, example_args=(x,))
    verdict, why = res.verdict()
    assert verdict == "fail" and "'2.weight'" in why and "other values than the torch parameter" in why, why
    assert res.other_values == ["2.weight"]


@pytest.mark.parametrize("half", [False, True])
def test_a_faithful_export_passes(tmp_path, half):
    path, m, x = _export(tmp_path, half, 1.0)
    res = api.diff_torch(path, m, example_args=(x,))
    assert res.other_values == [] and res.verdict()[0] == "pass", res.verdict()
    from onnxprobe.report.diff import diff_dict

    d = diff_dict(res)
    assert d["weights_passed"] is True and d["output_rows_passed"] is True and d["outputs_passed"] is True


EMBED = '''
import torch

def build():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Embedding(20, 8), torch.nn.Linear(8, 3)).eval()
    return m, (torch.tensor([[2, 3, 5, 7]]),)
'''


@pytest.mark.parametrize("kind", ["legacy", "dynamo"])
def test_the_cli_says_why_when_no_row_fails(tmp_path, kind):
    """An embedding row the inputs never read, edited: every activation is exact, the weight holds other
    values, the verdict fails (exit 1), and the report said "0 failing · outputs FAIL" and nothing else: the
    reason was in the API's verdict only (QA). Oracle: the row's values in the file against the parameter's."""
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    if kind == "dynamo":
        pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
    src = tmp_path / "make.py"
    src.write_text(EMBED)
    scope: dict = {}
    exec(EMBED, scope)
    m, args = scope["build"]()
    path = tmp_path / "m.onnx"
    kwargs = {"opset_version": 17} if kind == "legacy" else {}
    torch.onnx.export(m, args, str(path), dynamo=kind == "dynamo", input_names=["ids"], **kwargs)
    model = onnx.load(str(path))
    t = next(i for i in model.graph.initializer if i.name == "0.weight")
    v = numpy_helper.to_array(t).copy()
    v[1] *= 1.5  # row 1: not among the ids
    t.CopyFrom(numpy_helper.from_array(v, t.name))
    onnx.save(model, str(path))
    assert not np.array_equal(v, m[0].weight.detach().numpy()) and 1 not in args[0]
    r = CliRunner().invoke(app, ["diff", str(path), "--vs-torch", f"{src}:build"])
    assert r.exit_code == 1, r.output
    assert "0 failing" in r.output  # the rows agree: they cannot say why
    assert "'0.weight'" in r.output and "other values" in r.output, r.output
    # the footer says what failed: every output row passed, a weight did not (it read "outputs FAIL", QA)
    foot = " ".join(r.output.split())
    assert "outputs pass · weights FAIL" in foot and "outputs FAIL" not in foot, r.output
    r = CliRunner().invoke(app, ["diff", str(path), "--vs-torch", f"{src}:build", "--json", "-"])
    assert r.exit_code == 1, r.output
    d = json.loads(r.stdout)
    assert d["verdict"] == "fail" and d["outputs_passed"] is False  # the verdict's key keeps its meaning
    assert d["output_rows_passed"] is True and d["weights_passed"] is False and d["other_values"] == ["0.weight"]


LINEAR = '''
import torch

def build():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    return m, (torch.rand(3, 8),)
'''


def test_the_cli_names_the_weight_when_an_output_fails_too(tmp_path):
    """A weight that keeps its parameter's name, x1.01 (QA: GPT-2's c_attn.weight): the verdict fails naming
    the weight, but the text report printed that reason only when no output row failed, so the user read
    "outputs FAIL" and the first failing layer, never the parameter the API names. Oracle: the file's weight
    against the module's parameter."""
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    src = tmp_path / "make.py"
    src.write_text(LINEAR)
    scope: dict = {}
    exec(LINEAR, scope)
    m, args = scope["build"]()
    path = tmp_path / "m.onnx"
    torch.onnx.export(m, args, str(path), dynamo=False, opset_version=17, input_names=["x"])
    model = onnx.load(str(path))
    t = next(i for i in model.graph.initializer if i.name == "2.weight")
    v = numpy_helper.to_array(t) * 1.01
    t.CopyFrom(numpy_helper.from_array(v.astype(np.float32), t.name))
    onnx.save(model, str(path))
    assert not np.allclose(v, m[2].weight.detach().numpy(), rtol=1e-3, atol=0)
    page = tmp_path / "r.html"
    r = CliRunner().invoke(app, ["diff", str(path), "--vs-torch", f"{src}:build", "--html", str(page)])
    assert r.exit_code == 1, r.output
    # the page's verdict says so too (it read "FAIL: ..." alone, never that a weight failed beside the rows)
    verdict = re.search(r"<dt>verdict</dt><dd[^>]*>(.*?)</dd>", page.read_text(encoding="utf-8")).group(1)
    assert verdict.startswith("outputs FAIL · weights FAIL: ") and "2.weight" in verdict, verdict
    assert "outputs FAIL · weights FAIL" in " ".join(r.output.split())  # an output row fails: the rows show where
    assert "'2.weight'" in r.output and "other values" in r.output, r.output


def test_a_changed_transposed_copy_of_a_linear_fails_naming_its_parameter(tmp_path):
    """QA: BERT's layer.1 query weight x1.01 in a legacy export, where it is 'onnx::MatMul_337' (transposed,
    every value changed): the report said "has the shape of ... but other values: the model is not an export
    of the module as it is now", yet the verdict passed (the outputs moved by 3e-4 relative). A module
    without BatchNorm whose only free parameter of that shape is read there: that parameter, changed.
    Oracle: the file's initializer against the parameter transposed."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8)).eval()
    x = torch.rand(2, 3, 8)  # 3-D: the legacy exporter writes MatMul with the weight transposed
    path = tmp_path / "m.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=False, opset_version=17, input_names=["x"])
    model = onnx.load(str(path))
    w2 = m[2].weight.detach().numpy()
    t = next(i for i in model.graph.initializer if np.array_equal(numpy_helper.to_array(i), w2.T))
    assert t.name not in ("0.weight", "2.weight"), t.name
    t.CopyFrom(numpy_helper.from_array((numpy_helper.to_array(t) * 1.01).astype(np.float32), t.name))
    onnx.save(model, str(path))
    res = api.diff_torch(path, m, example_args=(x,))
    assert res.other_values == [f"{t.name}[2.weight]"], res.other_values
    verdict, why = res.verdict()
    assert verdict == "fail" and "2.weight" in why, why
