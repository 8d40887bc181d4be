"""`diff A B --all` resolved its selection on each model three times (graph.select.check_selects: A and B;
compare.diff.selected_pairs: A and B again, then returned every pair without reading either), and
check_criteria walked both models for an --op or --name that was not given: ~45 ms CPU of a cache-hit diff of
PP-OCRv4 det. --all now reads no selection in selected_pairs, check_criteria walks nothing when there is no
criterion, and check_selects resolves B only when A has no node's tensor selected. The report is the same:
every pair is compared, each against numpy float64 of onnxruntime's own outputs of the two models."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api
from onnxprobe.graph import select as select_mod
from onnxprobe.graph.select import Selection, check_criteria, check_selects

V = helper.make_tensor_value_info


def _model(tmp_path, name: str, scale: float) -> str:
    w = numpy_helper.from_array((np.random.default_rng(0).standard_normal((4, 4)) * scale).astype(np.float32), "W")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"), helper.make_node("Abs", ["m"], ["a"], name="abs"),
             helper.make_node("Relu", ["a"], ["y"], name="relu")]
    path = tmp_path / name
    onnx.save(make_model(nodes, [V("x", TensorProto.FLOAT, [2, 4])], [V("y", TensorProto.FLOAT, [2, 4])], [w]), path)
    return str(path)


def _counting(monkeypatch, module, name):
    calls = []
    real = getattr(module, name)

    def spy(*a, **k):
        calls.append(a[0] if a else None)
        return real(*a, **k)
    monkeypatch.setattr(module, name, spy)
    return calls


def test_diff_all_compares_every_pair_without_reselecting(tmp_path, monkeypatch):
    a, b = _model(tmp_path, "a.onnx", 1.0), _model(tmp_path, "b.onnx", 1.001)
    from onnxprobe.compare import diff as compare_diff

    selects = _counting(monkeypatch, compare_diff, "select")
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    res = api.diff(a, b, selection=Selection(all=True), config=api.RunConfig(device="cpu"), inputs={"x": x})
    assert selects == []  # selected_pairs resolved nothing for --all
    got = {r.pair.a.name: r.metrics.max_abs for r in res.results}
    assert set(got) == {"m", "a", "y"}
    names = ["m", "a", "y"]
    va = ort.InferenceSession(_exposed(a, names), providers=["CPUExecutionProvider"]).run(names, {"x": x})
    vb = ort.InferenceSession(_exposed(b, names), providers=["CPUExecutionProvider"]).run(names, {"x": x})
    for n, p, q in zip(names, va, vb):
        want = float(np.max(np.abs(p.astype(np.float64) - q.astype(np.float64))))
        assert np.isclose(got[n], want, rtol=1e-6, atol=0), (n, got[n], want)


def _exposed(path: str, names: list[str]) -> bytes:
    m = onnx.load(path)
    del m.graph.output[:]
    m.graph.output.extend(V(n, TensorProto.FLOAT, None) for n in names)
    return m.SerializeToString()


def test_check_selects_resolves_b_only_when_a_has_no_node(tmp_path, monkeypatch):
    a, b = onnx.load(_model(tmp_path, "a.onnx", 1.0)), onnx.load(_model(tmp_path, "b.onnx", 2.0))
    calls = _counting(monkeypatch, select_mod, "select")
    check_selects(a, b, Selection(all=True))
    assert calls == [a]
    calls.clear()
    check_selects(a, b, Selection(names=("y",)))  # a --name selects A's y: B is not resolved
    assert calls == [a]


def test_check_criteria_walks_nothing_without_a_criterion_and_still_refuses_a_missing_op(tmp_path, monkeypatch):
    a = onnx.load(_model(tmp_path, "a.onnx", 1.0))
    walks = _counting(monkeypatch, select_mod, "walk")
    for sel in (Selection(all=True), Selection(), Selection(range="0:1")):
        check_criteria([a, a], sel)
    assert walks == []
    try:
        check_criteria([a], Selection(ops=("Conv",)))
    except Exception as e:  # noqa: BLE001
        assert "Conv" in str(e)
    else:
        raise AssertionError("an --op no node has was accepted")
