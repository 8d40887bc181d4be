"""merge-stats and shards damaged in the fields its merge and tables read (not the statistics, which
test_merge_shards covers): a key missing, a null or a value of another type is one line naming the shard
and the key, exit 2, where each reader failed its own way ("internal error: KeyError: 'device'", a
TypeError iterating 'notes': null); a negative maximum of absolute values in a diff shard's sums was
merged as if true (QA)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app

runner = CliRunner()


def _run(*args, code=(0,)):
    r = runner.invoke(app, [str(a) for a in args])
    assert r.exit_code in code, r.output
    return r


def _folder(path: Path, indices) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for i in indices:
        x = np.random.default_rng(500 + i).normal(0.0, 1.0, (4, 16)).astype(np.float32)
        np.savez(path / f"b{i:03d}.npz", x=x)
    return path


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Two layers shards and two diff shards of the sample MLP."""
    tmp = tmp_path_factory.mktemp("shards")
    out = {}
    for k, idx in enumerate((range(0, 2), range(2, 4))):
        folder = _folder(tmp / f"s{k}", idx)
        out[f"l{k}"] = tmp / f"l{k}.json"
        _run("layers", sample_path("mlp"), "--inputs-dir", folder, "--json", out[f"l{k}"])
        out[f"d{k}"] = tmp / f"d{k}.json"
        _run("diff", sample_path("mlp"), "--vs-reference", "--inputs-dir", folder, "--json", out[f"d{k}"], code=(0, 1))
    return out


def _damaged(tmp_path, src: Path, edit) -> Path:
    d = json.loads(src.read_text())
    edit(d)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(d))
    return bad


def _refused(*args) -> str:
    r = runner.invoke(app, ["merge-stats", *map(str, args)])
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.output
    assert "internal error" not in r.stderr and "Traceback" not in r.output, r.output
    return r.stderr


def _drop(key):
    return lambda d: d.pop(key)


def _tensor(key, value=None, drop=False):
    return lambda d: d["tensors"][0].pop(key) if drop else d["tensors"][0].update({key: value})


LAYERS = [
    ("notes", lambda d: d.update(notes=None)),
    ("notes", lambda d: d.update(notes=3)),
    ("device", _drop("device")),
    ("opt_level", _drop("opt_level")),
    ("device", lambda d: d.update(device=7)),
    ("device", lambda d: d.update(device=[1, 2])),  # a list of devices is one of strings (it merged as ["cpu", [1, 2]])
    ("index", _tensor("index", drop=True)),
    ("index", _tensor("index", "0")),
    ("node", _tensor("node", 5)),
    ("node", _tensor("node", drop=True)),
    ("scope", _tensor("scope", drop=True)),
    ("scope", _tensor("scope", 1)),
    ("is_output", _tensor("is_output", drop=True)),
    ("is_output", _tensor("is_output", "yes")),
    ("shape", _tensor("shape", "4x16")),
    ("shape", _tensor("shape", [-1, 16])),  # a dimension is a count (null where shards differ): shown as read (QA)
    ("shape", _tensor("shape", [{"a": 1}, 16])),
    ("shape", _tensor("shape", [1.5, 16])),
    ("shape", _tensor("shape", [True, 16])),
]


@pytest.mark.parametrize("key, edit", LAYERS)
def test_a_damaged_layers_shard_is_one_line_naming_it_and_the_key(tmp_path, shards, key, edit):
    bad = _damaged(tmp_path, shards["l1"], edit)
    err = _refused(shards["l0"], bad)
    assert str(bad) in err and f"'{key}'" in err


