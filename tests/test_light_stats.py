"""``api.layers(extras=False)``, the statistics the layers table shows and no more: the block form leaves out
Σ|x| and the zero count (abs_mean and zero_fraction None, never NaN or 0), five nodes fewer per such tensor;
min, max, mean and std stay as right as the full form's, against numpy float64. The CLI's table asks for
the light form, --json for the full one, and the plan cache never serves one for the other."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.graph.stats_nodes import block_size

runner = CliRunner()
rng = np.random.default_rng(7)
U = rng.random(4096)


def _relu() -> np.ndarray:
    return np.maximum(rng.normal(size=(4, 256, 30)), 0).astype(np.float32)  # sparse: ReLU's zeros


HOSTILE = {
    "large_offset": (1e4 + rng.normal(size=(16, 1024))).astype(np.float32),
    "near_3e38": (3e38 * (0.9 + 0.1 * U)).astype(np.float32).reshape(4, 1024),
    "tiny_1e-30": (1e-30 * (1 + U)).astype(np.float32).reshape(8, 512),
    "constant": np.full((64, 64), 7.1, np.float32),
    "all_zeros": np.zeros((32, 256), np.float32),
    "float16": rng.normal(3.0, 2.0, size=(40, 256)).astype(np.float16),
    "single_block": rng.normal(size=(256,)).astype(np.float32),
    "sparse_relu": _relu(),
}
# the careful rerun (a sum past float32's range, a half-range below 1e-18) computes them anyway
RERUN = {"near_3e38", "tiny_1e-30"}


def oracle(x: np.ndarray) -> dict:
    v = x.astype(np.float64).ravel()
    f = v[np.isfinite(v)]
    return {"count": v.size, "nan": int(np.isnan(v).sum()), "inf": int(np.isinf(v).sum()), "min": f.min(), "max": f.max(),
            "mean": f.mean(), "std": f.std(), "abs_mean": np.abs(f).mean(), "zero_fraction": (f == 0).sum() / f.size}


def check_core(d: dict, want: dict, label: str, rel: float = 2e-6) -> None:
    """min, max, mean and std as tests/test_stats_hostile.check takes them (the block form's tolerances)."""
    assert (d["count"], d["nan"], d["inf"]) == (want["count"], want["nan"], want["inf"]), label
    assert (d["min"], d["max"]) == (want["min"], want["max"]), label
    scale = max(abs(want["mean"]), want["std"], 1e-300)
    assert d["mean"] is not None and abs(d["mean"] - want["mean"]) <= rel * scale, (label, d["mean"], want["mean"])
    if want["std"] == 0:
        assert d["std"] == 0, (label, d["std"])
    else:
        assert d["std"] == pytest.approx(want["std"], rel=max(rel * 10, 2e-5), abs=0), (label, d["std"], want["std"])


def check_extras(d: dict, want: dict, label: str, rel: float = 2e-6) -> None:
    assert d["abs_mean"] is not None and abs(d["abs_mean"] - want["abs_mean"]) <= rel * max(want["abs_mean"], want["std"], 1e-300), \
        (label, d["abs_mean"], want["abs_mean"])
    assert d["zero_fraction"] == want["zero_fraction"], (label, d["zero_fraction"], want["zero_fraction"])


def identity_model(x: np.ndarray) -> onnx.ModelProto:
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    return make_model([helper.make_node("Identity", ["x"], ["y"], name="id")],
                      [helper.make_tensor_value_info("x", elem, list(x.shape))],
                      [helper.make_tensor_value_info("y", elem, list(x.shape))])


def probed(x: np.ndarray, tmp_path, monkeypatch, extras: bool):
    from onnxprobe.runtime.runners import base as base_runner

    monkeypatch.setattr(base_runner, "SMALL_ON_HOST", (0, 0))  # the graph's block form, whatever the size
    p = tmp_path / "m.onnx"
    onnx.save(identity_model(x), p)
    res = api.layers(p, api.Selection(names=("y",)), api.RunConfig(device="cpu", cache=False), api.InputSpec(arrays={"x": x}),
                     extras=extras)
    (probe,) = [q for q in res.plan.probes if q.ref.name == "y"]
    assert probe.stats_block == block_size(x.shape) > 0  # the block form, not another
    assert probe.stats_extras is extras
    return res.stats["y"]


@pytest.mark.parametrize("name", list(HOSTILE))
def test_light_block_statistics_match_numpy_without_the_extras(name, tmp_path, monkeypatch):
    x, want = HOSTILE[name], oracle(HOSTILE[name])
    light = probed(x, tmp_path, monkeypatch, extras=False)
    d = light.to_dict()
    check_core(d, want, name)
    if name in RERUN:  # summarised again in the careful form, which has them
        check_extras(d, want, name)
    else:
        assert light.extras is False and light.abs_mean is None and light.zero_fraction is None, name
        assert d["abs_mean"] is None and d["zero_fraction"] is None, name
    full = probed(x, tmp_path, monkeypatch, extras=True).to_dict()
    check_core(full, want, name)
    check_extras(full, want, name)


@pytest.mark.parametrize("bad", ["nan", "inf", "both"])
def test_nan_and_inf_are_still_rerun_carefully_in_light_mode(bad, tmp_path, monkeypatch):
    x = rng.normal(5, 1, size=(8, 512)).astype(np.float32)
    if bad in ("nan", "both"):
        x.flat[rng.choice(x.size, 7, replace=False)] = np.nan
    if bad in ("inf", "both"):
        x.flat[[3, 900, 2000]] = [np.inf, -np.inf, np.inf]
    st = probed(x, tmp_path, monkeypatch, extras=False)
    want = oracle(x)
    assert (st.nan, st.inf) == (want["nan"], want["inf"]) and st.nan + st.inf > 0
    check_core(st.to_dict(), want, bad)


def chain_model(n: int = 6) -> onnx.ModelProto:
    nodes, prev = [], "x"
    for i in range(n):
        op = ("Relu", "Sigmoid", "Tanh")[i % 3]
        nodes.append(helper.make_node(op, [prev], [f"t{i}"], name=f"n{i}"))
        prev = f"t{i}"
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 3, 64, 64])],
                      [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [8, 3, 64, 64])])


