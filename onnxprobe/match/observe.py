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
from onnxprobe.graph.nchwc import blocked_tensors
from onnxprobe.graph.shapes import static_shape
from onnxprobe.graph.summary import not_a_tensor
from onnxprobe.graph.tensor_data import to_array
from onnxprobe.graph.walk import NodeSite
from onnxprobe.match.branches import branch_observables
from onnxprobe.match.folds import with_tails
from onnxprobe.match.graph_index import FLOAT_TYPES, QLINEAR_OUT_PARAMS, GraphIndex, quant_axis, quantized_origin
from onnxprobe.match.integers import int_constants
from onnxprobe.match.ops import GLOBAL_POOLS, computing, global_pool
from onnxprobe.match.sources import with_sources
from onnxprobe.match.weights import code_sizes, float_constants, packed_weight, weight_outputs
from onnxprobe.text import clip, quote

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
    # a Conv output that per-channel tails follow (a BatchNormalization, a bias Add, a constant scale, each reading
    # the one before): how many; a tail of such a chain: conv_bn, and how many follow it. A model with the first
    # tails folded into its Conv (a quantizer's, onnxruntime's, onnxsim's, an exporter's bias) has one Conv tensor
    # for them, the last folded tail's function (``match.folds.with_tails``)
    tails_after: int = 0
    conv_bn: bool = False
    # an integer tensor's node: what each of its inputs is, and its attributes (``match.integers``)
    slots: tuple = ()
    attrs: tuple = ()
    # a float tensor's node: the settings that make another function of one op (a Transpose's perm, a LeakyRelu's
    # alpha, a Conv's dilations, a Gather's constant indices), as set there (``match.integers.settings_of``)
    settings: tuple = ()
    values: tuple | None = None  # its values, where shape ops compute them (``match.integers.symbolic``)
    elem_type: int = 0  # its onnx element type (0: not known): booleans are no function of what integers are
    # the node that computes its value, as listings name it: a QDQ value's float node, a dequantized QOperator
    # value's QLinear* node, not the QuantizeLinear or DequantizeLinear around it (``match.sources``)
    writer: str = ""
    # the global pool its node computes as a reduce over the spatial axes (a ReduceMean's GlobalAveragePool),
    # "" for any other: matching pairs it with that pool (``match.ops.global_pool``); shown as its own op
    global_pool: str = ""

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
    # has them and only float tensors, and is a quantized model all the same (``compare.criteria``); so are
    # a quantized model's saved values that hold float tensors only (``compare.sides.npz_side``)
    weights_quantized: bool = False
    # int8/uint8 tensors taken for quantized codes of no known scale (a weight's codes moved by a Transpose,
    # Reshape or Gather): nothing dequantizes them, so they are compared on neither side; a diff lists them
    unscaled: list[Observable] = field(default_factory=list)
    blocked: int = 0  # tensors in onnxruntime's blocked NCHWc layout, hidden (``graph.nchwc``)

    @property
    def quantized(self) -> bool:
        return any(o.kind != "float" for o in self.observables)


def stem(name: str) -> str:
    for s in QUANT_SUFFIXES:
        if name.endswith(s) and len(name) > len(s):
            return name[: -len(s)]
    return name


@dataclass
class _Found:
    """What the steps of ``observe`` have found so far: the fields of the ``Observation`` they build."""
    observables: list[Observable] = field(default_factory=list)
    dequantize: list[Dequantize] = field(default_factory=list)
    hidden: dict[str, str] = field(default_factory=dict)
    no_numbers: list[Observable] = field(default_factory=list)
    unscaled: list[Observable] = field(default_factory=list)
    # float tensor -> (QuantizeLinear output, node) observed for it: a later quantization of the same values
    # (one Q/DQ pair per consumer) is compared there
    quantized_as: dict[str, list] = field(default_factory=dict)
    blocked: set[str] = field(default_factory=set)  # in onnxruntime's blocked NCHWc layout (``graph.nchwc``)


def observe(model: onnx.ModelProto, constants: bool = False) -> Observation:
    """The tensors of ``model`` a diff can compare (``Observation``); ``constants``: tensors computed from
    weights alone too (--include-constants), which are otherwise not layers."""
    graph = GraphIndex.of(model)
    found = _Found(blocked=blocked_tensors(model))
    for site in graph.sites:
        for t in site.node.output:
            if t and (t not in graph.const or t in graph.outputs or constants):
                _observe_output(graph, found, site, t)
    return _observation(graph, found)


