"""bench/run.py measures what it claims: a crashed or refused command is an error row, not a timing (exit 1 was
taken as diff's FAIL verdict for every command, so a baseline could be a process that did nothing); the plain
baseline feeds each input its own type (it fed float32 to a float16 input and crashed); a model's perturbed copy is
named by its external data too (new weights beside an unchanged .onnx reused the old copy); its flags are checked
before anything is measured."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import ROOT, sample_path


def _run_module():
    spec = importlib.util.spec_from_file_location("onnxprobe_bench_run", ROOT / "bench" / "run.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_only_a_comparisons_verdict_may_exit_1(tmp_path):
    run = _run_module()
    crash = [sys.executable, "-c", "raise ValueError('boom')"]  # exit 1, a traceback
    refused = [sys.executable, "-c", "import sys; print('onnxprobe: error: x: no such file', file=sys.stderr); sys.exit(1)"]
    verdict = [sys.executable, "-c", "import sys; sys.exit(1)"]  # diff's FAIL: exit 1, nothing on stderr
    for cmd, how in ((crash, None), (crash, run.verdict_of("diff_all")), (refused, run.verdict_of("diff_all")),
                     (verdict, None), (verdict, run.verdict_of("layers_all"))):
        with pytest.raises(RuntimeError):
            run.once(cmd, how)
    wall, rss = run.once(verdict, run.verdict_of("diff_all"))
    assert wall > 0 and rss > 0
    poly_fail = [sys.executable, "-c", "import sys; print('[E] FAILED | Runtime: 1s | Command: x', file=sys.stderr); sys.exit(1)"]
    assert run.once(poly_fail, run.verdict_of("poly_diff_all"))[0] > 0
    with pytest.raises(RuntimeError):  # Polygraphy's own error, exit 1 as well
        run.once([sys.executable, "-c", "import sys; print('[!] could not load', file=sys.stderr); sys.exit(1)"],
                 run.verdict_of("poly_diff_all"))


@pytest.mark.parametrize("elem", [TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.BOOL, TensorProto.UINT8,
                                  TensorProto.INT16])
def test_the_plain_baseline_feeds_each_input_its_own_type(tmp_path, elem):
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", elem, [1, 16])],
                          [helper.make_tensor_value_info("y", elem, [1, 16])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "m.onnx")
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "plain.py"), str(tmp_path / "m.onnx"), "x=1x16"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_a_perturbed_copy_is_named_by_the_external_data_too(tmp_path):
    run = _run_module()

    def save(w):
        g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])], [numpy_helper.from_array(w, "W")])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        (tmp_path / "m.onnx.data").unlink(missing_ok=True)  # onnx appends to a data file that is there
        onnx.save(m, tmp_path / "m.onnx", save_as_external_data=True, location="m.onnx.data", size_threshold=0)
        return (tmp_path / "m.onnx").read_bytes(), run.model_digest(tmp_path / "m.onnx")

    rng = np.random.default_rng(0)
    first, d1 = save(rng.standard_normal((64, 64)).astype(np.float32))
    second, d2 = save(rng.standard_normal((64, 64)).astype(np.float32))
    assert first == second and d1 != d2  # the .onnx alone did not change; its digest does
    assert run.model_digest(sample_path("mlp")) == run.model_digest(sample_path("mlp"))


@pytest.mark.parametrize("args, said", [(["--only", "resnet"], "--only: no model resnet"),
                                        (["--repeat", "0"], "--repeat 0"),
                                        (["--only", "resnet18", "--readme"], "--readme writes the README's whole table"),
                                        (["--json", "/nonexistent-folder/r.json"], "does not exist")])
def test_flags_are_checked_before_anything_is_measured(args, said, tmp_path):
    import shutil

    # a copy of the bench beside a copy of the README: a refusal that failed would measure and write there, not here
    shutil.copytree(ROOT / "bench", tmp_path / "bench", ignore=shutil.ignore_patterns(".cache", "results.json"))
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    r = subprocess.run([sys.executable, str(tmp_path / "bench" / "run.py"), "--no-polygraphy", *args], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and said in r.stderr, r.stderr


def test_a_ratio_just_over_its_goal_keeps_a_third_digit():
    """'2.00' beside 'MISSED (<=2.0x wall)' read as a contradiction (2.004 rounded)."""
    run = _run_module()
    row = run.rows({"models": {"m": {"layers_all": {"wall_s": 1.0, "rss_bytes": 2**20, "wall_vs_plain": 2.004,
                                                     "rss_vs_plain": 1.05}}}})[0]
    assert row[4] == "2.004" and row[5] == "1.05" and row[-1].startswith("MISSED"), row
