"""`diff --vs-torch` and module containers: a ModuleDict's and a ModuleList's children are paired as the
modules they are, by both exporters, and a container with no forward of its own (nothing ran in it) is
never listed as unmatched. torch is the oracle (each pair is an ONNX tensor against torch's own value)."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from onnxprobe.match.modules import legacy_path, module_scopes

KNOWN = {"", "blocks", "blocks.0", "blocks.1", "heads", "heads.a", "heads.b", "a"}


def test_a_legacy_moduledict_child_is_named_by_its_path():
    """Legacy names a ModuleDict child's nodes /a/Gemm (no component for the ModuleDict): that is heads.a,
    and the ModuleDict, which never runs, gets no scope (as dynamo's name_scopes have it)."""
    known = KNOWN - {"a"}
    assert legacy_path("/a/Gemm", known) == ("heads.a", 0)
    assert legacy_path("/blocks.0/Gemm", known) == ("blocks.0", 0)
    assert legacy_path("/a/Gemm", KNOWN) == ("a", 0)  # a module of that name of its own wins
    assert legacy_path("/c/Gemm", known | {"x", "x.c", "y", "y.c"}) == ("c", 0)  # two containers: unknown
    nodes = [helper.make_node("Gemm", ["x", "w0"], ["h0"], name="/blocks.0/Gemm"),
             helper.make_node("Gemm", ["h0", "w1"], ["h1"], name="/blocks.1/Gemm"),
             helper.make_node("Gemm", ["h1", "wa"], ["ya"], name="/a/Gemm"),
             helper.make_node("Gemm", ["h1", "wb"], ["yb"], name="/b/Gemm")]
    f = [2, 2]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, f) for n in ("x", "w0", "w1", "wa", "wb")],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, f) for n in ("ya", "yb")])
    scopes = module_scopes(helper.make_model(g), known)
    assert {p: s.output for p, s in scopes.items() if p} == {"blocks.0": "h0", "blocks.1": "h1", "heads.a": "ya",
                                                            "heads.b": "yb"}


def test_a_legacy_module_name_with_a_slash_is_one_module():
    """A ModuleDict key 'a/b' is written by legacy as it is (/a/b/Gemm): it was read as heads.a then b, so
    heads.a/b got no scope and heads.a got its nodes ('the export traced another branch', a false claim)."""
    known = {"", "heads", "heads.a/b", "heads.a/b.0", "heads.a/b.1", "heads.a", "fc"}
    assert legacy_path("/a/b/Gemm", known) == ("heads.a/b", 0)
    assert legacy_path("/a/b/a/b.1/Relu", known) == ("heads.a/b.1", 0)
    assert legacy_path("/a/Gemm", known) == ("heads.a", 0)
    assert legacy_path("/fc/Gemm", known) == ("fc", 0)
    nodes = [helper.make_node("Gemm", ["x", "w"], ["h"], name="/a/b/a/b.0/Gemm"),
             helper.make_node("Relu", ["h"], ["r"], name="/a/b/a/b.1/Relu"),
             helper.make_node("Gemm", ["r", "w"], ["y"], name="/fc/Gemm")]
    f = [2, 2]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, f) for n in ("x", "w")],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, f)])
    scopes = module_scopes(helper.make_model(g), known)
    assert {p: s.output for p, s in scopes.items() if p} == {"heads.a/b": "r", "heads.a/b.0": "h", "heads.a/b.1": "r",
                                                            "fc": "y"}


torch = pytest.importorskip("torch")
import torch_models as tm  # noqa: E402  (needs torch)
from onnxprobe import api  # noqa: E402

FILE = Path(__file__).with_name("torch_models.py")


@pytest.mark.parametrize("kind", ["legacy", "dynamo"])
def test_moduledict_heads_are_paired_not_listed_unmatched(tmp_path, kind):
    """The legacy export's rows read '27 <-> output[0]' while 'unmatched in B' listed heads.a ('no ONNX node
    carries its scope'): the module compared through what forward() returns is named in the row, not also
    listed unmatched, as with dynamo."""
    if kind == "dynamo":
        pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
    m, args = tm.build("heads")
    path = tmp_path / f"heads_{kind}.onnx"
    kwargs = {"opset_version": 17} if kind == "legacy" else {}
    torch.onnx.export(m, args, str(path), dynamo=kind == "dynamo", input_names=["x"], verbose=False, **kwargs)
    onnx.checker.check_model(str(path))
    res = api.diff_torch(path, f"{FILE}:heads")
    assert res.verdict()[0] == "pass", res.verdict()
    paired = {r.pair.b.name for r in res.results}
    assert {"blocks.0", "blocks.1", "heads.a", "heads.b"} <= paired, paired
    unmatched = {u.obs.name: u.reason for u in res.matching.unmatched_b}
    assert not {"heads", "heads.a", "heads.b", "blocks"} & set(unmatched), unmatched
    assert max(r.metrics.max_abs for r in res.results) < 1e-5


def test_a_legacy_export_of_a_slashed_module_name_pairs_it(tmp_path):
    """End to end: heads['a/b'] (a Sequential) is paired child by child with torch's values, and heads.a,
    which never ran, is not said to be the branch the export traced."""
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = nn.ModuleDict({"a/b": nn.Sequential(nn.Linear(4, 4), nn.ReLU()), "a": nn.Linear(4, 4)})
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            return self.fc(self.heads["a/b"](x))

    torch.manual_seed(0)
    m, x = Net().eval(), torch.randn(2, 4)
    path = tmp_path / "slash.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=False, input_names=["x"], verbose=False)
    res = api.diff_torch(path, m, example_args=(x,))
    assert res.verdict()[0] == "pass", res.verdict()
    assert {"heads.a/b.0", "heads.a/b.1"} <= {r.pair.b.name for r in res.results}
    unmatched = {u.obs.name: u.reason for u in res.matching.unmatched_b}
    assert "branch" not in unmatched.get("heads.a", ""), unmatched
    assert "traced another branch" not in " ".join(unmatched.values()), unmatched
