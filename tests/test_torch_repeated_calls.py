"""`diff --vs-torch` on a module that forward() calls more than once (a ResNet block's one ReLU after both
convs, a UNet's one MaxPool after each stage): each call's ONNX tensor is that module's output, but of
which call is not kept apart, so none pairs with it. The ONNX side must say so, not that the tensor is "not
the output of any module of the torch model (an intermediate tensor)", which is untrue of it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

torch = pytest.importorskip("torch")

import torch_models as tm  # noqa: E402  (needs torch)
from test_torch_reference import exports  # noqa: E402,F401,F811  (its module-scoped fixture of exports)

from onnxprobe import api  # noqa: E402

FILE = Path(__file__).with_name("torch_models.py")


def _call_outputs(module, args, paths: set[str]) -> list[tuple[str, np.ndarray]]:
    """(module path, value) of every call of the modules ``paths``, by forward hooks (the oracle)."""
    seen: list[tuple[str, np.ndarray]] = []
    hooks = [m.register_forward_hook(lambda _m, _i, out, p=p: seen.append((p, out.detach().numpy().copy())))
             for p, m in module.named_modules() if p in paths]
    with torch.no_grad():
        module(*args)
    for h in hooks:
        h.remove()
    return seen


def _onnx_values(path: Path, names: list[str], x: np.ndarray) -> dict[str, np.ndarray]:
    m = onnx.load(str(path))
    have = {o.name for o in m.graph.output}
    m.graph.output.extend(onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None) for n in names if n not in have)
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, {s.get_inputs()[0].name: x})))


@pytest.mark.parametrize("kind", ["legacy", "dynamo"])
def test_the_onnx_tensor_of_a_repeated_call_says_whose_output_it_is(exports, kind):
    path = exports("shared", kind)
    res = api.diff_torch(path, f"{FILE}:shared")
    assert res.verdict()[0] == "pass", res.verdict()
    module, args = tm.build("shared")
    calls = _call_outputs(module, args, {"lin", "act"})
    un_a = {u.obs.name: u for u in res.matching.unmatched_a}
    paired = {r.pair.a.name for r in res.results}
    values = _onnx_values(path, sorted(un_a), args[0].numpy())
    said = 0
    for name, u in un_a.items():
        if name not in values or values[name].dtype != np.float32:
            continue
        holders = [p for p, v in calls if v.shape == values[name].shape and np.allclose(values[name], v, rtol=1e-5, atol=1e-6)]
        if not holders:
            continue
        # an ONNX tensor that holds a call's output of the module called twice
        assert "any module" not in u.reason, (name, u.reason)
        assert any(p in u.reason for p in holders) and "2 times" in u.reason, (name, holders, u.reason)
        said += 1
    # lin's and act's two calls: the last act call is what the model's `out` reads, the others too; the ones
    # no other module returns are unmatched and said (at least lin's first and act's first)
    assert said >= 2, (said, {n: u.reason for n, u in un_a.items()}, paired)


@pytest.mark.parametrize("kind", ["legacy", "dynamo"])
def test_the_gradient_of_a_repeated_call_says_whose_output_it_is(exports, kind):
    """diff --grad --vs-torch: the gradient of such a tensor is unmatched for the same reason."""
    path = exports("shared", kind)
    res = api.diff_grad_torch(path, f"{FILE}:shared")
    assert res.verdict()[0] == "pass", res.verdict()
    module, args = tm.build("shared")
    calls = _call_outputs(module, args, {"lin", "act"})
    un_a = {u.obs.name: u for u in res.matching.unmatched_a if u.obs.name.endswith("_grad")}
    values = _onnx_values(path, sorted(n[: -len("_grad")] for n in un_a), args[0].numpy())
    said = 0
    for name, u in un_a.items():
        v = values.get(name[: -len("_grad")])
        if v is None or v.dtype != np.float32:
            continue
        holders = [p for p, c in calls if c.shape == v.shape and np.allclose(v, c, rtol=1e-5, atol=1e-6)]
        if holders:
            assert any(p in u.reason for p in holders) and "2 times" in u.reason, (name, holders, u.reason)
            said += 1
    assert said >= 2, (said, {n: u.reason for n, u in un_a.items()})
