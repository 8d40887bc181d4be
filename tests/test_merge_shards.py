"""merge-stats and shards that hold the same samples: refused on the samples' digests (a rerun with the
model at another path or on another executor, a shard beside a merge of merges that holds it), never on
file names (shards of one name from different folders, pipes, merged in stages); damaged counts refused.
Counts are checked against onnx.reference's tensors."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]


def _batch(i: int) -> dict:
    return {"image": np.random.default_rng(300 + i).normal(0.5, 0.3, (1, 3, 32, 32)).astype(np.float32)}


def _folder(path: Path, indices) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for i in indices:
        np.savez(path / f"b{i:03d}.npz", **_batch(i))
    return path


def _run(*args, code=(0,)):
    r = runner.invoke(app, [str(a) for a in args])
    assert r.exit_code in code, r.output
    return r


def _refused(*args) -> str:
    r = runner.invoke(app, ["merge-stats", *map(str, args)])
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.output, r.output
    return r.stderr


def _counts(indices) -> dict[str, int]:
    """Elements per tensor over these batches, from the reference evaluator."""
    ref = ReferenceEvaluator(onnx.load(str(sample_path("cnn"))))
    out: dict[str, int] = {}
    for i in indices:
        for name, v in ref.run(None, _batch(i), intermediate=True).items():
            out[name] = out.get(name, 0) + int(np.asarray(v).size)
    return out


def test_a_rerun_with_the_model_elsewhere_or_on_another_executor_is_refused(tmp_path):
    """The duplicate test compared the whole JSON: a rerun over the same samples with a copy of the model
    (another 'model' path) or on Ray (another 'executor') merged, its samples counted twice."""
    copy = tmp_path / "m" / "cnn_copy.onnx"
    copy.parent.mkdir()
    shutil.copy(sample_path("cnn"), copy)
    a, again = tmp_path / "a.json", tmp_path / "again.json"
    _run("layers", sample_path("cnn"), "--inputs-dir", _folder(tmp_path / "a", range(3)), "--json", a)
    _run("layers", copy, "--inputs-dir", tmp_path / "a", "--json", again)
    assert "holds the same samples as" in _refused(a, again)
    ray = tmp_path / "ray.json"  # what a Ray run writes differently: its executor
    ray.write_text(json.dumps({**json.loads(a.read_text()), "executor": {"engine": "ray", "workers": 1}}))
    assert "holds the same samples as" in _refused(a, ray)


def test_a_shard_beside_a_merge_of_merges_that_holds_it_is_refused(tmp_path):
    """merged_from named the direct inputs only: a shard given beside a merge of merges that holds it
    merged (15 batches of 9 samples). A merged report carries all its samples' digests."""
    paths = {}
    for k, idx in {"a": range(0, 3), "b": range(3, 6), "c": range(6, 8)}.items():
        paths[k] = tmp_path / f"{k}.json"
        _run("layers", sample_path("cnn"), "--inputs-dir", _folder(tmp_path / k, idx), "--json", paths[k])
    ab, abc = tmp_path / "ab.json", tmp_path / "abc.json"
    _run("merge-stats", paths["a"], paths["b"], "--json", ab)
    _run("merge-stats", ab, paths["c"], "--json", abc)
    assert len(json.loads(abc.read_text())["sample_digests"]) == 8
    for args in ((abc, paths["a"]), (paths["b"], abc), (abc, ab)):
        assert "every sample of" in _refused(*args)
    # a shard that shares only some samples with the others (overlapping ranges): merged, with a note
    d = tmp_path / "d.json"
    _run("layers", sample_path("cnn"), "--inputs-dir", _folder(tmp_path / "d", (7, 8)), "--json", d)
    merged = json.loads(_run("merge-stats", abc, d, "--json", "-").stdout)
    assert merged["batches"] == 10 and [n for n in merged["notes"] if "same input values" in n]


