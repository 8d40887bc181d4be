"""`merge-stats` of dataset `diff` shards whose metrics are not finite, which a report writes as the words
"inf", "-inf" and "nan" (``text.json_word``): max|a-b| past float64's range (a - b of 1e308 and -1e308),
max_rel's inf where B is 0 and A is not, an SQNR of -inf where B is all zeros, a sample with NaN/Inf on one
side only (its SQNR "nan", left out of the spread). The merged pair is checked against numpy float64 over
every sample of every shard (the sums of squares taken after an exact power-of-two scaling, as float64
cannot square 1e308), whatever the order of the files. A shard whose sums give a maximum of absolute values
as "nan", which onnxprobe never writes (no NaN enters a maximum: NaN/Inf positions are counted apart), was
merged into a max|a-b| of "nan", or dropped, by the shards' names: it is a damaged report."""

from __future__ import annotations

import json
import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app

runner = CliRunner()
C = np.array([-1.0, 1.0, 1.0, 0.0])  # B = x * C, A = x
SHARDS = {"s0": [1e308, 2.0, 3.0, 4.0],  # a - b = 2e308: inf; max_rel inf (b = 0, a = 4)
          "s1": [0.0, 0.0, 0.0, 7.0],  # B all zeros, A not: SQNR -inf
          "s2": [math.inf] * 4,  # inf against -inf and inf * 0 = NaN: NaN/Inf on one side, no finite pair
          "s3": [math.nan, 1.0, 2.0, 3.0]}  # NaN on both sides: left out, counted alike


def _model(path, c) -> None:
    g = helper.make_graph([helper.make_node("Mul", ["x", "c"], ["y"], name="mul")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [4])],
                          [numpy_helper.from_array(np.asarray(c, np.float64), "c")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def run(*args, code=(0, 1)):
    r = runner.invoke(app, [str(a) for a in args])
    assert r.exit_code in code and "Traceback" not in r.output, r.output
    return r


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("nonfinite")
    _model(tmp / "A.onnx", np.ones(4))
    _model(tmp / "B.onnx", C)
    out = {}
    for name, x in SHARDS.items():
        (tmp / name).mkdir()
        np.savez(tmp / name / "b.npz", x=np.array(x, np.float64))
        out[name] = tmp / f"{name}.json"
        run("diff", tmp / "A.onnx", tmp / "B.onnx", "--all", "--inputs-dir", tmp / name, "--json", out[name], "--device", "cpu")
    return tmp, out


def _sqnr(b: np.ndarray, d: np.ndarray) -> float:
    with np.errstate(divide="ignore"):
        return float(10 * np.log10(np.sum(b * b) / np.sum(d * d)))


def _scale(x: np.ndarray) -> float:
    return 2.0 ** -600 if np.abs(x).max() > 1e150 else 1.0


def oracle(names: list[str]) -> dict:
    """numpy float64 over the shards' samples (one a shard): the finite pairs' metrics, scaled by 2^-600
    (exact) where the values are past 1e150, so that their squares fit in float64."""
    x = np.array([SHARDS[n] for n in names], np.float64)
    with np.errstate(invalid="ignore"):
        a, b = x * 1.0, x * C
    ok = np.isfinite(a) & np.isfinite(b)
    same = ~ok & ((np.isnan(a) & np.isnan(b)) | (a == b))
    k = _scale(x[ok])
    a_s, b_s = a[ok] * k, b[ok] * k
    d = np.abs(a_s - b_s)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        max_abs = float(np.abs(a[ok] - b[ok]).max())  # in float64: 2e308 is inf
        rel = np.where(d == 0, 0.0, d / np.abs(b_s))
    per = []  # each sample's own SQNR: those with NaN/Inf on one side only have none
    for i in range(len(names)):
        if (~ok[i] & ~same[i]).any() or not ok[i].any():
            continue
        ki = _scale(x[i][ok[i]])  # the sample's own: 7 * 2^-600 squared is below float64's range
        per.append(_sqnr(b[i][ok[i]] * ki, np.abs(a[i][ok[i]] * ki - b[i][ok[i]] * ki)))
    per.sort()
    na, nb = math.sqrt(np.sum(a_s * a_s)), math.sqrt(np.sum(b_s * b_s))
    return {"count": int(ok.sum()), "nonfinite_mismatch": int((~ok & ~same).sum()), "nonfinite_same": int(same.sum()),
            "max_abs": max_abs, "mean_abs": float(d.mean() / k), "rmse": float(math.sqrt(np.mean(d * d)) / k),
            "max_rel": float(rel.max()), "sqnr_db": _sqnr(b_s, d),
            "cosine": float(np.sum(a_s * b_s) / (na * nb)) if na and nb else 0.0,  # a zero vector: 0 (stats.metrics)
            "min": per[0], "median": per[math.ceil(len(per) / 2) - 1], "nonfinite": len(names) - len(per)}


def word(v):
    return {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}.get(v, v) if isinstance(v, str) else v


def close(got, want) -> bool:
    got = word(got)
    if not math.isfinite(want):
        return got == want
    return isinstance(got, float) and math.isclose(got, want, rel_tol=1e-12, abs_tol=0.0)


@pytest.mark.parametrize("names", [["s0", "s1"], ["s1", "s2"], ["s0", "s1", "s2", "s3"], ["s2", "s3"]])
def test_merged_nonfinite_metrics_agree_with_numpy(shards, names):
    tmp, paths = shards
    merged = []
    for order in (names, names[::-1]):
        out = tmp / f"m_{'_'.join(order)}.json"
        r = run("merge-stats", *(paths[n] for n in order), "--json", out)
        assert r.exit_code == 1, r.output  # every merge holds a failing output
        merged.append(out.read_bytes())
    assert merged[0] == merged[1]
    text = merged[0].decode()
    assert "Infinity" not in text and "NaN" not in text  # JSON's words, never a bare non-finite number
    y = json.loads(text)["pairs"][0]
    want = oracle(names)
    for k in ("count", "nonfinite_mismatch", "nonfinite_same"):
        assert y[k] == want[k], (k, y[k], want[k])
    for k in ("max_abs", "mean_abs", "rmse", "max_rel", "sqnr_db", "cosine"):
        assert close(y[k], want[k]), (k, y[k], want[k])
    assert close(y["introduced_max_abs"], want["max_abs"]) and close(y["introduced_sqnr_db"], want["sqnr_db"])
    sp = y["sqnr_per_sample"]
    assert close(sp["min"], want["min"]) and close(sp["median"], want["median"]) and sp["nonfinite"] == want["nonfinite"], sp
    assert y["passed"] is False


@pytest.mark.parametrize("field", ["max_abs", "max_rel", "b_absmax"])
def test_a_maximum_given_as_nan_is_a_damaged_report(shards, field):
    tmp, paths = shards
    d = json.loads(paths["s1"].read_text())
    d["pairs"][0]["sums"][field] = "nan"
    bad = tmp / f"nan_{field}.json"
    bad.write_text(json.dumps(d))
    r = run("merge-stats", paths["s0"], bad, code=(2,))
    assert f"nan_{field}.json" in r.stderr and field in r.stderr and "nan" in r.stderr, r.stderr
