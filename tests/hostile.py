"""A corpus of hostile inputs for every command: broken graphs, hostile files and paths, hostile names,
impossible sizes, conflicting flags, unwritable outputs. Each case builds its files in a folder of its own
and says which command line to run and what a correct answer looks like (an exit code, or 0 with a note
for inputs that are legitimately fine, and a fragment the one-line message must contain)."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import stat
import struct
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SAMPLES = Path(__file__).resolve().parent.parent / "sample_models"
ESC = "\x1b[31m"
FORGED = "x\nonnxprobe: error: FORGED"
LONG = "n" * 10_000


@dataclass
class Case:
    name: str
    build: Callable[[Path], list[str]]  # folder -> argv (without the program name)
    codes: tuple[int, ...] = (1, 2)  # acceptable exit codes
    needle: str | None = None  # a fragment the error or note must contain
    outputs: tuple[str, ...] = ()  # files the command may write (relative to the folder)
    subprocess: bool = False  # run in a fresh process (bounded memory is measured there)
    max_peak_mb: int | None = None
    stdin: str | None = None
    as_root: bool = True  # root writes into read-only folders: such a case says nothing when run as root
    verdict: bool = False  # exit 1 may be a comparison that failed (no error line), not bad input
    # the command's address space at most this many GiB (subprocess cases; its own subprocesses inherit it): a
    # case whose runtime misbehaves at random (OpenVINO reading past a Slice) must not take the machine's memory
    address_space_gb: int | None = None


def _pb_dims(folder: Path, dims: list[int], values: int = 0) -> str:
    """A float .pb tensor 'x' declaring ``dims`` (negative ones too) and holding ``values`` ones."""
    t = TensorProto(name="x", data_type=TensorProto.FLOAT, dims=dims, float_data=[1.0] * values)
    return _write(folder, "x.pb", t.SerializeToString())


def _weight_without_data(dims: list[int]) -> onnx.ModelProto:
    """y = x @ w, the weight w declaring ``dims`` (float) and holding no data at all."""
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=dims)
    return _model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [_vi("x", shape=(2, dims[0]))],
                  [_vi("y", shape=(2, dims[1]))], [w])


def _model(nodes, inputs, outputs, inits=(), opset=17, ir=8, **kw) -> onnx.ModelProto:
    g = helper.make_graph(nodes, kw.pop("graph_name", "g"), inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="hostile")
    m.ir_version = ir
    for k, v in kw.items():
        setattr(m, k, v)
    return m


def _vi(name, elem=TensorProto.FLOAT, shape=(2, 3)):
    return helper.make_tensor_value_info(name, elem, list(shape) if shape is not None else None)


def _relu(names=("x", "y"), node_name="relu", **kw) -> onnx.ModelProto:
    x, y = names
    return _model([helper.make_node("Relu", [x], [y], name=node_name)], [_vi(x)], [_vi(y)], **kw)


def _without_ir(m: onnx.ModelProto) -> onnx.ModelProto:
    m.ClearField("ir_version")
    return m


def _save(folder: Path, model: onnx.ModelProto, name: str = "m.onnx") -> str:
    p = folder / name
    onnx.save(model, str(p))
    return str(p)



def _branch_model(inner: onnx.NodeProto) -> onnx.ModelProto:
    """y = If(c) then inner's t else x (x: [3, 3] float32): ``inner`` reads the outer x and weight w (ones)."""
    then = helper.make_graph([inner], "then", [], [_vi("t", shape=(3, 3))])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"], name="id")], "else", [], [_vi("e", shape=(3, 3))])
    return _model([helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)],
                  [_vi("x", shape=(3, 3)), _vi("c", TensorProto.BOOL, ())], [_vi("y", shape=(3, 3))],
                  [numpy_helper.from_array(np.ones((3, 3), np.float32), "w")])

def _write(folder: Path, name: str, data: bytes) -> str:
    p = folder / name
    p.write_bytes(data)
    return str(p)


def _npy_header_only(shape, dtype="<f4") -> bytes:
    header = repr({"descr": dtype, "fortran_order": False, "shape": tuple(shape)}).encode()
    header += b" " * (64 - (len(header) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + b"\0" * 64


def _readonly(folder: Path) -> str:
    d = folder / "ro"
    d.mkdir()
    d.chmod(stat.S_IRUSR | stat.S_IXUSR)
    return str(d)


def _external(folder: Path, **entries) -> str:
    m = _model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [_vi("x")], [_vi("y")])
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3])
    t.data_location = TensorProto.EXTERNAL
    base = {"location": "w.bin", "offset": "0", "length": "24"}
    base.update(entries)
    for k, v in base.items():
        if v is not None:
            e = t.external_data.add()
            e.key, e.value = k, v
    m.graph.initializer.append(t)
    (folder / "w.bin").write_bytes(np.arange(6, dtype=np.float32).tobytes())
    return _save(folder, m)


def _symlink_outside(folder: Path) -> str:
    secret = folder.parent / f"{folder.name}_secret.bin"
    secret.write_bytes(np.full(6, 7, np.float32).tobytes())
    (folder / "link.bin").symlink_to(secret)
    return _external(folder, location="link.bin")


def _sparse(folder: Path) -> str:
    values = numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "w")
    idx = numpy_helper.from_array(np.array([0, 4], np.int64), "w_idx")
    sp = helper.make_sparse_tensor(values, idx, [2, 3])
    m = _model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [_vi("x")], [_vi("y")])
    m.graph.sparse_initializer.append(sp)
    return _save(folder, m)


def _typed_model(elem, opset=21, ir=10) -> onnx.ModelProto:
    """x (float) -> Cast to a narrow type -> Cast back: tensors of that type in the middle."""
    return _model([helper.make_node("Cast", ["x"], ["q"], name="to", to=elem),
                   helper.make_node("Cast", ["q"], ["y"], name="back", to=TensorProto.FLOAT)],
                  [_vi("x")], [_vi("y")], opset=opset, ir=ir)


def _two_inputs(shape_b=("batch", 3)) -> onnx.ModelProto:
    return _model([helper.make_node("Add", ["a", "b"], ["y"], name="add")],
                  [_vi("a", shape=("batch", 3)), _vi("b", shape=shape_b)], [_vi("y", shape=("batch", 3))])


def _cycle() -> onnx.ModelProto:
    return _model([helper.make_node("Add", ["x", "z"], ["y"], name="a"), helper.make_node("Relu", ["y"], ["z"], name="b")],
                  [_vi("x")], [_vi("y")])


def _unnamed_loop_output() -> onnx.ModelProto:
    """onnx's test_loop11 with the Loop's final y (output 0) omitted as '' and only its scan output kept."""
    m = loop11_model()
    m.graph.node[0].output[0] = ""
    del m.graph.output[0]
    return m


def _loop_body_short() -> onnx.ModelProto:
    """test_loop11 with its body's loop-carried input y_in dropped: the body takes 2 values for the Loop's 3."""
    m = loop11_model()
    del m.graph.node[0].attribute[0].g.input[2]
    return m


def _declared_off(elem: int, what: str) -> onnx.ModelProto:
    """x -> Relu -> t -> Relu -> y plus a Constant c (y + c -> z): ``what`` ('t', 'c' or 'w', an initializer
    also a graph output) declared of element type ``elem`` in the value_info."""
    nodes = [helper.make_node("Relu", ["x"], ["t"], name="r1"), helper.make_node("Relu", ["t"], ["y"], name="r2"),
             helper.make_node("Constant", [], ["c"], name="c", value=numpy_helper.from_array(np.ones((2, 3), np.float32))),
             helper.make_node("Add", ["y", "c"], ["z"], name="add")]
    m = _model(nodes, [_vi("x")], [_vi("z"), _vi("w")], [numpy_helper.from_array(np.ones((2, 3), np.float32), "w")])
    m.graph.value_info.append(_vi(what, elem))
    return m


def _classifier(folder: Path, labels) -> list[str]:
    m = _model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [_vi("x", shape=(2, 3))], [_vi("y", shape=(2, 4))],
               [numpy_helper.from_array(np.ones((3, 4), np.float32), "w")])
    np.save(folder / "labels.npy", np.asarray(labels))
    return ["grad", _save(folder, m), "--loss", "cross-entropy", "--labels", str(folder / "labels.npy")]


