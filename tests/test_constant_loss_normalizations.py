"""The sum of a LayerNormalization output whose scale holds one value is a constant (its normalized values sum
to 0 over the normalized axes), as is an InstanceNormalization's: the gradients of such a loss are rounding
noise. A freshly initialised transformer has LayerNorm scales of 1 (tiny BERT's last_hidden_state, whose
`grad` rows looked like gradients, and whose legacy-vs-dynamo `diff --grad` passed on noise). `grad` says so,
`diff --grad` refuses a verdict; a scale of several values, or the LayerNormalization's mean output, is a loss
like any other.

Oracle: onnxruntime runs the model on two unrelated inputs: the sums of the output agree (to rounding) for the
constant cases and differ for the others; numpy float64 LayerNorm for the non-constant case's gradient sign.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from onnxprobe import api
from onnxprobe.autodiff.constant_loss import constant_sum

CPU = api.RunConfig(device="cpu", opt_level="off")
RNG = np.random.default_rng(11)
X = RNG.standard_normal((2, 3, 8)).astype(np.float32)
W = RNG.standard_normal((8, 8)).astype(np.float32)


def _model(path, norm: str, scale: np.ndarray, out_index: int = 0, via_identity: bool = False):
    """x[2,3,8] -> MatMul(W) -> norm (scale, bias) -> y (its output ``out_index``)."""
    inits = [numpy_helper.from_array(W, "W"), numpy_helper.from_array(RNG.standard_normal(scale.shape).astype(np.float32), "beta")]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"])]
    if via_identity:  # torch's exporter: one initializer for equal weights, the others as its Identity
        inits.append(numpy_helper.from_array(scale, "gamma0"))
        nodes.append(helper.make_node("Identity", ["gamma0"], ["gamma"]))
    else:
        inits.append(numpy_helper.from_array(scale, "gamma"))
    if norm == "LayerNormalization":
        outs = ["y", "mean", "inv"] if out_index else ["n"]
        nodes.append(helper.make_node("LayerNormalization", ["h", "gamma", "beta"], outs, axis=-1))
        if not out_index:
            nodes.append(helper.make_node("Reshape", ["n", "shape"], ["y"]))
            inits.append(numpy_helper.from_array(np.array([6, 8], np.int64), "shape"))
        outputs = [helper.make_tensor_value_info("y" if not out_index else "mean", TensorProto.FLOAT, None)]
    else:  # InstanceNormalization over x as [N=2, C=3, L=8]
        nodes.append(helper.make_node("InstanceNormalization", ["h", "gamma", "beta"], ["y"]))
        outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8])], outputs, inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _sums_agree(path) -> bool:
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    other = (RNG.standard_normal(X.shape) * 5 + 3).astype(np.float32)
    y1, y2 = (float(np.sum(s.run(None, {"x": x})[0], dtype=np.float64)) for x in (X, other))
    return abs(y1 - y2) <= 1e-4 * max(1.0, abs(y1))


def test_a_layernorm_of_one_scale_value_is_a_constant_loss(tmp_path):
    for via in (False, True):
        path = _model(tmp_path / f"ln{via}.onnx", "LayerNormalization", np.full(8, 2.0, np.float32), via_identity=via)
        assert _sums_agree(path)
        res = api.grad(path, config=CPU, inputs={"x": X})
        assert any("LayerNormalization whose scale is 2 everywhere (through Reshape)" in n and "constant" in n
                   for n in res.plan.warnings), res.plan.warnings


def test_an_instance_norm_is_a_constant_loss_whatever_its_scale(tmp_path):
    path = _model(tmp_path / "in.onnx", "InstanceNormalization", RNG.standard_normal(3).astype(np.float32))
    assert _sums_agree(path)
    assert "InstanceNormalization" in constant_sum(onnx.load(path), "y").what


def test_a_layernorm_of_several_scale_values_or_its_mean_is_a_loss_like_any(tmp_path):
    varied = _model(tmp_path / "v.onnx", "LayerNormalization", RNG.standard_normal(8).astype(np.float32))
    mean = _model(tmp_path / "m.onnx", "LayerNormalization", np.ones(8, np.float32), out_index=1)
    for path, out in ((varied, "y"), (mean, "mean")):
        assert not _sums_agree(path)
        assert constant_sum(onnx.load(path), out) is None
    res = api.grad(varied, config=CPU, inputs={"x": X})
    assert not any("constant" in n for n in res.plan.warnings + res.notes), res.plan.warnings


def test_diff_grad_of_such_a_loss_earns_no_verdict(tmp_path):
    """Of the gradients before the normalization (here --wrt W; its own scale's is real: below)."""
    a = _model(tmp_path / "a.onnx", "LayerNormalization", np.ones(8, np.float32))
    b = _model(tmp_path / "b.onnx", "LayerNormalization", np.ones(8, np.float32), via_identity=True)
    res = api.diff_grad(a, b, api.GradSpec(wrt=("W",)), config=CPU, inputs={"x": X})
    verdict, line = res.verdict()
    assert verdict == "error" and "nothing was compared meaningfully" in line, line


def test_the_layernorm_scales_gradient_is_no_noise(tmp_path):
    """The sum is constant in everything before the LayerNormalization, not in its scale: dL/dgamma is the
    normalized values summed over the rows (numpy float64 oracle), so `grad` does not call it noise and a
    diff --grad of models whose MatMul weights differ fails on it (it said 'nothing was compared meaningfully:
    the loss does not depend on the weights ... every gradient is ~0' over a gamma gradient 6 apart)."""
    global W
    a = _model(tmp_path / "a.onnx", "LayerNormalization", np.ones(8, np.float32))
    res = api.grad(a, config=CPU, inputs={"x": X}, save=True)
    h = X.astype(np.float64) @ W.astype(np.float64)
    n = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(np.asarray(res.arrays["gamma"], np.float64), n.sum((0, 1)), atol=1e-4)
    assert np.abs(n.sum((0, 1))).max() > 0.5  # no rounding noise
    said = [w for w in res.plan.warnings if "constant" in w]
    assert said and "every gradient is" not in said[0] and "'gamma'" in said[0], said
    saved, W = W, RNG.standard_normal((8, 8)).astype(np.float32)
    try:
        b = _model(tmp_path / "b.onnx", "LayerNormalization", np.ones(8, np.float32))
    finally:
        W = saved
    res = api.diff_grad(a, b, config=CPU, inputs={"x": X})
    verdict, line = res.verdict()
    assert verdict == "fail", line
    assert any(r.pair.a.name == "gamma_grad" and not r.passed for r in res.results), [(r.pair.a.name, r.passed) for r in res.results]


def _bias_from_data(path, norm: str, bias_is_input: bool):
    """x -> MatMul(W) -> norm whose scale is one value (LayerNormalization) but whose bias is the data's: a
    graph input, or computed from x. The output then sums to a function of the data, not a constant."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8])]
    size = 8 if norm == "LayerNormalization" else 3
    if bias_is_input:
        inputs.append(helper.make_tensor_value_info("b", TensorProto.FLOAT, [size]))
    else:  # b = x[0, 0, :size] * 1: read from the data
        nodes.append(helper.make_node("Slice", ["x", "st", "en", "ax"], ["xs"]))
        nodes.append(helper.make_node("Reshape", ["xs", "bshape"], ["b"]))
    inits = [numpy_helper.from_array(W, "W"), numpy_helper.from_array(np.ones(size, np.float32), "gamma"),
             numpy_helper.from_array(np.array([0, 0, 0], np.int64), "st"),
             numpy_helper.from_array(np.array([1, 1, size], np.int64), "en"),
             numpy_helper.from_array(np.array([0, 1, 2], np.int64), "ax"),
             numpy_helper.from_array(np.array([size], np.int64), "bshape")]
    nodes.append(helper.make_node(norm, ["h", "gamma", "b"], ["y"], **({"axis": -1} if norm == "LayerNormalization" else {})))
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_a_normalization_whose_bias_is_the_datas_is_no_constant_loss(tmp_path):
    for norm in ("LayerNormalization", "InstanceNormalization"):
        for as_input in (False, True):
            path = _bias_from_data(tmp_path / f"{norm}{as_input}.onnx", norm, as_input)
            s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            feeds = [{"x": x} for x in (X, (RNG.standard_normal(X.shape) * 5 + 3).astype(np.float32))]
            if as_input:
                size = 8 if norm == "LayerNormalization" else 3
                for f in feeds:
                    f["b"] = RNG.standard_normal(size).astype(np.float32)
            y1, y2 = (float(np.sum(s.run(None, f)[0], dtype=np.float64)) for f in feeds)
            assert abs(y1 - y2) > 1e-2  # oracle: the sum follows the data
            assert constant_sum(onnx.load(path), "y") is None, (norm, as_input)
            res = api.grad(path, config=CPU, inputs=feeds[0])
            assert not any("constant" in n for n in res.plan.warnings), res.plan.warnings


def test_noise_gradients_beside_the_live_scale_are_shown_but_not_judged(tmp_path):
    """diff --grad of two such models whose MatMul weights differ by a rounding: the scale's gradient (real)
    agrees and is judged; W's gradient is rounding noise on both sides (the loss is constant in W: numpy
    oracle below), so its row reads "noise", unjudged, and neither passes nor fails the comparison (it read
    "ok" or "FAIL" by chance, and a FAIL failed the diff)."""
    a = _model(tmp_path / "a.onnx", "LayerNormalization", np.ones(8, np.float32))
    m = onnx.load(a)
    w = next(t for t in m.graph.initializer if t.name == "W")
    wa = numpy_helper.to_array(w)
    w.CopyFrom(numpy_helper.from_array((wa * (1 + 1e-6 * RNG.standard_normal(wa.shape))).astype(np.float32), "W"))
    b = tmp_path / "b.onnx"
    onnx.save(m, b)
    assert _sums_agree(a) and _sums_agree(b)  # the oracle: the sum does not move with the input, nor with W
    res = api.diff_grad(a, b, config=CPU, inputs={"x": X})
    rows = {r.pair.a.name: r for r in res.results}
    assert rows["gamma_grad"].passed is True, rows["gamma_grad"]
    noise = rows["W_grad"]
    assert noise.passed is None and noise.metrics is not None and "rounding noise" in noise.unjudged, noise
    verdict, line = res.verdict()
    assert verdict == "pass", line
    from onnxprobe.report.diff import diff_dict, diff_table

    d = diff_dict(res)
    row = next(p for p in d["pairs"] if p["a"] == "W_grad")
    assert row["unjudged"] and row["passed"] is None
    table = diff_table(d)
    assert any("noise" in str(c) for r in table.rows for c in r.cells), table.rows
    # --format csv / json rows: the reason under "unjudged", as --json has it, and no "problem"
    rec = next(r for r in table.records() if r["tensor"] == "W_grad")
    assert rec["unjudged"] and "rounding noise" in rec["unjudged"] and rec["problem"] is None, rec


def test_the_diff_grad_footer_counts_noise_rows_apart_from_pairs_not_compared(tmp_path):
    """Noise rows were compared (their numbers are shown) but not judged: the footer said "N not compared"
    for them, as for a pair with no numbers at all (an empty tensor, shapes that differ), which contradicts
    the rows above it. It counts them as noise."""
    from rich.console import Console

    from onnxprobe.report.diff import diff_dict, diff_renderables

    a = _model(tmp_path / "a.onnx", "LayerNormalization", np.ones(8, np.float32))
    res = api.diff_grad(a, a, config=CPU, inputs={"x": X})
    d = diff_dict(res)
    noise = [p for p in d["pairs"] if p.get("unjudged")]
    assert noise and all(p["passed"] is None and p["max_abs"] is not None for p in noise)
    c = Console(width=200, record=True, file=open("/dev/null", "w"))
    for r in diff_renderables(d, width=200):
        c.print(r)
    text = " ".join(c.export_text().split())
    assert "not compared" not in text, text
    assert f"{len(noise)} noise (not judged)" in text, text


def test_the_bias_and_output_gradients_of_a_constant_layernorm_sum_are_judged_not_noise(tmp_path):
    """The sum of a LayerNormalization of one scale value is constant in every tensor before it, not in its
    bias (dL/dβ = the number of rows) nor in its output and what follows it (dL/dy = 1): their gradients
    are real (finite differences in float64 agree, below), and diff --grad read them "rounding noise: the
    loss is constant in this tensor". They are compared and judged; W's and h's stay noise."""
    a = _model(tmp_path / "a.onnx", "LayerNormalization", np.ones(8, np.float32))
    g = api.grad(a, api.Selection(all=True), config=CPU, inputs={"x": X}, check=True)
    real = {r.name for r in g.rows if r.check is not None and r.check["ok"]}
    assert {"beta", "y"} <= real, [(r.name, r.check) for r in g.rows]
    res = api.diff_grad(a, a, config=CPU, inputs={"x": X})
    rows = {r.pair.a.name: r for r in res.results}
    for name in ("beta_grad", "y_grad", "gamma_grad"):
        assert rows[name].passed is True and rows[name].unjudged is None, rows[name]
    for name in ("W_grad", "h_grad"):
        assert rows[name].passed is None and "rounding noise" in rows[name].unjudged, rows[name]


