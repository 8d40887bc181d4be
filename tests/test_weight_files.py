"""Weights that onnxruntime reads from their model's external data file (graph.weight_files): a model read with its
external data held every weight three times (the proto, the buffer it was handed over in, onnxruntime's packed
copy); the marks say where each came from, and a session reads it there while the bytes in memory are the file's.
Oracle: numpy float64 of the weights as written, and of the weights as changed in memory."""

from __future__ import annotations

import os
import shutil

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from onnxprobe import api
from onnxprobe.graph.io import load_model
from onnxprobe.graph.skeleton import model_digest, skeleton, stubs
from onnxprobe.graph.weight_files import KEY, common_folder, marked, unchanged
from onnxprobe.runtime import ort as ort_mod
from onnxprobe.runtime import ort_options

rng = np.random.default_rng(7)
W1 = rng.standard_normal((64, 96)).astype(np.float32)  # 6144 elements: stubbed by a skeleton
W2 = rng.standard_normal((96, 80)).astype(np.float32) + 1e3  # a large offset
B = rng.standard_normal(80).astype(np.float32)  # small: stays in the skeleton, never marked
X = rng.standard_normal((2, 64)).astype(np.float32)


def _write(folder, w1=W1, w2=W2, name="m.onnx", location="m.data"):
    (folder / location).parent.mkdir(parents=True, exist_ok=True)
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h"], name="mm1"), helper.make_node("Tanh", ["h"], ["t"], name="tanh"),
             helper.make_node("MatMul", ["t", "W2"], ["u"], name="mm2"), helper.make_node("Add", ["u", "B"], ["y"], name="add")]
    m = make_model(nodes, [vi("x", TensorProto.FLOAT, [2, 64])], [vi("y", TensorProto.FLOAT, [2, 80])])
    m.graph.initializer.extend([numpy_helper.from_array(w1, "W1"), numpy_helper.from_array(w2, "W2"), numpy_helper.from_array(B, "B")])
    onnx.save(m, folder / name, save_as_external_data=True, location=location, size_threshold=0)
    return folder / name


def _oracle(w1=W1, w2=W2):
    return np.tanh(X.astype(np.float64) @ w1.astype(np.float64)) @ w2.astype(np.float64) + B


def _y(model):
    res = api.layers(model, api.Selection(names=("y",)), inputs=api.InputSpec(arrays={"x": X}), save=True)
    return res.arrays["y"].astype(np.float64)


def _close(a, b):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * np.abs(b).max())


def test_load_marks_big_weights_with_their_file_offset_and_length(tmp_path):
    p = _write(tmp_path / "m")
    m = load_model(p)
    w = {t.name: marked(t) for t in m.graph.initializer}
    data = str((tmp_path / "m" / "m.data").resolve())
    assert w["B"] is None  # small: not stubbed, not marked
    for name, arr in (("W1", W1), ("W2", W2)):
        file, offset, length = w[name]
        assert (file, length) == (data, arr.nbytes)
        with open(file, "rb") as f:  # the mark points at the very bytes of that weight
            f.seek(offset)
            assert f.read(length) == arr.tobytes()
        assert unchanged(next(t for t in m.graph.initializer if t.name == name), w[name])


def test_marks_reach_no_skeleton_and_no_digest(tmp_path):
    a, b = _write(tmp_path / "one"), _write(tmp_path / "two" / "deeper")
    ma, mb = load_model(a), load_model(b)
    assert KEY.encode() not in skeleton(ma).SerializeToString()
    assert model_digest(ma) == model_digest(mb)  # the same model in two folders: one plan-cache entry


def test_session_reads_marked_weights_from_the_file(tmp_path, monkeypatch):
    m = api.load(_write(tmp_path / "m"))
    handed = {}
    real = ort_mod._weights_in_place

    def spy(so, sk, big, providers, files=True):
        buffers, pointed, watch, done = real(so, sk, big, providers, files)
        handed["buffers"] = len(buffers)
        handed["locations"] = sorted(e.value for t in pointed for e in t.external_data if e.key == "location")
        handed["watched"] = sorted(os.path.basename(f) for f in watch)
        return buffers, pointed, watch, done

    monkeypatch.setattr(ort_mod, "SKELETON_BYTES", 0)
    monkeypatch.setattr(ort_mod, "_weights_in_place", spy)
    _close(_y(m), _oracle())
    assert handed == {"buffers": 0, "locations": ["m.data", "m.data"], "watched": ["m.data"]}


def test_weight_changed_in_memory_runs_as_the_proto_holds_it(tmp_path, monkeypatch):
    monkeypatch.setattr(ort_mod, "SKELETON_BYTES", 0)
    m = api.load(_write(tmp_path / "m"))
    w2 = W2 * 2
    t = next(t for t in m.proto.graph.initializer if t.name == "W2")
    t.raw_data = w2.tobytes()  # the mark stays; the bytes are no longer the file's
    _close(_y(m), _oracle(w2=w2))


