"""A command that runs onnxruntime alone (no --runtime: grad, debug) describes its execution flags for
onnxruntime alone: grad's --runtime-option help listed OpenVINO properties, TensorRT modes and the
RUNTIME:KEY=VALUE form of a diff, all of which grad refuses (QA). --device had its onnxruntime-only
help already (OrtDeviceOpt); this holds the same for every execution flag of every such command."""

from __future__ import annotations

import typer

from onnxprobe.cli.main import app


def test_commands_without_runtime_describe_onnxruntime_settings_only():
    group = typer.main.get_command(app)
    checked = []
    for name, command in group.commands.items():
        flags = {p.opts[0]: p for p in command.params if p.opts}
        if "--runtime" in flags or "--device" not in flags:
            continue
        for flag in ("--device", "--runtime-option"):
            if flag in flags:
                text = (flags[flag].help or "").lower()
                assert "openvino" not in text and "tensorrt" not in text and "runtime:" not in text, (name, flag, text)
                checked.append((name, flag))
    assert ("grad", "--runtime-option") in checked and ("debug", "--device") in checked, checked


def test_grad_flag_values_are_judged_before_what_they_need():
    """`grad --reduce foo` without a dataset said only that --reduce needs a dataset; `--loss mse` said 'needs
    target (--target FILE.npy)', the API's field beside the flag."""
    from typer.testing import CliRunner

    from conftest import sample_path
    from onnxprobe.cli.main import app

    r = CliRunner().invoke(app, ["grad", str(sample_path("cnn")), "--reduce", "foo"])
    assert r.exit_code == 2 and "--reduce foo: choose sum or mean" in r.stderr, r.stderr
    r = CliRunner().invoke(app, ["grad", str(sample_path("cnn")), "--loss", "mse"])
    assert r.exit_code == 2 and "--loss mse needs --target FILE.npy" in r.stderr and "needs target" not in r.stderr, r.stderr
