"""Big inline weights left in the model file itself (graph.io.load_model(lazy=True), graph.wire_format.without_weights):
`layers` and `diff` given a path parse the file's protobuf without the raw_data of its big initializers, which stay in
the file (a model of 1 GiB of MatMul weights inside its .onnx file held them three times: 3.2 GB where plain inference
takes 1.2). Oracles: onnx.load of the same file, numpy float64, the model read whole (api.load)."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from weights_models import three_matmuls
from onnxprobe import api
from onnxprobe.errors import ModelError
from onnxprobe.graph import io as io_mod
from onnxprobe.graph import weight_files as wf
from onnxprobe.graph.io import load_model
from onnxprobe.graph.tensor_data import tensor_values

rng = np.random.default_rng(5)
W1 = rng.standard_normal((64, 96)).astype(np.float32)
W2 = (rng.standard_normal((96, 80)) * 1e-3 - 2e4).astype(np.float32)  # a large offset
W3 = rng.standard_normal((96, 80)).astype(np.float16)
B = rng.standard_normal(80).astype(np.float32)
X = rng.standard_normal((2, 64)).astype(np.float32)


@pytest.fixture(autouse=True)
def every_size(monkeypatch):
    monkeypatch.setattr(io_mod, "LAZY_FILE", 0)  # these models are small: read lazily all the same


def _model(w1=W1, typed=False, twice=False):
    w2 = helper.make_tensor("W2", TensorProto.FLOAT, W2.shape, W2.reshape(-1).tolist()) if typed else W2
    m = three_matmuls(w1, w2, W3, B)
    if twice:  # a name given twice: which did the model use? its bytes read as onnx reads them
        m.graph.initializer.append(numpy_helper.from_array(w1 * 2, "W1"))
    return m


def _save(m, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(m, path)
    return path


@pytest.mark.parametrize("typed", [False, True])
def test_the_model_file_parsed_without_its_big_weights_holds_what_onnx_reads(tmp_path, typed):
    p = _save(_model(typed=typed), tmp_path / "m.onnx")
    m = load_model(p, lazy=True)
    want = {t.name: numpy_helper.to_array(t) for t in onnx.load(p).graph.initializer}
    got = {t.name: t for t in m.graph.initializer}
    assert wf.is_left(got["W1"]) and wf.is_left(got["W3"]) and not wf.is_left(got["B"])
    assert wf.is_left(got["W2"]) != typed  # float_data, not raw_data: parsed as it is
    assert m.ByteSize() < W1.nbytes + (W2.nbytes if typed else 0)
    for name, arr in want.items():
        np.testing.assert_array_equal(tensor_values(got[name]), arr)
        assert got[name].data_type == onnx.load(p).graph.initializer[list(want).index(name)].data_type
    assert wf.marked(got["W1"])[0] == str(p.resolve())
    # the graph, apart from the weights' bytes, is the one onnx reads
    whole = onnx.load(p)
    for t in whole.graph.initializer:
        if t.name in ("W1", "W3") or (t.name == "W2" and not typed):
            t.ClearField("raw_data")
    for t in m.graph.initializer:
        del t.external_data[:]
    assert m.graph.SerializeToString(deterministic=True) == whole.graph.SerializeToString(deterministic=True)


def test_a_name_given_twice_and_a_damaged_weight_are_read_as_onnx_reads_them(tmp_path):
    p = _save(_model(twice=True), tmp_path / "m.onnx")
    m = load_model(p, lazy=True)
    w1 = [t for t in m.graph.initializer if t.name == "W1"]
    assert len(w1) == 2 and not any(wf.is_left(t) for t in w1)
    np.testing.assert_array_equal(numpy_helper.to_array(w1[1]), W1 * 2)
    bad = _model()
    bad.graph.initializer[0].raw_data = bad.graph.initializer[0].raw_data[:-4]  # 4 bytes short of its dims
    q = _save(bad, tmp_path / "bad.onnx")
    assert not wf.is_left(next(t for t in load_model(q, lazy=True).graph.initializer if t.name == "W1"))
    run = dict(selection=api.Selection(all=True), config=api.RunConfig(cache=False), inputs=api.InputSpec(arrays={"x": X}))
    with pytest.raises(ModelError) as lazy:
        api.layers(str(q), **run)
    with pytest.raises(ModelError) as eager:
        api.layers(api.load(q), **run)
    assert str(lazy.value) == str(eager.value) and "tensor 'W1' of the model holds 24572 bytes" in str(lazy.value)


def test_layers_and_diff_of_inline_weights_read_from_the_file_give_the_whole_models_results(tmp_path):
    p = _save(_model(), tmp_path / "a.onnx")
    q = _save(_model(w1=W1 * np.float32(1.001)), tmp_path / "b.onnx")
    sel, spec, cfg = api.Selection(all=True), api.InputSpec(arrays={"x": X}), api.RunConfig(cache=False)
    lazy = api.layers(str(p), sel, cfg, spec, save=True)
    eager = api.layers(api.load(p), sel, cfg, spec, save=True)
    assert any(wf.is_left(t) for t in lazy.plan.base.graph.initializer)
    for k, v in eager.arrays.items():
        np.testing.assert_array_equal(lazy.arrays[k], v)
    want = np.tanh(X.astype(np.float64) @ W1.astype(np.float64)) @ W2.astype(np.float64) + B
    np.testing.assert_allclose(lazy.arrays["y"], want, rtol=1e-5)
    d_lazy = api.diff(str(p), str(q), selection=sel, config=cfg, inputs=spec)
    d_eager = api.diff(api.load(p), api.load(q), selection=sel, config=cfg, inputs=spec)
    rows = lambda d: [(r.pair.a.name, r.pair.b.name, None if r.metrics is None else r.metrics.max_abs) for r in d.results]  # noqa: E731
    assert rows(d_lazy) == rows(d_eager) and any(m for _, _, m in rows(d_lazy))


def test_the_model_file_changed_after_it_was_read_is_one_line(tmp_path):
    p = _save(_model(), tmp_path / "m.onnx")
    m = load_model(p, lazy=True)
    st = os.stat(p)
    with open(p, "r+b") as f:  # other bytes, the modification time put back
        f.seek(st.st_size // 2)
        f.write(b"\1\2\3\4")
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    w1 = next(t for t in m.graph.initializer if t.name == "W1")
    with pytest.raises(ModelError, match="m.onnx: the file changed while onnxprobe ran") as e:
        tensor_values(w1)
    assert "\n" not in str(e.value)


def test_a_repeated_layers_of_inline_weights_left_in_the_file_is_served_and_never_serves_an_edited_one(tmp_path, monkeypatch):
    from onnx.reference import ReferenceEvaluator

    from onnxprobe.runtime import plan_cache

    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ONNXPROBE_NO_CACHE", raising=False)
    p = _save(_model(), tmp_path / "m.onnx")
    run = lambda: api.layers(str(p), api.Selection(all=True), api.RunConfig(device="cpu"), api.InputSpec(seed=4))  # noqa: E731
    first = run()
    served = run()
    assert type(served.plan).__name__ == "CachedPlan"
    metas = [m for _, m in filter(None, (plan_cache.read_entry(f.name.split(".")[0]) for f in (tmp_path / "cache").rglob("*.json")))
             if "folder" in m]
    # its weights copied from the model file into the entry's buffer (the model file never mapped: see below)
    assert metas and metas[0]["folder"] == "" and metas[0]["packed"] >= W1.nbytes and len(metas[0]["moves"]) == 3
    for name in ("h", "y", "v"):
        assert served.stats[name].max == first.stats[name].max and served.stats[name].mean == first.stats[name].mean
    want = ReferenceEvaluator(onnx.load(p)).run(["y"], {"x": served.feed["x"]})[0]
    assert served.stats["y"].max == pytest.approx(float(want.max()), rel=1e-5)
    # the file edited since (another W1, the time put back): not served stale
    onnx.save(_model(w1=-W1), p)
    again = run()
    want = ReferenceEvaluator(onnx.load(p)).run(["y"], {"x": again.feed["x"]})[0]
    assert again.stats["y"].max == pytest.approx(float(want.max()), rel=1e-5)


def test_a_repeated_diff_of_two_models_of_inline_weights_left_in_their_files_is_served(tmp_path, monkeypatch):
    from onnxprobe.runtime import plan_cache

    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ONNXPROBE_NO_CACHE", raising=False)
    a = _save(_model(), tmp_path / "one" / "a.onnx")
    b = _save(_model(w1=W1 * np.float32(1.01)), tmp_path / "two" / "b.onnx")
    run = lambda: api.diff(str(a), str(b), selection=api.Selection(all=True), config=api.RunConfig(device="cpu"))  # noqa: E731
    first, second = run(), run()
    assert type(second.a).__name__ == "ServedSide"
    assert [(r.pair.a.name, r.metrics, r.passed) for r in second.results] == [(r.pair.a.name, r.metrics, r.passed) for r in first.results]
    metas = [m for _, m in filter(None, (plan_cache.read_entry(f.name.split(".")[0]) for f in (tmp_path / "cache").rglob("*.json")))
             if "template" in m]
    assert metas and metas[0]["folder"] == "" and metas[0]["packed"] >= 2 * W1.nbytes
    x = second.feed["x"].astype(np.float64)
    y = lambda w1: np.tanh(x @ w1.astype(np.float64)) @ W2.astype(np.float64) + B  # noqa: E731
    row = next(r for r in second.results if r.pair.a.name == "y")
    assert row.metrics.max_abs == pytest.approx(np.abs(y(W1) - y(W1 * np.float32(1.01))).max(), rel=1e-3)


EDIT_RUN = """
import os, sys
import numpy as np
import onnxruntime as ort
from onnxprobe import api
from onnxprobe.graph import io as io_mod
from onnxprobe.graph.wire_format import weight_extents

