"""runtime.plan_cache: $ONNXPROBE_CACHE_DIR may be a folder of the user's own files, and some of those
are named by a 32-hex-digit digest (a model zoo's md5sum names, a report named after its model): the
cache trims and cleans up only the files it wrote, whatever their age and the size limit."""

from __future__ import annotations

import os
import shutil
import threading

import pytest

from conftest import sample_path
from onnxprobe import api
from onnxprobe.runtime import plan_cache


def test_files_named_by_a_digest_are_not_the_caches(tmp_path, monkeypatch):
    cache = tmp_path / "models"
    cache.mkdir()
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(cache))
    monkeypatch.delenv("ONNXPROBE_NO_CACHE", raising=False)
    monkeypatch.setenv("ONNXPROBE_CACHE_SIZE", "60000")
    md5 = "5d41402abc4b2a76b9719d911017c592"
    theirs = {f"{md5}.onnx": sample_path("cnn"),  # a model alone, named by its md5sum
              "0cc175b9c0f1b6a831c399e269772661.json": None,  # a report alone
              "92eb5ffee6ae2fec3ad71c777531578f.onnx": sample_path("transformer_block"),  # a model and its report
              "92eb5ffee6ae2fec3ad71c777531578f.json": None}
    for name, src in theirs.items():
        if src is None:
            (cache / name).write_text('{"tensors": []}')
        else:
            shutil.copy(src, cache / name)
        os.utime(cache / name, (1e9, 1e9))  # years old: older than any entry, and than any half entry's grace
    want = {name: (cache / name).read_bytes() for name in theirs}
    for name in ("cnn", "mlp", "transformer_block"):
        api.layers(sample_path(name), api.Selection(all=True), api.RunConfig(device="cpu"))
    assert {name: (cache / name).read_bytes() for name in theirs if (cache / name).exists()} == want
    ours = [f for f in cache.iterdir() if plan_cache.ENTRY.fullmatch(f.name)]
    assert ours and sum(f.stat().st_size for f in ours) <= 60000


def test_an_entry_that_is_a_link_is_replaced_not_written_through(tmp_path, monkeypatch):
    """A link planted where an entry goes (a shared cache folder, another user's link to their file) is
    replaced by the entry: the cache never writes outside its folder."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(cache))
    monkeypatch.delenv("ONNXPROBE_NO_CACHE", raising=False)
    run = lambda: api.layers(sample_path("mlp"), api.Selection(all=True), api.RunConfig(device="cpu"))  # noqa: E731
    run()
    entry = sorted(f.name for f in cache.iterdir())
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    for name in entry:
        (outside / name).write_text("not yours")
        (cache / name).unlink()
        (cache / name).symlink_to(outside / name)
    run()  # a miss (the links lead to no entry): the entry is written again
    assert all((outside / name).read_text() == "not yours" for name in entry)
    assert all((cache / name).is_file() and not (cache / name).is_symlink() for name in entry)


def test_an_entry_that_is_a_device_or_a_pipe_is_a_miss_not_a_hang(tmp_path, monkeypatch):
    """An entry's name planted as a link to /dev/zero (read for ever, into memory) or as a FIFO (a read that
    waits for a writer that never comes): only a regular file is read, so the run is a miss, as with any
    damaged entry, and gives the numbers of --no-cache."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(cache))
    monkeypatch.delenv("ONNXPROBE_NO_CACHE", raising=False)
    run = lambda c=True: api.layers(sample_path("mlp"), api.Selection(all=True), api.RunConfig(device="cpu", cache=c))  # noqa: E731
    want = {r.name: (s.min, s.max) for r, s in run(False).rows() if s is not None}
    run()
    onnx_file, json_file = (next(cache.glob(f"*.probed.{ext}")) for ext in ("onnx", "json"))
    onnx_file.unlink()
    onnx_file.symlink_to("/dev/zero")
    json_file.unlink()
    os.mkfifo(json_file)
    got = {}
    worker = threading.Thread(target=lambda: got.update({r.name: (s.min, s.max) for r, s in run().rows() if s is not None}),
                              daemon=True)
    worker.start()
    worker.join(60)
    if worker.is_alive():  # release the reader, so that the test process can end
        with open(json_file, "w"):
            pass
        pytest.fail("the run hung reading a FIFO planted as an entry")
    assert got == want


def test_a_full_disk_still_cleans_up_what_failed_writes_left(tmp_path, monkeypatch):
    """Half entries that failed writes left go once stale even while every write fails (a full disk): the
    cleanup does not wait for a write that succeeds, which a full disk never gives."""
    import errno

    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(cache))
    monkeypatch.delenv("ONNXPROBE_NO_CACHE", raising=False)
    half = cache / plan_cache.entry_name("7" * 32, "onnx")
    half.write_bytes(b"\0" * 1000)
    os.utime(half, (1e9, 1e9))

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(plan_cache, "_write", full)
    api.layers(sample_path("mlp"), api.Selection(all=True), api.RunConfig(device="cpu"))
    assert not half.exists()


def test_entries_of_the_old_naming_go_from_onnxprobes_own_folder(tmp_path, monkeypatch):
    """Entries an earlier build named KEY.onnx / KEY.json are never read again: in the default folder, which
    is onnxprobe's alone, they go rather than stay forever outside the size bound; in a folder the user
    named (ONNXPROBE_CACHE_DIR) such names may be the user's, and stay."""
    monkeypatch.delenv("ONNXPROBE_CACHE_DIR", raising=False)
    monkeypatch.delenv("ONNXPROBE_NO_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    own = tmp_path / "xdg" / "onnxprobe"
    own.mkdir(parents=True)
    old = [own / ("8" * 32 + ".onnx"), own / ("8" * 32 + ".json")]
    for f in old:
        f.write_bytes(b"\0" * 1000)
    api.layers(sample_path("mlp"), api.Selection(all=True), api.RunConfig(device="cpu"))
    assert not any(f.exists() for f in old)
    assert any(plan_cache.ENTRY.fullmatch(f.name) for f in own.iterdir())