@pytest.mark.parametrize("damage", ["rewritten", "truncated", "removed"])
def test_file_changed_after_loading_runs_the_loaded_weights(tmp_path, monkeypatch, damage):
    monkeypatch.setattr(ort_mod, "SKELETON_BYTES", 0)
    p = _write(tmp_path / "m")
    m = api.load(p)
    data = tmp_path / "m" / "m.data"
    if damage == "rewritten":
        data.write_bytes(np.zeros(len(data.read_bytes()), np.uint8).tobytes())
    elif damage == "truncated":
        data.write_bytes(data.read_bytes()[:1000])
    else:
        data.unlink()
    _close(_y(m), _oracle())


def test_diff_of_models_in_two_folders(tmp_path, monkeypatch):
    monkeypatch.setattr(ort_mod, "SKELETON_BYTES", 0)
    w1b = W1 * (1 + 1e-3 * rng.standard_normal(W1.shape)).astype(np.float32)
    a = _write(tmp_path / "x" / "a")
    b = _write(tmp_path / "y" / "b" / "c", w1=w1b, name="b.onnx", location="weights.bin")
    folder, rel = common_folder([str((tmp_path / "x" / "a" / "m.data").resolve()),
                                 str((tmp_path / "y" / "b" / "c" / "weights.bin").resolve())])
    assert folder == str(tmp_path.resolve()) and rel == ["x/a/m.data", "y/b/c/weights.bin"]
    _close(_y(api.load(b)), _oracle(w1=w1b))
    for fuse in (True, False):  # both models in one graph (their weights from two folders), and apart
        d = api.diff(a, b, inputs=api.InputSpec(arrays={"x": X}), fuse=fuse)
        row = next(r for r in d.results if r.pair.a.name == "y")
        np.testing.assert_allclose(row.metrics.max_abs, np.abs(_oracle() - _oracle(w1=w1b)).max(), rtol=1e-3)


def test_data_file_in_a_subfolder(tmp_path, monkeypatch):
    monkeypatch.setattr(ort_mod, "SKELETON_BYTES", 0)
    m = api.load(_write(tmp_path / "m", location="blobs/real.bin"))
    assert {marked(t)[0] for t in m.proto.graph.initializer if marked(t)} == {str((tmp_path / "m" / "blobs" / "real.bin").resolve())}
    _close(_y(m), _oracle())


def test_older_onnxruntime_hands_the_bytes_over(tmp_path, monkeypatch):
    monkeypatch.setattr(ort_mod, "SKELETON_BYTES", 0)
    monkeypatch.setattr(ort_options, "READS_FOLDERS", (99, 0))
    m = api.load(_write(tmp_path / "m"))
    _close(_y(m), _oracle())


def test_moved_model_still_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(ort_mod, "SKELETON_BYTES", 0)
    m = api.load(_write(tmp_path / "m"))
    shutil.move(tmp_path / "m", tmp_path / "elsewhere")
    _close(_y(m), _oracle())
    assert stubs(skeleton(m.proto))  # the weights were stubbed (and so handed over from memory, the file gone)


def test_data_file_swapped_for_a_fifo_is_not_waited_for(tmp_path, monkeypatch):
    """The data file replaced by a named pipe after the model was read: the check opens it without blocking and runs
    the weights the model holds (it waited for a writer for ever, QA)."""
    monkeypatch.setattr(ort_mod, "SKELETON_BYTES", 0)
    m = api.load(_write(tmp_path / "m"))
    data = tmp_path / "m" / "m.data"
    data.unlink()
    os.mkfifo(data)
    _close(_y(m), _oracle())


def test_marks_stay_in_the_process(tmp_path, monkeypatch):
    """A mark names no path and is read only by the process that made it: a model saved from api.load's proto (or
    written by onnxprobe) carries no path, and its entry, read back, says nothing of where weights lie."""
    monkeypatch.setattr(ort_mod, "SKELETON_BYTES", 0)
    m = api.load(_write(tmp_path / "m"))
    assert all(str(tmp_path) not in e.value for t in m.proto.graph.initializer for e in t.external_data)
    onnx.save(m.proto, tmp_path / "saved.onnx")
    again = onnx.load(tmp_path / "saved.onnx")
    assert any(e.key == KEY for t in again.graph.initializer for e in t.external_data)  # (onnx.save keeps it)
    assert all(str(tmp_path) not in e.value for t in again.graph.initializer for e in t.external_data)
    import onnxprobe.graph.weight_files as wf
    monkeypatch.setattr(wf, "_TOKEN", "another-process")  # the file read in another process: no mark
    assert all(marked(t) is None for t in again.graph.initializer)


