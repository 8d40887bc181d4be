"""Dataset mode (`layers --inputs-dir`) and `merge-stats`: statistics over many batches, checked
against numpy on the reference evaluator's tensors; exact, order-independent merging of shards."""

from __future__ import annotations

import itertools
import json

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app
from onnxprobe.stats.histogram import SUB, Histogram

runner = CliRunner()


def _batches(n=6):
    return [{"image": np.random.default_rng(100 + i).normal(0.5, 0.3, (1, 3, 32, 32)).astype(np.float32)} for i in range(n)]


def _write(folder, batches):
    folder.mkdir(parents=True, exist_ok=True)
    for i, b in enumerate(batches):
        np.savez(folder / f"b{i:03d}.npz", **b)
    return folder


def _run(*args):
    r = runner.invoke(app, [str(a) for a in args])
    assert r.exit_code == 0, r.output
    return r


def test_dataset_statistics_agree_with_numpy(tmp_path):
    batches = _batches()
    out = tmp_path / "d.json"
    _run("layers", sample_path("cnn"), "--inputs-dir", _write(tmp_path / "ds", batches), "--all", "--json", out)
    d = json.loads(out.read_text())
    assert d["batches"] == 6
    ref = ReferenceEvaluator(onnx.load(str(sample_path("cnn"))))
    per_batch = [ref.run(None, b, intermediate=True) for b in batches]
    for t in d["tensors"]:
        x = np.concatenate([np.asarray(r[t["name"]], np.float64).reshape(-1) for r in per_batch])
        scale = np.abs(x).max()
        assert t["count"] == x.size
        assert t["min"] == pytest.approx(x.min(), abs=1e-5 * scale) and t["max"] == pytest.approx(x.max(), abs=1e-5 * scale)
        assert t["mean"] == pytest.approx(x.mean(), abs=1e-5 * scale)
        assert t["std"] == pytest.approx(x.std(), abs=1e-5 * scale)
        for key, q in (("p0.01", 0.01), ("p99.99", 99.99)):
            exact = np.percentile(x, q, method="inverted_cdf")
            assert abs(t[key] - exact) <= abs(exact) / SUB + 1e-6, (t["name"], key, t[key], exact)


def test_single_npz_with_a_leading_sample_axis(tmp_path):
    batches = _batches(4)
    stacked = tmp_path / "all.npz"
    np.savez(stacked, image=np.stack([b["image"] for b in batches]))  # [4, 1, 3, 32, 32]
    r = json.loads(_run("layers", sample_path("cnn"), "--inputs-dir", stacked, "--json", "-").stdout)
    one = json.loads(_run("layers", sample_path("cnn"), "--inputs-dir", _write(tmp_path / "ds", batches), "--json", "-").stdout)
    assert r["batches"] == 4 and r["tensors"][0]["count"] == 4 * 8 * 32 * 32
    assert [t["moments"] for t in r["tensors"]] == [t["moments"] for t in one["tensors"]]


def test_merge_is_exact_and_order_independent(tmp_path):
    batches = _batches(6)
    shards = []
    for k, part in enumerate((batches[:1], batches[1:4], batches[4:])):
        out = tmp_path / f"shard{k}.json"
        _run("layers", sample_path("cnn"), "--inputs-dir", _write(tmp_path / f"s{k}", part), "--all", "--json", out)
        shards.append(out)
    outputs = set()
    for perm in itertools.permutations(shards):
        out = tmp_path / "merged.json"
        _run("merge-stats", *perm, "--json", out)
        outputs.add(out.read_bytes())
    assert len(outputs) == 1
    merged = json.loads(outputs.pop())
    whole = tmp_path / "whole.json"
    _run("layers", sample_path("cnn"), "--inputs-dir", _write(tmp_path / "all", batches), "--all", "--json", whole)
    whole = json.loads(whole.read_text())
    assert merged["batches"] == 6
    for a, b in zip(merged["tensors"], whole["tensors"]):
        assert a["moments"] == b["moments"] and a["histogram"] == b["histogram"]
        assert a["mean"] == b["mean"] and a["p99.99"] == b["p99.99"]


