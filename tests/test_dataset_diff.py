"""`diff --inputs-dir` / `--inputs-from`: metrics pooled over a dataset, checked against numpy float64 over
the concatenated samples (each side's tensors from a plain onnxruntime session, not from onnxprobe's
runners); one sample gives the single-input diff's numbers exactly; shards merged by `merge-stats` give
the whole run's numbers, in any order."""

from __future__ import annotations

import json
import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from typer.testing import CliRunner

from conftest import sample_path, transposing_model
from onnxprobe.cli.main import app
from quantize_fixtures import quantize

runner = CliRunner()


def _run(*args, code=(0,)):
    r = runner.invoke(app, [str(a) for a in args])
    assert r.exit_code in code, r.output
    return r


def _folder(path, name="image", n=6, shape=(1, 3, 32, 32), seed=10):
    path.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in range(n):  # some samples far from the calibration data: a spread worth seeing
        np.savez(path / f"b{i:02d}.npz", **{name: (rng.random(shape, dtype=np.float32) * (1 + 2 * (i == 3)))})
    return path


def _values(model_path, names, feed) -> dict[str, np.ndarray]:
    """The tensors ``names`` of one run of a plain onnxruntime session (optimisations off, as onnxprobe's
    default): the oracle's own values."""
    m = onnx.load(str(model_path))
    have = {o.name for o in m.graph.output}
    m.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names if n not in have)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, feed)))


def _float_tensors(model_path) -> set[str]:
    m = onnx.shape_inference.infer_shapes(onnx.load(str(model_path)))
    vis = list(m.graph.value_info) + list(m.graph.output)
    return {v.name for v in vis if v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT}


@pytest.mark.parametrize("name,kind", [("cnn", "qdq"), ("cnn", "dynamic"), ("mlp", "qdq"), ("mlp", "qoperator")])
def test_pooled_metrics_agree_with_numpy_over_the_concatenated_samples(tmp_path, name, kind):
    a_path = quantize(name, kind, tmp_path)
    b_path = sample_path(name)
    inp = onnx.load(str(b_path)).graph.input[0]
    shape = tuple(d.dim_value or 1 for d in inp.type.tensor_type.shape.dim)
    ds = _folder(tmp_path / "ds", inp.name, shape=shape)
    out = tmp_path / "d.json"
    _run("diff", a_path, b_path, "--inputs-dir", ds, "--all", "--json", out, code=(0, 1))
    d = json.loads(out.read_text())
    assert d["samples"] == 6 and d["sample_labels"] == [f"b{i:02d}.npz" for i in range(6)]
    assert d["executor"] == {"engine": "local"}
    files = sorted(ds.iterdir())
    floats_a = _float_tensors(a_path)
    pairs = [p for p in d["pairs"] if p["a"] in floats_a and p["sqnr_db"] is not None]
    assert len(pairs) >= 2
    va = [_values(a_path, [p["a"] for p in pairs], dict(np.load(f))) for f in files]
    vb = [_values(b_path, [p["b"] for p in pairs], dict(np.load(f))) for f in files]
    for p in pairs:
        a = [np.asarray(v[p["a"]], np.float64).reshape(-1) for v in va]
        b = [np.asarray(v[p["b"]], np.float64).reshape(-1) for v in vb]
        A, B = np.concatenate(a), np.concatenate(b)
        e = A - B
        assert p["sqnr_db"] == pytest.approx(10 * np.log10(np.sum(B * B) / np.sum(e * e)), abs=1e-4), p["a"]
        assert p["cosine"] == pytest.approx(np.dot(A, B) / np.linalg.norm(A) / np.linalg.norm(B), abs=1e-7)
        assert p["mean_abs"] == pytest.approx(np.abs(e).mean(), rel=1e-6)
        assert p["rmse"] == pytest.approx(np.sqrt(np.mean(e * e)), rel=1e-6)  # sums within about 1e-7 (README)
        assert p["max_abs"] == pytest.approx(np.abs(e).max(), rel=1e-6)
        rel = np.max(np.abs(e) / np.maximum(np.abs(B), 1e-45))  # float32's smallest subnormal: inf past its range
        assert (p["max_rel"] == "inf") if rel > np.finfo(np.float32).max else p["max_rel"] == pytest.approx(rel, rel=1e-6)
        worst = int(np.argmax([np.abs(x - y).max() for x, y in zip(a, b)]))
        assert p["worst_sample"] == files[worst].name
        per = sorted(10 * np.log10(np.sum(y * y) / np.sum((x - y) ** 2)) for x, y in zip(a, b))
        sp = p["sqnr_per_sample"]
        assert sp["min"] == pytest.approx(per[0], abs=1e-4)
        assert sp["median"] == pytest.approx(np.percentile(per, 50, method="inverted_cdf"), abs=1e-4)
        assert sp["p5"] == pytest.approx(np.percentile(per, 5, method="inverted_cdf"), abs=1e-4)
        assert sp["min_sample"] == files[int(np.argmin([np.sum(y * y) / np.sum((x - y) ** 2) for x, y in zip(a, b)]))].name


