"""Selection rules: default op set, --op, --name globs, --all, --range, constants left out."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model, sample_path
from onnxprobe import api
from onnxprobe.errors import UsageError
from onnxprobe.graph.select import Selection, select


def names(model_name: str, sel: Selection) -> list[str]:
    return [r.name for r in select(api.load(sample_path(model_name)).inferred, sel)]


def test_default_is_conv_gemm_matmul_plus_outputs():
    assert names("cnn", Selection()) == ["conv1_out", "conv2_out", "logits"]


def test_values_of_one_flag_are_alternatives_and_flags_narrow_and_reach_subgraphs():
    assert names("control_flow", Selection(ops=("Tanh",))) == ["else_out", "s_next"]
    assert names("control_flow", Selection(ops=("Tanh", "Relu"))) == ["else_out", "then_out", "s_next"]
    assert names("control_flow", Selection(names=("then_*", "else_*"))) == ["else_mul", "else_out", "then_matmul", "then_out"]
    # --op Tanh --name '*else*': the Tanh outputs whose name matches, not every Tanh and every match
    assert names("control_flow", Selection(ops=("Tanh",), names=("*else*",))) == ["else_out"]
    with pytest.raises(UsageError, match="matches no tensor"):
        names("control_flow", Selection(ops=("Tanh",), names=("then_*",)))


def test_default_skips_subgraph_tensors_all_includes_them():
    assert "body_matmul" not in names("control_flow", Selection())
    assert "body_matmul" in names("control_flow", Selection(all=True))


def test_range_by_index_and_by_node_name():
    assert names("cnn", Selection(range="1:2")) == ["bn1_out", "relu1_out"]
    assert names("cnn", Selection(range="relu2:gap")) == ["relu2_out", "gap_out"]
    assert names("cnn", Selection(ops=("Relu",), range="3:")) == ["relu2_out"]


def _colon_names_model(tmp_path):
    """Relu chain whose node names hold ':' (as tf2onnx's do): 'a:0' -> 'a:0:1' -> 'b' -> '1:b'."""
    names_ = ["a:0", "a:0:1", "b", "1:b"]
    nodes = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"], name=n) for i, n in enumerate(names_)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("t0", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("t4", TensorProto.FLOAT, [2])])
    p = tmp_path / "colons.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), p)
    return api.load(p).inferred


def test_a_range_can_name_nodes_whose_names_hold_colons(tmp_path):
    """--range 'a:0:b' is node 'a:0' to node 'b' (the one ':' where both ends name something); an
    ambiguous one says so, and names what it could mean."""
    model = _colon_names_model(tmp_path)
    got = (lambda spec: [r.name for r in select(model, Selection(range=spec))])
    assert got("a:0:b") == ["t1", "t2", "t3"]
    assert got("a:0:1:") == ["t2", "t3", "t4"]
    assert got(":a:0") == ["t1"]
    assert got("1:2") == ["t2", "t3"]
    with pytest.raises(UsageError, match="ambiguous"):
        got("a:0:1:b")  # 'a:0' to '1:b', or 'a:0:1' to 'b'
    with pytest.raises(UsageError, match="no node named 'a:9'"):
        got("a:9:b")


def test_bad_range_and_empty_selection_are_usage_errors():
    with pytest.raises(UsageError, match="no node named"):
        names("cnn", Selection(range="nosuch:3"))
    with pytest.raises(UsageError, match="no node of the model has this op type"):
        names("cnn", Selection(ops=("LSTM",)))
    with pytest.raises(UsageError, match="did you mean 'Conv'"):
        names("cnn", Selection(ops=("conv",)))
    with pytest.raises(UsageError, match="reversed"):
        names("cnn", Selection(range="5:2"))
    with pytest.raises(UsageError, match="outside the model"):
        names("cnn", Selection(range="2:500"))
    with pytest.raises(UsageError, match="matches no node, tensor or input"):
        names("cnn", Selection(names=("nothing_like_this*",)))


def test_weights_computed_from_constants_are_not_layers():
    w = numpy_helper.from_array(np.ones((2, 2), np.float32), "w")
    m = make_model(
        [helper.make_node("Constant", [], ["c"], name="c", value=numpy_helper.from_array(np.ones((2, 2), np.float32))),
         helper.make_node("ConstantOfShape", ["shape"], ["zeros"], name="cos"),
         helper.make_node("Add", ["w", "c"], ["w2"], name="fold"),
         helper.make_node("Transpose", ["w2"], ["w2t"], name="fold_t"),
         helper.make_node("MatMul", ["x", "w2t"], ["y"], name="mm")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
        [w, numpy_helper.from_array(np.array([2, 2], np.int64), "shape")],
    )
    inferred = onnx.shape_inference.infer_shapes(m)
    assert [r.name for r in select(inferred, Selection(all=True))] == ["y"]
    # with include_constants, --all takes the initializers too, each at its first reader (a weight, kind initializer)
    got = select(inferred, Selection(all=True, include_constants=True))
    assert [r.name for r in got] == ["c", "shape", "zeros", "w", "w2", "w2t", "y"]
    assert {r.name for r in got if r.kind == "initializer"} == {"w", "shape"}



def test_a_constant_of_shape_of_an_input_is_a_layer_not_a_weight(tmp_path):
    """ConstantOfShape(Shape(x)) (attention masks of exported transformers) was taken for a weight, whatever
    its input: `layers --all` and `mark --all` left it, and what is computed from it, out, though its value
    changes with x. Only one whose shape is itself a constant is fixed at load. Oracle: onnxruntime on the
    marked copy against numpy."""
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    f = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, ["n", 3])  # noqa: E731
    m = make_model(
        [helper.make_node("Shape", ["x"], ["s"], name="shape"),
         helper.make_node("ConstantOfShape", ["s"], ["z"], name="cos", value=helper.make_tensor("v", TensorProto.FLOAT, [1], [2.0])),
         helper.make_node("Mul", ["z", "z"], ["zz"], name="sq"),
         helper.make_node("ConstantOfShape", ["k"], ["w"], name="cos_w", value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5])),
         helper.make_node("Add", ["x", "zz"], ["xz"], name="add"),
         helper.make_node("Mul", ["xz", "w"], ["y"], name="mul")],
        [f("x")], [f("y")], [numpy_helper.from_array(np.array([3], np.int64), "k")])
    inferred = onnx.shape_inference.infer_shapes(m)
    assert [r.name for r in select(inferred, Selection(all=True))] == ["s", "z", "zz", "xz", "y"]
    p, out = tmp_path / "cos.onnx", tmp_path / "marked.onnx"
    onnx.save(m, p)
    r = CliRunner().invoke(app, ["mark", str(p), "-o", str(out), "--all"])
    assert r.exit_code == 0, r.output
    import onnxruntime as ort

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {"x": x})))
    np.testing.assert_array_equal(got["z"], np.full((2, 3), 2.0, np.float32))
    np.testing.assert_array_equal(got["zz"], np.full((2, 3), 4.0, np.float32))
    np.testing.assert_array_equal(got["y"], (x + 4) * 0.5)

