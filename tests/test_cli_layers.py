"""`onnxprobe layers` through the CLI: table, JSON, npz, and one clear line for each kind of bad input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

from conftest import ROOT, make_model, nan_model, sample_path, sha256
from onnxprobe.cli.main import app

runner = CliRunner()


def invoke(*args, env=None):
    return runner.invoke(app, [str(a) for a in args], env=env)


def test_table_lists_default_probes_in_topological_order():
    r = invoke("layers", sample_path("cnn"), "--device", "cpu")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    rows = [ln for ln in lines[:-1] if ln.strip()[:1].isdigit()]  # the last line is the footer
    assert [row.split()[1] for row in rows] == ["conv1", "conv2", "fc"]
    assert "3 tensors" in lines[-1] and "device cpu" in lines[-1] and "opt-level off" in lines[-1]


def test_json_has_the_documented_fields(tmp_path):
    out = tmp_path / "r.json"
    r = invoke("layers", sample_path("mlp"), "--all", "--json", out, "--device", "cpu")
    assert r.exit_code == 0, r.output
    d = json.loads(out.read_text())
    assert {"model", "device", "opt_level", "tensors"} <= d.keys()
    assert d["device"] == "cpu" and d["opt_level"] == "off"
    t = d["tensors"][0]
    assert {"name", "node", "op_type", "shape", "dtype", "min", "max", "mean", "std", "abs_mean", "nan", "inf", "zero_fraction"} <= t.keys()
    assert [x["name"] for x in d["tensors"]] == ["fc1_out", "relu1_out", "fc2_out", "tanh2_out", "fc3_matmul", "fc3_out", "y"]


def test_json_to_stdout_is_pure_json_with_null_for_nonfinite(tmp_path):
    p = tmp_path / "nan.onnx"
    onnx.save(nan_model(), p)
    x = tmp_path / "x.npy"
    np.save(x, np.array([-1, -2, -3, 0], np.float32))  # log: nan nan nan -inf -> no finite value
    r = invoke("layers", p, "--all", "--input", f"x={x}", "--json", "-")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    logx = next(t for t in d["tensors"] if t["name"] == "logx")
    assert logx["nan"] == 3 and logx["inf"] == 1 and logx["min"] is None and logx["mean"] is None


def test_save_writes_the_probed_tensors(tmp_path):
    npz = tmp_path / "acts.npz"
    r = invoke("layers", sample_path("cnn"), "--op", "Relu", "--save", npz)
    assert r.exit_code == 0, r.output
    with np.load(npz) as z:
        assert sorted(z.files) == ["relu1_out", "relu2_out"]
        assert z["relu1_out"].shape == (1, 8, 32, 32) and (z["relu1_out"] >= 0).all()


def test_inputs_from_npy_pb_npz_and_values(tmp_path):
    x = np.full((2, 4), 0.5, np.float32)
    np.save(tmp_path / "x.npy", x)
    (tmp_path / "x.pb").write_bytes(onnx.numpy_helper.from_array(x).SerializeToString())
    np.savez(tmp_path / "all.npz", x=x, n=np.array(2, np.int64), cond=np.array(True))
    outs = []
    for extra in (["--input", f"x={tmp_path / 'x.npy'}"], ["--input", f"x={tmp_path / 'x.pb'}"], ["--inputs", tmp_path / "all.npz"]):
        j = tmp_path / "o.json"
        args = ["layers", sample_path("control_flow"), *extra, "--json", j]
        if extra[0] == "--input":
            args += ["--input", "n=2", "--input", "cond=true"]
        r = invoke(*args)
        assert r.exit_code == 0, r.output
        outs.append(json.loads(j.read_text())["tensors"])
    assert outs[0] == outs[1] == outs[2]


def test_dynamic_dimension_defaults_to_one_and_is_reported():
    r = invoke("layers", sample_path("dynamic_batch"), "--json", "-")
    assert r.exit_code == 0
    d = json.loads(r.stdout)
    assert d["tensors"][0]["shape"][0] == 1
    assert any("batch" in n and "set to 1" in n for n in d["notes"])
    r = invoke("layers", sample_path("dynamic_batch"), "--shape", "x=3x3x8x8", "--json", "-")
    assert json.loads(r.stdout)["tensors"][0]["shape"] == [3, 4, 8, 8]


def test_seed_changes_random_inputs_and_is_reproducible():
    def means(seed):
        r = invoke("layers", sample_path("mlp"), "--seed", seed, "--json", "-")
        return [t["mean"] for t in json.loads(r.stdout)["tensors"]]

    assert means(1) == means(1)
    assert means(1) != means(2)


def test_int_range_bounds_integer_inputs(tmp_path):
    m = make_model([helper.make_node("Cast", ["ids"], ["f"], to=TensorProto.FLOAT, name="cast")],
                   [helper.make_tensor_value_info("ids", TensorProto.INT64, [1000])],
                   [helper.make_tensor_value_info("f", TensorProto.FLOAT, [1000])])
    p = tmp_path / "ids.onnx"
    onnx.save(m, p)
    d = json.loads(invoke("layers", p, "--int-range", "5:9", "--json", "-").stdout)
    t = d["tensors"][0]
    assert t["min"] == 5 and t["max"] == 8


# --- bad input: one line on stderr, exit code, no traceback, the model untouched ---

def _bad(tmp_path):
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(sample_path("cnn").read_bytes()[:1000])
    text = tmp_path / "notes.onnx"
    text.write_text("this is not a model\n")
    unknown = tmp_path / "unknown_op.onnx"
    onnx.save(make_model([helper.make_node("FooBar", ["x"], ["y"], name="mystery")],
                         [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])]), unknown)
    wrong_dtype = tmp_path / "x64.npy"
    np.save(wrong_dtype, np.zeros((1, 3, 32, 32), np.float64))
    wrong_shape = tmp_path / "xs.npy"
    np.save(wrong_shape, np.zeros((1, 3, 16), np.float32))
    cnn = sample_path("cnn")
    return [
        (["layers", tmp_path / "missing.onnx"], 1, "no such file"),
        (["layers", text], 1, "not"),
        (["layers", truncated], 1, "truncated"),
        (["layers", tmp_path], 1, "folder"),
        (["layers", cnn, "--input", "nope=1"], 2, "unknown input name 'nope'"),
        (["layers", cnn, "--input", f"image={wrong_dtype}"], 2, "dtype float64"),
        (["layers", cnn, "--input", f"image={wrong_shape}"], 2, "rank 3"),
        (["layers", cnn, "--shape", "image=1x3x33x32"], 2, "fixed to 32"),
        (["layers", cnn, "--shape", "image=axb"], 2, "integers"),
        (["layers", cnn, "--device", "tpu"], 2, "--device"),
        (["layers", cnn, "--opt-level", "max"], 2, "--opt-level"),
        (["layers", cnn, "--int-range", "9"], 2, "LOW:HIGH"),
        (["layers", cnn, "--op", "LSTM"], 2, "no node of the model has this op type"),
        (["layers", cnn, "--save", tmp_path / "nodir" / "a.npz"], 2, "does not exist"),
        # a file where the output's folder should be: refused before the run as a missing folder is, not by the
        # write after it (ENOTDIR: "cannot write it (Not a directory)")
        (["layers", cnn, "--save", wrong_shape / "a.npz"], 2, "is a file, not a folder"),
        (["layers", cnn, "--json", wrong_shape / "sub" / "r.json"], 2, "is a file, not a folder"),
        (["layers", unknown], 1, "unknown op FooBar at node 'mystery'"),
    ]


def test_bad_input_gets_one_line_and_exit_code(tmp_path):
    for args, code, needle in _bad(tmp_path):
        r = invoke(*args)
        assert r.exit_code == code, (args, r.output)
        err = r.stderr.strip().splitlines()
        assert len(err) == 1, (args, r.stderr)
        assert err[0].startswith("onnxprobe: error:") and needle in err[0], (args, err)
        assert "Traceback" not in r.output


def test_debug_env_shows_traceback(tmp_path):
    r = subprocess.run([sys.executable, "-m", "onnxprobe", "layers", str(tmp_path / "missing.onnx")],
                       capture_output=True, text=True, env={**os.environ, "ONNXPROBE_DEBUG": "1"})
    assert r.returncode != 0 and "Traceback" in r.stderr and "ModelError" in r.stderr


def test_model_file_is_never_written(tmp_path):
    import shutil

    for f in ("external_data.onnx", "external_data.onnx.data"):
        shutil.copy(ROOT / "sample_models" / f, tmp_path / f)
    model = tmp_path / "external_data.onnx"
    before = (sha256(model), sha256(tmp_path / "external_data.onnx.data"), model.stat().st_mtime_ns)
    r = invoke("layers", model, "--all", "--save", tmp_path / "a.npz", "--json", tmp_path / "a.json")
    assert r.exit_code == 0, r.output
    assert (sha256(model), sha256(tmp_path / "external_data.onnx.data"), model.stat().st_mtime_ns) == before
    r = invoke("layers", model, "--json", model)
    assert r.exit_code == 2 and "refusing to overwrite" in r.stderr
    assert sha256(model) == before[0]


def test_version_help_and_python_dash_m():
    r = invoke("--version")
    assert r.exit_code == 0 and r.stdout.startswith("onnxprobe ")
    r = invoke("layers", "--help")
    assert r.exit_code == 0 and "Example" in r.stdout and "--device" in r.stdout
    r = invoke("--help")
    assert r.exit_code == 0 and "Examples" in r.stdout and "onnxprobe diff model_int8.onnx model_fp32.onnx" in r.stdout
    p = subprocess.run([sys.executable, "-m", "onnxprobe", "--version"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.startswith("onnxprobe ")


def test_plain_pipe_has_no_colour_codes():
    p = subprocess.run([sys.executable, "-m", "onnxprobe", "layers", str(sample_path("cnn"))], capture_output=True, text=True,
                       env={k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TERM")})
    assert p.returncode == 0, p.stderr
    assert "\x1b[" not in p.stdout and "\x1b[" not in p.stderr


def test_force_color_draws_no_spinner_into_a_log():
    """FORCE_COLOR (set by many CI systems) asks for colour, not for a spinner: with stderr a file, no
    cursor codes and no spinner frames land in it."""
    p = subprocess.run([sys.executable, "-m", "onnxprobe", "layers", str(sample_path("cnn"))], capture_output=True, text=True,
                       env={**os.environ, "FORCE_COLOR": "1"})
    assert p.returncode == 0, p.stderr
    assert "\x1b[?25l" not in p.stderr and "probing" not in p.stderr and "\r" not in p.stderr, repr(p.stderr)


@pytest.mark.parametrize("level", ["off", "basic", "extended", "all"])
def test_opt_level_is_applied_and_reported(level):
    r = invoke("layers", sample_path("transformer_block"), "--opt-level", level, "--json", "-")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["opt_level"] == level


def test_reports_to_a_device_or_fifo_are_written_in_place(tmp_path):
    """--json /dev/null must not replace the device by a file (temp + rename would)."""
    import stat

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    import threading

    got = {}
    reader = threading.Thread(target=lambda: got.setdefault("data", fifo.read_bytes()))
    reader.start()
    r = invoke("layers", sample_path("mlp"), "--json", fifo)
    reader.join(timeout=30)
    assert r.exit_code == 0, r.output
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert json.loads(got["data"])["tensors"]


def test_written_files_are_readable_by_others(tmp_path):
    old = os.umask(0o022)
    try:
        r = invoke("layers", sample_path("mlp"), "--json", tmp_path / "r.json", "--save", tmp_path / "a.npz")
    finally:
        os.umask(old)
    assert r.exit_code == 0, r.output
    assert (tmp_path / "r.json").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "a.npz").stat().st_mode & 0o777 == 0o644


COMMANDS = ["layers", "diff", "grad", "inspect", "mark", "extract", "debug", "merge-stats"]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_at_80_columns_keeps_each_example_on_one_line(command):
    """Every example of a command's help (and each comment line between them) is one line of the help at
    80 columns, so that it can be copied whole; prose is wrapped at the width, not at the docstring's own
    line breaks, and no line is longer than the width."""
    import inspect as inspect_module

    from onnxprobe.cli import main

    doc = inspect_module.cleandoc(getattr(main, command.replace("-", "_")).__doc__)
    examples = [line.strip() for line in doc.splitlines() if line.strip().startswith(("onnxprobe ", "# "))]
    p = subprocess.run([sys.executable, "-m", "onnxprobe", command, "--help"], capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "80"})
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert examples and all(e in [line.strip() for line in lines] for e in examples), \
        [e for e in examples if e not in [line.strip() for line in lines]]
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)


def test_help_prose_is_one_line_a_paragraph_for_the_help_to_wrap():
    from onnxprobe.cli.main import reflowed

    doc = """Title line.

    A paragraph written over
    two lines.

        onnxprobe layers model.onnx
        onnxprobe layers model.onnx --all
    """
    assert reflowed(doc).split("\n\n") == ["Title line.", "A paragraph written over two lines.",
                                             "    onnxprobe layers model.onnx\n    onnxprobe layers model.onnx --all"]


def test_no_help_text_loses_a_bracketed_word_to_rich_markup():
    """Typer renders help through rich, which reads '[word]' as markup and drops it ('onnxprobe[openvino]'
    printed as 'onnxprobe'): every such bracket in a command's or option's help is escaped."""
    import typer

    from onnxprobe.cli.main import app

    def texts(c, path):
        yield path, c.help or ""
        for p in c.params:
            yield f"{path} {p.name}", getattr(p, "help", "") or ""
        for name, sub in getattr(c, "commands", {}).items():
            yield from texts(sub, f"{path} {name}")

    eaten = [(where, m.group(0)) for where, t in texts(typer.main.get_command(app), "onnxprobe")
             for m in re.finditer(r"(?<!\\)\[[a-zA-Z/][^\]]*\]", t)]
    assert not eaten, eaten
    r = invoke("layers", "--help", env={"COLUMNS": "250"})
    assert "onnxprobe[openvino]" in r.stdout


def test_a_tensor_that_ran_empty_reads_empty_and_is_saved(tmp_path):
    """A main-graph tensor of 0 elements ran: the table says 'empty' (not 'not run', which is for an If
    branch not taken) and --save keeps it, as an empty array of its shape."""
    m = make_model([helper.make_node("Identity", ["x"], ["t"], name="a"), helper.make_node("Relu", ["t"], ["y"], name="b")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])])
    onnx.save(m, tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", np.zeros((0, 3), np.float32))
    r = invoke("layers", tmp_path / "m.onnx", "--all", "--input", f"x={tmp_path / 'x.npy'}", "--save", tmp_path / "a.npz",
               env={"COLUMNS": "120"})
    assert r.exit_code == 0, r.output
    rows = [ln for ln in r.stdout.splitlines() if ln.split()[:1] in (["0"], ["1"])]
    assert len(rows) == 2 and all("empty" in ln and "not run" not in ln for ln in rows), r.stdout
    saved = np.load(tmp_path / "a.npz")
    assert sorted(saved.files) == ["t", "y"] and saved["t"].shape == (0, 3)


def test_external_data_that_does_not_fit_its_tensor_names_the_file_and_both_sizes(tmp_path):
    """A truncated data file, a length entry that disagrees with the dims, a NUL in a location: one line each
    naming the file and the sizes (onnxruntime said "Deserialize tensor W failed ... buffer size mismatch",
    and a NUL byte was an internal error); inspect, which reads no big tensor, notes it."""
    def external(folder, data: bytes, **entries):
        folder.mkdir()
        m = make_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
        t = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3], data_location=TensorProto.EXTERNAL)
        for k, v in {"location": "w.bin", "offset": "0", **entries}.items():
            e = t.external_data.add()
            e.key, e.value = k, v
        m.graph.initializer.append(t)
        (folder / "w.bin").write_bytes(data)
        onnx.save(m, folder / "m.onnx")
        return folder / "m.onnx"

    cases = [(external(tmp_path / "a", b"\0" * 10), "external data w.bin holds 10 bytes; tensor 'w' (float [2x3]) needs 24 from offset 0"),
             (external(tmp_path / "b", b"\0" * 24, length="12"), "tensor 'w' (float [2x3]) needs 24 bytes, its external data entry says 12"),
             (external(tmp_path / "c", b"\0" * 24, location="w.bin\x00x"), "holds a NUL byte")]
    for model, needle in cases:
        r = invoke("layers", model)
        assert r.exit_code == 1 and needle in r.stderr and r.stderr.count("\n") == 1, r.output
        # inspect reads no big tensor: it describes the model and notes the data file that is too short
        r = invoke("inspect", model)
        assert needle in r.stderr and r.exit_code == (1 if "NUL" in needle else 0), r.output
    r = invoke("layers", external(tmp_path / "d", np.arange(6, dtype=np.float32).tobytes()), "--all", "--json", "-")
    assert r.exit_code == 0, r.output  # data that fits still loads


def test_a_model_no_runtime_can_load_is_its_own_error_not_an_inputs_one(tmp_path):
    """Opset 99: neither onnxruntime nor onnx's converter knows it. One line that says so (it read "the model
    fails on these inputs", then onnx's C++ assertion); a pipe given as the model is not "empty"."""
    import onnx.defs

    m = make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], opset=onnx.defs.onnx_opset_version() + 70)
    onnx.save(m, tmp_path / "m.onnx")
    r = invoke("layers", tmp_path / "m.onnx")
    assert r.exit_code == 1 and r.stderr.count("\n") == 1, r.output
    assert "is newer than this onnxruntime" in r.stderr and "these inputs" not in r.stderr and "Assertion" not in r.stderr, r.stderr
    fifo = tmp_path / "p.onnx"
    os.mkfifo(fifo)
    r = invoke("layers", fifo)
    assert r.exit_code == 1 and "pipe" in r.stderr and "empty" not in r.stderr, r.output


