"""What ``match.observe`` reads of a model's main graph, indexed once: who writes and who reads each tensor,
its declared type, the constants, the chains of a dynamic quantization; and the questions observe asks of a
tensor (is it quantized codes, with which scale, what float op made it), answered from that index.

The op tables (``QLINEAR_OUT_PARAMS``...) say where each quantized op keeps its scales and zero points.
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx

from onnxprobe.graph.shapes import value_types
from onnxprobe.graph.summary import all_types, non_tensor_outputs
from onnxprobe.graph.tensor_data import to_array
from onnxprobe.graph.walk import NodeSite, constant_tensors, walk
from onnxprobe.match.ops import canonical

FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16, onnx.TensorProto.DOUBLE}
QUANT_TYPES = {onnx.TensorProto.INT8, onnx.TensorProto.UINT8, onnx.TensorProto.INT16, onnx.TensorProto.UINT16,
               onnx.TensorProto.INT4, onnx.TensorProto.UINT4}
# (scale input, zero-point input) of each QOperator op's output
QLINEAR_OUT_PARAMS = {
    "QLinearConv": (6, 7), "QLinearMatMul": (6, 7), "QLinearAdd": (6, 7), "QLinearMul": (6, 7),
    "QGemm": (7, 8), "QLinearGlobalAveragePool": (3, 4), "QLinearAveragePool": (3, 4), "QLinearSigmoid": (3, 4),
    "QLinearLeakyRelu": (3, 4), "QLinearSoftmax": (3, 4), "QLinearConcat": (0, 1), "QLinearReduceMean": (3, 4),
    "QLinearConvTranspose": (6, 7), "QLinearWhere": (7, 8),
}
# (data, scale, zero-point) input slots of each QOperator op's quantized inputs (onnx's QLinearConv and QLinearMatMul,
# onnxruntime's contrib ops): a consumer reads its input's codes with these, the scale they were quantized with
QLINEAR_IN_PARAMS = {
    "QLinearConv": ((0, 1, 2),), "QLinearConvTranspose": ((0, 1, 2),), "QLinearMatMul": ((0, 1, 2), (3, 4, 5)),
    "QLinearAdd": ((0, 1, 2), (3, 4, 5)), "QLinearMul": ((0, 1, 2), (3, 4, 5)), "QGemm": ((0, 1, 2), (3, 4, 5)),
    "QLinearGlobalAveragePool": ((0, 1, 2),), "QLinearAveragePool": ((0, 1, 2),), "QLinearSigmoid": ((0, 1, 2),),
    "QLinearLeakyRelu": ((0, 1, 2),), "QLinearSoftmax": ((0, 1, 2),), "QLinearReduceMean": ((0, 1, 2),),
    "QLinearWhere": ((1, 2, 3), (4, 5, 6)), "QAttention": ((0, 3, 6), (1, 4, 7)),
}  # QLinearConcat: Y's scale and zero point, then (X, scale, zero point) per input (``_in_slots``)
SCALE_PRESERVING = {"MaxPool", "Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Slice", "Split", "Gather",
                    "Resize", "Identity", "DepthToSpace", "SpaceToDepth", "Pad", "Expand", "Tile", "GlobalMaxPool"}
INTEGER_LAYERS = {"ConvInteger", "MatMulInteger"}
GRAPH_INPUT = "(graph input)"  # origin() of a graph input's values: no op type has parentheses

# (scale, zero point or None, axis or None) that dequantizes a tensor's codes
QParams = tuple[str, "str | None", "int | None"]


@dataclass
class GraphIndex:
    """The main graph of ``model`` as observe reads it (built once by ``GraphIndex.of``)."""
    model: onnx.ModelProto
    every: list[NodeSite]  # every node site: the main graph's, the constants', the If branches'
    sites: list[NodeSite]  # the main graph's node sites, in topological order
    types: dict  # tensor -> its declared or inferred onnx TypeProto (``value_types``)
    every_type: dict  # tensor -> its type, sequences and optionals too (``all_types``)
    non_tensors: dict[str, str]  # output -> what it is, where it is no tensor (a sparse value...)
    const: set[str]  # tensors computed from weights alone
    outputs: set[str]  # the main graph's outputs
    producer: dict[str, NodeSite]  # tensor -> the site that writes it
    consumers: dict[str, list[NodeSite]]  # tensor -> the sites that read it (once per input slot)
    fed: set[str]  # graph inputs that are not initializers (the model's data)
    values: dict[str, onnx.TensorProto]  # initializers and Constant outputs -> their values
    # dynamic quantization: each tensor of an IntegerLayer -> Cast -> Mul [-> Add] chain -> the IntegerLayer's
    # site; and those of its tensors that stand for a float op -> that op
    chain_root: dict[str, NodeSite]
    chain_op: dict[str, str]
    dq_scales: set[str]  # the scale and zero-point outputs of DynamicQuantizeLinear nodes

    @classmethod
    def of(cls, model: onnx.ModelProto) -> GraphIndex:
        """Index ``model`` in one walk (the main graph's sites, the constants, the If branches' tensors)."""
        every = walk(model)
        sites = [s for s in every if not s.chain]
        const = constant_tensors(model, every)
        consumers: dict[str, list] = {}
        for s in sites:
            for i in s.node.input:
                consumers.setdefault(i, []).append(s)
        values = {i.name: i for i in model.graph.initializer}
        values.update({s.node.output[0]: a.t for s in sites if s.node.op_type == "Constant" and s.node.output
                       for a in s.node.attribute if a.name == "value"})
        chain_root, chain_op = _rescale_chains(sites, consumers, const)
        return cls(
            model=model, every=every, sites=sites, types=value_types(model), every_type=all_types(model),
            non_tensors=non_tensor_outputs(model), const=const, outputs={o.name for o in model.graph.output},
            producer={o: s for s in sites for o in s.node.output if o}, consumers=consumers,
            fed={i.name for i in model.graph.input} - {i.name for i in model.graph.initializer}, values=values,
            chain_root=chain_root, chain_op=chain_op,
            dq_scales={s.node.output[i] for s in sites if s.node.op_type == "DynamicQuantizeLinear"
                       for i in (1, 2) if len(s.node.output) > i})

    def elem(self, t: str) -> int:
        """``t``'s onnx element type (0: not known)."""
        tp = self.types.get(t)
        return tp.tensor_type.elem_type if tp is not None else 0

    def qparams(self, t: str, depth: int = 0) -> QParams | None:
        """The (scale, zero point, axis) ``t``'s producer quantized it with (a QuantizeLinear, a QLinear* op's
        output slots), through scale-preserving moves; None where no producer gives one."""
        s = self.producer.get(t)
        if s is None or depth > 16:
            return None
        n = s.node
        if n.op_type == "QuantizeLinear":
            return n.input[1], (n.input[2] if len(n.input) > 2 and n.input[2] else None), quant_axis(n)
        if n.op_type in QLINEAR_OUT_PARAMS:
            si, zi = QLINEAR_OUT_PARAMS[n.op_type]
            if len(n.input) > si and n.input[si]:
                return n.input[si], (n.input[zi] if len(n.input) > zi and n.input[zi] else None), None
            return None
        if n.op_type in SCALE_PRESERVING and n.input:
            return self.qparams(n.input[0], depth + 1)
        return None

    def read_with(self, t: str) -> tuple[str, str | None, None] | None:
        """The (scale, zero point) the QLinear* consumers of ``t`` read its codes with, in their input slots
        (through scale-preserving moves): what dequantizes codes no producer gives a scale to (a Gather of
        a quantized embedding table that a QLinearAdd reads); None where none does, or two differ."""
        def reads(t: str, depth: int) -> set:
            found = set()
            for c in self.consumers.get(t, []) if depth <= 16 else []:
                n = c.node
                if n.op_type in SCALE_PRESERVING and n.input and n.input[0] == t and n.output and n.output[0]:
                    found |= reads(n.output[0], depth + 1)
                for d, si, zi in _in_slots(n):
                    if n.input[d] == t and si < len(n.input) and n.input[si]:
                        zp = n.input[zi] if zi < len(n.input) and n.input[zi] else None
                        found.add((self.param(n.input[si]), self.param(zp) if zp else None, n.input[si], zp))
            return found

        found = reads(t, 0)
        if len({f[:2] for f in found}) != 1:
            return None
        _, _, scale, zp = min(found, key=lambda f: (f[2], f[3] or ""))
        return scale, zp, None

    def float_op(self, t: str, depth: int = 0) -> str:
        """The float op a (possibly quantized) tensor is the output of."""
        s = self.producer.get(t)
        if s is None:
            return "input"
        n = s.node
        if depth < 16 and n.op_type in ("DequantizeLinear", "QuantizeLinear") and n.input:
            src = self.producer.get(n.input[0])
            if n.op_type == "DequantizeLinear" and src is not None:
                return self.float_op(n.input[0], depth + 1)
            if n.op_type == "QuantizeLinear":
                return self.float_op(n.input[0], depth + 1)
        if t in self.chain_op:
            return self.chain_op[t]
        return canonical(n.op_type)

    def origin(self, t: str, depth: int = 0) -> str | None:
        """Op type of the first producer that is not a scale-preserving move (``GRAPH_INPUT`` for a graph
        input's values, None for a weight or a tensor of unknown origin)."""
        s = self.producer.get(t)
        if s is None:
            return GRAPH_INPUT if t in self.fed else None
        if s.node.op_type in SCALE_PRESERVING and s.node.input and depth < 16:
            return self.origin(s.node.input[0], depth + 1)
        return s.node.op_type

    def is_quant(self, t: str, depth: int = 0) -> bool:
        """``t`` holds quantized codes: an 8/16/4-bit integer type, or (type unknown) a quantizer's or a
        QLinear* op's output, through scale-preserving moves."""
        et = self.elem(t)
        if et:
            return et in QUANT_TYPES
        s = self.producer.get(t)
        if s is None or depth > 16:
            return False
        op = s.node.op_type
        if op in QLINEAR_OUT_PARAMS or (op == "QuantizeLinear" and t == s.node.output[0]):
            return True
        return op in SCALE_PRESERVING and bool(s.node.input) and self.is_quant(s.node.input[0], depth + 1)

    def floor_zero(self, zp: str | None, quantized: str) -> bool:
        """The range of ``quantized`` (its zero point ``zp``) starts at 0: every zero point is its integer
        type's lowest value (a missing one is uint8's 0)."""
        if zp is None:
            return self.elem(quantized) in (0, onnx.TensorProto.UINT8)
        if zp not in self.values:
            return False
        z = to_array(self.values[zp])
        lowest = {"uint8": 0, "uint16": 0, "int8": -128, "int16": -32768}.get(z.dtype.name)
        return lowest is not None and z.size > 0 and bool((z == lowest).all())

    def floors_at_zero(self, n: onnx.NodeProto, t: str) -> bool:
        """``n`` is a Relu of ``t``, or a Clip of ``t`` whose min is 0 (a Relu6, a HardSwish's clip): what a
        quantization range starting at 0 holds in its place, as a quantizer drops it (any max: the range's
        top is calibrated on the clipped values)."""
        if n.op_type == "Relu":
            return True
        if n.op_type != "Clip" or n.input[0] != t:
            return False
        if len(n.input) > 1 and n.input[1]:  # opset 11+: min is an input
            v = self.values.get(n.input[1])
            return v is not None and to_array(v).size == 1 and float(to_array(v).reshape(())) == 0
        return any(a.name == "min" and a.f == 0 for a in n.attribute)  # opset 6..10: an attribute

    def relu_of(self, t: str) -> str | None:
        """The output of the Relu (or Clip from 0) that is ``t``'s only consumer (through Identity nodes)."""
        for _ in range(16):
            cs = self.consumers.get(t, [])
            if len(cs) != 1 or t in self.outputs or not cs[0].node.output:
                return None
            n = cs[0].node
            if n.op_type != "Identity" and not self.floors_at_zero(n, t):
                return None
            t = n.output[0]
            if n.op_type != "Identity":
                return t
        return None

    def param(self, name: str | None) -> tuple:
        """A quantization parameter as compared: (type, dims, bytes) of a constant's value, else (its name,)."""
        v = self.values.get(name) if name else None
        return (name,) if v is None else (v.data_type, tuple(v.dims), to_array(v).tobytes())

    def same_quantization(self, m: onnx.NodeProto, n: onnx.NodeProto) -> bool:
        """Two QuantizeLinear nodes of one tensor that give the same values: equal scales, zero points
        (by value) and attributes (axis, saturate...)."""
        return (m.domain == n.domain and len(m.input) == len(n.input)
                and all(self.param(i) == self.param(j) for i, j in zip(m.input[1:], n.input[1:]))
                and sorted(a.SerializeToString() for a in m.attribute) == sorted(a.SerializeToString() for a in n.attribute))