def _observe_output(graph: GraphIndex, found: _Found, site: NodeSite, t: str) -> None:
    """Output ``t`` of ``site`` into ``found``: the first step that claims it observes it (or says in
    ``found.hidden`` why it is not compared directly); one no step claims is compared as the tensor it is."""
    for step in (_no_numbers, _blocked, _dynamic_scale, _rescale_chain, _quantized, _float_around_quantization):
        if step(graph, found, site, t):
            return
    found.observables.append(_observable(graph, site, t, t, "float"))


def _observable(graph: GraphIndex, site: NodeSite, t: str, key: str, kind: str, probe: str | None = None,
                floor: bool = False) -> Observable:
    """The Observable of output ``t`` of ``site``, standing for the float tensor ``key``, read at ``probe``
    (default: ``t`` itself); ``floor``: its quantized range starts at 0."""
    n = site.node
    return Observable(key=key, name=t, probe=probe or t, node=site.name, node_named=bool(n.name), op_type=n.op_type,
                      effective_op=graph.float_op(t), index=site.index, shape=static_shape(graph.types.get(t)),
                      kind=kind, is_output=t in graph.outputs, floor_zero=floor,
                      relu=graph.relu_of(t) if kind == "float" else None, elem_type=graph.elem(t),
                      global_pool=_global_pool(graph, t))


def _global_pool(graph: GraphIndex, t: str) -> str:
    """The global pool the node computing ``t`` (through a quantization around it: ``match.ops.computing``)
    is a reduce over the spatial axes of ("": none; ``match.ops.global_pool``)."""
    n = computing(t, graph.producer, lambda site: site.node).node if t in graph.producer else None
    if n is None or n.op_type not in GLOBAL_POOLS or t in n.output[1:]:  # a MaxPool's Indices: no pool's
        return ""
    shape = static_shape(graph.types.get(n.input[0])) if n.input else None
    if shape is None and n.op_type.startswith("Reduce"):  # keepdims: the output's rank is the input's
        shape = static_shape(graph.types.get(n.output[0]))

    def constant(name: str) -> list[int] | None:  # an initializer's or a Constant node's axes
        v = graph.values.get(name)
        if v is None or v.data_type not in (onnx.TensorProto.INT64, onnx.TensorProto.INT32):
            return None
        return [int(x) for x in to_array(v).reshape(-1)]

    return global_pool(n, shape, constant)


def _no_numbers(graph: GraphIndex, found: _Found, site: NodeSite, t: str) -> bool:
    """Claims a string tensor or a value that is no tensor (a sequence, an optional, a map, a sparse value):
    listed in ``no_numbers`` with why in ``hidden``, never compared."""
    n, et = site.node, graph.elem(t)
    what = ("a string tensor" if et == onnx.TensorProto.STRING else graph.non_tensors.get(t)
            or not_a_tensor(graph.every_type.get(t), n.op_type))
    if not what:
        return False
    found.hidden[t] = f"{what}{'' if et == onnx.TensorProto.STRING else ', not a tensor'}: no difference to measure"
    found.no_numbers.append(Observable(key=t, name=t, probe=t, node=site.name, node_named=bool(n.name), op_type=n.op_type,
                                       effective_op=n.op_type, index=site.index, shape=None, kind="float",
                                       is_output=t in graph.outputs))
    return True


def _blocked(graph: GraphIndex, found: _Found, site: NodeSite, t: str) -> bool:
    """Claims (hides) a tensor in onnxruntime's blocked NCHWc layout (``graph.nchwc``): its elements are in block
    order, so none pairs with another model's element at the same index."""
    if t not in found.blocked:
        return False
    found.hidden[t] = ("in onnxruntime's blocked NCHWc layout (com.microsoft.nchwc, a model it optimized at --opt-level "
                       "all and saved): its values are in channel-block order, not NCHW, so no element pairs with "
                       "another model's; compare the model onnxruntime was given, or one saved at --opt-level extended")
    return True


def _dynamic_scale(graph: GraphIndex, found: _Found, site: NodeSite, t: str) -> bool:
    """Claims (hides) a DynamicQuantizeLinear's scale or zero point, and a Mul of such scales and weights."""
    n = site.node
    if t in graph.dq_scales or (n.op_type == "Mul" and any(i in graph.dq_scales for i in n.input)
                                and all(i in graph.dq_scales or i in graph.const for i in n.input)):
        found.hidden[t] = "a dynamic quantization scale"
        return True
    return False