def test_merge_refuses_a_shard_given_twice(tmp_path):
    """Overlapping globs give a shard twice: its samples would count twice. The same file, a copy of it, or
    a second run over the same samples; shards of other samples merge."""
    a, again, b = tmp_path / "a.json", tmp_path / "again.json", tmp_path / "b.json"
    batches = _batches(4)
    _run("layers", sample_path("cnn"), "--inputs-dir", _write(tmp_path / "s", batches[:2]), "--json", a)
    _run("layers", sample_path("cnn"), "--inputs-dir", tmp_path / "s", "--json", again)
    copy = tmp_path / "copy.json"
    copy.write_bytes(a.read_bytes())
    for args in ([a, a], [a, copy], [a, again]):
        r = runner.invoke(app, ["merge-stats", *map(str, args)])
        assert r.exit_code == 2 and "holds the same samples as" in r.stderr and "\n" not in r.stderr.strip(), r.output
    _run("layers", sample_path("cnn"), "--inputs-dir", _write(tmp_path / "t", batches[2:]), "--json", b)
    assert json.loads(_run("merge-stats", a, b, "--json", "-").stdout)["batches"] == 4
    # a merged report holds its shards' samples: given again beside it (or beside another merge of it),
    # they would count twice; a shard of the same file name from another folder, of other samples, is
    # another shard
    ab = tmp_path / "ab.json"
    _run("merge-stats", a, b, "--json", ab)
    ab2 = tmp_path / "ab2.json"
    ab2.write_text(json.dumps({**json.loads(ab.read_text()), "note": "edited"}))
    for args, said in (([ab, a], "every sample of"), ([b, ab], "every sample of"), ([ab, ab2], "holds the same samples as")):
        r = runner.invoke(app, ["merge-stats", *map(str, args)])
        assert r.exit_code == 2 and said in r.stderr, r.output
    other = tmp_path / "elsewhere" / "a.json"
    other.parent.mkdir()
    _run("layers", sample_path("cnn"), "--inputs-dir", _write(tmp_path / "u", _batches(5)[4:]), "--json", other)
    assert json.loads(_run("merge-stats", a, other, "--json", "-").stdout)["batches"] == 3


def test_histogram_merge_matches_whole_data():
    rng = np.random.default_rng(0)
    parts = [rng.normal(size=n) for n in (10, 1000, 3)]
    whole = Histogram.from_array(np.concatenate(parts))
    merged = Histogram()
    for p in reversed(parts):
        merged = merged.merge(Histogram.from_array(p))
    assert merged.counts == whole.counts and merged.total == 1013


@pytest.mark.parametrize("make, needle", [
    (lambda p: p / "empty", "no .npz files"),
    (lambda p: p / "x.txt", "expected a folder"),
])
def test_dataset_errors(tmp_path, make, needle):
    (tmp_path / "empty").mkdir()
    (tmp_path / "x.txt").write_text("hi")
    r = runner.invoke(app, ["layers", str(sample_path("cnn")), "--inputs-dir", str(make(tmp_path))])
    assert r.exit_code == 2 and needle in r.stderr


