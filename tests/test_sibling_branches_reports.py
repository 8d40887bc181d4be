"""Reports of tensors whose name sibling bodies share (two If nodes whose branches all name their output
'o'): a dataset's moments and histograms, the HTML's histograms, the overlays and --netron find each by
its scope-qualified key (TensorRef.key), not by the bare name; numpy float64 is the oracle."""

from __future__ import annotations

import json

import numpy as np
import onnx
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.cli.main import app
from test_sibling_branches import OPS, two_ifs

X = np.array([-1.0, 2.0, -3.0], np.float32)
BRANCH_OP = {"if1/then_branch/o": "Relu", "if1/else_branch/o": "Neg", "if2/then_branch/o": "Abs", "if2/else_branch/o": "Exp"}


def _dataset(tmp_path):
    """Two batches: one takes the then branches, the other the else branches."""
    d = tmp_path / "ds"
    d.mkdir()
    np.savez(d / "a.npz", x=X, c=np.array(True))
    np.savez(d / "b.npz", x=-2 * X, c=np.array(False))
    return d


def test_dataset_json_has_each_branch_tensors_moments_and_merge_stats_merges_them(tmp_path):
    path = tmp_path / "two_if.onnx"
    two_ifs(path)
    d = _dataset(tmp_path)
    out = tmp_path / "a.json"
    r = CliRunner().invoke(app, ["layers", str(path), "--all", "--inputs-dir", str(d), "--json", str(out)])
    assert r.exit_code == 0, r.output
    rows = [t for t in json.loads(out.read_text())["tensors"] if t["name"] == "o"]
    assert sorted(t["key"] for t in rows) == sorted(BRANCH_OP)
    for t in rows:
        x = (X if "then" in t["key"] else -2 * X).astype(np.float64)
        want = OPS[BRANCH_OP[t["key"]]](x)
        assert t["moments"] is not None and t["histogram"] is not None, t["key"]
        assert t["moments"]["count"] == want.size
        for k, v in (("min", want.min()), ("max", want.max())):  # float32 exp: within its rounding
            assert abs(t[k] - v) <= 1e-6 * max(1.0, abs(v)), (t["key"], k, t[k], v)
        assert abs(t["mean"] - want.mean()) <= 1e-6 * max(1.0, abs(want.mean()))
        assert t["p0.01"] is not None and want.min() <= t["p0.01"] <= want.max()
    # a second shard of other samples: merge-stats merges every row, the branch rows included
    d2 = tmp_path / "ds2"
    d2.mkdir()
    np.savez(d2 / "a.npz", x=3 * X, c=np.array(True))
    out2 = tmp_path / "b.json"
    assert CliRunner().invoke(app, ["layers", str(path), "--all", "--inputs-dir", str(d2), "--json", str(out2)]).exit_code == 0
    merged = tmp_path / "m.json"
    r = CliRunner().invoke(app, ["merge-stats", str(out), str(out2), "--json", str(merged)])
    assert r.exit_code == 0, r.output
    (t,) = [t for t in json.loads(merged.read_text())["tensors"] if t.get("key") == "if1/then_branch/o"]
    want = np.concatenate([np.maximum(X, 0), np.maximum(3 * X, 0)]).astype(np.float64)
    assert t["count"] == want.size and t["max"] == want.max()


def _result(tmp_path, cond=True):
    path = tmp_path / "two_if.onnx"
    two_ifs(path)
    return path, api.layers(path, api.Selection(all=True), api.RunConfig(device="cpu"),
                            inputs=api.InputSpec(arrays={"x": X, "c": np.array(cond)}))


def test_layers_histograms_take_a_branch_tensor_by_its_key_and_refuse_the_bare_shared_name(tmp_path):
    from onnxprobe.errors import UsageError
    from onnxprobe.stats.histogram import binned

    _, res = _result(tmp_path)
    got = api.layers_histograms(res, ["if2/then_branch/o", "if1/then_branch/o"], bins=8)
    assert got["if2/then_branch/o"]["values"] == binned(np.abs(X.astype(np.float64)), 8)
    assert got["if1/then_branch/o"]["values"] == binned(np.maximum(X.astype(np.float64), 0), 8)
    try:
        api.layers_histograms(res, ["o"])
    except UsageError as e:
        for k in BRANCH_OP:
            assert k in str(e)
    else:
        raise AssertionError("a bare shared name gave histograms of no tensor, unsaid")
    ds = api.layers_dataset(tmp_path / "two_if.onnx", _dataset(tmp_path), api.Selection(all=True))
    assert set(api.layers_histograms(ds, list(BRANCH_OP))) == set(BRANCH_OP)  # each branch ran in one batch


def test_layers_html_has_the_histograms_of_branch_tensors(tmp_path):
    path, _ = _result(tmp_path)
    page = tmp_path / "l.html"
    r = CliRunner().invoke(app, ["layers", str(path), "--all", "--html", str(page)])
    assert r.exit_code == 0, r.output
    hists = json.loads(page.read_text().split('<script type="application/json" id="hists">')[1].split("</script>")[0])
    names = {"".join(t for t, _ in h["name"]) for h in hists}  # as text.pieces: the random condition takes one side
    assert {"if1/then_branch/o", "if2/then_branch/o"} <= names or {"if1/else_branch/o", "if2/else_branch/o"} <= names, names