def sample(name: str) -> str:
    return str(SAMPLES / f"{name}.onnx")


MODEL_COMMANDS = {
    "layers": lambda p, d: ["layers", p],
    "layers_all": lambda p, d: ["layers", p, "--all"],
    "diff_a": lambda p, d: ["diff", p, sample("mlp")],
    "diff_b": lambda p, d: ["diff", sample("mlp"), p],
    "vs_reference": lambda p, d: ["diff", p, "--vs-reference"],
    "grad": lambda p, d: ["grad", p],
    "inspect": lambda p, d: ["inspect", p],
    # --stats: raw, the one tensor of a one-node model is its output already, which adds nothing (exit 2)
    "mark": lambda p, d: ["mark", p, "--stats", "-o", str(d / "out.onnx")],
    "extract": lambda p, d: ["extract", p, "-o", str(d / "out.onnx")],
    "debug": lambda p, d: ["debug", p, "--script", str(_script(d, ["info", "run"]))],
    "vs_openvino": lambda p, d: ["diff", p, "--vs-runtime", "openvino"],
}


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


OPENVINO = _installed("openvino")


def _script(folder: Path, lines: list[str]) -> Path:
    p = folder / "s.txt"
    p.write_text("\n".join(lines) + "\n")
    return p


def _link_loop(d: Path) -> str:
    """m.onnx -> loop.onnx -> m.onnx: a path that exists as a link and leads to no file."""
    import os

    os.symlink(d / "loop.onnx", d / "m.onnx")
    os.symlink(d / "m.onnx", d / "loop.onnx")
    return str(d / "m.onnx")


def _attrs_model(*attrs: onnx.AttributeProto, op: str = "LeakyRelu", **kw) -> onnx.ModelProto:
    """x -> one ``op`` node given ``attrs`` as they are (twice, of a wrong type, unknown to the op...) -> y."""
    n = helper.make_node(op, ["x"], ["y"], name="n", **kw)
    n.attribute.extend(attrs)
    return _model([n], [_vi("x")], [_vi("y")])


def _scan_sum(num_scan_inputs: onnx.AttributeProto) -> onnx.ModelProto:
    """A Scan summing the rows of x (3, 2) into a running total, its num_scan_inputs given as ``num_scan_inputs``."""
    body = helper.make_graph([helper.make_node("Add", ["s_in", "x_i"], ["s_out"], name="add"),
                              helper.make_node("Identity", ["s_out"], ["y_i"], name="id")], "body",
                             [_vi("s_in", shape=(2,)), _vi("x_i", shape=(2,))], [_vi("s_out", shape=(2,)), _vi("y_i", shape=(2,))])
    scan = helper.make_node("Scan", ["s0", "x"], ["s", "ys"], name="scan", body=body)
    scan.attribute.append(num_scan_inputs)
    return _model([scan], [_vi("s0", shape=(2,)), _vi("x", shape=(3, 2))], [_vi("s", shape=(2,)), _vi("ys", shape=(3, 2))])


def _conv_weight_rank_1() -> onnx.ModelProto:
    """A Conv with a kernel_shape whose weight is 1-D: grad's rules read W's dims 0 and 1 (an IndexError)."""
    w = numpy_helper.from_array(np.ones(2, np.float32), "w")
    return _model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv", kernel_shape=[1, 1])],
                  [_vi("x", shape=(1, 2, 4, 4))], [_vi("y", shape=(1, 2, 4, 4))], [w])


def _relu_pair(elem: int, where: str) -> onnx.ModelProto:
    """x -> Relu -> t -> Relu -> y, with t (value_info) or y (graph output) declared of element type ``elem``."""
    m = _model([helper.make_node("Relu", ["x"], ["t"], name="r1"), helper.make_node("Relu", ["t"], ["y"], name="r2")],
               [_vi("x")], [_vi("y", elem if where == "output" else TensorProto.FLOAT)])
    if where == "value_info":
        m.graph.value_info.append(_vi("t", elem))
    return m


def _declared_seq(name: str | None, w_elem: int = TensorProto.FLOAT, kind: str = "seq") -> onnx.ModelProto:
    """x + w -> t -> Relu -> y (w an initializer also listed as an input, as IR 3 lists them), with ``name``
    (t or w; None: neither) declared a sequence of tensors in the value_info or the inputs."""
    seq = helper.make_tensor_sequence_value_info(name or "w", TensorProto.FLOAT, [2, 3])
    if kind == "optional":
        seq = helper.make_value_info(name, helper.make_optional_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [2, 3])))
    inputs = [_vi("x")] + ([seq] if name == "w" else [_vi("w", w_elem)])
    m = _model([helper.make_node("Add", ["x", "w"], ["t"], name="add"), helper.make_node("Relu", ["t"], ["y"], name="relu")],
               inputs, [_vi("y")], [numpy_helper.from_array(np.ones((2, 3), np.float32), "w")], ir=3 if name == "w" else 8)
    if name == "t":
        m.graph.value_info.append(seq)
    return m


