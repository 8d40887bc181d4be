"""Hostile inputs to the plan cache's direct mode (runtime.direct, api.lean): edits that keep a model file's size
and modification time, made where the cache cannot see them coming; the served result must be the model's as it is
now (onnx.reference's numbers), never the entry's."""

from __future__ import annotations

import os

import pytest
from test_lean_hit import _check, _expected, _layers, _weighted


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ONNXPROBE_NO_CACHE", raising=False)
    return tmp_path / "cache"


def test_graph_edited_during_the_first_run_with_its_mtime_restored_is_not_served_stale(tmp_path, cache, monkeypatch):
    """An op type changed (same length, so the same size) while the first run ran, and the modification time put
    back (os.utime, cp -p, rsync -t): the entry must not pair the run's graph with the edited file's digest."""
    from onnxprobe.api import core

    path = tmp_path / "w.onnx"
    _weighted(path)
    normal = core.layers

    def editing(*args, **kwargs):
        res = normal(*args, **kwargs)
        st = path.stat()
        data = path.read_bytes()
        assert data.count(b"Relu") == 1
        path.write_bytes(data.replace(b"Relu", b"Tanh"))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        return res

    monkeypatch.setattr(core, "layers", editing)
    x = _layers(path).feed["x"]
    monkeypatch.setattr(core, "layers", normal)
    expected = _expected(path, x)  # Tanh's numbers
    _check(_layers(path), expected)
    _check(_layers(path), expected)