DIFF = [
    ("a", _drop("a")),
    ("b", _drop("b")),
    ("unmatched_a", _drop("unmatched_a")),
    ("unmatched_b", lambda d: d.update(unmatched_b=None)),
    ("unmatched_a", lambda d: d.update(unmatched_a="x")),
    ("fp32_sensitivity", lambda d: d.update(fp32_sensitivity=None)),
    ("fp32_sensitivity", _drop("fp32_sensitivity")),
    ("uncompared", _drop("uncompared")),  # what the merge counts its unmatched tensors from
    ("uncompared", lambda d: d.update(uncompared="x")),
    ("in_a", lambda d: d.update(uncompared=[{"cause": "shape", "why": "w", "pairs": 0, "in_a": "1", "in_b": 1,
                                             "examples": ["y"]}])),
    ("examples", lambda d: d.update(uncompared=[{"cause": "shape", "why": "w", "pairs": 0, "in_a": 1, "in_b": 1,
                                                 "examples": [1]}])),
    ("examples", lambda d: d.update(uncompared=[{"cause": "shape", "why": "w", "pairs": 0, "in_a": 1, "in_b": 1,
                                                 "examples": []}])),  # a group said with its first example (QA)
    ("notes", lambda d: d.update(notes=None)),
    ("max_abs", lambda d: d["pairs"][0]["sums"].update(max_abs=-1)),
    ("max_rel", lambda d: d["pairs"][0]["sums"].update(max_rel=-1)),
    ("shape", lambda d: d["pairs"][0]["sums"].update(shape=[-4, 16])),
]


@pytest.mark.parametrize("key, edit", DIFF)
def test_a_damaged_diff_shard_is_one_line_naming_it_and_the_key(tmp_path, shards, key, edit):
    bad = _damaged(tmp_path, shards["d1"], edit)
    err = _refused(shards["d0"], bad)
    assert str(bad) in err and f"'{key}'" in err


def test_undamaged_shards_merge(shards):
    merged = json.loads(_run("merge-stats", shards["l0"], shards["l1"], "--json", "-").stdout)
    assert merged["batches"] == 4
    merged = json.loads(_run("merge-stats", shards["d0"], shards["d1"], "--json", "-", code=(0, 1)).stdout)
    assert merged["samples"] == 4


def _bare(d):
    """The shard without histograms: nothing then checks a count against the values binned."""
    for t in d["tensors"]:
        t.pop("histogram", None)


def _moments(key, value):
    return lambda d: (_bare(d), d["tensors"][0]["moments"].update({key: value}))


def _stat(key, value):
    return lambda d: (_bare(d), d["tensors"][0].update({key: value}))


# a tensor's statistics: its moments, which the merge pools, and the summary written from them (count, nan,
# inf, min, max...), which the merge writes anew: each a value of its kind, the summary agreeing with its moments
STATS = [
    ("count", _moments("count", 10**49)),  # an integer 1e49: more values than 2 batches hold; the mean became 2e-48 (QA)
    ("count", _moments("count", 10**300)),
    ("count", _stat("count", 1e300)),
    ("count", _stat("count", -1)),
    ("count", _stat("count", 2.5)),
    ("count", _stat("count", 999)),  # an integer, but not the moments' count
    ("nan", _stat("nan", -4)),
    ("nan", _stat("nan", 3)),  # the moments say 0
    ("inf", _stat("inf", "0")),
    ("min", _stat("min", 99.0)),  # above the maximum
    ("max", _stat("max", [1])),
    ("mean", _stat("mean", "x")),
    ("std", _stat("std", -1.0)),
    ("abs_mean", _stat("abs_mean", -0.5)),
    ("zero_fraction", _stat("zero_fraction", 7)),
    ("p99.99", _stat("p99.99", True)),
    ("status", _stat("status", 5)),
]


@pytest.mark.parametrize("key, edit", STATS)
def test_damaged_statistics_are_one_line_naming_the_shard_and_the_field(tmp_path, shards, key, edit):
    good = _damaged(tmp_path, shards["l0"], _bare).rename(tmp_path / "good.json")
    bad = _damaged(tmp_path, shards["l1"], edit)
    err = _refused(good, bad)
    assert str(bad) in err and f"'{key}'" in err and "fc1_out" in err, err


def test_shards_without_histograms_still_merge(tmp_path, shards):
    """The good twin of the above: the counts add (an oracle: the shards' own counts)."""
    good = _damaged(tmp_path, shards["l0"], _bare).rename(tmp_path / "good.json")
    other = _damaged(tmp_path, shards["l1"], _bare)
    merged = json.loads(_run("merge-stats", good, other, "--json", "-").stdout)
    a, b = (json.loads(p.read_text())["tensors"][0]["count"] for p in (good, other))
    assert merged["tensors"][0]["count"] == a + b == 4 * 4 * 32
