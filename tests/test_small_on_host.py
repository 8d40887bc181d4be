"""Small tensors are summarised on the host from their values (runners.base.SMALL_ON_HOST) instead of by
statistics nodes; integer and bool tensors, and floats of unknown rank, take a float64 fast row in the
graph. Each way against numpy float64 over the same values (the oracle of test_stats_hostile), hostile
distributions included, and the probed copy checked to hold what was planned."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from conftest import make_model
from onnxprobe import api
from onnxprobe.graph.expose import expose
from onnxprobe.runtime.runners import base as base_runner
from onnxprobe.runtime.runners.planning import planned_shapes
from test_stats_hostile import DISTRIBUTIONS, check, oracle

rng = np.random.default_rng(3)
INTS = {
    "int64_big": rng.integers(-2**40, 2**40, size=(30, 7)).astype(np.int64),
    "int64_offset": (10**12 + rng.integers(0, 5, size=300)).astype(np.int64),
    "int32": rng.integers(-5, 5, size=(4, 5, 6)).astype(np.int32),
    "uint8": rng.integers(0, 255, size=(2, 3, 16, 16)).astype(np.uint8),
    "int8_single": np.array([-7], np.int8),
    "bool": rng.random((9, 9)) > 0.3,
}


def chain(x: np.ndarray, name: str = "t") -> onnx.ModelProto:
    """x -> Identity -> t -> Identity -> y: ``t`` is an intermediate tensor (the model's own outputs are
    always summarised in the graph)."""
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    return make_model([helper.make_node("Identity", ["x"], [name], name="a"), helper.make_node("Identity", [name], ["y"], name="b")],
                      [helper.make_tensor_value_info("x", elem, list(x.shape))], [helper.make_tensor_value_info("y", elem, list(x.shape))])


def layers(model: onnx.ModelProto, x: np.ndarray, tmp_path, **kw):
    p = tmp_path / "m.onnx"
    onnx.save(model, p)
    return api.layers(p, api.Selection(names=("t",)), api.RunConfig(device="cpu", cache=False), api.InputSpec(arrays={"x": x}), **kw)


@pytest.mark.parametrize("on_host", [True, False], ids=["host", "graph"])
@pytest.mark.parametrize("name", list(DISTRIBUTIONS) + list(INTS))
def test_intermediate_statistics_match_numpy_either_way(name, on_host, tmp_path, monkeypatch):
    x = DISTRIBUTIONS.get(name, INTS.get(name))
    monkeypatch.setattr(base_runner, "SMALL_ON_HOST", (2**24, 2**26) if on_host else (0, 0))
    res = layers(chain(x), x, tmp_path)
    (probe,) = [p for p in res.plan.probes if p.ref.name == "t"]
    assert probe.stats_on_host == on_host and (probe.stats_output is None) == on_host
    check(res.stats["t"], oracle(x), name, rel=1e-9 if on_host or name in INTS else 2e-6)
    assert res.shapes["t"] == x.shape
    assert "t" not in res.arrays  # its values left the run for the statistics only


def test_values_asked_for_are_kept(tmp_path):
    x = DISTRIBUTIONS["large_offset"]
    res = layers(chain(x), x, tmp_path, save=True)
    (probe,) = [p for p in res.plan.probes if p.ref.name == "t"]
    assert probe.stats_on_host and not probe.raw_for_stats
    np.testing.assert_array_equal(res.arrays["t"], x)


def _three_relus():
    """x [n, 4] -> Relu a -> Relu b -> Relu c, y = Concat(a, b, c): the model and its node tensors' refs."""
    n = [helper.make_node("Relu", ["x"], ["a"], name="r1"), helper.make_node("Relu", ["a"], ["b"], name="r2"),
         helper.make_node("Relu", ["b"], ["c"], name="r3"), helper.make_node("Concat", ["a", "b", "c"], ["y"], name="cat", axis=0)]
    m = make_model(n, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = api.Model.of(m, "m").proto
    return m, [r for r in api.select(m, api.Selection(all=True)) if r.kind == "node"]


def test_each_and_total_bound_what_goes_to_the_host():
    m, refs = _three_relus()
    # 100 x 4 float32 = 1600 bytes per tensor; the output y (4800) is too big for each = 2000
    known, host = planned_shapes(m, refs, {"x": (100, 4)}, 2000, 10**6)
    assert host == {"a", "b", "c"} and known["a"] == (100, 4)
    # the output too, inferred from the inputs as every other tensor (not from what it declares, which may
    # hold for other input shapes only: graph.stale_shapes); too big for the host, its row is planned on it
    assert known["y"] == (300, 4) and "y" not in host
    _, host = planned_shapes(m, refs, {"x": (100, 4)}, 2000, 3300)  # room for two of them
    assert len(host) == 2
    _, host = planned_shapes(m, refs, {"x": (1000, 4)}, 2000, 10**6)  # bigger inputs: none
    assert host == set()


def test_tensors_of_at_most_the_free_size_go_to_the_host_whatever_the_total():
    """``free`` (SMALL_ON_HOST's third number): a tensor of at most that many bytes is summarised on the host
    even past the total (its values cost less memory than its ~27 statistics nodes); bigger ones still need
    room in the total."""
    m, refs = _three_relus()
    # 100 x 4 float32: a, b, c 1600 bytes each, y 4800
    assert planned_shapes(m, refs, {"x": (100, 4)}, 10**4, 0, 1600)[1] == {"a", "b", "c"}
    assert planned_shapes(m, refs, {"x": (100, 4)}, 10**4, 0, 1599)[1] == set()
    assert planned_shapes(m, refs, {"x": (100, 4)}, 10**4, 0)[1] == set()  # no free share by default
    # the free ones fill the total first; y (past free) needs room: 3 x 1600 + 4800 = 9600
    assert planned_shapes(m, refs, {"x": (100, 4)}, 10**4, 9599, 1600)[1] == {"a", "b", "c"}
    assert planned_shapes(m, refs, {"x": (100, 4)}, 10**4, 9600, 1600)[1] == {"a", "b", "c", "y"}
    assert planned_shapes(m, refs, {"x": (100, 4)}, 1000, 0, 1600)[1] == set()  # never past ``each``
    _, each, free = base_runner.SMALL_ON_HOST
    assert 0 < free <= each


def test_many_small_tensors_past_the_total_are_summarised_on_the_host(tmp_path, monkeypatch):
    """A model of more small tensors than the total holds (a deep chain): with the free share every one is
    summarised on the host, and its statistics are numpy float64's of the values (onnx's reference evaluator)."""
    from onnx.reference import ReferenceEvaluator

    k, w = 40, 8
    nodes = [x for i in range(k) for x in (helper.make_node("Mul", ["x" if i == 0 else f"t{i - 1}", "s"], [f"m{i}"], name=f"mul{i}"),
                                           helper.make_node("Add", [f"m{i}", "c"], [f"t{i}"], name=f"add{i}"))]
    m = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, w])],
                   [helper.make_tensor_value_info(f"t{k - 1}", TensorProto.FLOAT, [3, w])],
                   initializers=[onnx.numpy_helper.from_array(np.float32(0.9), "s"), onnx.numpy_helper.from_array(np.float32(1e4), "c")])
    x = (1e4 + np.random.default_rng(0).standard_normal((3, w))).astype(np.float32)  # large offset
    names = [f"{p}{i}" for i in range(k) for p in ("m", "t")][:-1]  # the last is the model's output: in the graph
    want = dict(zip(names, ReferenceEvaluator(m).run(names, {"x": x})))
    monkeypatch.setattr(base_runner, "SMALL_ON_HOST", (2**18, 3 * w * 4 * 5, 2**15))  # a total of five tensors
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    res = api.layers(p, api.Selection(all=True), api.RunConfig(device="cpu", cache=False), api.InputSpec(arrays={"x": x}))
    on_host = {q.ref.name for q in res.plan.probes if q.stats_on_host}
    assert set(names) <= on_host
    for t in names:
        check(res.stats[t], oracle(want[t]), t, rel=1e-9)