def _pairs(d):
    keep = ("a", "b", "max_abs", "mean_abs", "max_rel", "rmse", "cosine", "sqnr_db", "exact", "worst_index", "passed",
            "introduced_sqnr_db", "introduced_max_abs", "introduced_exact", "problem")
    return [{k: p[k] for k in keep} for p in d["pairs"]]


@pytest.mark.parametrize("extra", [[], ["--separate-runs"], ["--opt-level", "extended"]])
def test_one_sample_gives_the_single_input_numbers(tmp_path, extra):
    a_path = quantize("cnn", "qdq", tmp_path)
    one = _folder(tmp_path / "one", n=1)
    single = json.loads(_run("diff", a_path, sample_path("cnn"), "--inputs", one / "b00.npz", "--all", *extra,
                             "--json", "-").stdout)
    ds = json.loads(_run("diff", a_path, sample_path("cnn"), "--inputs-dir", one, "--all", *extra, "--json", "-").stdout)
    assert ds["samples"] == 1 and "samples" not in single
    assert _pairs(ds) == _pairs(single)
    assert any(p["introduced_sqnr_db"] is not None for p in ds["pairs"])
    assert (ds["verdict"], ds["first_failure"]) == (single["verdict"], single["first_failure"])


def test_one_sample_against_onnx_reference(tmp_path):
    one = _folder(tmp_path / "one", n=1)
    single = json.loads(_run("diff", sample_path("cnn"), "--vs-reference", "--inputs", one / "b00.npz", "--all",
                             "--json", "-").stdout)
    ds = json.loads(_run("diff", sample_path("cnn"), "--vs-reference", "--inputs-dir", one, "--all", "--json", "-").stdout)
    assert _pairs(ds) == _pairs(single)


def test_a_stacked_npz_and_a_pipeline_give_the_folders_numbers(tmp_path):
    a_path = quantize("cnn", "qdq", tmp_path)
    ds = _folder(tmp_path / "ds", n=4)
    arrays = [np.load(f)["image"] for f in sorted(ds.iterdir())]
    np.savez(tmp_path / "stacked.npz", image=np.stack(arrays))
    (tmp_path / "pipe.py").write_text(
        "import numpy as np, pathlib\n"
        f"def batches():\n    for f in sorted(pathlib.Path({str(ds)!r}).iterdir()):\n"
        "        yield {'image': np.load(f)['image']}\n")
    runs = [json.loads(_run("diff", a_path, sample_path("cnn"), *src, "--json", "-", code=(0, 1)).stdout)
            for src in (["--inputs-dir", ds], ["--inputs-dir", tmp_path / "stacked.npz"],
                        ["--inputs-from", f"{tmp_path / 'pipe.py'}:batches"])]
    assert runs[1]["sample_labels"] == [f"sample {i}" for i in range(4)]
    assert runs[2]["sample_labels"] == [f"item {i}" for i in range(4)]
    for r in runs[1:]:
        assert _pairs(r) == _pairs(runs[0])


