"""Batches that fail for different reasons: the one error gives each of the first few its own reason (it gave
the first one's, then only names: "a.npz: ...; also b.npz"), the rest counted and named."""

from __future__ import annotations

import numpy as np
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app

runner = CliRunner()


def _layers(folder):
    return runner.invoke(app, ["layers", str(sample_path("dynamic_batch")), "--inputs-dir", str(folder)])


def test_each_failing_batch_says_its_own_reason(tmp_path):
    x = np.zeros((1, 3, 8, 8), np.float32)
    np.savez(tmp_path / "a.npz", x=x.astype(np.float64))  # wrong dtype
    np.savez(tmp_path / "b.npz", x=x, extra=np.zeros(3))  # an input the model lacks
    np.savez(tmp_path / "c.npz", x=np.zeros((1, 3, 8), np.float32))  # wrong rank
    np.savez(tmp_path / "d.npz", x=x)  # fine
    r = _layers(tmp_path)
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.output
    line = r.stderr
    assert "3 of 4 batches failed" in line
    a, b, c = (line.index(f"{k}.npz: ") for k in "abc")
    assert a < b < c, line
    assert "float64" in line[a:b] and "unknown input name 'extra'" in line[b:c] and "'extra'" not in line[a:b]
    assert "d.npz" not in line


def test_many_failures_name_the_first_few_with_reasons_and_count_the_rest(tmp_path):
    for k in range(6):  # two reasons (batches that all fail for one reason say it once: below)
        np.savez(tmp_path / f"b{k}.npz", x=np.zeros((1, 3, 8, 8), np.float64) if k % 2 else np.zeros((1, 3, 8), np.float32))
    r = _layers(tmp_path)
    line = r.stderr.strip()
    assert r.exit_code == 2 and len(line.splitlines()) == 1, r.output
    assert all(f"b{k}.npz: " in line for k in range(3)) and "and 3 more (b3.npz, b4.npz, b5.npz)" in line, line


def test_a_batch_named_with_a_newline_keeps_its_reason_on_the_line(tmp_path):
    """A file named 'red\\nline.npz' (a control character too) cut the one line at its newline: the error
    read '1 of 2 batches failed, no result: red' and said nothing of why. Its name is escaped there."""
    x = np.zeros((1, 3, 8, 8), np.float32)
    np.savez(tmp_path / "\x1b[31mred\nline.npz", x=x.astype(np.float64))  # wrong dtype
    np.savez(tmp_path / "ok.npz", x=x)
    r = _layers(tmp_path)
    line = r.stderr.strip()
    assert r.exit_code == 2 and len(line.splitlines()) == 1, r.output
    assert "\x1b" not in line and "red\\nline.npz" in line and "float64" in line, line


def test_batches_that_fail_for_one_reason_say_it_once(tmp_path):
    """A stacked .npz that lacks an input fails every sample alike: the reason was repeated for each
    ("sample 0: input b: not in the dataset...; sample 1: input b: ..."); it is said once, the samples named."""
    import onnx
    from onnx import TensorProto as T, helper

    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "g",
                          [helper.make_tensor_value_info(n, T.FLOAT, [2, 3]) for n in "ab"],
                          [helper.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "two.onnx")
    np.savez(tmp_path / "stack.npz", a=np.ones((6, 2, 3), np.float32))
    r = runner.invoke(app, ["layers", str(tmp_path / "two.onnx"), "--inputs-dir", str(tmp_path / "stack.npz")])
    line = r.stderr.strip()
    assert r.exit_code == 2 and len(line.splitlines()) == 1, r.output
    assert "6 of 6 batches failed" in line and line.count("not in the dataset") == 1, line
    assert "sample 0, sample 1, sample 2 and 3 more" in line, line


def test_files_that_fail_alike_are_named_with_the_reason_once(tmp_path):
    for k in range(4):
        np.savez(tmp_path / f"f{k}.npz", x=np.zeros((1, 3, 8, 8), np.float64))
    line = _layers(tmp_path).stderr.strip()
    assert "4 of 4 batches failed" in line and line.count("float64") == 1, line
    assert "f0.npz, f1.npz, f2.npz and 1 more" in line, line


def test_a_pipeline_whose_samples_all_fail_is_stopped(tmp_path):
    """--inputs-from a generator that never ends and whose every sample fails ran forever; its first
    PIPELINE_GIVES_UP samples failing stop it, with the one line (the test runs in a thread it would hang)."""
    import threading

    from onnxprobe.api.datasets import PIPELINE_GIVES_UP

    (tmp_path / "pipe.py").write_text(
        "import itertools, numpy as np\n"
        "def forever():\n"
        "    for k in itertools.count():\n"
        "        yield {'x': np.zeros((1, 3, 8, 8), np.float64)}\n")
    got = {}
    t = threading.Thread(target=lambda: got.update(r=runner.invoke(app, [
        "layers", str(sample_path("dynamic_batch")), "--inputs-from", f"{tmp_path / 'pipe.py'}:forever"])), daemon=True)
    t.start()
    t.join(120)
    assert "r" in got, "the pipeline was never stopped"
    line = got["r"].stderr.strip()
    assert got["r"].exit_code == 2 and len(line.splitlines()) == 1, got["r"].output
    assert f"first {PIPELINE_GIVES_UP} samples failed" in line and line.count("float64") == 1, line