def test_shards_of_one_file_name_merge_in_stages(tmp_path):
    """Workers that each write r.json in their own folder: d1/r.json + d2/r.json merged, then with
    d3/r.json, was refused ('both hold the statistics of r.json'): merged_from holds file names."""
    shards = []
    for k, idx in enumerate((range(0, 2), range(2, 4), range(4, 5))):
        out = tmp_path / f"d{k}" / "r.json"
        out.parent.mkdir()
        _run("layers", sample_path("cnn"), "--inputs-dir", _folder(tmp_path / f"s{k}", idx), "--json", out)
        shards.append(out)
    d01 = tmp_path / "d01.json"
    _run("merge-stats", shards[0], shards[1], "--json", d01)
    merged = json.loads(_run("merge-stats", d01, shards[2], "--json", "-").stdout)
    want = _counts(range(5))
    assert merged["batches"] == 5
    got = {t["name"]: t["count"] for t in merged["tensors"]}
    assert got and got == {name: want[name] for name in got}


def test_pipes_merge_in_stages(tmp_path):
    """`merge-stats <(cat a.json) <(cat b.json)` names its shards 62 and 63; the merge of it with another
    pipe was refused ('both hold the statistics of 63')."""
    if not shutil.which("bash") or not os.path.isdir("/dev/fd"):
        pytest.skip("needs bash process substitution")
    for k, idx in {"a": range(0, 2), "b": range(2, 3), "c": range(3, 5)}.items():
        _run("layers", sample_path("cnn"), "--inputs-dir", _folder(tmp_path / k, idx), "--json", tmp_path / f"{k}.json")
    cmd = f"{shlex.quote(sys.executable)} -m onnxprobe merge-stats"  # a venv in a checkout whose path has spaces
    script = f"{cmd} <(cat a.json) <(cat b.json) --json p.json && {cmd} p.json <(cat c.json) --json all.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    r = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    merged = json.loads((tmp_path / "all.json").read_text())
    want = _counts(range(5))
    assert merged["batches"] == 5 and len(merged["sample_digests"]) == 5
    got = {t["name"]: t["count"] for t in merged["tensors"]}
    assert got and got == {name: want[name] for name in got}


def test_a_shard_that_does_not_list_its_samples_is_compared_on_its_statistics(tmp_path):
    """A copy without sample_digests (an older report) beside the shard: the statistics are the same."""
    a, old = tmp_path / "a.json", tmp_path / "old.json"
    _run("layers", sample_path("cnn"), "--inputs-dir", _folder(tmp_path / "a", range(2)), "--json", a)
    d = json.loads(a.read_text())
    d.pop("sample_digests")
    old.write_text(json.dumps({**d, "executor": {"engine": "ray", "workers": 2}}))
    assert "holds the same statistics as" in _refused(a, old)


def test_a_shard_rewritten_by_jq_is_compared_on_its_values_not_their_text(tmp_path):
    """jq writes 0.0 as 0: a copy of a shard rewritten by it, without its digests, beside the shard merged (its samples
    counted twice), the statistics compared as text."""
    a, old = tmp_path / "a.json", tmp_path / "old.json"
    _run("layers", sample_path("cnn"), "--inputs-dir", _folder(tmp_path / "a", range(2)), "--json", a)
    text = a.read_text()
    assert ": 0.0" in text  # a statistic that is a whole number (zero_fraction 0.0 of the Conv outputs...)
    d = json.loads(text.replace(": 0.0,", ": 0,"))
    d["sample_digests"] = []  # emptied: says nothing of the samples (as none at all)
    old.write_text(json.dumps(d))
    assert "holds the same statistics as" in _refused(a, old)