def test_merged_shards_equal_the_whole_run_in_any_order(tmp_path):
    a_path = quantize("cnn", "qdq", tmp_path)
    whole = _folder(tmp_path / "all", n=6)
    files = sorted(whole.iterdir())
    shards = []
    for k, part in enumerate((files[:2], files[2:5], files[5:])):
        d = tmp_path / f"s{k}"
        d.mkdir()
        for f in part:
            (d / f.name).write_bytes(f.read_bytes())
        out = tmp_path / f"shard{k}.json"
        _run("diff", a_path, sample_path("cnn"), "--inputs-dir", d, "--all", "--json", out, code=(0, 1))
        shards.append(out)
    full = json.loads(_run("diff", a_path, sample_path("cnn"), "--inputs-dir", whole, "--all", "--json", "-", code=(0, 1)).stdout)
    m1, m2 = tmp_path / "m1.json", tmp_path / "m2.json"
    _run("merge-stats", *shards, "--json", m1, code=(0, 1))
    _run("merge-stats", *reversed(shards), "--json", m2, code=(0, 1))
    assert m1.read_bytes() == m2.read_bytes()
    merged = json.loads(m1.read_text())
    assert merged["samples"] == 6 and merged["verdict"] == full["verdict"]
    assert merged["sample_labels"][0] == "shard0.json:b00.npz"
    assert _pairs(merged) == _pairs(full)
    for p, q in zip(merged["pairs"], full["pairs"]):
        assert p["sqnr_per_sample"]["median"] == q["sqnr_per_sample"]["median"]
        assert p["worst_sample"].split(":")[1] == q["worst_sample"]
    # a merged report merges again, with another shard
    again = json.loads(_run("merge-stats", m1, "--json", "-", code=(0, 1)).stdout)
    assert _pairs(again) == _pairs(full)


def test_merge_refuses_other_models_and_tampered_sums(tmp_path):
    a_path = quantize("cnn", "qdq", tmp_path)
    ds = _folder(tmp_path / "ds", n=2)
    x, y = tmp_path / "x.json", tmp_path / "y.json"
    _run("diff", a_path, sample_path("cnn"), "--inputs-dir", ds, "--json", x, code=(0, 1))
    _run("diff", sample_path("cnn"), "--vs-reference", "--inputs-dir", ds, "--json", y, code=(0, 1))
    r = _run("merge-stats", x, y, code=(2,))
    assert "describes" in r.stderr
    d = json.loads(x.read_text())
    d["pairs"][0]["sums"]["dd"] = "lots"
    (tmp_path / "t.json").write_text(json.dumps(d))
    r = _run("merge-stats", x, tmp_path / "t.json", code=(2,))
    assert "malformed 'sums'" in r.stderr
    layers = tmp_path / "l.json"
    _run("layers", sample_path("cnn"), "--inputs-dir", ds, "--json", layers)
    r = _run("merge-stats", x, layers, code=(2,))
    assert "different commands" in r.stderr


def test_a_bad_sample_fails_the_run_naming_its_file(tmp_path):
    a_path = quantize("cnn", "qdq", tmp_path)
    ds = _folder(tmp_path / "ds", n=3)
    np.savez(ds / "b01.npz", image=np.zeros((1, 3, 16, 16), np.float32))
    r = _run("diff", a_path, sample_path("cnn"), "--inputs-dir", ds, code=(2,))
    assert "1 of 3 batches failed" in r.stderr and "b01.npz" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_the_verdict_is_the_pooled_one(tmp_path):
    """A criterion between the per-sample SQNRs: the pooled number decides, and the spread shows."""
    a_path = quantize("cnn", "qdq", tmp_path)
    ds = _folder(tmp_path / "ds", n=6)
    d = json.loads(_run("diff", a_path, sample_path("cnn"), "--inputs-dir", ds, "--json", "-", code=(0, 1)).stdout)
    out = next(p for p in d["pairs"] if p["is_output"])
    lo, pooled = out["sqnr_per_sample"]["min"], out["sqnr_db"]
    assert lo < pooled
    mid = (lo + pooled) / 2
    r = _run("diff", a_path, sample_path("cnn"), "--inputs-dir", ds, "--min-sqnr", mid, "--json", "-", code=(0,))
    assert json.loads(r.stdout)["verdict"] == "pass"
    r = _run("diff", a_path, sample_path("cnn"), "--inputs-dir", ds, "--min-sqnr", pooled + 0.01, "--json", "-", code=(1,))
    assert json.loads(r.stdout)["verdict"] == "fail"


