"""--max-memory means the same in every command that runs a model (layers, diff, grad, debug): the most
memory raw tensors may take at once, more runs when needed. grad's raw gradients (--save-grads, --html,
--check) and the debugger's fetched values (show, save) come back in runs of at most half the budget each,
and agree with the oracle (numpy float64 of the closed form) whatever the budget."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.runtime.runners.ort import OrtRunner

runner = CliRunner()
X = np.arange(1, 9, dtype=np.float32).reshape(1, 8) / 8


def _model(path):
    """y = sum over three MatMuls x @ Wk (each W 8x64): dL/dWk = x^T @ ones(1, 64) for the sum loss."""
    ws = [numpy_helper.from_array(np.full((8, 64), k + 1, np.float32) / 10, f"w{k}") for k in range(3)]
    nodes = [helper.make_node("MatMul", ["x", f"w{k}"], [f"m{k}"], name=f"mm{k}") for k in range(3)]
    nodes += [helper.make_node("Sum", ["m0", "m1", "m2"], ["y"], name="sum")]
    m = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])], ws)
    p = path / "mm.onnx"
    p.write_bytes(m.SerializeToString())
    np.save(path / "x.npy", X)
    return p


def _raw_runs(monkeypatch) -> list[int]:
    """The number of raw tensors each onnxruntime run brings back (0: a run of statistics alone)."""
    runs: list[int] = []
    probe = OrtRunner.probe

    def counting(self, refs, feeds, *, raw=False, **kw):
        runs.append(len(refs) if raw is True else len(raw or ()))
        return probe(self, refs, feeds, raw=raw, **kw)

    monkeypatch.setattr(OrtRunner, "probe", counting)
    return runs


def _oracle() -> np.ndarray:
    return X.astype(np.float64).T @ np.ones((1, 64))


@pytest.mark.parametrize("budget", [None, 2 * 8 * 64 * 4])  # the default, and room for one gradient per run
def test_api_grad_fetches_raw_gradients_within_max_memory(tmp_path, monkeypatch, budget):
    runs = _raw_runs(monkeypatch)
    res = api.grad(_model(tmp_path), api.Selection(names=("w*",)), api.RunConfig(device="cpu"),
                   inputs={"x": X}, save=True, max_memory=budget)
    for k in range(3):
        np.testing.assert_allclose(res.arrays[f"w{k}"], _oracle(), rtol=1e-6)
    assert max(runs) == (3 if budget is None else 1), runs  # one run when it all fits; else one gradient a run


def test_grad_cli_takes_max_memory(tmp_path, monkeypatch):
    runs = _raw_runs(monkeypatch)
    p = _model(tmp_path)
    r = runner.invoke(app, ["grad", str(p), "--device", "cpu", "--input", f"x={tmp_path / 'x.npy'}", "--name", "w*",
                            "--max-memory", "4K", "--save-grads", str(tmp_path / "g.npz")])
    assert r.exit_code == 0, r.output
    with np.load(tmp_path / "g.npz") as z:
        for k in range(3):
            np.testing.assert_allclose(z[f"w{k}"], _oracle(), rtol=1e-6)
    assert max(runs) == 1, runs


@pytest.mark.parametrize("command", ["grad", "debug"])
def test_a_wrong_max_memory_is_one_line_naming_the_flag(tmp_path, command):
    r = runner.invoke(app, [command, str(_model(tmp_path)), "--max-memory", "12Q"])
    assert r.exit_code == 2
    assert r.stderr.strip().splitlines() == ["onnxprobe: error: --max-memory '12Q': expected a size such as 512M or 2G"]


def test_grad_dataset_fetches_weight_gradients_within_max_memory(tmp_path, monkeypatch):
    runs = _raw_runs(monkeypatch)
    p = _model(tmp_path)
    np.savez(tmp_path / "ds.npz", x=np.stack([X, 2 * X]))  # two samples: the summed loss's gradient is (x + 2x)^T ones
    res = api.grad_dataset(p, tmp_path / "ds.npz", api.Selection(names=("w*",)), api.RunConfig(device="cpu"),
                           max_memory=2 * 8 * 64 * 4)
    for k in range(3):
        np.testing.assert_allclose(res.arrays[f"w{k}"], 3 * _oracle(), rtol=1e-6)
    assert max(runs) == 1, runs


def test_debug_save_all_fetches_within_max_memory(tmp_path, monkeypatch):
    """Three 256-byte tensors under a 512-byte budget: one a run, and `save all` keeps every one of them
    (the values kept for show/save are at most the budget: those fetched first are no longer kept when the
    file is written, and must not be lost)."""
    runs = _raw_runs(monkeypatch)
    p = _model(tmp_path)
    (tmp_path / "s.txt").write_text(f"save all {tmp_path / 'acts.npz'}\n")
    r = runner.invoke(app, ["debug", str(p), "--device", "cpu", "--input", f"x={tmp_path / 'x.npy'}", "--op", "MatMul",
                            "--max-memory", "512", "--script", str(tmp_path / "s.txt")])
    assert r.exit_code == 0, r.output
    with np.load(tmp_path / "acts.npz") as z:
        for k in range(3):  # x @ Wk: every element sum(x) (k + 1) / 10, in float64
            np.testing.assert_allclose(z[f"m{k}"], np.full((1, 64), X.astype(np.float64).sum() * (k + 1) / 10), rtol=1e-6)
    assert max(runs) == 1, runs


def _live_raw(monkeypatch) -> dict:
    """What raw values cost while a command runs: ``runs``, the bytes each onnxruntime run brought back; ``peak``,
    the most bytes of those values alive at once (followed by weak references), measured after each run and at
    each array written to an .npz (``NpzWriter.add``)."""
    import itertools
    import weakref

    from onnxprobe.runtime.npz import NpzWriter

    live: dict[int, int] = {}
    seen = {"peak": 0, "runs": []}
    keys = itertools.count()
    probe, add = OrtRunner.probe, NpzWriter.add

    def note() -> None:
        seen["peak"] = max(seen["peak"], sum(live.values()))

    def counting(self, refs, feeds, *, raw=False, **kw):
        res = probe(self, refs, feeds, raw=raw, **kw)
        seen["runs"].append(sum(a.nbytes for a in res.arrays.values()))
        for a in res.arrays.values():
            k = next(keys)
            live[k] = a.nbytes
            weakref.finalize(a, live.pop, k, None)
        note()
        return res

    def adding(self, name, array):
        note()
        return add(self, name, array)

    monkeypatch.setattr(OrtRunner, "probe", counting)
    monkeypatch.setattr(NpzWriter, "add", adding)
    return seen


def _entries(path) -> list[tuple[str, str, tuple]]:
    """(key, dtype, shape) of each array of an .npz, in the archive's order (read without pickle)."""
    with np.load(path, allow_pickle=False) as z:
        return [(k, str(z[k].dtype), z[k].shape) for k in z.files]