BROKEN_FILES: dict[str, Callable[[Path], str]] = {
    "missing": lambda d: str(d / "nope.onnx"),
    "link_loop": _link_loop,
    "folder": lambda d: str(d),
    "empty": lambda d: _write(d, "m.onnx", b""),
    "random_bytes": lambda d: _write(d, "m.onnx", np.random.default_rng(0).bytes(4096)),
    "text": lambda d: _write(d, "m.onnx", b'{"not": "onnx"}\n'),
    "truncated_half": lambda d: _write(d, "m.onnx", Path(sample("cnn")).read_bytes()[: Path(sample("cnn")).stat().st_size // 2]),
    "truncated_10": lambda d: _write(d, "m.onnx", Path(sample("cnn")).read_bytes()[:10]),
    "tensor_proto": lambda d: _write(d, "m.onnx", numpy_helper.from_array(np.ones(4, np.float32), "t").SerializeToString()),
    "no_graph": lambda d: _write(d, "m.onnx", onnx.ModelProto(ir_version=8).SerializeToString()),
}

BROKEN_GRAPHS: dict[str, Callable[[Path], str]] = {
    "undefined_input_type": lambda d: _save(d, _model([helper.make_node("Relu", ["x"], ["y"], name="r")],
                                                     [_vi("x", TensorProto.UNDEFINED)], [_vi("y")])),
    "unknown_op": lambda d: _save(d, _model([helper.make_node("Frobnicate", ["x"], ["y"], name="f")], [_vi("x")], [_vi("y")])),
    "custom_domain_op": lambda d: _save(d, _model([helper.make_node("Frob", ["x"], ["y"], name="f", domain="acme")], [_vi("x")], [_vi("y")])),
    "missing_input": lambda d: _save(d, _model([helper.make_node("Add", ["x", "ghost"], ["y"], name="a")], [_vi("x")], [_vi("y")])),
    "cycle": lambda d: _save(d, _cycle()),
    "future_opset": lambda d: _save(d, _relu(opset=1000)),
    # no ir_version field at all: onnxruntime refuses it ('Missing model IR version'); an ir_version of 0, which
    # onnxruntime loads (read as below IR 4), is a model onnxprobe loads too (tests/test_load_ir_version_zero.py)
    "ir_missing": lambda d: _save(d, _without_ir(_relu())),
    "duplicate_outputs": lambda d: _save(d, _model([helper.make_node("Relu", ["x"], ["y"], name="a"),
                                                   helper.make_node("Neg", ["x"], ["y"], name="b")], [_vi("x")], [_vi("y")])),
    # a Loop whose loop-carried output is left unnamed: onnxruntime 1.2x dies of SIGSEGV running it (fuzzing, QA)
    "loop_output_unnamed": lambda d: _save(d, _unnamed_loop_output()),
    # a graph output no node gives: onnxruntime refuses it, but diff's one merged run of both models left it out (passed)
    "output_given_by_nothing": lambda d: _save(d, _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [_vi("x")],
                                                         [_vi("y"), _vi("ghost")])),
    # a DequantizeLinear given no input: diff's matching read its input 0, an internal IndexError (fuzzing, QA)
    "too_few_inputs": lambda d: _save(d, _model([helper.make_node("DequantizeLinear", [], ["q"], name="dq"),
                                                 helper.make_node("Add", ["x", "q"], ["y"], name="add")], [_vi("x")], [_vi("y")])),
    # a MatMul given three inputs inside an If branch: grad's rule failed on it, an internal ValueError (fuzzing, QA);
    # and a node of more outputs than its op gives
    "too_many_inputs_in_branch": lambda d: _save(d, _branch_model(helper.make_node("MatMul", ["x", "w", "w"], ["t"], name="mm3"))),
    "too_many_outputs": lambda d: _save(d, _model([helper.make_node("Relu", ["x"], ["y", "extra"], name="r")], [_vi("x")], [_vi("y")])),
    # QA fuzzing: attributes onnxruntime refuses, which grad's rules read (an internal error) or an opset
    # conversion quietly mended (grad passed a model that does not load): refused when the model is read
    "attr_twice": lambda d: _save(d, _attrs_model(helper.make_attribute("alpha", 0.2), alpha=0.1)),
    "attr_wrong_type": lambda d: _save(d, _attrs_model(onnx.AttributeProto(name="axis", type=onnx.AttributeProto.FLOATS), op="Softmax")),
    "attr_of_no_type": lambda d: _save(d, _attrs_model(onnx.AttributeProto(name="alpha"))),
    "attr_unknown_to_op": lambda d: _save(d, _attrs_model(helper.make_attribute("zz", 3), op="Relu")),
    "attr_required_missing": lambda d: _save(d, _attrs_model(op="Cast")),
    "cast_to_unknown_type": lambda d: _save(d, _attrs_model(op="Cast", to=40)),
    "scan_num_inputs_empty_floats": lambda d: _save(d, _scan_sum(onnx.AttributeProto(name="num_scan_inputs", type=onnx.AttributeProto.FLOATS))),
    "output_elem_type_40": lambda d: _save(d, _relu_pair(40, "output")),
    "value_info_elem_type_40": lambda d: _save(d, _relu_pair(40, "value_info")),
    "input_elem_type_negative": lambda d: _save(d, _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [_vi("x", -3)], [_vi("y")])),
    "conv_weight_rank_1": lambda d: _save(d, _conv_weight_rank_1()),
    # a value declared a sequence that is a tensor: onnxruntime refuses it ("Type mismatch"), diff passed it (QA fuzzing)
    "value_info_kind_seq": lambda d: _save(d, _declared_seq("t")),
    "weight_input_kind_seq": lambda d: _save(d, _declared_seq("w")),
    "weight_input_declared_bool": lambda d: _save(d, _declared_seq(None, w_elem=TensorProto.BOOL)),
    "value_info_kind_optional": lambda d: _save(d, _declared_seq("t", kind="optional")),
    # QA fuzzing: declarations onnxruntime refuses ("Invalid tensor data type 0", "does not match expected
    # type"), which layers and grad ran anyway: their graphs of their own dropped the model's value_info
    "value_info_elem_undefined": lambda d: _save(d, _declared_off(TensorProto.UNDEFINED, "t")),
    "output_elem_undefined": lambda d: _save(d, _relu_pair(TensorProto.UNDEFINED, "output")),
    "value_info_elem_not_computed": lambda d: _save(d, _declared_off(TensorProto.INT64, "t")),
    # a Loop body taking fewer values than its node gives: grad's Loop rule failed on it (IndexError)
    "loop_body_short": lambda d: _save(d, _loop_body_short()),
    "concat_axis_string": lambda d: _save(d, _attrs_model(helper.make_attribute("axis", "zz"), op="Concat")),
    "external_missing_file": lambda d: (os.remove(_external(d) and d / "w.bin"), str(d / "m.onnx"))[1],
    "external_length_nan": lambda d: _external(d, length="many"),
    "external_offset_negative": lambda d: _external(d, offset="-8"),
    "external_absolute": lambda d: _external(d, location="/etc/passwd"),
    "external_parent": lambda d: _external(d, location="../w.bin"),
    "external_symlink_outside": _symlink_outside,
    "external_short": lambda d: _external(d, length="4000"),
    "external_length_too_small": lambda d: _external(d, length="12"),
    "external_truncated_file": lambda d: (_external(d), (d / "w.bin").write_bytes(b"\0" * 10))[0],
    "external_nul_location": lambda d: _external(d, location="w.bin\x00.txt"),
    "external_location_a_folder": lambda d: ((d / "sub").mkdir(), _external(d, location="sub"))[1],
}

# legitimately fine: onnxruntime runs them, so onnxprobe probes them (exit 0, maybe with a note)
FINE_MODELS: dict[str, Callable[[Path], str]] = {
    "sparse_initializer": _sparse,
    "float8": lambda d: _save(d, _typed_model(TensorProto.FLOAT8E4M3FN)),
    "int4": lambda d: _save(d, _typed_model(TensorProto.INT4)),
    "escape_names": lambda d: _save(d, _relu((f"x{ESC}", f"y{ESC}"), node_name=f"relu{ESC}\x07")),
    "newline_names": lambda d: _save(d, _relu(("x", FORGED), node_name=FORGED)),
    "long_names": lambda d: _save(d, _relu(("x", LONG), node_name=LONG)),
    "bidi_names": lambda d: _save(d, _relu(("x", "y\u202egnp.exe"), node_name="\u202erelu")),
    "escape_doc_metadata": lambda d: _save(d, _with_metadata(_relu())),
    "escape_file_name": lambda d: _save(d, _relu(), name=f"m{ESC}.onnx"),
    # onnxruntime does not read the declared type of a weight or a Constant's output (measured): fine
    "constant_declared_int64": lambda d: _save(d, _declared_off(TensorProto.INT64, "c")),
    "weight_declared_undefined": lambda d: _save(d, _declared_off(TensorProto.UNDEFINED, "w")),
    "weight_declared_int64": lambda d: _save(d, _declared_off(TensorProto.INT64, "w")),  # was refused
    "traversal_tensor_name": lambda d: _save(d, _relu(("x", "../../../tmp/onnxprobe_escape"))),
}


def _with_metadata(m: onnx.ModelProto) -> onnx.ModelProto:
    m.doc_string = f"doc{ESC}\nonnxprobe: error: FORGED"
    m.graph.doc_string = f"graph{ESC}"
    p = m.metadata_props.add()
    p.key, p.value = f"k{ESC}", f"v{ESC}\n"
    return m


