"""`grad --check --html`: the page's verdict read 'pass' ("check (float32): 0 failed") where the check compared
nothing (every gradient 'cannot check': taken through a QuantizeLinear's straight-through estimator, or not
resolvable by finite differences), while the command said '--check checked nothing' with exit code 1. The
page's verdict is the command's: a check that compared nothing is no pass."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from test_grad_check_straight_through import DY, _minimal, _tailed
from typer.testing import CliRunner

from onnxprobe.cli.main import app


def _verdict(page: Path) -> tuple[str, str]:
    facts = {k: (cls, text) for k, cls, text in re.findall(r"<dt>([^<]*)</dt><dd class=\"([^\"]*)\">([^<]*)</dd>", page.read_text())}
    return facts["verdict"]


def test_a_check_that_compared_nothing_is_no_pass_in_the_page(tmp_path):
    np.save(tmp_path / "dy.npy", DY)
    page = tmp_path / "g.html"
    r = CliRunner().invoke(app, ["grad", str(_minimal(tmp_path / "q.onnx")), "--wrt", "W", "--check", "--device", "cpu",
                                 "--output-grad", str(tmp_path / "dy.npy"), "--html", str(page)])
    assert r.exit_code == 1 and "checked nothing" in r.stderr, r.output
    cls, text = _verdict(page)
    assert cls == "fail" and "checked nothing" in text and "1 not checked" in text, (cls, text)


def test_a_check_with_verdicts_passes_in_the_page(tmp_path):
    page = tmp_path / "g.html"
    r = CliRunner().invoke(app, ["grad", str(_tailed(tmp_path / "t.onnx")), "--all", "--check", "--device", "cpu",
                                 "--html", str(page)])
    assert r.exit_code == 0, r.output
    cls, text = _verdict(page)
    assert cls == "pass" and "5 ok, 0 failed, 3 not checked" in text, (cls, text)


def test_a_check_that_could_not_run_is_no_pass_in_the_page(tmp_path):
    """sum(y) overflows to inf: no check could run at all (no check mode, no checked row), the command said
    '--check checked nothing' with exit 1, and the page's verdict read '4 gradients, 0 with NaN/Inf' in green."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w2 = np.random.default_rng(0).random((4, 4), dtype=np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "W2"], ["h"]), helper.make_node("Mul", ["h", "W"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
                          [numpy_helper.from_array(np.full(4, 3e38, np.float32), "W"), numpy_helper.from_array(w2, "W2")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "inf.onnx")
    np.savez(tmp_path / "x.npz", x=np.full((2, 4), 0.1, np.float32))
    page = tmp_path / "g.html"
    r = CliRunner().invoke(app, ["grad", str(tmp_path / "inf.onnx"), "--check", "--inputs", str(tmp_path / "x.npz"),
                                 "--html", str(page)])
    assert r.exit_code == 1 and "checked nothing" in r.stderr, r.output
    cls, text = _verdict(page)
    assert cls == "fail" and "checked nothing" in text, (cls, text)
