"""QA: a diff whose side onnxruntime cannot load, where no pair of numbers is compared (a model of string outputs
only: onnx's node test strnormalizer_*, a StringNormalizer of a locale onnxruntime refuses), said "nothing was
compared" and never ran that side, so onnxruntime's load error (which ``layers`` shows) was never said. A side
that cannot run is the error, named with its side and file (as tests/test_diff_side_errors.py's), whatever the
outputs' types."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T, helper as h, numpy_helper

from onnxprobe import api
from onnxprobe.errors import ExecutionError, SessionError


def _save(nodes, x, y, path) -> str:
    m = h.make_model(h.make_graph(nodes, "g", [x], [y]), opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, str(path))
    return str(path)


def _refused_by_ort(path: str) -> str:
    """The fixture's premise, checked against onnxruntime itself (the oracle): it refuses to load the model."""
    with pytest.raises(Exception):  # noqa: B017 - whatever onnxruntime raises
        ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return path


def normalizer(tmp_path) -> tuple[str, dict]:
    """StringNormalizer of a locale no system has: onnxruntime refuses it as the session is made."""
    p = _save([h.make_node("StringNormalizer", ["x"], ["y"], case_change_action="LOWER", locale="zz_ZZ", name="sn")],
              h.make_tensor_value_info("x", T.STRING, [4]), h.make_tensor_value_info("y", T.STRING, [None]),
              tmp_path / "sn.onnx")
    return _refused_by_ort(p), {"x": np.array(["Monday", "TUESDAY", "a", "B"], dtype=object)}


def strings_of_int16(tmp_path, name="rs.onnx") -> tuple[str, dict]:
    """A Relu of int16 (no onnxruntime CPU kernel), cast to strings: the only output holds no numbers."""
    p = _save([h.make_node("Cast", ["x"], ["xi"], to=T.INT16, name="c"), h.make_node("Relu", ["xi"], ["ri"], name="r"),
               h.make_node("Cast", ["ri"], ["y"], to=T.STRING, name="s")],
              h.make_tensor_value_info("x", T.FLOAT, [2, 3]), h.make_tensor_value_info("y", T.STRING, [2, 3]), tmp_path / name)
    return _refused_by_ort(p), {"x": np.arange(6, dtype=np.float32).reshape(2, 3) - 2}


def strings_good(tmp_path) -> str:
    """The same input and output, loaded by onnxruntime: x cast to strings."""
    return _save([h.make_node("Cast", ["x"], ["y"], to=T.STRING, name="s")], h.make_tensor_value_info("x", T.FLOAT, [2, 3]),
                 h.make_tensor_value_info("y", T.STRING, [2, 3]), tmp_path / "good.onnx")


def _data_set(folder, inputs: dict, outputs: dict) -> str:
    """An ONNX test data set (input_N.pb, output_N.pb), as onnx's node tests ship them."""
    folder.mkdir()
    for kind, arrays in (("input", inputs), ("output", outputs)):
        for k, (name, v) in enumerate(arrays.items()):
            (folder / f"{kind}_{k}.pb").write_bytes(numpy_helper.from_array(np.asarray(v), name).SerializeToString())
    return str(folder)


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "onnxprobe", "diff", *args, "--device", "cpu"], capture_output=True, text=True)


@pytest.mark.parametrize("fixture", [normalizer, strings_of_int16])
def test_vs_npz_says_that_model_a_cannot_be_loaded(tmp_path, fixture):
    model, feeds = fixture(tmp_path)
    folder = _data_set(tmp_path / "test_data_set_0", feeds, {"y": np.array(["x"] * 4, dtype=object)})
    with pytest.raises(ExecutionError) as e:
        api.diff(model, vs_npz=folder, config=api.RunConfig(device="cpu"))
    assert type(e.value) is SessionError and str(e.value).startswith(f"A ({model}): onnxruntime"), str(e.value)
    out = cli(model, "--vs-npz", folder)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith(f"onnxprobe: error: A ({model}): onnxruntime"), out.stderr
    assert "nothing was compared" not in out.stderr, out.stderr


def test_two_models_of_string_outputs_name_the_one_that_cannot_be_loaded(tmp_path):
    bad, feeds = strings_of_int16(tmp_path)
    good = strings_good(tmp_path)
    for x, y, side in ((good, bad, "B"), (bad, good, "A")):
        with pytest.raises(SessionError) as e:
            api.diff(x, y, config=api.RunConfig(device="cpu"), inputs=api.InputSpec(arrays=feeds))
        assert str(e.value).startswith(f"{side} ({bad}): onnxruntime"), str(e.value)
        out = cli(x, y)
        assert out.returncode == 1 and out.stderr.startswith(f"onnxprobe: error: {side} ({bad}): onnxruntime"), out.stderr


def test_two_loadable_models_of_string_outputs_still_compare_nothing(tmp_path):
    """The sides run, and the verdict stays what it was: nothing compared is no pass (exit 1, said so)."""
    good = strings_good(tmp_path)
    res = api.diff(good, good, config=api.RunConfig(device="cpu"),
                   inputs=api.InputSpec(arrays={"x": np.ones((2, 3), np.float32)}))
    assert not res.results
    out = cli(good, good)
    assert out.returncode == 1 and "nothing was compared" in out.stderr, out.stderr