def _rescale_chain(graph: GraphIndex, found: _Found, site: NodeSite, t: str) -> bool:
    """Claims a tensor of a dynamic quantization's IntegerLayer -> Cast -> Mul [-> Add] chain: the float
    result that stands for a float op is observed (kind ``dynamic``), the partial results are hidden."""
    if t not in graph.chain_root:
        return False
    if t not in graph.chain_op:
        found.hidden[t] = f"partial result of {graph.chain_root[t].name}'s rescale"
    else:
        found.observables.append(_observable(graph, site, t, t, "dynamic"))
    return True


def _quantized(graph: GraphIndex, found: _Found, site: NodeSite, t: str) -> bool:
    """Claims quantized codes (and every output of a DynamicQuantizeLinear): a QuantizeLinear's output
    stands for its float input; codes a DequantizeLinear reads are compared through it; other codes are
    dequantized with the scale their producer or readers give them, where one does."""
    n = site.node
    if not (graph.is_quant(t) or n.op_type == "DynamicQuantizeLinear"):
        return False
    if n.op_type == "QuantizeLinear":
        _quantize_linear(graph, found, site, t)
    elif any(c.node.op_type == "DequantizeLinear" for c in graph.consumers.get(t, [])):
        found.hidden[t] = "quantized; compared through its DequantizeLinear output"
    else:
        _codes(graph, found, site, t)
    return True


def _quantize_linear(graph: GraphIndex, found: _Found, site: NodeSite, t: str) -> None:
    """QuantizeLinear output ``t``: its float input X compared through DQ(Q(X)) (kind ``qdq``, a dequantization
    the graph pass adds), save for a model input's, a model output's DQ and a second quantization of X
    with the same values (each hidden with why)."""
    n = site.node
    x = n.input[0]
    if x not in graph.producer:
        found.hidden[t] = f"quantized model input {x}"
        return
    dqs = [c.node.output[0] for c in graph.consumers.get(t, []) if c.node.op_type == "DequantizeLinear"]
    if any(d in graph.outputs for d in dqs):  # the model's output is this DQ(Q(x)): observed as the output
        found.hidden[t] = f"quantized; compared as the model output {dqs[0]} (its DequantizeLinear)"
        return
    scale, zp, axis = n.input[1], (n.input[2] if len(n.input) > 2 and n.input[2] else None), quant_axis(n)
    twin = next((f for f, q in found.quantized_as.get(x, []) if graph.same_quantization(q, n)), None)
    if twin is not None:  # DedicatedQDQPair: one Q/DQ pair per consumer, the same values
        found.hidden[t] = f"the same quantization of {x} as {twin} (same scale and zero point): compared there"
        return
    found.quantized_as.setdefault(x, []).append((t, n))
    out = DEQ_PREFIX + t
    found.dequantize.append(Dequantize(t, scale, zp, axis, out))
    found.observables.append(Observable(key=x, name=dqs[0] if dqs else t, probe=out, node=site.name, node_named=bool(n.name),
                                        op_type=n.op_type, effective_op=graph.float_op(x), index=site.index,
                                        shape=static_shape(graph.types.get(x)), kind="qdq", is_output=t in graph.outputs,
                                        floor_zero=graph.floor_zero(zp, t)))


def _codes(graph: GraphIndex, found: _Found, site: NodeSite, t: str) -> None:
    """Codes no DequantizeLinear reads (a QLinear* output, a Gather of quantized codes): dequantized with the
    scale their producer or their QLinear* readers give them (kind ``qoperator``, keyed by the float name
    the quantizer derived ``t`` from); without one, ``_codes_of_no_scale``."""
    q = graph.qparams(t) or graph.read_with(t)
    if q is None:
        _codes_of_no_scale(graph, found, site, t)
        return
    out = DEQ_PREFIX + t
    found.dequantize.append(Dequantize(t, q[0], q[1], q[2], out))
    found.observables.append(_observable(graph, site, t, stem(t), "qoperator", probe=out, floor=graph.floor_zero(q[1], t)))


def _codes_of_no_scale(graph: GraphIndex, found: _Found, site: NodeSite, t: str) -> None:
    """Integer values no scale is known for: compared as they are where they are data of their own (a Cast's
    bytes, an image's) or a model output; hidden where a dynamic quantization made them (the float tensor
    is compared); else listed in ``unscaled`` (codes compared on neither side)."""
    made, et = graph.origin(t), graph.elem(t)
    if not quantized_origin(made) or t in graph.outputs:  # an int8/uint8 value of its own (a Cast, an image's
        found.observables.append(_observable(graph, site, t, t, "float"))  # bytes), or what the model gives: as int32 is
    elif made == "DynamicQuantizeLinear":
        found.hidden[t] = "the codes of a dynamic quantization (a scale computed at run time): compared as the float tensor it quantizes"
    else:
        found.hidden[t] = f"{onnx.helper.tensor_dtype_to_np_dtype(et).name if et else 'integer'} codes of no known scale (nothing dequantizes them): compared on neither side"
        found.unscaled.append(_observable(graph, site, t, t, "float"))