def test_nonfinite_pairs_pool_on_the_host(tmp_path):
    """A NaN in some samples only: those samples' pair goes through the host's masked path, the others
    through the graph, and both pool (NaN positions are left out of the sums, counted as agreeing)."""
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Log", ["x"], ["y"], name="log"), helper.make_node("Relu", ["y"], ["z"], name="relu")],
                          "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(tmp_path / "m.onnx"))
    ds = tmp_path / "ds"
    ds.mkdir()
    xs = [np.array([1.0, 2.0, 3.0, 4.0], np.float32), np.array([-1.0, 2.0, 0.5, 4.0], np.float32)]
    for i, x in enumerate(xs):
        np.savez(ds / f"b{i}.npz", x=x)
    d = json.loads(_run("diff", tmp_path / "m.onnx", tmp_path / "m.onnx", "--inputs-dir", ds, "--all", "--json", "-").stdout)
    y = next(p for p in d["pairs"] if p["a"] == "y")
    assert y["exact"] and y["sums"]["count"] == 7 and y["nonfinite_mismatch"] == 0 and d["verdict"] == "pass"
    assert math.isclose(y["sums"]["bb"][0], float(np.sum(np.log(np.array([1, 2, 3, 4, 2, 0.5, 4], np.float64)) ** 2)),
                        rel_tol=1e-6)


def test_a_dataset_diff_measures_in_the_one_run_graph_and_says_so(tmp_path):
    """The dataset path goes through the same one-run diff as a single input (compare.fused): every float
    pair measured in the graph on every sample, none with --separate-runs; the pooled numbers agree."""
    a_path = quantize("cnn", "qdq", tmp_path)
    inp = onnx.load(str(sample_path("cnn"))).graph.input[0]
    shape = tuple(d.dim_value or 1 for d in inp.type.tensor_type.shape.dim)
    ds = _folder(tmp_path / "ds", inp.name, n=3, shape=shape)
    got = {}
    for mode in ("fused", "host"):
        out = tmp_path / f"{mode}.json"
        _run("diff", a_path, sample_path("cnn"), "--inputs-dir", ds, "--all", "--json", out,
             *(["--separate-runs"] if mode == "host" else []), code=(0, 1))
        got[mode] = json.loads(out.read_text())
    measured = [p for p in got["fused"]["pairs"] if p["sqnr_db"] is not None or p["exact"]]
    assert got["fused"]["in_graph"] == len(measured) > 0 and got["host"]["in_graph"] == 0
    for f, h in zip(got["fused"]["pairs"], got["host"]["pairs"]):
        assert (f["a"], f["b"]) == (h["a"], h["b"])
        if f["sqnr_db"] is not None and h["sqnr_db"] is not None:
            assert f["sqnr_db"] == pytest.approx(h["sqnr_db"], abs=1e-3), f["a"]