def test_a_weight_whose_bytes_do_not_fit_its_shape_is_named(tmp_path):
    """raw_data of 12 bytes for a float [2, 3]: onnxruntime's "Deserialize tensor w failed ... buffer size
    mismatch" becomes a line that names the tensor and what is wrong with it."""
    w = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3], raw_data=b"\0" * 12)
    m = make_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [w])
    onnx.save(m, tmp_path / "m.onnx")
    r = invoke("layers", tmp_path / "m.onnx")
    assert r.exit_code == 1 and r.stderr.count("\n") == 1, r.output
    assert "tensor 'w' of the model holds another number of bytes than its shape and type need" in r.stderr, r.stderr


def test_big_endian_inputs_are_taken_in_native_byte_order(tmp_path):
    """np.save of a '>f4' array (from a big-endian machine, or astype('>f4')) was refused as 'dtype >f4, the
    model expects float32': the values are the same, converted exactly, from --input, --inputs, a dataset and
    the API; the run's outputs are those of onnx.reference on the native array."""
    from onnx.reference import ReferenceEvaluator

    from onnxprobe import api

    x = np.random.default_rng(3).standard_normal((1, 3, 32, 32)).astype(np.float32)
    np.save(tmp_path / "be.npy", x.astype(">f4"))
    np.savez(tmp_path / "be.npz", image=x.astype(">f4"))
    (tmp_path / "d").mkdir()
    np.savez(tmp_path / "d" / "b0.npz", image=x.astype(">f4"))
    spec = api.model_inputs(api.load(sample_path("cnn")))[0]
    native = api.check_value(spec, x.astype(">f4"), "test")
    assert native.dtype == np.float32 and native.dtype.isnative and np.array_equal(native, x)
    want = ReferenceEvaluator(str(sample_path("cnn"))).run(None, {"image": x})[0]
    for flags in (["--input", f"image={tmp_path / 'be.npy'}"], ["--inputs", tmp_path / "be.npz"]):
        r = invoke("layers", sample_path("cnn"), *flags, "--save", tmp_path / "acts.npz", "--device", "cpu")
        assert r.exit_code == 0, r.output
        got = np.load(tmp_path / "acts.npz")["logits"]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert invoke("layers", sample_path("cnn"), "--inputs-dir", tmp_path / "d", "--device", "cpu").exit_code == 0


