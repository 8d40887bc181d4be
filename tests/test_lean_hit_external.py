"""The direct mode of a model whose weights lie in external data files (runtime.direct_files): the second `layers`
runs the cached probed copy with each big weight read by onnxruntime from its file (no onnx, no proto, no buffer of
the weights), and every data file the model names is checked as the model file is (its status, else its digest): a
data file edited, truncated or removed since is never served stale. Oracle: onnx.reference on the files as they are."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from conftest import make_model
from onnxprobe import api
from onnxprobe.errors import ModelError
from onnxprobe.runtime import model_file, plan_cache

rng = np.random.default_rng(3)
W1 = (rng.standard_normal((64, 96)) / 8).astype(np.float32)  # stubs: read by onnxruntime from the file
W2 = (rng.standard_normal((96, 80)) / 10).astype(np.float32)
B = rng.standard_normal(80).astype(np.float32)  # small: inline in the entry's skeleton, its file recorded


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ONNXPROBE_NO_CACHE", raising=False)
    return tmp_path / "cache"


def _write(path, w1=W1, w2=W2, b=B, one_file=True):
    vi = helper.make_tensor_value_info
    m = make_model([helper.make_node("MatMul", ["x", "W1"], ["h"], name="mm1"), helper.make_node("Tanh", ["h"], ["t"], name="tanh"),
                    helper.make_node("MatMul", ["t", "W2"], ["u"], name="mm2"), helper.make_node("Add", ["u", "B"], ["y"], name="add")],
                   [vi("x", TensorProto.FLOAT, [3, 64])], [vi("y", TensorProto.FLOAT, [3, 80])],
                   [numpy_helper.from_array(w1, "W1"), numpy_helper.from_array(w2, "W2"), numpy_helper.from_array(b, "B")])
    onnx.save_model(m, str(path), save_as_external_data=True, all_tensors_to_one_file=one_file,
                    location=path.name + ".data" if one_file else None, size_threshold=0)


def _layers(path):
    return api.layers(str(path), api.Selection(all=True), api.RunConfig(device="cpu"), api.InputSpec(seed=4))


def _served(res) -> bool:
    return type(res.plan).__name__ == "CachedPlan"


def _check(res, path):
    """Every node output's min, max and mean against onnx.reference on the model's files as they are now."""
    m = onnx.load(str(path))
    names = [o for n in m.graph.node for o in n.output]
    got = {r.name: s for r, s in res.rows() if s is not None and r.kind == "node"}
    assert set(names) <= set(got)
    for n, v in zip(names, ReferenceEvaluator(m).run(names, {"x": res.feed["x"]})):
        v = v.astype(np.float64)
        assert got[n].min == pytest.approx(v.min(), rel=1e-5, abs=1e-5) and got[n].max == pytest.approx(v.max(), rel=1e-5, abs=1e-5)
        assert got[n].mean == pytest.approx(v.mean(), rel=1e-4, abs=1e-5)


@pytest.mark.parametrize("one_file", [True, False], ids=["one-data-file", "a-file-per-tensor"])
def test_served_with_weights_read_from_their_files(tmp_path, cache, one_file):
    path = tmp_path / "m.onnx"
    _write(path, one_file=one_file)
    first = _layers(path)
    assert not _served(first)
    second = _layers(path)
    assert _served(second)
    _check(second, path)
    assert {r.name: (s.min, s.max, s.mean) for r, s in second.rows() if s} == {r.name: (s.min, s.max, s.mean) for r, s in first.rows() if s}
    # the entry holds the graph, not the weights (a few KB for 46 KB of them), its stubs at the files
    skel = next(cache.rglob("*.onnx")).read_bytes()
    assert W1.tobytes() not in skel and len(skel) < W1.nbytes
    # what a served result holds loads on demand: the probed copy with its weights back
    model = second.plan.model
    assert np.array_equal(numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == "W1")), W1)


@pytest.mark.parametrize("one_file", [True, False], ids=["one-data-file", "a-file-per-tensor"])
@pytest.mark.parametrize("trusting", [False, True], ids=["hashed", "stat-trusted"])
@pytest.mark.parametrize("which", ["W1", "B"])
def test_edited_data_file_is_not_served_stale(tmp_path, cache, monkeypatch, which, trusting, one_file):
    """One weight of the data file changed after the entry was written, its size and modification time kept: the
    statistics are the edited file's (a big weight read from the file, or a small one the entry holds inline)."""
    if trusting:
        monkeypatch.setattr(model_file, "RACY_NS", -10**18)
    path = tmp_path / "m.onnx"
    _write(path, one_file=one_file)
    _layers(path)
    assert _served(_layers(path))
    data = path.parent / (path.name + ".data" if one_file else which)  # (B alone in its file: no stub reads it)
    st = data.stat()
    raw = bytearray(data.read_bytes())
    at = bytes(raw).index((W1 if which == "W1" else B).tobytes()) + 4 * 5  # element 5 made 50: it shows in y's max
    raw[at:at + 4] = np.float32(50).tobytes()
    data.write_bytes(bytes(raw))
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns))
    res = _layers(path)
    assert not _served(res)
    _check(res, path)
    again = _layers(path)  # served again, from the edited files' own entry
    assert _served(again)
    _check(again, path)