def test_a_mean_variance_normalization_is_a_constant_loss(tmp_path):
    """Its output sums to 0 over the normalized axes, whatever the data: the sum loss's gradients are noise
    (an LpNormalization's sum is no constant)."""
    paths = {}
    for op, attrs in (("MeanVarianceNormalization", dict(axes=[0, 2])), ("LpNormalization", dict(axis=-1))):
        m = helper.make_model(helper.make_graph(
            [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node(op, ["h"], ["n"], **attrs),
             helper.make_node("Reshape", ["n", "shape"], ["y"])], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 8])],
            [numpy_helper.from_array(W, "W"), numpy_helper.from_array(np.array([6, 8], np.int64), "shape")]),
            opset_imports=[helper.make_opsetid("", 17)])
        paths[op] = tmp_path / f"{op}.onnx"
        onnx.save(m, paths[op])
    assert _sums_agree(paths["MeanVarianceNormalization"]) and not _sums_agree(paths["LpNormalization"])
    res = api.grad(paths["MeanVarianceNormalization"], config=CPU, inputs={"x": X})
    assert any("MeanVarianceNormalization (through Reshape)" in n and "constant" in n for n in res.plan.warnings), \
        res.plan.warnings
    assert constant_sum(onnx.load(paths["LpNormalization"]), "y") is None