def test_a_batch_without_every_input_is_an_error_naming_it(tmp_path):
    """Statistics over a dataset whose batch lacks an input would be over seeded random data for it."""
    from conftest import make_model
    from onnx import TensorProto, helper

    m = make_model([helper.make_node("Add", ["x", "z"], ["y"], name="add")],
                   [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in ("x", "z")],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    path = tmp_path / "two.onnx"
    onnx.save(m, path)
    data = tmp_path / "d"
    data.mkdir()
    np.savez(data / "a.npz", x=np.ones((1, 4), np.float32), z=np.ones((1, 4), np.float32))
    np.savez(data / "b.npz", x=np.ones((1, 4), np.float32))
    r = runner.invoke(app, ["layers", str(path), "--inputs-dir", str(data)])
    assert r.exit_code != 0 and "b.npz" in r.stderr and "input z: not in the dataset" in r.stderr, r.output
    assert "Traceback" not in r.output
    # a batch with nothing in it was filled with random data, silently (the check skipped empty batches)
    np.savez(data / "b.npz")
    for cmd in ("layers", "diff", "grad"):
        argv = [cmd, str(path)] + ([str(path)] if cmd == "diff" else []) + ["--inputs-dir", str(data)]
        r = runner.invoke(app, argv)
        assert r.exit_code != 0 and "b.npz" in r.stderr and "which holds nothing" in r.stderr, (cmd, r.output)
    from onnxprobe import api
    from onnxprobe.errors import UsageError

    with pytest.raises(UsageError, match="holds nothing"):
        api.layers_dataset(path, inputs_from=[{}])


def test_merge_refuses_other_models(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    _run("layers", sample_path("cnn"), "--inputs-dir", _write(tmp_path / "x", _batches(1)), "--json", a)
    np.savez(tmp_path / "m.npz", x=np.zeros((2, 4, 16), np.float32))
    _run("layers", sample_path("mlp"), "--inputs-dir", tmp_path / "m.npz", "--json", b)
    r = runner.invoke(app, ["merge-stats", str(a), str(b)])
    assert r.exit_code == 2 and "describes a different model" in r.stderr
    r = runner.invoke(app, ["merge-stats", str(tmp_path / "nope.json")])
    assert r.exit_code == 2 and "no such report file" in r.stderr


def _same_names_other_ops(tmp_path) -> tuple:
    """Two models with the same tensor names whose ops differ: Relu against Sigmoid."""
    from onnx import TensorProto, helper

    from conftest import make_model

    paths = []
    for op in ("Relu", "Sigmoid"):
        m = make_model([helper.make_node(op, ["x"], ["y"], name="n")], [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 4])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", 4])])
        p = tmp_path / f"{op}.onnx"
        onnx.save(m, p)
        paths.append(p)
    np.savez(tmp_path / "d.npz", x=np.random.default_rng(0).normal(size=(3, 2, 4)).astype(np.float32))
    return paths


@pytest.mark.parametrize("spoil, needle", [
    (None, "describes a different model"),
    (lambda d: d["tensors"][0]["histogram"]["counts"].append(1), "codes and counts differ in length"),
    (lambda d: d["tensors"][0]["histogram"]["codes"].__setitem__(0, 10 ** 30), "out of range"),  # its value overflowed
    (lambda d: d["tensors"][0].pop("op_type"), "no op_type or dtype"),  # it read "is None None there"
    (lambda d: d["tensors"][0]["moments"].__setitem__("count", "many"), "malformed moments"),
    (lambda d: d["tensors"][0]["moments"].__setitem__("sum", [{"a": 1}]), "malformed moments"),
    (lambda d: d.__setitem__("selection", "--op Conv"), "another selection"),
    (lambda d: d.__setitem__("schema_version", 1), "schema"),
    (lambda d: d.__setitem__("precision", "bf16"), "another floating-point precision"),  # a bf16 CPU's shard
    (lambda d: d.__setitem__("runtime_options", {"INFERENCE_PRECISION_HINT": "f16"}), "other runtime options"),
    (lambda d: d.__setitem__("tensors", [[[[[[[[1]]]]]]]]), "not a tensor entry"),
    # merged without a word (QA): percentiles from the other shard's histogram alone, the overlap check gone,
    # a minimum above the maximum
    (lambda d: d["tensors"][0].pop("histogram"), "no histogram"),
    (lambda d: d.__setitem__("sample_digests", "abc"), "sample_digests"),
    (lambda d: d["tensors"][0]["moments"].__setitem__("min", d["tensors"][0]["moments"]["max"] + 5.0), "malformed moments"),
])
def test_merge_refuses_reports_of_different_things_and_malformed_ones(tmp_path, spoil, needle):
    relu, sigmoid = _same_names_other_ops(tmp_path)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    _run("layers", relu, "--all", "--inputs-dir", tmp_path / "d.npz", "--json", a)
    np.savez(tmp_path / "d2.npz", x=np.random.default_rng(1).normal(size=(3, 2, 4)).astype(np.float32))
    _run("layers", sigmoid if spoil is None else relu, "--all", "--inputs-dir", tmp_path / "d2.npz", "--json", b)
    if spoil is not None:
        d = json.loads(b.read_text())
        spoil(d)
        b.write_text(json.dumps(d))
    r = runner.invoke(app, ["merge-stats", str(a), str(b)])
    assert r.exit_code == 2 and needle in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.output


def test_merge_refuses_deeply_nested_json(tmp_path):
    p = tmp_path / "deep.json"
    p.write_text("[" * 100_000 + "]" * 100_000)
    r = runner.invoke(app, ["merge-stats", str(p)])
    assert r.exit_code == 2 and ("nested too deeply" in r.stderr or "not a dataset report" in r.stderr), r.stderr


def test_batches_of_varying_shapes_each_get_statistics_that_fit_them(tmp_path):
    """A plan made for the first batch's shapes (its statistics' block rows are sized from them) is not
    reused for a batch of other shapes: that batch gets a plan made for any shape."""
    from onnx import TensorProto, helper

    from conftest import make_model
    from onnxprobe.graph.stats_nodes import block_size

    per_sample = (3, 97, 239)  # 272 KB a sample: statistics in the graph, not on the host
    dims = ["N", *per_sample]
    m = make_model([helper.make_node("Relu", ["x"], ["y"], name="relu"), helper.make_node("Neg", ["y"], ["z"], name="neg")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                   [helper.make_tensor_value_info("z", TensorProto.FLOAT, dims)])
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    first = block_size((4, *per_sample))
    assert first and int(np.prod((1, *per_sample))) % first != 0  # the first plan's rows cannot fit batch 2
    rng = np.random.default_rng(5)
    batches = [{"x": rng.normal(size=(n, *per_sample)).astype(np.float32)} for n in (4, 1, 3)]
    out = tmp_path / "d.json"
    _run("layers", p, "--inputs-dir", _write(tmp_path / "ds", batches), "--all", "--json", out)
    got = {t["name"]: t for t in json.loads(out.read_text())["tensors"]}
    x = np.concatenate([b["x"].reshape(-1) for b in batches]).astype(np.float64)
    for name, v in (("y", np.maximum(x, 0)), ("z", -np.maximum(x, 0))):
        assert got[name]["count"] == v.size
        assert got[name]["mean"] == pytest.approx(v.mean(), rel=1e-6)
        assert got[name]["std"] == pytest.approx(v.std(), rel=1e-6)  # within about 1e-7 (README)


def test_histograms_leave_out_the_batches_where_a_tensor_did_not_run(tmp_path):
    """A scalar inside an If branch comes out of a batch whose branch did not run as a placeholder 0 (a
    scalar cannot be empty): its histogram holds the values of the batches where it ran, as its count does."""
    from onnx import TensorProto, helper

    from conftest import make_model
    from onnxprobe import api

    then = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
                              helper.make_node("Mul", ["s", "two"], ["t"], name="dbl")], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, [])],
                             [onnx.numpy_helper.from_array(np.array(2, np.float32), "two")])
    other = helper.make_graph([helper.make_node("ReduceMax", ["x"], ["e"], name="max", keepdims=0)], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, [])])
    m = make_model([helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)],
                   [helper.make_tensor_value_info("c", TensorProto.BOOL, []), helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    p = tmp_path / "if.onnx"
    onnx.save(m, p)
    batches = [{"c": np.array(c), "x": np.arange(4, dtype=np.float32) + 1 + k} for k, c in enumerate([True, False, False])]
    res = api.layers_dataset(p, _write(tmp_path / "ds", batches), api.Selection(all=True), api.RunConfig(device="cpu", cache=False))
    counts = {n: m.stats().count for n, m in res.moments.items()}
    assert counts == {"s": 1, "t": 1, "e": 2, "y": 3}
    assert {n: h.total for n, h in res.histograms.items()} == counts
    assert res.histograms["t"].percentile(0, 0, 100) == pytest.approx(20, rel=1 / SUB)  # 2 * (1 + 2 + 3 + 4), no 0


def test_a_dataset_from_python_objects(tmp_path):
    """From Python, inputs_from= takes feed dicts in memory (a list, a generator, a function returning
    them): the model input's statistics over the dataset are numpy's over the batches put together; a
    wrong type for inputs= or ray= is one UsageError naming the argument (they were TypeError and
    AttributeError from inside)."""
    from onnxprobe import api
    from onnxprobe.errors import UsageError

    m = str(sample_path("cnn"))
    name = api.load(m).proto.graph.input[0].name
    rng = np.random.default_rng(3)
    batches = [{name: (1e3 + rng.normal(size=(1, 3, 32, 32))).astype(np.float32)} for _ in range(3)]
    allx = np.concatenate([b[name] for b in batches]).astype(np.float64)
    sel = api.Selection(names=(name,))
    for given in (batches, (b for b in batches), lambda: iter(batches)):
        res = api.layers_dataset(m, inputs_from=given, selection=sel)
        st = res.moments[name].stats()
        assert res.batches == 3 and st.count == allx.size
        assert st.mean == pytest.approx(allx.mean(), rel=1e-12) and st.std == pytest.approx(allx.std(), rel=1e-9)
        assert (st.min, st.max) == (allx.min(), allx.max())
    for bad, needle in ((allx, "inputs: expected the path"), ({name: allx}, "inputs: expected the path"), (5, "inputs: expected")):
        with pytest.raises(UsageError, match=needle):
            api.layers_dataset(m, bad)
    with pytest.raises(UsageError, match="ray: expected"):
        api.layers_dataset(m, inputs_from=batches, ray="yes")
    with pytest.raises(UsageError, match="inputs_from: item 1 is a str"):
        api.layers_dataset(m, inputs_from=[batches[0], "x"])
    with pytest.raises(UsageError, match="inputs_from: expected"):
        api.layers_dataset(m, inputs_from={name: allx})
    with pytest.raises(UsageError, match=r"inputs_from <lambda>: <lambda>\(\) raised ZeroDivisionError"):
        api.layers_dataset(m, inputs_from=lambda: 1 / 0)
    with pytest.raises(UsageError, match="inputs: expected the path"):
        api.diff_dataset(m, m, {name: None})


def test_a_dataset_of_a_graph_input_alone(tmp_path):
    """layers --inputs-dir --name INPUT: only the input is probed, so no run has any output to ask for
    (onnxruntime refuses such a run: every batch failed); its statistics are numpy's over the batches."""
    from onnxprobe import api

    m = str(sample_path("cnn"))
    name = api.load(m).proto.graph.input[0].name
    rng = np.random.default_rng(5)
    xs = [rng.normal(size=(1, 3, 32, 32)).astype(np.float32) for _ in range(2)]
    d = tmp_path / "ds"
    d.mkdir()
    for k, x in enumerate(xs):
        np.savez(d / f"b{k}.npz", **{name: x})
    r = runner.invoke(app, ["layers", m, "--inputs-dir", str(d), "--name", name, "--json", "-"])
    assert r.exit_code == 0, r.output
    (t,) = json.loads(r.stdout)["tensors"]
    allx = np.concatenate(xs).astype(np.float64)
    assert t["count"] == allx.size and t["mean"] == pytest.approx(allx.mean(), rel=1e-9, abs=1e-12)
    assert (t["min"], t["max"]) == (allx.min(), allx.max())


def test_merged_shards_that_ran_at_other_opt_levels_say_both_in_words(tmp_path):
    """Shards of one model run at two opt levels merge (the field becomes the list of both); the footer read
    "opt-level ['all', 'off']", a Python list."""
    shards = []
    for k, level in enumerate(("off", "all")):  # other samples in each (the same ones would count twice)
        shards.append(tmp_path / f"{level}.json")
        ds = _write(tmp_path / f"ds{k}", _batches(2)[k:k + 1])
        _run("layers", sample_path("cnn"), "--inputs-dir", ds, "--opt-level", level, "--json", shards[-1])
    r = runner.invoke(app, ["merge-stats", *map(str, shards)], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "opt-level all, off" in r.stdout and "['" not in r.stdout, r.output


def test_merge_refuses_bare_nan_or_infinity_in_a_shards_sums(tmp_path):
    """onnxprobe writes no bare NaN or Infinity (an unknown sum is null): a shard whose sums hold one was
    not written by it, and merging it dropped those sums silently (a mean of -0.0478 for -0.1018)."""
    batches = _batches(4)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    _run("layers", sample_path("cnn"), "--inputs-dir", _write(tmp_path / "s", batches[:2]), "--json", a)
    _run("layers", sample_path("cnn"), "--inputs-dir", _write(tmp_path / "t", batches[2:]), "--json", b)
    for field, bad in (("sum", float("nan")), ("sumsq", float("inf")), ("max", float("inf"))):
        d = json.loads(a.read_text())
        m = d["tensors"][0]["moments"]
        m[field] = [bad] if isinstance(m[field], list) else bad
        t = tmp_path / f"bad_{field}.json"
        t.write_text(json.dumps(d))  # Python's json writes the bare tokens NaN / Infinity
        r = runner.invoke(app, ["merge-stats", str(t), str(b)])
        assert r.exit_code == 2 and "malformed moments" in r.stderr and "\n" not in r.stderr.strip(), r.output


def test_float64_sums_past_its_range_merge_in_a_unit(tmp_path):
    """A float64 tensor near 1.7e308: a dataset run (once an internal error: OverflowError, then unknown,
    null, sums) keeps its moments in a unit of 2^k, and shards of it merge to the mean and std of the
    whole, with exact extremes and counts. Oracle: numpy on the values scaled by 2^-1000 (exact)."""
    from onnx import TensorProto, helper

    m = helper.make_model(helper.make_graph([helper.make_node("Identity", ["x"], ["y"], name="n")], "g",
                                            [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [3])],
                                            [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [3])]),
                          opset_imports=[helper.make_opsetid("", 13)])
    p = tmp_path / "f64.onnx"
    onnx.save(m, p)
    xs = [np.array([1.7e308, 1.7e308, -1.7e308]), np.array([1e308, -1.79e308, 3.0])]
    shards = []
    for i, x in enumerate(xs):
        (tmp_path / f"d{i}").mkdir()
        np.savez(tmp_path / f"d{i}" / "s.npz", x=x)
        shards.append(tmp_path / f"s{i}.json")
        _run("layers", p, "--inputs-dir", tmp_path / f"d{i}", "--json", shards[i])
    merged = json.loads(_run("merge-stats", *shards, "--json", "-").stdout)
    (t,) = [t for t in merged["tensors"] if t["name"] == "y"]
    both = np.concatenate(xs)
    assert t["min"] == both.min() and t["max"] == both.max() and t["count"] == 6
    y = both * 2.0 ** -1000
    assert t["mean"] == pytest.approx(y.mean() * 2.0 ** 1000, rel=1e-12)
    assert t["std"] == pytest.approx(y.std() * 2.0 ** 1000, rel=1e-12)