@pytest.mark.parametrize("damage", ["truncated", "removed", "grown"])
def test_damaged_data_file_is_a_miss(tmp_path, cache, damage):
    path = tmp_path / "m.onnx"
    _write(path)
    _layers(path)
    data = path.parent / (path.name + ".data")
    if damage == "truncated":
        data.write_bytes(data.read_bytes()[:100])
    elif damage == "removed":
        data.unlink()
    else:
        data.write_bytes(data.read_bytes() + b"\0" * 64)
    if damage == "grown":  # the same weights, a file of other bytes: read again, then served again
        res = _layers(path)
        assert not _served(res)
        _check(res, path)
        assert _served(_layers(path))
        return
    with pytest.raises(ModelError, match="external data"):  # the normal path says what is wrong
        _layers(path)


def test_moved_folder_is_its_own_entry(tmp_path, cache):
    path = tmp_path / "a" / "m.onnx"
    path.parent.mkdir()
    _write(path)
    _layers(path)
    assert _served(_layers(path))
    os.rename(tmp_path / "a", tmp_path / "b")
    moved = tmp_path / "b" / "m.onnx"
    res = _layers(moved)
    assert not _served(res)
    _check(res, moved)


def test_entry_records_every_data_file(tmp_path, cache):
    path = tmp_path / "m.onnx"
    _write(path, one_file=False)
    _layers(path)
    meta = [plan_cache.read_entry(p.name.split(".")[0]) for p in cache.rglob("*.json")]
    metas = [m for _, m in (x for x in meta if x) if "data_files" in m]
    assert metas
    recorded = {os.path.basename(r["path"]) for r in metas[0]["data_files"]}
    assert recorded == {"W1", "W2", "B"}  # onnx.save names a tensor's own file after it
    assert metas[0]["folder"] == str(tmp_path.resolve())


def test_data_file_edited_during_the_first_run_is_not_indexed(tmp_path, cache, monkeypatch):
    """The small weight B (inline in the entry) edited after the first run read it and before its entry is written: the
    entry would pair the old B with the edited file's digest. Every external tensor is compared with the entry's as
    the files are hashed: no entry, and the next run reads the edited file."""
    from onnxprobe.runtime import direct

    path = tmp_path / "m.onnx"
    _write(path)
    data = path.parent / (path.name + ".data")
    real = direct.entry

    def edit_then_entry(*args, **kwargs):
        raw = bytearray(data.read_bytes())
        at = bytes(raw).index(B.tobytes()) + 4 * 5
        raw[at:at + 4] = np.float32(50).tobytes()
        data.write_bytes(bytes(raw))
        return real(*args, **kwargs)

    monkeypatch.setattr(direct, "entry", edit_then_entry)
    _layers(path)
    monkeypatch.setattr(direct, "entry", real)
    res = _layers(path)
    assert not _served(res)
    _check(res, path)


