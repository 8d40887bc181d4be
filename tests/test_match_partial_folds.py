"""A Conv chain (Conv -> BatchNormalization -> scale Mul -> bias Add -> Relu) against a copy whose Conv took in
the chain's first tails only and kept the rest, its tensors keeping their names (onnxsim folds a BatchNormalization
and a scale, leaves the bias Add, and the Conv's output keeps the bare Conv's name): the name paired the folded
Conv with the bare Conv output, another function of the data (inception_v2: 58 of 62 pairs FAIL at 0 dB, the
error said to start at the first Conv; PP-OCRv4 det 32 FAIL). The folded Conv computes the last folded tail's
function and pairs with it; so does a ConvTranspose with its BatchNormalization folded in, and a Conv whose output
three BatchNormalization chains read (onnxsim merges three equal Convs into one). The oracle: each pair's two
tensors computed with onnx.reference (float64 agreement), and the folding done in numpy."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from onnxprobe import api

RNG = np.random.default_rng(11)
C = 4
EPS = 1e-5
W = RNG.normal(size=(C, 3, 3, 3)).astype(np.float32)
W2 = RNG.normal(size=(C, C, 3, 3)).astype(np.float32)
WT = RNG.normal(size=(C, C, 2, 2)).astype(np.float32)  # ConvTranspose: [in, out, kh, kw]
G, BETA, MU, VAR = (RNG.uniform(0.5, 2, C).astype(np.float32), RNG.normal(size=C).astype(np.float32),
                    RNG.normal(size=C).astype(np.float32), RNG.uniform(0.5, 2, C).astype(np.float32))
S = RNG.uniform(0.5, 2, (1, C, 1, 1)).astype(np.float32)
BIAS = RNG.normal(size=(1, C, 1, 1)).astype(np.float32)
K = G / np.sqrt(VAR + EPS)


def _model(nodes, inits, out_shape) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
                          [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in inits.items()])
    # opset 15: onnx.reference's BatchNormalization of opset 13 (onnx 1.x here) disagrees with onnxruntime's by 6.6
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)])


def bn(x, y):
    return helper.make_node("BatchNormalization", [x, "g", "beta", "mu", "var"], [y], epsilon=EPS)


STATS = {"g": G, "beta": BETA, "mu": MU, "var": VAR}


def kept() -> onnx.ModelProto:
    """x -> Conv c0 -> BN bn0 -> Mul mul0 -> Add add0 -> Relu r0 -> ConvTranspose t1 -> BN tb -> Relu y."""
    nodes = [helper.make_node("Conv", ["x", "W"], ["c0"], pads=[1] * 4), bn("c0", "bn0"),
             helper.make_node("Mul", ["bn0", "s"], ["mul0"]), helper.make_node("Add", ["mul0", "bias"], ["add0"]),
             helper.make_node("Relu", ["add0"], ["r0"]), helper.make_node("ConvTranspose", ["r0", "WT"], ["t1"], strides=[2, 2]),
             bn("t1", "tb"), helper.make_node("Relu", ["tb"], ["y"])]
    return _model(nodes, {"W": W, "WT": WT, "s": S, "bias": BIAS, **STATS}, [1, C, 16, 16])


def folded() -> onnx.ModelProto:
    """BN and Mul folded into Conv c0 (the name kept), the bias Add left; BN folded into ConvTranspose t1."""
    ks = K * S.reshape(-1)
    wf, bf = W * ks[:, None, None, None], (BETA - MU * K) * S.reshape(-1)
    wtf, btf = WT * K[None, :, None, None], BETA - MU * K
    nodes = [helper.make_node("Conv", ["x", "Wf", "Bf"], ["c0"], pads=[1] * 4), helper.make_node("Add", ["c0", "bias"], ["add0"]),
             helper.make_node("Relu", ["add0"], ["r0"]), helper.make_node("ConvTranspose", ["r0", "WTf", "BTf"], ["t1"], strides=[2, 2]),
             helper.make_node("Relu", ["t1"], ["y"])]
    return _model(nodes, {"Wf": wf, "Bf": bf, "bias": BIAS, "WTf": wtf, "BTf": btf}, [1, C, 16, 16])


def values(m: onnx.ModelProto, names, x) -> dict:
    m = onnx.ModelProto.FromString(m.SerializeToString())
    names = list(dict.fromkeys(names))
    have = {o.name for o in m.graph.output}
    m.graph.output.extend(helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in names if n not in have)
    return dict(zip(names, ReferenceEvaluator(m).run(names, {"x": x})))


@pytest.mark.parametrize("folded_first", [True, False])
def test_a_partly_folded_conv_pairs_with_the_last_tail_it_took_in(tmp_path, folded_first):
    f, k = tmp_path / "f.onnx", tmp_path / "k.onnx"
    onnx.save(folded(), f)
    onnx.save(kept(), k)
    x = RNG.normal(size=(1, 3, 8, 8)).astype(np.float32)
    a, b = (f, k) if folded_first else (k, f)
    res = api.diff(str(a), str(b), selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False),
                   inputs=api.InputSpec(arrays={"x": x}))
    pairs = {(r.pair.a.name, r.pair.b.name) if folded_first else (r.pair.b.name, r.pair.a.name) for r in res.results}
    assert {("c0", "mul0"), ("t1", "tb"), ("add0", "add0"), ("y", "y")} <= pairs, pairs
    assert ("c0", "c0") not in pairs and ("t1", "t1") not in pairs
    # the oracle: each pair's tensors agree when computed apart (float64 of the reference evaluator's float32)
    got_f, got_k = values(folded(), [p[0] for p in pairs], x), values(kept(), [p[1] for p in pairs], x)
    for p in pairs:
        np.testing.assert_allclose(got_f[p[0]], got_k[p[1]], rtol=1e-4, atol=1e-4, err_msg=str(p))
    assert all(r.passed for r in res.results), [(r.pair.a.name, r.pair.b.name, r.metrics.sqnr_db) for r in res.results]
    lost = {u.obs.name: u for u in (res.matching.unmatched_b if folded_first else res.matching.unmatched_a)}
    assert {"c0", "bn0", "t1"} <= set(lost) and all(lost[n].cause == "folded" for n in ("c0", "bn0", "t1")), lost


def test_a_conv_read_by_three_tail_chains_pairs_with_its_namesake(tmp_path):
    """One Conv whose output three BN -> Mul chains read, against a copy where each chain's Conv is its own (the
    same weights): the bare Conv outputs are one function and pair by name, each chain with its own."""
    def chains(n_convs: int) -> onnx.ModelProto:
        nodes, outs = [], []
        for i in range(3):
            c = "c0" if n_convs == 1 else f"c{i}" if i else "c0"
            if n_convs == 3 or i == 0:
                nodes.append(helper.make_node("Conv", ["x", "W"], [c], pads=[1] * 4))
            nodes += [bn(c, f"bn{i}"), helper.make_node("Mul", [f"bn{i}", "s"], [f"m{i}"])]
            outs.append(f"m{i}")
        nodes.append(helper.make_node("Sum", outs, ["y"]))
        return _model(nodes, {"W": W, "s": S, **STATS}, [1, C, 8, 8])

    one, three = tmp_path / "one.onnx", tmp_path / "three.onnx"
    onnx.save(chains(1), one)
    onnx.save(chains(3), three)
    x = RNG.normal(size=(1, 3, 8, 8)).astype(np.float32)
    res = api.diff(str(one), str(three), selection=api.Selection(all=True), config=api.RunConfig(device="cpu", cache=False),
                   inputs=api.InputSpec(arrays={"x": x}))
    pairs = {(r.pair.a.name, r.pair.b.name) for r in res.results}
    assert ("c0", "c0") in pairs and {("m0", "m0"), ("m1", "m1"), ("m2", "m2")} <= pairs, pairs
    assert all(r.passed for r in res.results)