@pytest.mark.parametrize("unsaid", ["[]", "absent"])
def test_a_merge_with_a_shard_that_does_not_list_its_samples_keeps_one_entry_a_batch(tmp_path, unsaid):
    """A shard whose sample_digests is [] beside its batches merged into a report of 3 batches and 2 digests, which
    merge-stats then refused as damaged; the merged report says null for the samples it does not know, and a shard
    whose samples it holds is refused beside it (it merged, those samples counted twice)."""
    a, b, m = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "m.json"
    _run("layers", sample_path("cnn"), "--inputs-dir", _folder(tmp_path / "a", range(2)), "--json", a)
    _run("layers", sample_path("cnn"), "--inputs-dir", _folder(tmp_path / "b", range(2, 3)), "--json", b)
    d = json.loads(b.read_text())
    if unsaid == "[]":
        d["sample_digests"] = []
    else:
        d.pop("sample_digests")
    b.write_text(json.dumps(d))
    _run("merge-stats", a, b, "--json", m)
    merged = json.loads(m.read_text())
    digests = json.loads(a.read_text())["sample_digests"]
    assert merged["batches"] == 3 and merged["sample_digests"] == digests + [None], merged["sample_digests"]
    assert "every sample of" in _refused(m, a)
    c = tmp_path / "c.json"  # another shard beside the merged one: merged, every batch counted once
    _run("layers", sample_path("cnn"), "--inputs-dir", _folder(tmp_path / "c", range(3, 4)), "--json", c)
    again = json.loads(_run("merge-stats", m, c, "--json", "-").stdout)
    assert again["batches"] == 4 and len(again["sample_digests"]) == 4
    want = _counts(range(4))
    got = {t["name"]: t["count"] for t in again["tensors"]}
    assert got and got == {name: want[name] for name in got}


def test_diff_shards_are_told_apart_by_their_samples_too(tmp_path):
    """The same for dataset diff reports: a rerun with the model elsewhere is refused; shards of one file
    name merge in stages."""
    copy = tmp_path / "m" / "cnn.onnx"
    copy.parent.mkdir()
    shutil.copy(sample_path("cnn"), copy)
    shards = []
    for k, idx in enumerate((range(0, 2), range(2, 3), range(3, 5))):
        out = tmp_path / f"d{k}" / "r.json"
        out.parent.mkdir()
        _run("diff", sample_path("cnn"), "--vs-reference", "--inputs-dir", _folder(tmp_path / f"s{k}", idx), "--json", out,
             code=(0, 1))
        shards.append(out)
    again = tmp_path / "again.json"
    _run("diff", copy, "--vs-reference", "--inputs-dir", tmp_path / "s0", "--json", again, code=(0, 1))
    assert "holds the same samples as" in _refused(shards[0], again)
    d01 = tmp_path / "d01.json"
    _run("merge-stats", shards[0], shards[1], "--json", d01, code=(0, 1))
    merged = json.loads(_run("merge-stats", d01, shards[2], "--json", "-", code=(0, 1)).stdout)
    assert merged["samples"] == 5 and len(merged["sample_digests"]) == 5
    assert "every sample of" in _refused(d01, shards[1])


@pytest.mark.parametrize("field, value", [("nan", 10**9), ("inf", "count+1"), ("zeros", "count+1"), ("nan", "count-1")])
def test_counts_that_do_not_add_up_are_a_damaged_report(tmp_path, field, value):
    """nan = 10**9 in a tensor of 24576 values merged: nan 1000000000, mean 0.0, std -0.0. Every count
    is within the count, and zeros within the finite values."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    _run("layers", sample_path("cnn"), "--inputs-dir", _folder(tmp_path / "a", range(1)), "--json", a)
    _run("layers", sample_path("cnn"), "--inputs-dir", _folder(tmp_path / "b", range(1, 2)), "--json", b)
    d = json.loads(b.read_text())
    m = d["tensors"][0]["moments"]
    n = m["count"]
    m[field] = value if isinstance(value, int) else {"count+1": n + 1, "count-1": n - 1}[value]
    if field == "nan" and value == "count-1":
        m["zeros"] = 2  # n - 1 NaN leave one finite value: two zeros is one too many
    b.write_text(json.dumps(d))
    assert "malformed moments" in _refused(a, b)


def _edit(path: Path, edit) -> None:
    d = json.loads(path.read_text())
    edit(d)
    path.write_text(json.dumps(d))


@pytest.mark.parametrize("what, edit", [
    ("malformed moments", lambda d: d["tensors"][0]["moments"].update(sumsq=[])),
    ("malformed moments", lambda d: d["tensors"][0]["moments"].update(sumsq=[-5.0])),
    ("malformed moments", lambda d: d["tensors"][0]["moments"].update(sum=[])),
    ("malformed moments", lambda d: d["tensors"][0]["moments"].update(sumabs=[])),
    ("damaged report", lambda d: d["tensors"][0]["moments"].update(count=1)),
    ("damaged report", lambda d: d.update(batches=0)),
    ("damaged report", lambda d: d.update(sample_digests=["x"])),
])
def test_damaged_moments_batches_and_digests_are_refused(tmp_path, what, edit):
    """Σx² emptied or negative, Σx or Σ|x| emptied, a count of 1 beside a histogram of 16384 values,
    0 batches, one digest for two batches: merged into wrong statistics, exit 0. A sum of squares or
    magnitudes of values not all zero is positive, the histogram bins every finite value, one digest a batch."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    _run("layers", sample_path("cnn"), "--inputs-dir", _folder(tmp_path / "a", range(2)), "--json", a)
    _run("layers", sample_path("cnn"), "--inputs-dir", _folder(tmp_path / "b", range(2, 4)), "--json", b)
    _edit(b, edit)
    assert what in _refused(a, b)


