"""What a notebook user meets first: a ``progress`` that is not a function is one UsageError naming it
before anything runs (not "'int' object is not callable" from inside the run), and the inputs a user
passes or gets back (``api.feeds``, an ``InputSpec`` of arrays) show as one line of names, types and shapes,
not as the arrays' values."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import sample_path
from onnxprobe import api
from onnxprobe.errors import UsageError

CNN, MLP = str(sample_path("cnn")), str(sample_path("mlp"))


def _called(log):
    return lambda done, total: log.append((done, total))


@pytest.mark.parametrize("call", [
    lambda p, tmp: api.layers(CNN, save_to=tmp / "t.npz", progress=p),
    lambda p, tmp: api.diff(CNN, CNN, progress=p),
    lambda p, tmp: api.grad(MLP, check=True, progress=p),
    lambda p, tmp: api.save_tensors(CNN, api.layers(CNN), api.feeds(CNN).values, tmp / "t.npz", progress=p),
    lambda p, tmp: api.diff_grad(MLP, MLP, progress=p),
    lambda p, tmp: api.layers_dataset(CNN, inputs_from=[api.feeds(CNN).values], progress=p),
    lambda p, tmp: api.diff_dataset(CNN, CNN, inputs_from=[api.feeds(CNN).values], progress=p),
    lambda p, tmp: api.grad_dataset(MLP, inputs_from=[api.feeds(MLP).values], progress=p),
], ids=["layers", "diff", "grad", "save_tensors", "diff_grad", "layers_dataset", "diff_dataset", "grad_dataset"])
def test_progress_that_is_not_a_function_is_one_usage_error(call, tmp_path):
    with pytest.raises(UsageError, match=r"^progress: expected a function progress\(done, total\) or None, got int 5$"):
        call(5, tmp_path)
    assert not (tmp_path / "t.npz").exists()


def test_progress_function_is_called_with_done_and_total(tmp_path):
    log = []
    api.layers(CNN, save_to=tmp_path / "t.npz", progress=_called(log))
    assert log and log[-1][0] == log[-1][1]


def test_feeds_and_input_spec_of_arrays_show_names_types_and_shapes():
    big = np.arange(3 * 224 * 224, dtype=np.float32).reshape(1, 3, 224, 224)
    spec = api.InputSpec(seed=3, arrays={"image": big})
    text = repr(spec)
    assert "\n" not in text and len(text) < 300, text
    assert "arrays={'image': float32[1x3x224x224]}" in text and "seed=3" in text
    fs = api.feeds(CNN)
    text = repr(fs)
    assert "\n" not in text and len(text) < 300, text
    assert text.startswith("Feeds(image float32[1x3x32x32]")
    assert repr(api.InputSpec()) .startswith("InputSpec(seed=0, int_range=(0, 100), shapes={}, files={}, arrays={}")


def test_every_model_parameter_is_annotated_with_what_it_takes():
    """An editor's or help()'s signature says what a ``model`` may be: a path, a Model or a ModelProto (README:
    "Models may be paths, api.Models or onnx.ModelProtos"), not nothing, and not Model alone."""
    import inspect
    import typing

    bare = []
    for name in api.__all__:
        fn = getattr(api, name)
        if not inspect.isfunction(fn) or "model" not in inspect.signature(fn).parameters:
            continue
        # the model's hint alone: others may name types a type checker alone imports (TYPE_CHECKING)
        ann = fn.__annotations__.get("model")
        while isinstance(ann, str):  # a string (or a quoted string) annotation, evaluated where it was written
            ann = eval(ann, fn.__globals__)
        takes = set(typing.get_args(ann)) | {ann}
        # api.Model, or the class it extends (types.Model: what api.lean names without importing onnx)
        if ann is None or str not in takes or not any(isinstance(t, type) and issubclass(api.Model, t) for t in takes):
            bare.append(name)
    assert bare == [], bare


def test_every_parameter_of_every_public_function_is_annotated():
    """help() and an editor say what each parameter takes: ``vs_torch``/``module`` (a module, a (module,
    args) tuple or FILE.py:FUNC), a report's ``result``, ``columns``, ``profile``, export's ``inputs``,
    ``where``'s ``rows`` and ``condition``, ``interruptibly``'s ``fn``... were bare. Names a type checker
    alone resolves (TYPE_CHECKING imports: no import cycles) count as annotations."""
    import inspect

    bare = []
    for name in api.__all__:
        fn = getattr(api, name)
        if not inspect.isfunction(fn):
            continue
        sig = inspect.signature(fn)
        bare += [f"{name}({p.name})" for p in sig.parameters.values() if p.annotation is inspect.Parameter.empty]
        if sig.return_annotation is inspect.Signature.empty:
            bare.append(f"{name} -> ?")
    assert bare == [], bare


def test_the_hints_resolve_without_importing_torch():
    """``vs_torch`` and ``module`` say a torch module to a type checker; at run time their hints resolve
    (typing.get_type_hints) without importing torch, an optional extra."""
    import subprocess
    import sys

    code = ("import sys, typing; from onnxprobe import api\n"
            "for f in (api.diff, api.diff_torch, api.diff_grad_torch, api.torch_module, api.where):\n"
            "    typing.get_type_hints(f)\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
