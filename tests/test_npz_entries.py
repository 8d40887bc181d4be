"""What an .npz holds beside well-named .npy arrays (``runtime.arrays.read_npz``, behind ``--inputs``,
``--inputs-dir`` and ``--vs-npz``). numpy's ``np.load`` reads an entry without the ``.npy`` suffix as an
array too when it starts with the .npy magic, and any other entry as raw bytes; and of two entries of one
key it reads one. The header checks (objects, sizes before anything is allocated or decompressed, truncation)
looked at ``*.npy`` entries only, so an entry ``x`` declaring 4 TiB reached numpy's allocation ('Unable to
allocate 4.00 TiB'), and a zip with ``x.npy`` twice fed one of them without a word."""

from __future__ import annotations

import io
import warnings
import zipfile

import numpy as np
import pytest
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app
from onnxprobe.errors import UsageError
from onnxprobe.runtime.arrays import read_npz

runner = CliRunner()


def _npy(a: np.ndarray) -> bytes:
    b = io.BytesIO()
    np.save(b, a, allow_pickle=True)
    return b.getvalue()


def _header_only(shape: tuple[int, ...]) -> bytes:
    b = io.BytesIO()
    np.lib.format.write_array_header_1_0(b, {"descr": "<f4", "fortran_order": False, "shape": shape})
    return b.getvalue() + b"\0" * 64


def _zip(path, entries: list[tuple[str, bytes]]) -> None:
    with warnings.catch_warnings(), zipfile.ZipFile(path, "w") as z:
        warnings.simplefilter("ignore")  # zipfile warns of a duplicate name: some tests want one
        for name, data in entries:
            z.writestr(name, data)


def test_an_entry_without_the_npy_suffix_is_checked_like_one(tmp_path):
    """numpy reads ``x`` as array 'x': its declared size is refused from the header, as ``x.npy``'s is."""
    p = tmp_path / "a.npz"
    _zip(p, [("x", _header_only((2**38, 4)))])
    with pytest.raises(UsageError, match=r"array 'x' \(float32 \[274877906944, 4\]\) needs 4 TiB, more than"):
        read_npz(p)
    _zip(p, [("x", _npy(np.array([[1, 2]], dtype=object)))])
    with pytest.raises(UsageError, match="array 'x': holds Python objects"):
        read_npz(p)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    _zip(p, [("x", _npy(x))])
    got = read_npz(p)
    assert list(got) == ["x"] and np.array_equal(got["x"], x)


@pytest.mark.parametrize("names", [("x.npy", "x.npy"), ("x", "x.npy")])
def test_two_entries_of_one_array_are_refused(tmp_path, names):
    """Which of the two np.load returns is the zip's business: neither is taken."""
    p = tmp_path / "a.npz"
    _zip(p, [(names[0], _npy(np.zeros(3, np.float32))), (names[1], _npy(np.ones(3, np.float32)))])
    with pytest.raises(UsageError, match=r"a\.npz: array 'x' is stored twice"):
        read_npz(p)


def test_an_entry_that_is_no_array_is_refused_naming_it(tmp_path):
    """np.load returned its bytes as if an array (read whole, whatever its size): a model input fed bytes."""
    p = tmp_path / "a.npz"
    _zip(p, [("x.npy", _npy(np.zeros(3, np.float32))), ("README.txt", b"hello")])
    with pytest.raises(UsageError, match=r"a\.npz: entry 'README\.txt' is no \.npy array"):
        read_npz(p)


def test_a_dataset_batch_with_an_array_stored_twice_fails_naming_it(tmp_path):
    d = tmp_path / "ds"
    d.mkdir()
    x = np.random.default_rng(0).random((2, 3, 8, 8), np.float32)
    np.savez(d / "b0.npz", x=x)
    _zip(d / "b1.npz", [("x.npy", _npy(x)), ("x.npy", _npy(x * 1e6))])
    r = runner.invoke(app, ["layers", str(sample_path("dynamic_batch")), "--inputs-dir", str(d)])
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "b1.npz" in lines[0] and "'x' is stored twice" in lines[0], r.stderr


