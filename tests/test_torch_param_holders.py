"""``torch.params.map_parameters``: a torch parameter no initializer stands for says which initializers hold
its values where some do (equal-valued copies kept apart, a parameter merged into another's initializer),
never "no initializer holds its values". The models are built here, the holders known by construction."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxprobe.torch.params import map_parameters


def _model(inits: dict[str, np.ndarray]) -> onnx.ModelProto:
    nodes, prev = [], "x"
    for k, name in enumerate(inits):
        nodes.append(helper.make_node("Add", [prev, name], [f"h{k}"]))
        prev = f"h{k}"
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [4])],
                          [numpy_helper.from_array(v, n) for n, v in inits.items()])
    return helper.make_model(g)


def test_equal_valued_copies_kept_apart_are_said_on_the_torch_side_too():
    """A shared LayerNorm weight split into 4 equal initializers: A's side said '4 initializers hold these
    values', B's 'no initializer holds its values' for the parameters none of them stands for by name."""
    ones = np.ones(4, np.float32)
    inits = {"n1.weight": ones, "n1.weight_copy1": ones, "n1.weight_copy2": ones, "n1.weight_copy3": ones}
    params = {"n1.weight": ones, "n2.weight": ones, "n3.weight": ones, "n4.weight": ones}
    pm = map_parameters(_model(inits), params, list(inits))
    assert set(pm.links) == {"n1.weight"} and pm.links["n1.weight"].params == ["n1.weight"]
    for copy in ("n1.weight_copy1", "n1.weight_copy2", "n1.weight_copy3"):
        assert pm.refused[copy].startswith("4 initializers hold these values")
    for p in ("n2.weight", "n3.weight", "n4.weight"):
        assert pm.unused[p].startswith("4 initializers hold these values (n1.weight, "), pm.unused[p]
        assert "no initializer" not in pm.unused[p]


def test_a_parameter_whose_values_another_parameters_initializer_holds_names_it():
    """An all-zero bias equal to a LayerNorm bias the module reads: the initializer stands for the parameter
    its module reads (``users``); the other parameter is not 'held by no initializer'."""
    zeros = np.zeros(4, np.float32)
    pm = map_parameters(_model({"ln.bias": zeros}), {"ln.bias": zeros, "proj.bias": zeros}, ["ln.bias"],
                        users={"ln.bias": {"", "ln"}})
    assert pm.links["ln.bias"].params == ["ln.bias"]
    assert pm.unused["proj.bias"].startswith("the initializer ln.bias holds its values and stands for ln.bias"), pm.unused
    # and a parameter whose values no initializer holds still says so
    pm = map_parameters(_model({"ln.bias": zeros}), {"ln.bias": zeros, "fc.bias": np.full(4, 2, np.float32)}, ["ln.bias"])
    assert pm.unused["fc.bias"].startswith("no initializer holds its values")


def test_copies_of_one_tied_parameter_are_its_ties_and_copies_of_equal_values_are_not():
    """Two initializers of equal values (``emb.weight`` and an exporter's copy for the tied head): when one
    tied parameter alone has those values, both hold it (``ties``: their gradients sum to torch's); where
    another parameter or a buffer has them too, or the parameter is not tied, which one each stands for is
    unknown, as before."""
    w = np.arange(4, dtype=np.float32)
    inits = {"emb.weight": w, "head_copy": w}
    tied = {"emb.weight": {"emb", "head"}}
    pm = map_parameters(_model(inits), {"emb.weight": w}, list(inits), owners=tied)
    assert [link.init for link in pm.ties["emb.weight"]] == ["emb.weight", "head_copy"], pm.ties
    assert all(not link.transposed for link in pm.ties["emb.weight"])
    assert not pm.links and "held by 2 initializers" in pm.unused["emb.weight"], (pm.links, pm.unused)
    for kw in ({"owners": {"emb.weight": {"emb"}}},  # not tied
               {"owners": tied, "buffers": {"emb.running": w}}):  # a buffer of those values
        pm = map_parameters(_model(inits), {"emb.weight": w}, list(inits), **kw)
        assert not pm.ties and pm.refused["head_copy"].startswith("2 initializers hold these values"), (kw, pm.refused)
    pm = map_parameters(_model(inits), {"emb.weight": w, "other.weight": w}, list(inits),
                        owners={**tied, "other.weight": {"other"}})  # another parameter of those values
    assert not pm.ties and pm.refused["head_copy"].startswith("2 initializers hold these values"), pm.refused


def test_a_parameter_merged_into_an_initializer_another_parameters_tie_claims_is_said_not_a_crash():
    """wav2vec2's feature extractor (dynamo): a fresh GroupNorm weight (ones) stored with a unit axis added
    (``val_28`` [C, 1]) and a fresh LayerNorm weight of the same values, whose initializer the GroupNorm's
    parameter is merged into too. The GroupNorm's weight is then held by two initializers; taking them out
    as a tie took out the one the LayerNorm's parameter stood in as well, and the next parameter looked it
    up: KeyError, a traceback for `diff --vs-torch`. Now the LayerNorm's parameter is unused with a reason."""
    ones = np.ones(4, np.float32)
    inits = {"ln.weight": ones, "val_28": ones.reshape(4, 1)}
    params = {"gn.weight": ones, "ln.weight": ones}
    pm = map_parameters(_model(inits), params, list(inits), users={"val_28": {"", "gn"}})
    assert not pm.links, pm.links
    assert set(pm.refused) == {"ln.weight", "val_28"}, pm.refused
    for p in params:  # each parameter says why it is not compared, naming the initializers
        assert p in pm.unused and "ln.weight" in pm.unused[p], pm.unused


def test_equal_valued_parameters_merged_into_one_initializer_are_those_its_readers_hold():
    """Whisper's encoder (dynamo): the optimizer merged 8 all-zero Linear biases into one initializer and dropped
    the Convs' zero biases. The merged link claimed the Convs' biases too (``m.conv`` has the parent ``m``,
    an enclosing scope of every reader), so torch's side summed 10 gradients against the ONNX sum of 8: a
    false FAIL. The parent rule (nn.MultiheadAttention reads out_proj.bias in its own scope) is for a
    parameter whose module's parent is the innermost scope that reads it, not any enclosing one."""
    z = np.zeros(4, np.float32)
    params = {"m.conv.bias": z, "m.blk.a.bias": z, "m.blk.b.bias": z, "m.attn.out_proj.bias": z}
    users = {"m.blk.a.bias": {"", "m", "m.blk", "m.blk.a", "m.blk.b"}}
    pm = map_parameters(_model({"m.blk.a.bias": z}), params, ["m.blk.a.bias"], users=users)
    assert sorted(pm.links["m.blk.a.bias"].params) == ["m.blk.a.bias", "m.blk.b.bias"], pm.links
    # read in the attention module's own scope: its out_proj's bias (a child of that scope) still counts
    users = {"m.blk.a.bias": {"", "m", "m.attn", "m.blk", "m.blk.a"}}
    pm = map_parameters(_model({"m.blk.a.bias": z}), params, ["m.blk.a.bias"], users=users)
    assert sorted(pm.links["m.blk.a.bias"].params) == ["m.attn.out_proj.bias", "m.blk.a.bias"], pm.links
