"""A layer of B that is A's own computation (the same op and attributes, reading what A's node reads: A's matched
tensors, the same graph input, constants of the same bytes) introduces nothing: the one-run diff builds no cone
for it (``compare.same_function``) and its introduced error is exact. Every other layer still gets its cone, and
its introduced error the value the host path measures (the oracle: separate runs, B's node run on A's values and
compared in numpy float64)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxprobe import api
from onnxprobe.compare import fused, fused_cache
from onnxprobe.compare.same_function import SameFunction, same_bytes
from onnxprobe.runtime.runners import base as base_runner

ALL = api.Selection(all=True)


def _model(path, w: np.ndarray, bias: float = 0.5, alpha: float = 0.1, constant: bool = False) -> str:
    """x -> MatMul(w) -> Add(bias) -> LeakyRelu(alpha) -> Mul(x2) -> RandomUniformLike + -> y; ``constant``: w held by
    a Constant node (stubbed in the merged graph where it is big) instead of an initializer."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Add", ["h", "bias"], ["s"], name="add"),
             helper.make_node("LeakyRelu", ["s"], ["r"], name="act", alpha=alpha),
             helper.make_node("Mul", ["r", "two"], ["m"], name="mul"),
             helper.make_node("RandomUniformLike", ["m"], ["u"], name="noise"),
             helper.make_node("Add", ["m", "u"], ["y"], name="out")]
    inits = [numpy_helper.from_array(np.array([bias], np.float32), "bias"), numpy_helper.from_array(np.array([2.0], np.float32), "two")]
    if constant:
        nodes.insert(0, helper.make_node("Constant", [], ["w"], name="wconst", value=numpy_helper.from_array(w, "w")))
    else:
        inits.append(numpy_helper.from_array(w, "w"))
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, w.shape[0]])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, w.shape[1]])], initializer=inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return str(path)


@pytest.fixture
def cones(monkeypatch):
    """The B tensors (merged names, unprefixed) whose cone the one-run graph builds."""
    built: list[str] = []
    real = fused._cone_output

    def spy(g, pb, target, *args, **kwargs):
        built.append(target.split("/", 1)[-1])
        return real(g, pb, target, *args, **kwargs)

    monkeypatch.setattr(fused, "_cone_output", spy)
    monkeypatch.setattr(base_runner, "SMALL_PAIRS_ON_HOST", (0, 0))  # every pair a row of the graph
    return built


def _diff(a, b, fuse=True, **kw):
    return api.diff(a, b, selection=ALL, config=api.RunConfig(device="cpu", cache=False), inputs=api.InputSpec(seed=3),
                    fuse=fuse, **kw)


@pytest.mark.parametrize("constant", [False, True], ids=["initializer", "constant-node"])
def test_only_the_layers_that_differ_get_a_cone(tmp_path, cones, constant):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((80, 64)).astype(np.float32)  # 5,120 elements: a stub in the merged graph
    a = _model(tmp_path / "a.onnx", w, constant=constant)
    b = _model(tmp_path / "b.onnx", (w * (1 + 1e-3 * rng.standard_normal(w.shape))).astype(np.float32), constant=constant)
    res, host = _diff(a, b), _diff(a, b, fuse=False)
    # the MatMul reads another weight: measured; the Add, LeakyRelu and Mul are A's own (the same constants), the
    # random op never is (its cone's draw is its own), and the Add after it is A's own again
    assert sorted(cones) == ["h", "u"]
    by, want = ({r.pair.a.name: r for r in x.results} for x in (res, host))
    assert res.in_graph == len(res.results)
    for name in ("s", "r", "m", "y"):
        assert by[name].introduced.exact and want[name].introduced.exact, name
        assert not by[name].metrics.exact  # the error they carry is inherited
        assert by[name].introduced.count == by[name].metrics.count == want[name].introduced.count
    got, oracle = by["h"].introduced, want["h"].introduced
    assert not got.exact and got.sqnr_db == pytest.approx(oracle.sqnr_db, abs=1e-4)
    assert got.max_abs == pytest.approx(oracle.max_abs, rel=1e-6) and got.worst == oracle.worst