def _diff_shards(tmp_path) -> list:
    """Two genuine `diff --vs-reference --inputs-dir` shards of the cnn sample, of samples 0-1 and 2-3."""
    shards = []
    for k, idx in enumerate((range(0, 2), range(2, 4))):
        out = tmp_path / f"d{k}.json"
        _run("diff", sample_path("cnn"), "--vs-reference", "--inputs-dir", _folder(tmp_path / f"s{k}", idx), "--json", out,
             code=(0, 1))
        shards.append(out)
    return shards


def test_damaged_diff_shards_are_refused(tmp_path):
    """The same for diff shards: a negative Σ(a-b)², a zero one beside a positive max |a-b|, digests
    that are not one a sample."""
    shards = _diff_shards(tmp_path)
    for edit, what in ((lambda d: d["pairs"][0]["sums"].update(dd=[-5.0]), "malformed 'sums'"),
                       (lambda d: d["pairs"][0]["sums"].update(dd=[], sum_abs=[], max_abs=0.5), "malformed 'sums'"),
                       (lambda d: d.update(sample_digests=["x"]), "damaged report")):
        bad = tmp_path / "bad.json"
        shutil.copy(shards[1], bad)
        _edit(bad, edit)
        assert what in _refused(shards[0], bad)


def test_a_zero_sum_of_values_of_both_signs_merges():
    """An exact Σx = 0 of -1 and 1 is written [0.0] (an empty list is refused as damaged) and read back."""
    from onnxprobe.stats.moments import Moments
    from onnxprobe.stats.tensor_stats import TensorStats

    m = Moments.from_stats(TensorStats.from_array(np.array([-1.0, 1.0, 3.0, -3.0])))
    back = Moments.from_dict(json.loads(json.dumps(m.to_dict())))
    st = back.stats()
    assert st.count == 4 and st.mean == 0 and st.std == pytest.approx(np.std([-1.0, 1.0, 3.0, -3.0]))


def test_pipes_are_named_by_their_place_not_their_descriptor(tmp_path):
    """`merge-stats <(cat d0.json) <(cat d1.json)` labelled samples '63:b000.npz' and merged_from ['62', '63']:
    the shell's descriptor numbers. Pipes are 'shard 1', 'shard 2' by their place among the arguments; the
    labels after the colon are each shard's own (read from its JSON here)."""
    if not shutil.which("bash") or not os.path.isdir("/dev/fd"):
        pytest.skip("needs bash process substitution")
    for k, idx in {"d0": range(0, 2), "d1": range(2, 3)}.items():
        _run("diff", sample_path("cnn"), sample_path("cnn"), "--inputs-dir", _folder(tmp_path / k, idx),
             "--json", tmp_path / f"{k}.json")
    _run("layers", sample_path("cnn"), "--inputs-dir", tmp_path / "d0", "--json", tmp_path / "l0.json")
    _run("layers", sample_path("cnn"), "--inputs-dir", tmp_path / "d1", "--json", tmp_path / "l1.json")
    cmd = f"{shlex.quote(sys.executable)} -m onnxprobe merge-stats"  # a venv in a checkout whose path has spaces
    script = (f"{cmd} <(cat d0.json) <(cat d1.json) --json d.json && {cmd} l0.json <(cat l1.json) --json l.json")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    r = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    d = json.loads((tmp_path / "d.json").read_text())
    own = [json.loads((tmp_path / f"d{k}.json").read_text())["sample_labels"] for k in (0, 1)]
    assert d["merged_from"] == ["shard 1", "shard 2"]
    assert d["sample_labels"] == [f"shard {k + 1}:{x}" for k in (0, 1) for x in own[k]]
    assert json.loads((tmp_path / "l.json").read_text())["merged_from"] == ["l0.json", "shard 2"]


