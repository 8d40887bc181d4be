"""Weights left in their external data files (graph.weight_files.leave): `layers` and `diff` read a model given as a
path without its big external weights (onnxruntime maps the file; a model of 1 GiB of MatMul weights held them once
more in the proto: 2.3 GB where plain inference takes 1.2). Every reader of a weight's bytes reads them from the
file, and refuses a file changed since the model was read. Oracles: numpy float64 of the weights as written, the
model read with its weights (api.load), onnx.reference."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, numpy_helper
from onnx.reference import ReferenceEvaluator

from weights_models import three_matmuls
from onnxprobe import api
from onnxprobe.errors import ModelError
from onnxprobe.graph import weight_files as wf
from onnxprobe.graph.external import write_model
from onnxprobe.graph.io import load_model
from onnxprobe.graph.skeleton import model_digest, raw_bytes
from onnxprobe.graph.tensor_data import tensor_bytes, tensor_values, to_array

rng = np.random.default_rng(11)
W1 = rng.standard_normal((64, 96)).astype(np.float32)  # 6144 elements: big enough to be left
W2 = (rng.standard_normal((96, 80)) * 1e-3 + 3e4).astype(np.float32)  # a large offset
W3 = rng.standard_normal((96, 80)).astype(np.float16)  # float16
B = rng.standard_normal(80).astype(np.float32)  # small: read into the proto as always
X = rng.standard_normal((2, 64)).astype(np.float32)


def _write(folder, w1=W1, w2=W2, name="m.onnx", location="m.data", threshold=0):
    folder.mkdir(parents=True, exist_ok=True)
    m = three_matmuls(w1, w2, W3, B)
    onnx.save(m, folder / name, save_as_external_data=True, location=location, size_threshold=threshold)
    return folder / name


def _by_name(m):
    return {t.name: t for t in m.graph.initializer}


def test_a_lazy_load_leaves_the_big_weights_in_their_file_and_every_reader_reads_them_there(tmp_path):
    p = _write(tmp_path / "m")
    m = load_model(p, lazy=True)
    w = _by_name(m)
    for name, arr in (("W1", W1), ("W2", W2), ("W3", W3)):
        t = w[name]
        assert wf.is_left(t) and not t.HasField("raw_data") and t.data_location == TensorProto.DEFAULT
        np.testing.assert_array_equal(tensor_values(t), arr)
        np.testing.assert_array_equal(to_array(t), arr)
        assert tensor_bytes(t) == arr.tobytes() and raw_bytes(t).tobytes() == arr.tobytes()
    assert not wf.is_left(w["B"]) and w["B"].HasField("raw_data")  # small: in the proto
    # the proto holds none of the big weights' bytes
    assert m.ByteSize() < W1.nbytes
    # the digest is of the weights' bytes, as the model read with them has it
    assert model_digest(m) == model_digest(load_model(p))


def test_layers_and_diff_of_paths_give_what_the_model_read_with_its_weights_gives(tmp_path):
    p = _write(tmp_path / "m")
    q = _write(tmp_path / "n", w1=W1 * np.float32(1.001))
    sel, spec = api.Selection(all=True), api.InputSpec(arrays={"x": X})
    lazy = api.layers(str(p), sel, api.RunConfig(cache=False), spec, save=True)
    eager = api.layers(api.load(p), sel, api.RunConfig(cache=False), spec, save=True)
    assert any(wf.is_left(t) for t in lazy.plan.base.graph.initializer)  # the path's model was read lazily
    assert set(lazy.arrays) == set(eager.arrays)
    for k in eager.arrays:
        np.testing.assert_array_equal(lazy.arrays[k], eager.arrays[k])
    want = np.tanh(X.astype(np.float64) @ W1.astype(np.float64)) @ W2.astype(np.float64) + B
    np.testing.assert_allclose(lazy.arrays["y"], want, rtol=1e-5)
    d_lazy = api.diff(str(p), str(q), selection=sel, config=api.RunConfig(cache=False), inputs=spec)
    d_eager = api.diff(api.load(p), api.load(q), selection=sel, config=api.RunConfig(cache=False), inputs=spec)
    rows = lambda d: [(r.pair.a.name, r.pair.b.name, None if r.metrics is None else r.metrics.max_abs) for r in d.results]  # noqa: E731
    assert rows(d_lazy) == rows(d_eager) and any(m for _, _, m in rows(d_lazy))


def test_a_data_file_changed_after_the_model_was_read_is_one_line_naming_it(tmp_path):
    p = _write(tmp_path / "m")
    m = load_model(p, lazy=True)
    t = _by_name(m)["W1"]
    data = tmp_path / "m" / "m.data"
    with open(data, "r+b") as f:  # the same size, other bytes, the modification time put back
        st = os.stat(data)
        f.write(b"\0" * 8)
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(ModelError, match="m.data: the file changed while onnxprobe ran") as e:
        tensor_values(t)
    assert "\n" not in str(e.value)
    os.remove(data)
    with pytest.raises(ModelError, match="m.data: cannot read the file again"):
        tensor_bytes(t)


def test_a_model_read_lazily_and_written_holds_its_weights(tmp_path):
    p = _write(tmp_path / "m")
    m = load_model(p, lazy=True)
    out = tmp_path / "out" / "copy.onnx"
    out.parent.mkdir()
    write_model(m, out)
    assert all(wf.is_left(t) for t in m.graph.initializer if t.name != "B")  # the model given is not changed
    back = _by_name(onnx.load(out))
    for name, arr in (("W1", W1), ("W2", W2), ("W3", W3), ("B", B)):
        np.testing.assert_array_equal(numpy_helper.to_array(back[name]), arr)
        assert not any(e.key == wf.KEY for e in back[name].external_data)


def test_runtimes_that_read_the_proto_get_it_filled(tmp_path):
    p = _write(tmp_path / "m")
    m = load_model(p, lazy=True)
    whole = wf.filled(m)
    assert whole is not m and not any(wf.is_left(t) for t in whole.graph.initializer)
    want = ReferenceEvaluator(onnx.load(p)).run(None, {"x": X})
    got = ReferenceEvaluator(whole).run(None, {"x": X})
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    plain = load_model(p)
    assert wf.filled(plain) is plain  # nothing left: the model itself
    # onnxprobe's reference runner on the lazily read model
    res = api.layers(api.Model(m, str(p)), api.Selection(names=("y",)), inputs=api.InputSpec(arrays={"x": X}),
                     save=True, runtime="reference")
    np.testing.assert_array_equal(res.arrays["y"], want[0])


def test_a_forked_child_reads_the_weights_its_parent_left(tmp_path):
    p = _write(tmp_path / "m")
    t = _by_name(load_model(p, lazy=True))["W1"]
    pid = os.fork()  # (the child only reads the file and exits)
    if pid == 0:
        ok = wf.is_left(t) and tensor_bytes(t) == W1.tobytes()
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.parametrize("folders", [True, False])
def test_weights_left_in_files_handed_over_from_memory_where_onnxruntime_cannot_read_the_folder(tmp_path, monkeypatch, folders):
    from onnxprobe.runtime import ort as ort_mod

    p = _write(tmp_path / "m")
    monkeypatch.setattr(ort_mod, "reads_folders", lambda: folders)
    out = tmp_path / "t.npz"
    res = api.layers(str(p), api.Selection(all=True), api.RunConfig(cache=False), api.InputSpec(arrays={"x": X}),
                     save_to=out)
    assert any(wf.is_left(t) for t in res.plan.base.graph.initializer)
    want = ReferenceEvaluator(onnx.load(p)).run(["y", "v"], {"x": X})
    with np.load(out) as z:
        arrays = {k: z[k] for k in z.files}  # safe names kept as they are (no names entry)
    eager = api.layers(api.load(p), api.Selection(all=True), api.RunConfig(cache=False), api.InputSpec(arrays={"x": X}),
                       save=True)
    for k, v in eager.arrays.items():  # what the model read with its weights gives, bit for bit
        np.testing.assert_array_equal(arrays[k], v)
    np.testing.assert_allclose(arrays["y"], want[0], rtol=1e-6)
    np.testing.assert_allclose(arrays["v"], want[1], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(res.stats["y"].max, want[0].max(), rtol=1e-6)


@pytest.mark.parametrize("lazy", [False, True])
def test_a_data_file_that_is_a_symbolic_link_is_refused_as_onnx_refuses_it(tmp_path, lazy):
    p = _write(tmp_path / "m", threshold=1024)  # every tensor of the data file a big one, which a lazy load leaves
    (tmp_path / "m" / "m.data").rename(tmp_path / "m" / "real.data")
    os.symlink("real.data", tmp_path / "m" / "m.data")
    with pytest.raises(ModelError, match="cannot load its external data: .*symbolic link") as e:
        load_model(p, lazy=lazy)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("where", ["first", "last"])
def test_two_weights_compared_from_their_files_chunk_by_chunk(tmp_path, monkeypatch, where):
    from onnxprobe.compare.same_function import same_bytes

    monkeypatch.setattr(wf, "CHUNK", 4096)  # W1's 24 KiB in six chunks
    other = W1.copy()
    other.reshape(-1)[0 if where == "first" else -1] += 1
    a = _by_name(load_model(_write(tmp_path / "a"), lazy=True))["W1"]
    b = _by_name(load_model(_write(tmp_path / "b"), lazy=True))["W1"]
    c = _by_name(load_model(_write(tmp_path / "c", w1=other), lazy=True))["W1"]
    inline = numpy_helper.from_array(W1, "W1")
    for x, y in ((a, b), (a, inline), (inline, b)):  # two files, or a file and memory: the same bytes
        assert same_bytes(x, y) and np.array_equal(tensor_values(x), tensor_values(y))
    for x, y in ((a, c), (c, inline), (inline, c)):
        assert not same_bytes(x, y) and not np.array_equal(tensor_values(x), tensor_values(y))


def test_a_data_file_changed_during_the_run_is_one_line_not_mixed_results(tmp_path, monkeypatch):
    """onnxruntime maps an external data file for the session's life, as plain inference does: bytes written into it
    during the run reach the results (a Gather's weight, read where it lies). The run's results are refused, in one
    line naming the file (ort_options.check_weight_files), never reported mixed."""
    import onnxruntime as ort

    from conftest import make_model
    from onnx import helper

    a = rng.standard_normal((256, 384)).astype(np.float32)
    vi = helper.make_tensor_value_info
    m = make_model([helper.make_node("MatMul", ["x", "W1"], ["y"], name="mm"), helper.make_node("Gather", ["A", "k"], ["z"], name="g")],
                   [vi("x", TensorProto.FLOAT, [2, 64])], [vi("y", TensorProto.FLOAT, [2, 96]), vi("z", TensorProto.FLOAT, [256, 384])],
                   [numpy_helper.from_array(W1, "W1"), numpy_helper.from_array(a, "A"), numpy_helper.from_array(np.arange(256), "k")])
    (tmp_path / "m").mkdir()
    p = tmp_path / "m" / "m.onnx"
    onnx.save(m, p, save_as_external_data=True, location="m.data", size_threshold=1024)
    offset = int(next(e.value for e in next(t for t in onnx.load(p, load_external_data=False).graph.initializer if t.name == "A")
                      .external_data if e.key == "offset"))
    run, run_io, done = ort.InferenceSession.run, ort.InferenceSession.run_with_iobinding, []

    def change():
        if not done:
            done.append(1)
            with open(tmp_path / "m" / "m.data", "r+b") as f:
                f.seek(offset)
                f.write(np.full(a.size, 7.0, np.float32).tobytes())

    monkeypatch.setattr(ort.InferenceSession, "run", lambda self, *x, **k: change() or run(self, *x, **k))
    monkeypatch.setattr(ort.InferenceSession, "run_with_iobinding", lambda self, *x, **k: change() or run_io(self, *x, **k))
    with pytest.raises(ModelError, match=r"m\.data: the file changed while onnxprobe ran") as e:
        api.layers(str(p), api.Selection(names=("z",)), api.RunConfig(cache=False), api.InputSpec(arrays={"x": X}))
    assert done and "\n" not in str(e.value)


def test_a_data_file_changed_during_a_served_run_is_run_again_on_the_file_as_it_is(tmp_path, monkeypatch):
    import onnxruntime as ort

    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ONNXPROBE_NO_CACHE", raising=False)
    p = _write(tmp_path / "m", threshold=1024)
    run = lambda: api.layers(str(p), api.Selection(all=True), api.RunConfig(device="cpu"), api.InputSpec(seed=2))  # noqa: E731
    run()
    assert type(run().plan).__name__ == "CachedPlan"  # served
    w2 = next(t for t in onnx.load(p, load_external_data=False).graph.initializer if t.name == "W2")
    offset = int(next(e.value for e in w2.external_data if e.key == "offset"))
    run_io, done = ort.InferenceSession.run_with_iobinding, []

    def change(self, *a, **k):
        if not done:
            done.append(1)
            with open(tmp_path / "m" / "m.data", "r+b") as f:
                f.seek(offset)
                f.write(np.zeros(W2.size, np.float32).tobytes())  # W2 all zeros: y is B
        return run_io(self, *a, **k)

    monkeypatch.setattr(ort.InferenceSession, "run_with_iobinding", change)
    res = run()
    assert done and type(res.plan).__name__ != "CachedPlan"  # the served run refused, the normal path ran
    np.testing.assert_allclose([res.stats["y"].min, res.stats["y"].max], [B.min(), B.max()], rtol=1e-6)


def test_a_results_base_given_back_to_the_api_comes_back_whole(tmp_path):
    p = _write(tmp_path / "m")
    res = api.layers(str(p), api.Selection(all=True), api.RunConfig(cache=False), api.InputSpec(arrays={"x": X}))
    base = res.plan.base
    assert any(wf.is_left(t) for t in base.graph.initializer)
    again = api.load(base).proto  # a Model of the proto: a copy, its left weights read in
    assert not any(wf.is_left(t) for t in again.graph.initializer)
    out = tmp_path / "saved.onnx"
    onnx.save(again, out)
    back = _by_name(onnx.load(out))
    for name, arr in (("W1", W1), ("W2", W2), ("W3", W3), ("B", B)):
        np.testing.assert_array_equal(numpy_helper.to_array(back[name]), arr)
    onnx.checker.check_model(str(out))
    assert any(wf.is_left(t) for t in base.graph.initializer)  # the result's own proto is not changed


@pytest.mark.parametrize("edit", ["truncate", "fifo"])
def test_a_data_file_changed_as_the_session_is_built_is_the_file_changed_line(tmp_path, monkeypatch, edit):
    """onnxruntime, reading a data file truncated or swapped for a FIFO while it builds the session, calls the model
    damaged ("holds another number of bytes than its shape and type need", QA): the file changed, and says so."""
    import onnxruntime as ort

    p = _write(tmp_path / "m", threshold=1024)
    data = tmp_path / "m" / "m.data"
    init = ort.InferenceSession.__init__

    def build(self, *a, **k):
        if edit == "truncate":
            os.truncate(data, 100)
        else:
            os.remove(data)
            os.mkfifo(data)
        return init(self, *a, **k)

    monkeypatch.setattr(ort.InferenceSession, "__init__", build)
    with pytest.raises(ModelError, match=r"m\.data: the file changed while onnxprobe ran") as e:
        api.layers(str(p), api.Selection(all=True), api.RunConfig(cache=False), api.InputSpec(arrays={"x": X}))
    assert "\n" not in str(e.value)


def test_a_diffs_side_model_given_to_api_load_comes_back_whole(tmp_path):
    p, q = _write(tmp_path / "a"), _write(tmp_path / "b", w1=W1 * np.float32(1.01))
    d = api.diff(str(p), str(q), selection=api.Selection(all=True), config=api.RunConfig(cache=False),
                 inputs=api.InputSpec(arrays={"x": X}))
    assert any(wf.is_left(t) for t in d.a.model.proto.graph.initializer)
    whole = api.load(d.a.model)
    assert whole is not d.a.model and not any(wf.is_left(t) for t in whole.proto.graph.initializer)
    np.testing.assert_array_equal(numpy_helper.to_array(_by_name(whole.proto)["W1"]), W1)
    plain = api.load(p)
    assert api.load(plain) is plain  # a whole Model: itself, as before