def _cases() -> list[Case]:
    out: list[Case] = []
    for fname, make in BROKEN_FILES.items():
        for cname, cmd in MODEL_COMMANDS.items():
            if cname == "vs_openvino" and not OPENVINO:
                continue
            out.append(Case(f"{fname}-{cname}", (lambda d, make=make, cmd=cmd: cmd(make(d), d)), outputs=("out.onnx",)))
    for gname, make in BROKEN_GRAPHS.items():
        for cname in ("layers", "diff_a", "grad", "inspect", "mark", "debug") + (("vs_openvino",) if OPENVINO else ()):
            cmd = MODEL_COMMANDS[cname]
            # inspect and mark do not run the model: a graph that onnx.checker or onnxruntime refuses is
            # described or copied with a note (a broken external-data entry is still an error)
            codes = (0, 1, 2) if cname in ("inspect", "mark") else (1, 2)
            out.append(Case(f"{gname}-{cname}", (lambda d, make=make, cmd=cmd: cmd(make(d), d)), codes, outputs=("out.onnx",)))
    for fname, make in FINE_MODELS.items():
        for cname in ("layers_all", "inspect", "mark", "debug", "vs_reference") + (("vs_openvino",) if OPENVINO else ()):
            cmd = MODEL_COMMANDS[cname]
            # onnx.reference may disagree with onnxruntime (int4 rounding): a failed comparison, not an error;
            # OpenVINO may not read a model onnxruntime runs (float8, int4): an error line, exit 1
            other = cname in ("vs_reference", "vs_openvino")
            out.append(Case(f"{fname}-{cname}", (lambda d, make=make, cmd=cmd: cmd(make(d), d)),
                            (0, 1) if other else (0,), outputs=("out.onnx",), verdict=other))
    out += _runtime_cases()
    out += [
        # refused when read, by the commands that do not run the model too (inspect and mark once took it, and
        # grad passed inception_v1 so: its copy converted to opset 17 kept one of the two, QA fuzzing)
        Case("attr_twice_inspect", lambda d: ["inspect", BROKEN_GRAPHS["attr_twice"](d)], (1,), "'alpha' twice"),
        Case("attr_twice_mark", lambda d: ["mark", BROKEN_GRAPHS["attr_twice"](d), "--all", "-o", str(d / "o.onnx")], (1,), "'alpha' twice"),
        Case("attr_twice_extract", lambda d: ["extract", BROKEN_GRAPHS["attr_twice"](d), "--to", "y", "-o", str(d / "o.onnx")], (1,),
             "'alpha' twice"),
        Case("value_info_elem_type_40_inspect", lambda d: ["inspect", BROKEN_GRAPHS["value_info_elem_type_40"](d)], (1,), "element type 40"),
        # against the same model soundly typed: diff ran one graph of its own and passed it (resnet50, QA fuzzing)
        Case("weight_input_kind_seq_vs_clean", lambda d: ["diff", BROKEN_GRAPHS["weight_input_kind_seq"](d),
                                                          _save(d, _declared_seq(None), "clean.onnx")], (1,), "declared a seq"),
        Case("weight_input_declared_bool_vs_clean", lambda d: ["diff", BROKEN_GRAPHS["weight_input_declared_bool"](d),
                                                               _save(d, _declared_seq(None), "clean.onnx")], (1,), "BOOL"),
        Case("value_info_kind_seq_vs_clean", lambda d: ["diff", BROKEN_GRAPHS["value_info_kind_seq"](d),
                                                        _save(d, _declared_seq(None), "clean.onnx")], (1,), "declared a seq"),
        Case("save_traversal_names", lambda d: ["layers", FINE_MODELS["traversal_tensor_name"](d), "--all", "--save", str(d / "a.npz")],
             (0,), outputs=("a.npz",)),
        Case("grad_escape_names", lambda d: ["grad", FINE_MODELS["escape_names"](d)], (0,)),  # the loss output's name in the footer
        Case("grad_newline_names", lambda d: ["grad", FINE_MODELS["newline_names"](d)], (0,)),
        # a weight whose dims ask for more than its data holds, past the size where sessions are built from a
        # skeleton (the weights handed over apart): named, as a smaller one is (onnxruntime's "Deserialize tensor")
        Case("weight_declares_huge_holds_nothing", lambda d: ["layers", _save(d, _weight_without_data([3, 99999999999]))],
             (1,), "'w'"),
        Case("weight_16mb_holds_nothing", lambda d: ["layers", _save(d, _weight_without_data([2048, 2048]))], (1,), "'w'"),
        Case("sparse_3gb_zeros", lambda d: ["layers", _sparse_file(d)], subprocess=True, max_peak_mb=600),
        Case("shape_impossible", lambda d: ["layers", sample("dynamic_batch"), "--shape", "x=100000000000x3x8x8"], (2,), "more than"),
        Case("npz_declares_2gb", lambda d: ["layers", sample("mlp"), "--inputs", _zip_npy(d, "x", _npy_header_only((2**29,)))],
             (2,), "declares 2 GiB", subprocess=True, max_peak_mb=600),
        Case("npz_declares_huge", lambda d: ["layers", sample("mlp"), "--inputs", _zip_npy(d, "x", _npy_header_only((10**12,)))],
             (2,), "more than"),
        Case("npy_declares_huge", lambda d: ["layers", sample("mlp"), "--input", f"x={_write(d, 'x.npy', _npy_header_only((10**12,)))}"],
             (2,), "more than"),
        Case("npy_declares_more_than_it_holds", lambda d: ["layers", sample("mlp"), "--input",
                                                            f"x={_write(d, 'x.npy', _npy_header_only((4, 16)))}"], (2,), "holds"),
        Case("npy_object_array", lambda d: ["layers", sample("mlp"), "--input", f"x={_pickled_npy(d)}"], (2,), None),
        Case("max_memory_zero", lambda d: ["layers", sample("mlp"), "--max-memory", "0"], (2,), "--max-memory"),
        Case("max_memory_garbage", lambda d: ["layers", sample("mlp"), "--max-memory", "lots"], (2,), "--max-memory"),
        Case("max_memory_past_float", lambda d: ["layers", sample("mlp"), "--max-memory", "9" * 400 + "G"], (0,)),  # no limit, as 1e23T
        Case("input_and_shape_disagree", lambda d: ["layers", sample("mlp"), "--input", f"x={_npy(d, 'x', (4, 16))}", "--shape", "x=2x16"],
             (2,), "disagrees"),
        Case("named_dim_two_sizes", lambda d: ["layers", _save(d, _two_inputs()), "--shape", "a=2x3", "--shape", "b=5x3"], (2,), "one named dimension"),
        Case("diff_input_shapes_differ", lambda d: ["diff", _save(d, _two_inputs(), "a.onnx"), _save(d, _two_inputs(("batch", 4)), "b.onnx")],
             (2,), "shape"),
        Case("ragged_literal", lambda d: ["layers", sample("mlp"), "--input", "x=[[1,2],[3]]"], (2,), "rectangular"),
        Case("model_name_too_long", lambda d: ["layers", str(d / ("m" * 300 + ".onnx"))], (2,), "File name too long"),
        Case("json_name_too_long", lambda d: ["layers", sample("mlp"), "--json", str(d / ("r" * 300 + ".json"))], (2,),
             "File name too long"),
        Case("inputs_name_too_long", lambda d: ["layers", sample("mlp"), "--inputs", "i" * 300 + ".npz"], (2,), "File name too long"),
        Case("literal_nested_too_deep", lambda d: ["layers", sample("mlp"), "--input", "x=" + "[" * 600 + "1" + "]" * 600], (2,),
             "nested deeper than 32"),
        Case("script_is_a_folder", lambda d: ["debug", sample("mlp"), "--script", str(d)], (2,), "is a folder"),
        Case("mark_to_stdout", lambda d: ["mark", sample("mlp"), "--all", "-o", "-"], (2,), "not '-'"),
        Case("extract_to_stdout", lambda d: ["extract", sample("mlp"), "--to", "fc1_out", "-o", "-"], (2,), "not '-'"),
        Case("save_to_stdout", lambda d: ["layers", sample("mlp"), "--save", "-"], (2,), "not '-'"),
        Case("fp32_sensitivity_negative", lambda d: ["diff", sample("mlp"), sample("mlp"), "--fp32-sensitivity", "-1"], (2,),
             "--fp32-sensitivity -1: the number of layers"),
        Case("per_tensor_tolerance_of_no_tensor", lambda d: ["diff", sample("mlp"), sample("mlp"), "--atol", "fc1_ot:1e-3"], (2,),
             "neither model observes"),
        # empty or doubled values were taken as the default or the last one, silently (QA)
        Case("empty_range", lambda d: ["layers", sample("mlp"), "--range", ""], (2,), "--range '': expected"),
        Case("empty_max_memory", lambda d: ["layers", sample("mlp"), "--max-memory", ""], (2,), "--max-memory ''"),
        Case("tolerance_without_a_name", lambda d: ["diff", sample("mlp"), sample("mlp"), "--atol", ":1"], (2,), "no tensor name"),
        Case("tolerance_given_twice", lambda d: ["diff", sample("mlp"), sample("mlp"), "--atol", "1e-3", "--atol", "1e-4"], (2,),
             "given twice"),
        Case("fraction_for_an_int_input", lambda d: ["layers", sample("control_flow"), "--input", "n=2.9"], (2,), "not an integer"),
        Case("bool_literal_out_of_range", lambda d: ["layers", sample("control_flow"), "--input", "cond=2"], (2,), "true, false, 0 or 1"),
        Case("int64_literal_overflow", lambda d: ["layers", sample("control_flow"), "--input", "n=99999999999999999999999"], (2,),
             "out of range"),
        Case("seed_negative", lambda d: ["layers", sample("mlp"), "--seed", "-1"], (2,), "--seed"),
        Case("int_range_empty", lambda d: ["layers", sample("mlp"), "--int-range", "5:5"], (2,), "LOW must be below HIGH"),
        Case("int_range_garbage", lambda d: ["layers", sample("mlp"), "--int-range", "a:b"], (2,), "--int-range"),
        Case("unknown_input", lambda d: ["layers", sample("mlp"), "--input", "nope=1"], (2,), "unknown input name"),
        Case("input_twice", lambda d: ["layers", sample("mlp"), "--input", "x=1", "--input", "x=2"], (2,), "given twice"),
        Case("wrong_dtype_file", lambda d: ["layers", sample("mlp"), "--input", f"x={_npy(d, 'x', (4, 16), np.int32)}"], (2,), "dtype"),
        # a .pb tensor with a negative dimension: numpy's reshape read -1 as "infer" and -4 as an empty batch
        Case("pb_negative_dim", lambda d: ["layers", sample("dynamic_batch"), "--input", f"x={_pb_dims(d, [-4, 3, 8, 8])}"],
             (2,), "negative"),
        Case("pb_minus_one_dim", lambda d: ["layers", sample("dynamic_batch"), "--input",
                                            f"x={_pb_dims(d, [-1, 3, 8, 8], 384)}"], (2,), "negative"),
        Case("wrong_rank_file", lambda d: ["layers", sample("mlp"), "--input", f"x={_npy(d, 'x', (16,))}"], (2,), "rank"),
        Case("range_reversed", lambda d: ["layers", sample("cnn"), "--range", "5:2"], (2,), "reversed"),
        Case("range_past_end", lambda d: ["layers", sample("cnn"), "--range", "0:9999"], (2,), "outside the model"),
        Case("op_wrong_case", lambda d: ["layers", sample("cnn"), "--op", "conv"], (2,), "did you mean 'Conv'"),
        Case("name_matches_nothing", lambda d: ["layers", sample("cnn"), "--name", "zzz*"], (2,), "matches no"),
        Case("sort_bogus", lambda d: ["diff", sample("mlp"), "--vs-reference", "--sort", "bogus"], (2,), "--sort"),
        Case("metric_bogus", lambda d: ["diff", sample("mlp"), "--vs-reference", "--metric", "bogus"], (2,), "--metric"),
        Case("device_bogus", lambda d: ["layers", sample("mlp"), "--device", "tpu"], (2,), "--device"),
        Case("opt_level_bogus", lambda d: ["layers", sample("mlp"), "--opt-level", "max"], (2,), "--opt-level"),
        Case("sqnr_with_cosine", lambda d: ["diff", sample("mlp"), "--vs-reference", "--metric", "cosine", "--min-sqnr", "20"], (2,), "--min-sqnr"),
        Case("two_references", lambda d: ["diff", sample("mlp"), sample("mlp"), "--vs-reference"], (2,), "exactly one reference"),
        Case("no_reference", lambda d: ["diff", sample("mlp")], (2,), "exactly one reference"),
        Case("grad_with_vs", lambda d: ["diff", sample("mlp"), "--grad", "--vs-reference"], (2,), "two models"),
        Case("inputs_dir_with_input", lambda d: ["layers", sample("mlp"), "--inputs-dir", str(d), "--input", "x=1"], (2,), "--inputs-dir"),
        Case("inputs_dir_empty", lambda d: ["layers", sample("mlp"), "--inputs-dir", str(d)], (2,), "no .npz"),
        Case("target_without_mse", lambda d: ["grad", sample("mlp"), "--target", _npy(d, "t", (4, 8))], (2,), "--target goes with --loss mse"),
        Case("mse_without_target", lambda d: ["grad", sample("mlp"), "--loss", "mse"], (2,), "--target"),
        Case("loss_bogus", lambda d: ["grad", sample("mlp"), "--loss", "hinge"], (2,), "--loss"),
        Case("labels_out_of_range", lambda d: _classifier(d, np.array([7, 1], np.int64)), (2,), "class"),
        Case("labels_negative", lambda d: _classifier(d, np.array([-1, 1], np.int64)), (2,), "class"),
        Case("labels_wrong_shape", lambda d: _classifier(d, np.array([1, 2, 3], np.int64)), (2,), "--labels"),
        Case("wrt_matches_nothing", lambda d: ["grad", sample("mlp"), "--wrt", "zzz*"], (2,), "--wrt"),
        Case("output_not_an_output", lambda d: ["grad", sample("mlp"), "--loss-output", "nope"], (2,), "--loss-output"),
        Case("json_dev_full", lambda d: ["layers", sample("mlp"), "--json", "/dev/full"], (1,), "No space left", outputs=("/dev/full",)),
        Case("json_readonly_folder", lambda d: ["layers", sample("mlp"), "--json", os.path.join(_readonly(d), "r.json")], (2,), "cannot write",
             as_root=False),
        Case("json_under_a_file", lambda d: ["layers", sample("mlp"), "--json", os.path.join(_write(d, "f.txt", b"x"), "r.json")], (2,), None),
        Case("json_missing_folder", lambda d: ["layers", sample("mlp"), "--json", str(d / "no" / "r.json")], (2,), "does not exist"),
        Case("save_readonly_folder", lambda d: ["layers", sample("mlp"), "--save", os.path.join(_readonly(d), "a.npz")], (2,), "cannot write",
             as_root=False),
        Case("save_under_a_file", lambda d: ["layers", sample("mlp"), "--save", os.path.join(_write(d, "f.txt", b"x"), "a.npz")], (2,), None),
        Case("save_dev_full", lambda d: ["layers", sample("mlp"), "--all", "--save", "/dev/full"], (1,), "No space left"),
        Case("save_grads_readonly", lambda d: ["grad", sample("mlp"), "--save-grads", os.path.join(_readonly(d), "g.npz")], (2,), "cannot write",
             as_root=False),
        Case("save_grads_under_a_file", lambda d: ["grad", sample("mlp"), "--save-grads", os.path.join(_write(d, "f.txt", b"x"), "g.npz")],
             (2,), None),
        Case("save_grads_dev_full", lambda d: ["grad", sample("mlp"), "--save-grads", "/dev/full"], (1,), "No space left"),
        Case("export_dev_full", lambda d: ["grad", sample("mlp"), "--export", "/dev/full"], (1,), "No space left"),
        Case("mark_dev_full", lambda d: ["mark", sample("mlp"), "-o", "/dev/full"], (1,), "No space left"),
        Case("mark_external_dev_full", lambda d: ["mark", sample("external_data"), "-o", "/dev/full"], (2,), "regular file"),
        Case("export_onto_model", lambda d: ["grad", _copy(d, "mlp"), "--export", str(d / "mlp.onnx")], (2,), "input model"),
        Case("mark_onto_model", lambda d: ["mark", _copy(d, "mlp"), "-o", str(d / "mlp.onnx")], (2,), "input model"),
        Case("mark_missing_folder", lambda d: ["mark", sample("mlp"), "-o", str(d / "no" / "o.onnx")], (2,), "does not exist"),
        Case("mark_readonly", lambda d: ["mark", sample("mlp"), "-o", os.path.join(_readonly(d), "o.onnx")], (2,), "cannot write",
             as_root=False),
        Case("mark_under_a_file", lambda d: ["mark", sample("mlp"), "-o", os.path.join(_write(d, "f.txt", b"x"), "o.onnx")], (2,), None),
        Case("extract_unknown_tensor", lambda d: ["extract", sample("mlp"), "-o", str(d / "o.onnx"), "--to", "ghost"], (2,), "ghost"),
        Case("debug_script_binary", lambda d: ["debug", sample("mlp"), "--script", _write(d, "s.bin", b"\x00\x01\xff" * 100)], (2,), "binary"),
        Case("debug_script_missing", lambda d: ["debug", sample("mlp"), "--script", str(d / "nope.txt")], (2,), "no such script file"),
        Case("debug_script_bad_lines", lambda d: ["debug", sample("mlp"), "--script",
                                                  str(_script(d, ["frob", "show nope", "save x /dev/full", f"node {ESC}"]))], (1,), None),
        Case("debug_save_readonly", lambda d: ["debug", sample("mlp"), "--script",
                                               str(_script(d, [f"save y {shlex.quote(str(_readonly(d)))}/y.npy"]))], (1,), "cannot write", as_root=False),
        Case("debug_save_dev_full", lambda d: ["debug", sample("mlp"), "--script", str(_script(d, ["save y /dev/full"]))], (1,), "No space left"),
        # paths that exist but are not files: a folder, a device (a read of a pipe or a terminal could wait for ever)
        Case("input_is_a_device", lambda d: ["layers", sample("mlp"), "--input", "x=/dev/null"], (2,), "/dev/null: is a device, not a regular file"),
        Case("input_is_a_folder", lambda d: ["layers", sample("mlp"), "--input", f"x={d}"], (2,), "is a folder (input file expected)"),
        Case("vs_npz_is_a_device", lambda d: ["diff", sample("mlp"), "--vs-npz", "/dev/null"], (2,), "(.npz file expected)"),
        Case("merge_folder", lambda d: ["merge-stats", str(d), str(d)], (2,), "is a folder (report file expected)"),
        Case("script_is_a_folder", lambda d: ["debug", sample("mlp"), "--script", str(d)], (2,), "--script"),
        Case("merge_not_json", lambda d: ["merge-stats", _write(d, "r.json", b"\xff\xfe")], (2,), "not a JSON"),
        Case("merge_nested", lambda d: ["merge-stats", _write(d, "r.json", b"[" * 50_000 + b"]" * 50_000)], (2,), None),
        Case("merge_wrong_types", lambda d: ["merge-stats", _write(d, "r.json", json.dumps(
            {"schema_version": 3, "onnxprobe_version": "x", "model_id": "m", "selection": "s", "batches": "two", "tensors": []}).encode())],
            (2,), "batches"),
        *_dataset_cases(),
        # report outputs: --html, --overlay, --netron, and the table options --columns, --format
        Case("html_dev_full", lambda d: ["layers", sample("mlp"), "--html", "/dev/full"], (1,), "No space left", outputs=("/dev/full",)),
        Case("html_readonly_folder", lambda d: ["layers", sample("mlp"), "--html", os.path.join(_readonly(d), "r.html")], (2,), "cannot write",
             as_root=False),
        Case("html_under_a_file", lambda d: ["diff", sample("mlp"), "--vs-reference", "--html", os.path.join(_write(d, "f.txt", b"x"), "r.html")],
             (2,), None),
        Case("html_missing_folder", lambda d: ["grad", sample("mlp"), "--html", str(d / "no" / "r.html")], (2,), "does not exist"),
        Case("html_stdout", lambda d: ["layers", sample("mlp"), "--html", "-"], (2,), "file name"),
        Case("html_onto_model", lambda d: ["layers", _copy(d, "mlp"), "--html", str(d / "mlp.onnx")], (2,), "input model"),
        Case("html_is_a_folder", lambda d: ["layers", sample("mlp"), "--html", str(d)], (2,), "folder"),
        # two outputs on one file: the second write would replace the first
        Case("json_and_save_one_file", lambda d: ["layers", sample("mlp"), "--json", str(d / "r.x"), "--save", str(d / "r.x")], (2,),
             "--json writes that file too"),
        Case("json_and_netron_one_file", lambda d: ["diff", sample("mlp"), sample("mlp"), "--json", str(d / "r.json"), "--netron",
                                                    str(d) + "/./r.json"], (2,), "writes that file too"),
        Case("export_data_and_grads_one_file", lambda d: ["grad", sample("mlp"), "--export", str(d / "g.onnx"), "--save-grads",
                                                          str(d / "g.onnx.data")], (2,), "g.onnx.data too"),
        Case("overlay_dev_full", lambda d: ["layers", sample("mlp"), "--overlay", "/dev/full"], (1,), "No space left", outputs=("/dev/full",)),
        Case("overlay_stdout", lambda d: ["diff", sample("mlp"), "--vs-reference", "--overlay", "-"], (2,), "file name"),
        Case("overlay_missing_folder", lambda d: ["grad", sample("mlp"), "--overlay", str(d / "no" / "o.json")], (2,), "does not exist"),
        Case("netron_dev_full", lambda d: ["grad", sample("mlp"), "--netron", "/dev/full"], (1,), "No space left", outputs=("/dev/full",)),
        Case("netron_under_a_file", lambda d: ["layers", sample("mlp"), "--netron", os.path.join(_write(d, "f.txt", b"x"), "n.json")], (2,), None),
        Case("reports_of_a_hostile_model", lambda d: ["layers", _save(d, _relu((f"x{ESC}", FORGED), node_name=f"</script>{LONG}")), "--all",
                                                      "--html", str(d / "r.html"), "--overlay", str(d / "o.json"), "--netron", str(d / "n.json"),
                                                      "--input", f"x{ESC}=[[1,2,3],[4,5,6]]"],
             (0,), None, outputs=("r.html", "o.json", "n.json")),
        Case("columns_unknown", lambda d: ["layers", sample("mlp"), "--columns", "index,frob"], (2,), "--columns"),
        Case("columns_empty", lambda d: ["diff", sample("mlp"), "--vs-reference", "--columns", " , "], (2,), "--columns"),
        Case("columns_escape", lambda d: ["grad", sample("mlp"), "--columns", f"norm,{ESC}"], (2,), "--columns"),
        Case("format_bogus", lambda d: ["inspect", sample("mlp"), "--format", "xml"], (2,), "--format"),
        Case("format_with_json_stdout", lambda d: ["layers", sample("mlp"), "--json", "-", "--format", "csv"], (2,), "both write to stdout"),
        Case("format_csv_mark", lambda d: ["mark", sample("mlp"), "-o", str(d / "o.onnx"), "--all", "--format", "csv", "--wide"], (0,), None,
             outputs=("o.onnx",)),
        Case("debug_save_html_dev_full", lambda d: ["debug", sample("mlp"), "--script", str(_script(d, ["save html /dev/full"]))], (1,),
             "No space left"),
        Case("debug_stats_bad_view", lambda d: ["debug", sample("mlp"), "--script", str(_script(d, ["stats --columns frob", "stats --format xml"]))],
             (1,), "--columns"),
        Case("typer_missing_argument", lambda d: ["layers"], (2,), "Missing argument"),
        Case("typer_bad_int", lambda d: ["layers", sample("mlp"), "--seed", "abc"], (2,), "--seed"),
        Case("typer_unknown_option", lambda d: ["layers", sample("mlp"), "--frobnicate"], (2,), "--frobnicate"),
        Case("typer_unknown_command", lambda d: ["frobnicate"], (2,), "frobnicate"),
        Case("long_value_in_error", lambda d: ["layers", sample("mlp"), "--name", LONG], (2,), "chars)"),
        Case("escape_in_flag_value", lambda d: ["layers", sample("mlp"), "--op", f"Relu{ESC}"], (2,), "--op"),
        Case("newline_in_flag_value", lambda d: ["layers", sample("mlp"), "--input", f"x{FORGED}=1"], (2,), "unknown input"),
    ]
    return out