def test_the_total_goes_to_the_smallest_tensors_first():
    """A big tensor early in the graph must not take the room of several small ones after it."""
    n = [helper.make_node("Tile", ["x", "reps"], ["big"], name="tile"),  # 100 x 4 -> 400 x 4 (6400 bytes)
         helper.make_node("ReduceSum", ["big"], ["s1"], name="s1", keepdims=1),  # 1 x 4 each (16 bytes)
         helper.make_node("Relu", ["s1"], ["s2"], name="s2"), helper.make_node("Relu", ["s2"], ["y"], name="s3")]
    m = make_model(n, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                   initializers=[onnx.numpy_helper.from_array(np.array([4, 1], np.int64), "reps")])
    m = api.Model.of(m, "m").proto
    refs = [r for r in api.select(m, api.Selection(all=True)) if r.kind == "node"]
    _, host = planned_shapes(m, refs, {"x": (100, 4)}, 10**4, 6400)
    assert host == {"s1", "s2", "y"}  # in graph order, "big" alone would have filled the total


def test_fewer_nodes_for_the_same_rows():
    x = INTS["int64_big"]
    m = api.Model.of(chain(x), "m").proto
    refs = [r for r in api.select(m, api.Selection(names=("t",))) if r.kind == "node"]
    in_graph, _ = expose(m, refs, nonfinite="deferred")
    on_host, probes = expose(m, refs, nonfinite="deferred", host={"t"})
    assert probes[0].stats_on_host and probes[0].raw_output == "t"
    assert len(on_host.graph.node) == len(m.graph.node) < len(in_graph.graph.node)


def unknown_rank(x: np.ndarray) -> onnx.ModelProto:
    """t = Reshape(x, shape fed at run time): onnx's inference cannot tell its rank."""
    return make_model([helper.make_node("Reshape", ["x", "s"], ["t"], name="r"), helper.make_node("Identity", ["t"], ["y"], name="b")],
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [x.size]), helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])


