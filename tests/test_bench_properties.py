"""What the benchmark rule rests on, each pinned so that a change which breaks it fails here (a review's mutants of
bench/run.py and bench/models.py all passed the bench's tests): peak RSS is the command's own, ratios are over plain
inference of the same rounds, the warm-up round is not timed, goals judge wall and rss and the Polygraphy speed-up
the right way round; a perturbed copy that equals the original or breaks its shapes is refused, and only weights are
perturbed (Resize's roi and scales, shapes, bounds and integers are left byte for byte)."""

from __future__ import annotations

import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import bench_models


@pytest.fixture(scope="module")
def run():
    from test_bench_run import _run_module

    return _run_module()


def test_peak_rss_is_the_command_s_own(run):
    """A child that holds 300 MB: the launcher's own RSS (~10 MB) is not it."""
    wall, rss = run.once([sys.executable, "-c", "b = bytearray(300 * 2**20); b[::4096] = b'x' * len(b[::4096])"])
    assert rss >= 300 * 2 ** 20 and wall > 0, rss


def test_the_warm_up_round_is_not_timed(run, monkeypatch):
    calls = []

    def fake(cmd, verdict=None):
        calls.append(cmd[0])
        return (100.0 if len(calls) <= 2 else 1.0), 10  # the warm-up round: slow

    monkeypatch.setattr(run, "once", fake)
    got = run.measure({"plain": ["p"], "layers": ["l"]}, repeat=2)
    assert calls == ["p", "l"] * 3
    assert got["plain"]["wall_s"] == 1.0 and sorted(got["plain"]["rounds"]) == [1, 2], got


def test_ratios_are_over_plain_inference_of_the_same_rounds(run):
    res = {"plain": {"rounds": {1: [1.0, 100], 2: [2.0, 100]}}, "layers": {"rounds": {1: [3.0, 150], 2: [4.0, 200]}},
           "layers_all": {"rounds": {1: [5.0, 130], 2: [20.0, 140]}}, "poly_layers_all": {"rounds": {1: [10.0, 260], 2: [10.0, 280]}}}
    run.with_ratios(res)
    assert res["layers_all"]["wall_vs_plain"] == pytest.approx((5.0 + 10.0) / 2)  # medians of 5/1 and 20/2
    assert res["layers_all"]["rss_vs_plain"] == pytest.approx(1.35)
    assert res["layers_all"]["wall_vs_polygraphy"] == pytest.approx((0.5 + 2.0) / 2)
    assert res["layers"]["wall_vs_plain"] == pytest.approx((3.0 + 2.0) / 2) and "wall_vs_polygraphy" not in res["layers"]


@pytest.mark.parametrize("r, met", [({"wall_vs_plain": 1.9, "rss_vs_plain": 1.2}, True),
                                    ({"wall_vs_plain": 1.9, "rss_vs_plain": 1.4}, False),
                                    ({"wall_vs_plain": 2.1, "rss_vs_plain": 1.0}, False)])
def test_a_goal_is_met_only_by_both_wall_and_rss(run, r, met):
    said = run.goal("layers_all", r)
    assert said.startswith("met" if met else "MISSED"), said


@pytest.mark.parametrize("ratio, met", [(0.04, True), (0.06, False), (1.5, False)])
def test_the_polygraphy_speed_up_is_judged_the_right_way_round(run, ratio, met):
    said = run.goal("diff_all", {"wall_vs_polygraphy": ratio})  # >= 20x faster: at most 1/20 of its time
    assert said.startswith("met" if met else "MISSED") and "20x faster" in said, said


def _model(path, rng):
    """Conv (a weight) -> Resize (float roi and scales of 8 elements) -> Reshape (int shape) -> Clip (float bounds)
    -> Add (a weight of 8 floats, and an int64 Gather index table beside)."""
    f = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)  # noqa: E731
    inits = {"W": rng.standard_normal((2, 1, 3, 3)).astype(np.float32), "roi": np.array([0, 0, 0, 0, 1, 1, 1, 1], np.float32),
             "scales": np.array([1, 1, 2, 2], np.float32), "shape": np.array([1, 2, 8, 8], np.int64),
             "lo": np.array(-1.0, np.float32), "hi": np.array(1.0, np.float32),
             "B": rng.standard_normal((8,)).astype(np.float32), "idx": np.arange(8, dtype=np.int64)}
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Resize", ["c", "roi", "scales"], ["r"], mode="nearest"),
             helper.make_node("Reshape", ["r", "shape"], ["s"]), helper.make_node("Clip", ["s", "lo", "hi"], ["k"]),
             helper.make_node("Add", ["k", "B"], ["a"]), helper.make_node("Gather", ["a", "idx"], ["y"], axis=3)]
    g = helper.make_graph(nodes, "g", [f("x", [1, 1, 4, 4])], [f("y", [1, 2, 8, 8])],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


def test_only_weights_are_perturbed_and_the_copy_is_checked(tmp_path):
    models = bench_models()
    src = _model(tmp_path / "m.onnx", np.random.default_rng(0))
    dst = models.perturbed(src, tmp_path / "p.onnx")
    before = {t.name: t.SerializeToString() for t in onnx.load(str(src)).graph.initializer}
    after = {t.name: t.SerializeToString() for t in onnx.load(str(dst)).graph.initializer}
    changed = {k for k in before if before[k] != after[k]}
    assert changed == {"W", "B"}, changed
    assert "perturbed copy differs" in models.check_perturbed(src, dst, {})
    with pytest.raises(ValueError, match="measures nothing"):
        models.check_perturbed(src, src, {})
    broken = onnx.load(str(src))  # fewer Gather indices (a shape-like input touched): the output's shape differs
    next(t for t in broken.graph.initializer if t.name == "idx").CopyFrom(
        numpy_helper.from_array(np.arange(4, dtype=np.int64), "idx"))
    del broken.graph.output[0].type.tensor_type.shape.dim[:]
    onnx.save(broken, tmp_path / "b.onnx")
    with pytest.raises(ValueError, match="the copy is broken"):
        models.check_perturbed(src, tmp_path / "b.onnx", {})


def test_a_model_with_no_weight_to_perturb_is_refused(tmp_path):
    f = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [4])  # noqa: E731
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [f("x")], [f("y")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), tmp_path / "m.onnx")
    with pytest.raises(ValueError, match="no weight to perturb"):
        bench_models().perturbed(tmp_path / "m.onnx", tmp_path / "p.onnx")
