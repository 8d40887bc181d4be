"""ONNX's own node tests (fetched by fetch_models.sh: model.onnx with test_data_set_0/input_N.pb and
output_N.pb): `--inputs DIR` feeds their inputs, and the outputs onnxprobe's run gives equal the
expected ones ONNX ships (the oracle); `diff --vs-npz DIR` compares the model with them and passes.

Opt-in: ONNXPROBE_MODELS=DIR, as for tests/test_real_models.py."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from onnxprobe import api

MODELS = Path(os.environ["ONNXPROBE_MODELS"]) if os.environ.get("ONNXPROBE_MODELS") else None
pytestmark = pytest.mark.skipif(MODELS is None or not MODELS.is_dir(),
                                reason="real models not fetched: run ../shared/models/fetch_models.sh DIR and set ONNXPROBE_MODELS=DIR")
NODE_TESTS = sorted(p.parent for p in (MODELS / "onnx-node-tests").glob("*/test_data_set_0")) if MODELS else []


def _expected(ds: Path) -> dict[str, np.ndarray]:
    out = {}
    for f in sorted(ds.glob("output_*.pb")):
        t = onnx.TensorProto()
        t.ParseFromString(f.read_bytes())
        out[t.name] = numpy_helper.to_array(t)
    return out


@pytest.mark.parametrize("case", NODE_TESTS, ids=[p.name for p in NODE_TESTS])
def test_node_tests_run_on_their_own_inputs_and_match_their_expected_outputs(case):
    ds = case / "test_data_set_0"
    expected = _expected(ds)
    assert expected
    res = api.layers(case / "model.onnx", api.Selection(all=True), api.RunConfig(device="cpu"), api.input_spec(inputs=ds))
    for name, want in expected.items():
        np.testing.assert_allclose(res.outputs[name], want, rtol=1e-5, atol=1e-6, err_msg=f"{case.name}: {name}")
    d = api.diff(case / "model.onnx", vs_npz=ds, inputs=api.input_spec(inputs=ds), config=api.RunConfig(device="cpu"))
    compared = {r.pair.b.name for r in d.results if r.metrics is not None}
    assert set(expected) <= compared and d.verdict()[0] == "pass", (case.name, d.verdict())