def test_merge_refuses_shards_of_another_runtime(tmp_path):
    """Shards run on onnxruntime and on onnx.reference merged into one report (its footer read "runtime
    onnxruntime, onnx.reference"): refused, naming the runtime."""
    batches = _batches(4)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    _run("layers", sample_path("cnn"), "--inputs-dir", _write(tmp_path / "s", batches[:2]), "--json", a)
    _run("layers", sample_path("cnn"), "--inputs-dir", _write(tmp_path / "t", batches[2:]), "--runtime", "reference", "--json", b)
    r = runner.invoke(app, ["merge-stats", str(a), str(b)])
    assert r.exit_code == 2 and "another runtime" in r.stderr, r.output


def test_a_seed_in_dataset_mode_is_refused(tmp_path):
    """--seed does nothing when every input comes from the dataset: it was accepted silently."""
    ds = _write(tmp_path / "ds", _batches(2))
    r = runner.invoke(app, ["layers", str(sample_path("cnn")), "--inputs-dir", str(ds), "--seed", "3"])
    assert r.exit_code == 2 and "--seed" in r.stderr, r.output
    _run("layers", sample_path("cnn"), "--inputs-dir", ds, "--seed", "0")  # the default says nothing


def test_a_dimension_the_batches_disagree_on_reads_unknown(tmp_path):
    """Batches of 1x10 and 1x20: the report gave the first batch's shape, [1, 10], for statistics over both;
    the dimension they disagree on is null in JSON ('?' in the table), as diff shows it."""
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "n"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "n"])])
    p = tmp_path / "dyn.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
    (tmp_path / "ds").mkdir()
    np.savez(tmp_path / "ds" / "a.npz", x=np.ones((1, 10), np.float32))
    np.savez(tmp_path / "ds" / "b.npz", x=np.ones((1, 20), np.float32))
    d = json.loads(_run("layers", p, "--inputs-dir", tmp_path / "ds", "--all", "--json", "-").stdout)
    (t,) = [t for t in d["tensors"] if t["name"] == "y"]
    assert t["shape"] == [1, None] and t["count"] == 30


