"""Integer tensors are equal or not: a default criterion judges a pair of them exactly (``stats.metrics.EXACT_INTEGERS``).

QA: an ArgMax output off by one (token 2001 against 2000) passed the float default (|a-b| <= 1e-4 + 1e-3 |b|: 1 <=
2.0001) and its verdict with it, and int64 values 30010 against 30000 likewise; SQNR (quantized models, two runtimes)
passed them too. A criterion the user gives judges integers as it judges the rest; quantized codes are compared
dequantized, as before."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from onnxprobe import api
from onnxprobe.stats.metrics import EXACT_INTEGERS, Tolerance


def argmax_model(path, peak: int, offset: int = 0, dtype=T.INT64):
    """logits = x + bias (a spike at ``peak``), token = ArgMax(logits) (+ ``offset``, cast to ``dtype``)."""
    bias = np.zeros((1, 50), np.float32)
    bias[0, peak] = 10.0
    nodes = [h.make_node("Add", ["x", "bias"], ["logits"]), h.make_node("ArgMax", ["logits"], ["arg"], axis=1, keepdims=0),
             h.make_node("Add", ["arg", "off"], ["shifted"]), h.make_node("Cast", ["shifted"], ["token"], to=dtype)]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 50])],
                     [h.make_tensor_value_info("token", dtype, [1]), h.make_tensor_value_info("logits", T.FLOAT, [1, 50])],
                     [nh.from_array(bias, "bias"), nh.from_array(np.array([offset], np.int64), "off")])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8), path)
    return str(path)


def row(res, name):
    return next(r for r in res.results if r.pair.a.name == name)


def test_an_index_off_by_one_fails_the_default(tmp_path):
    a, b = argmax_model(tmp_path / "a.onnx", 21), argmax_model(tmp_path / "b.onnx", 20)
    res = api.diff(a, b)
    token = row(res, "token")
    assert token.metrics.max_abs == 1 and token.passed is False and token.tolerance == EXACT_INTEGERS
    assert res.verdict()[0] == "fail"
    assert "integer tensors: a == b" in res.criterion
    # the float output beside it keeps the float default (its spike moved: it fails by its own numbers)
    assert row(res, "logits").tolerance.rule == "|a-b| <= 0.0001 + 0.001*|b|"


@pytest.mark.parametrize("dtype", [T.INT64, T.INT32, T.UINT16, T.INT8])
def test_large_integers_that_differ_fail_and_equal_ones_pass(tmp_path, dtype):
    big = 100 if dtype == T.INT8 else 30000
    a = argmax_model(tmp_path / "a.onnx", 20, offset=big + 10 if dtype != T.INT8 else big + 1, dtype=dtype)
    b = argmax_model(tmp_path / "b.onnx", 20, offset=big, dtype=dtype)
    token = row(api.diff(a, b), "token")
    # numpy's own difference of what the two models give (onnxruntime, as a user's script runs them)
    import onnxruntime as ort
    x = {"x": np.zeros((1, 50), np.float32)}
    got = [ort.InferenceSession(p, providers=["CPUExecutionProvider"]).run(["token"], x)[0] for p in (a, b)]
    assert token.metrics.max_abs == float(np.max(np.abs(got[0].astype(np.float64) - got[1].astype(np.float64)))) > 0
    assert token.passed is False  # 30010 against 30000 passed 1e-4 + 1e-3 * 30000 = 30.0001 before
    same = row(api.diff(a, a), "token")
    assert same.passed is True and same.metrics.exact


def test_a_criterion_the_user_gives_judges_integers_too(tmp_path):
    a, b = argmax_model(tmp_path / "a.onnx", 21), argmax_model(tmp_path / "b.onnx", 20)
    loose = Tolerance(metric="allclose", atol=2.0, rtol=0.0)
    assert row(api.diff(a, b, tolerance=loose), "token").passed is True
    assert row(api.diff(a, b, per_tensor={"token": loose}), "token").passed is True
    res = api.diff(a, b, tolerance=loose)
    assert "integer tensors" not in res.criterion


def test_the_command_line_says_it_and_exits_1(tmp_path, capsys):
    from onnxprobe.cli.main import app
    from typer.testing import CliRunner

    a, b = argmax_model(tmp_path / "a.onnx", 21), argmax_model(tmp_path / "b.onnx", 20)
    r = CliRunner().invoke(app, ["diff", a, b, "--no-cache", "--json", "-"])
    assert r.exit_code == 1, r.output
    d = json.loads(r.output)
    assert d["verdict"] == "fail" and "integer tensors: a == b" in d["criterion"]
    assert next(p for p in d["pairs"] if p["a"] == "token")["passed"] is False
    r = CliRunner().invoke(app, ["diff", a, b, "--no-cache", "--atol", "token:1", "--atol", "logits:20"])
    assert r.exit_code == 0, r.output


def test_served_from_the_cache_alike(tmp_path, monkeypatch):
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / "cache"))
    a, b = argmax_model(tmp_path / "a.onnx", 21), argmax_model(tmp_path / "b.onnx", 20)
    first, second = api.diff(a, b), api.diff(a, b)
    assert [(r.pair.a.name, r.passed, r.tolerance) for r in first.results] == \
        [(r.pair.a.name, r.passed, r.tolerance) for r in second.results]
    assert first.criterion == second.criterion and row(second, "token").passed is False


def test_against_saved_values_and_a_torch_module_too(tmp_path):
    """A side whose types onnx does not declare (a torch module's outputs; saved arrays, typed by their dtype)
    judges an integer output exactly as well: an ArgMax off by one passed --vs-torch's rtol 1e-4 (10065 against
    10064, QA). Oracle: torch's own argmax."""
    torch = pytest.importorskip("torch")

    class Pick(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.head = torch.nn.Linear(8, 20000)

        def forward(self, x):
            return torch.argmax(self.head(x), dim=1) + 1  # the export adds 1 more below: off by one

    torch.manual_seed(0)
    m, x = Pick().eval(), torch.randn(1, 8)
    p = tmp_path / "pick.onnx"
    torch.onnx.export(m, (x,), str(p), input_names=["x"], dynamo=False)
    model = onnx.load(p)
    out = model.graph.output[0].name
    model.graph.node.append(h.make_node("Add", [f"{out}_raw", "one"], [out]))
    for n in model.graph.node[:-1]:  # the last node's output now feeds the added Add
        for k, o in enumerate(n.output):
            if o == out:
                n.output[k] = f"{out}_raw"
    model.graph.initializer.append(nh.from_array(np.array(1, np.int64), "one"))
    onnx.save(model, p)
    want = int(m(x).item())
    res = api.diff_torch(str(p), m, example_args=(x,))
    r = next(r for r in res.results if r.pair.a.is_output)
    assert r.metrics.max_abs == 1 and r.passed is False and res.verdict()[0] == "fail", (r, want)
    # saved values of the model's output, as --vs-npz reads them: an int64 array of torch's answer
    res = api.diff(str(p), vs_npz={out: np.array([want], np.int64)}, inputs=api.InputSpec(arrays={"x": x.numpy()}))
    r = next(r for r in res.results if r.pair.a.name == out)
    assert r.metrics.max_abs == 1 and r.passed is False