def _ds(folder: Path, shape=(4, 16)) -> str:
    """A dataset folder of one good batch for the mlp sample."""
    d = folder / "ds"
    d.mkdir(exist_ok=True)
    np.savez(d / "b0.npz", x=np.zeros(shape, np.float32))
    return str(d)


def _pipe(folder: Path, body: str, func: str = "f", name: str = "p.py") -> str:
    (folder / name).write_text("import numpy as np\n" + body)
    return f"{folder / name}:{func}"


def _diff_report(**over) -> bytes:
    """A hand-written dataset diff report, spoilt by ``over``."""
    sums = {"samples": 1, "count": 6, "mismatch": 0, "max_abs": 0.5, "worst": [0, 1], "worst_shape": [2, 3],
            "b_absmax": 1.0, "excess": 0.5, "max_rel": 0.5, "max_rel_sample": 0, "sum_abs": [1.0], "dd": [0.5],
            "aa": [2.0], "bb": [2.5], "ab": [2.0], "shape": [2, 3], "per_sample": [[0, 7.0]]}
    pair = {"index": 0, "a": "y", "b": "y", "op_type": "Relu", "strategy": "name", "shape": [2, 3], "is_output": True, "problem": None, "passed": True,
            "tolerance": {"metric": "sqnr", "atol": 1e-4, "rtol": 1e-3, "min_sqnr": 10.0, "min_cosine": 0.999},
            "sums": {**sums, **over.pop("sums", {})}, "introduced_sums": None}
    pair.update(over.pop("pair", {}))
    if over.pop("unsums", False):
        pair["sums"] = None
    for k in over.pop("drop", ()):
        del pair[k]
    d = {"schema_version": 2, "dataset_schema": 1, "onnxprobe_version": "x", "model_id": "m+m", "selection": "s",
         "criterion": "c", "measured": "float", "sides": [], "verdict": "pass", "verdict_reason": "ok", "samples": 1,
         "sample_labels": ["b0.npz"], "pairs": [pair], "a": "a.onnx", "b": "b.onnx", "unmatched_a": [], "unmatched_b": [],
         "fp32_sensitivity": [], "uncompared": [], **over}
    return json.dumps(d).encode()