def test_samples_of_one_shape_infer_shapes_and_build_cones_once(tmp_path, monkeypatch):
    """The separate-runs path over 3 samples of one shape and one of another: shape inference once per
    shape, each set of cones built once (it was twice per sample)."""
    from onnxprobe import api
    from onnxprobe.compare import introduced, measure

    rng = np.random.default_rng(0)
    (tmp_path / "ds").mkdir()
    for i, batch in enumerate([2, 2, 2, 1]):
        np.savez(tmp_path / "ds" / f"b{i}.npz", x=rng.random((batch, 3, 8, 8), dtype=np.float32))
    sizes, cones = [], []
    real_sizes, real_cones = measure.concrete_sizes, introduced.build_cones
    monkeypatch.setattr(measure, "concrete_sizes", lambda m, shapes: sizes.append(dict(shapes)) or real_sizes(m, shapes))

    def counted(m, targets, known):
        cones.append(tuple(targets))
        return real_cones(m, targets, known)

    for module in (introduced, measure):
        monkeypatch.setattr(module, "build_cones", counted, raising=False)
    res = api.diff_dataset(sample_path("dynamic_batch"), sample_path("dynamic_batch"), tmp_path / "ds", fuse=False,
                           selection=api.Selection(all=True))
    assert res.samples == 4 and res.verdict()[0] == "pass"
    assert sizes == [{"x": (2, 3, 8, 8)}, {"x": (1, 3, 8, 8)}]
    assert cones and len(cones) == len(set(cones)), cones


def test_a_map_pair_whose_shapes_differ_in_one_shard_is_not_compared_once_merged(tmp_path):
    m = tmp_path / "m.onnx"
    onnx.save(transposing_model(), str(m))
    (tmp_path / "map.json").write_text(json.dumps({"r": "t"}))
    rng = np.random.default_rng(0)
    for shard, shapes in (("s1", [(512, 256)]), ("s2", [(256, 256), (128, 128)])):
        (tmp_path / shard).mkdir()
        for i, shape in enumerate(shapes):
            np.savez(tmp_path / shard / f"x{i}.npz", x=rng.random(shape, dtype=np.float32))
    # the first shard's sample has shapes that differ: not compared there, so not compared in the merge,
    # whose verdict is an error as that of one run over every sample is (the outputs pass everywhere)
    one = json.loads(_run("diff", m, m, "--map", tmp_path / "map.json", "--inputs-dir", tmp_path / "s1", "--json", "-",
                          code=(1,)).stdout)
    two = json.loads(_run("diff", m, m, "--map", tmp_path / "map.json", "--inputs-dir", tmp_path / "s2", "--json", "-",
                          code=(0,)).stdout)
    assert one["verdict"] == "error" and two["verdict"] == "pass"
    for d, path in ((one, "s1.json"), (two, "s2.json")):
        (tmp_path / path).write_text(json.dumps(d))
    merged = json.loads(_run("merge-stats", tmp_path / "s1.json", tmp_path / "s2.json", "--json", "-", code=(1,)).stdout)
    pair = next(p for p in merged["pairs"] if p["strategy"] == "map")
    assert pair["passed"] is None and pair["runtime_shapes"] == [[512, 256], [256, 512]], pair
    assert pair["problem"] == "s1.json:x0.npz: shapes differ at run time: [512, 256] vs [256, 512]"
    assert merged["verdict"] == "error" and "given in --map could not be compared" in merged["verdict_reason"]
    assert all(p["passed"] is True for p in merged["pairs"] if p["is_output"])