def _rescale_chains(sites: list, consumers: dict, const: set[str]) -> tuple[dict, dict]:
    """Dynamic quantization: IntegerLayer -> Cast -> Mul(scale) [-> Add(bias)]. The integer output and its Cast
    are partial results; the first float tensor after them with a name of its own stands for the layer's output
    (the Add's, a Gemm's bias, where the Mul's is '..._quant_scaled_output'). A bias Add after that is no part of
    it: a float op of its own, as in the float model (B's Add fed A's values measures the error it introduces;
    it was labelled 'dynamic' and went unmeasured). Returns (tensor -> the IntegerLayer's site, for every tensor
    of a chain; tensor -> the float op it stands for)."""
    chain_root: dict[str, NodeSite] = {}
    chain_op: dict[str, str] = {}
    for s in sites:
        if s.node.op_type not in INTEGER_LAYERS:
            continue
        t = s.node.output[0]
        chain_root[t] = s
        for op in ("Cast", "Mul", "Add"):
            cs = consumers.get(t, [])
            if len(cs) != 1 or cs[0].node.op_type != op:
                break
            if op == "Add" and not all(i == t or i in const for i in cs[0].node.input):
                break
            t = cs[0].node.output[0]
            chain_root[t] = s
            if op != "Cast" and not t.endswith("quant_scaled_output"):
                chain_op[t] = canonical(s.node.op_type)
                break
    return chain_root, chain_op


