"""com.microsoft's float ops, which onnxruntime's optimized ("extended") models hold (FusedMatMul, Gelu,
BiasGelu, FastGelu, QuickGelu, SkipLayerNormalization, FusedConv...): onnx's shape inference knows none of
them, so their outputs and everything downstream read dtype "?". Their types must be known after loading,
and be the ones onnxruntime's session reports for the same tensors as outputs (an independent oracle)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

from conftest import make_model
from onnxprobe import api
from onnxprobe.graph.model import Model

ORT_TYPES = {"tensor(float)": "float32", "tensor(float16)": "float16", "tensor(int32)": "int32"}


def _fused_model(dt=np.float32) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    ft = helper.np_dtype_to_tensor_dtype(np.dtype(dt))
    w = lambda *s: rng.normal(size=s).astype(dt)  # noqa: E731
    inits = [numpy_helper.from_array(w(8, 8), "W"), numpy_helper.from_array(w(8), "b"), numpy_helper.from_array(w(8), "g"),
             numpy_helper.from_array(w(8), "beta"), numpy_helper.from_array(w(8, 8), "W2"),
             numpy_helper.from_array(w(8, 4, 3, 3), "K"), numpy_helper.from_array(w(8), "kb")]
    ms = "com.microsoft"
    nodes = [helper.make_node("FusedMatMul", ["x", "W"], ["mm"], name="fmm", domain=ms, alpha=0.5, transB=1),
             helper.make_node("BiasGelu", ["mm", "b"], ["bg"], name="biasgelu", domain=ms),
             helper.make_node("Gelu", ["bg"], ["ge"], name="gelu", domain=ms),
             helper.make_node("SkipLayerNormalization", ["ge", "x", "g", "beta"], ["sln", "mean", "isd", "sum"],
                              name="skipln", domain=ms, epsilon=1e-5),
             helper.make_node("Relu", ["sln"], ["r"], name="relu"),
             helper.make_node("FastGelu", ["r", "b"], ["fg"], name="fastgelu", domain=ms),
             helper.make_node("QuickGelu", ["fg"], ["qg"], name="quickgelu", domain=ms, alpha=1.702),
             helper.make_node("MatMul", ["qg", "W2"], ["mm2"], name="matmul2"),
             helper.make_node("Add", ["mm2", "sum"], ["y"], name="add"),
             helper.make_node("FusedConv", ["img", "K", "kb"], ["conv"], name="fconv", domain=ms, activation="Relu",
                              pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["conv"], ["z"], name="sig")]
    m = make_model(nodes, [helper.make_tensor_value_info("x", ft, [2, 3, 8]), helper.make_tensor_value_info("img", ft, [1, 4, 5, 5])],
                   [helper.make_tensor_value_info("y", ft, None), helper.make_tensor_value_info("z", ft, None)], inits)
    m.opset_import.append(helper.make_opsetid(ms, 1))
    return m


def _ort_types(m: onnx.ModelProto) -> dict[str, str]:
    """What onnxruntime's session reports for every node output, each made a graph output (no type given)."""
    o = onnx.ModelProto()
    o.CopyFrom(m)
    have = {v.name for v in o.graph.output}
    o.graph.output.extend(onnx.ValueInfoProto(name=t) for n in o.graph.node for t in n.output if t and t not in have)
    s = ort.InferenceSession(o.SerializeToString(), providers=["CPUExecutionProvider"])
    return {v.name: ORT_TYPES.get(v.type, v.type) for v in s.get_outputs()}


def _feeds(dt):
    rng = np.random.default_rng(1)
    return {"x": rng.normal(size=(2, 3, 8)).astype(dt), "img": rng.normal(size=(1, 4, 5, 5)).astype(dt)}


@pytest.mark.parametrize("dt", [np.float32, np.float16])
def test_contrib_float_ops_outputs_have_onnxruntimes_types(dt):
    m = _fused_model(dt)
    oracle = _ort_types(m)
    loaded = Model.of(m, "fused")
    from onnxprobe.graph.shapes import dtype_name, value_types

    types = value_types(loaded.proto)
    got = {name: dtype_name(types[name].tensor_type.elem_type) if name in types else None for name in oracle}
    assert got == oracle
    assert oracle["mean"] == "float32" and oracle["sln"] == np.dtype(dt).name  # the schema's U is float alone


def test_layers_dtypes_and_statistics_of_contrib_float_outputs(tmp_path):
    p = tmp_path / "fused.onnx"
    m = _fused_model()
    onnx.save(m, p)
    feeds = _feeds(np.float32)
    res = api.layers(p, api.Selection(all=True), api.RunConfig(device="cpu", cache=False), api.InputSpec(arrays=feeds))
    dtypes = {pr.ref.name: pr.ref.dtype for pr in res.plan.probes}
    oracle = _ort_types(m)
    assert {k: dtypes[k] for k in oracle} == oracle
    # statistics against numpy float64 on onnxruntime's exposed values
    names = ("mm", "bg", "ge", "sln", "mean", "fg", "qg", "y", "conv", "z")
    vals = api.run(p, feeds, api.RunConfig(device="cpu", cache=False), api.Selection(names=names), raw=True).arrays
    for name in names:
        assert vals[name].dtype == np.float32, name
        v, st = vals[name].astype(np.float64), res.stats[name]
        assert (st.min, st.max, st.count) == (v.min(), v.max(), v.size), name
        assert st.mean == pytest.approx(v.mean(), rel=1e-12, abs=1e-12), name
        assert st.std == pytest.approx(v.std(), rel=1e-9, abs=1e-12), name