def test_a_range_that_holds_only_weights_is_an_error_as_with_other_criteria():
    """--range alone takes every node output in the range but weights: a range of Constant nodes leaves
    nothing, which is an error (as --all --range is), not an empty report or a model with nothing added."""
    from onnx import numpy_helper

    consts = [helper.make_node("Constant", [], [f"k{i}"], name=f"const{i}", value=numpy_helper.from_array(np.full(3, i, np.float32)))
              for i in range(3)]
    m = make_model(consts + [helper.make_node("Add", ["x", "k0"], ["a"], name="add"), helper.make_node("Relu", ["a"], ["y"], name="relu")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    for sel, api_words in ((Selection(range="0:2"), "range='0:2'"), (Selection(all=True, range="0:2"), "all=True, range='0:2'")):
        with pytest.raises(UsageError, match="matches no tensor.*--include-constants") as e:
            select(m, sel)
        # to the API in its own words (the fields, the parameter then its flag); the command line's the flags
        assert str(e.value).startswith(f"the selection ({api_words}) matches")
        assert "unless include_constants (--include-constants)" in str(e.value)
        assert e.value.cli_message.startswith(f"the selection ({sel.describe()}) matches")
        assert e.value.cli_message.endswith("unless --include-constants)")
    assert [r.name for r in select(m, Selection(range="0:2", include_constants=True))] == ["k0", "k1", "k2"]
    assert [r.name for r in select(m, Selection(range="3:4"))] == ["a", "y"]


def _odd_names_model(tmp_path):
    """Tensor names holding glob characters and a comma: a, b -> 'a,b' -> 'x[0]' -> 'y*z'."""
    f = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [2])  # noqa: E731
    m = make_model([helper.make_node("Add", ["a", "b"], ["a,b"], name="sum"),
                    helper.make_node("Relu", ["a,b"], ["x[0]"], name="relu[0]"),
                    helper.make_node("Neg", ["x[0]"], ["y*z"], name="neg")],
                   [f("a"), f("b")], [f("y*z")])
    p = tmp_path / "odd names.onnx"
    onnx.save(m, p)
    return p


def test_a_name_with_glob_characters_is_reached_by_itself(tmp_path):
    """--name 'x[0]' is the tensor x[0] (as a glob it would match only 'x0'), and a glob still globs."""
    model = api.load(_odd_names_model(tmp_path)).inferred
    assert [r.name for r in select(model, Selection(names=("x[0]",)))] == ["x[0]"]
    assert [r.name for r in select(model, Selection(names=("relu[0]",)))] == ["x[0]"]  # the node's name
    assert [r.name for r in select(model, Selection(names=("y*z",)))] == ["y*z"]
    assert [r.name for r in select(model, Selection(names=("*,*",)))] == ["a,b"]
    assert [r.name for r in select(model, Selection(names=("x[[]0]",)))] == ["x[0]"]  # the glob escape too


def test_odd_names_on_the_command_line(tmp_path):
    """layers --name and extract --from/--to take such names as they are (a comma-separated value that is
    itself a tensor name stays whole); the extracted model computes what the original does."""
    import onnxruntime as ort
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    p = _odd_names_model(tmp_path)
    r = CliRunner().invoke(app, ["layers", str(p), "--name", "x[0]", "--format", "json"])
    assert r.exit_code == 0, r.output
    import json

    assert [row["tensor"] for row in json.loads(r.stdout)] == ["x[0]"]
    out = tmp_path / "cut.onnx"
    r = CliRunner().invoke(app, ["extract", str(p), "-o", str(out), "--from", "a,b", "--to", "x[0]"])
    assert r.exit_code == 0, r.output
    cut = onnx.load(out)
    assert [i.name for i in cut.graph.input] == ["a,b"] and [o.name for o in cut.graph.output] == ["x[0]"]
    v = np.array([-1.5, 2.0], np.float32)
    (y,) = ort.InferenceSession(out.read_bytes(), providers=["CPUExecutionProvider"]).run(None, {"a,b": v})
    assert y.tolist() == np.maximum(v, 0).tolist()
    # names that are not tensors are still split: --from a,b,c would be three
    r = CliRunner().invoke(app, ["extract", str(p), "-o", str(tmp_path / "c2.onnx"), "--from", "a,nope", "--to", "x[0]"])
    assert r.exit_code == 2 and "no tensor named 'nope'" in r.output


@pytest.mark.parametrize("opset, dtype", [(9, "float32"), (12, "bool")])
def test_a_dropout_mask_has_the_type_onnxruntime_gives_it(opset, dtype, tmp_path):
    """Dropout before opset 10 writes its mask in its data's type (onnx's inference leaves it unknown: a '?'
    in the tables); from 10 on, bool. The dtype layers reports is what onnxruntime returns."""
    import onnxruntime as ort

    g = helper.make_graph([helper.make_node("Dropout", ["x"], ["y", "mask"], name="drop")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 7
    p = tmp_path / "drop.onnx"
    onnx.save(m, p)
    (ref,) = [r for r in select(api.load(p).inferred, Selection(all=True)) if r.name == "mask"]
    assert ref.dtype == dtype and ref.shape == (2, 3)
    probe = onnx.ModelProto()
    probe.CopyFrom(m)
    probe.graph.output.append(onnx.ValueInfoProto(name="mask"))
    got = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": np.ones((2, 3), np.float32)})
    assert str(got[1].dtype) == dtype  # the oracle: what onnxruntime returns
    res = api.layers(p, Selection(names=("mask",)), api.RunConfig(device="cpu", cache=False))
    st, want = res.stats["mask"], got[1].astype(np.float64)
    assert (st.count, st.zeros, st.min, st.max) == (6, int((want == 0).sum()), want.min(), want.max())


@pytest.mark.parametrize("flag,value,shown", [
    ("--name", "\x1b[31mX\nY", "'\\x1b[31mX\\nY'"),
    ("--range", "\x1b[31m:1", "'\\x1b[31m'"),
    ("--shape", "x\n=1", "'x\\n'"),
    ("--input", "\x1b]0;t\x07=1", "'\\x1b]0;t\\x07'"),
])
def test_control_characters_in_a_name_are_escaped_once(flag, value, shown):
    """A name is escaped (text.clean) and quoted once: repr() of the escaped text doubled each backslash."""
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    r = CliRunner().invoke(app, ["layers", str(sample_path("mlp")), flag, value])
    assert r.exit_code == 2, r.output
    assert shown in r.output, r.output
    assert "\\\\" not in r.output and "\x1b" not in r.output and len(r.output.strip().splitlines()) == 1


def test_a_number_that_is_also_another_nodes_name_is_ambiguous_and_hash_n_is_an_index(tmp_path):
    """Node 4 named '1': --range 1:2 silently meant indices 1..2, and 2:1 read as 'reversed'. A bound that
    is both an index and another node's name is refused (exit 2), saying how to write either; #N is an
    index always; a number naming its own node (node 2 named '2') is no ambiguity."""
    nodes = [helper.make_node("Relu", ["x"], ["t0"], name="a"), helper.make_node("Neg", ["t0"], ["t1"], name="b"),
             helper.make_node("Exp", ["t1"], ["t2"], name="2"), helper.make_node("Abs", ["t2"], ["t3"], name="c"),
             helper.make_node("Abs", ["t3"], ["t4"], name="1")]
    model = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                       [helper.make_tensor_value_info("t4", TensorProto.FLOAT, [2])])
    got = (lambda spec: [r.name for r in select(model, Selection(range=spec))])
    outputs = [n.output[0] for n in nodes]  # node i writes t{i}
    for spec in ("1:2", "2:1", "0:1"):
        with pytest.raises(UsageError, match=r"'1' is both node index 1 and the name of node #4; write #1 .* or #4"):
            got(spec)
    assert got("#1:2") == outputs[1:3]
    assert got("2:#4") == outputs[2:5]
    assert got("#0:#1") == outputs[0:2]
    onnx.save(model, tmp_path / "m.onnx")
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app

    r = CliRunner().invoke(app, ["layers", str(tmp_path / "m.onnx"), "--range", "1:2"])
    assert r.exit_code == 2 and "is both node index 1" in r.stderr and r.stderr.count("\n") == 1, r.output


def test_hash_n_is_an_index_even_when_a_node_is_named_hash_n():
    """A node named '#1' (node 2): --range '#1:#2' was refused as '#1' being both index 1 and node #2's
    name, advising to write '#1', what was typed. '#N' is an index always (README)."""
    names = ["3", "0", "#1", "2", "x:y", "5"]
    nodes = [helper.make_node("Neg", [f"t{i - 1}" if i else "x"], [f"t{i}"], name=n) for i, n in enumerate(names)]
    model = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                       [helper.make_tensor_value_info("t5", TensorProto.FLOAT, [2])])
    got = (lambda spec: [r.name for r in select(model, Selection(range=spec))])
    assert got("#1:#2") == ["t1", "t2"]
    assert got("#2:#4") == ["t2", "t3", "t4"]


def test_a_range_end_may_be_a_body_nodes_listed_path():
    """Unnamed body nodes are listed as 'If/then_branch/Neg_1': a --range end takes that path too."""
    vi = helper.make_tensor_value_info
    then = helper.make_graph([helper.make_node("Neg", ["x"], ["t_out"])], "then", [], [vi("t_out", TensorProto.FLOAT, [2])])
    other = helper.make_graph([helper.make_node("Abs", ["x"], ["e_out"])], "else", [], [vi("e_out", TensorProto.FLOAT, [2])])
    model = make_model([helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other)],
                       [vi("x", TensorProto.FLOAT, [2]), vi("cond", TensorProto.BOOL, [])], [vi("y", TensorProto.FLOAT, [2])])
    from onnxprobe.graph.walk import walk

    paths = {s.node.op_type: s.path for s in walk(model)}
    assert [r.name for r in select(model, Selection(range=f"{paths['Abs']}:{paths['Neg']}"))] == ["e_out", "t_out"]
    assert [r.name for r in select(model, Selection(names=(paths["Neg"],)))] == ["t_out"]