def test_the_sample_where_nan_appears_on_one_side_is_named_and_survives_a_merge(tmp_path):
    """A = Log(x), B = Log(|x|): NaN in A only where x < 0, which happens in b2 and b4 alone. The pair fails,
    and the report names b2, the first such sample (the per-sample SQNR, over finite pairs, read 'exact'
    and the worst |a-b| pointed at another sample); merged shards name it too."""
    from onnx import TensorProto, helper

    def model(path, ops):
        nodes = [helper.make_node(op, [i], [o], name=o) for op, i, o in ops]
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.save(m, str(path))
        return path

    a = model(tmp_path / "a.onnx", [("Identity", "x", "t"), ("Log", "t", "y")])
    b = model(tmp_path / "b.onnx", [("Abs", "x", "t"), ("Log", "t", "y")])
    ds = tmp_path / "ds"
    ds.mkdir()
    for i in range(6):
        x = np.array([1.0, 2.0, 3.0 + i, 4.0], np.float32)
        if i in (2, 4):
            x[1] = -2.0
        np.savez(ds / f"b{i}.npz", x=x)
    r = _run("diff", a, b, "--inputs-dir", ds, "--json", tmp_path / "d.json", code=(1,))
    y = next(p for p in json.loads((tmp_path / "d.json").read_text())["pairs"] if p["a"] == "y")
    assert y["passed"] is False and y["nonfinite_mismatch"] == 2 and y["nonfinite_sample"] == "b2.npz", y
    assert "NaN/Inf on one side only, or a different one on each: first in b2.npz" in " ".join(r.stdout.split()), r.stdout
    shards = []
    for k, names in enumerate((["b3", "b4", "b5"], ["b0", "b1", "b2"])):  # the later samples first
        part = tmp_path / f"p{k}"
        part.mkdir()
        for n in names:
            (part / f"{n}.npz").write_bytes((ds / f"{n}.npz").read_bytes())
        shards.append(tmp_path / f"s{k}.json")
        _run("diff", a, b, "--inputs-dir", part, "--json", shards[-1], code=(1,))
    merged = json.loads(_run("merge-stats", *shards, "--json", "-", code=(1,)).stdout)
    y = next(p for p in merged["pairs"] if p["a"] == "y")
    assert y["nonfinite_mismatch"] == 2 and y["nonfinite_sample"] == "s0.json:b4.npz", y  # shards laid end to end, as given


def test_merge_refuses_bare_nan_in_a_diff_shards_sums(tmp_path):
    """A diff shard whose exact sums hold a bare NaN (onnxprobe writes none) is refused: merged, the NaN
    was dropped and every pair read SQNR inf, "outputs pass", where the shards failed."""
    a_path = quantize("cnn", "qdq", tmp_path)
    shards = []
    for k in range(2):
        out = tmp_path / f"shard{k}.json"
        _run("diff", a_path, sample_path("cnn"), "--inputs-dir", _folder(tmp_path / f"s{k}", n=2, seed=k), "--json", out,
             code=(0, 1))
        shards.append(out)
    d = json.loads(shards[0].read_text())
    for p in d["pairs"]:
        if p.get("sums"):
            p["sums"]["dd"] = [float("nan")]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(d))
    r = runner.invoke(app, ["merge-stats", str(bad), str(shards[1])])
    assert r.exit_code == 2 and "malformed 'sums'" in r.stderr and "NaN" in r.stderr, r.output


def test_judged_metric_columns_in_dataset_and_merged_reports(tmp_path):
    """--columns mean_abs (rmse, max_rel) works in a dataset diff and in merge-stats of diff reports, as
    in a one-input diff (both refused it: "no column 'mean_abs'"); the cells are the pooled values the
    JSON holds."""
    ds = _folder(tmp_path / "ds", n=2)
    out = tmp_path / "d.json"
    r = _run("diff", sample_path("cnn"), "--vs-opt-level", "all", "--inputs-dir", ds, "--columns", "tensor,mean_abs,rmse",
             "--json", out, code=(0, 1))
    d = json.loads(out.read_text())
    rows = {ln.split()[0]: ln.split()[1:] for ln in r.stdout.splitlines() if ln.split() and ln.split()[0] in {p["a"] for p in d["pairs"]}}
    for p in d["pairs"]:
        assert float(rows[p["a"]][0]) == pytest.approx(p["mean_abs"], rel=1e-2, abs=1e-12), (rows, p)
    r = _run("merge-stats", out, "--columns", "tensor,max_rel", code=(0, 1))
    assert "max rel" in r.stdout