def test_input_splits_name_and_file_as_shape_does(tmp_path):
    """An input named 'a=b': `--shape 'a=b=2x4'` worked but `--input 'a=b=v.npy'` was split at the first '='
    ('unknown input name a'). --input takes the longest prefix that names an input; a file whose path holds
    '=' still goes to the input before it."""
    m = make_model([helper.make_node("Relu", ["a=b"], ["y"]), helper.make_node("Neg", ["x"], ["z"])],
                   [helper.make_tensor_value_info("a=b", TensorProto.FLOAT, [2, 4]),
                    helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4]),
                    helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])])
    onnx.save(m, tmp_path / "eq.onnx")
    v = np.arange(-4, 4, dtype=np.float32).reshape(2, 4)
    np.save(tmp_path / "v.npy", v)
    (tmp_path / "d=1").mkdir()
    np.save(tmp_path / "d=1" / "x.npy", np.array([3.0, -5.0], np.float32))
    r = invoke("layers", tmp_path / "eq.onnx", "--input", f"a=b={tmp_path / 'v.npy'}", "--input", f"x={tmp_path / 'd=1' / 'x.npy'}",
               "--save", tmp_path / "acts.npz", "--device", "cpu")
    assert r.exit_code == 0, r.output
    got = np.load(tmp_path / "acts.npz")
    np.testing.assert_array_equal(got["y"], np.maximum(v, 0))
    np.testing.assert_array_equal(got["z"], [-3.0, 5.0])


