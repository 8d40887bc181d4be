"""What can be observed in a model, and which float tensor each observation stands for.

A quantized model does not hold the fp32 model's tensors as such. ``observe(model)`` lists, for the main
graph, one ``Observable`` per value worth comparing, with ``key`` = the name of the float tensor it stands
for in the float model:

- plain float tensors: themselves (kind ``float``);
- QDQ (QuantizeLinear X -> q -> DequantizeLinear): X is compared through DQ(Q(X)), the value that the next
  layer consumes (kind ``qdq``); X itself is hidden. This is what keeps matching from being fooled when a
  quantizer drops a Relu and gives the Conv output the Relu's name: the quantized value is clamped like
  the Relu output, the raw Conv output is not;
- QOperator (QLinearConv, QLinearMatMul, QLinearAdd, QGemm...): the integer output is dequantized with the
  node's own scale and zero point (kind ``qoperator``), keyed by the float name the quantizer derived it from;
  codes no such node writes (a Gather of a quantized embedding table) with the scale and zero point that the
  QLinear* nodes reading them take in their input slots;
- dynamic quantization (DynamicQuantizeLinear, ConvInteger/MatMulInteger, Cast, Mul, Add): the float result
  after the rescale (kind ``dynamic``); the integer and partial tensors are hidden.

Dequantizations that the model does not hold itself are listed in ``dequantize`` for a graph pass to add:
probes then read the quantized tensor, which keeps onnxruntime's int8 fusions possible.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import onnx

from onnxprobe.graph.constants import constants as graph_constants
from onnxprobe.graph.shapes import static_shape, value_types
from onnxprobe.graph.summary import all_types, non_tensor_outputs, not_a_tensor
from onnxprobe.graph.walk import constant_tensors, walk
from onnxprobe.match.branches import branch_observables
from onnxprobe.match.folds import with_tails
from onnxprobe.match.integers import int_constants
from onnxprobe.match.ops import canonical
from onnxprobe.match.sources import with_sources
from onnxprobe.match.weights import code_sizes, float_constants, packed_weight, weight_outputs
from onnxprobe.text import clip, quote

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
RESCALE_OPS = {"Cast", "Mul", "Add"}
GRAPH_INPUT = "(graph input)"  # origin() of a graph input's values: no op type has parentheses
QUANT_SUFFIXES = ("_QuantizeLinear_Output", "_DequantizeLinear_Output", "_output_quantized", "_quantized", "quant_scaled_output")
DEQ_PREFIX = "onnxprobe.deq:"


@dataclass(frozen=True)
class Observable:
    key: str  # the float tensor this stands for (its name in a float model)
    name: str  # the tensor's name in this model, as reported
    probe: str  # the tensor to expose (a dequantization added by the pass, for quantized tensors)
    node: str
    op_type: str  # op of the producing node
    effective_op: str  # the float op this value is the output of (QLinearConv -> Conv, ...)
    index: int
    shape: tuple | None
    kind: str  # float | qdq | qoperator | dynamic
    is_output: bool = False
    module: str | None = None  # the PyTorch module whose output this is (a --vs-torch side)
    scope: str = ""  # the If branch that computes it ("If_0/then_branch"); "" in the main graph
    # a quantized value whose integer range starts at 0 (zero point at the type's lowest value): it holds
    # Relu(x), not x, whatever its name says (a quantizer folds a Relu into the range: ``match.engine``)
    floor_zero: bool = False
    relu: str | None = None  # a float tensor's only consumer is a Relu (or a Clip from 0): its output
    # what its node reads, as the nearest observed tensors upstream (and through value-preserving moves
    # the ones before them) and graph inputs ("input:NAME"): a structural pair must read paired tensors
    sources: tuple[str, ...] = ()
    data: bool = False  # holds floating-point values (``sources`` of such are what a structural pair checks)
    node_named: bool = False  # its node has a name of its own (not "Op_index", which tells only a position)
    # the float constants its node reads (directly or through a node of constants only: a DequantizeLinear
    # of weights), as digests of their values: two nodes that read different weights that both models
    # hold compute different functions of the data, whatever their position (``match.engine``)
    weights: tuple[str, ...] = ()
    # how many elements each of those holds (scalars left out), whatever their values: a weight of another
    # size is another weight, however perturbed (a 1x1 Conv's against a 3x3's; ``match.engine.alike``)
    weight_sizes: tuple[int, ...] = ()
    # (size, a few of its values) of each of those (``match.weights``): a weight near one of the other model
    # (fp16, fine-tuned, perturbed) is evidence where names and order are not
    weight_samples: tuple = ()
    # a Conv output whose one reader is a per-channel tail (a BatchNormalization, a bias Add, a constant
    # scale), and that tail's output: a model with the tail folded into its Conv (a quantizer's, onnxruntime's,
    # an exporter's bias) has one Conv tensor for both, the tail's function
    bn_next: bool = False
    conv_bn: bool = False
    # an integer tensor's node: what each of its inputs is, and its attributes (``match.integers``)
    slots: tuple = ()
    attrs: tuple = ()
    values: tuple | None = None  # its values, where shape ops compute them (``match.integers.symbolic``)
    elem_type: int = 0  # its onnx element type (0: not known): booleans are no function of what integers are
    # the node that computes its value, as listings name it: a QDQ value's float node, a dequantized QOperator
    # value's QLinear* node, not the QuantizeLinear or DequantizeLinear around it (``match.sources``)
    writer: str = ""

    def __repr__(self) -> str:  # a notebook's view: what the tensor is, not the evidence matching weighs (4 KB of it)
        where = f", in {quote(clip(self.scope, 60))}" if self.scope else ""
        return f"Observable({quote(clip(self.name, 80))}, {self.op_type}, shape={self.shape}, {self.kind}{where})"


@dataclass(frozen=True)
class Dequantize:
    quantized: str
    scale: str
    zero_point: str | None
    axis: int | None
    output: str


@dataclass
class Observation:
    observables: list[Observable]
    dequantize: list[Dequantize] = field(default_factory=list)
    hidden: dict[str, str] = field(default_factory=dict)  # tensor -> why it is not compared directly
    # values that hold no numbers (sequences, optionals, maps, strings): never compared, listed by a diff
    no_numbers: list[Observable] = field(default_factory=list)
    # integer weights dequantized by the graph (DequantizeLinear of a constant): a weight-only quantized model
    # has them and only float tensors, and is a quantized model all the same (``compare.criteria``)
    weights_quantized: bool = False
    # int8/uint8 tensors taken for quantized codes of no known scale (a weight's codes moved by a Transpose,
    # Reshape or Gather): nothing dequantizes them, so they are compared on neither side; a diff lists them
    unscaled: list[Observable] = field(default_factory=list)

    @property
    def quantized(self) -> bool:
        return any(o.kind != "float" for o in self.observables)


def stem(name: str) -> str:
    for s in QUANT_SUFFIXES:
        if name.endswith(s) and len(name) > len(s):
            return name[: -len(s)]
    return name


def observe(model: onnx.ModelProto, constants: bool = False) -> Observation:
    """The tensors of ``model`` a diff can compare (``Observation``); ``constants``: tensors computed from
    weights alone too (--include-constants), which are otherwise not layers."""
    every = walk(model)  # one walk: the main graph's sites, the constants, the If branches' tensors
    sites = [s for s in every if not s.chain]
    types = value_types(model)
    const = constant_tensors(model, every)
    outputs = {o.name for o in model.graph.output}
    producer = {o: s for s in sites for o in s.node.output if o}
    consumers: dict[str, list] = {}
    for s in sites:
        for i in s.node.input:
            consumers.setdefault(i, []).append(s)

    def elem(t: str) -> int:
        tp = types.get(t)
        return tp.tensor_type.elem_type if tp is not None else 0

    def qparams(t: str, depth: int = 0) -> tuple[str, str | None, int | None] | None:
        s = producer.get(t)
        if s is None or depth > 16:
            return None
        n = s.node
        if n.op_type == "QuantizeLinear":
            return n.input[1], (n.input[2] if len(n.input) > 2 and n.input[2] else None), _axis(n)
        if n.op_type in QLINEAR_OUT_PARAMS:
            si, zi = QLINEAR_OUT_PARAMS[n.op_type]
            if len(n.input) > si and n.input[si]:
                return n.input[si], (n.input[zi] if len(n.input) > zi and n.input[zi] else None), None
            return None
        if n.op_type in SCALE_PRESERVING and n.input:
            return qparams(n.input[0], depth + 1)
        return None

    def read_with(t: str) -> tuple[str, str | None, None] | None:
        """The (scale, zero point) the QLinear* consumers of ``t`` read its codes with, in their input slots
        (through scale-preserving moves): what dequantizes codes no producer gives a scale to (a Gather of
        a quantized embedding table that a QLinearAdd reads); None where none does, or two differ."""
        def reads(t: str, depth: int) -> set:
            found = set()
            for c in consumers.get(t, []) if depth <= 16 else []:
                n = c.node
                if n.op_type in SCALE_PRESERVING and n.input and n.input[0] == t and n.output and n.output[0]:
                    found |= reads(n.output[0], depth + 1)
                for d, si, zi in _in_slots(n):
                    if n.input[d] == t and si < len(n.input) and n.input[si]:
                        zp = n.input[zi] if zi < len(n.input) and n.input[zi] else None
                        found.add((param(n.input[si]), param(zp) if zp else None, n.input[si], zp))
            return found

        found = reads(t, 0)
        if len({f[:2] for f in found}) != 1:
            return None
        _, _, scale, zp = min(found, key=lambda f: (f[2], f[3] or ""))
        return scale, zp, None

    def float_op(t: str, depth: int = 0) -> str:
        """The float op a (possibly quantized) tensor is the output of."""
        s = producer.get(t)
        if s is None:
            return "input"
        n = s.node
        if depth < 16 and n.op_type in ("DequantizeLinear", "QuantizeLinear") and n.input:
            src = producer.get(n.input[0])
            if n.op_type == "DequantizeLinear" and src is not None:
                return float_op(n.input[0], depth + 1)
            if n.op_type == "QuantizeLinear":
                return float_op(n.input[0], depth + 1)
        if t in chain_op:
            return chain_op[t]
        return canonical(n.op_type)

    # dynamic quantization: IntegerLayer -> Cast -> Mul(scale) [-> Add(bias)]. The integer output and its Cast
    # are partial results; the first float tensor after them with a name of its own stands for the layer's
    # output, a later one (a bias Add the float model had too) for its own op.
    chain_root: dict[str, object] = {}
    chain_op: dict[str, str] = {}
    for s_ in sites:
        if s_.node.op_type not in INTEGER_LAYERS:
            continue
        t = s_.node.output[0]
        chain_root[t] = s_
        layer_op = canonical(s_.node.op_type)
        for op in ("Cast", "Mul", "Add"):
            cs = consumers.get(t, [])
            if len(cs) != 1 or cs[0].node.op_type != op:
                break
            if op == "Add" and not all(i == t or i in const for i in cs[0].node.input):
                break
            t = cs[0].node.output[0]
            chain_root[t] = s_
            if op != "Cast" and not t.endswith("quant_scaled_output"):
                chain_op[t] = layer_op
                layer_op = "Add"
    dq_scales = {s_.node.output[i] for s_ in sites if s_.node.op_type == "DynamicQuantizeLinear" for i in (1, 2) if len(s_.node.output) > i}

    fed = {i.name for i in model.graph.input} - {i.name for i in model.graph.initializer}

    def origin(t: str, depth: int = 0) -> str | None:
        """Op type of the first producer that is not a scale-preserving move (``GRAPH_INPUT`` for a graph
        input's values, None for a weight or a tensor of unknown origin)."""
        s_ = producer.get(t)
        if s_ is None:
            return GRAPH_INPUT if t in fed else None
        if s_.node.op_type in SCALE_PRESERVING and s_.node.input and depth < 16:
            return origin(s_.node.input[0], depth + 1)
        return s_.node.op_type

    def is_quant(t: str, depth: int = 0) -> bool:
        et = elem(t)
        if et:
            return et in QUANT_TYPES
        s_ = producer.get(t)
        if s_ is None or depth > 16:
            return False
        op = s_.node.op_type
        if op in QLINEAR_OUT_PARAMS or (op == "QuantizeLinear" and t == s_.node.output[0]):
            return True
        return op in SCALE_PRESERVING and bool(s_.node.input) and is_quant(s_.node.input[0], depth + 1)

    values = {i.name: i for i in model.graph.initializer}
    values.update({s_.node.output[0]: a.t for s_ in sites if s_.node.op_type == "Constant" and s_.node.output
                   for a in s_.node.attribute if a.name == "value"})

    def floor_zero(zp: str | None, quantized: str) -> bool:
        """The range of ``quantized`` (its zero point ``zp``) starts at 0: every zero point is its integer
        type's lowest value (a missing one is uint8's 0)."""
        if zp is None:
            return elem(quantized) in (0, onnx.TensorProto.UINT8)
        if zp not in values:
            return False
        z = onnx.numpy_helper.to_array(values[zp])
        lowest = {"uint8": 0, "uint16": 0, "int8": -128, "int16": -32768}.get(z.dtype.name)
        return lowest is not None and z.size > 0 and bool((z == lowest).all())

    def floors_at_zero(n: onnx.NodeProto, t: str) -> bool:
        """``n`` is a Relu of ``t``, or a Clip of ``t`` whose min is 0 (a Relu6, a HardSwish's clip): what a
        quantization range starting at 0 holds in its place, as a quantizer drops it (any max: the range's
        top is calibrated on the clipped values)."""
        if n.op_type == "Relu":
            return True
        if n.op_type != "Clip" or n.input[0] != t:
            return False
        if len(n.input) > 1 and n.input[1]:  # opset 11+: min is an input
            v = values.get(n.input[1])
            return v is not None and onnx.numpy_helper.to_array(v).size == 1 and float(onnx.numpy_helper.to_array(v).reshape(())) == 0
        return any(a.name == "min" and a.f == 0 for a in n.attribute)  # opset 6..10: an attribute

    def relu_of(t: str) -> str | None:
        """The output of the Relu (or Clip from 0) that is ``t``'s only consumer (through Identity nodes)."""
        for _ in range(16):
            cs = consumers.get(t, [])
            if len(cs) != 1 or t in outputs or not cs[0].node.output:
                return None
            n = cs[0].node
            if n.op_type != "Identity" and not floors_at_zero(n, t):
                return None
            t = n.output[0]
            if n.op_type != "Identity":
                return t
        return None

    quantized_as: dict[str, list] = {}  # float tensor -> (QuantizeLinear output, node) observed for it

    def param(name: str | None):
        v = values.get(name) if name else None
        return (name,) if v is None else (v.data_type, tuple(v.dims), onnx.numpy_helper.to_array(v).tobytes())

    def same_quantization(m: onnx.NodeProto, n: onnx.NodeProto) -> bool:
        """Two QuantizeLinear nodes of one tensor that give the same values: equal scales, zero points
        (by value) and attributes (axis, saturate...)."""
        return (m.domain == n.domain and len(m.input) == len(n.input)
                and all(param(i) == param(j) for i, j in zip(m.input[1:], n.input[1:]))
                and sorted(a.SerializeToString() for a in m.attribute) == sorted(a.SerializeToString() for a in n.attribute))

    obs: list[Observable] = []
    deq: list[Dequantize] = []
    hidden: dict[str, str] = {}
    bare: list[Observable] = []
    unscaled: list[Observable] = []
    every_type = all_types(model)
    no_tensor = non_tensor_outputs(model)  # a sparse value among them whatever its declared type
    for s in sites:
        n = s.node
        for t in n.output:
            if not t or (t in const and t not in outputs and not constants):
                continue
            et = elem(t)
            shape = static_shape(types.get(t))

            def add(key: str, probe: str, kind: str, name: str | None = None, floor: bool = False, to: list | None = None) -> None:
                (obs if to is None else to).append(Observable(key=key, name=name or t, probe=probe, node=s.name, node_named=bool(n.name), op_type=n.op_type,
                                      effective_op=float_op(t), index=s.index, shape=shape, kind=kind,
                                      is_output=t in outputs or (name or t) in outputs, floor_zero=floor,
                                      relu=relu_of(t) if kind == "float" else None, elem_type=et))

            what = ("a string tensor" if et == onnx.TensorProto.STRING else no_tensor.get(t)
                    or not_a_tensor(every_type.get(t), n.op_type))
            if what:  # listed by a diff, never compared
                hidden[t] = f"{what}{'' if et == onnx.TensorProto.STRING else ', not a tensor'}: no difference to measure"
                bare.append(Observable(key=t, name=t, probe=t, node=s.name, node_named=bool(n.name), op_type=n.op_type,
                                       effective_op=n.op_type, index=s.index, shape=None, kind="float", is_output=t in outputs))
                continue
            if t in dq_scales or (n.op_type == "Mul" and any(i in dq_scales for i in n.input)
                                  and all(i in dq_scales or i in const for i in n.input)):
                hidden[t] = "a dynamic quantization scale"
                continue
            if t in chain_root:
                if t not in chain_op:
                    hidden[t] = f"partial result of {chain_root[t].name}'s rescale"
                    continue
                add(t, t, "dynamic")
                continue
            if is_quant(t) or n.op_type == "DynamicQuantizeLinear":
                if n.op_type == "QuantizeLinear":
                    x = n.input[0]
                    if x not in producer:
                        hidden[t] = f"quantized model input {x}"
                        continue
                    dqs = [c.node.output[0] for c in consumers.get(t, []) if c.node.op_type == "DequantizeLinear"]
                    if any(d in outputs for d in dqs):  # the model's output is this DQ(Q(x)): observed as the output
                        hidden[t] = f"quantized; compared as the model output {dqs[0]} (its DequantizeLinear)"
                        continue
                    scale, zp, axis = n.input[1], (n.input[2] if len(n.input) > 2 and n.input[2] else None), _axis(n)
                    twin = next((f for f, q in quantized_as.get(x, []) if same_quantization(q, n)), None)
                    if twin is not None:  # DedicatedQDQPair: one Q/DQ pair per consumer, the same values
                        hidden[t] = f"the same quantization of {x} as {twin} (same scale and zero point): compared there"
                        continue
                    quantized_as.setdefault(x, []).append((t, n))
                    out = DEQ_PREFIX + t
                    deq.append(Dequantize(t, scale, zp, axis, out))
                    obs.append(Observable(key=x, name=dqs[0] if dqs else t, probe=out, node=s.name, node_named=bool(n.name), op_type=n.op_type,
                                          effective_op=float_op(x), index=s.index, shape=static_shape(types.get(x)),
                                          kind="qdq", is_output=t in outputs, floor_zero=floor_zero(zp, t)))
                    continue
                if any(c.node.op_type == "DequantizeLinear" for c in consumers.get(t, [])):
                    hidden[t] = "quantized; compared through its DequantizeLinear output"
                    continue
                q = qparams(t) or read_with(t)
                if q is None:
                    made = origin(t)
                    if not quantized_origin(made) or t in outputs:  # an int8/uint8 value of its own (a Cast, an
                        add(t, t, "float")  # image's bytes), or what the model gives: compared as it is, as int32 is
                    elif made == "DynamicQuantizeLinear":
                        hidden[t] = "the codes of a dynamic quantization (a scale computed at run time): compared as the float tensor it quantizes"
                    else:
                        hidden[t] = f"{onnx.helper.tensor_dtype_to_np_dtype(et).name if et else 'integer'} codes of no known scale (nothing dequantizes them): compared on neither side"
                        add(t, t, "float", to=unscaled)
                    continue
                out = DEQ_PREFIX + t
                deq.append(Dequantize(t, q[0], q[1], q[2], out))
                add(stem(t), out, "qoperator", floor=floor_zero(q[1], t))
                continue
            if et in FLOAT_TYPES or et == 0:
                qs = [c for c in consumers.get(t, []) if c.node.op_type == "QuantizeLinear"]
                if qs and t not in outputs:
                    hidden[t] = f"compared after quantization, through {qs[0].node.output[0]}"
                    continue
                if n.op_type == "DequantizeLinear":
                    src = producer.get(n.input[0])
                    if src is not None and src.node.op_type == "QuantizeLinear" and t not in outputs:
                        hidden[t] = f"the QDQ value of {src.node.input[0]}"
                        continue
                    if src is not None:  # DQ of a QLinear* output (QOperator), or of a moved QDQ value
                        zp = n.input[2] if len(n.input) > 2 and n.input[2] else None
                        add(t, t, "qoperator" if origin(n.input[0]) in QLINEAR_OUT_PARAMS else "qdq",
                            floor=floor_zero(zp, n.input[0]))
                        continue
            add(t, t, "float")
    made = {o for s in sites for o in s.node.output}
    for t, what in no_tensor.items():  # a sparse initializer given as an output: onnxruntime returns it, no tensor
        if t not in made and t not in hidden:
            hidden[t] = f"{what}, not a tensor: no difference to measure"
            bare.append(Observable(key=t, name=t, probe=t, node="", node_named=False, op_type="", effective_op="",
                                   index=0, shape=None, kind="float", is_output=True))
    # before the nodes' (a stable sort): a weight comes before its first reader, which reads it
    obs[:0] = weight_outputs(model, made | set(hidden), hidden, bare, sites, Observable, FLOAT_TYPES)
    found = graph_constants(model.graph)
    inputs, ints = {i.name for i in model.graph.input} - set(values), int_constants(found)
    obs = with_sources(obs, producer, const, inputs, {t for t in producer if elem(t) in FLOAT_TYPES or elem(t) == 0},
                        float_constants(model, found.items()), code_sizes(model, found.items()), ints, lambda t: static_shape(types.get(t)))
    obs = with_tails(obs, producer, consumers, const)
    obs += branch_observables(every, types, const, every_type, hidden, bare, obs, producer, inputs, ints, Observable)
    obs.sort(key=lambda o: o.index)
    weights_quantized = any((s_.node.op_type == "DequantizeLinear" and s_.node.output and s_.node.output[0] in const)
                            or packed_weight(s_.node) for s_ in sites)
    return Observation(obs, deq, hidden, bare, weights_quantized, unscaled)


def scoped_hint(obs: list[Observable], name: str) -> str:
    """For a bare ``name`` that sibling If branches share, and so no observable's: the keys to give instead."""
    keys = list(dict.fromkeys(o.name for o in obs if o.scope and o.name == f"{o.scope}/{name}"))
    return f"; If branches share that name: give one by its scope ({', '.join(keys)})" if keys else ""


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


def _axis(node: onnx.NodeProto) -> int | None:
    for a in node.attribute:
        if a.name == "axis":
            return a.i
    return None
