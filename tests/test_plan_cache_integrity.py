"""runtime.plan_cache: an entry whose files were cut short or changed after they were written (a crash
before the data reached the disk, an edit) is a miss, even where what is left still parses as a model:
never a failed run, never another graph's numbers."""

from __future__ import annotations

import onnx
import pytest

from conftest import sample_path
from onnxprobe import api
from onnxprobe.api import core
import onnxprobe.runtime.runners.planning as runner_planning


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ONNXPROBE_NO_CACHE", raising=False)
    return tmp_path / "cache"


def _stats(res) -> dict:
    return {r.name: (s.min, s.max, s.mean, s.std) for r, s in res.rows() if s is not None}


def _layers(path, cache=True):
    # the normal path's plan cache (api.core.layers), not the lean index api.layers serves repeats from
    return core.layers(path, api.Selection(all=True), api.RunConfig(device="cpu", cache=cache))


def _parsing_prefix(data: bytes) -> bytes:
    """The longest proper prefix of ``data`` that still parses as a ModelProto (a cut at a field's end)."""
    for n in range(len(data) - 1, 0, -1):
        try:
            onnx.load_model_from_string(data[:n])
        except Exception:  # noqa: BLE001
            continue
        return data[:n]
    raise AssertionError("no prefix parses")


def _op_changed(data: bytes) -> bytes:
    m = onnx.load_model_from_string(data)
    relu = next(n for n in m.graph.node if n.op_type == "Relu")
    relu.op_type = "Sigmoid"
    return m.SerializeToString()


@pytest.mark.parametrize("damage", [_parsing_prefix, _op_changed], ids=["cut_short", "edited"])
def test_a_damaged_entry_that_still_parses_is_a_miss(cache, monkeypatch, damage):
    want = _stats(_layers(sample_path("mlp"), cache=False))
    _layers(sample_path("mlp"))
    (f,) = cache.glob("*.onnx")
    f.write_bytes(damage(f.read_bytes()))
    calls, real = [], runner_planning.expose
    monkeypatch.setattr(runner_planning, "expose", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert _stats(_layers(sample_path("mlp"))) == want
    assert calls  # rebuilt, not read from the damaged entry
    assert _stats(_layers(sample_path("mlp"))) == want  # and the entry written again serves


def _names(res) -> set[str]:
    return {r.name for r, s in res.rows() if s is not None}


def test_an_entry_swapped_for_another_keys_whole_entry_is_a_miss(cache):
    """Both files of one entry replaced by another entry's (a copy between cache folders, a sync that
    renamed them): each file agrees with the other, but they are another key's, another selection's
    probed copy. `layers --op MatMul` showed the Relu rows of `--op Relu`."""
    def layers(op):
        return core.layers(sample_path("mlp"), api.Selection(ops=(op,)), api.RunConfig(device="cpu", cache=True))

    want = _names(api.layers(sample_path("mlp"), api.Selection(ops=("MatMul",)), api.RunConfig(device="cpu", cache=False)))
    layers("MatMul")
    (a,) = {f.name.split(".")[0] for f in cache.iterdir()}
    layers("Relu")
    (b,) = {f.name.split(".")[0] for f in cache.iterdir()} - {a}
    for ext in ("onnx", "json"):
        (cache / f"{a}.probed.{ext}").write_bytes((cache / f"{b}.probed.{ext}").read_bytes())
    assert _names(layers("MatMul")) == want