@pytest.mark.parametrize("dt", [np.float32, np.float16])
def test_contrib_float_op_in_a_loop_body_reading_a_carried_value(dt):
    # a Loop body's inputs are typed by onnx's inference from the Loop's inputs, but only the bodies' value_info
    # was kept: a com.microsoft op reading a carried value (declared without a type, as exporters write bodies)
    # stayed dtype "?" with what followed it. Oracle: onnxruntime's type of the scan output the body's
    # FastGelu output becomes.
    ft = helper.np_dtype_to_tensor_dtype(np.dtype(dt))
    body = helper.make_graph(
        [helper.make_node("FastGelu", ["v"], ["v2"], domain="com.microsoft"),
         helper.make_node("Identity", ["cond"], ["cond_o"]), helper.make_node("Identity", ["v2"], ["sc"])], "body",
        [helper.make_tensor_value_info("i", onnx.TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", onnx.TensorProto.BOOL, []), onnx.ValueInfoProto(name="v")],
        [helper.make_tensor_value_info("cond_o", onnx.TensorProto.BOOL, []), onnx.ValueInfoProto(name="v2"),
         onnx.ValueInfoProto(name="sc")])
    m = make_model([helper.make_node("Loop", ["n", "", "x"], ["vf", "scans"], body=body)],
                   [helper.make_tensor_value_info("x", ft, [2, 4]), helper.make_tensor_value_info("n", onnx.TensorProto.INT64, [])],
                   [onnx.ValueInfoProto(name="vf"), onnx.ValueInfoProto(name="scans")], [])
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    oracle = _ort_types(m)["scans"]
    from onnxprobe.graph.shapes import dtype_name, value_types

    types = value_types(Model.of(m, "loop").proto)
    assert {k: dtype_name(types[k].tensor_type.elem_type) if k in types else None for k in ("v", "v2", "sc")} == \
        dict.fromkeys(("v", "v2", "sc"), oracle)


def test_an_mse_loss_of_a_contrib_output_knows_its_shape(tmp_path):
    """`grad --loss mse` of a model whose output a com.microsoft op writes (QuickGelu, Gelu, FusedMatMul...)
    stopped on "cannot sum the gradient back to the shape of 'onnxprobe.loss/sub': its rank is unknown" (QA):
    onnx's inference knows not the op, and a graph output's declared type was no source for what reads it.
    Oracle: dL/dy = 2 (y - t) / N, y = x sigmoid(1.702 x) in float64."""
    import onnx
    from onnx import TensorProto, helper
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    g = helper.make_graph([helper.make_node("QuickGelu", ["x"], ["y"], domain="com.microsoft", name="qg")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]),
              str(tmp_path / "m.onnx"))
    x = np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4)
    t = np.full((2, 4), 0.3, np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "t.npy", t)
    r = CliRunner().invoke(app, ["grad", str(tmp_path / "m.onnx"), "--loss", "mse", "--target", str(tmp_path / "t.npy"),
                                 "--input", f"x={tmp_path / 'x.npy'}", "--save-grads", str(tmp_path / "g.npz")])
    assert r.exit_code == 0, r.output
    x64 = x.astype(np.float64)
    y = x64 / (1 + np.exp(-1.702 * x64))
    np.testing.assert_allclose(np.load(tmp_path / "g.npz")["y"], 2 * (y - t) / y.size, rtol=1e-5, atol=1e-7)


def test_ai_onnx_ml_outputs_have_onnxruntimes_types():
    """onnx has no type inference for many ai.onnx.ml ops (Scaler, Normalizer, ...): their outputs, and the
    standard ops after them, read dtype "?" in `layers`. Oracle: onnxruntime's session types."""
    ml = "ai.onnx.ml"
    nodes = [helper.make_node("Scaler", ["x"], ["s"], domain=ml, offset=[0.5] * 3, scale=[2.0] * 3, name="scaler"),
             helper.make_node("Normalizer", ["s"], ["n"], domain=ml, norm="L2", name="norm"),
             helper.make_node("Relu", ["n"], ["r"], name="relu"),
             helper.make_node("Binarizer", ["r"], ["b"], domain=ml, threshold=0.1, name="bin"),
             helper.make_node("Cast", ["b"], ["y"], to=onnx.TensorProto.DOUBLE, name="cast")]
    m = make_model(nodes, [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])],
                   [onnx.ValueInfoProto(name="y")], [])
    m.opset_import.append(helper.make_opsetid(ml, 3))
    oracle = {k: ORT_TYPES.get(v, "float64" if v == "tensor(double)" else v) for k, v in _ort_types(m).items()}
    from onnxprobe.graph.shapes import dtype_name, value_types

    types = value_types(Model.of(m, "ml").proto)
    got = {name: dtype_name(types[name].tensor_type.elem_type) if name in types else None for name in oracle}
    assert got == oracle == {"s": "float32", "n": "float32", "r": "float32", "b": "float32", "y": "float64"}
