"""QA: a model whose outputs are all non-tensors (a sequence here) hid its load error. An int16 Relu (onnxruntime
has no CPU kernel for it) read by SequenceConstruct, the sequence the only output: ``layers`` had no tensor to
fetch, ran nothing, and printed "0 tensors" with exit 0; ``diff`` of it and a loadable model of the same kind
said "nothing was compared" and never named A's error. onnxruntime refuses the session (the oracle): onnxprobe
says so in one line, whatever it fetches."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T, helper as h

from onnxprobe import api
from onnxprobe.errors import SessionError


def _seq_model(path, op: str) -> str:
    """x (int16) -> ``op`` -> SequenceConstruct: the sequence is the only output."""
    seq = h.make_sequence_type_proto(h.make_tensor_type_proto(T.INT16, [2]))
    g = h.make_graph([h.make_node(op, ["x"], ["r"], name="n"), h.make_node("SequenceConstruct", ["r"], ["s"], name="sc")],
                     "g", [h.make_tensor_value_info("x", T.INT16, [2])], [h.make_value_info("s", seq)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, str(path))
    return str(path)


@pytest.fixture
def bad(tmp_path) -> str:
    p = _seq_model(tmp_path / "seq.onnx", "Relu")
    with pytest.raises(Exception):  # noqa: B017 - the premise, from onnxruntime itself: it refuses the model
        ort.InferenceSession(p, providers=["CPUExecutionProvider"])
    return p


@pytest.fixture
def good(tmp_path) -> str:
    p = _seq_model(tmp_path / "ok.onnx", "Identity")
    ort.InferenceSession(p, providers=["CPUExecutionProvider"])  # loads
    return p


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "onnxprobe", *args, "--device", "cpu"], capture_output=True, text=True)


def test_layers_says_the_model_cannot_be_loaded(bad):
    with pytest.raises(SessionError):
        api.layers(bad, config=api.RunConfig(device="cpu"))
    out = cli("layers", bad)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    errors = [ln for ln in out.stderr.splitlines() if ln.startswith("onnxprobe: error:")]
    assert len(errors) == 1 and "Relu" in errors[0], out.stderr
    assert "0 tensors" not in out.stdout, out.stdout


def test_layers_of_a_loadable_sequence_model_still_runs(good):
    """It loads and runs; nothing it selects is a tensor, which is one line (not a load error; an empty table and
    exit 0 were: QA)."""
    out = cli("layers", good)
    assert out.returncode == 1 and out.stderr.startswith("onnxprobe: error: nothing to probe: s: a sequence"), out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "onnxruntime" not in out.stderr, out.stderr


def test_diff_names_the_side_that_cannot_be_loaded(bad, good):
    feeds = {"x": np.array([1, -2], np.int16)}
    for x, y, side in ((bad, good, "A"), (good, bad, "B")):
        with pytest.raises(SessionError) as e:
            api.diff(x, y, config=api.RunConfig(device="cpu"), inputs=api.InputSpec(arrays=feeds))
        assert str(e.value).startswith(f"{side} ({bad}): onnxruntime"), str(e.value)
        out = cli("diff", x, y)
        assert out.returncode == 1 and out.stderr.startswith(f"onnxprobe: error: {side} ({bad}): onnxruntime"), out.stderr