def test_a_rank_the_batches_disagree_on_reads_no_shape(tmp_path):
    """A Reshape to a fed shape, 3x4 in one batch and 2x2x3 in the other: the report gave the first batch's
    shape, [3, 4], for statistics over both, where merge-stats of the two batches' shards says null."""
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Reshape", ["x", "s"], ["r"], name="reshape")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"]),
                           helper.make_tensor_value_info("s", TensorProto.INT64, ["k"])],
                          [helper.make_tensor_value_info("r", TensorProto.FLOAT, None)])
    p = tmp_path / "reshape.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
    shards = []
    for name, shape in (("a", [3, 4]), ("b", [2, 2, 3])):
        (tmp_path / "ds").mkdir(exist_ok=True)
        (tmp_path / name).mkdir()
        for folder in (tmp_path / "ds", tmp_path / name):
            np.savez(folder / f"{name}.npz", x=np.arange(12, dtype=np.float32), s=np.array(shape, np.int64))
        shards.append(tmp_path / f"{name}.json")
        _run("layers", p, "--inputs-dir", tmp_path / name, "--all", "--json", shards[-1])
    whole = json.loads(_run("layers", p, "--inputs-dir", tmp_path / "ds", "--all", "--json", "-").stdout)
    merged = json.loads(_run("merge-stats", *shards, "--json", "-").stdout)
    (t,) = [t for t in whole["tensors"] if t["name"] == "r"]
    (m,) = [t for t in merged["tensors"] if t["name"] == "r"]
    assert t["shape"] is None and m["shape"] is None and t["count"] == 24, (t, m)


