"""A model importing one domain twice (ai.onnx 17 and 18: onnx's checker accepts it) is read as onnxruntime
runs it, with the last import, everywhere: the probed copy was built for the first (ReduceSumSquare's
``axes`` attribute of opset 17) and run with the last ("please report this"), merging read the last (QA)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe import api
from onnxprobe.cli.main import app

runner = CliRunner()


def _twice(imports, node):
    m = make_model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    del m.opset_import[:]
    m.opset_import.extend(helper.make_opsetid(d, v) for d, v in imports)
    return m


CASES = [
    ([("", 17), ("", 18)], helper.make_node("Relu", ["x"], ["y"])),
    ([("", 18), ("", 17)], helper.make_node("Relu", ["x"], ["y"])),
    # ReduceSum's axes: an attribute before opset 13, an input from it; "" and "ai.onnx" are one domain
    ([("", 13), ("ai.onnx", 12)], helper.make_node("ReduceSum", ["x"], ["y"], axes=[1], keepdims=0)),
    ([("ai.onnx", 12), ("", 11)], helper.make_node("ReduceSum", ["x"], ["y"], axes=[1], keepdims=0)),
]


@pytest.mark.parametrize("imports,node", CASES)
def test_layers_statistics_of_a_model_importing_ai_onnx_twice(tmp_path, imports, node):
    m = _twice(imports, node)
    x = np.linspace(-3, 3, 6, dtype=np.float32).reshape(2, 3)
    # the oracle: onnxruntime runs it (with the last import), the statistics in float64 by numpy
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    res = api.layers(str(path), inputs={"x": x})
    st = res.stats["y"]
    w = want.astype(np.float64)
    assert st.count == w.size and st.min == w.min() and st.max == w.max()
    assert st.mean == pytest.approx(w.mean(), abs=1e-12) and st.std == pytest.approx(w.std(), abs=1e-9)
    assert any("imports ai.onnx 2 times" in n for n in api.load(str(path)).warnings)
    r = runner.invoke(app, ["mark", str(path), "--stats", "-o", str(tmp_path / "mk.onnx")])
    assert r.exit_code == 0, r.output
    assert [(o.domain, o.version) for o in onnx.load(str(tmp_path / "mk.onnx")).opset_import] == [("", imports[-1][1])]


def test_diff_of_the_model_with_its_single_import_copy_runs_as_one_graph(tmp_path):
    m = _twice([("", 17), ("", 18)], helper.make_node("Relu", ["x"], ["y"]))
    one = _twice([("", 18)], helper.make_node("Relu", ["x"], ["y"]))
    onnx.save(m, str(tmp_path / "a.onnx"))
    onnx.save(one, str(tmp_path / "b.onnx"))
    res = api.diff(str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"))
    assert res.verdict()[0] == "pass"
    assert res.in_graph == len(res.results)  # measured in one graph of both: the same opset on both sides


@pytest.mark.parametrize("argv", [["layers"], ["inspect"], ["grad"], ["mark", "-o", "{d}/o.onnx", "--all"],
                                  ["extract", "-o", "{d}/o.onnx", "--to", "t"], ["diff", "{m}"]])
def test_a_model_that_imports_no_opset_is_one_error_in_every_command(tmp_path, argv):
    """No opset_import at all (a file cut before its last field, protobuf's order): onnxruntime loads no such
    model. `inspect` described it (opset none) and exited 0; `grad` said 'ReduceSum needs opset 7 or later
    (model opset 1)', an opset the model does not have (QA)."""
    m = _twice([], helper.make_node("Relu", ["x"], ["t"]))
    m.graph.node.append(helper.make_node("Neg", ["t"], ["y"]))
    p = tmp_path / "m.onnx"
    onnx.save(m, str(p))
    args = [argv[0], str(p), *[a.format(d=tmp_path, m=p) for a in argv[1:]]]
    r = runner.invoke(app, args)
    assert r.exit_code == 1, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("onnxprobe: error:") and "imports no opset" in lines[0], r.output
    assert not (tmp_path / "o.onnx").exists()
