"""Models for the benchmark: a ResNet-18-like CNN built here (random He-initialised weights), and a
perturbed copy of any model (its weights x (1 + 1e-3 N(0,1)), checked to run and to differ) for the
diff benchmark."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def resnet18(path: Path, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    counter = [0]

    def name(kind: str) -> str:
        counter[0] += 1
        return f"{kind}{counter[0]}"

    def conv_bn(x: str, cin: int, cout: int, k: int, stride: int, relu: bool) -> str:
        n = name("conv")
        w = (rng.normal(size=(cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"{n}.weight"))
        nodes.append(helper.make_node("Conv", [x, f"{n}.weight"], [f"{n}_out"], name=n, kernel_shape=[k, k],
                                      strides=[stride, stride], pads=[k // 2] * 4))
        b = name("bn")
        for p, v in (("scale", rng.uniform(0.5, 1.5, cout)), ("bias", rng.normal(0, 0.1, cout)),
                     ("mean", rng.normal(0, 0.1, cout)), ("var", rng.uniform(0.5, 1.5, cout))):
            inits.append(numpy_helper.from_array(v.astype(np.float32), f"{b}.{p}"))
        nodes.append(helper.make_node("BatchNormalization", [f"{n}_out", f"{b}.scale", f"{b}.bias", f"{b}.mean", f"{b}.var"],
                                      [f"{b}_out"], name=b))
        out = f"{b}_out"
        if relu:
            r = name("relu")
            nodes.append(helper.make_node("Relu", [out], [f"{r}_out"], name=r))
            out = f"{r}_out"
        return out

    x = conv_bn("input", 3, 64, 7, 2, True)
    p = name("maxpool")
    nodes.append(helper.make_node("MaxPool", [x], [f"{p}_out"], name=p, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    x, cin = f"{p}_out", 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        for block in range(2):
            s = stride if block == 0 else 1
            y = conv_bn(x, cin, cout, 3, s, True)
            y = conv_bn(y, cout, cout, 3, 1, False)
            short = x if (s == 1 and cin == cout) else conv_bn(x, cin, cout, 1, s, False)
            a = name("add")
            nodes.append(helper.make_node("Add", [y, short], [f"{a}_out"], name=a))
            r = name("relu")
            nodes.append(helper.make_node("Relu", [f"{a}_out"], [f"{r}_out"], name=r))
            x, cin = f"{r}_out", cout
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap_out"], name="gap"))
    nodes.append(helper.make_node("Flatten", ["gap_out"], ["flat"], name="flatten"))
    inits.append(numpy_helper.from_array((rng.normal(size=(1000, 512)) / np.sqrt(512)).astype(np.float32), "fc.weight"))
    inits.append(numpy_helper.from_array(np.zeros(1000, np.float32), "fc.bias"))
    nodes.append(helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1))
    g = helper.make_graph(nodes, "resnet18_like", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 224, 224])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1000])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="onnxprobe-bench")
    m.ir_version = 8
    onnx.save(m, path)
    return path


# (op, input index) where a float tensor is a weight: perturbing it changes values, never shapes. A tensor
# is perturbed only when every reader takes it in such a slot (Resize scales, Pad values, Clip bounds,
# Range/ConstantOfShape arguments and the like are left alone: touching them breaks the model or
# measures something else)
WEIGHT_SLOTS = {
    "Conv": {1, 2}, "ConvTranspose": {1, 2}, "Gemm": {0, 1, 2}, "MatMul": {0, 1}, "BatchNormalization": {1, 2, 3, 4},
    "InstanceNormalization": {1, 2}, "LayerNormalization": {1, 2}, "GroupNormalization": {1, 2}, "PRelu": {1},
    "Add": {0, 1}, "Sub": {0, 1}, "Mul": {0, 1}, "Div": {0, 1}, "LSTM": {1, 2, 3}, "GRU": {1, 2, 3}, "RNN": {1, 2, 3},
    "Einsum": {0, 1, 2}, "Gather": {0}, "SkipLayerNormalization": {2, 3, 4}, "Attention": {1, 2},
}


def perturbed(src: Path, dst: Path, seed: int = 1) -> Path:
    """A copy whose weights (float initializers and Constants read only in a weight slot of
    WEIGHT_SLOTS; at least 8 elements) are x (1 + 1e-3 N(0, 1)). Raises when nothing was perturbed. The main
    graph's only: weights inside If/Loop/Scan bodies stay as they are (a model that keeps all of them there, as
    silero_vad, raises), and so do those read through an Identity (its slot is no weight slot)."""
    rng = np.random.default_rng(seed)
    m = onnx.load(str(src))
    readers: dict[str, list[tuple[str, int]]] = {}
    for n in m.graph.node:
        for k, i in enumerate(n.input):
            readers.setdefault(i, []).append((n.op_type, k))

    def is_weight(name: str, t: onnx.TensorProto) -> bool:
        uses = readers.get(name, [])
        return (t.data_type in (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE) and int(np.prod(t.dims)) >= 8
                and bool(uses) and all(k in WEIGHT_SLOTS.get(op, ()) for op, k in uses))

    count = 0

    def jitter(name: str, t: onnx.TensorProto) -> None:
        nonlocal count
        if is_weight(name, t):
            a = numpy_helper.to_array(t)
            t.CopyFrom(numpy_helper.from_array((a * (1 + 1e-3 * rng.normal(size=a.shape))).astype(a.dtype), t.name))
            count += 1

    for init in m.graph.initializer:
        jitter(init.name, init)
    for n in m.graph.node:
        if n.op_type == "Constant" and n.output:
            for a in n.attribute:
                if a.name == "value":
                    jitter(n.output[0], a.t)
    if not count:
        raise ValueError(f"{src}: no weight to perturb")
    if any(t.data_location == TensorProto.EXTERNAL for t in onnx.load(str(src), load_external_data=False).graph.initializer):
        # weights in a file beside the model, as the source keeps them (how onnxruntime and onnxprobe hold them differs)
        onnx.save(m, dst, save_as_external_data=True, location=dst.name + ".data")
    else:
        onnx.save(m, dst)
    return dst


def big_mlp(path: Path, layers: int = 4, width: int = 4096, seed: int = 0, external: bool = True) -> Path:
    """A model of big weights and small activations, its weights in an external data file beside it (as models over
    2 GB must keep them; ``external`` False: inside the .onnx file, as an exporter writes a model under 2 GB):
    ``layers`` MatMul+Tanh of [width, 2*width] and [2*width, width] float32 weights (4 layers of 4096: 512 MiB), one
    input row [1, width]. Where the memory goes is the weights'."""
    rng = np.random.default_rng(seed)
    vi, nodes, inits, x = helper.make_tensor_value_info, [], [], "x"
    for i in range(layers):
        a, b = (width, 2 * width) if i % 2 == 0 else (2 * width, width)
        inits.append(numpy_helper.from_array((rng.standard_normal((a, b), dtype=np.float32) / np.float32(np.sqrt(a))), f"W{i}"))
        y = "y" if i == layers - 1 else f"h{i}"
        nodes += [helper.make_node("MatMul", [x, f"W{i}"], [f"m{i}"], name=f"matmul{i}"),
                  helper.make_node("Tanh", [f"m{i}"], [y], name=f"tanh{i}")]
        x = y
    out_width = width if layers % 2 == 0 else 2 * width
    g = helper.make_graph(nodes, "big_mlp", [vi("x", TensorProto.FLOAT, [1, width])], [vi("y", TensorProto.FLOAT, [1, out_width])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    if external:
        onnx.save(m, path, save_as_external_data=True, location=path.name + ".data")
    else:
        onnx.save(m, path)
    return path


def deep_mlp(path: Path, blocks: int = 2000, width: int = 96, rows: int = 16, seed: int = 0) -> Path:
    """A deep model of small tensors: ``blocks`` MatMul + Add + Tanh of [width, width] weights on an input of
    [rows, width] (2,000 blocks: 6,000 tensors of 6 KiB, 6,000 nodes, 74 MB of weights). Where the time goes is
    what each tensor and node costs (a transformer export's thousands of nodes), not any one kernel."""
    rng = np.random.default_rng(seed)
    vi, nodes, inits, x = helper.make_tensor_value_info, [], [], "x"
    for i in range(blocks):
        inits += [numpy_helper.from_array(rng.standard_normal((width, width), dtype=np.float32) / np.float32(np.sqrt(width)), f"W{i}"),
                  numpy_helper.from_array(np.float32(0.1) * rng.standard_normal(width, dtype=np.float32), f"b{i}")]
        y = "y" if i == blocks - 1 else f"h{i}"
        nodes += [helper.make_node("MatMul", [x, f"W{i}"], [f"m{i}"], name=f"matmul{i}"),
                  helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"], name=f"add{i}"),
                  helper.make_node("Tanh", [f"a{i}"], [y], name=f"tanh{i}")]
        x = y
    g = helper.make_graph(nodes, "deep_mlp", [vi("x", TensorProto.FLOAT, [rows, width])], [vi("y", TensorProto.FLOAT, [rows, width])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def check_perturbed(src: Path, dst: Path, shapes: dict[str, tuple[int, ...]]) -> str:
    """Run both models on the same random inputs: the outputs must keep their shapes and differ. Returns
    one line saying by how much (raises otherwise: a benchmark input that is not what it claims)."""
    import onnxruntime as ort

    sa = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"])
    sb = ort.InferenceSession(str(dst), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {}
    for i in sa.get_inputs():
        dims = shapes.get(i.name) or [d if isinstance(d, int) else 1 for d in i.shape]
        kind = i.type.removeprefix("tensor(").removesuffix(")")
        try:  # the input's own element type: onnxruntime refuses any other
            dtype = np.dtype({"float": "float32", "double": "float64"}.get(kind, kind))
        except TypeError:
            raise ValueError(f"{src}: input {i.name} is a {i.type}, which this check cannot make") from None
        feeds[i.name] = (rng.random(dims).astype(dtype) if dtype.kind == "f"
                         else rng.integers(0, 2 if dtype.kind == "b" else 100, size=dims).astype(dtype))
    oa, ob = sa.run(None, feeds), sb.run(None, feeds)
    worst, rel = 0.0, 0.0
    for x, y, o in zip(oa, ob, sa.get_outputs()):
        if x.shape != y.shape:
            raise ValueError(f"{dst}: output {o.name} has shape {y.shape}, the original {x.shape}: the copy is broken")
        if x.dtype.kind == "f" and x.size:
            x, y = x.astype(np.float64), y.astype(np.float64)
            both = np.isfinite(x) & np.isfinite(y)
            # a NaN or Inf both give is no difference (max would be NaN, and hide the finite ones'); one
            # only the copy gives (or only the original) is a copy that computes something else
            if not np.array_equal(x[~both], y[~both], equal_nan=True):
                raise ValueError(f"{dst}: output {o.name} is NaN or Inf where the original's is not (or the reverse): "
                                 "the copy is broken")
            if both.any():
                d = float(np.max(np.abs(x[both] - y[both])))
                worst = max(worst, d)
                rel = max(rel, d / max(float(np.max(np.abs(x[both]))), 1e-30))
    if worst == 0.0:
        raise ValueError(f"{dst}: the perturbed copy gives the same outputs as the original: it measures nothing")
    # a detector's probability map on random pixels sits near 0: the relative figure says more there
    return (f"perturbed copy differs from the original by max|a-b| = {worst:.3g} on the outputs "
            f"({rel:.2g} of their largest |value|), same shapes")


def materialized(src: Path, dst: Path, seed: int = 0) -> Path:
    """An onnx-zoo "light" model (fetch_models.sh's onnx-light/: the real architecture, every weight made at
    load time by ConstantOfShape(0.02), so its activations blow up to 1e19) with each such weight replaced
    by a random initializer of the same name and shape, drawn for its role so that activations keep their
    scale: He-normal Conv and Gemm weights, BatchNormalization scales of 0.4-0.8 and variances near 1, small
    biases and means. The graph is otherwise unchanged (same opset; IR 4 at least, for initializers that are not
    graph inputs)."""
    rng = np.random.default_rng(seed)
    m = onnx.load(str(src))
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    uses: dict[str, tuple[onnx.NodeProto, int]] = {}
    for n in g.node:
        for k, i in enumerate(n.input):
            uses.setdefault(i, (n, k))
    keep, new_inits = [], []
    for n in g.node:
        if n.op_type != "ConstantOfShape" or n.input[0] not in inits:
            keep.append(n)
            continue
        shape = [int(v) for v in numpy_helper.to_array(inits[n.input[0]])]
        user, slot = uses.get(n.output[0], (None, -1))
        op = user.op_type if user is not None else ""
        if op == "Conv" and slot == 1:
            a = rng.normal(0.0, np.sqrt(2.0 / max(int(np.prod(shape[1:])), 1)), shape)
        elif op == "Gemm" and slot == 1:
            trans_b = any(at.name == "transB" and at.i for at in user.attribute)
            fan_in = shape[1] if trans_b else shape[0]
            a = rng.normal(0.0, np.sqrt(1.0 / max(fan_in, 1)), shape)
        elif op == "BatchNormalization" and slot == 1:  # scale below 1: residual sums stay O(1)
            a = rng.uniform(0.4, 0.8, shape)
        elif op == "BatchNormalization" and slot == 4:  # variance
            a = rng.uniform(0.8, 1.2, shape)
        else:
            a = rng.normal(0.0, 0.05, shape)
        new_inits.append(numpy_helper.from_array(a.astype(np.float32), n.output[0]))
    used = {i for n in keep for i in n.input}
    kept_inits = [t for t in g.initializer if t.name in used]
    del g.node[:]
    g.node.extend(keep)
    del g.initializer[:]
    g.initializer.extend(kept_inits + new_inits)
    # the zoo files are IR 3, where every initializer is also a graph input: keep the real inputs only
    # (IR 4 and later allow that)
    made = {t.name for t in new_inits}
    real = [v for v in g.input if v.name not in inits and v.name not in made]
    del g.input[:]
    g.input.extend(real)
    m.ir_version = max(m.ir_version, 4)
    onnx.save(m, dst)
    return dst