def test_an_op_outside_the_standard_domain_is_taken_by_the_name_inspect_prints():
    """`inspect` lists 'my.dom.Swish' and 'com.microsoft.Gelu'; `--op` refused those names ('no node of the
    model has this op type') and took only the bare op type. Both work; another domain's name does not."""
    f = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [3])  # noqa: E731
    m = make_model([helper.make_node("Swish", ["x"], ["s"], name="sw", domain="my.dom"),
                    helper.make_node("Gelu", ["s"], ["g"], name="ge", domain="com.microsoft"),
                    helper.make_node("Relu", ["g"], ["y"], name="re")], [f("x")], [f("y")])
    m.opset_import.extend([helper.make_opsetid("my.dom", 1), helper.make_opsetid("com.microsoft", 1)])
    got = lambda *ops: [r.name for r in select(m, Selection(ops=ops))]  # noqa: E731
    assert got("my.dom.Swish") == got("Swish") == ["s"]
    assert got("com.microsoft.Gelu") == ["g"] and got("my.dom.Swish", "Relu") == ["s", "y"]
    with pytest.raises(UsageError, match="did you mean 'my.dom.Swish'"):
        select(m, Selection(ops=("my.dom.Swis",)))
    with pytest.raises(UsageError, match="no node"):
        select(m, Selection(ops=("other.dom.Swish",)))