def test_merge_says_what_a_non_report_is_before_anything_else(tmp_path):
    """A JSON file that is no report, given twice, was called a shard given twice ("holds the same
    statistics as"): it is said not to be a report."""
    f = tmp_path / "x.json"
    f.write_text('{"a": 1}')
    r = runner.invoke(app, ["merge-stats", str(f), str(f)])
    assert r.exit_code == 2 and "not a dataset report" in r.stderr, r.output


def test_merging_shards_that_share_samples_says_so(tmp_path):
    """Shards over overlapping ranges of one dataset (batches 0-3 and 2-5) merged silently, the shared
    batches counted twice. Each report lists its samples' digests; the merge notes the overlap (a note:
    a dataset may hold the same values twice on purpose), and disjoint shards get no note."""
    from onnxprobe.runtime.feeds import feed_digest as sample_digest

    batches = _batches(6)
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    _run("layers", sample_path("cnn"), "--inputs-dir", _write(tmp_path / "s", batches[:4]), "--json", a)
    _run("layers", sample_path("cnn"), "--inputs-dir", _write(tmp_path / "t", batches[2:]), "--json", b)
    _run("layers", sample_path("cnn"), "--inputs-dir", _write(tmp_path / "u", batches[4:]), "--json", c)
    assert json.loads(a.read_text())["sample_digests"] == [sample_digest(x) for x in batches[:4]]
    d = json.loads(_run("merge-stats", a, b, "--json", "-").stdout)
    (note,) = [n for n in d["notes"] if "same input values" in n]
    assert note.startswith("4 of the 8 samples") and "a.json" in note and "b.json" in note
    d = json.loads(_run("merge-stats", a, c, "--json", "-").stdout)
    assert not [n for n in d["notes"] if "same input values" in n] and len(d["sample_digests"]) == 6
    d2 = tmp_path / "ac.json"
    d2.write_text(json.dumps(d))  # a merged report carries its samples on: it holds all of b's (refused)
    r = runner.invoke(app, ["merge-stats", str(d2), str(b)])
    assert r.exit_code == 2 and "every sample of" in r.stderr, r.output
    e = tmp_path / "e.json"  # and some of e's: merged, with the note
    _run("layers", sample_path("cnn"), "--inputs-dir", _write(tmp_path / "v", _batches(7)[5:]), "--json", e)
    d = json.loads(_run("merge-stats", d2, e, "--json", "-").stdout)
    assert [n for n in d["notes"] if "same input values" in n]


