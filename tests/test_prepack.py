"""No packed copy of big matrix weights (``runtime.prepack``): a model whose matrix products read PACKED_MAX bytes or
more of constant weights gets sessions without onnxruntime's pre-packing, in the normal path and in the plan
cache's direct mode alike (an entry records the decision), so that a served run computes what the first one did,
to the bit; a model of small weights (or of convolutions) keeps it. The numbers agree with numpy float64."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxprobe import api
from onnxprobe.graph.skeleton import skeleton
from onnxprobe.runtime import ort_options
from onnxprobe.runtime.ort import create_session
from onnxprobe.runtime.prepack import PACKED_MAX, prepacks

BIG_COLS = PACKED_MAX // (4 * 256) + 8  # a [256, BIG_COLS] float32 weight: just past PACKED_MAX


def _mlp(path, cols: int, constant: bool = False) -> np.ndarray:
    """y = Tanh(MatMul(x, w)) with w of [256, cols], an initializer or a Constant node's value."""
    w = (np.random.default_rng(3).standard_normal((256, cols)) / 16).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"), helper.make_node("Tanh", ["h"], ["y"], name="tanh")]
    inits = [numpy_helper.from_array(w, "w")]
    if constant:
        nodes.insert(0, helper.make_node("Constant", [], ["w"], name="wc", value=inits.pop()))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 256])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, cols])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return w


@pytest.mark.parametrize("constant", [False, True], ids=["initializer", "Constant node"])
def test_big_matrix_weights_are_not_prepacked_small_ones_are(tmp_path, constant):
    _mlp(tmp_path / "big.onnx", BIG_COLS, constant)
    _mlp(tmp_path / "small.onnx", 64, constant)
    big, small = onnx.load(str(tmp_path / "big.onnx")), onnx.load(str(tmp_path / "small.onnx"))
    assert not prepacks(big) and prepacks(small)
    assert not prepacks(skeleton(big, constants=True))  # its stubs count with their dims, their bytes elsewhere
    assert _disabled(create_session(big)) == "1" and _disabled(create_session(small)) is None
    # a session kept for many runs (a dataset's) packs once, where the product would pack each run
    assert _disabled(create_session(big, files=False)) is None


def _disabled(session) -> str | None:
    """The session's ``session.disable_prepacking`` entry; None where it has none (pre-packing on)."""
    try:
        return session.sess.get_session_options().get_session_config_entry("session.disable_prepacking")
    except RuntimeError:  # onnxruntime: "SessionOptions does not have configuration with key: ..."
        return None


def test_weights_of_other_ops_do_not_count(tmp_path):
    """A convolution's big weight (its kernel packs nothing at build) leaves pre-packing on."""
    w = np.zeros((256, 128, 9, 9), np.float32)  # 10 MiB
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="conv")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 128, 9, 9])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [numpy_helper.from_array(w, "w")])
    assert w.nbytes >= PACKED_MAX and prepacks(helper.make_model(g))


@pytest.mark.parametrize("command", ["layers", "diff"])
def test_a_served_run_builds_its_session_as_the_first_did(tmp_path, monkeypatch, command):
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ONNXPROBE_NO_CACHE", raising=False)
    w = _mlp(tmp_path / "a.onnx", BIG_COLS)
    m = onnx.load(str(tmp_path / "a.onnx"))
    m.graph.initializer[0].CopyFrom(numpy_helper.from_array((w * np.float32(1.001)).astype(np.float32), "w"))
    onnx.save(m, str(tmp_path / "b.onnx"))
    asked: list[bool] = []
    real = ort_options.session_options
    monkeypatch.setattr(ort_options, "session_options", lambda *a, **k: asked.append(k.get("prepack", True)) or real(*a, **k))
    kw = dict(selection=api.Selection(all=True), config=api.RunConfig(device="cpu"))  # random inputs: a recipe to serve
    a = str(tmp_path / "a.onnx")
    if command == "layers":
        first, second = (api.layers(a, **kw) for _ in range(2))
        assert type(second.plan).__name__ == "CachedPlan"  # served
        x = second.feed["x"]
        rows = [{r.name: (s.min, s.max, s.mean, s.std) for r, s in res.rows() if s is not None} for res in (first, second)]
        assert rows[0] == rows[1] and rows[0]
        want = np.tanh(x.astype(np.float64) @ w.astype(np.float64))
        assert rows[1]["y"][2] == pytest.approx(want.mean(), abs=1e-6)
        assert rows[1]["y"][3] == pytest.approx(want.std(), rel=1e-5)
    else:
        first, second = (api.diff(a, str(tmp_path / "b.onnx"), **kw) for _ in range(2))
        assert type(second.a).__name__ == "ServedSide"
        x = second.feed["x"]
        got = [[(r.pair.b.name, r.metrics) for r in res.results] for res in (first, second)]
        assert got[0] == got[1] and got[0]
        ya, yb = (np.tanh(x.astype(np.float64) @ v.astype(np.float64)) for v in (w * np.float32(1.001), w))
        y = dict(got[1])["y"]
        assert y.max_abs == pytest.approx(np.abs(ya - yb).max(), rel=1e-3)
    assert asked and not any(asked)  # every session of both runs without pre-packing


def test_a_layers_entry_without_its_prepacking_is_a_miss(tmp_path, monkeypatch):
    """An entry (under a digest that holds) whose record of the decision is not true or false is not served."""
    from onnxprobe.runtime import plan_cache

    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ONNXPROBE_NO_CACHE", raising=False)
    _mlp(tmp_path / "a.onnx", 64)
    kw = dict(selection=api.Selection(all=True), config=api.RunConfig(device="cpu"))
    first = api.layers(str(tmp_path / "a.onnx"), **kw)
    keys = [f.name.split(".")[0] for f in (tmp_path / "cache").glob("*.probed.json")]
    edited = 0
    for k in keys:
        data, meta = plan_cache.read_entry(k)
        if "prepack" in meta and "probes" in meta:
            assert meta["prepack"] is True  # small weights
            plan_cache.write_entry(k, data, {**meta, "prepack": "no"})
            edited += 1
    assert edited == 1
    again = api.layers(str(tmp_path / "a.onnx"), **kw)
    assert type(again.plan).__name__ != "CachedPlan"
    assert [(r.name, s) for r, s in again.rows()] == [(r.name, s) for r, s in first.rows()]
