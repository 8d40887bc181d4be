"""`diff --vs-torch` and a forward() that takes a Python number: the legacy exporter makes `scale: float` a
0-d double input of the ONNX model (dynamo bakes it in), so the example arguments (x, 3.0) are both inputs.
They were refused ('the example arguments hold 1 tensor(s), the ONNX model takes 2 input(s)'), even by
export_and_diff on the export it had just made itself. torch is the oracle."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import onnxprobe.torch as opt  # noqa: E402
from onnxprobe import api  # noqa: E402

nn = torch.nn


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.out = nn.Linear(4, 2)

    def forward(self, x, scale: float, shift: int, mode: str = "sum"):
        h = self.fc(x) * scale + shift
        return self.out(h) if mode == "sum" else h


def _built():
    torch.manual_seed(0)
    return Scaled().eval(), torch.randn(2, 4)


@pytest.mark.parametrize("dynamo", [False, True])
def test_export_and_diff_of_a_module_with_number_arguments(dynamo):
    if dynamo:
        pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
    m, x = _built()
    res = opt.export_and_diff(m, (x, 3.0, 2, "sum"), dynamo=dynamo)
    assert res.verdict()[0] == "pass", res.verdict()
    assert {"fc"} <= {r.pair.b.name for r in res.results}
    assert max(r.metrics.max_abs for r in res.results) < 1e-5


def test_a_legacy_number_input_is_fed_to_both_sides(tmp_path):
    """The number is an input: other values of it reach the ONNX model and torch alike (were torch to keep
    the export's 3.0, the output would be off)."""
    m, x = _built()
    path = tmp_path / "scaled.onnx"
    torch.onnx.export(m, (x, 3.0, 2, "sum"), str(path), dynamo=False, verbose=False)
    res = api.diff_torch(path, m, example_args=(x, 5.0, -1, "sum"))
    assert res.verdict()[0] == "pass", res.verdict()
    with torch.no_grad():
        want = m(x, 5.0, -1).numpy()
    assert abs(res.a.values([res.results[-1].pair.a], res.feed)[res.results[-1].pair.a.probe] - want).max() < 1e-5
