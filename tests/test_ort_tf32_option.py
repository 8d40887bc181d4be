"""`--runtime-option tf32=0|1` for onnxruntime: its CUDA provider computes float32 matrix products and
convolutions in TF32 by default (about 1e-3 relative from float32: a CUDA-against-CPU diff shows it at every
MatMul, tests/test_cuda.py measured it on an H200); tf32=0 runs them in float32 (RunConfig.tf32, the
provider option use_tf32). On a CPU side the option is refused for what it is; other keys are refused for
onnxruntime, and OpenVINO's options still go to OpenVINO alone."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import UsageError
from onnxprobe.runtime.ort import providers_for
from onnxprobe.runtime.runners import make_runner, options_for

runner = CliRunner()


def test_the_provider_option_follows_the_setting():
    assert providers_for("cuda") == ["CUDAExecutionProvider", "CPUExecutionProvider"]  # the provider's default
    assert providers_for("cuda", False) == [("CUDAExecutionProvider", {"use_tf32": "0"}), "CPUExecutionProvider"]
    assert providers_for("cuda", True) == [("CUDAExecutionProvider", {"use_tf32": "1"}), "CPUExecutionProvider"]
    assert providers_for("cpu", False) == ["CPUExecutionProvider"]


def test_a_cpu_side_refuses_it_and_other_keys_are_refused():
    import onnx

    m = onnx.load(str(sample_path("mlp")))
    with pytest.raises(UsageError, match="tf32 sets onnxruntime's CUDA provider, and this run is not on CUDA: it runs on the CPU"):
        make_runner("ort", m, api.RunConfig(device="cpu"), options={"tf32": "0"})
    with pytest.raises(UsageError, match="ort takes only tf32"):
        make_runner("ort", m, api.RunConfig(device="cpu"), options={"INFERENCE_PRECISION_HINT": "f16"})
    with pytest.raises(UsageError, match="give 0 or 1"):
        make_runner("ort", m, api.RunConfig(device="cpu"), options={"tf32": "no"})
    with pytest.raises(UsageError, match="RunConfig tf32"):
        api.RunConfig(tf32="no")


def test_options_reach_the_runtimes_that_take_them():
    opts = {"tf32": "0", "INFERENCE_PRECISION_HINT": "f16"}
    assert options_for("ort", opts) == {"tf32": "0"}
    assert options_for("openvino", opts) == opts  # unprefixed: every runtime that takes options
    assert options_for("ort", {"openvino:INFERENCE_PRECISION_HINT": "f16"}) == {}
    assert options_for("ort", {"ort:tf32": "1"}) == {"tf32": "1"}


def test_the_command_line_says_it_in_one_line():
    r = runner.invoke(app, ["layers", str(sample_path("mlp")), "--device", "cpu", "--runtime-option", "tf32=0"])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "tf32 sets onnxruntime's CUDA provider" in r.output, r.output
    r = runner.invoke(app, ["diff", str(sample_path("mlp")), "--vs-reference", "--device", "cpu", "--runtime-option", "ort:tf32=0"])
    assert r.exit_code == 2 and "tf32 sets onnxruntime's CUDA provider" in r.output, r.output


def test_a_diff_of_cuda_against_cpu_gives_tf32_to_the_cuda_side(monkeypatch):
    """`diff --device cuda --vs-device cpu --runtime-option tf32=0` is the natural command: the option is
    the CUDA side's (on an H200 it was refused, because the CPU side got it too); with no side on CUDA it
    is refused."""
    import importlib

    d = importlib.import_module("onnxprobe.api.diff")

    real = d.resolve_device
    monkeypatch.setattr(d, "resolve_device", lambda dev, *a: "cuda" if dev == "cuda" else real("cpu"))
    assert d._cuda_only([("ort", "cuda"), ("ort", "cpu")], {"tf32": "0"}) == ("tf32",)
    assert d._cuda_only([("ort", "cpu"), ("ort", "cpu")], {"tf32": "0"}) == ()
    assert d._cuda_only([("ort", "cuda"), ("openvino", "CPU")], {"INFERENCE_PRECISION_HINT": "f16"}) == ()
    # the CPU side is built without it (no refusal); the CUDA side would take it
    side = d._side("m", api.load(sample_path("mlp")), api.RunConfig(device="cpu"), "ort", options={"tf32": "0"},
                   cuda_only=("tf32",))
    assert side.runner.config.tf32 is None


def test_grad_and_diff_grad_take_it_as_layers_does():
    """grad runs on onnxruntime's CUDA provider too: the same option, the same refusal on the CPU; diff --grad
    takes it and no other runtime option."""
    for args in (["grad", str(sample_path("mlp"))], ["diff", "--grad", str(sample_path("mlp")), str(sample_path("mlp"))]):
        r = runner.invoke(app, [*args, "--device", "cpu", "--runtime-option", "tf32=0"])
        assert r.exit_code == 2 and "tf32 sets onnxruntime's CUDA provider" in r.output, r.output
    r = runner.invoke(app, ["grad", str(sample_path("mlp")), "--device", "cpu", "--runtime-option", "mode=debug"])
    assert r.exit_code == 2 and "ort takes only tf32" in r.output, r.output
    r = runner.invoke(app, ["diff", "--grad", str(sample_path("mlp")), str(sample_path("mlp")), "--runtime-option", "mode=debug"])
    assert r.exit_code == 2 and "--runtime-option but tf32" in r.output, r.output
    assert api.ort_config(api.RunConfig(device="cpu"), {}) == api.RunConfig(device="cpu")


def test_the_ort_prefix_means_the_same_in_grad_as_in_layers():
    """`--runtime-option ort:tf32=0` (RUNTIME:KEY, as diff takes options) is tf32=0 for onnxruntime in layers
    and diff; grad and diff --grad refused it as an unknown key ('ort:tf32: ort takes only tf32=0|1')."""
    for args in (["layers", str(sample_path("mlp"))], ["grad", str(sample_path("mlp"))],
                 ["diff", "--grad", str(sample_path("mlp")), str(sample_path("mlp"))]):
        r = runner.invoke(app, [*args, "--device", "cpu", "--runtime-option", "ort:tf32=0"])
        assert r.exit_code == 2 and "tf32 sets onnxruntime's CUDA provider" in r.output, (args, r.output)
    with pytest.raises(UsageError, match="openvino does not run here"):
        api.ort_config(api.RunConfig(device="cpu"), {"openvino:INFERENCE_PRECISION_HINT": "f16"})


def test_diff_vs_torch_takes_it_as_diff_grad_vs_torch_does(monkeypatch):
    """A forward diff against a PyTorch module runs the export on onnxruntime, on CUDA too: tf32=0 is its
    option there as in `diff --grad --vs-torch` (it was refused: 'drop --runtime / --runtime-option')."""
    import importlib

    import onnxprobe.api.torch as torch_api
    import onnxprobe.runtime.ort as ort

    d = importlib.import_module("onnxprobe.api.diff")
    with pytest.raises(UsageError, match="tf32 sets onnxruntime's CUDA provider, and this run is not on CUDA: it runs on the CPU"):
        d.diff(sample_path("mlp"), vs_torch="module.py:build", runtime_options={"tf32": "0"},
               config=api.RunConfig(device="cpu"))
    with pytest.raises(UsageError, match="ort takes only tf32"):
        d.diff(sample_path("mlp"), vs_torch="module.py:build", runtime_options={"mode": "debug"},
               config=api.RunConfig(device="cpu"))
    seen = {}
    monkeypatch.setattr(ort, "resolve_device", lambda dev, *a: "cuda")
    monkeypatch.setattr(torch_api, "diff_torch", lambda a, spec, **kw: seen.update(kw))
    d.diff(sample_path("mlp"), vs_torch="module.py:build", runtime_options={"ort:tf32": "0"},
           config=api.RunConfig(device="cuda"))
    assert seen["config"].tf32 is False


def test_an_api_config_with_tf32_on_the_cpu_says_it_is_ignored():
    """The flag refuses tf32 on a CPU side; an API caller's RunConfig(device='cpu', tf32=False) ran without a
    word: a note says it does nothing there."""
    res = api.layers(sample_path("mlp"), config=api.RunConfig(device="cpu", tf32=False))
    assert any("tf32 sets onnxruntime's CUDA provider: ignored on the cpu" in n for n in res.notes), res.notes
    plain = api.layers(sample_path("mlp"), config=api.RunConfig(device="cpu"))
    assert not any("tf32" in n for n in plain.notes)


def test_a_run_config_tf32_follows_the_same_rule_as_the_option(monkeypatch):
    """RunConfig.tf32 and --runtime-option tf32 are one setting: in a diff with a side on CUDA, a CPU side
    takes neither (before, RunConfig.tf32 was reset by hand for --vs-device alone, so a CPU A against a CUDA
    B kept it, and noted it as ignored)."""
    import importlib

    d = importlib.import_module("onnxprobe.api.diff")

    real = d.resolve_device
    monkeypatch.setattr(d, "resolve_device", lambda dev, *a: "cuda" if dev == "cuda" else real("cpu"))
    assert d._cuda_only([("ort", "cpu"), ("ort", "cuda")], None, tf32=False) == ("tf32",)
    assert d._cuda_only([("ort", "cpu"), ("ort", "cpu")], None, tf32=False) == ()
    cuda_only = d._cuda_only([("ort", "cpu"), ("ort", "cuda")], None, tf32=False)
    side = d._side("m", api.load(sample_path("mlp")), api.RunConfig(device="cpu", tf32=False), "ort", cuda_only=cuda_only)
    assert side.runner.config.tf32 is None
    # with no side on CUDA, the setting stays, and the runner notes it as ignored on the cpu
    side = d._side("m", api.load(sample_path("mlp")), api.RunConfig(device="cpu", tf32=False), "ort", cuda_only=())
    assert side.runner.config.tf32 is False


def test_the_refusal_says_where_each_run_is_and_what_makes_tf32_apply():
    """The refusal read 'this side runs on cpu (--device cuda)' in every command: in a run of no sides
    (layers), and in `diff --vs-device cpu`, where it read as if the user had given --device cuda. It now
    says where the run is, by which setting, and what makes tf32 apply; a diff names each side's device."""
    mlp = str(sample_path("mlp"))
    r = runner.invoke(app, ["layers", mlp, "--device", "cpu", "--runtime-option", "tf32=0"])
    line = r.stderr.strip()
    assert r.exit_code == 2 and "this side" not in line and "(--device cuda)" not in line, line
    assert "runs on the CPU (--device cpu)" in line and "tf32 applies with --device cuda" in line, line
    r = runner.invoke(app, ["diff", mlp, "--device", "cpu", "--vs-device", "cpu", "--runtime-option", "tf32=0"])
    line = r.stderr.strip()
    assert r.exit_code == 2 and "(--device cuda)" not in line, line
    assert "no side of this diff runs onnxruntime on CUDA" in line, line
    assert "A runs on the CPU (--device cpu), B runs on the CPU (--vs-device cpu)" in line, line
    assert "--device cuda (side A) or --vs-device cuda (side B)" in line, line
    r = runner.invoke(app, ["diff", mlp, "--vs-reference", "--device", "cpu", "--runtime-option", "ort:tf32=0"])
    line = r.stderr.strip()
    assert r.exit_code == 2 and "A runs on the CPU (--device cpu), B runs reference" in line, line
    assert "tf32 applies with --device cuda (side A)" in line and "--vs-device" not in line, line
    with pytest.raises(UsageError, match=r"runs on the CPU \(device \(--device\) cpu\): tf32 applies with RunConfig\(device='cuda'\)"):
        api.layers(sample_path("mlp"), config=api.RunConfig(device="cpu"), runtime_options={"tf32": "0"})