def test_a_model_onnxprobe_writes_carries_no_mark(tmp_path):
    from onnxprobe.graph.external import write_model

    m = api.load(_write(tmp_path / "m"))
    (tmp_path / "out").mkdir()
    write_model(m.proto, tmp_path / "out" / "w.onnx")
    written = onnx.load(tmp_path / "out" / "w.onnx", load_external_data=False)
    assert not any(e.key == KEY for t in written.graph.initializer for e in t.external_data)
    assert any(marked(t) for t in m.proto.graph.initializer)  # the model written is a copy: its marks stay


def test_a_retry_at_a_lowered_ir_version_registers_the_weights_once(tmp_path, monkeypatch):
    """A model of an IR version newer than onnxruntime reads is retried at a lowered one: with one weight changed in
    memory (every weight handed over from memory) the retry registered the in-memory files a second time in the same
    options and failed ("An entry for this name has already been added", QA)."""
    monkeypatch.setattr(ort_mod, "SKELETON_BYTES", 0)
    p = _write(tmp_path / "m")
    model = onnx.load(p, load_external_data=False)
    model.ir_version = 99
    onnx.save(model, tmp_path / "m" / "new_ir.onnx")
    m = api.load(tmp_path / "m" / "new_ir.onnx")
    w2 = W2 * 3
    next(t for t in m.proto.graph.initializer if t.name == "W2").raw_data = w2.tobytes()
    _close(_y(m), _oracle(w2=w2))


def test_a_dataset_reads_the_weights_as_loaded_while_the_file_is_rewritten(tmp_path, monkeypatch):
    """A session kept over a dataset's batches holds its weights in memory: the data file rewritten after the first
    batch (the big addend + 1000) changes nothing (onnxruntime, mapping the file, mixed old and new weights from batch
    to batch, and a truncated file ended the process with SIGBUS, QA). One run's session reads the file (below)."""
    monkeypatch.setattr(ort_mod, "SKELETON_BYTES", 0)
    c = rng.standard_normal((2, 8192)).astype(np.float32)  # an Add's operand: onnxruntime runs on it as it lies
    vi = helper.make_tensor_value_info
    m = make_model([helper.make_node("Add", ["x", "C"], ["y"], name="add")], [vi("x", TensorProto.FLOAT, [2, 8192])],
                   [vi("y", TensorProto.FLOAT, [2, 8192])], [numpy_helper.from_array(c, "C")])
    (tmp_path / "m").mkdir()
    p = tmp_path / "m" / "add.onnx"
    onnx.save(m, p, save_as_external_data=True, location="add.data", size_threshold=0)
    data = tmp_path / "m" / "add.data"
    xs = [rng.standard_normal((2, 8192)).astype(np.float32) for _ in range(4)]

    def batches():
        for k, x in enumerate(xs):
            yield {"x": x}
            if k == 0:
                data.write_bytes((c + 1000).astype(np.float32).tobytes())  # the same file, rewritten in place

    res = api.layers_dataset(p, inputs_from=batches, selection=api.Selection(names=("y",)))
    oracle = np.concatenate([x.astype(np.float64) + c for x in xs])
    stats = next(s for r, s in res.rows() if r.name == "y")
    assert stats.max == pytest.approx(oracle.max(), rel=1e-5) and stats.min == pytest.approx(oracle.min(), rel=1e-5)


def test_only_a_session_of_one_run_reads_the_files(tmp_path, monkeypatch):
    from onnxprobe.runtime.runners.ort import OrtRunner

    monkeypatch.setattr(ort_mod, "SKELETON_BYTES", 0)
    m = api.load(_write(tmp_path / "m"))
    seen = []
    real = ort_mod._weights_in_place

    def spy(so, sk, big, providers, files=True):
        got = real(so, sk, big, providers, files)
        seen.append(len(got[0]))
        return got

    monkeypatch.setattr(ort_mod, "_weights_in_place", spy)
    r = OrtRunner(m.proto, api.RunConfig(device="cpu"))
    r.session(m.proto)
    r.session(m.proto, key="kept")
    assert seen == [0, 2]  # the two big weights: from their file once, from memory for the session kept


def test_a_forked_child_reads_its_parents_marks_made_before_the_fork_and_no_later_one(tmp_path):
    import onnxprobe.graph.weight_files as wf

    m = api.load(_write(tmp_path / "m"))
    t = next(t for t in m.proto.graph.initializer if t.name == "W1")
    assert marked(t) is not None
    parent, count = next(e.value for e in t.external_data if e.key == KEY).partition(":")[0], len(wf._SOURCES)
    pid = os.fork()  # (the child only reads the tensor and exits: no lock of another thread is taken)
    if pid == 0:
        # a mark the parent makes after the fork names an entry of its own, not the child's of that number
        later = TensorProto()
        later.CopyFrom(t)
        next(e for e in later.external_data if e.key == KEY).value = f"{parent}:{count}"
        wf._SOURCES.append(("/elsewhere", 0, 1, None))
        ok = marked(t) == wf._SOURCES[int(next(e.value for e in t.external_data if e.key == KEY).partition(":")[2])][:3]
        os._exit(0 if ok and marked(later) is None else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