@pytest.mark.parametrize("constant", [False, True], ids=["initializer", "constant-node"])
def test_an_attribute_or_constant_that_differs_gets_its_cone(tmp_path, cones, constant):
    w = np.random.default_rng(1).standard_normal((80, 64)).astype(np.float32)  # the same big weight: stubs, compared
    a = _model(tmp_path / "a.onnx", w, constant=constant)
    b = _model(tmp_path / "b.onnx", w, bias=0.25, alpha=0.2, constant=constant)
    res, host = _diff(a, b), _diff(a, b, fuse=False)
    assert sorted(cones) == ["r", "s", "u"]
    by, want = ({r.pair.a.name: r for r in x.results} for x in (res, host))
    assert by["h"].introduced.exact and by["h"].metrics.exact  # the same MatMul on both sides
    for name in ("s", "r"):
        assert not by[name].introduced.exact
        assert by[name].introduced.sqnr_db == pytest.approx(want[name].introduced.sqnr_db, abs=1e-4), name
    assert by["m"].introduced.exact  # Mul by the same 2: A's own


def test_the_same_function_survives_the_cache_and_the_served_run(tmp_path, monkeypatch, cones):
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / "cache"))
    w = np.random.default_rng(2).standard_normal((16, 12)).astype(np.float32)
    a = _model(tmp_path / "a.onnx", w)
    b = _model(tmp_path / "b.onnx", (w * 1.01).astype(np.float32))
    kw = dict(selection=ALL, config=api.RunConfig(device="cpu"), inputs=api.InputSpec(seed=3))
    runs = [api.diff(a, b, **kw) for _ in range(3)]
    assert sorted(cones) == ["h", "u"]  # built once: the second run reads the entry, the third is served
    first = [(r.pair.a.name, r.introduced.exact, r.introduced.sqnr_db) for r in runs[0].results]
    assert [n for n, exact, _ in first if exact] == ["s", "r", "m", "y"]
    for res in runs[1:]:
        assert [(r.pair.a.name, r.introduced.exact, r.introduced.sqnr_db) for r in res.results] == first


def test_an_entry_whose_same_pairs_are_not_positions_is_a_miss():
    assert fused_cache.same_pairs([0, 2], 3) == {0, 2} and fused_cache.same_pairs([], 0) == frozenset()
    for bad in (None, [3], [-1], ["1"], [True], [1.0], {"0": 1}):
        assert fused_cache.same_pairs(bad, 3) is None, bad


def _vi(name, elem):
    return helper.make_tensor_value_info(name, elem, None).type


def test_same_function_walks_unmatched_tensors_and_refuses_casts_and_bodies():
    """On a hand-made merged graph: B's y is Relu(Neg(x_b)) with x_b matched to A's x_a, A's is Relu(Neg(x_a)); an
    unmatched inner tensor is followed to A's own node; a matched tensor fed through a Cast (another element type),
    a tensor matched to another A tensor, or a node with a body, is no longer A's computation."""
    nodes = [helper.make_node("Neg", ["a/x"], ["a/n"]), helper.make_node("Relu", ["a/n"], ["a/y"]),
             helper.make_node("Neg", ["b/x"], ["b/n"]), helper.make_node("Relu", ["b/n"], ["b/y"]),
             helper.make_node("Neg", ["a/z"], ["a/nz"])]
    producer = {o: n for n in nodes for o in n.output}
    types = {k: _vi(k, TensorProto.FLOAT) for k in ("a/x", "b/x", "a/z")}
    f = SameFunction(producer, {"b/x": "a/x", "b/y": "a/y"}, {}, {}, types)
    assert f.same("b/y", "a/y") and f.same("b/n", "a/n")
    assert not SameFunction(producer, {"b/x": "a/z", "b/y": "a/y"}, {}, {}, types).same("b/y", "a/y")
    cast = {**types, "b/x": _vi("b/x", TensorProto.DOUBLE)}
    assert not SameFunction(producer, {"b/x": "a/x"}, {}, {}, cast).same("b/y", "a/y")
    body = helper.make_graph([], "body", [], [])
    for n in (nodes[1], nodes[3]):
        n.attribute.append(helper.make_attribute("g", body))
    assert not f.same("b/y", "a/y")