def quantized_origin(op: str | None) -> bool:
    """True when an int8/uint8 tensor made by ``op`` (through moves) holds quantized codes: a quantizer, a
    QLinear*/Q* op (contrib ones too: QAttention, QGemm...) or an op of unknown kind (None: a weight's codes).
    A graph input's values moved (``GRAPH_INPUT``: an image's bytes transposed to NCHW) are data both sides
    take alike: compared as they are, as a Cast's bytes are (where a DequantizeLinear reads them, they are
    compared through it before this is asked)."""
    return op != GRAPH_INPUT and (op is None or "Quant" in op or op.startswith("Q") or op in QLINEAR_OUT_PARAMS)


def _in_slots(node: onnx.NodeProto) -> tuple[tuple[int, int, int], ...]:
    """(data, scale, zero point) input slots of ``node``'s quantized inputs (``QLINEAR_IN_PARAMS``), those it has."""
    if node.op_type == "QLinearConcat":
        return tuple((k, k + 1, k + 2) for k in range(2, len(node.input) - 1, 3))
    return tuple(sl for sl in QLINEAR_IN_PARAMS.get(node.op_type, ()) if sl[0] < len(node.input))


def quant_axis(node: onnx.NodeProto) -> int | None:
    """The ``axis`` attribute of a (de)quantization node, None where it has none."""
    for a in node.attribute:
        if a.name == "axis":
            return a.i
    return None