def _dataset_cases() -> list[Case]:
    mlp = sample("mlp")
    f = "--inputs-from"
    return [
        Case("inputs_from_no_colon", lambda d: ["layers", mlp, f, str(d / "p.py")], (2,), "FILE.py:FUNC"),
        Case("inputs_from_missing_file", lambda d: ["layers", mlp, f, f"{d / 'nope.py'}:f"], (2,), "no such Python file"),
        Case("inputs_from_not_python", lambda d: ["layers", mlp, f, _pipe(d, "", name="p.txt")], (2,), "not a Python file"),
        Case("inputs_from_import_raises", lambda d: ["layers", mlp, f, _pipe(d, "raise ValueError('boom')\n")], (2,),
             "importing it raised ValueError"),
        Case("inputs_from_no_function", lambda d: ["layers", mlp, f, _pipe(d, "g = 1\n")], (2,), "no function"),
        Case("inputs_from_function_raises", lambda d: ["diff", mlp, mlp, f, _pipe(d, "def f():\n    raise KeyError('k')\n")],
             (2,), "f() raised KeyError"),
        Case("inputs_from_not_iterable", lambda d: ["layers", mlp, f, _pipe(d, "def f():\n    return 3\n")], (2,), "returned int"),
        Case("inputs_from_yields_nothing", lambda d: ["layers", mlp, f, _pipe(d, "def f():\n    return []\n")], (2,), "yielded nothing"),
        # a dict keyed by something else than input names: said so, not "item 0 is a dict, not a dict"
        Case("inputs_from_key_not_a_name", lambda d: ["layers", mlp, f, _pipe(d, "def f():\n    yield {1: np.zeros((4, 16))}\n")],
             (2,), "key 1 (int)"),
        Case("inputs_from_yields_a_list", lambda d: ["layers", mlp, f, _pipe(d, "def f():\n    yield [1]\n")], (2,), "not a dict"),
        Case("inputs_from_unknown_input", lambda d: ["layers", mlp, f, _pipe(d, "def f():\n    yield {'ghost': np.zeros(3)}\n")],
             (2,), "unknown input"),
        Case("inputs_from_ragged_value", lambda d: ["layers", mlp, f, _pipe(d, "def f():\n    yield {'x': [[1], [1, 2]]}\n")],
             (2,), "not an array"),
        Case("inputs_from_wrong_shape", lambda d: ["diff", mlp, "--vs-reference", f,
                                                   _pipe(d, "def f():\n    yield {'x': np.zeros((4, 16), np.float32)}\n"
                                                         "    yield {'x': np.zeros((2, 2), np.float32)}\n")],
             (2,), "item 1"),
        Case("inputs_from_escape_in_spec", lambda d: ["layers", mlp, f, f"{d / 'p.py'}:f{ESC}"], (2,), None),
        Case("inputs_from_and_dir", lambda d: ["layers", mlp, "--inputs-dir", _ds(d), f, _pipe(d, "")], (2,), "two datasets"),
        Case("ray_without_dataset", lambda d: ["layers", mlp, "--ray"], (2,), "--inputs-dir"),
        Case("ray_with_inputs_from", lambda d: ["diff", mlp, mlp, f, _pipe(d, "def f():\n    yield {}\n"), "--ray"], (2,),
             "--inputs-dir"),
        Case("ray_workers_zero", lambda d: ["layers", mlp, "--inputs-dir", _ds(d), "--ray-workers", "0"], (2,), "at least 1"),
        Case("ray_address_malformed", lambda d: ["layers", mlp, "--inputs-dir", _ds(d), "--ray-address", "no-port"], (2,),
             "expected auto"),
        Case("ray_address_nothing_there", lambda d: ["grad", mlp, "--inputs-dir", _ds(d), "--ray-address", "127.0.0.1:1"], (1, 2),
             None),
        Case("diff_dataset_vs_npz", lambda d: ["diff", mlp, "--vs-npz", _write(d, "a.npz", b""), "--inputs-dir", _ds(d)], (2,),
             "one input"),
        Case("diff_dataset_grad", lambda d: ["diff", mlp, mlp, "--grad", "--inputs-dir", _ds(d)], (2,), "one input"),
        Case("diff_dataset_with_input", lambda d: ["diff", mlp, mlp, "--inputs-dir", _ds(d), "--input", "x=1"], (2,), "--input"),
        Case("diff_dataset_bad_batch", lambda d: ["diff", mlp, mlp, "--inputs-dir", _ds(d, (2, 2))], (2,), "b0.npz"),
        Case("diff_dataset_profile", lambda d: ["diff", mlp, mlp, "--inputs-dir", _ds(d), "--profile"], (2,), "--profile"),
        Case("diff_dataset_html", lambda d: ["diff", mlp, mlp, "--inputs-dir", _ds(d), "--html", str(d / "r.html")], (0,), None,
             outputs=("r.html",)),
        Case("layers_inputs_from_profile", lambda d: ["layers", mlp, f, _pipe(d, "def f():\n    yield {}\n"), "--profile"], (2,),
             "--profile"),
        Case("diff_dataset_runtime_option_for_ort", lambda d: ["diff", mlp, mlp, "--inputs-dir", _ds(d), "--runtime-option", "FOO=1"],
             (2,), "--runtime-option"),
        Case("diff_dataset_vs_runtime_bogus", lambda d: ["diff", mlp, "--vs-runtime", "tpu", "--inputs-dir", _ds(d)], (2,),
             "--vs-runtime tpu:"),
        Case("diff_dataset_no_reference", lambda d: ["diff", mlp, "--inputs-dir", _ds(d)], (2,), "a dataset diff compares with one reference"),
        Case("layers_dataset_runtime_bogus", lambda d: ["layers", mlp, "--inputs-dir", _ds(d), "--runtime", "bogus"], (2,),
             "--runtime bogus:"),
        Case("grad_reduce_bogus", lambda d: ["grad", mlp, "--inputs-dir", _ds(d), "--reduce", "max"], (2,), "--reduce"),
        Case("grad_reduce_without_dataset", lambda d: ["grad", mlp, "--reduce", "mean"], (2,), "--inputs-dir"),
        Case("grad_dataset_check", lambda d: ["grad", mlp, "--inputs-dir", _ds(d), "--check"], (2,), "--check"),
        Case("merge_diff_bad_sums", lambda d: ["merge-stats", _write(d, "r.json", _diff_report(sums={"dd": "x"}))], (2,),
             "malformed 'sums'"),
        Case("merge_diff_sample_out_of_range", lambda d: ["merge-stats", _write(d, "r.json", _diff_report(
            sums={"per_sample": [[5, 1.0]], "samples": 1}))], (2,), "beyond"),
        Case("merge_diff_labels_short", lambda d: ["merge-stats", _write(d, "r.json", _diff_report(samples=2))], (2,),
             "sample_labels"),
        # a shape no tensor can have (more elements than an array can address): named, not an internal error
        Case("merge_diff_worst_shape_huge", lambda d: ["merge-stats", _write(d, "r.json", _diff_report(
            sums={"worst_shape": [99999999999, 99999999999], "shape": [99999999999, 99999999999]}))], (2,), "worst_shape"),
        # a judged pair without its sums in one shard: refused, not pooled over the other shards' samples alone
        Case("merge_diff_pair_without_sums", lambda d: ["merge-stats", _write(d, "r0.json", _diff_report()),
                                                        _write(d, "r1.json", _diff_report(sample_labels=["b1.npz"], unsums=True))],
             (2,), "'sums'"),
        # a pair without the field its table row names the matching by: one line, not "internal error: KeyError"
        Case("merge_diff_pair_without_strategy", lambda d: ["merge-stats", _write(d, "r.json", _diff_report(drop=["strategy"]))],
             (2,), "'strategy'"),
        # shapes that differed at run time, damaged: named, not a pair "not compared: r1.json:None"
        Case("merge_diff_runtime_shapes_damaged", lambda d: ["merge-stats", _write(d, "r0.json", _diff_report()), _write(
            d, "r1.json", _diff_report(sample_labels=["b1.npz"], pair={"runtime_shapes": "x"}))], (2,), "'runtime_shapes'"),
        # a pair not measured (its value never produced) and without the 'shape' its table row shows
        Case("merge_diff_pair_without_shape", lambda d: ["merge-stats", _write(d, "r.json", _diff_report(
            pair={"passed": None, "problem": "value not produced"}, unsums=True, drop=["shape"]))], (2,), "'shape'"),
        Case("merge_diff_and_layers", lambda d: ["merge-stats", _write(d, "r.json", _diff_report()), _write(d, "l.json", json.dumps(
            {"schema_version": 3, "onnxprobe_version": "x", "model_id": "m", "selection": "s", "batches": 1, "tensors": []}).encode())],
            (2,), "different commands"),
    ]