def test_a_range_end_a_node_name_sibling_bodies_share_is_ambiguous():
    """Two If nodes whose branches each hold a node named 'inner': --range inner:inner took the last one
    silently (QA); it names the nodes and asks for a path or an index, and each path selects its own node.
    A name only one node bears still works as before."""
    vi = helper.make_tensor_value_info

    def branch(tag: str, op: str) -> onnx.GraphProto:
        return helper.make_graph([helper.make_node(op, ["x"], ["o"], name="inner")], tag, [], [vi("o", TensorProto.FLOAT, [2])])

    model = make_model([helper.make_node("If", ["c"], ["y1"], name="if1", then_branch=branch("a", "Neg"), else_branch=branch("b", "Abs")),
                        helper.make_node("If", ["c"], ["y2"], name="if2", then_branch=branch("c", "Relu"), else_branch=branch("d", "Exp")),
                        helper.make_node("Add", ["y1", "y2"], ["y"], name="add")],
                       [vi("x", TensorProto.FLOAT, [2]), vi("c", TensorProto.BOOL, [])], [vi("y", TensorProto.FLOAT, [2])])
    with pytest.raises(UsageError, match=r"4 nodes are named 'inner' \(.*'if2/then_branch/inner'\): name one by its path"):
        select(model, Selection(range="inner:inner"))
    got = select(model, Selection(range="if2/then_branch/inner:if2/then_branch/inner"))
    assert [r.op_type for r in got] == ["Relu"], got
    assert [r.name for r in select(model, Selection(range="add:add"))] == ["y"]