def test_the_light_plan_has_five_nodes_fewer_per_block_tensor(tmp_path):
    p = tmp_path / "chain.onnx"
    onnx.save(chain_model(), p)
    x = rng.normal(size=(8, 3, 64, 64)).astype(np.float32)
    plans = {ex: api.layers(p, api.Selection(all=True), api.RunConfig(device="cpu", cache=False), api.InputSpec(arrays={"x": x}),
                            extras=ex).plan for ex in (True, False)}
    blocks = [q for q in plans[False].probes if q.stats_block]
    assert len(blocks) == 6 and not any(q.stats_extras for q in blocks)
    assert all(q.stats_extras for q in plans[True].probes)
    ops = {ex: Counter(n.op_type for n in plans[ex].model.graph.node if n.op_type != "Constant") for ex in plans}
    assert sum(ops[True].values()) - sum(ops[False].values()) == 5 * len(blocks)
    assert ops[True] - ops[False] == Counter({"ReduceSum": 2 * len(blocks), "Abs": len(blocks), "Equal": len(blocks),
                                              "Cast": len(blocks)})


def test_api_extras_must_be_a_bool(tmp_path):
    p = tmp_path / "chain.onnx"
    onnx.save(chain_model(1), p)
    with pytest.raises(api.UsageError):
        api.layers(p, extras="no")


# --- the command line ---------------------------------------------------------------------------------