def test_a_samples_digest_is_its_values():
    from onnxprobe.runtime.feeds import feed_digest as sample_digest

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    same = sample_digest({"x": x})
    assert sample_digest({"x": x.copy(order="F")}) == same and sample_digest({"x": x.T.T}) == same
    assert len({same, sample_digest({"x": x.reshape(3, 2)}), sample_digest({"x": x.astype(np.float16)}),
                sample_digest({"y": x}), sample_digest({"x": x + 1})}) == 5
    assert sample_digest({"x": np.float32(1.0)}) != sample_digest({"x": np.array([], np.float32)})
    assert sample_digest({"s": np.array(["a", "b"])}) != sample_digest({"s": np.array(["a", "c"])})


def test_merge_says_a_grad_report_is_one(tmp_path):
    """grad --inputs-dir reports given to merge-stats read 'not a dataset report (write one with onnxprobe
    layers ...)', though they are dataset reports: said to be grad reports, which it does not merge."""
    (tmp_path / "ds").mkdir()
    for i in range(2):
        np.savez(tmp_path / "ds" / f"b{i}.npz", x=np.random.default_rng(i).random((4, 16)).astype(np.float32))
    _run("grad", sample_path("mlp"), "--inputs-dir", tmp_path / "ds", "--json", tmp_path / "g.json")
    r = runner.invoke(app, ["merge-stats", str(tmp_path / "g.json")])
    assert r.exit_code == 2 and "a grad report" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.output


def test_the_overlap_note_is_said_on_screen(tmp_path):
    """merge-stats put the note on shards that share samples into --json only: the screen said nothing."""
    batches = _batches(3)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    _run("layers", sample_path("cnn"), "--inputs-dir", _write(tmp_path / "s", batches[:2]), "--json", a)
    _run("layers", sample_path("cnn"), "--inputs-dir", _write(tmp_path / "t", batches[1:]), "--json", b)
    r = _run("merge-stats", a, b)
    assert "same input values" in r.stderr, r.stderr