def test_debug_save_all_streams_within_max_memory(tmp_path, monkeypatch):
    """`save all` of four 256-byte tensors (m0..m2 and the output y) under a 512-byte budget: at most 512 bytes of
    fetched values alive at once (they were all held until the file was written: 1024), every value equal to the
    float64 oracle, and the archive's keys, order and dtypes as before (the probes, then the output)."""
    seen = _live_raw(monkeypatch)
    p = _model(tmp_path)
    (tmp_path / "s.txt").write_text(f"save all {tmp_path / 'acts.npz'}\n")
    r = runner.invoke(app, ["debug", str(p), "--device", "cpu", "--input", f"x={tmp_path / 'x.npy'}", "--op", "MatMul",
                            "--max-memory", "512", "--script", str(tmp_path / "s.txt")])
    assert r.exit_code == 0, r.output
    assert "saved 4 tensors (1 KiB)" in r.stdout, r.stdout
    s = X.astype(np.float64).sum()
    want = {f"m{k}": np.full((1, 64), s * (k + 1) / 10) for k in range(3)}
    want["y"] = want["m0"] + want["m1"] + want["m2"]
    assert _entries(tmp_path / "acts.npz") == [(k, "float32", (1, 64)) for k in want]
    with np.load(tmp_path / "acts.npz") as z:
        for k, v in want.items():
            np.testing.assert_allclose(z[k], v, rtol=1e-6)
    assert max(seen["runs"]) <= 256, seen["runs"]
    assert seen["peak"] <= 512, seen


def test_api_grad_save_to_streams_within_max_memory(tmp_path, monkeypatch):
    """api.grad(save_to=) with three 2 KiB weight gradients under a 4 KiB budget: one gradient a run, at most one
    alive at once, none kept in the result; each equal to the closed form x^T ones; keyed by tensor name, float32."""
    seen = _live_raw(monkeypatch)
    res = api.grad(_model(tmp_path), api.Selection(names=("w*",)), api.RunConfig(device="cpu"), inputs={"x": X},
                   save_to=tmp_path / "g.npz", max_memory=4096)
    assert res.arrays == {}
    assert _entries(tmp_path / "g.npz") == [(f"w{k}", "float32", (8, 64)) for k in range(3)]
    with np.load(tmp_path / "g.npz") as z:
        for k in range(3):
            np.testing.assert_allclose(z[f"w{k}"], _oracle(), rtol=1e-6)
    assert max(seen["runs"]) <= 2048, seen["runs"]
    assert seen["peak"] <= 2048, seen


def test_grad_cli_save_grads_streams_within_max_memory(tmp_path, monkeypatch):
    """grad --save-grads: the gradients go to the file as they come, at most half the budget of them alive."""
    seen = _live_raw(monkeypatch)
    p = _model(tmp_path)
    r = runner.invoke(app, ["grad", str(p), "--device", "cpu", "--input", f"x={tmp_path / 'x.npy'}", "--name", "w*",
                            "--max-memory", "4K", "--save-grads", str(tmp_path / "g.npz")])
    assert r.exit_code == 0, r.output
    assert _entries(tmp_path / "g.npz") == [(f"w{k}", "float32", (8, 64)) for k in range(3)]
    with np.load(tmp_path / "g.npz") as z:
        for k in range(3):
            np.testing.assert_allclose(z[f"w{k}"], _oracle(), rtol=1e-6)
    assert seen["peak"] <= 2048, seen


@pytest.mark.parametrize("flags", [["--check"], []])
def test_grad_save_grads_with_check_or_default_budget_keeps_its_keys(tmp_path, flags):
    """With --check (the gradients are held for the check anyway) and with the default budget, --save-grads writes
    the same keys and dtypes, weights and activations alike (gradient of an activation: ones for the sum loss)."""
    p = _model(tmp_path)
    r = runner.invoke(app, ["grad", str(p), "--device", "cpu", "--input", f"x={tmp_path / 'x.npy'}", "--name", "m*",
                            *flags, "--save-grads", str(tmp_path / "g.npz")])
    assert r.exit_code == 0, r.output
    assert _entries(tmp_path / "g.npz") == [e for k in range(3) for e in (
        (f"w{k}", "float32", (8, 64)), (f"m{k}", "float32", (1, 64)))]  # each node's weight, then its output
    with np.load(tmp_path / "g.npz") as z:
        for k in range(3):
            np.testing.assert_allclose(z[f"m{k}"], np.ones((1, 64)), rtol=1e-6)
            np.testing.assert_allclose(z[f"w{k}"], _oracle(), rtol=1e-6)
