"""Build the small ONNX sample models used by onnxprobe's tests and docs.

Usage:
    python sample_models/build.py [OUTDIR]

OUTDIR defaults to the folder this script lives in. The output is deterministic:
running the script again rewrites every file byte-for-byte identically (fixed
RNG seed, no timestamps, fixed producer and IR version).

Only onnx.helper / onnx.numpy_helper / numpy are used to build the graphs.
After writing, every model is re-loaded from disk and verified:
  * onnx.checker.check_model(..., full_check=True)
  * runs in onnxruntime (CPU, ORT_DISABLE_ALL)
  * onnx.reference.ReferenceEvaluator agrees with onnxruntime to ~1e-5
  * file size under 1 MB
"""

from __future__ import annotations

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8  # IR 8 covers opset 17, so older onnxruntime builds load these.
PRODUCER = "onnxprobe-samples"
SEED = 20240601
MAX_BYTES = 1 << 20

FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64
BOOL = TensorProto.BOOL


# --------------------------------------------------------------------------
# shared helpers
# --------------------------------------------------------------------------


class Inits:
    """Collects initializers for one graph, drawing weights from a shared RNG."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.tensors: list[TensorProto] = []

    def add(self, name: str, array) -> str:
        self.tensors.append(numpy_helper.from_array(np.asarray(array), name=name))
        return name

    def weight(self, name: str, shape, fan_in: int) -> str:
        """Normal weights scaled by 1/sqrt(fan_in) so activations stay O(1)."""
        w = self.rng.standard_normal(shape) / np.sqrt(fan_in)
        return self.add(name, w.astype(np.float32))

    def bias(self, name: str, n: int, scale: float = 0.1) -> str:
        return self.add(name, (self.rng.standard_normal(n) * scale).astype(np.float32))

    def scalar(self, name: str, value: float) -> str:
        return self.add(name, np.array(value, dtype=np.float32))

    def ints(self, name: str, values) -> str:
        return self.add(name, np.array(values, dtype=np.int64))


def node(op: str, inputs, outputs, name: str, **attrs) -> onnx.NodeProto:
    return helper.make_node(op, list(inputs), list(outputs), name=name, **attrs)


def make_model(graph: onnx.GraphProto, doc: str) -> onnx.ModelProto:
    model = helper.make_model(
        graph,
        producer_name=PRODUCER,
        opset_imports=[helper.make_opsetid("", OPSET)],
    )
    model.ir_version = IR_VERSION
    model.doc_string = doc
    return model


def write_model(model: onnx.ModelProto, path: str) -> None:
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


# --------------------------------------------------------------------------
# model builders
# --------------------------------------------------------------------------


def build_cnn(rng: np.random.Generator) -> onnx.ModelProto:
    """Conv -> BN -> Relu -> MaxPool -> Conv(s2) -> Relu -> GAP -> Flatten -> Gemm."""
    w = Inits(rng)
    w.weight("conv1.weight", (8, 3, 3, 3), fan_in=3 * 9)
    w.bias("conv1.bias", 8)
    w.add("bn1.scale", rng.uniform(0.5, 1.5, 8).astype(np.float32))
    w.bias("bn1.bias", 8)
    w.add("bn1.mean", (rng.standard_normal(8) * 0.1).astype(np.float32))
    w.add("bn1.var", rng.uniform(0.5, 1.5, 8).astype(np.float32))
    w.weight("conv2.weight", (16, 8, 3, 3), fan_in=8 * 9)
    w.bias("conv2.bias", 16)
    w.weight("fc.weight", (10, 16), fan_in=16)  # [out, in], used with transB=1
    w.bias("fc.bias", 10)

    nodes = [
        node("Conv", ["image", "conv1.weight", "conv1.bias"], ["conv1_out"], "conv1",
             kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("BatchNormalization",
             ["conv1_out", "bn1.scale", "bn1.bias", "bn1.mean", "bn1.var"],
             ["bn1_out"], "bn1", epsilon=1e-5),
        node("Relu", ["bn1_out"], ["relu1_out"], "relu1"),
        node("MaxPool", ["relu1_out"], ["pool1_out"], "pool1",
             kernel_shape=[2, 2], strides=[2, 2]),
        node("Conv", ["pool1_out", "conv2.weight", "conv2.bias"], ["conv2_out"], "conv2",
             kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
        node("Relu", ["conv2_out"], ["relu2_out"], "relu2"),
        node("GlobalAveragePool", ["relu2_out"], ["gap_out"], "gap"),
        node("Flatten", ["gap_out"], ["flat_out"], "flatten", axis=1),
        node("Gemm", ["flat_out", "fc.weight", "fc.bias"], ["logits"], "fc", transB=1),
    ]
    graph = helper.make_graph(
        nodes, "cnn",
        [helper.make_tensor_value_info("image", FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("logits", FLOAT, [1, 10])],
        initializer=w.tensors,
    )
    return make_model(graph, "Small CNN: conv, batchnorm, pooling, gemm.")


def build_transformer_block(rng: np.random.Generator) -> onnx.ModelProto:
    """Pre-LN transformer encoder block, attention written out op by op."""
    seq, hidden, heads, head_dim, ffn = 8, 32, 4, 8, 64
    w = Inits(rng)
    for ln in ("ln1", "ln2"):
        w.add(f"block/{ln}.scale", (1.0 + rng.standard_normal(hidden) * 0.1).astype(np.float32))
        w.bias(f"block/{ln}.bias", hidden)
    for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
        w.weight(f"block/attn/{proj}.weight", (hidden, hidden), fan_in=hidden)
        w.bias(f"block/attn/{proj}.bias", hidden)
    w.weight("block/mlp/fc1.weight", (hidden, ffn), fan_in=hidden)
    w.bias("block/mlp/fc1.bias", ffn)
    w.weight("block/mlp/fc2.weight", (ffn, hidden), fan_in=ffn)
    w.bias("block/mlp/fc2.bias", hidden)
    w.ints("block/attn/heads_shape", [0, 0, heads, head_dim])  # 0 = copy dim
    w.ints("block/attn/merged_shape", [0, 0, hidden])
    w.scalar("block/attn/inv_sqrt_head_dim", 1.0 / np.sqrt(head_dim))
    w.scalar("block/mlp/inv_sqrt2", 1.0 / np.sqrt(2.0))
    w.scalar("block/mlp/one", 1.0)
    w.scalar("block/mlp/half", 0.5)

    a = "block/attn/"
    m = "block/mlp/"
    nodes = [
        node("LayerNormalization", ["x", "block/ln1.scale", "block/ln1.bias"], ["ln1_out"],
             "block/ln1", axis=-1, epsilon=1e-5),
    ]
    # Q, K, V projections and split into heads.
    for p, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        nodes += [
            node("MatMul", ["ln1_out", f"{a}{p}_proj.weight"], [f"{p}_matmul"],
                 f"{a}{p}_proj"),
            node("Add", [f"{p}_matmul", f"{a}{p}_proj.bias"], [f"{p}"], f"{a}{p}_proj/bias"),
            node("Reshape", [f"{p}", f"{a}heads_shape"], [f"{p}_heads"], f"{a}{p}_reshape"),
            # q, v -> [b, heads, seq, dim]; k -> [b, heads, dim, seq] (K^T)
            node("Transpose", [f"{p}_heads"], [f"{p}_t"], f"{a}{p}_transpose", perm=perm),
        ]
    nodes += [
        node("MatMul", ["q_t", "k_t"], ["scores"], f"{a}qk_matmul"),
        node("Mul", ["scores", f"{a}inv_sqrt_head_dim"], ["scores_scaled"], f"{a}scale"),
        node("Softmax", ["scores_scaled"], ["attn_probs"], f"{a}softmax", axis=-1),
        node("MatMul", ["attn_probs", "v_t"], ["context_heads"], f"{a}av_matmul"),
        node("Transpose", ["context_heads"], ["context_t"], f"{a}context_transpose",
             perm=[0, 2, 1, 3]),
        node("Reshape", ["context_t", f"{a}merged_shape"], ["context"], f"{a}context_reshape"),
        node("MatMul", ["context", f"{a}out_proj.weight"], ["attn_matmul"], f"{a}out_proj"),
        node("Add", ["attn_matmul", f"{a}out_proj.bias"], ["attn_out"], f"{a}out_proj/bias"),
        node("Add", ["x", "attn_out"], ["resid1"], "block/residual1"),
        node("LayerNormalization", ["resid1", "block/ln2.scale", "block/ln2.bias"], ["ln2_out"],
             "block/ln2", axis=-1, epsilon=1e-5),
        node("MatMul", ["ln2_out", f"{m}fc1.weight"], ["fc1_matmul"], f"{m}fc1"),
        node("Add", ["fc1_matmul", f"{m}fc1.bias"], ["fc1_out"], f"{m}fc1/bias"),
        # GELU (exact): x * 0.5 * (1 + erf(x / sqrt(2)))
        node("Mul", ["fc1_out", f"{m}inv_sqrt2"], ["gelu_scaled"], f"{m}gelu/mul_inv_sqrt2"),
        node("Erf", ["gelu_scaled"], ["gelu_erf"], f"{m}gelu/erf"),
        node("Add", ["gelu_erf", f"{m}one"], ["gelu_erf_plus1"], f"{m}gelu/add_one"),
        node("Mul", ["fc1_out", f"{m}half"], ["gelu_half_x"], f"{m}gelu/mul_half"),
        node("Mul", ["gelu_half_x", "gelu_erf_plus1"], ["gelu_out"], f"{m}gelu/mul"),
        node("MatMul", ["gelu_out", f"{m}fc2.weight"], ["fc2_matmul"], f"{m}fc2"),
        node("Add", ["fc2_matmul", f"{m}fc2.bias"], ["mlp_out"], f"{m}fc2/bias"),
        node("Add", ["resid1", "mlp_out"], ["y"], "block/residual2"),
    ]
    graph = helper.make_graph(
        nodes, "transformer_block",
        [helper.make_tensor_value_info("x", FLOAT, [1, seq, hidden])],
        [helper.make_tensor_value_info("y", FLOAT, [1, seq, hidden])],
        initializer=w.tensors,
    )
    return make_model(graph, "Pre-LN transformer encoder block (4 heads x 8), GELU via Erf.")


def build_mlp(rng: np.random.Generator) -> onnx.ModelProto:
    """Gemm -> Relu -> Gemm -> Tanh -> MatMul + Add -> Sigmoid."""
    w = Inits(rng)
    w.weight("fc1.weight", (16, 32), fan_in=16)
    w.bias("fc1.bias", 32)
    w.weight("fc2.weight", (32, 32), fan_in=32)
    w.bias("fc2.bias", 32)
    w.weight("fc3.weight", (32, 8), fan_in=32)
    w.bias("fc3.bias", 8)
    nodes = [
        node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["fc1_out"], "fc1"),
        node("Relu", ["fc1_out"], ["relu1_out"], "relu1"),
        node("Gemm", ["relu1_out", "fc2.weight", "fc2.bias"], ["fc2_out"], "fc2"),
        node("Tanh", ["fc2_out"], ["tanh2_out"], "tanh2"),
        node("MatMul", ["tanh2_out", "fc3.weight"], ["fc3_matmul"], "fc3/matmul"),
        node("Add", ["fc3_matmul", "fc3.bias"], ["fc3_out"], "fc3/bias"),
        node("Sigmoid", ["fc3_out"], ["y"], "sigmoid"),
    ]
    graph = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("x", FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", FLOAT, [4, 8])],
        initializer=w.tensors,
    )
    return make_model(graph, "Three-layer MLP: Gemm, MatMul+Add, Relu/Tanh/Sigmoid.")


def build_control_flow(rng: np.random.Generator) -> onnx.ModelProto:
    """MatMul -> If(cond) -> Loop(n) with a loop-carried state and a scan output.

    Feeding n=3, cond=True (and again with cond=False) exercises both If
    branches and several Loop iterations. Subgraphs read outer-scope tensors
    (h, branch.then.weight, loop.weight, loop.bias, loop.sum_shape); the else
    branch also has its own subgraph initializer (branch.else.two).
    """
    w = Inits(rng)
    w.weight("proj.weight", (4, 4), fan_in=4)
    w.weight("branch.then.weight", (4, 4), fan_in=4)
    w.weight("loop.weight", (4, 4), fan_in=4)
    w.bias("loop.bias", 4)
    w.add("loop.cond_init", np.array(True))
    w.ints("loop.sum_shape", [1])

    then_graph = helper.make_graph(
        [
            node("MatMul", ["h", "branch.then.weight"], ["then_matmul"], "branch/then/matmul"),
            node("Relu", ["then_matmul"], ["then_out"], "branch/then/relu"),
        ],
        "branch_then", [],
        [helper.make_tensor_value_info("then_out", FLOAT, [2, 4])],
    )
    else_graph = helper.make_graph(
        [
            node("Mul", ["h", "branch.else.two"], ["else_mul"], "branch/else/mul"),
            node("Tanh", ["else_mul"], ["else_out"], "branch/else/tanh"),
        ],
        "branch_else", [],
        [helper.make_tensor_value_info("else_out", FLOAT, [2, 4])],
        initializer=[numpy_helper.from_array(np.array(2.0, dtype=np.float32),
                                             name="branch.else.two")],
    )
    # Loop body: (iter, cond_in, s) -> (cond_out, s_next, s_sum)
    body_graph = helper.make_graph(
        [
            node("Identity", ["cond_in"], ["cond_out"], "loop/body/cond_passthrough"),
            node("MatMul", ["s", "loop.weight"], ["body_matmul"], "loop/body/matmul"),
            node("Add", ["body_matmul", "loop.bias"], ["body_add"], "loop/body/add"),
            node("Tanh", ["body_add"], ["s_next"], "loop/body/tanh"),
            node("ReduceSum", ["s_next"], ["s_sum_scalar"], "loop/body/reduce_sum",
                 keepdims=0),
            # Per-iteration scan value has shape [1] (not a scalar): ReferenceEvaluator
            # stacks scan outputs with np.vstack, which only matches the spec (and
            # onnxruntime) for 1-D per-iteration values. trace is then [n, 1].
            node("Reshape", ["s_sum_scalar", "loop.sum_shape"], ["s_sum"],
                 "loop/body/to_vec"),
        ],
        "loop_body",
        [
            helper.make_tensor_value_info("iter", INT64, []),
            helper.make_tensor_value_info("cond_in", BOOL, []),
            helper.make_tensor_value_info("s", FLOAT, [2, 4]),
        ],
        [
            helper.make_tensor_value_info("cond_out", BOOL, []),
            helper.make_tensor_value_info("s_next", FLOAT, [2, 4]),
            helper.make_tensor_value_info("s_sum", FLOAT, [1]),
        ],
    )
    nodes = [
        node("MatMul", ["x", "proj.weight"], ["h"], "proj"),
        node("If", ["cond"], ["branch_out"], "branch",
             then_branch=then_graph, else_branch=else_graph),
        node("Loop", ["n", "loop.cond_init", "branch_out"], ["y", "trace"], "loop",
             body=body_graph),
    ]
    graph = helper.make_graph(
        nodes, "control_flow",
        [
            helper.make_tensor_value_info("x", FLOAT, [2, 4]),
            helper.make_tensor_value_info("n", INT64, []),
            helper.make_tensor_value_info("cond", BOOL, []),
        ],
        [
            helper.make_tensor_value_info("y", FLOAT, [2, 4]),
            helper.make_tensor_value_info("trace", FLOAT, ["n_iter", 1]),
        ],
        initializer=w.tensors,
    )
    return make_model(
        graph,
        "If + Loop with outer-scope reads; feed n=3, cond=True (or False) to exercise both.",
    )


def build_dynamic_batch(rng: np.random.Generator) -> onnx.ModelProto:
    """Conv -> Relu -> ReduceMean(axes=[2,3]) -> MatMul with a symbolic batch dim."""
    w = Inits(rng)
    w.weight("conv.weight", (4, 3, 3, 3), fan_in=3 * 9)
    w.bias("conv.bias", 4)
    w.weight("head.weight", (4, 2), fan_in=4)
    nodes = [
        node("Conv", ["x", "conv.weight", "conv.bias"], ["conv_out"], "conv",
             kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("Relu", ["conv_out"], ["relu_out"], "relu"),
        # opset 17: ReduceMean takes axes as an attribute (input only from opset 18)
        node("ReduceMean", ["relu_out"], ["pooled"], "spatial_mean", axes=[2, 3], keepdims=0),
        node("MatMul", ["pooled", "head.weight"], ["y"], "head"),
    ]
    graph = helper.make_graph(
        nodes, "dynamic_batch",
        [helper.make_tensor_value_info("x", FLOAT, ["batch", 3, 8, 8])],
        [helper.make_tensor_value_info("y", FLOAT, ["batch", 2])],
        initializer=w.tensors,
    )
    return make_model(graph, "Symbolic batch dimension 'batch'.")


def build_external_data(rng: np.random.Generator) -> onnx.ModelProto:
    """Gemm 64->128 -> Relu -> Gemm 128->64 -> Relu -> Gemm 64->10 (weights stored externally)."""
    w = Inits(rng)
    w.weight("fc1.weight", (64, 128), fan_in=64)
    w.bias("fc1.bias", 128)
    w.weight("fc2.weight", (128, 64), fan_in=128)
    w.bias("fc2.bias", 64)
    w.weight("fc3.weight", (64, 10), fan_in=64)
    w.bias("fc3.bias", 10)
    nodes = [
        node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["fc1_out"], "fc1"),
        node("Relu", ["fc1_out"], ["relu1_out"], "relu1"),
        node("Gemm", ["relu1_out", "fc2.weight", "fc2.bias"], ["fc2_out"], "fc2"),
        node("Relu", ["fc2_out"], ["relu2_out"], "relu2"),
        node("Gemm", ["relu2_out", "fc3.weight", "fc3.bias"], ["y"], "fc3"),
    ]
    graph = helper.make_graph(
        nodes, "external_data",
        [helper.make_tensor_value_info("x", FLOAT, [2, 64])],
        [helper.make_tensor_value_info("y", FLOAT, [2, 10])],
        initializer=w.tensors,
    )
    return make_model(graph, "MLP whose initializers live in external_data.onnx.data.")


def save_external(model: onnx.ModelProto, path: str) -> None:
    data_name = os.path.basename(path) + ".data"
    data_path = os.path.join(os.path.dirname(path), data_name)
    # onnx appends to an existing data file, so start from scratch for idempotence.
    if os.path.exists(data_path):
        os.remove(data_path)
    onnx.save_model(
        model, path,
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=data_name,
        size_threshold=0,
    )
    os.chmod(data_path, 0o644)  # onnx creates the data file as 0600


# (file name, builder, list of input feeds to verify with)
def _feeds(rng: np.random.Generator):
    def f(*shape):
        return rng.random(shape, dtype=np.float32)

    return {
        "cnn.onnx": [{"image": f(1, 3, 32, 32)}],
        "transformer_block.onnx": [{"x": f(1, 8, 32)}],
        "mlp.onnx": [{"x": f(4, 16)}],
        "control_flow.onnx": [
            {"x": f(2, 4), "n": np.array(3, dtype=np.int64), "cond": np.array(True)},
            {"x": f(2, 4), "n": np.array(3, dtype=np.int64), "cond": np.array(False)},
            {"x": f(2, 4), "n": np.array(1, dtype=np.int64), "cond": np.array(True)},
        ],
        "dynamic_batch.onnx": [{"x": f(1, 3, 8, 8)}, {"x": f(3, 3, 8, 8)}],
        "external_data.onnx": [{"x": f(2, 64)}],
    }


BUILDERS = [
    ("cnn.onnx", build_cnn, False),
    ("transformer_block.onnx", build_transformer_block, False),
    ("mlp.onnx", build_mlp, False),
    ("control_flow.onnx", build_control_flow, False),
    ("dynamic_batch.onnx", build_dynamic_batch, False),
    ("external_data.onnx", build_external_data, True),
]


# --------------------------------------------------------------------------
# verification
# --------------------------------------------------------------------------


def _all_nodes(graph: onnx.GraphProto):
    for n in graph.node:
        yield n
        for attr in n.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _all_nodes(attr.g)
            for g in attr.graphs:
                yield from _all_nodes(g)


def verify(path: str, feeds: list[dict]) -> str:
    import onnxruntime as ort
    from onnx.reference import ReferenceEvaluator

    name = os.path.basename(path)
    onnx.checker.check_model(path, full_check=True)  # by path: resolves external data
    model = onnx.load(path)  # loads external data from the model's folder
    assert model.ir_version == IR_VERSION and model.producer_name == PRODUCER
    assert [(o.domain, o.version) for o in model.opset_import] == [("", OPSET)]

    nodes = list(_all_nodes(model.graph))
    names = [n.name for n in nodes]
    assert all(names), f"{name}: unnamed node"
    assert len(set(names)) == len(names), f"{name}: duplicate node names"

    size = os.path.getsize(path)
    data_path = path + ".data"
    if os.path.exists(data_path):
        size += os.path.getsize(data_path)
        raw = onnx.load(path, load_external_data=False)
        assert all(onnx.external_data_helper.uses_external_data(t)
                   for t in raw.graph.initializer), f"{name}: initializer not external"
    assert os.path.getsize(path) < MAX_BYTES and size < MAX_BYTES, f"{name}: too large"

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    ref = ReferenceEvaluator(model)
    out_names = [o.name for o in model.graph.output]
    for feed in feeds:
        got = sess.run(out_names, feed)
        want = ref.run(out_names, feed)
        for oname, g, r in zip(out_names, got, want):
            r = np.asarray(r)
            assert g.shape == r.shape, f"{name}:{oname} shape {g.shape} vs {r.shape}"
            assert g.dtype == r.dtype, f"{name}:{oname} dtype {g.dtype} vs {r.dtype}"
            assert np.all(np.isfinite(g)), f"{name}:{oname} not finite"
            np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5,
                                       err_msg=f"{name}:{oname}")
    return f"{name:<24} {size:>8} bytes  {len(nodes):>3} nodes ({len(model.graph.node)} top-level)"


def main(argv: list[str]) -> int:
    outdir = argv[1] if len(argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    os.makedirs(outdir, exist_ok=True)
    rng = np.random.default_rng(SEED)
    paths = []
    for fname, builder, external in BUILDERS:
        model = builder(rng)
        path = os.path.join(outdir, fname)
        if external:
            save_external(model, path)
        else:
            write_model(model, path)
        paths.append(path)

    feeds = _feeds(np.random.default_rng(SEED + 1))
    for path in paths:
        print(verify(path, feeds[os.path.basename(path)]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