def _runtime_cases() -> list[Case]:
    """--runtime, --vs-runtime, --runtime-option; OpenVINO's own failures where it is installed."""
    mlp = sample("mlp")
    out = [
        Case("runtime_bogus", lambda d: ["layers", mlp, "--runtime", "bogus"], (2,), "--runtime bogus:"),
        Case("vs_runtime_bogus", lambda d: ["diff", mlp, "--vs-runtime", "tpu"], (2,), "--vs-runtime tpu:"),
        Case("runtime_option_no_equals", lambda d: ["layers", mlp, "--runtime-option", "FOO"], (2,), "KEY=VALUE"),
        Case("runtime_option_for_onnxruntime", lambda d: ["layers", mlp, "--runtime-option", "FOO=1"], (2,), "--runtime-option"),
        Case("runtime_option_for_absent_runtime", lambda d: ["diff", mlp, "--vs-reference", "--runtime-option", "tensorrt:mode=debug"],
             (2,), "tensorrt does not run here"),
        Case("grad_on_another_runtime", lambda d: ["diff", mlp, mlp, "--grad", "--runtime", "openvino"], (2,), "--runtime"),
        Case("vs_reference_and_vs_runtime", lambda d: ["diff", mlp, "--vs-reference", "--vs-runtime", "openvino"], (2,), "--vs-reference"),
        Case("vs_reference_with_vs_device", lambda d: ["diff", mlp, "--vs-runtime", "reference", "--vs-device", "cuda"], (2,), "exactly one"),
    ]
    if not _installed("tensorrt"):
        out.append(Case("tensorrt_not_installed", lambda d: ["layers", mlp, "--runtime", "tensorrt"], (2,), "pip install 'onnxprobe[tensorrt]'"))
    if not OPENVINO:
        return out + [Case("openvino_not_installed", lambda d: ["layers", mlp, "--runtime", "openvino"], (2,), "onnxprobe[openvino]")]
    return out + [
        Case("openvino_cannot_read", lambda d: ["layers", BROKEN_GRAPHS["custom_domain_op"](d), "--runtime", "openvino"], (1,),
             "OpenVINO cannot read the model"),
        Case("openvino_crashes", lambda d: ["layers", _save(d, loop11_model()), "--runtime", "openvino", "--input", "trip_count=85",
                                            "--input", "cond=1", "--input", "y=[0.5]"], (1,), "OpenVINO crashed",
             subprocess=True, address_space_gb=6),
        Case("openvino_bad_property_value", lambda d: ["layers", mlp, "--runtime", "openvino", "--runtime-option",
                                                       "INFERENCE_PRECISION_HINT=i8"], (2,), "--runtime-option INFERENCE_PRECISION_HINT=i8"),
        Case("openvino_unknown_property", lambda d: ["layers", mlp, "--runtime", "openvino", "--runtime-option", f"FROB{ESC}=1"], (2,),
             "--runtime-option FROB"),
        # the model's dimensions were guessed, but the options are what OpenVINO refuses: no hint about dimensions
        Case("openvino_unknown_property_dynamic_model", lambda d: ["layers", _save(d, _dynamic_relu()), "--runtime", "openvino",
                                                                   "--runtime-option", "FROB=1"], (2,), "refuses it"),
        Case("openvino_device_of_onnxruntime", lambda d: ["layers", mlp, "--runtime", "openvino", "--device", "cuda"], (2,), "--device"),
        Case("openvino_device_absent", lambda d: ["diff", mlp, "--vs-runtime", "openvino", "--vs-device", "NPU"], (1,), "no such device"),
        Case("openvino_device_garbage", lambda d: ["layers", mlp, "--runtime", "openvino", "--device", f"GPU{FORGED}"], (1, 2), None),
    ]


