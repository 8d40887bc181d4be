"""Big weights reach onnxruntime once: a probed copy of a big model is a skeleton whose stubs take the
model's own initializers by name, and onnxruntime reads their bytes in place (in-memory external data)
instead of a copy. Checked against onnx.reference and numpy float64, and by peak RSS in fresh processes."""

from __future__ import annotations

import gc

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from onnxprobe import api
from onnxprobe.graph.skeleton import is_stub, skeleton
from onnxprobe.runtime.ort import SKELETON_BYTES, create_session, run_bound
from test_memory import MB, peak_bytes

N = 1024


def _mlp(path, layers: int, width: int = N, *, typed: bool = False, seed: int = 0, op: str = "MatMul", rows: int = 8):
    """x @ w0 -> Relu -> @ w1 ... : ``layers`` width x width float32 weights (4 MB each at 1024).
    ``op="Mul"``: x * w0 -> Relu -> ..., whose weights onnxruntime does not repack (MatMul's it does)."""
    rng = np.random.default_rng(seed)
    inits, nodes, prev = [], [], "x"
    for i in range(layers):
        w = (rng.standard_normal((width, width)) / np.sqrt(width) if op == "MatMul"
             else 1 + 0.01 * rng.standard_normal((width, width))).astype(np.float32)  # values stay near 1
        if typed:  # float_data, not raw_data: the bytes are laid out once, from the values
            inits.append(helper.make_tensor(f"w{i}", TensorProto.FLOAT, w.shape, w.ravel().tolist()))
        else:
            inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes += [helper.make_node(op, [prev, f"w{i}"], [f"h{i}"], name=f"mm{i}"),
                  helper.make_node("Relu", [f"h{i}"], [f"r{i}"], name=f"relu{i}")]
        prev = f"r{i}"
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, width])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [rows, width])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


def _oracle(path, x):
    m = onnx.load(str(path))
    names = [o for n in m.graph.node for o in n.output]
    ref = ReferenceEvaluator(m)
    return dict(zip(names, ref.run(names, {"x": x})))


@pytest.mark.parametrize("typed", [False, True], ids=["raw_data", "float_data"])
def test_layers_of_a_big_model_runs_a_skeleton_over_the_model_s_own_weights(tmp_path, typed):
    path = _mlp(tmp_path / "mlp.onnx", 3, typed=typed)  # 12 MB: above SKELETON_BYTES
    assert 3 * N * N * 4 >= SKELETON_BYTES
    x = np.random.default_rng(1).random((8, N), dtype=np.float32)
    res = api.layers(path, api.Selection(all=True), api.RunConfig(device="cpu", cache=False),
                     api.InputSpec(arrays={"x": x}))
    big = [t for t in res.plan.model.graph.initializer if int(np.prod(t.dims)) > 4096]
    assert len(big) == 3 and all(is_stub(t) for t in big)
    assert res.plan.model.ByteSize() < MB and res.plan.weights_from is not None
    want = _oracle(path, x)
    for name, v in want.items():
        st = res.stats[name]
        v64 = v.astype(np.float64)
        assert st.count == v.size
        np.testing.assert_allclose([st.min, st.max], [v64.min(), v64.max()], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(st.mean, v64.mean(), rtol=1e-4, atol=1e-6)


def test_the_cached_probed_copy_stays_a_skeleton(tmp_path, monkeypatch):
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / "cache"))
    path = _mlp(tmp_path / "mlp.onnx", 3)
    x = np.random.default_rng(2).random((8, N), dtype=np.float32)
    kw = dict(config=api.RunConfig(device="cpu"), inputs=api.InputSpec(arrays={"x": x}))
    first = api.layers(path, api.Selection(all=True), **kw)
    second = api.layers(path, api.Selection(all=True), **kw)  # from the plan cache
    assert all(is_stub(t) for t in second.plan.model.graph.initializer if int(np.prod(t.dims)) > 4096)
    for name, st in first.stats.items():
        assert (st.min, st.max, st.count) == (second.stats[name].min, second.stats[name].max, second.stats[name].count)


def test_in_place_weights_outlive_the_caller_s_references(tmp_path):
    """onnxruntime reads the handed bytes for as long as the session lives: the session keeps them."""
    path = _mlp(tmp_path / "mlp.onnx", 3)
    m = onnx.load(str(path))
    x = np.random.default_rng(3).random((8, N), dtype=np.float32)
    s = create_session(m, device="cpu")  # 12 MB: built from a skeleton, the weights handed apart
    del m
    gc.collect()
    np.random.default_rng(6).random(3 * N * N)  # reuse whatever was freed
    want = _oracle(path, x)
    out, _ = run_bound(s, {"x": x}, ["r2"])
    np.testing.assert_allclose(out["r2"], want["r2"], rtol=1e-4, atol=1e-5)


