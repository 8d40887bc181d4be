"""A diff whose float16 side runs on onnxruntime's CPU provider measures the outputs' rows on plain runs of the models
(``compare.plain_outputs``): probing a float16 tensor makes it a graph output, rounded to float16 there where the plain
model kept float32 between ops, and the outputs computed from it change (QA: mobilenet_v3 in float16 against its
float32 original, logits max|a-b| 4.95e-6 as the models compute them, 5.47e-6 with the default selection probed).
Oracle: onnxruntime's plain runs of the two models, compared in numpy float64."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from onnxprobe import api


def chain(path, half: bool, n: int = 3) -> str:
    """x + 3000, cast to int64, squared; and x * 7 + 3000 as a float output: x in float16 (``half``) or float32.
    In float16 on the CPU provider, 65504 + 3000 is kept in float32 (68504) unless the sum is probed (Inf)."""
    t = TensorProto.FLOAT16 if half else TensorProto.FLOAT
    dt = np.float16 if half else np.float32
    # a float32 input cast in (as onnxruntime's float16 converter writes it with keep_io_types)
    g = helper.make_graph([helper.make_node("Cast", ["x32"], ["x"], name="in", to=t),
                           helper.make_node("Add", ["x", "k"], ["xo"], name="addk"),
                           helper.make_node("Cast", ["xo"], ["xi"], name="toint", to=TensorProto.INT64),
                           helper.make_node("Mul", ["xi", "xi"], ["sq"], name="sq"),
                           helper.make_node("Mul", ["x", "seven"], ["x7"], name="mul7"),
                           helper.make_node("Add", ["x7", "k"], ["f"], name="addf"),
                           helper.make_node("Cast", ["f"], ["out"], name="to32", to=TensorProto.FLOAT)], "g",
                          [helper.make_tensor_value_info("x32", TensorProto.FLOAT, [n])],
                          [helper.make_tensor_value_info("sq", TensorProto.INT64, [n]),
                           helper.make_tensor_value_info("out", TensorProto.FLOAT, [n])],
                          [numpy_helper.from_array(np.array(3000, dt), "k"), numpy_helper.from_array(np.array(7, dt), "seven")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return str(path)


X = np.array([65504, -1000, 2], np.float32)


def plain(path, x) -> dict:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return dict(zip(["sq", "out"], s.run(["sq", "out"], {"x32": x})))


def test_the_outputs_rows_are_what_the_plain_models_compute(tmp_path):
    a, b = chain(tmp_path / "h16.onnx", True), chain(tmp_path / "f32.onnx", False)
    pa, pb = plain(a, X), plain(b, X)
    cfg = api.RunConfig(device="cpu", cache=False)
    for sel in (api.Selection(all=True), api.Selection()):
        res = api.diff(a, b, selection=sel, config=cfg, inputs=api.InputSpec(arrays={"x32": X}))
        for name in ("sq", "out"):
            r = next(r for r in res.results if r.pair.a.name == name)
            want = float(np.max(np.abs(pa[name].astype(np.float64) - pb[name].astype(np.float64))))
            assert r.metrics.max_abs == want, (name, sel, r.metrics.max_abs, want)
    res = api.diff(a, b, selection=api.Selection(all=True), config=cfg, inputs=api.InputSpec(arrays={"x32": X}))
    if int(pa["sq"][0]) == 68504 ** 2:  # this onnxruntime keeps the sum in float32 when it is not probed: the probe moved sq
        assert any("the outputs sq" in n or "the output sq" in n for n in res.notes), res.notes


def test_no_plain_runs_where_only_the_outputs_are_probed(tmp_path, monkeypatch):
    from onnxprobe.compare import plain_outputs

    a, b = chain(tmp_path / "h16.onnx", True), chain(tmp_path / "f32.onnx", False)
    called = []
    monkeypatch.setattr(plain_outputs, "measure_plain", lambda *a, **k: called.append(1) or [])
    api.diff(a, b, selection=api.Selection(names=("sq", "out")), config=api.RunConfig(device="cpu", cache=False),
             inputs=api.InputSpec(arrays={"x32": X}))
    assert not called
    # two float32 models: none either
    api.diff(b, b, selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False),
             inputs=api.InputSpec(arrays={"x32": X}))
    assert not called


def test_a_repeated_diff_is_not_served_the_probed_numbers(tmp_path, monkeypatch):
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / "cache"))
    # tensors past SMALL_PAIRS_ON_HOST (those of float16 against float32 are measured on the host all the same, and a
    # diff with any such pair is not one the plan cache serves: ``api.diff_direct``)
    a, b = chain(tmp_path / "h16.onnx", True, 1 << 16), chain(tmp_path / "f32.onnx", False, 1 << 16)
    # random inputs (a repeated diff of two files on them is what the plan cache serves), larger than float16's steps
    run = lambda: api.diff(a, b, selection=api.Selection(all=True), inputs=api.InputSpec())  # noqa: E731
    first, second = run(), run()
    assert any(r.pair.a.name == "out" and r.metrics is not None for r in first.results)
    assert [(r.pair.a.name, r.metrics.max_abs if r.metrics else None) for r in first.results] == \
        [(r.pair.a.name, r.metrics.max_abs if r.metrics else None) for r in second.results]
