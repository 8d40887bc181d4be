"""Models with a string input: the input given as numpy unicode or bytes (.npy, no pickle) or as a string
TensorProto (.pb) runs (onnxruntime binds no string tensor: such runs go without IOBinding); string tensors
get no statistics, float ones theirs; the dtype is shown as "string"."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

runner = CliRunner()
X = np.array([-1.5, 0.25, 2.0], np.float32)


@pytest.fixture()
def files(tmp_path):
    m = make_model([helper.make_node("Identity", ["s"], ["ys"], name="id"), helper.make_node("Relu", ["x"], ["r"], name="relu"),
                    helper.make_node("Neg", ["r"], ["y"], name="neg")],
                   [helper.make_tensor_value_info("s", TensorProto.STRING, [2]), helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                   [helper.make_tensor_value_info("ys", TensorProto.STRING, [2]), helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    onnx.save(m, str(tmp_path / "m.onnx"))
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "s_str.npy", np.array(["ab", "ç"]))
    np.save(tmp_path / "s_bytes.npy", np.array([b"ab", "ç".encode()]))
    np.save(tmp_path / "s_obj.npy", np.array(["ab", "ç"], dtype=object), allow_pickle=True)
    np.save(tmp_path / "s_bad.npy", np.array([b"\xff", b"a"]))
    (tmp_path / "s.pb").write_bytes(numpy_helper.from_array(np.array([b"ab", "ç".encode()], dtype=object), "s").SerializeToString())
    return tmp_path


def _layers(d, s_file, *extra):
    return runner.invoke(app, ["layers", str(d / "m.onnx"), "--all", "--input", f"s={d / s_file}", "--input", f"x={d / 'x.npy'}",
                               "--no-cache", *extra])


@pytest.mark.parametrize("s_file", ["s_str.npy", "s_bytes.npy", "s.pb"])
def test_a_string_input_runs_and_the_float_tensors_get_statistics(files, s_file):
    r = _layers(files, s_file, "--json", "-", "--save", files / "out.npz")
    assert r.exit_code == 0, r.output
    rows = {t["name"]: t for t in json.loads(r.stdout)["tensors"]}
    y = -np.maximum(X.astype(np.float64), 0)  # the oracle: numpy float64
    assert rows["y"]["min"] == pytest.approx(y.min()) and rows["y"]["max"] == pytest.approx(y.max())
    assert rows["y"]["mean"] == pytest.approx(y.mean())
    assert rows["ys"]["dtype"] == "string" and rows["ys"].get("min") is None
    saved = np.load(files / "out.npz")  # no pickle needed: strings saved as numpy unicode
    assert saved["ys"].tolist() == ["ab", "ç"]


def test_refused_string_values_are_one_line(files):
    for s_file, why in (("s_obj.npy", "pickle"), ("s_bad.npy", "UTF-8"), ("x.npy", "strings")):
        r = _layers(files, s_file)
        assert r.exit_code == 2 and why in r.output and len(r.output.strip().splitlines()) == 1, r.output


def test_inspect_and_diff_of_a_string_input_model(files):
    r = runner.invoke(app, ["inspect", str(files / "m.onnx")])
    assert r.exit_code == 0 and "string" in r.stdout and "object" not in r.stdout, r.output
    r = runner.invoke(app, ["diff", str(files / "m.onnx"), str(files / "m.onnx"), "--input", f"s={files / 's.pb'}", "--json", "-"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["verdict"] == "pass" and "y" in [p["a"] for p in d["pairs"]]


@pytest.mark.parametrize("args", [["mark", "--all"], ["mark", "--all", "--seed", "3"], ["extract", "--to", "r"],
                                  ["extract", "--from", "s", "--to", "ys", "--shape", "x=3"]])
def test_mark_and_extract_need_no_string_data_when_nothing_runs(files, args):
    """Shape inference types every output here: mark and extract run nothing, and the command line refused
    the model ('a string tensor; onnxprobe cannot make random data for it') where the API did not (the CLI
    always names where arrays come from, so its options never read as the defaults)."""
    out = files / "o.onnx"
    r = runner.invoke(app, [args[0], str(files / "m.onnx"), "-o", str(out), *args[1:]])
    assert r.exit_code == 0 and out.exists(), r.output
    m = onnx.load(str(out))
    want = {"mark": {"ys", "y", "r"}, "extract": {"r"} if "r" in args else {"ys"}}[args[0]]
    assert {o.name for o in m.graph.output} == want


def test_a_string_input_a_run_needs_is_still_refused_in_one_line(tmp_path):
    """Where a run must type an output (a custom op's, here one whose run fails anyway), the string input
    is needed: one line, exit 2, naming it."""
    m = make_model([helper.make_node("Identity", ["s"], ["ys"], name="id"),
                    helper.make_node("Foo", ["x"], ["t"], name="c", domain="zz"), helper.make_node("Relu", ["t"], ["y"], name="r")],
                   [helper.make_tensor_value_info("s", TensorProto.STRING, [2]), helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                   [helper.make_tensor_value_info("ys", TensorProto.STRING, [2]), helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    m.opset_import.append(helper.make_opsetid("zz", 1))
    onnx.save(m, str(tmp_path / "c.onnx"))
    r = runner.invoke(app, ["mark", str(tmp_path / "c.onnx"), "-o", str(tmp_path / "o.onnx"), "--all"])
    assert r.exit_code == 2 and "string tensor" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.output


def test_a_string_output_against_the_models_own_saved_values_is_listed_once_and_decides_nothing(tmp_path):
    """`diff M --vs-npz` of M's own `layers --save`, M with a float output and a string one (an skl2onnx classifier's
    label): the string output was observed as a saved tensor of A's, listed unmatched twice and failed the verdict
    ('1 of the outputs could not be compared'). It is no numbers, listed once, and the float output decides."""
    nodes = [helper.make_node("Relu", ["x"], ["probabilities"], name="relu"),
             helper.make_node("ArgMax", ["x"], ["am"], name="am", axis=1, keepdims=0),
             helper.make_node("Cast", ["am"], ["label"], name="cast", to=TensorProto.STRING)]
    m = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                   [helper.make_tensor_value_info("label", TensorProto.STRING, [3]),
                    helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [3, 4])])
    path, saved = tmp_path / "m.onnx", tmp_path / "s.npz"
    onnx.save(m, path)
    runner = CliRunner()
    assert runner.invoke(app, ["layers", str(path), "--save", str(saved)]).exit_code == 0
    assert np.load(saved)["label"].dtype.kind == "U"  # the oracle: strings were saved
    r = runner.invoke(app, ["diff", str(path), "--vs-npz", str(saved), "--json", "-"])
    d = json.loads(r.stdout)
    assert r.exit_code == 0 and d["verdict"] == "pass", r.output
    listed = [u["name"] for u in d["unmatched_a"] + d["unmatched_b"] if u["name"] == "label"]
    assert listed == ["label"], (d["unmatched_a"], d["unmatched_b"])
    assert [p["a"] for p in d["pairs"]] == ["probabilities"] or [p.get("key") for p in d["pairs"]] == ["probabilities"], d["pairs"]


def test_grad_of_a_classifier_names_the_float_output_to_pick_or_says_there_is_none(tmp_path):
    """An skl2onnx classifier's label comes first: grad said 'gradients need a float output (pick one: --loss-output)'
    naming none; with a ZipMap there is no float tensor output, and the sequence's refusal advised the int64 label,
    which the first refusal had just refused."""
    seq = helper.make_sequence_type_proto(helper.make_map_type_proto(TensorProto.INT64, helper.make_tensor_type_proto(TensorProto.FLOAT, [])))
    runner = CliRunner()
    for zipmap in (False, True):
        nodes = [helper.make_node("Softmax", ["x"], ["probabilities"], name="sm", axis=1),
                 helper.make_node("ArgMax", ["x"], ["label"], name="am", axis=1, keepdims=0)]
        outputs = [helper.make_tensor_value_info("label", TensorProto.INT64, [3])]
        if zipmap:
            nodes.append(helper.make_node("ZipMap", ["probabilities"], ["probs"], name="zm", domain="ai.onnx.ml", classlabels_int64s=[0, 1, 2, 3]))
            outputs.append(helper.make_value_info("probs", seq))
        else:
            outputs.append(helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [3, 4]))
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])], outputs)
        path = tmp_path / f"c{int(zipmap)}.onnx"
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 1)]), path)
        r = runner.invoke(app, ["grad", str(path)])
        assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.output
        if not zipmap:
            assert "(pick one: --loss-output probabilities)" in r.stderr, r.stderr
            assert runner.invoke(app, ["grad", str(path), "--loss-output", "probabilities"]).exit_code == 0
            continue
        assert "no other float tensor output" in r.stderr, r.stderr
        r = runner.invoke(app, ["grad", str(path), "--loss-output", "probs"])
        assert r.exit_code == 2 and "the model has no float tensor output" in r.stderr and "label" not in r.stderr, r.stderr


def test_a_string_tensors_row_says_no_statistics_or_empty():
    """A string tensor's row read 'no statistics' (not in the README's list) also when it held no element, where a
    number tensor's reads 'empty'."""
    from onnxprobe.stats.status import values_status

    assert values_status(None, (5,)) == "no statistics"
    assert values_status(None, (0,)) == "empty" and values_status(None, (2, 0)) == "empty"
    assert values_status(None, (0,), not_observed="fused") == "not observed" and values_status(0, (0,)) == "empty"