def test_int4_weights_are_handed_over_packed(tmp_path):
    """DequantizeLinear of an int4 initializer above the stub size: the bytes onnxruntime reads are ONNX's
    packed layout (two values per byte), not numpy's one value per int8."""
    vals = (np.arange(N * 16) % 16 - 8).astype(np.int8).reshape(16, N)
    w = helper.make_tensor("w", TensorProto.INT4, vals.shape, vals.ravel().tolist())
    big = numpy_helper.from_array(np.random.default_rng(4).standard_normal((N, N)).astype(np.float32), "pad")
    g = helper.make_graph([helper.make_node("DequantizeLinear", ["w", "s"], ["d"], name="dq"),
                           helper.make_node("MatMul", ["x", "d"], ["y"], name="mm"),
                           helper.make_node("MatMul", ["y2", "pad"], ["z"], name="mm2"),
                           helper.make_node("Identity", ["y"], ["y2"], name="id")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [4, N])],
                          [w, big, numpy_helper.from_array(np.array(0.5, np.float32), "s")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    x = np.random.default_rng(5).random((4, 16), dtype=np.float32)
    s = create_session(skeleton(m), device="cpu", weights={t.name: t for t in m.graph.initializer})
    got = run_bound(s, {"x": x}, ["z"])[0]["z"]
    want = (x.astype(np.float64) @ (vals.astype(np.float64) * 0.5)) @ numpy_helper.to_array(big).astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_layers_holds_a_big_model_s_weights_at_most_twice(tmp_path):
    """Peak RSS of `layers --all` on 64 MB of weights, above the same command on a 4 MB model: the model
    as read plus the bytes handed to onnxruntime, not also a probed copy and onnxruntime's own copy
    (four copies before). Elementwise weights: onnxruntime repacks MatMul's into a copy of its own."""
    small = _mlp(tmp_path / "small.onnx", 1, op="Mul", rows=N)
    big = _mlp(tmp_path / "big.onnx", 16, op="Mul", rows=N)  # 16 x 4 MB
    args = ["layers", "--all", "--device", "cpu", "--no-cache"]
    grown = peak_bytes(*args[:1], big, *args[1:]) - peak_bytes(*args[:1], small, *args[1:])
    weights = 15 * N * N * 4
    assert grown < 2.5 * weights, f"{grown / MB:.0f} MB for {weights / MB:.0f} MB of weights"


def _const_mlp(path, layers: int, *, scale: float = 1.0, width: int = 256, seed: int = 0):
    """The weights in Constant nodes (as PaddlePaddle's exports keep them), plus a big int64 Constant of
    Gather indices that must stay inline (shape inference's data propagation reads integer constants)."""
    rng = np.random.default_rng(seed)
    nodes, prev = [], "x"
    idx = np.arange(width * 20, dtype=np.int64) % width  # 5120 > KEEP_ELEMENTS
    nodes.append(helper.make_node("Constant", [], ["idx"], name="idx", value=numpy_helper.from_array(idx)))
    for i in range(layers):
        w = (rng.standard_normal((width, width)) * scale / np.sqrt(width)).astype(np.float32)
        nodes += [helper.make_node("Constant", [], [f"w{i}"], name=f"c{i}", value=numpy_helper.from_array(w)),
                  helper.make_node("MatMul", [prev, f"w{i}"], [f"h{i}"], name=f"mm{i}"),
                  helper.make_node("Relu", [f"h{i}"], [f"r{i}"], name=f"relu{i}")]
        prev = f"r{i}"
    nodes.append(helper.make_node("Gather", [prev, "idx"], ["y"], name="gather", axis=1))
    g = helper.make_graph(nodes, "const_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, width])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, width * 20])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


def _const_values(model) -> dict:
    return {n.output[0]: n.attribute[0].t for n in model.graph.node if n.op_type == "Constant"}


def test_constant_node_weights_are_stubs_of_the_probed_copy(tmp_path):
    path = _const_mlp(tmp_path / "c.onnx", 3)
    x = np.random.default_rng(7).random((8, 256), dtype=np.float32)
    res = api.layers(path, api.Selection(all=True), api.RunConfig(device="cpu", cache=False), api.InputSpec(arrays={"x": x}))
    values = _const_values(res.plan.model)
    assert all(is_stub(values[f"w{i}"]) for i in range(3)) and not is_stub(values["idx"])
    assert res.plan.model.ByteSize() < 100_000 and res.plan.weights_from is not None
    want = _oracle(path, x)
    for name in ["h0", "r1", "h2", "y"]:
        st, v64 = res.stats[name], want[name].astype(np.float64)
        np.testing.assert_allclose([st.min, st.max, st.mean], [v64.min(), v64.max(), v64.mean()], rtol=1e-4, atol=1e-6)


def test_a_cached_constant_stub_plan_serves_a_runtime_that_needs_whole_models(tmp_path, monkeypatch):
    """onnxruntime stores the probed copy with its Constant values stubbed; onnx.reference, which takes
    whole models, gets them put back from the model when it reads the same entry."""
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / "cache"))
    path = _const_mlp(tmp_path / "c.onnx", 2)
    x = np.random.default_rng(8).random((8, 256), dtype=np.float32)
    kw = dict(config=api.RunConfig(device="cpu"), inputs=api.InputSpec(arrays={"x": x}))
    ort_res = api.layers(path, api.Selection(all=True), **kw)
    ref_res = api.layers(path, api.Selection(all=True), runtime="reference", **kw)
    assert ref_res.plan.weights_from is None
    assert not any(is_stub(t) for t in _const_values(ref_res.plan.model).values())
    for name, st in ort_res.stats.items():
        np.testing.assert_allclose([ref_res.stats[name].min, ref_res.stats[name].max], [st.min, st.max], rtol=1e-5, atol=1e-6)


