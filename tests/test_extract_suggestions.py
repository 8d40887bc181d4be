"""The command an extract error suggests, run as suggested, succeeds and keeps what the user asked for.

1. ``--from r30 --to r10,r40`` (r10 computed before r30) suggested ``--from r10 --to r30``: r40, which the
   swapped cut computes as well, was dropped without a word. The suggestion keeps the other --to tensors, or
   says which it cannot keep.
2. A cut that fails at a multi-output node (Split: --from one of its outputs, a node needs the other)
   suggested ``--from 'a, x, b'``: x, the Split's input, which the cut then does not need (an unused input).
   It suggests the minimal set ``--from 'a, b'``.
3. A swap whose cut needs more inputs than the one swapped (``--from z --to q``, z = q * k) suggested ``--from q``,
   which failed again naming k: it suggests ``--from 'q, k'`` at once.
Oracle: onnx.reference.ReferenceEvaluator on the original model gives the tensors the extracted model must
compute from the suggested inputs; the written model's inputs and outputs are read back with onnx."""

from __future__ import annotations

import re
import shlex

import numpy as np
import onnx
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

runner = CliRunner()
ENV = {"COLUMNS": "400", "NO_COLOR": "1", "ONNXPROBE_NO_CACHE": "1"}


def _vi(name: str, shape=(2, 4)) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def _error(argv: list[str]) -> str:
    r = runner.invoke(app, argv, env=ENV)
    assert r.exit_code != 0, r.output
    lines = [ln for ln in r.output.splitlines() if ln.startswith("onnxprobe: error:")]
    assert len(lines) == 1, r.output
    return lines[0]


def _suggested(line: str) -> list[str]:
    """The --from/--to words the error line suggests, as a shell would split them."""
    at = line.rfind(": --from ")
    assert at >= 0, line
    return shlex.split(line[at + 2:].split(" (")[0])


def _run_suggested(model: str, out: str, words: list[str]) -> onnx.ModelProto:
    r = runner.invoke(app, ["extract", model, "-o", out, *words], env=ENV)
    assert r.exit_code == 0, r.output
    assert "not needed" not in r.output, r.output  # no unused input written
    return onnx.load(out)


def _names(vis) -> list[str]:
    return [v.name for v in vis]


def _compare(original: onnx.ModelProto, cut: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> None:
    """The cut, fed the original's values of its inputs, computes the original's values of its outputs."""
    wanted = _names(cut.graph.input) + _names(cut.graph.output)
    probe = onnx.ModelProto()
    probe.CopyFrom(original)
    del probe.graph.output[:]
    probe.graph.output.extend(helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in wanted)
    values = dict(zip(wanted, ReferenceEvaluator(probe).run(None, feeds)))
    got = ReferenceEvaluator(cut).run(None, {n: values[n] for n in _names(cut.graph.input)})
    for name, v in zip(_names(cut.graph.output), got):
        np.testing.assert_allclose(v, values[name], rtol=1e-6)


def _chain(tmp_path, branch: bool) -> tuple[str, onnx.ModelProto]:
    """x -> r10 -> r30 -> r40 (Relu, Neg, Exp); with ``branch``, r40 is computed from x beside the chain."""
    nodes = [helper.make_node("Relu", ["x"], ["r10"], name="n10"), helper.make_node("Neg", ["r10"], ["r30"], name="n30"),
             helper.make_node("Exp", ["x" if branch else "r30"], ["r40"], name="n40"),
             helper.make_node("Add", ["r30", "r40"], ["y"], name="add")]
    m = make_model(nodes, [_vi("x")], [_vi("y")])
    p = tmp_path / ("branch.onnx" if branch else "chain.onnx")
    onnx.save(m, p)
    return str(p), m


def test_swap_keeps_the_other_outputs(tmp_path):
    path, m = _chain(tmp_path, branch=False)
    line = _error(["extract", path, "-o", str(tmp_path / "o.onnx"), "--from", "r30", "--to", "r10,r40"])
    words = _suggested(line)
    cut = _run_suggested(path, str(tmp_path / "s.onnx"), words)
    assert _names(cut.graph.input) == ["r10"]
    assert set(_names(cut.graph.output)) == {"r30", "r40"}, line  # r40 kept: the swapped cut computes it too
    _compare(m, cut, {"x": np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)})


def test_swap_says_what_it_cannot_keep(tmp_path):
    path, m = _chain(tmp_path, branch=True)
    line = _error(["extract", path, "-o", str(tmp_path / "o.onnx"), "--from", "r30", "--to", "r10,r40"])
    words = _suggested(line)
    cut = _run_suggested(path, str(tmp_path / "s.onnx"), words)
    assert _names(cut.graph.input) == ["r10"] and _names(cut.graph.output) == ["r30"]
    assert re.search(r"'r40'.*(left out|cannot)", line), line  # the dropped --to is named


def test_a_swap_whose_cut_needs_more_inputs_suggests_them_all(tmp_path):
    """--from z --to q where z = q * k and k is computed beside q: the swap suggested --from q --to z, which then
    failed again (k reaches z around the cut; add it to --from). The swap names the whole cut at once."""
    nodes = [helper.make_node("Relu", ["x"], ["q"], name="nq"), helper.make_node("Neg", ["x"], ["k"], name="nk"),
             helper.make_node("Mul", ["q", "k"], ["z"], name="nz"), helper.make_node("Exp", ["z"], ["y"], name="ny")]
    m = make_model(nodes, [_vi("x")], [_vi("y")])
    path = tmp_path / "qk.onnx"
    onnx.save(m, path)
    line = _error(["extract", str(path), "-o", str(tmp_path / "o.onnx"), "--from", "z", "--to", "q"])
    cut = _run_suggested(str(path), str(tmp_path / "s.onnx"), _suggested(line))
    assert sorted(_names(cut.graph.input)) == ["k", "q"] and _names(cut.graph.output) == ["z"], line
    _compare(m, cut, {"x": np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)})


def test_split_suggests_the_minimal_inputs(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["x1"], name="pre"),
             helper.make_node("Split", ["x1"], ["a", "b"], name="split", axis=1, num_outputs=2),
             helper.make_node("Mul", ["a", "b"], ["y"], name="mul")]
    m = make_model(nodes, [_vi("x")], [_vi("y", (2, 2))], opset=18)
    path = tmp_path / "split.onnx"
    onnx.save(m, path)
    line = _error(["extract", str(path), "-o", str(tmp_path / "o.onnx"), "--from", "a", "--to", "y"])
    words = _suggested(line)
    cut = _run_suggested(str(path), str(tmp_path / "s.onnx"), words + ["--to", "y"])
    assert sorted(_names(cut.graph.input)) == ["a", "b"], line  # not x1: the cut does not need it
    _compare(m, cut, {"x": np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)})