@pytest.mark.parametrize("how", ["pipe", "file"])
def test_a_dash_reads_one_report_from_standard_input(tmp_path, how):
    """`cat b.json | merge-stats a.json -` said '-: no such report file' (`--script -`, `--json -` take it)."""
    for k, idx in {"a": range(0, 2), "b": range(2, 3)}.items():
        _run("layers", sample_path("cnn"), "--inputs-dir", _folder(tmp_path / k, idx), "--json", tmp_path / f"{k}.json")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    cmd = [sys.executable, "-m", "onnxprobe", "merge-stats", "a.json", "-", "--json", "m.json"]
    with open(tmp_path / "b.json", "rb") as f:
        r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, timeout=300,
                           **({"input": f.read()} if how == "pipe" else {"stdin": f}))
    assert r.returncode == 0, r.stderr
    merged = json.loads((tmp_path / "m.json").read_text())
    want = _counts(range(3))
    assert merged["batches"] == 3 and {t["name"]: t["count"] for t in merged["tensors"]} == {
        t["name"]: want[t["name"]] for t in merged["tensors"]}
    r = subprocess.run(cmd[:4] + ["-", "-"], cwd=tmp_path, env=env, capture_output=True, text=True, input="", timeout=300)
    assert r.returncode == 2 and "'-' given twice" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_shards_of_other_b_models_are_told_apart_in_the_refusal():
    """A diff report's model_id is A's digest + B's: the refusal shows each model's digest shortened, never
    the same 12 characters of A's for both shards."""
    from onnxprobe.errors import UsageError
    from onnxprobe.stats.merge import check_identity

    a, b, c = "0" * 64, "1" * 64, "2" * 64
    reports = [{"_path": "x.json", "model_id": f"{a}+{b}"}, {"_path": "y.json", "model_id": f"{a}+{c}"}]
    with pytest.raises(UsageError) as e:
        check_identity(reports, ("model_id",))
    said = str(e.value)
    assert "1111" in said and "2222" in said, said


@pytest.mark.parametrize("first, second", [(["--op", "Relu", "--op", "Conv"], ["--op", "Conv,Relu"]),
                                           (["--name", "*pool*", "--name", "*fc*"], ["--name", "*fc*", "--name", "*pool*"])])
def test_shards_of_one_selection_given_in_another_order_merge(tmp_path, first, second):
    """`--op Relu --op Conv` on one worker and `--op Conv,Relu` on another select the same tensors (a union
    of matches; --name globs alike): their shards merge, where 'another selection of tensors' refused them."""
    shards = []
    for k, flags in enumerate((first, second)):
        ds = tmp_path / f"ds{k}"
        ds.mkdir()
        np.savez(ds / "b.npz", **_batch(k))
        shards.append(tmp_path / f"s{k}.json")
        r = runner.invoke(app, ["layers", str(sample_path("cnn")), *flags, "--inputs-dir", str(ds), "--json", str(shards[-1])])
        assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["merge-stats", *map(str, shards), "--json", str(tmp_path / "m.json")])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "m.json").read_text())["batches"] == 2


