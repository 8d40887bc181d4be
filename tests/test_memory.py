"""Memory-bounded raw dumps: `layers --save` with `--max-memory` keeps peak RSS within the budget on a
model whose intermediates (9 x 16 MB) exceed it. Peak RSS is measured in fresh processes."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

# VmHWM, not ru_maxrss: Linux carries ru_maxrss across fork+exec, so a child of a big pytest process
# would report the parent's size
PEAK = """
import sys
from onnxprobe.cli.main import app
from onnxprobe.memory import park_when_done
park_when_done()  # as the command line's entry point does (cli.main.run): sessions done with are parked
try:
    app(sys.argv[1:], standalone_mode=False)
finally:
    hwm = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1]
    print("PEAK_KB", hwm, file=sys.stderr)
"""
MB = 2**20


@pytest.fixture(scope="module")
def big_chain(tmp_path_factory):
    nodes, prev = [], "x"
    for i in range(8):
        nodes.append(helper.make_node(["Relu", "Neg", "Abs", "Sigmoid"][i % 4], [prev], [f"t{i}"], name=f"n{i}"))
        prev = f"t{i}"
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 1024, 1024])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [4, 1024, 1024])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    p = tmp_path_factory.mktemp("mem") / "chain.onnx"
    onnx.save(m, p)
    return p


def peak_bytes(*args) -> int:
    r = subprocess.run([sys.executable, "-c", PEAK, *map(str, args)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return int(next(ln for ln in r.stderr.splitlines() if ln.startswith("PEAK_KB")).split()[1]) * 1024


def test_save_stays_within_the_budget(big_chain, tmp_path):
    base = peak_bytes("layers", big_chain, "--all")  # statistics only: no raw tensor leaves the graph
    out = tmp_path / "acts.npz"
    budget = 32 * MB
    bounded = peak_bytes("layers", big_chain, "--all", "--save", out, "--max-memory", "32M")
    unbounded = peak_bytes("layers", big_chain, "--all", "--save", tmp_path / "all.npz", "--max-memory", "4G")
    assert bounded - base <= budget + 8 * MB, f"bounded run grew {(bounded - base) / MB:.0f} MB over the stats-only run"
    assert unbounded - base >= 64 * MB, "the unbounded run should hold the 144 MB of tensors: the test would prove nothing"
    with np.load(out) as z:
        assert sorted(z.files) == [f"t{i}" for i in range(8)]
        x = np.random.default_rng(0).random((4, 1024, 1024), dtype=np.float64).astype(np.float32)
        np.testing.assert_array_equal(z["t0"], np.maximum(x, 0))  # seed 0 feeds, as onnxprobe makes them


def test_parse_size_and_chunk_plan():
    from onnxprobe.errors import UsageError
    from onnxprobe.runtime.budget import parse_size, plan_chunks

    assert parse_size("512M") == 512 * MB and parse_size("1.5G") == int(1.5 * 2**30) and parse_size("100") == 100
    with pytest.raises(UsageError):
        parse_size("lots")
    assert plan_chunks([("a", 10), ("b", 10), ("c", 25), ("d", 1)], 20) == [["a", "b"], ["c"], ["d"]]


def one_run_diff(a, b):
    """``api.diff(a, b)`` of every tensor in one run, the merged graph it built, and the diff's arguments."""
    import onnxprobe.compare.fused as fused
    from onnxprobe import api

    built = []
    real = fused.build
    try:
        fused.build = lambda *x, **k: built.append(real(*x, **k)) or built[-1]
        kw = dict(selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False))
        one = api.diff(a, b, fuse=True, **kw)
    finally:
        fused.build = real
    (fg,) = built
    return fg, one, kw


def test_the_one_run_diff_reads_both_models_weights_in_place(tmp_path):
    """diff's merged graph holds stubs for the big weights (onnxruntime gets A's and B's own tensors), and
    measures what separate runs measure on the host."""
    from onnx import numpy_helper

    from onnxprobe import api
    from onnxprobe.graph.skeleton import is_stub
    from test_diff import assert_same_metrics

    def model(path, scale):
        w = numpy_helper.from_array((np.random.default_rng(0).standard_normal((256, 256)) * scale).astype(np.float32), "w")
        g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"), helper.make_node("Relu", ["h"], ["r"], name="relu"),
                               helper.make_node("MatMul", ["r", "w"], ["y"], name="mm2")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 256])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 256])], [w])
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
        return path

    a, b = model(tmp_path / "a.onnx", 1.001), model(tmp_path / "b.onnx", 1.0)
    fg, one, kw = one_run_diff(a, b)
    big = [t for t in fg.model.graph.initializer if t.dims and int(np.prod(t.dims)) > 4096]
    assert big and all(is_stub(t) for t in big) and set(t.name for t in big) <= set(fg.weights)
    assert one.in_graph == len(one.results) == 3
    assert_same_metrics(api.diff(a, b, fuse=False, **kw), one)