def _float8_model(tmp_path) -> str:
    """A float8 input, which onnxruntime's Python API takes no array of: a problem of the model, not of a batch."""
    import onnx
    from onnx import TensorProto as T, helper

    g = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], to=T.FLOAT)], "g",
                          [helper.make_tensor_value_info("x", T.FLOAT8E4M3FN, [2])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    m.ir_version = 9
    onnx.save(m, tmp_path / "f8.onnx")
    return str(tmp_path / "f8.onnx")


def test_a_batch_error_keeps_its_class_and_one_batch_is_a_batch(tmp_path):
    """QA: a float8 input (a ModelError in plain layers) failed the one batch of a dataset as an ExecutionError
    ('relabel' kept only usage vs other), and the line read '1 of 1 batches failed'."""
    import pytest

    from onnxprobe import api
    from onnxprobe.errors import ModelError

    model = _float8_model(tmp_path)
    with pytest.raises(ModelError):  # the class the model's problem has outside a dataset
        api.layers(model)
    data = tmp_path / "data"
    data.mkdir()
    np.savez(data / "b0.npz", x=np.zeros(2, np.float32))
    with pytest.raises(ModelError) as e:
        api.layers_dataset(model, data)
    assert "1 of 1 batch failed" in str(e.value), str(e.value)
    r = runner.invoke(app, ["layers", model, "--inputs-dir", str(data)])
    assert r.exit_code == 1 and "1 of 1 batch failed" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.output
    np.savez(data / "b1.npz", x=np.zeros(2, np.float32))
    with pytest.raises(ModelError) as e:
        api.layers_dataset(model, data)
    assert "2 of 2 batches failed" in str(e.value), str(e.value)


def test_relabel_keeps_the_class(tmp_path):
    from onnxprobe.api.datasets import relabel
    from onnxprobe.errors import (DeviceUnavailable, ExecutionError, ModelError, NoGradientRule, SessionError,
                                  UsageError)

    for e in (ModelError("m"), SessionError("s"), DeviceUnavailable("d"), UsageError("u"), ExecutionError("x")):
        assert type(relabel(e, "b.npz")) is type(e)
    rule = relabel(NoGradientRule("Foo", "n", "h", ["y"], ["Relu"]), "b.npz")  # a class of its own arguments:
    assert type(rule) is ModelError and str(rule).startswith("b.npz: cannot differentiate")  # its nearest plain base


def test_grad_names_every_failing_batch_as_layers_does(tmp_path):
    """`grad --inputs-dir` made its plan from the first batch: a bad first batch was said alone ("a.npz: not a
    readable .npz file"), the other bad ones unsaid; layers and diff name each. The plan is made from the first batch
    that makes one now, the run failing the bad ones, each named; all bad: all of them, as layers says it."""
    x = np.random.default_rng(0).normal(size=(1, 3, 8, 8)).astype(np.float32)
    (tmp_path / "a.npz").write_bytes(b"not a zip")
    np.savez(tmp_path / "b.npz", y=x)  # an input the model lacks
    np.savez(tmp_path / "c.npz", x=x)  # fine
    lines = []
    for cmd in ("grad", "layers"):
        r = runner.invoke(app, [cmd, str(sample_path("dynamic_batch")), "--inputs-dir", str(tmp_path)])
        assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.output
        lines.append(r.stderr)
        assert "2 of 3 batches failed" in r.stderr and "a.npz: " in r.stderr and "unknown input name 'y'" in r.stderr, r.stderr
    (tmp_path / "c.npz").unlink()
    r = runner.invoke(app, ["grad", str(sample_path("dynamic_batch")), "--inputs-dir", str(tmp_path)])
    assert r.exit_code == 2 and "2 of 2 batches failed" in r.stderr and "b.npz: " in r.stderr, r.output


def test_a_failed_batch_is_kept_without_the_frames_that_hold_its_arrays(tmp_path, monkeypatch):
    """Each failure is kept until every batch ran, for the one error: with its traceback, whose frames held the
    batch's arrays (20 wrong-shape batches of 32 MB took 712 MB before the error). Kept without them, the message
    the same; weakly referenced, each batch's array is gone once its run failed."""
    import gc
    import weakref

    from onnxprobe.api import datasets
    from onnxprobe.runtime import dataset

    for k in range(3):
        np.savez(tmp_path / f"b{k}.npz", x=np.zeros((1, 3, 8), np.float32))  # wrong rank
    monkeypatch.delenv("ONNXPROBE_DEBUG", raising=False)
    kept, real = {}, datasets.failed_batches

    def spy(failures, total, stopped=False):
        kept["tracebacks"] = [e.__traceback__ for _, _, e in failures]
        return real(failures, total, stopped)

    monkeypatch.setattr(datasets, "failed_batches", spy)
    arrays, read = [], dataset.read_npz

    def remember(*a, **k):  # a weak reference to each batch's array
        got = read(*a, **k)
        arrays.extend(weakref.ref(v) for v in got.values())
        return got

    monkeypatch.setattr(dataset, "read_npz", remember)
    r = _layers(tmp_path)
    assert r.exit_code == 2 and "3 of 3 batches failed" in r.stderr, r.output
    assert kept["tracebacks"] == [None, None, None]
    gc.collect()
    assert len(arrays) >= 3 and all(ref() is None for ref in arrays)