def test_one_run_diff_of_constant_weight_models_hands_their_constants_over(tmp_path):
    """diff's merged graph stubs both models' Constant values; the introduced-error cones read B's
    Constants where they are (not copies of stubs no weight stands for); the one run equals separate runs."""
    from onnxprobe.graph.skeleton import stubs
    from test_diff import assert_same_metrics
    from test_memory import one_run_diff

    fg, one, kw = one_run_diff(_const_mlp(tmp_path / "a.onnx", 3, scale=1.001), _const_mlp(tmp_path / "b.onnx", 3))
    st = stubs(fg.model)
    assert len(st) == 6 and set(st) <= set(fg.weights)
    assert one.in_graph == len(one.results) and all(r.introduced is not None for r in one.results if r.pair.a.op_type == "MatMul")
    assert_same_metrics(api.diff(tmp_path / "a.onnx", tmp_path / "b.onnx", fuse=False, **kw), one)


@pytest.mark.parametrize("runtime", ["ort", "reference"])
def test_one_cache_entry_serves_constant_weight_models_of_one_graph_each_with_its_own_values(tmp_path, monkeypatch, runtime):
    """The cache key hashes a model's skeleton without its big Constant values (as without its big
    initializers'), and entries keep them as stubs: a second model of the same graph with other
    Constant weights reads the first one's entry (one rewrite for both), and its statistics are its own
    (onnx.reference on that model is the oracle), for onnxruntime and for a runtime that takes whole models."""
    import onnxprobe.runtime.runners.planning as runner_planning

    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ONNXPROBE_NO_CACHE", raising=False)
    calls, real = [], runner_planning.expose
    monkeypatch.setattr(runner_planning, "expose", lambda *a, **k: calls.append(1) or real(*a, **k))
    a, b = _const_mlp(tmp_path / "a.onnx", 2), _const_mlp(tmp_path / "b.onnx", 2, scale=3.0, seed=5)
    x = np.random.default_rng(9).random((8, 256), dtype=np.float32)
    kw = dict(config=api.RunConfig(device="cpu"), inputs=api.InputSpec(arrays={"x": x}), runtime=runtime)
    first = api.layers(a, api.Selection(all=True), **kw)
    second = api.layers(b, api.Selection(all=True), **kw)
    assert len(calls) == 1  # the second model's plan came from the first one's entry
    for path, res in ((a, first), (b, second)):
        want = _oracle(path, x)
        for name in ["h0", "r0", "h1", "y"]:
            st, v64 = res.stats[name], want[name].astype(np.float64)
            np.testing.assert_allclose([st.min, st.max, st.mean, st.std], [v64.min(), v64.max(), v64.mean(), v64.std()],
                                       rtol=1e-4, atol=1e-6)
    assert abs(second.stats["h1"].std / first.stats["h1"].std - 9.0) < 0.5  # b's weights, 3x a's, in both layers