path, edit, copy = sys.argv[1], sys.argv[2], sys.argv[4] == "copy"
io_mod.LAZY_FILE = 0
from onnxprobe.runtime import weight_copy
used, real_copy = [], weight_copy.copy_out
weight_copy.copy_out = lambda big: (lambda got: used.append(got) or got)(real_copy(big))
if copy:  # from a private copy onnxruntime maps (runtime.weight_copy), wherever the temporary folder lies
    weight_copy.MIN_BYTES, weight_copy.filesystem = 0, lambda p: "ext4"
else:
    weight_copy.MIN_BYTES = 1 << 60
offset, length = weight_extents(open(path, "rb").read())["A"]
run, run_io, done = ort.InferenceSession.run, ort.InferenceSession.run_with_iobinding, []

def change():  # the session is built: the file changes under it
    if not done:
        done.append(1)
        if edit == "truncate":
            os.truncate(path, offset + 8)
        else:
            with open(path, "r+b") as f:
                f.seek(offset)
                f.write(np.full(length // 4, 7.0, np.float32).tobytes())

ort.InferenceSession.run = lambda self, *a, **k: change() or run(self, *a, **k)
ort.InferenceSession.run_with_iobinding = lambda self, *a, **k: change() or run_io(self, *a, **k)
x = np.ones((2, 64), np.float32)
res = api.layers(path, api.Selection(names=("z",)), api.RunConfig(cache=False), api.InputSpec(arrays={"x": x}))
z = res.stats["z"]  # the statistics of one run (save=True keeps its session, whose weights are always in memory)
np.save(sys.argv[3], np.array([z.min, z.max, z.mean], np.float64))
assert done, "the run ran no session"
assert (used and all(u is not None for u in used)) if copy else not any(used), used
"""


@pytest.mark.parametrize("how", ["memory", "copy"])
@pytest.mark.parametrize("edit", ["bytes", "truncate"])
def test_the_model_file_edited_while_the_run_runs_changes_nothing(tmp_path, edit, how):
    """A weight left in the model file is read from it when the session is built (into memory, or into a private copy
    onnxruntime maps: runtime.weight_copy), never mapped there: onnxruntime mapping the model file read bytes written
    during the run (QA: 54 of 80 pairs of a diff of two equal copies failing) and ended the process with SIGBUS where it
    was truncated. A is read by a Gather (never packed)."""
    import subprocess
    import sys

    a = rng.standard_normal((256, 384)).astype(np.float32)
    vi = helper.make_tensor_value_info
    m = make_model([helper.make_node("MatMul", ["x", "W1"], ["y"], name="mm"), helper.make_node("Gather", ["A", "k"], ["z"], name="g")],
                   [vi("x", TensorProto.FLOAT, [2, 64])], [vi("y", TensorProto.FLOAT, [2, 96]), vi("z", TensorProto.FLOAT, [256, 384])],
                   [numpy_helper.from_array(W1, "W1"), numpy_helper.from_array(a, "A"), numpy_helper.from_array(np.arange(256), "k")])
    p = _save(m, tmp_path / "m.onnx")
    out = tmp_path / "z.npy"
    done = subprocess.run([sys.executable, "-c", EDIT_RUN, str(p), edit, str(out), how], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    z = a.astype(np.float64)  # the model as read, not as edited
    np.testing.assert_allclose(np.load(out), [z.min(), z.max(), z.mean()], rtol=1e-6, atol=1e-6 * np.abs(z).max())


@pytest.mark.parametrize("how", ["memory", "copy"])
def test_a_reduction_over_an_inline_weight_is_plain_inferences_to_the_last_digit(tmp_path, monkeypatch, how):
    """onnxruntime reading a weight at its offset in the model file ran a ReduceSum over it from another alignment than
    plain inference, which parses the file: the last digit differed (QA); from memory, or from a private copy that
    holds each weight at a page boundary (runtime.weight_copy), it is plain inference's."""
    import onnxruntime as ort

    from onnxprobe.runtime import weight_copy

    if how == "copy":
        monkeypatch.setattr(weight_copy, "MIN_BYTES", 0)
        monkeypatch.setattr(weight_copy, "filesystem", lambda path: "ext4")
        made, real = [], weight_copy.copy_out
        monkeypatch.setattr(weight_copy, "copy_out", lambda big: (lambda got: made.append(got) or got)(real(big)))
    else:
        monkeypatch.setattr(weight_copy, "MIN_BYTES", 1 << 60)

    r = (rng.standard_normal((64, 128)) + 0.01).astype(np.float32)
    vi = helper.make_tensor_value_info
    m = make_model([helper.make_node("MatMul", ["x", "W1"], ["y"], name="mm"),
                    helper.make_node("ReduceSum", ["R"], ["rs"], keepdims=0, name="rsum")],
                   [vi("x", TensorProto.FLOAT, [2, 64])], [vi("y", TensorProto.FLOAT, [2, 96]), vi("rs", TensorProto.FLOAT, [])],
                   [numpy_helper.from_array(W1, "W1"), numpy_helper.from_array(r, "R")])
    for pad in range(0, 64, 13):  # the weights at several offsets in the file
        m.doc_string = "x" * pad
        p = _save(m, tmp_path / f"m{pad}.onnx")
        plain = ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]).run(["rs"], {"x": X})[0]
        res = api.layers(str(p), api.Selection(names=("rs",)), api.RunConfig(cache=False), api.InputSpec(arrays={"x": X}),
                         save=True)
        assert res.arrays["rs"].tobytes() == plain.tobytes(), pad
    if how == "copy":
        assert made and all(m is not None for m in made)
