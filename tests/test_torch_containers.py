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