@pytest.mark.parametrize("big", [True, False], ids=["stubbed", "inline"])
def test_external_constant_value_is_not_indexed(tmp_path, cache, big):
    """A Constant whose value lies in the data file beside an initializer's (big: a stub named by its output; small:
    inline in the entry, and not compared): not served."""
    path = tmp_path / "m.onnx"
    vi = helper.make_tensor_value_info
    c = W1 if big else W1[:8]
    m = make_model([helper.make_node("Constant", [], ["c"], name="c", value=numpy_helper.from_array(c, "cval")),
                    helper.make_node("MatMul", ["x", "c"], ["h"], name="mm"), helper.make_node("MatMul", ["h", "W2"], ["y"], name="mm2")],
                   [vi("x", TensorProto.FLOAT, [3, c.shape[0]])], [vi("y", TensorProto.FLOAT, [3, 80])], [numpy_helper.from_array(W2, "W2")])
    onnx.save_model(m, str(path), save_as_external_data=True, location="m.data", size_threshold=0, convert_attribute=True)
    header = onnx.load(str(path), load_external_data=False)
    assert header.graph.node[0].attribute[0].t.data_location == header.graph.initializer[0].data_location == TensorProto.EXTERNAL
    _layers(path)
    assert not _served(_layers(path))


def test_data_file_swapped_for_a_link_is_not_served(tmp_path, cache):
    """The data file replaced by a symbolic link to a copy of the same bytes: the normal path refuses it (onnx reads
    no linked data file), so a hit does not serve it either (it did, QA)."""
    path = tmp_path / "m.onnx"
    _write(path)
    _layers(path)
    assert _served(_layers(path))
    data = path.parent / (path.name + ".data")
    copy = tmp_path / "copy.data"
    copy.write_bytes(data.read_bytes())
    data.unlink()
    data.symlink_to(copy)
    with pytest.raises(ModelError, match="symbolic link"):
        _layers(path)


class _Counted:
    """A tensor whose bytes count how often they are copied out (protobuf's raw_data is a copy at each read)."""

    def __init__(self, raw: bytes):
        self._raw, self.reads = raw, 0

    def HasField(self, name):  # noqa: N802 - protobuf's name
        return name == "raw_data"

    @property
    def raw_data(self) -> bytes:
        self.reads += 1
        return self._raw


def test_tensors_sharing_their_bytes_are_each_copied_once(tmp_path):
    """Two tensors over the same 3 MiB of a data file: each one's bytes are taken once while the file passes (one at a
    time let go at the other's chunk, and was copied again at every chunk: quadratic, QA), and compared."""
    from onnxprobe.runtime import direct_files

    raw = np.random.default_rng(0).integers(0, 256, 3 << 20, dtype=np.uint8).tobytes()
    f = tmp_path / "w.bin"
    f.write_bytes(b"\0" * 100 + raw)
    a, b = _Counted(raw), _Counted(raw)
    rec = direct_files._record(str(f), [(100, len(raw), a), (100, len(raw), b)])
    assert rec is not None and rec["size"] == len(raw) + 100
    assert (a.reads, b.reads) == (1, 1)
    other = _Counted(raw[:-1] + bytes([raw[-1] ^ 1]))  # one byte off, at the very end
    assert direct_files._record(str(f), [(100, len(raw), a), (100, len(raw), other)]) is None


def test_a_model_file_too_big_to_be_a_header_is_not_parsed_for_an_entry(tmp_path, monkeypatch):
    """A model file over direct_files.HEADER_LIMIT holds weights big enough to be stubs, which the external form does
    not serve: it is not parsed to find that out (that cost its size in memory at every run, never served, QA)."""
    from onnxprobe.runtime import direct_files

    path = tmp_path / "m.onnx"
    _write(path)
    monkeypatch.setattr(direct_files, "HEADER_LIMIT", path.stat().st_size - 1)
    loads = []
    real = onnx.load
    monkeypatch.setattr(onnx, "load", lambda *a, **k: loads.append(a) or real(*a, **k))
    st = path.stat()
    before = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev, st.st_ctime_ns)
    assert direct_files.outside_weights(str(path), before, {}, {}) is None and not loads
    monkeypatch.setattr(direct_files, "HEADER_LIMIT", path.stat().st_size)
    assert direct_files.outside_weights(str(path), before, {}, {}) is not None and loads