@pytest.mark.parametrize("name", ["large_offset", "nan_inf_mixed", "near_max", "signed_1e20", "single"])
def test_float_of_unknown_rank_takes_the_float64_row(name, tmp_path, monkeypatch):
    monkeypatch.setattr(base_runner, "SMALL_ON_HOST", (0, 0))
    x = DISTRIBUTIONS[name].astype(np.float32).reshape(-1)
    p = tmp_path / "m.onnx"
    onnx.save(unknown_rank(x), p)
    res = api.layers(p, api.Selection(names=("t",)), api.RunConfig(device="cpu", cache=False),
                     api.InputSpec(arrays={"x": x, "s": np.array([1, x.size], np.int64)}))
    check(res.stats["t"], oracle(x), name)
    assert res.shapes["t"] == (1, x.size)


def shape_chain(opset: int, extra: list | None = None) -> onnx.ModelProto:
    """t = Reshape(a, Concat(Slice(Shape(a), 0, 2), [-1])): [n, 6, 1, 8] -> [n, 6, 8], the shape computation
    an exporter writes (PaddlePaddle's flatten). Before opset 14 onnx's inference propagates no values
    through Slice-11 and Concat-11, so it cannot tell t's shape."""
    c = (lambda name, v: helper.make_node("Constant", [], [name], name=f"c_{name}", value=onnx.numpy_helper.from_array(np.array(v, np.int64), name)))
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"), helper.make_node("Shape", ["a"], ["sh"], name="shape"),
             c("zero", [0]), c("two", [2]), c("minus1", [-1]),
             helper.make_node("Slice", ["sh", "zero", "two"], ["lead"], name="slice"),
             helper.make_node("Concat", ["lead", "minus1"], ["target"], name="concat", axis=0),
             helper.make_node("Reshape", ["a", "target"], ["t"], name="flatten"),
             helper.make_node("Identity", ["t"], ["y"], name="out"), *(extra or [])]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 6, 1, 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], opset=opset, ir=7)


@pytest.mark.parametrize("opset", [11, 12, 13])
def test_old_opset_shape_chains_are_read_through_the_version_converter(opset, tmp_path):
    from onnx import shape_inference

    from onnxprobe.graph.shapes import concrete_shapes, static_shape, value_types, with_input_shapes

    m = shape_chain(opset)
    own = value_types(shape_inference.infer_shapes(with_input_shapes(m, {"x": (3, 6, 1, 8)}), data_prop=True))
    assert static_shape(own.get("t")) in (None, (None, None, None))  # what the model's own opset tells: nothing
    assert concrete_shapes(m, {"x": (3, 6, 1, 8)})["t"] == (3, 6, 8)
    refs = [r for r in api.select(api.Model.of(m, "m").proto, api.Selection(names=("t",))) if r.kind == "node"]
    _, host = planned_shapes(api.Model.of(m, "m").proto, refs, {"x": (3, 6, 1, 8)}, *base_runner.SMALL_ON_HOST)
    assert host == {"t"}
    x = DISTRIBUTIONS["large_offset"].astype(np.float32)[:144].reshape(3, 6, 1, 8)
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    res = api.layers(p, api.Selection(names=("t",)), api.RunConfig(device="cpu", cache=False), api.InputSpec(arrays={"x": x}))
    (probe,) = [q for q in res.plan.probes if q.ref.name == "t"]
    assert probe.stats_on_host
    check(res.stats["t"], oracle(np.maximum(x, 0).reshape(3, 6, 8)), "large_offset", rel=1e-9)
    assert res.shapes["t"] == (3, 6, 8)


def test_a_model_the_version_converter_cannot_read_keeps_what_inference_told(monkeypatch):
    from onnx import version_converter

    from onnxprobe.graph.shapes import concrete_shapes

    def refuse(model, opset):
        raise RuntimeError("no adapter")  # what the converter raises for an op it has no adapter for

    monkeypatch.setattr(version_converter, "convert_version", refuse)
    shapes = concrete_shapes(shape_chain(12), {"x": (3, 6, 1, 8)})
    assert shapes["a"] == (3, 6, 1, 8) and "t" not in shapes


def test_a_custom_domain_op_does_not_stop_the_converter():
    from onnxprobe.graph.shapes import concrete_shapes

    m = shape_chain(12, [helper.make_node("Frobnicate", ["y"], ["z"], name="custom", domain="com.example")])
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    assert concrete_shapes(m, {"x": (3, 6, 1, 8)})["t"] == (3, 6, 8)


def test_a_small_model_output_summarised_on_the_host_is_still_returned():
    """A model output small enough for the host's statistics (its raw values fetched for them alone) is
    still one of the result's outputs, with onnxruntime's values (it went missing: KeyError on res.outputs)."""
    import onnxruntime as ort

    from conftest import sample_feeds, sample_path

    feeds = sample_feeds("mlp")
    res = api.layers(sample_path("mlp"), api.Selection(all=True), api.RunConfig(device="cpu", cache=False),
                     api.InputSpec(arrays=feeds))
    s = ort.InferenceSession(str(sample_path("mlp")), providers=["CPUExecutionProvider"])
    for o, want in zip(s.get_outputs(), s.run(None, feeds)):
        np.testing.assert_array_equal(res.outputs[o.name], want)