def _renamed_nodes(src, dst) -> None:
    """two_ifs' branch nodes are all called 'n': give each its own name (then1, else1, then2, else2)."""
    import onnx

    m = onnx.load(str(src))
    for node in m.graph.node:
        for a in node.attribute:
            if a.name.endswith("_branch"):
                a.g.node[0].name = f"{a.name[:4]}{node.name[-1]}"
    onnx.save(m, str(dst))


def test_diff_overlay_and_netron_put_each_branch_tensor_on_its_own_node(tmp_path):
    from onnxprobe.report.overlay import DARK_RED
    from test_sibling_branches import _with_op

    base, a, b = tmp_path / "base.onnx", tmp_path / "a.onnx", tmp_path / "b.onnx"
    two_ifs(base)
    _renamed_nodes(base, a)
    _with_op(a, b, "if2", "then_branch", "Identity")  # if2's then branch differs: where the error starts
    ov, net = tmp_path / "d.ov.json", tmp_path / "dn.json"
    r = CliRunner().invoke(app, ["diff", str(a), str(b), "--all", "--input", "x=[-1,2,-3]", "--input", "c=true",
                                 "--overlay", str(ov), "--netron", str(net)])
    assert r.exit_code == 1, r.output
    (results,) = [g["results"] for g in json.loads(ov.read_text()).values()]
    then2 = [v for k, v in results.items() if k.endswith("then2")]
    assert len(then2) == 1 and then2[0].get("bgColor") == DARK_RED, results
    assert any(k.endswith("then1") for k in results), results  # the branch that passed has its row too
    metrics = json.loads(net.read_text())["metrics"]
    targets = {(m["kind"], m["target"]) for m in metrics}
    assert ("node", "then1") in targets and ("node", "then2") in targets, targets
    assert not any("/" in t for _, t in targets) and ("value", "o") not in targets, targets
    # numpy float64: then2's 'o' is |x| in A, x in B
    x = X.astype(np.float64)
    (mx,) = [m["value"] for m in metrics if m["target"] == "then2" and m["name"] == "onnxprobe o max_abs"]
    assert abs(mx - np.abs(np.abs(x) - x).max()) <= 1e-6


def test_layers_netron_keeps_branch_tensors_of_one_name_apart(tmp_path):
    base, a = tmp_path / "base.onnx", tmp_path / "a.onnx"
    two_ifs(base)
    _renamed_nodes(base, a)
    for path, want in ((a, {("node", n) for n in ("then1", "else1", "then2", "else2")}), (base, {("value", "o")})):
        net = tmp_path / "ln.json"
        metrics = []
        for c in ("false", "true"):  # each branch on the run that takes it: one not run has no values to show
            r = CliRunner().invoke(app, ["layers", str(path), "--all", "--input", "x=[-1,2,-3]", "--input", f"c={c}",
                                         "--netron", str(net)])
            assert r.exit_code == 0, r.output
            metrics += json.loads(net.read_text())["metrics"]
        got = {(m["kind"], m["target"]) for m in metrics}
        assert want <= got, got
        if path == base:  # the nodes are all 'n': on the value 'o', each metric named by the tensor's key
            names = {m["name"] for m in metrics if m["target"] == "o"}
            assert {"onnxprobe if1/then_branch/o max", "onnxprobe if2/then_branch/o max"} <= names, names
            (mx,) = [m["value"] for m in metrics if m["name"] == "onnxprobe if2/then_branch/o max"]
            assert mx == np.abs(X.astype(np.float64)).max()
        else:
            assert ("value", "o") not in got


def test_atol_of_a_bare_shared_name_is_ambiguous_not_unobserved(tmp_path):
    """Both models observe 'o' (four times): the refusal says the name is ambiguous and lists the keys; it
    said 'which neither model observes'."""
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    two_ifs(a)
    two_ifs(b)
    r = CliRunner().invoke(app, ["diff", str(a), str(b), "--all", "--input", "x=[-1,2,-3]", "--input", "c=true",
                                 "--atol", "o:0.1"])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    line = " ".join(r.output.split())
    assert "ambiguous" in line and "neither model observes" not in line, line
    assert ", ".join(sorted(BRANCH_OP)) in line, line
    r = CliRunner().invoke(app, ["diff", str(a), str(b), "--all", "--input", "x=[-1,2,-3]", "--input", "c=true",
                                 "--atol", "nosuch:0.1"])
    assert r.exit_code == 2 and "neither model observes" in r.output, r.output


def test_netron_never_targets_an_unnamed_node_by_its_display_name(tmp_path):
    """Branch nodes with no name were targeted as 'Relu_2' (onnxprobe's display name), which Netron, finding
    nodes by their own name, never matches: the metrics were lost. Unnamed, they go on the value, each metric
    named with the tensor's key."""
    path, net = tmp_path / "two_if.onnx", tmp_path / "n.json"
    two_ifs(path)
    m = onnx.load(str(path))
    for n in m.graph.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                for b in a.g.node:
                    b.name = ""
    onnx.save(m, str(path))
    r = CliRunner().invoke(app, ["layers", str(path), "--all", "--input", "x=[-1,2,-3]", "--input", "c=true", "--netron", str(net)])
    assert r.exit_code == 0, r.output
    metrics = json.loads(net.read_text())["metrics"]
    assert not [x for x in metrics if x["kind"] == "node"], metrics
    (mx,) = [x["value"] for x in metrics if x["target"] == "o" and x["name"] == "onnxprobe if1/then_branch/o max"]
    assert mx == np.maximum(X.astype(np.float64), 0).max()
