"""`merge-stats` of dataset `diff` reports: every per-pair field is pooled from all the shards (the
introduced error's count and NaN/Inf verdict were the first shard's), whatever the order of the files,
and checked against numpy float64."""

from __future__ import annotations

import json
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app

runner = CliRunner()
SHARDS = {"n0": np.linspace(1, 2, 8, dtype=np.float32), "n1": np.linspace(-1, 1, 8, dtype=np.float32)}


def pow_model(path, exponent: float) -> None:
    """y = Pow(Mul(x, 1), exponent): A's square root is NaN where x < 0, B's identity is not."""
    nodes = [helper.make_node("Mul", ["x", "one"], ["m"], name="mul"), helper.make_node("Pow", ["m", "e"], ["y"], name="pow")]
    inits = [numpy_helper.from_array(np.array(1, np.float32), "one"), numpy_helper.from_array(np.array(exponent, np.float32), "e")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def run(*args, code=(0, 1)):
    r = runner.invoke(app, [str(a) for a in args])
    assert r.exit_code in code and "Traceback" not in r.output, r.output
    return r


def shards(tmp_path, *extra) -> dict[str, object]:
    a, b = tmp_path / "powA.onnx", tmp_path / "powB.onnx"
    pow_model(a, 0.5)
    pow_model(b, 1.0)
    out = {}
    for name, x in SHARDS.items():
        (tmp_path / name).mkdir()
        np.savez(tmp_path / name / "b.npz", x=x)
        out[name] = tmp_path / f"{name}.json"
        run("diff", a, b, "--all", "--inputs-dir", tmp_path / name, "--json", out[name], *extra)
    return out


def oracle() -> dict:
    """y's pair over both shards: A = sqrt(x) as float32 computes it, B = x; NaN/Inf on one side is left
    out of the sums and counted. A's Pow fed B's m (the introduced error) is the same here: m agrees."""
    x = np.concatenate(list(SHARDS.values()))
    with np.errstate(invalid="ignore"):
        a = np.sqrt(x).astype(np.float64)
    b = x.astype(np.float64)
    ok = np.isfinite(a) & np.isfinite(b)
    d = a[ok] - b[ok]
    sqnr = 10 * math.log10(float(np.sum(b[ok] ** 2)) / float(np.sum(d ** 2)))
    return {"count": int(ok.sum()), "mismatch": int((~ok).sum()), "max_abs": float(np.abs(d).max()), "sqnr": sqnr}


def test_merged_pairs_pool_the_introduced_error_of_every_shard_in_any_order(tmp_path):
    s = shards(tmp_path)
    want = oracle()
    merged = []
    for order in (("n0", "n1"), ("n1", "n0")):
        out = tmp_path / f"m_{'_'.join(order)}.json"
        run("merge-stats", *(s[k] for k in order), "--json", out)
        merged.append(out.read_bytes())
    assert merged[0] == merged[1]
    both = tmp_path / "both"
    both.mkdir()
    for k, x in SHARDS.items():
        np.savez(both / f"{k}.npz", x=x)
    run("diff", tmp_path / "powA.onnx", tmp_path / "powB.onnx", "--all", "--inputs-dir", both, "--json", tmp_path / "d.json")
    direct = {p["a"]: p for p in json.loads((tmp_path / "d.json").read_text())["pairs"]}
    pooled = {p["a"]: p for p in json.loads(merged[0])["pairs"]}
    for y in (direct["y"], pooled["y"]):  # one diff over both shards, and the merge of the two: numpy's numbers
        check(y, want)
    m = pooled["m"]
    assert m["count"] == m["introduced_count"] == 16 and m["introduced_nonfinite_mismatch"] == 0
    assert pooled["y"]["nonfinite_sample"].startswith("n1.json:")


def check(y: dict, want: dict) -> None:
    assert y["count"] == y["introduced_count"] == want["count"] == 12
    assert y["nonfinite_mismatch"] == y["introduced_nonfinite_mismatch"] == want["mismatch"] == 4
    assert math.isclose(y["max_abs"], want["max_abs"], rel_tol=1e-6)
    assert math.isclose(y["sqnr_db"], want["sqnr"], rel_tol=1e-5)
    assert math.isclose(y["introduced_sqnr_db"], want["sqnr"], rel_tol=1e-5)
    assert y["introduced_exact"] is False and y["passed"] is False


def test_a_shard_whose_pair_is_judged_by_another_tolerance_is_refused(tmp_path):
    """The criterion string of the report agrees, a pair's own tolerance does not (a damaged or edited
    report): the first shard's was taken for all."""
    s = shards(tmp_path)
    d = json.loads(s["n1"].read_text())
    y = next(p for p in d["pairs"] if p["a"] == "y")
    y["tolerance"] = {**y["tolerance"], "atol": 0.5}
    s["n1"].write_text(json.dumps(d))
    r = runner.invoke(app, ["merge-stats", str(s["n0"]), str(s["n1"])])
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1 and "'y'" in r.stderr, r.output
    assert "n1.json" in r.stderr and "criterion" in r.stderr


def test_merge_keeps_each_pairs_topological_position_and_refuses_shards_that_disagree(tmp_path):
    """'topo' (the table's order under --sort topo) is a fact of the matching: the merge wrote null."""
    files = shards(tmp_path)
    first = {p["a"]: p["topo"] for p in json.loads(files["n0"].read_text())["pairs"]}
    assert first["m"] < first["y"]  # Mul before Pow in the graph: the oracle of the order
    r = run("merge-stats", files["n0"], files["n1"], "--json", "-")
    merged = {p["a"]: p["topo"] for p in json.loads(r.stdout)["pairs"]}
    assert merged == first
    d = json.loads(files["n1"].read_text())
    for p in d["pairs"]:
        p["topo"] = {"m": first["y"], "y": first["m"]}[p["a"]]
    files["n1"].write_text(json.dumps(d))
    r = run("merge-stats", files["n0"], files["n1"], "--json", "-", code=(2,))
    assert "topological position" in r.output and "n1.json" in r.output, r.output