@pytest.fixture
def chain(tmp_path):
    p, x = tmp_path / "chain.onnx", rng.normal(size=(8, 3, 64, 64)).astype(np.float32)
    onnx.save(chain_model(), p)
    np.save(tmp_path / "x.npy", x)
    m = onnx.load(p)
    m.graph.output.extend(helper.make_tensor_value_info(f"t{i}", TensorProto.FLOAT, None) for i in range(5))
    ref = ReferenceEvaluator(m)
    values = dict(zip([o.name for o in m.graph.output], ref.run(None, {"x": x})))
    return p, tmp_path / "x.npy", values


def _json_rows(out: str) -> dict:
    return {t["name"]: t for t in json.loads(out)["tensors"]}


def test_cli_table_is_light_and_json_is_full(chain, monkeypatch):
    p, x, values = chain
    asked, layers = [], api.layers
    monkeypatch.setattr(api, "layers", lambda *a, **k: asked.append(k.get("extras", True)) or layers(*a, **k))
    for fmt in ("table", "markdown", "csv", "json"):
        table = runner.invoke(app, ["layers", str(p), "--all", "--input", f"x={x}", "--no-cache", "--format", fmt])
        assert table.exit_code == 0, table.output
        assert "t3" in table.output and "abs_mean" not in table.output
    got = runner.invoke(app, ["layers", str(p), "--all", "--input", f"x={x}", "--no-cache", "--json", "-"])
    assert got.exit_code == 0, got.output
    assert asked == [False, False, False, False, True]
    rows = _json_rows(got.stdout)
    for name, v in values.items():
        want = np.abs(v.astype(np.float64)).mean()
        assert rows[name]["abs_mean"] == pytest.approx(want, rel=2e-6, abs=0), name
        assert rows[name]["zero_fraction"] == (v == 0).sum() / v.size, name


def test_cli_columns_cannot_name_abs_mean_the_table_has_no_such_column(chain):
    """The layers table has no abs_mean column: --columns naming it is refused before any run (so no light run
    can leave it empty); JSON rows are where abs_mean is."""
    p, x, _ = chain
    got = runner.invoke(app, ["layers", str(p), "--all", "--input", f"x={x}", "--no-cache", "--columns", "index,tensor,abs_mean"])
    assert got.exit_code == 2 and "abs_mean" in got.output and "Traceback" not in got.output


def test_light_stats_decision():
    from onnxprobe.cli.layers import light_stats
    from onnxprobe.cli.options import View

    assert light_stats(None, None, False, View())
    assert light_stats(None, None, False, View(columns=("index", "tensor", "std"), format="csv"))
    assert not light_stats("-", None, False, View())
    assert not light_stats(None, "r.html", False, View())
    assert not light_stats(None, None, True, View())
    assert not light_stats(None, None, False, View(columns=("index", "abs_mean")))
    assert not light_stats(None, None, False, View(columns=("zero_fraction",)))


@pytest.mark.parametrize("first", ["table", "json"])
def test_the_plan_cache_never_serves_light_for_full_or_the_reverse(chain, tmp_path, monkeypatch, first):
    monkeypatch.setenv("ONNXPROBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ONNXPROBE_NO_CACHE", raising=False)
    p, x, values = chain
    args = ["layers", str(p), "--all", "--input", f"x={x}"]
    runs = [args, args + ["--json", "-"]]
    for a in (runs if first == "table" else runs[::-1]):
        got = runner.invoke(app, a)
        assert got.exit_code == 0, got.output
        if "--json" in a:
            rows = _json_rows(got.stdout)
            for name, v in values.items():
                assert rows[name]["abs_mean"] == pytest.approx(np.abs(v.astype(np.float64)).mean(), rel=2e-6, abs=0), name
    assert len(list((tmp_path / "cache").rglob("*.probed.json"))) == 2  # one entry each
    light = api.layers(p, api.Selection(all=True), api.RunConfig(device="cpu"), api.InputSpec(arrays={"x": np.load(x)}), extras=False)
    assert light.stats["t3"].abs_mean is None