def test_a_shard_of_empty_batches_beside_one_with_an_empty_batch_merges(tmp_path):
    """A worker whose share of the dataset was an empty batch (0 samples) holds no value that could count
    twice: its batch's digest (names, dtypes, shapes; no bytes) is any empty batch's, so it was refused as
    'every sample ... is also in' a shard that also held an empty batch. It merges; the pooled statistics
    are those of the other shard's values (numpy float64 over onnx.reference's tensors)."""
    rng = np.random.default_rng(7)
    full = [rng.standard_normal((n, 3, 8, 8)).astype(np.float32) for n in (2, 3)]
    empty = np.zeros((0, 3, 8, 8), np.float32)
    w0, w1 = tmp_path / "w0", tmp_path / "w1"
    w0.mkdir(), w1.mkdir()
    for i, x in enumerate(full + [empty]):
        np.savez(w0 / f"b{i}.npz", x=x)
    np.savez(w1 / "b9.npz", x=empty)
    model = sample_path("dynamic_batch")
    for w in (w0, w1):
        _run("layers", model, "--inputs-dir", w, "--json", tmp_path / f"{w.name}.json")
    _run("merge-stats", tmp_path / "w0.json", tmp_path / "w1.json", "--json", tmp_path / "m.json")
    merged = json.loads((tmp_path / "m.json").read_text())
    ev = ReferenceEvaluator(onnx.load(model))
    got = [ev.run(None, {"x": x}, intermediate=True) for x in full]
    assert merged["batches"] == 4
    for t in merged["tensors"]:
        v = np.concatenate([np.asarray(g[t["name"]], np.float64).ravel() for g in got])
        assert t["count"] == v.size
        assert t["mean"] == pytest.approx(v.mean(), rel=1e-5, abs=1e-6 * np.abs(v).max())
        assert t["std"] == pytest.approx(v.std(), rel=1e-6)  # within about 1e-7 of numpy float64 (README)
        assert (t["min"], t["max"]) == pytest.approx((v.min(), v.max()), rel=1e-6)
    shutil.copy(tmp_path / "w1.json", tmp_path / "w1copy.json")  # the same empty shard twice: its batches would count twice
    assert "same samples" in _refused(tmp_path / "w1.json", tmp_path / "w1copy.json")


def test_a_diff_shard_of_empty_batches_beside_one_with_an_empty_batch_merges(tmp_path):
    """As for layers: a `diff --inputs-dir` shard whose only sample is an empty batch compares no value; it
    was refused beside a shard that also held an empty batch (their digests are the same)."""
    from onnx import numpy_helper

    m = onnx.load(sample_path("dynamic_batch"))
    for t in m.graph.initializer:
        a = numpy_helper.to_array(t)
        if a.dtype == np.float32:
            t.CopyFrom(numpy_helper.from_array(a * np.float32(1.001), t.name))
    other = tmp_path / "b.onnx"
    onnx.save(m, other)
    w0, w1 = tmp_path / "w0", tmp_path / "w1"
    w0.mkdir(), w1.mkdir()
    np.savez(w0 / "b0.npz", x=np.random.default_rng(8).standard_normal((2, 3, 8, 8)).astype(np.float32))
    for w in (w0, w1):
        np.savez(w / "e.npz", x=np.zeros((0, 3, 8, 8), np.float32))
        _run("diff", sample_path("dynamic_batch"), other, "--inputs-dir", w, "--json", tmp_path / f"{w.name}.json", code=(0, 1))
    r = _run("merge-stats", tmp_path / "w0.json", tmp_path / "w1.json", "--json", tmp_path / "m.json", code=(0, 1))
    assert "Traceback" not in r.output and "count twice" not in r.output, r.output
    merged = json.loads((tmp_path / "m.json").read_text())
    assert merged["samples"] == 3 and merged["pairs"][0]["count"] == json.loads((tmp_path / "w0.json").read_text())["pairs"][0]["count"]


@pytest.mark.parametrize("edit", [
    lambda s: s.update(count=0),                                   # sums of no pair: mean |a-b| doubled
    lambda s: s.update(count=10**30),                              # more pairs than positions: mean |a-b| ~0
    lambda s: s.update(mismatch=10**6),                            # more NaN/Inf mismatches than positions
    lambda s: s.update(sum_abs=[s["sum_abs"][0] * 1e9]),          # mean |a-b| above max |a-b|
    lambda s: s.update(dd=[s["dd"][0] * 1e9]),                     # rmse above max |a-b|
    lambda s: s.update(ab=[-1e9]),                                 # |Σab| above sqrt(Σa²Σb²): cosine -1 at 91 dB
    lambda s: s.update(ab=[-v for v in s["ab"]]),                  # Σ(a-b)² is not Σa² - 2Σab + Σb²
], ids=["count-0", "count-past-positions", "mismatch-past-positions", "mean-abs-past-max", "rmse-past-max",
        "ab-past-cauchy-schwarz", "ab-not-dd"])