def _dynamic_relu() -> onnx.ModelProto:
    return _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])])


def loop11_model() -> onnx.ModelProto:
    """onnx's test_loop11: a Loop whose body slices x[i:i+1] from a 5-element constant. With a trip count
    past 5 onnxruntime raises an error and OpenVINO 2026.4 dies of SIGSEGV."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Constant", [], ["x"], value=numpy_helper.from_array(np.arange(1, 6, dtype=np.float32))),
         helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.array(1, np.int64))),
         helper.make_node("Add", ["iter_count", "one"], ["end"]),
         helper.make_node("Unsqueeze", ["iter_count"], ["slice_start"], axes=[0]),
         helper.make_node("Unsqueeze", ["end"], ["slice_end"], axes=[0]),
         helper.make_node("Slice", ["x", "slice_start", "slice_end"], ["slice_out"]),
         helper.make_node("Add", ["y_in", "slice_out"], ["y_out"]),
         helper.make_node("Identity", ["y_out"], ["scan_out"])], "loop_body",
        [_vi("iter_count", TensorProto.INT64, []), _vi("cond_in", TensorProto.BOOL, []), _vi("y_in", shape=[1])],
        [_vi("cond_out", TensorProto.BOOL, []), _vi("y_out", shape=[1]), _vi("scan_out", shape=[1])])
    return _model([helper.make_node("Loop", ["trip_count", "cond", "y"], ["res_y", "res_scan"], name="loop", body=body)],
                  [_vi("trip_count", TensorProto.INT64, []), _vi("cond", TensorProto.BOOL, []), _vi("y", shape=[1])],
                  [_vi("res_y", shape=[1]), _vi("res_scan", shape=[None, 1])], opset=11, ir=6)


def _npy(folder: Path, name: str, shape, dtype=np.float32) -> str:
    p = folder / f"{name}.npy"
    np.save(p, np.zeros(shape, dtype))
    return str(p)


def _pickled_npy(folder: Path) -> str:
    p = folder / "obj.npy"
    np.save(p, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    return str(p)


def _zip_npy(folder: Path, key: str, data: bytes) -> str:
    p = folder / "inputs.npz"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr(f"{key}.npy", data)
    return str(p)


def _sparse_file(folder: Path) -> str:
    p = folder / "zeros.onnx"
    with open(p, "wb") as f:
        f.truncate(3 * 2**30)
    return str(p)


def _copy(folder: Path, name: str) -> str:
    p = folder / f"{name}.onnx"
    p.write_bytes(Path(sample(name)).read_bytes())
    return str(p)


CASES = _cases()