def test_save_entries_unzip_to_one_file_each_and_np_load_reads_every_tensor_by_its_mapped_name(tmp_path):
    """Tensors 'x.npy' and 'x' were stored as members x.npy.npy and x.npy, and np.load's key 'x.npy' (and onnxprobe's
    reader, and diff --vs-npz) read the member x.npy: tensor 'x' for 'x.npy'. `layers --save` stored '/abs' as the entry '/abs.npy' and 'abs' as 'abs.npy': unzip strips a leading
    '/' (an absolute path) and extracted both to abs.npy, one overwriting the other (QA). Each entry now
    extracts to a file of its own, distinct from every other entry's file and folder (a file 'a.npy' and a
    folder 'a.npy' for 'a.npy/b' cannot both be extracted); a PyTorch export's '/conv1/...' keeps its name as
    its entry where nothing else extracts there, so that np.load(f)[name] reads it."""
    import json
    import posixpath

    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    names = ["../x", "t0_x", "onnxprobe.names", "x.npy", "x", "/abs", "abs", "a\\b", "/a/b", "a/b", "a.npy", "a.npy/b",
             "abs.npy/c", "./d", "e//f"]
    nodes, prev = [], "inp"
    for i, n in enumerate(names):
        # Neg and Exp: every tensor its own values (Neg and Relu made 'x.npy' and 'x' both zeros, QA: one read for the
        # other passed)
        nodes.append(helper.make_node("Neg" if i % 2 == 0 else "Exp", [prev], [n], name=f"n{i}"))
        prev = n
    m = helper.make_model(helper.make_graph(nodes, "g", [helper.make_tensor_value_info("inp", TensorProto.FLOAT, [3])],
                                            [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [3])]),
                          opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(m, str(tmp_path / "m.onnx"))
    x = np.array([0.5, -1.5, 2.0], np.float32)
    np.save(tmp_path / "x.npy", x)
    npz = tmp_path / "a.npz"
    r = runner.invoke(app, ["layers", str(tmp_path / "m.onnx"), "--all", "--input", f"inp={tmp_path / 'x.npy'}",
                            "--save", str(npz)])
    assert r.exit_code == 0, r.output
    with zipfile.ZipFile(npz) as z:
        entries = z.namelist()
    extracted = [e.lstrip("/") for e in entries]  # what unzip (and zipfile's extract) writes each as
    for e in extracted:
        assert ".." not in e.split("/") and posixpath.normpath(e) == e, e
    files = set(extracted)
    folders = {"/".join(e.split("/")[:k]) for e in extracted for k in range(1, e.count("/") + 1)}
    assert len(files) == len(entries) and not files & folders, entries
    out = tmp_path / "unzipped"
    with zipfile.ZipFile(npz) as z:
        z.extractall(out)
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == sorted(extracted)
    # the values: onnxruntime's own run of the model with every tensor an output
    for n in names:
        m.graph.output.append(helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]))
    want = dict(zip([o.name for o in m.graph.output],
                    ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"inp": x})))
    with np.load(npz) as z:
        mapped = json.loads(str(z["onnxprobe.names"]))
        assert sorted(mapped.values()) == sorted(names) and len(mapped) == len(names)
        # a plain name keeps its entry, and so does a PyTorch export's '/...' where nothing else extracts there
        assert mapped["x.npy"] == "x.npy" and mapped["/a/b"] == "/a/b" and mapped["/abs"] == "/abs"
        assert "abs" not in mapped and "a/b" not in mapped  # extracted where '/abs' and '/a/b' are: renamed
        # 'x' after 'x.npy': its member x.npy is the key np.load takes for the member x.npy.npy (tensor 'x.npy'
        # read tensor 'x''s values): renamed
        assert "x" not in mapped and "x" in mapped.values()
        for entry, name in mapped.items():
            np.testing.assert_array_equal(z[entry], want[name])
    got = read_npz(npz)  # onnxprobe's reader maps the entries back to the true names
    assert sorted(got) == sorted(names) and all(np.array_equal(got[n], want[n]) for n in names)


def test_arrays_a_and_a_npy_of_np_savez_are_read_each_as_itself(tmp_path):
    """np.savez(a=A, **{'a.npy': B}) stores members a.npy and a.npy.npy; np.load's key 'a.npy' is the member a.npy
    (A), so the reader gave A for both (an --inputs or --vs-npz archive made by numpy)."""
    a, b = np.arange(3, dtype=np.float32), np.full(3, 7.0, np.float32)
    np.savez(tmp_path / "ab.npz", **{"a": a, "a.npy": b})
    with zipfile.ZipFile(tmp_path / "ab.npz") as z:
        assert sorted(z.namelist()) == ["a.npy", "a.npy.npy"]
    got = read_npz(tmp_path / "ab.npz")
    assert sorted(got) == ["a", "a.npy"]
    np.testing.assert_array_equal(got["a"], a)
    np.testing.assert_array_equal(got["a.npy"], b)


@pytest.mark.parametrize("signal_exit", [SystemExit(143), KeyboardInterrupt()])
def test_a_termination_while_the_archive_closes_leaves_no_temporary_file(tmp_path, monkeypatch, signal_exit):
    """SIGTERM (SystemExit 143) landing in zipfile's close of `--save`'s archive left the whole archive behind as a
    hidden .a.npz.XXXX.tmp.npz: close() cleaned up after OSError only, and the process ends in os._exit."""
    from onnxprobe.runtime.npz import NpzWriter

    w = NpzWriter(tmp_path / "a.npz")
    w.add("x", np.arange(1000, dtype=np.float32))
    real_close, calls = w.zf.close, []

    def close():
        calls.append(1)
        if len(calls) == 1:
            real_close()  # the archive written, then the signal as its file is closed
            raise signal_exit
        return real_close()

    monkeypatch.setattr(w.zf, "close", close)
    with pytest.raises(type(signal_exit)):
        w.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [], list(tmp_path.iterdir())
