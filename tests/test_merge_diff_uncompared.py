"""`merge-stats` of dataset diff shards that compared nothing says why, by cause, counted over the merge, as
one diff says it (``compare.uncompared``): its line read only "nothing was compared in any shard", though
every shard's JSON carried its causes. The merged JSON's ``uncompared`` is the merge's own: it was copied
from the shards, and shards that differed (a pair with nothing finite in one shard, measured in another)
gave a list of the shards' lists. A dataset diff in which some samples compare and others do not pools to
the samples that do."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app

runner = CliRunner()


def _save(path, nodes, out_shape, inits=()):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


def _relu(path):
    return _save(path, [helper.make_node("Relu", ["x"], ["y"], name="relu")], [1, 4])


def _transposed(path):
    """y of another shape (4x1): nothing pairs with A's y."""
    return _save(path, [helper.make_node("Transpose", ["x"], ["t"], name="tr"),
                        helper.make_node("Relu", ["t"], ["y"], name="relu")], [4, 1])


def _nan(path):
    """y = x + NaN: nothing finite on either side, whatever the input."""
    c = numpy_helper.from_array(np.array(np.nan, np.float32), "c")
    return _save(path, [helper.make_node("Add", ["x", "c"], ["y"], name="add")], [1, 4], [c])


def _folder(path, seeds, nan=False):
    path.mkdir()
    for s in seeds:
        x = np.random.default_rng(s).standard_normal((1, 4)).astype(np.float32)
        np.savez(path / f"s{s}.npz", x=np.full_like(x, np.nan) if nan else x)
    return path


def _shard(tmp_path, name, models, folder, code):
    out = tmp_path / f"{name}.json"
    r = runner.invoke(app, ["diff", *map(str, models), "--inputs-dir", str(folder), "--json", str(out)])
    assert r.exit_code == code, r.output
    return out


def _merge(*shards, code=1):
    r = runner.invoke(app, ["merge-stats", *map(str, shards), "--json", "-"])
    assert r.exit_code == code, r.output
    assert "Traceback" not in r.output and "internal error" not in r.output, r.output
    lines = [x for x in r.stderr.splitlines() if x.startswith("onnxprobe: error:")]
    assert len(lines) == (1 if code else 0), r.stderr
    return json.loads(r.stdout), lines[0] if lines else ""


def test_a_merge_of_shards_that_pair_nothing_says_the_causes(tmp_path):
    a, b = _relu(tmp_path / "a.onnx"), _transposed(tmp_path / "b.onnx")
    shards = [_shard(tmp_path, f"d{k}", (a, b), _folder(tmp_path / f"s{k}", (2 * k, 2 * k + 1)), 1) for k in range(2)]
    one = json.loads(shards[0].read_text())
    merged, line = _merge(*shards)
    assert "nothing was compared" in line and "by cause" in line and "another shape" in line, line
    assert "1 in A, 1 in B" in line and "'y'" in line, line
    assert merged["verdict"] == "error" and merged["verdict_reason"] in line and merged["compared"] == 0
    assert merged["verdict_reason"] == one["verdict_reason"], (merged["verdict_reason"], one["verdict_reason"])
    assert [(g["cause"], g["pairs"], g["in_a"], g["in_b"]) for g in merged["uncompared"]] == [("shape", 0, 1, 1)]


def test_pairs_measured_in_no_shard_are_counted_once(tmp_path):
    a, b = _nan(tmp_path / "a.onnx"), _nan(tmp_path / "b.onnx")
    shards = [_shard(tmp_path, f"d{k}", (a, b), _folder(tmp_path / f"s{k}", (2 * k, 2 * k + 1)), 1) for k in range(2)]
    merged, line = _merge(*shards)
    assert "nothing was compared (1 pair not measured; 0 unmatched in A, 0 in B)" in line, line
    assert "nothing finite" in line and "'y'" in line, line
    assert [(g["cause"], g["pairs"], g["examples"]) for g in merged["uncompared"]] == [("nothing-finite", 1, ["y"])]


def test_a_pair_measured_in_some_shards_is_not_uncompared(tmp_path):
    a, b = _relu(tmp_path / "a.onnx"), _relu(tmp_path / "b.onnx")
    nan = _shard(tmp_path, "d0", (a, b), _folder(tmp_path / "s0", (0,), nan=True), 1)
    ok = _shard(tmp_path, "d1", (a, b), _folder(tmp_path / "s1", (2, 3)), 0)
    assert json.loads(nan.read_text())["uncompared"][0]["cause"] == "nothing-finite"
    for order in ((nan, ok), (ok, nan)):
        merged, _ = _merge(*order, code=0)
        assert merged["verdict"] == "pass" and merged["compared"] == 1 and merged["uncompared"] == [], merged["uncompared"]


def test_a_dataset_whose_samples_compare_in_part_pools_those_that_do(tmp_path):
    a, b = _relu(tmp_path / "a.onnx"), _relu(tmp_path / "b.onnx")
    folder = _folder(tmp_path / "s", (0,), nan=True)
    np.savez(folder / "s9.npz", x=np.ones((1, 4), np.float32))
    d = json.loads(_shard(tmp_path, "d", (a, b), folder, 0).read_text())
    assert d["verdict"] == "pass" and d["compared"] == 1 and d["uncompared"] == []
    assert d["pairs"][0]["sqnr_per_sample"]["not_compared"] == 1, d["pairs"][0]["sqnr_per_sample"]


def _two_outputs(path, other_shape: bool, extra: bool = False):
    """y1 = Relu(x), y2 = Sigmoid(x) (of x transposed: another shape), and y3 = Neg(x) in A alone."""
    nodes = [helper.make_node("Relu", ["x"], ["y1"], name="relu")]
    nodes += ([helper.make_node("Transpose", ["x"], ["t"], name="tr"), helper.make_node("Sigmoid", ["t"], ["y2"], name="sig")]
              if other_shape else [helper.make_node("Sigmoid", ["x"], ["y2"], name="sig")])
    nodes += [helper.make_node("Neg", ["x"], ["y3"], name="neg")] if extra else []
    out = [("y1", [1, 4]), ("y2", [4, 1] if other_shape else [1, 4])] + ([("y3", [1, 4])] if extra else [])
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in out])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


def test_outputs_left_unpaired_are_said_as_one_diff_says_them(tmp_path):
    """An output of both models left unpaired (another shape) is one output, said once; one in A alone is A's:
    the merge said "2 of the outputs could not be compared: 'y2' (...), 'y2' (...)" where every shard said 1."""
    a, b = _two_outputs(tmp_path / "a.onnx", False, extra=True), _two_outputs(tmp_path / "b.onnx", True)
    shards = [_shard(tmp_path, f"d{k}", (a, b), _folder(tmp_path / f"s{k}", (2 * k, 2 * k + 1)), 1) for k in range(2)]
    one = json.loads(shards[0].read_text())["verdict_reason"]
    assert one.startswith("2 of the outputs could not be compared: 'y2' (") and "A's 'y3'" in one, one
    merged, line = _merge(*shards)
    assert merged["verdict_reason"] == one and one in line, (merged["verdict_reason"], one)
