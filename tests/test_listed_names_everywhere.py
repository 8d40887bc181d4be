"""A name typed as listings print it (``text.clean``: a newline as ``\\n``, a backslash doubled) selects that
tensor at every entry point: the debugger's words (shlex's posix mode took a backslash away first, so the
listed name of one tensor selected the other), ``diff --atol/--rtol NAME:V`` and ``--range``. The model holds
'a<backslash>nb' (a Relu) and 'a<newline>b' (a Sigmoid of it), from nodes 'r<backslash>1' and 's<newline>2';
values are checked against numpy."""

from __future__ import annotations

import json
import shlex

import numpy as np
import onnx
from onnx import TensorProto, helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
BACKSLASH, NEWLINE = "a\\nb", "a\nb"
X = np.array([[-1.5, 2.0, -3.0], [4.25, 0.5, -0.25]], np.float32)
RELU = np.maximum(X.astype(np.float64), 0)
SIGMOID = 1 / (1 + np.exp(-RELU))
# as listed: the backslash doubled, the newline as \n
LISTED = {BACKSLASH: ("a\\\\nb", RELU), NEWLINE: ("a\\nb", SIGMOID)}


def _model(tmp_path):
    m = make_model([helper.make_node("Relu", ["x"], [BACKSLASH], name="r\\1"),
                    helper.make_node("Sigmoid", [BACKSLASH], [NEWLINE], name="s\n2"),
                    helper.make_node("Neg", [NEWLINE], ["y"], name="0")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    path = tmp_path / "bs.onnx"
    onnx.save(m, str(path))
    np.save(tmp_path / "x.npy", X)
    return path, f"x={tmp_path / 'x.npy'}"


def test_split_keeps_backslashes_and_honours_quotes():
    from onnxprobe.session.parse import split

    assert split("show a\\\\nb") == ["show", "a\\\\nb"]
    assert split("show 'a\\\\nb' \"a\\nb\"") == ["show", "a\\\\nb", "a\\nb"]
    assert split("save 'x y'z f.npy   # a comment") == ["save", "x yz", "f.npy"]
    assert split("show ''") == ["show", ""]


def test_debugger_selects_the_tensor_listed(tmp_path):
    path, feed = _model(tmp_path)
    for name, (listed, want) in LISTED.items():
        for typed in (listed, f"'{listed}'", f'"{listed}"'):
            out = tmp_path / "v.npy"
            f = tmp_path / "s.txt"
            f.write_text(f"show {typed}\nstats --name {typed}\nsave {typed} {shlex.quote(str(out))}\n")
            r = runner.invoke(app, ["debug", str(path), "--input", feed, "--script", str(f)], env=ENV)
            assert r.exit_code == 0 and "Traceback" not in r.output, r.output
            assert f"{listed}  from node" in r.stdout and f"max {want.max():.4g}" in r.stdout, (typed, r.stdout)
            np.testing.assert_allclose(np.load(out), want, rtol=1e-6)
            saved = next(line for line in r.stdout.splitlines() if line.startswith("saved"))
            assert saved.startswith(f"saved {listed} [2x3]"), saved  # the name as listed: a newline breaks no line


def test_diff_per_tensor_tolerance_takes_the_listed_name(tmp_path):
    path, feed = _model(tmp_path)
    for name, (listed, _) in LISTED.items():
        r = runner.invoke(app, ["diff", str(path), str(path), "--all", "--input", feed, "--atol", f"{listed}:0.5",
                                "--rtol", f"{listed}:0.25", "--json", "-"], env=ENV)
        assert r.exit_code == 0, r.output
        per = json.loads(r.stdout)["per_tensor"]
        assert list(per) == [name] and per[name]["atol"] == 0.5 and per[name]["rtol"] == 0.25, per


def test_range_takes_node_names_as_listed(tmp_path):
    path, feed = _model(tmp_path)
    r = runner.invoke(app, ["layers", str(path), "--input", feed, "--range", "r\\\\1:#1", "--json", "-"], env=ENV)
    assert r.exit_code == 0, r.output
    rows = {t["name"]: t["max"] for t in json.loads(r.stdout)["tensors"]}
    assert rows.keys() == {BACKSLASH, NEWLINE}
    assert abs(rows[BACKSLASH] - RELU.max()) < 1e-6 and abs(rows[NEWLINE] - SIGMOID.max()) < 1e-6
    r = runner.invoke(app, ["layers", str(path), "--input", feed, "--range", "s\\n2:#2", "--json", "-"], env=ENV)
    assert r.exit_code == 0, r.output
    assert [t["name"] for t in json.loads(r.stdout)["tensors"]] == [NEWLINE, "y"]
    r = runner.invoke(app, ["layers", str(path), "--input", feed, "--range", "q\\\\1:#1"], env=ENV)
    assert r.exit_code == 2 and "no node named 'q\\\\1'" in r.output, r.output  # echoed as typed, not doubled again


def test_tab_completion_writes_names_as_listed(tmp_path):
    """What Tab inserts reads back, through the session's own words, as the tensor it offered."""
    from prompt_toolkit.document import Document

    from onnxprobe import api
    from onnxprobe.session.parse import split
    from onnxprobe.session.repl import make_completer
    from onnxprobe.session.state import State
    from onnxprobe.text import as_typed

    path, _ = _model(tmp_path)
    state = State([api.load(str(path))], device="cpu")
    offered = [c.text for c in make_completer(state).get_completions(Document("show a", 6), None)]
    assert sorted(offered) == sorted(listed for listed, _ in LISTED.values()), offered
    refs = state.a.index.refs
    assert sorted(as_typed(split(f"show {o}")[1], refs) for o in offered) == sorted(LISTED)