def test_a_parked_session_is_freed_before_the_next_is_built():
    """memory.park_when_done (the command line): a session done with stays until another is built, never
    alongside it; off (the API, the debugger), it is freed at once."""
    import gc
    import weakref

    from onnxprobe import memory
    from onnxprobe.runtime.ort import create_session

    class Session:  # stands for an onnxruntime session: only its lifetime matters here
        pass

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    tiny = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    tiny.ir_version = 8
    try:
        memory.park_when_done()
        s = Session()
        ref = weakref.ref(s)
        memory.done_with(s)
        del s
        gc.collect()
        assert ref() is not None  # parked
        create_session(tiny)  # the next session: the parked one goes first
        assert ref() is None
        s2, s3 = Session(), Session()
        ref2 = weakref.ref(s2)
        memory.done_with(s2)
        memory.done_with(s3)  # at most one parked: s2 goes now
        del s2
        assert ref2() is None
    finally:
        memory.park_when_done(False)
    s4 = Session()
    ref4 = weakref.ref(s4)
    memory.done_with(s4)  # parking off: nothing keeps it
    del s4
    assert ref4() is None
    assert not memory._parked


def test_the_runner_parks_what_it_does_not_keep(tmp_path):
    """OrtRunner.execute without a key hands its session to memory.done_with (parked on the command line)."""
    import weakref

    from onnxprobe import memory
    from onnxprobe.runtime.runners.ort import OrtRunner

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    r = OrtRunner(m)
    try:
        memory.park_when_done()
        got, _ = r.execute(m, {"x": np.array([-1.0, 2.0], np.float32)}, ["y"])
        assert got["y"].tolist() == [0.0, 2.0]
        assert len(memory._parked) == 1
        ref = weakref.ref(memory._parked[0])
        r.execute(m, {"x": np.array([1.0, 2.0], np.float32)}, ["y"])  # the next session frees the first
        assert ref() is None and len(memory._parked) == 1
    finally:
        memory.park_when_done(False)
    assert not memory._parked


def test_a_skeleton_is_handed_to_onnxruntime_without_a_copy_and_stays_one(monkeypatch):
    """A plan's probed copy of a model with big weights is a skeleton already (stubs, no weight of its own):
    its session is built from it as it is, not from a copy of its graph (4 MB resident more during the
    build of PP-OCRv4 det's 4,651 nodes), and its stubs are stubs again afterwards (the plan is kept for
    the next session). Checked against numpy."""
    from onnx import numpy_helper

    import onnxprobe.graph.skeleton as sk
    from onnxprobe.runtime.ort import create_session, run_bound

    rng = np.random.default_rng(0)
    w = rng.standard_normal((128, 128)).astype(np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 128])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 128])], [numpy_helper.from_array(w, "w")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    skel = sk.skeleton(model)
    before = skel.SerializeToString()
    assert sk.stubs(skel)
    made = []
    real = sk.skeleton
    monkeypatch.setattr(sk, "skeleton", lambda *a, **k: made.append(1) or real(*a, **k))
    s = create_session(skel, weights=sk.stub_weights(skel, model))
    assert not made, "the skeleton was copied"
    assert skel.SerializeToString() == before and list(sk.stubs(skel)) == ["w"]
    x = rng.standard_normal((4, 128)).astype(np.float32)
    out, _ = run_bound(s, {"x": x}, ["y"])
    np.testing.assert_allclose(out["y"], x.astype(np.float64) @ w.astype(np.float64), rtol=1e-4, atol=1e-4)
    s2 = create_session(skel, weights=sk.stub_weights(skel, model))  # the same skeleton serves again
    np.testing.assert_allclose(run_bound(s2, {"x": x}, ["y"])[0]["y"], out["y"])


def test_a_served_session_is_parked_with_the_weights_it_reads():
    """runtime.direct.Pending (the served layers and diff): the session is parked once run (freeing it takes a sixth
    of its build), together with the weights buffer onnxruntime reads in place; one never run is parked when let go;
    with parking off (the API) nothing keeps either."""
    from onnxprobe import memory
    from onnxprobe.runtime import direct

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    tiny = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    tiny.ir_version = 8
    x = np.array([-1.0, 2.0], np.float32)
    weights = np.zeros(0, np.uint8)
    try:
        memory.park_when_done()
        out = direct.start_skeleton(tiny.SerializeToString(), weights, "off").run({"x": x}, ["y"])[0]
        assert np.array_equal(out["y"], np.maximum(x, 0))  # numpy's own Relu
        (parked,) = memory._parked
        assert type(parked[0]).__name__ == "InferenceSession" and parked[1] is weights
        unused = direct.start_skeleton(tiny.SerializeToString(), weights, "off")
        unused.close()
        assert memory._parked[0][0] is not parked[0] and type(memory._parked[0][0]).__name__ == "InferenceSession"
    finally:
        memory.park_when_done(False)
    assert not memory._parked
    direct.start_skeleton(tiny.SerializeToString(), weights, "off").run({"x": x}, ["y"])
    assert not memory._parked