def test_diff_sums_no_pairs_have_are_refused(tmp_path, edit):
    """A diff shard's sums edited so that no element pairs have them (sums beside a count of 0, more pairs
    or mismatches than element positions, Σ|a-b| above count·max|a-b|, Σ(a-b)² above count·max|a-b|², |Σab| above
    sqrt(Σa²Σb²), Σ(a-b)² far from Σa² - 2Σab + Σb²) merged into a pooled mean |a-b|, rmse or NaN/Inf count that no data has, exit by verdict only."""
    shards = _diff_shards(tmp_path)

    def change(d):
        p = max(d["pairs"], key=lambda p: (p["sums"] or {}).get("count", 0) and p["max_abs"])  # a pair that differs
        edit(p["sums"])

    _edit(shards[1], change)
    err = _refused(*shards)
    assert "d1.json" in err and "malformed 'sums'" in err, err


def test_merge_stats_never_writes_over_the_model_the_shards_describe(tmp_path):
    """`merge-stats --json MODEL` overwrote the model file the shards were made of (`layers --json MODEL` refuses
    it): the model a report names is an input as the reports are, as the shards named it or from their folder. Run
    in a process of its own: this one's `layers` runs protect the model already."""
    model = tmp_path / "m.onnx"
    shutil.copy(sample_path("cnn"), model)
    before = model.read_bytes()
    for k, idx in enumerate(((0, 1), (2,))):
        _run("layers", model, "--inputs-dir", _folder(tmp_path / f"d{k}", idx), "--json", tmp_path / f"s{k}.json")

    def merge() -> str:
        r = subprocess.run([sys.executable, "-m", "onnxprobe", "merge-stats", str(tmp_path / "s0.json"),
                            str(tmp_path / "s1.json"), "--json", str(model)], capture_output=True, text=True,
                           cwd=str(tmp_path / "d0"), env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        return r.stderr

    assert "is a model the reports describe; refusing to overwrite it" in merge()
    assert model.read_bytes() == before
    # named relative to the reports' folder (written from there), merged from another folder
    for k in (0, 1):
        d = json.loads((tmp_path / f"s{k}.json").read_text())
        d["model"] = "m.onnx"
        (tmp_path / f"s{k}.json").write_text(json.dumps(d))
    assert "refusing to overwrite it" in merge() and model.read_bytes() == before


def test_merge_stats_never_writes_over_the_external_data_of_the_model(tmp_path):
    """The model's weights file (`external_data.onnx.data`) was written over by `merge-stats --json`, which
    `layers --json` refuses: the external data of a model the reports name is protected as the model is."""
    for f in ("external_data.onnx", "external_data.onnx.data"):
        shutil.copy(ROOT / "sample_models" / f, tmp_path / f)
    model, data = tmp_path / "external_data.onnx", tmp_path / "external_data.onnx.data"
    before = data.read_bytes()
    spec = {s.name: s for s in __import__("onnxprobe.api", fromlist=["x"]).model_inputs(str(model))}
    for k in range(2):
        folder = tmp_path / f"d{k}"
        folder.mkdir()
        rng = np.random.default_rng(k)
        np.savez(folder / "b.npz", **{n: rng.random([d if isinstance(d, int) and d > 0 else 1 for d in s.shape]).astype(s.dtype)
                                      for n, s in spec.items()})
        _run("layers", model, "--inputs-dir", folder, "--json", tmp_path / f"s{k}.json")
    r = subprocess.run([sys.executable, "-m", "onnxprobe", "merge-stats", str(tmp_path / "s0.json"), str(tmp_path / "s1.json"),
                        "--json", str(data)], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2 and "refusing to overwrite it" in r.stderr, r.stderr
    assert data.read_bytes() == before