def test_a_range_end_a_name_main_graph_nodes_share_lists_their_indices():
    """A model whose main graph holds duplicate node names (silero-vad's OpenVINO export: 15 nodes named
    'F0::anon'): their paths are that one name too, so the error lists their indices, not fifteen equal
    paths that say nothing."""
    vi = helper.make_tensor_value_info
    model = make_model([helper.make_node("Relu", ["x"], ["a"], name="dup"), helper.make_node("Neg", ["a"], ["b"], name="dup"),
                        helper.make_node("Abs", ["b"], ["y"], name="last")],
                       [vi("x", TensorProto.FLOAT, [2])], [vi("y", TensorProto.FLOAT, [2])])
    with pytest.raises(UsageError, match=r"range \(--range\) dup:last: 2 nodes are named 'dup' \(#0, #1\): give one's index \(#N\)"):
        select(model, Selection(range="dup:last"))
    assert [r.name for r in select(model, Selection(range="#1:last"))] == ["b", "y"]


def test_an_op_is_taken_by_the_short_name_tables_show(tmp_path):
    """Tables write 'BatchNorm', 'GlobalAvgPool', 'Dequantize'; `--op BatchNorm` was refused ('no node of the model
    has this op type') in layers, diff and grad, and the debugger's `nodes op:BatchNorm` matched nothing."""
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app
    from onnxprobe.report.format import op as shown

    c = numpy_helper.from_array
    f = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)  # noqa: E731
    inits = [c(np.ones((2, 1, 1, 1), np.float32), "w"), c(np.ones(2, np.float32), "s"), c(np.zeros(2, np.float32), "b"),
             c(np.zeros(2, np.float32), "m"), c(np.ones(2, np.float32), "v")]
    m = make_model([helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
                    helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"], name="bn"),
                    helper.make_node("GlobalAveragePool", ["n"], ["y"], name="gap")],
                   [f("x", [1, 1, 4, 4])], [f("y", [1, 2, 1, 1])], initializers=inits)
    assert shown("BatchNormalization") == "BatchNorm" and shown("GlobalAveragePool") == "GlobalAvgPool"
    got = lambda *ops: [r.name for r in select(m, Selection(ops=ops))]  # noqa: E731
    assert got("BatchNorm") == got("BatchNormalization") == ["n"]
    assert got("GlobalAvgPool", "BatchNorm") == ["n", "y"]
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    r = CliRunner().invoke(app, ["layers", str(path), "--op", "BatchNorm", "--json", "-"])
    assert r.exit_code == 0, r.output
    import json
    assert [row["name"] for row in json.loads(r.stdout)["tensors"]] == ["n"]
    r = CliRunner().invoke(app, ["grad", str(path), "--op", "BatchNorm", "--json", "-"])
    assert r.exit_code == 0, r.output
    assert {row["tensor"] for row in json.loads(r.stdout)["gradients"]} >= {"s", "b"}, r.stdout
    script = tmp_path / "s.txt"
    script.write_text("nodes op:BatchNorm\n")
    r = CliRunner().invoke(app, ["debug", str(path), "--script", str(script)])
    assert r.exit_code == 0 and " bn " in r.stdout, r.output
