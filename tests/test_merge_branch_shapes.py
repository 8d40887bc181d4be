"""``merge-stats``: a tensor of an If branch that did not run in one shard holds there the shape the model declares
('?' for its batch), not a runtime one; merged in, it turned the merged shape to '?x8' where one run over the same
batches (and every batch in which it ran) says 1x8. The shards where it ran give the shape."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from conftest import make_model
from onnxprobe import api


def _if_model(path) -> str:
    x, y = h.make_tensor_value_info("x", T.FLOAT, ["N", 8]), h.make_tensor_value_info("y", T.FLOAT, ["N", 8])
    then = h.make_graph([h.make_node("Mul", ["x", "two"], ["t"], name="tmul")], "then", [], [h.make_tensor_value_info("t", T.FLOAT, ["N", 8])])
    els = h.make_graph([h.make_node("Mul", ["x", "mone"], ["e"], name="emul")], "else", [], [h.make_tensor_value_info("e", T.FLOAT, ["N", 8])])
    nodes = [h.make_node("ReduceSum", ["x"], ["s"], keepdims=0, name="rs"), h.make_node("Greater", ["s", "zero"], ["c"], name="gt"),
             h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=els, name="if1")]
    consts = [nh.from_array(np.array(v, np.float32), k) for k, v in (("two", 2), ("mone", -1), ("zero", 0))]
    onnx.save(make_model(nodes, [x], [y], consts), path)
    return str(path)


def test_a_branch_that_did_not_run_in_a_shard_leaves_the_merged_shape_alone(tmp_path):
    model = _if_model(tmp_path / "if.onnx")
    batches = {"p": np.full((2, 8), 3, np.float32), "n": np.full((1, 8), -5, np.float32)}  # then-branch / else-branch
    reports = {}
    for name, x in [*batches.items(), ("all", None)]:
        d = tmp_path / name
        d.mkdir()
        for k, v in batches.items():
            if x is None or k == name:
                np.savez(d / f"{k}.npz", x=v)
        reports[name] = api.report(api.layers_dataset(model, str(d), api.Selection(all=True)))
    merged = api.merge_stats([reports["p"], reports["n"]])
    one = {t["name"]: t for t in reports["all"]["tensors"]}
    got = {t["name"]: t for t in merged["tensors"]}
    # the oracle: the branch's tensor has its batch's shape (t: 2x8 from p, e: 1x8 from n), as the one run says
    assert got["t"]["shape"] == one["t"]["shape"] == [2, 8]
    assert got["e"]["shape"] == one["e"]["shape"] == [1, 8]
    assert got["e"]["count"] == one["e"]["count"] == 8


def test_a_tensor_without_statistics_stays_so_when_merged(tmp_path):
    """A string tensor has no statistics in each shard ('no statistics', count and moments null); merged, it read
    'not run' with a count of 0 and all-zero moments, though it ran in every batch."""
    import json

    import numpy as np
    import onnx
    from onnx import TensorProto, helper
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    s = lambda n: helper.make_tensor_value_info(n, TensorProto.STRING, [2])  # noqa: E731
    f = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [2])  # noqa: E731
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"], name="i"), helper.make_node("Relu", ["v"], ["w"], name="r")],
                          "g", [s("x"), f("v")], [s("y"), f("w")])
    m = tmp_path / "s.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), m)
    shards = []
    for k in range(2):
        d = tmp_path / f"d{k}"
        d.mkdir()
        np.savez(d / "b.npz", x=np.array(["a", "b"]), v=np.array([k - 1.0, 2.0], np.float32))
        out = tmp_path / f"s{k}.json"
        r = CliRunner().invoke(app, ["layers", str(m), "--all", "--inputs-dir", str(d), "--json", str(out)])
        assert r.exit_code == 0, r.output
        shards.append(str(out))
    r = CliRunner().invoke(app, ["merge-stats", *shards, "--json", "-"])
    assert r.exit_code == 0, r.output
    rows = {t["name"]: t for t in json.loads(r.stdout)["tensors"]}
    assert rows["y"]["status"] == "no statistics" and rows["y"].get("count") is None and not rows["y"].get("moments"), rows["y"]
    assert rows["w"]["status"] == "ran" and rows["w"]["count"] == 4 and rows["w"]["max"] == 2.0
