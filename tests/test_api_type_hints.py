"""QA: typing.get_type_hints raised NameError for api.report, api.html, api.diff_grad, api.ort_config... (their
annotations named classes imported only under TYPE_CHECKING): IDEs, docs generators, pydantic and typer-style
wrappers call it. Every public function and class of onnxprobe.api resolves its hints, and resolving them
loads nothing at ``import onnxprobe.api``."""

from __future__ import annotations

import inspect
import subprocess
import sys
import typing


def test_every_public_api_name_resolves_its_type_hints():
    from onnxprobe import api

    bad = []
    for name in api.__all__:
        obj = getattr(api, name)
        if inspect.isfunction(obj) or inspect.isclass(obj):
            try:
                typing.get_type_hints(obj)
            except Exception as e:  # noqa: BLE001
                bad.append(f"{name}: {type(e).__name__}: {e}")
    assert not bad, bad


def test_the_hints_name_the_classes_themselves():
    from onnxprobe import api
    from onnxprobe.compare.result import DiffResult

    hints = typing.get_type_hints(api.diff_histograms)
    assert DiffResult in typing.get_args(hints["res"]) or hints["res"] is DiffResult, hints["res"]
    assert api.RunConfig in typing.get_args(typing.get_type_hints(api.ort_config)["config"])


def test_importing_the_api_loads_no_workflow():
    code = ("import sys, onnxprobe, onnxprobe.api\n"
            "print(' '.join(m for m in sys.modules if m.startswith(('onnxprobe.api.', 'onnxprobe.compare'))"
            " or m.split('.')[0] in ('onnx', 'numpy')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "", r.stdout