def test_same_bytes_is_bitwise():
    t = numpy_helper.from_array(np.array([0.0, 1.0], np.float32))
    assert same_bytes(t, numpy_helper.from_array(np.array([0.0, 1.0], np.float32)))
    assert not same_bytes(t, numpy_helper.from_array(np.array([-0.0, 1.0], np.float32)))  # equal values, not bytes
    assert not same_bytes(t, numpy_helper.from_array(np.array([0.0, 1.0], np.float64)))
    assert not same_bytes(t, numpy_helper.from_array(np.array([[0.0, 1.0]], np.float32)))
    u = helper.make_tensor("u", TensorProto.FLOAT, [2], [0.0, 1.0])  # float_data, not raw bytes: the same tensor
    assert same_bytes(t, u)
    ext = onnx.TensorProto()
    ext.CopyFrom(t)
    ext.data_location = TensorProto.EXTERNAL
    assert not same_bytes(t, ext)


def _two_matmuls(path, w0: np.ndarray, w: np.ndarray) -> str:
    """x -> MatMul(w0) -> h0 -> MatMul(w) -> h -> Relu -> y: w (5,120 elements) a stub in the merged graph."""
    nodes = [helper.make_node("MatMul", ["x", "w0"], ["h0"], name="mm0"), helper.make_node("MatMul", ["h0", "w"], ["h"], name="mm"),
             helper.make_node("Relu", ["h"], ["y"], name="act")]
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, w0.shape[0]])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, w.shape[1]])],
                          initializer=[numpy_helper.from_array(w0, "w0"), numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return str(path)


@pytest.mark.parametrize("small", [True, False], ids=["raw", "rows"])
def test_an_entry_made_when_a_big_weight_was_equal_is_not_read_once_it_differs(tmp_path, monkeypatch, small):
    """The plan cache's key holds the skeletons, not the big weights, which ``same`` compared: B re-exported with
    the same graph and another weight of its second MatMul (A's own before) is measured, not read as exact."""
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / "cache"))
    if not small:
        monkeypatch.setattr(base_runner, "SMALL_PAIRS_ON_HOST", (0, 0))
    rng = np.random.default_rng(4)
    w0, w = (rng.standard_normal(s).astype(np.float32) for s in ((80, 80), (80, 64)))
    v0 = (w0 * 1.01).astype(np.float32)  # h0 differs on both B's: h reads inexact values
    a = _two_matmuls(tmp_path / "a.onnx", w0, w)
    b1 = _two_matmuls(tmp_path / "b1.onnx", v0, w)
    b2 = _two_matmuls(tmp_path / "b2.onnx", v0, (w * 1.01).astype(np.float32))
    kw = dict(selection=ALL, inputs=api.InputSpec(seed=3))
    first = {r.pair.a.name: r.introduced for r in api.diff(a, b1, config=api.RunConfig(device="cpu"), **kw).results}
    assert first["h"].exact
    got = {r.pair.a.name: r.introduced for r in api.diff(a, b2, config=api.RunConfig(device="cpu"), **kw).results}
    want = {r.pair.a.name: r.introduced for r in _diff(a, b2, fuse=False).results}
    assert not want["h"].exact
    assert not got["h"].exact and got["h"].sqnr_db == pytest.approx(want["h"].sqnr_db, abs=1e-4)
    assert got["y"].exact and want["y"].exact