def test_merging_diff_shards_that_share_samples_says_so(tmp_path):
    """Two diff shards over overlapping files of one dataset: the merge notes the shared samples."""
    import shutil

    a_path = quantize("cnn", "qdq", tmp_path)
    ds = _folder(tmp_path / "ds", n=4)
    (tmp_path / "p").mkdir()
    (tmp_path / "q").mkdir()
    for k, f in enumerate(sorted(ds.iterdir())):
        for into in (["p"] if k < 2 else ["q"]) + (["p"] if k == 2 else []):
            shutil.copy(f, tmp_path / into / f.name)
    x, y = tmp_path / "x.json", tmp_path / "y.json"
    _run("diff", a_path, sample_path("cnn"), "--inputs-dir", tmp_path / "p", "--json", x, code=(0, 1))
    _run("diff", a_path, sample_path("cnn"), "--inputs-dir", tmp_path / "q", "--json", y, code=(0, 1))
    d = json.loads(_run("merge-stats", x, y, "--json", "-", code=(0, 1)).stdout)
    assert d["samples"] == 5 and len(d["sample_digests"]) == 5
    (note,) = [n for n in d["notes"] if "same input values" in n]
    assert note.startswith("2 of the 5 samples"), note


@pytest.mark.parametrize("fuse", [True, False], ids=["one-run", "separate-runs"])
@pytest.mark.parametrize("empty_first", [True, False])
def test_an_empty_sample_among_others_names_no_worst_element_and_pools(tmp_path, fuse, empty_first):
    """A sample with a 0 dim first ended the run with 'internal error: index 0 is out of bounds' (QA): an
    empty sample ties at max |a-b| 0 and named its (absent) element the worst. The oracle: numpy float64
    over the one sample that holds values."""
    from onnx import TensorProto, helper, numpy_helper

    from conftest import make_model
    from onnxprobe import api

    def model(path, c):
        # y's node adds no error of its own: its introduced error is 0 in both samples (the tie)
        m = make_model([helper.make_node("Add", ["x", "c"], ["s"], name="add"), helper.make_node("Identity", ["s"], ["y"], name="id")],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 2])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 2])],
                       [numpy_helper.from_array(np.array([c], np.float32), "c")])
        onnx.save(m, str(path))
        return str(path)

    a, b = model(tmp_path / "a.onnx", 1e-3), model(tmp_path / "b.onnx", 0.0)
    (tmp_path / "ds").mkdir()
    x = np.array([[1.0, -2.0], [3.0, 4.0]], np.float32)
    names = ["s0.npz", "s1.npz"] if empty_first else ["s1.npz", "s0.npz"]
    np.savez(tmp_path / "ds" / names[0], x=np.zeros((0, 2), np.float32))
    np.savez(tmp_path / "ds" / names[1], x=x)
    res = api.diff_dataset(a, b, tmp_path / "ds", fuse=fuse, config=api.RunConfig(device="cpu", cache=False))
    (r,) = [r for r in res.results if r.pair.a.name == "y"]
    ya, yb = (x + np.float32(1e-3)).astype(np.float64), x.astype(np.float64)
    assert r.metrics.max_abs == pytest.approx(np.abs(ya - yb).max(), rel=1e-6)
    assert r.metrics.sqnr_db == pytest.approx(10 * np.log10((yb ** 2).sum() / ((ya - yb) ** 2).sum()), abs=1e-3)
    assert len(r.metrics.worst) == 2


def test_a_mode_of_one_input_is_refused_for_itself_not_for_model_b(tmp_path):
    """diff A B --grad (or --fp32-sensitivity) --inputs-dir: the refusal listed the references a dataset diff takes,
    'a model B' first, which read as though B were what was refused. A reference of one input keeps the list."""
    import numpy as np
    from typer.testing import CliRunner

    from conftest import sample_path
    from onnxprobe.cli.main import app

    ds = tmp_path / "ds"
    ds.mkdir()
    np.savez(ds / "b0.npz", image=np.zeros((1, 3, 32, 32), np.float32))
    m = str(sample_path("cnn"))
    for flags, listed in ((["--grad"], False), (["--fp32-sensitivity", "2"], False), (["--vs-npz", str(ds / "b0.npz")], True)):
        r = CliRunner().invoke(app, ["diff", m, *([] if listed else [m]), *flags, "--inputs-dir", str(ds)])
        assert r.exit_code == 2 and "compares on one input: not with --inputs-dir" in r.stderr, r.output
        assert ("a model B" in r.stderr) == listed, r.stderr
