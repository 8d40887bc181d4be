"""`--vs-torch` with modules or example arguments numpy cannot take as they are: bfloat16 parameters
(torch's .numpy() refuses bfloat16) and meta tensors (no data): the comparison runs, or one clear line
says why not; never an internal error."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from typer.testing import CliRunner

torch = pytest.importorskip("torch")

import torch_models as tm  # noqa: E402  (needs torch)
from onnxprobe import api  # noqa: E402
from onnxprobe.cli.main import app  # noqa: E402
from onnxprobe.errors import OnnxProbeError, UsageError  # noqa: E402
from onnxprobe.torch.params import map_parameters  # noqa: E402
from onnxprobe.torch.runner import to_numpy  # noqa: E402

runner = CliRunner()


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = torch.nn.Linear(4, 8), torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.l2(torch.sigmoid(self.l1(x)))


@pytest.fixture(scope="module")
def bf16_export(tmp_path_factory):
    torch.manual_seed(4)
    m, x = Mlp().to(torch.bfloat16).eval(), torch.randn(3, 4).bfloat16()
    path = tmp_path_factory.mktemp("bf16") / "mlp.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=False, opset_version=17, input_names=["x"])
    return path, m, x


def test_the_gradients_of_a_bfloat16_module_run_or_say_why_in_one_line(bf16_export):
    """diff --grad on a bfloat16 module: its parameters reach numpy through float32 (exact); the run then
    goes as far as onnxruntime takes bfloat16 (its CPU has no bfloat16 Gemm: one line), never the
    internal error "Got unsupported ScalarType BFloat16"."""
    path, m, x = bf16_export
    try:
        res = api.diff_grad_torch(path, (m, (x,)))
    except OnnxProbeError as e:
        assert "BFloat16" not in str(e) and "\n" not in str(e), str(e)
    else:
        assert res.verdict()[0] in ("pass", "fail")


def test_bfloat16_parameters_are_found_by_value(bf16_export):
    """The bfloat16 parameters, as onnxprobe hands them over, hold the very bits of the export's
    initializers: each links to its own (the oracle: torch's float32 widening, exact for bfloat16)."""
    path, m, _ = bf16_export
    model = onnx.load(str(path))
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    params = {n: to_numpy(p) for n, p in m.named_parameters()}
    for n, p in m.named_parameters():
        assert np.array_equal(inits[n].astype(np.float32), p.detach().float().numpy())
    pm = map_parameters(model, params, list(inits))
    assert {i: link.params for i, link in pm.links.items()} == {n: [n] for n in params}


@pytest.fixture(scope="module")
def shared_export(tmp_path_factory):
    m, args = tm.build("shared")
    path = tmp_path_factory.mktemp("meta") / "shared.onnx"
    torch.onnx.export(m, args, str(path), dynamo=False, opset_version=17, input_names=["x"])
    return path


@pytest.mark.parametrize("grad", [False, True])
def test_meta_example_arguments_are_refused_in_one_line(shared_export, grad):
    m, (x,) = tm.build("shared")
    meta = (m, (torch.empty_like(x, device="meta"),))
    with pytest.raises(UsageError, match=r"example argument 0 holds no data \(meta tensors"):
        (api.diff_grad_torch if grad else api.diff_torch)(shared_export, meta)


def test_a_meta_module_is_refused_in_one_line(shared_export, tmp_path):
    src = tmp_path / "meta_mod.py"
    src.write_text("import torch_models as tm  # imported by this test already\n"
                   "def build():\n"
                   "    m, args = tm.build('shared')\n"
                   "    return m.to('meta'), args\n")
    r = runner.invoke(app, ["diff", "--grad", str(shared_export), "--vs-torch", f"{src}:build"])
    out = r.output.strip()
    assert r.exit_code == 2 and len(out.splitlines()) == 1 and "Traceback" not in out, out
    assert "holds no data (a meta tensor" in out, out