def test_a_pb_tensor_of_an_unknown_data_type_says_so(tmp_path):
    """data_type 999 gave 'cannot read as .pb tensor (999)', numpy_helper's bare KeyError."""
    from onnx import numpy_helper

    t = numpy_helper.from_array(np.ones((1, 3, 32, 32), np.float32), "image")
    t.data_type = 999
    (tmp_path / "tds").mkdir()
    for f in (tmp_path / "bad.pb", tmp_path / "tds" / "input_0.pb"):
        f.write_bytes(t.SerializeToString())
    for flags in (["--input", f"image={tmp_path / 'bad.pb'}"], ["--inputs", tmp_path / "tds"]):
        r = invoke("layers", sample_path("cnn"), *flags)
        assert r.exit_code == 2 and "unknown TensorProto data_type 999" in r.stderr, r.output


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("width", ["70", "80"])
def test_help_loses_no_word_at_70_and_80_columns(command, width):
    """Rich crops a word longer than its column with an ellipsis: at 80 columns diff's --grad help read
    '--loss-output/--loss/--target/--lab…' (the flags that set the loss, cut off), at 70 its --vs-reference
    'onnx.reference.ReferenceE…'. Every option name and help word fits from 70 columns up."""
    r = invoke(command, "--help", env={"COLUMNS": width})
    assert r.exit_code == 0, r.output
    assert "…" not in r.stdout, [line for line in r.stdout.splitlines() if "…" in line]
