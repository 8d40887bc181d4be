"""A dataset run (diff / layers --inputs-dir) on a model that declares inputs no node reads (onnxruntime's
optimized copy of an IR-3 model: '..._SHAPE' inputs): a batch holding every input some node reads was
refused ("input W_0__SHAPE: not in the dataset ... every input the model takes must be there") when the
model with the unread input was A. A batch now needs only the inputs some node reads; the unread ones get
zeros, said in a note, as in the one-input diff. An input a node reads is still required. Oracle:
onnx.reference on every batch, the pooled max |a-b| their maximum."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxprobe import api
from onnxprobe.cli.main import app
from test_diff_unread_inputs import W, W2, _model, _ref

XS = [np.random.default_rng(k).standard_normal((2, 4)).astype(np.float32) for k in range(3)]


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "ds"
    d.mkdir()
    for k, x in enumerate(XS):
        np.savez(d / f"b{k}.npz", x=x)
    return str(d)


@pytest.fixture
def pair(tmp_path):
    return _model(tmp_path / "plain.onnx", W), _model(tmp_path / "extra.onnx", W2, "W_0__SHAPE")


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("fuse", [True, False])
def test_diff_dataset_needs_only_the_inputs_nodes_read(pair, data, swap, fuse):
    a, b = pair[::-1] if swap else pair
    res = api.diff_dataset(a, b, data, fuse=fuse)
    y = next(r for r in res.results if r.pair.a.name == "y")
    want = max(np.max(np.abs(_ref(a, x).astype(np.float64) - _ref(b, x).astype(np.float64))) for x in XS)
    assert res.samples == len(XS) and want > 1e-3 and y.metrics.max_abs == pytest.approx(want, rel=1e-4, abs=1e-6)
    assert res.verdict()[0] == "fail"  # the weights differ: measured
    assert any("no node reads" in n and "W_0__SHAPE" in n and "fed zeros" in n for n in res.notes), res.notes


def test_same_weights_pass_over_the_dataset(tmp_path, data):
    a, b = _model(tmp_path / "a.onnx", W, "W_0__SHAPE"), _model(tmp_path / "b.onnx", W)
    res = api.diff_dataset(a, b, data)
    assert res.verdict()[0] == "pass" and any(r.pair.a.name == "y" and r.metrics is not None for r in res.results)


def test_layers_dataset_feeds_the_unread_input_zeros(pair, data):
    _, extra = pair
    res = api.layers_dataset(extra, data, api.Selection(all=True))
    ys = np.concatenate([_ref(extra, x).ravel() for x in XS]).astype(np.float64)
    st = next(st for ref, st in res.rows() if ref.name == "y")
    assert st.count == ys.size and st.min == pytest.approx(ys.min(), abs=1e-6) and st.max == pytest.approx(ys.max(), abs=1e-6)
    assert any("W_0__SHAPE" in n and "fed zeros" in n for n in res.notes), res.notes


def test_cli(pair, data):
    a, b = pair[::-1]  # A declares the unread input
    r = CliRunner().invoke(app, ["diff", a, b, "--device", "cpu", "--inputs-dir", data])
    assert r.exit_code == 1 and "fed zeros" in r.output and "must be there" not in r.output, r.output


def test_an_input_a_node_reads_is_still_required(tmp_path, data):
    m = onnx.load(_model(tmp_path / "read.onnx", W, "u", read=True))
    m.graph.input.append(helper.make_tensor_value_info("W_0__SHAPE", TensorProto.INT64, [1]))  # and one unread
    onnx.save(m, str(tmp_path / "read.onnx"))
    r = CliRunner().invoke(app, ["layers", str(tmp_path / "read.onnx"), "--device", "cpu", "--inputs-dir", data])
    assert r.exit_code == 2 and "input u: not in the dataset" in r.output, r.output


def test_inputs_given_without_the_unread_ones_feed_those_zeros_in_one_note(pair, tmp_path):
    """`layers extra.onnx --inputs x.npz`: each input no node reads got a note of its own, 'not in --inputs ..., so
    seeded random data' (212 lines for an optimized ResNet-50), where diff said once that they are fed zeros."""
    np.savez(tmp_path / "x.npz", x=XS[0])
    r = CliRunner().invoke(app, ["layers", pair[1], "--inputs", str(tmp_path / "x.npz")])
    assert r.exit_code == 0, r.output
    notes = [ln for ln in r.stderr.splitlines() if "note:" in ln]
    assert len(notes) == 1 and "1 input no node reads" in notes[0] and "fed zeros" in notes[0], notes
    fs = api.feeds(pair[1], api.InputSpec(arrays={"x": XS[0]}))
    assert not fs.values["W_0__SHAPE"].any() and np.array_equal(fs.values["x"], XS[0])