def _float_around_quantization(graph: GraphIndex, found: _Found, site: NodeSite, t: str) -> bool:
    """Claims a float tensor next to a quantization: one a QuantizeLinear reads (compared after it, hidden
    here), a DequantizeLinear of a QuantizeLinear (the QDQ value, compared as its float input), and a
    DequantizeLinear of other codes (observed, kind ``qoperator`` or ``qdq``); other floats are not claimed."""
    n, et = site.node, graph.elem(t)
    if not (et in FLOAT_TYPES or et == 0):
        return False
    qs = [c for c in graph.consumers.get(t, []) if c.node.op_type == "QuantizeLinear"]
    if qs and t not in graph.outputs:
        found.hidden[t] = f"compared after quantization, through {qs[0].node.output[0]}"
        return True
    src = graph.producer.get(n.input[0]) if n.op_type == "DequantizeLinear" else None
    if src is None:
        return False
    if src.node.op_type == "QuantizeLinear" and t not in graph.outputs:
        found.hidden[t] = f"the QDQ value of {src.node.input[0]}"
        return True
    # DQ of a QLinear* output (QOperator), or of a moved QDQ value
    zp = n.input[2] if len(n.input) > 2 and n.input[2] else None
    kind = "qoperator" if graph.origin(n.input[0]) in QLINEAR_OUT_PARAMS else "qdq"
    found.observables.append(_observable(graph, site, t, t, kind, floor=graph.floor_zero(zp, n.input[0])))
    return True


def _observation(graph: GraphIndex, found: _Found) -> Observation:
    """The Observation of the nodes' outputs in ``found``, with the sparse outputs (``_sparse_outputs``), the
    outputs that are weights placed first (a stable sort: before their first reader), each observable's
    evidence (``with_sources``, ``with_tails``) and the If branches' observables, in topological order."""
    made = {o for s in graph.sites for o in s.node.output}
    _sparse_outputs(graph, found, made)
    obs = weight_outputs(graph.model, made | set(found.hidden), found.hidden, found.no_numbers, graph.sites,
                         Observable, FLOAT_TYPES) + found.observables
    consts = graph_constants(graph.model.graph)
    inputs, ints = {i.name for i in graph.model.graph.input} - set(graph.values), int_constants(consts)
    obs = with_sources(obs, graph.producer, graph.const, inputs, {t for t in graph.producer if graph.elem(t) in FLOAT_TYPES or graph.elem(t) == 0},
                       float_constants(graph.model, consts.items()), code_sizes(graph.model, consts.items()), ints,
                       lambda t: static_shape(graph.types.get(t)))
    obs = with_tails(obs, graph.producer, graph.consumers, graph.const)
    obs += branch_observables(graph.every, graph.types, graph.const, graph.every_type, found.hidden, found.no_numbers,
                              obs, graph.producer, inputs, ints, Observable)
    obs.sort(key=lambda o: o.index)
    return Observation(obs, found.dequantize, found.hidden, found.no_numbers, _weights_quantized(graph), found.unscaled,
                       len(found.blocked & set(found.hidden)))


def _sparse_outputs(graph: GraphIndex, found: _Found, made: set[str]) -> None:
    """A sparse initializer given as an output (onnxruntime returns it, no tensor), which no node in ``made``
    writes: listed in ``no_numbers`` with why, never compared."""
    for t, what in graph.non_tensors.items():
        if t not in made and t not in found.hidden:
            found.hidden[t] = f"{what}, not a tensor: no difference to measure"
            found.no_numbers.append(Observable(key=t, name=t, probe=t, node="", node_named=False, op_type="", effective_op="",
                                               index=0, shape=None, kind="float", is_output=True))


def _weights_quantized(graph: GraphIndex) -> bool:
    """The model dequantizes integer weights itself (a DequantizeLinear of constants, a packed weight)."""
    return any((s.node.op_type == "DequantizeLinear" and s.node.output and s.node.output[0] in graph.const)
               or packed_weight(s.node) for s in graph.sites)


def scoped_hint(obs: list[Observable], name: str) -> str:
    """For a bare ``name`` that sibling If branches share, and so no observable's: the keys to give instead."""
    keys = list(dict.fromkeys(o.name for o in obs if o.scope and o.name == f"{o.scope}/{name}"))
    return f"; If branches share that name: give one by its scope ({', '.join(keys)})" if keys else ""
