"""What the Python API accepts: a wrong kind of argument is one UsageError naming it (never an
AttributeError or TypeError from deep inside), one string is one name (never its characters), and every
function that takes a model takes a path, a loaded Model or an onnx.ModelProto."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper
import pytest

from conftest import sample_path
from onnxprobe import api
from onnxprobe.errors import UsageError

CNN, MLP, DYN = str(sample_path("cnn")), str(sample_path("mlp")), str(sample_path("dynamic_batch"))


@pytest.fixture(scope="module")
def cnn():
    return api.load(CNN)


@pytest.fixture(scope="module")
def feed(cnn):
    return api.feeds(cnn).values


# --- one string is one item --------------------------------------------------------------------------------

def test_selection_takes_one_string_as_one_op_or_name():
    assert api.Selection(ops="Conv").ops == ("Conv",)
    assert api.Selection(names=["relu*"]).names == ("relu*",)
    res = api.layers(CNN, api.Selection(ops="Conv"))
    assert [r.op_type for r, _ in res.rows()] == ["Conv", "Conv"]


@pytest.mark.parametrize("bad", [dict(ops=5), dict(names=("a", 3)), dict(range=5)])
def test_selection_refuses_what_is_not_strings(bad):
    with pytest.raises(UsageError, match="Selection"):
        api.Selection(**bad)


@pytest.mark.parametrize("make, field", [
    (lambda v: api.Selection(all=v), "Selection all"),
    (lambda v: api.Selection(include_constants=v), "Selection include_constants"),
    (lambda v: api.RunConfig(cache=v), "RunConfig cache"),
    (lambda v: api.RunConfig(io_binding=v), "RunConfig io_binding"),
    (lambda v: api.InputSpec(arrays_complete=v), "InputSpec arrays_complete"),
], ids=["all", "include_constants", "cache", "io_binding", "arrays_complete"])
def test_switches_of_settings_are_true_or_false(make, field):
    for bad in ("no", 0, 1, None):  # "no" is truthy: it would select everything
        with pytest.raises(UsageError, match=f"{field}=.*expected True or False"):
            make(bad)
    assert getattr(make(np.bool_(True)), field.split()[1]) is True


def test_mark_stats_is_true_or_false(tmp_path):
    with pytest.raises(UsageError, match="mark stats='no': expected True or False"):
        api.mark(CNN, tmp_path / "m.onnx", api.Selection(ops="Conv"), stats="no")
    assert not (tmp_path / "m.onnx").exists()


@pytest.mark.parametrize("call, field", [
    (lambda v: api.layers(CNN, save=v), "layers save"),
    (lambda v: api.plan(CNN, stats=v), "plan stats"),
    (lambda v: api.grad(MLP, save=v), "grad save"),
    (lambda v: api.grad(MLP, check=v), "grad check"),
    (lambda v: api.diff(CNN, CNN, introduced=v), "diff introduced"),
    (lambda v: api.diff(CNN, CNN, fuse=v), "diff fuse"),
    (lambda v: api.diff(CNN, CNN, profile=v), "diff profile"),
    (lambda v: api.diff(CNN, vs_reference=v), "diff vs_reference"),
    (lambda v: api.diff_dataset(CNN, CNN, inputs="nowhere", fuse=v), "diff_dataset fuse"),
    (lambda v: api.Prober(CNN).run(api.feeds(CNN).values, "conv1_out", stats=v), "Prober.run stats"),
    (lambda v: api.select(CNN, api.Selection(names=("nosuch",)), strict=v), "select strict"),
], ids=lambda x: x if isinstance(x, str) else "")
def test_switches_of_functions_are_true_or_false(call, field):
    """A switch given "no" is truthy: it would do what it says not to; 0 or None read as False."""
    for bad in ("no", 0, None):
        with pytest.raises(UsageError, match=f"{field}=.*expected True or False"):
            call(bad)


def test_gradspec_wrt_takes_one_string_as_one_name():
    spec = api.GradSpec(wrt="fc1.weight")
    assert spec.wrt == ("fc1.weight",)
    res = api.grad(MLP, spec=spec)
    assert [r.name for r in res.rows] == ["fc1.weight"]


def test_extract_takes_one_name_or_comma_separated_names(tmp_path):
    one = api.extract(CNN, tmp_path / "a.onnx", "relu1_out", "logits")
    assert [i.name for i in one.inputs] == ["relu1_out"]
    assert [o.name for o in one.outputs] == ["logits"]
    two = api.extract(CNN, tmp_path / "b.onnx", None, "relu1_out,conv2_out")
    assert [o.name for o in two.outputs] == ["relu1_out", "conv2_out"]
    with pytest.raises(UsageError, match="cut_outputs"):
        api.extract(CNN, tmp_path / "c.onnx", None, [5])


def test_merge_stats_takes_one_report(tmp_path):
    from onnxprobe.report.layers import dataset_dict

    arrays = {"image": np.random.default_rng(0).random((1, 3, 32, 32), dtype=np.float32)}
    api.save_npz(arrays, tmp_path / "a.npz")
    data = dataset_dict(api.layers_dataset(CNN, tmp_path / "a.npz"))
    path = tmp_path / "a.json"
    import json

    path.write_text(json.dumps(data))
    assert api.merge_stats(str(path)) == api.merge_stats([str(path)])


def test_raw_takes_one_string_as_one_name(cnn, feed):
    assert list(api.run(cnn, feed, raw="logits").arrays) == ["logits"]
    assert list(api.run(cnn, feed, raw=["logits"]).arrays) == ["logits"]
    assert sorted(api.run(cnn, feed, raw=True).arrays) == ["conv1_out", "conv2_out", "logits"]
    assert api.run(cnn, feed, raw=np.bool_(False)).arrays == {}
    p = api.plan(cnn, raw="logits")
    assert [q.ref.name for q in p.probes if q.raw_output and not q.raw_for_stats] == ["logits"]
    assert list(api.run(p, feed).arrays) == ["logits"]
    assert list(api.run(api.plan(cnn, raw=True), feed, raw="logits").arrays) == ["logits"]


@pytest.mark.parametrize("call, needle", [
    (lambda m, f: api.run(m, f, raw=5), "raw: expected a tensor name or a list of them"),
    (lambda m, f: api.run(m, f, raw="nosuch"), "raw: 'nosuch' is not among the selected tensors"),
    (lambda m, f: api.run(m, f, selection=api.Selection(ops="Conv"), raw="logits"), "raw: 'logits' is not among the selected"),
    (lambda m, f: api.run(api.plan(m), f, raw="logits"), "raw: 'logits' is not among the tensors whose values the plan"),
    (lambda m, f: api.plan(m, raw=["logits", "nosuch"]), "raw: 'nosuch' is not among the selected node outputs"),
], ids=["kind", "unknown", "unselected", "plan_keeps_none", "plan_unknown"])
def test_raw_names_what_is_probed(cnn, feed, call, needle):
    with pytest.raises(UsageError) as e:
        call(cnn, feed)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_prober_takes_one_name(cnn, feed):
    res = api.Prober(cnn).run(feed, "conv1_out")
    assert list(res.stats) == ["conv1_out"]


# --- wrong kinds of arguments: one UsageError -----------------------------------------------------------------

@pytest.mark.parametrize("call, match", [
    (lambda: api.layers(CNN, "Conv"), "selection: expected an api.Selection"),
    (lambda: api.layers(CNN, None, "cpu"), "config: expected an api.RunConfig"),
    (lambda: api.layers(CNN, None, None, [1, 2]), "inputs: expected an api.InputSpec"),
    (lambda: api.grad(MLP, None, None, "sum"), "spec: expected an api.GradSpec"),
    (lambda: api.grad_plan(MLP, "sum"), "spec: expected an api.GradSpec"),
    (lambda: api.load(42), "load: expected the path"),
    (lambda: api.load(None), "load: expected the path"),
    (lambda: api.layers(42), "model: expected a path, an api.Model or an onnx.ModelProto"),
    (lambda: api.save_npz([1, 2], "x.npz"), "save_npz: expected a dict"),
    (lambda: api.where([], 5), "condition: expected a string"),
    (lambda: api.InputSpec(seed="a"), "seed"),
    (lambda: api.InputSpec(seed=True), "seed"),
    (lambda: api.InputSpec(int_range=(0, 1, 2)), "int_range"),
    (lambda: api.input_spec(int_range=5), "InputSpec int_range=5: expected"),  # not a TypeError of tuple()
    (lambda: api.input_spec(int_range=None), "InputSpec int_range=None: expected"),
    (lambda: api.InputSpec(shapes={"x": (-1, 3, 8, 8)}), "non-negative"),
    (lambda: api.InputSpec(shapes={"x": "2x3x8x8"}), "tuple of integers"),
    (lambda: api.InputSpec(shapes=[1, 2]), "dict keyed by input name"),
    (lambda: api.InputSpec(files={"x": object()}), "files"),
    (lambda: api.GradSpec(loss=3), "GradSpec loss"),
    (lambda: api.Tolerance(metric="foo"), "metric foo: choose one of"),
    (lambda: api.Tolerance(atol=-1), "non-negative"),
    (lambda: api.Tolerance(rtol=float("nan")), "finite"),
    (lambda: api.Tolerance(min_sqnr="30"), "finite numbers"),
    (lambda: api.Tolerance(min_cosine=2), "min_cosine=2: a cosine similarity is at most 1"),
    (lambda: api.RayOptions(workers="2"), r"workers \(--ray-workers\) '2': give a whole number"),
    (lambda: api.RayOptions(workers=1.5), r"workers \(--ray-workers\) 1.5: give a whole number"),
    (lambda: api.RayOptions(workers=True), r"workers \(--ray-workers\) True: give a whole number"),
    (lambda: api.RayOptions(address=5), r"address \(--ray-address\) 5: expected auto"),
    (lambda: api.diff_dataset(CNN, CNN, "ds.npz", selection="Conv"), "selection: expected an api.Selection"),
    (lambda: api.diff_dataset(CNN, CNN, "ds.npz", config="cpu"), "config: expected an api.RunConfig"),
    (lambda: api.diff_dataset(CNN, CNN, "ds.npz", tolerance=3), "tolerance: expected an api.Tolerance"),
    (lambda: api.diff_dataset(CNN, CNN, "ds.npz", user_map=[("a", "b")]), "user_map: expected a dict"),
    (lambda: api.grad_dataset(MLP, "ds.npz", spec="sum"), "spec: expected an api.GradSpec"),
    (lambda: api.grad_dataset(MLP, "ds.npz", "fc1*"), "selection: expected an api.Selection"),
    (lambda: api.grad_dataset(MLP, "ds.npz", config="cpu"), "config: expected an api.RunConfig"),
    (lambda: api.Tolerance("cosine", min_cosine=1.5), "min_cosine=1.5: a cosine similarity is at most 1"),
    (lambda: api.Tolerance("sqnr", abs_floor=-1.0), "abs_floor=-1.0: thresholds are finite and non-negative"),
    (lambda: api.Tolerance("sqnr", abs_floor=float("inf")), "abs_floor=inf: thresholds are finite numbers"),
    (lambda: api.Tolerance("sqnr", abs_floor="0.1"), "abs_floor='0.1': thresholds are finite numbers"),
])
def test_wrong_kind_of_argument_is_one_usage_error(call, match, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match=match) as e:
        call()
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("call, needle", [
    (lambda: api.layers(CNN, inputs=api.InputSpec(seed=-1)), "seed (--seed) -1: seeds are non-negative"),
    (lambda: api.layers(CNN, inputs=api.InputSpec(int_range=(5, 5))), "int_range (--int-range) 5:5: LOW must be below"),
    (lambda: api.layers(CNN, config=api.RunConfig(device="gpu")), "device (--device) gpu: choose one of"),
    (lambda: api.layers(CNN, config=api.RunConfig(opt_level="max")), "opt_level (--opt-level) max: choose one of"),
    (lambda: api.layers(CNN, runtime_options={"A": "B"}), "runtime_options (--runtime-option) A: ort takes only tf32"),
    (lambda: api.layers(CNN, config=api.RunConfig(device="cuda"), runtime="openvino"), "device (--device) cuda: an onnxruntime"),
    (lambda: api.GradSpec(loss="foo"), "loss (--loss) foo: choose one of"),
    (lambda: api.GradSpec(loss="mse"), "loss (--loss) mse needs target (--target): the values"),
    (lambda: api.GradSpec(labels=np.zeros(3)), "labels (--labels) goes with loss (--loss) cross-entropy"),
    (lambda: api.GradSpec(loss="mean", output_grad=np.zeros(3)), "output_grad (--output-grad) gives dL/dy directly"),
    (lambda: api.grad(MLP, spec=api.GradSpec(output="nope")), "output (--loss-output) 'nope': not an output"),
    (lambda: api.diff(CNN, CNN, fp32_sensitivity=-1), "fp32_sensitivity (--fp32-sensitivity) -1"),
    (lambda: api.grad_dataset(MLP, "ds.npz", reduce="max"), "reduce (--reduce) max: choose sum or mean"),
], ids=["seed", "int_range", "device", "opt_level", "runtime_options", "openvino_device", "loss", "loss_needs", "goes_with",
        "output_grad", "loss_output", "fp32_sensitivity", "reduce"])
def test_api_messages_name_the_argument_as_well_as_the_flag(call, needle):
    with pytest.raises(UsageError) as e:
        call()
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_tolerance_checks_leave_the_flags_and_files_as_they_were():
    assert api.Tolerance(metric="sqnr", min_sqnr=-5.0).min_sqnr == -5.0  # an SQNR in dB may be negative
    with pytest.raises(UsageError, match="--atol"):
        api.Tolerance.from_flags(atol=-1.0)
    with pytest.raises(ValueError):  # from_dict's callers expect ValueError for a malformed criterion
        api.Tolerance.from_dict({"metric": "allclose", "atol": -1, "rtol": 0, "min_sqnr": 1, "min_cosine": 0})
    with pytest.raises(UsageError, match=r"min_cosine \(--min-cosine\) 2.0: a cosine similarity is at most 1"):
        api.Tolerance.from_flags(min_cosine=2.0)
    assert api.Tolerance.from_flags(min_cosine=1.0).min_cosine == 1.0
    with pytest.raises(ValueError):
        api.Tolerance.from_dict({"metric": "cosine", "atol": 0, "rtol": 0, "min_sqnr": 1, "min_cosine": 2})


def test_a_dict_of_arrays_is_the_inputs_it_gives(feed):
    arr = np.full((1, 3, 32, 32), 0.25, np.float32)
    res = api.layers(CNN, api.Selection(ops="Conv"), None, {"image": arr})
    ref = api.layers(CNN, api.Selection(ops="Conv"), None, api.InputSpec(arrays={"image": arr}))
    assert res.stats["conv1_out"].mean == ref.stats["conv1_out"].mean
    assert api.describe_inputs(CNN, {"image": arr}) == ["image float32 [1x3x32x32] given"]
    g = api.grad(MLP, None, None, None, {"x": np.zeros((4, 16), np.float32)})
    assert np.isfinite(g.loss)


def test_ray_options_take_a_numpy_integer():
    assert api.RayOptions(workers=np.int64(2)).workers == 2 and type(api.RayOptions(workers=np.int64(2)).workers) is int


def test_input_files_take_literal_values():
    spec = api.InputSpec(files={"sr": 16000, "flags": [1, 2], "on": True})
    assert spec.files == {"sr": "16000", "flags": "[1, 2]", "on": "true"}
    spec = api.InputSpec(shapes={"x": [2, 3, 8, 8]})
    assert spec.shapes == {"x": (2, 3, 8, 8)}
    assert api.feeds(DYN, spec).values["x"].shape == (2, 3, 8, 8)


def test_gradspec_takes_a_nested_list_as_an_array():
    """A list has no dtype of its own: its floats take the output's (float32), and the gradients are those
    of the same target given as a float32 array; an array of another dtype is still one clear line."""
    target = [[0.25 * (i - j) for j in range(8)] for i in range(4)]
    spec = api.GradSpec(loss="mse", target=target)
    assert isinstance(spec.target, np.ndarray) and spec.target.shape == (4, 8)
    res = api.grad(MLP, spec=spec)
    want = api.grad(MLP, spec=api.GradSpec(loss="mse", target=np.asarray(target, np.float32)))
    assert res.plan.loss.kind == "mse" and res.loss == want.loss and res.loss > 0
    assert [(r.name, r.stats) for r in res.rows] == [(r.name, r.stats) for r in want.rows] and res.rows
    with pytest.raises(UsageError, match="dtype float64"):
        api.grad(MLP, spec=api.GradSpec(loss="mse", target=np.asarray(target, np.float64)))


def test_input_spec_takes_one_flag_string():
    assert api.input_spec(shape="x=2x3x8x8").shapes == {"x": (2, 3, 8, 8)}


# --- a path, a Model or a ModelProto, everywhere -----------------------------------------------------------

def test_every_function_that_takes_a_model_takes_a_path_a_model_and_a_proto(cnn, tmp_path):
    proto = onnx.load(CNN)
    for m in (CNN, cnn, proto):
        # load too: `model = api.load(model)` in a notebook cell run twice was refused ("got Model ...")
        assert api.load(m).proto.graph.node[0].op_type == "Conv"
        assert len(api.plan(m).probes) == 3
        assert api.feeds(m).values["image"].shape == (1, 3, 32, 32)
        assert api.runner(m) is not None
        assert api.model_info(m)["nodes"] == 9
        assert "conv1_out" in api.index(m).refs
        assert len(api.select(m, api.Selection(all=True))) == 9
        assert [i.name for i in api.model_inputs(m)] == ["image"]
        assert api.describe_inputs(m) == ["image float32 [1x3x32x32] random (seed 0)"]
        assert api.explorer_ids(m) is not None
        assert list(api.run(m, api.feeds(cnn)).stats) == ["conv1_out", "conv2_out", "logits"]
    for m in (MLP, api.load(MLP)):
        assert len(api.grad_plan(m).targets) == 10
        api.export_backward(m, tmp_path / "bw.onnx")
        assert (tmp_path / "bw.onnx").exists()
    for m in (CNN, cnn, proto):  # surgery reads a file: a Model's own, or a temporary copy of an in-memory one
        assert api.inspect(m).summary is not None
        assert api.mark(m, tmp_path / "m.onnx", api.Selection(ops="Conv")).marked


# --- feeds given for a run are checked as layers checks them ---------------------------------------------------

def test_prober_refuses_an_unknown_tensor_name(cnn, feed):
    """The message names the argument that holds the name (a notebook passes names and raw)."""
    with pytest.raises(UsageError, match="^names: no tensor named 'nosuch'"):
        api.Prober(cnn).run(feed, ["nosuch"])
    with pytest.raises(UsageError, match="^raw: no tensor named 'nosuch'"):
        api.Prober(cnn).run(feed, [], raw=["nosuch"], stats=False)
    with pytest.raises(UsageError, match="^raw: no tensor named ''"):
        api.Prober(cnn).run(feed, ["conv1_out"], raw="")


@pytest.mark.parametrize("bad, match", [
    ({"img": np.zeros((1, 3, 32, 32), np.float32)}, "unknown input name 'img'"),
    ({}, "missing input 'image'"),
    ({"image": np.zeros((1, 3, 8, 8), np.float32)}, "dimension 2 must be 32"),
    ({"image": np.zeros((1, 3, 32, 32), np.float64)}, "dtype float64"),
    ("image", "feed: expected a dict"),
])
def test_a_wrong_feed_is_onnxprobes_own_message(cnn, feed, bad, match):
    p = api.plan(cnn)
    extra = {**feed, "extra": np.zeros(1, np.float32)}
    for call in (lambda f: api.Prober(cnn).run(f, ["conv1_out"]), lambda f: api.run(p, f), lambda f: api.run(cnn, f)):
        with pytest.raises(UsageError, match=match):
            call(bad)
        with pytest.raises(UsageError, match="unknown input name 'extra'"):
            call(extra)


def test_where_takes_a_result(cnn):
    res = api.layers(cnn, api.Selection(all=True))
    assert api.where(res, "absmax>0")[0].name == api.where(res.rows(), "absmax>0")[0].name
    assert api.where(res, "nan") is None


def test_extract_docstring_names_its_parameters():
    doc = api.extract.__doc__
    assert "``cut_inputs``" in doc and "``cut_outputs``" in doc and "``outputs``" not in doc.replace("``cut_outputs``", "")


@pytest.mark.parametrize("call, needle", [
    (lambda: api.layers(CNN, save_to=123), "output path: expected a file path"),
    (lambda: api.mark(CNN, None), "output path: expected a file path"),
    (lambda: api.extract(CNN, None, cut_outputs=["logits"]), "output path: expected a file path"),
    (lambda: api.save_npz({"a": np.zeros(2)}, 5), "output path: expected a file path"),
    (lambda: api.save_npz({1: np.zeros(2)}, "x.npz"), "save_npz: expected a dict of arrays by tensor name"),
    (lambda: api.diff(CNN, vs_npz=123), "vs_npz: expected a .npz file, a test data set folder or a dict of arrays"),
    (lambda: api.merge_stats(5), "merge_stats: expected report paths"),
    (lambda: api.merge_stats([5]), "reports[0]: expected a report path"),
    (lambda: api.diff(CNN, CNN, user_map=[("a", "b")]), "user_map: expected a dict"),
    (lambda: api.diff(CNN, CNN, fp32_sensitivity="2"), "fp32_sensitivity: expected"),
    (lambda: api.layers(CNN, runtime="reference", runtime_options=["A=B"]), "runtime_options: expected a dict of strings"),
], ids=["save_to", "mark_out", "extract_out", "save_npz_path", "save_npz_keys", "vs_npz", "merge_int", "merge_list_int",
        "user_map", "fp32_sensitivity", "runtime_options"])
def test_paths_and_settings_of_the_wrong_kind_are_one_usage_error(call, needle, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as e:
        call()
    assert needle in str(e.value) and "\n" not in str(e.value)


# --- a memory budget is a positive number of bytes --------------------------------------------------------------

def _budget_calls(cnn, feed, tmp_path):
    res = api.layers(cnn, api.Selection(ops="Conv"))
    npz = tmp_path / "a.npz"
    api.save_npz(feed, npz)
    return {
        "layers": lambda m: api.layers(cnn, save_to=tmp_path / "t.npz", max_memory=m),
        "run": lambda m: api.run(cnn, feed, max_memory=m),
        "raw_chunks": lambda m: list(api.raw_chunks(cnn, res, feed, ["conv1_out"], max_memory=m)),
        "save_tensors": lambda m: api.save_tensors(cnn, res, feed, tmp_path / "s.npz", max_memory=m),
        "layers_dataset": lambda m: api.layers_dataset(cnn, npz, max_memory=m),
        "layers_histograms": lambda m: api.layers_histograms(res, ["conv1_out"], max_memory=m),
        "diff": lambda m: api.diff(cnn, CNN, max_memory=m),
        "diff_histograms": lambda m: api.diff_histograms(api.diff(cnn, CNN), ["conv1_out"], max_memory=m),
        "diff_grad": lambda m: api.diff_grad(MLP, MLP, max_memory=m),
        "diff_dataset": lambda m: api.diff_dataset(cnn, CNN, npz, max_memory=m),
        "diff_torch": lambda m: api.diff_torch(cnn, None, max_memory=m),
    }


@pytest.mark.parametrize("bad", ["2G", 0, -5, 1.5, True, [1]])
def test_max_memory_is_a_positive_int_of_bytes(bad, cnn, feed, tmp_path):
    for name, call in _budget_calls(cnn, feed, tmp_path).items():
        with pytest.raises(UsageError, match="max_memory: expected a positive number of bytes") as e:
            call(bad)
        assert "\n" not in str(e.value), name


def test_max_memory_takes_bytes_as_an_int(cnn, feed, tmp_path):
    res = api.layers(cnn, save_to=tmp_path / "t.npz", max_memory=np.int64(1))  # one tensor per run
    assert res.stats
    assert len(list(api.raw_chunks(cnn, res, feed, ["conv1_out", "conv2_out"], max_memory=1))) == 2
    assert api.diff_histograms(api.diff(cnn, CNN), ["conv1_out"], max_memory=2**20)


# --- the helpers around results: a wrong argument is one UsageError naming it --------------------------------

@pytest.fixture(scope="module")
def results(cnn):
    return {"layers": api.layers(cnn, api.Selection(all=True)), "diff": api.diff(cnn, cnn), "grad": api.grad(cnn)}


@pytest.mark.parametrize("call, needle", [
    (lambda m, r: api.diff_histograms(None, []), "result: expected the result of api.diff"),
    (lambda m, r: api.layers_histograms(r["diff"], ["x"]), "result: expected the result of api.layers"),
    (lambda m, r: api.layers_histograms(r["layers"], ["conv1_out"], bins=0), "bins: expected a positive"),
    (lambda m, r: api.layers_histograms(r["layers"], ["nope"]), "'nope' is not a tensor this result probed"),
    (lambda m, r: api.diff_histograms(r["diff"], ["nope"]), "'nope' is not the A tensor of a pair"),
    (lambda m, r: api.grad_histograms(r["grad"], ["conv1.weight"]), r"run api.grad\(..., save=True\)"),
    (lambda m, r: api.histogram_of(np.array(["a"])), "values: expected an array of numbers"),
    (lambda m, r: api.where(None, "nan"), "rows: expected"),
    (lambda m, r: api.parse_condition(5), "condition: expected a string"),
    (lambda m, r: api.input_spec(arrays=[1]), "arrays: expected a dict"),
    (lambda m, r: api.read_map(None), "expected the path of a JSON file"),
    (lambda m, r: api.check_value(None, np.zeros(3), "x"), "spec: expected a ModelInput"),
    (lambda m, r: api.attribute_text(None), "attribute: expected an onnx.AttributeProto"),
    (lambda m, r: api.interruptibly(None), "fn: expected a function"),
    (lambda m, r: api.save_tensors(m, None, r["layers"].feed, "never.npz"), "result: expected the result of api.layers"),
    (lambda m, r: api.save_tensors(m, r["layers"], None, "never.npz"), "feed: expected a dict"),
    (lambda m, r: api.profile_layers(m, r["layers"], None), "feed: expected a dict"),
    (lambda m, r: list(api.raw_chunks(m, r["layers"], r["layers"].feed, ["nope"])), "'nope' is not a tensor this result probed"),
    (lambda m, r: api.select(m, ops=("Conv",)), r"no argument 'ops'.*api.Selection\(ops=...\)"),
    (lambda m, r: api.grad_check(m, None, {}, r["grad"]), "gp: expected the GradPlan"),
    (lambda m, r: api.diff(m, vs_npz={"y": [1, 2]}), "vs_npz: expected tensor name -> numpy array, got 'y' -> list"),
    (lambda m, r: api.grad_plan(m, unsupported="x"), "unsupported: expected 'raise' or 'skip'"),
])
def test_helpers_name_the_wrong_argument(cnn, results, call, needle, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match=needle):
        call(cnn, results)
    assert not list(tmp_path.iterdir())  # nothing written on the way


def test_grad_histograms_take_forward_or_gradient_names(cnn):
    g = api.grad(cnn, save=True)
    name = next(iter(g.arrays))
    for n in (name, f"{name}_grad"):
        h = api.grad_histograms(g, [n])
        assert list(h) == [name] and sum(h[name]["values"]["counts"]) == g.arrays[name].size


def test_flag_parsers_take_one_string_or_strings_and_refuse_the_rest():
    """parse_shape_overrides / parse_runtime_options / parse_input_files iterated a bare string character by
    character and failed deep inside on a list of numbers: one string is one flag, anything else is one
    UsageError naming the flag."""
    assert api.parse_shape_overrides("x=2x3") == {"x": (2, 3)} and api.parse_runtime_options("a=b") == {"a": "b"}
    for call, flag in ((lambda: api.parse_shape_overrides([5]), "--shape"), (lambda: api.parse_runtime_options({"a": 1}), "--runtime-option")):
        with pytest.raises(UsageError, match=flag):
            call()


def test_the_api_leaves_onnxruntimes_logging_to_the_user(tmp_path):
    """onnxprobe quiets its own sessions (their options), not onnxruntime's process-wide logger: after
    api.layers, the user's own session still warns (it set the default severity to 4 for the process, so a
    notebook's sessions lost every warning). Oracle: onnxruntime's own warning on an unused initializer."""
    import subprocess
    import sys

    from onnx import numpy_helper

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
                          [numpy_helper.from_array(np.ones(2, np.float32), "unused")])
    p = tmp_path / "unused.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), p)
    code = ("import onnxruntime as ort, onnxprobe.api as api, sys\n"
            f"api.layers({str(p)!r}, api.Selection(all=True), api.RunConfig(device='cpu', cache=False))\n"
            "print('probed', file=sys.stderr, flush=True)\n"
            f"ort.InferenceSession({str(p)!r}, providers=['CPUExecutionProvider'])\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    before, after = r.stderr.split("probed", 1)
    assert "onnxruntime" not in before, before  # onnxprobe's own sessions stay quiet
    assert "unused" in after, after  # the user's session still says what it removed


def test_random_float_inputs_are_drawn_in_chunks_with_the_same_values():
    """A large random float input is drawn chunk by chunk (a float64 draw of the whole took twice the
    input's float32 size on top of it): the values are those of one draw. Oracle: numpy's own draw."""
    from onnxprobe.runtime.feeds import RANDOM_CHUNK, random_array

    shape = (3, RANDOM_CHUNK // 2 + 7)
    for dtype in ("float32", "float16", "float64"):
        got = random_array(shape, np.dtype(dtype), np.random.default_rng(5), (0, 100))
        want = np.random.default_rng(5).random(shape).astype(dtype)
        assert got.dtype == np.dtype(dtype) and np.array_equal(got, want)
    assert random_array((), np.dtype("float32"), np.random.default_rng(5), (0, 100)).shape == ()


def test_surgery_takes_an_in_memory_model(tmp_path):
    """inspect, mark and extract take an onnx.ModelProto, as the API's other functions do (they refused it:
    "save the in-memory model first"); the proto is not changed, and the results equal those of its file."""
    proto = onnx.load(str(sample_path("cnn")))
    before = proto.SerializeToString()
    assert len(api.inspect(proto).nodes) == len(api.inspect(sample_path("cnn")).nodes) == len(proto.graph.node)
    api.mark(proto, tmp_path / "m1.onnx", api.Selection(all=True))
    api.mark(sample_path("cnn"), tmp_path / "m2.onnx", api.Selection(all=True))
    outs = (lambda p: [o.name for o in onnx.load(str(p)).graph.output])
    assert outs(tmp_path / "m1.onnx") == outs(tmp_path / "m2.onnx")
    r = api.extract(proto, tmp_path / "cut.onnx", None, ["relu1_out"])
    assert [o.name for o in onnx.load(str(tmp_path / "cut.onnx")).graph.output] == ["relu1_out"], r
    assert proto.SerializeToString() == before


def test_the_errors_are_reachable_from_the_api():
    """A notebook catches onnxprobe's errors as api.UsageError and the rest (they lived in onnxprobe.errors
    alone, which the README did not name)."""
    from onnxprobe import errors

    assert api.UsageError is errors.UsageError and api.ModelError is errors.ModelError
    assert issubclass(api.ExecutionError, api.OnnxProbeError)
    with pytest.raises(api.ModelError, match="no such file"):
        api.layers("/nonexistent/model.onnx")


def test_a_model_proto_without_its_external_weights_is_refused_in_one_line(tmp_path):
    """onnx.load(..., load_external_data=False) gives a proto whose weights are in a file it does not
    locate: onnxruntime's message named a path under the working directory; one line says what to do."""
    from onnx import numpy_helper

    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="a")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [100])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [100])],
                          [numpy_helper.from_array(np.ones(100, np.float32), "w")])
    p = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p, save_as_external_data=True,
              size_threshold=0, location="m.data")
    lazy = onnx.load(str(p), load_external_data=False)
    for call in (lambda: api.layers(lazy), lambda: api.inspect(lazy), lambda: api.diff(lazy, lazy)):
        with pytest.raises(UsageError, match="weights were not loaded"):
            call()
    assert api.layers(onnx.load(str(p))).stats


def test_a_model_proto_whose_constant_or_body_weights_stayed_external_is_refused(tmp_path, monkeypatch):
    """The same for weights outside the main graph's initializers (a Constant node's value, an If branch's
    initializer): only those were checked, and onnxruntime, handed the proto as bytes, read the others
    relative to the working directory, silently taking a file of the same name there for the weights (QA)."""
    def external(name):
        t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=[4], data_location=TensorProto.EXTERNAL)
        for k, v in (("location", "w.bin"), ("offset", "0"), ("length", "16")):
            e = t.external_data.add()
            e.key, e.value = k, v
        return t

    vi = helper.make_tensor_value_info
    io_ = ([vi("x", TensorProto.FLOAT, [4])], [vi("y", TensorProto.FLOAT, [4])])
    const = helper.make_graph([helper.make_node("Constant", [], ["w"], name="c", value=external("cv")),
                               helper.make_node("Add", ["x", "w"], ["y"], name="a")], "g", *io_)
    branch = helper.make_graph([helper.make_node("Add", ["x", "w"], ["yb"], name="ab")], "b", [],
                               [vi("yb", TensorProto.FLOAT, [4])], [external("w")])
    body = helper.make_graph([helper.make_node("If", ["cond"], ["y"], name="if", then_branch=branch, else_branch=branch)], "g",
                             [*io_[0], vi("cond", TensorProto.BOOL, [])], io_[1])
    monkeypatch.chdir(tmp_path)
    (tmp_path / "w.bin").write_bytes(np.full(4, 100, np.float32).tobytes())  # not the model's: where the call runs
    for g in (const, body):
        lazy = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        with pytest.raises(UsageError, match="weights were not loaded"):
            api.layers(lazy)


def test_an_inputs_description_spaces_symbolic_dims_out():
    from conftest import sample_path

    with pytest.raises(UsageError, match=r"expects x float32 \[batch x 3 x 8 x 8\]"):
        api.layers(str(sample_path("dynamic_batch")), inputs=api.InputSpec(arrays={"x": np.zeros((2, 2), np.float32)}))


def test_a_model_of_no_nodes_is_said_so_from_a_file_and_from_python(tmp_path):
    """A graph of no node and no output is a model (IR version, a graph) with nothing to probe: from a file it
    was 'not an ONNX model (no graph or IR version in the file)', from Python api.layers(onnx.ModelProto())
    returned an empty result, and api.inspect named a temporary copy's path."""
    from typer.testing import CliRunner

    from onnxprobe.cli.main import app
    from onnxprobe.errors import ModelError

    onnx.save(helper.make_model(helper.make_graph([], "g", [], [])), tmp_path / "nonodes.onnx")
    for command in ("layers", "inspect", "grad"):
        r = CliRunner().invoke(app, [command, str(tmp_path / "nonodes.onnx")])
        assert r.exit_code == 1 and "nonodes.onnx: the model has no nodes" in r.stderr, r.output
    for call in (api.layers, api.inspect, api.grad):
        for m in (onnx.ModelProto(), onnx.load(tmp_path / "nonodes.onnx")):
            with pytest.raises(ModelError, match=r"^<in-memory model>: the model has no nodes"):
                call(m)


def test_an_input_spec_of_arrays_is_not_blamed_on_a_flag(cnn):
    """InputSpec(arrays=...) from Python named '--inputs', a flag the caller never gave."""
    with pytest.raises(UsageError) as e:
        api.layers(cnn, inputs=api.InputSpec(arrays={"image": np.zeros((1, 3, 32, 32), np.int64)}))
    assert "--inputs" not in str(e.value) and "the arrays given" in str(e.value), e.value


def test_the_modules_the_readme_lists_are_attributes_of_the_api():
    """README's table names the API's modules (api.core, api.surgery, api.explore...): each is reachable
    as an attribute after `import onnxprobe.api as api`, not only after importing it by its full name
    (api.surgery raised AttributeError: QA); api.diff and api.grad_plan stay the functions."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    table = readme[readme.index("| module | functions |"):]
    table = table[:table.index("\n\n")]
    names = sorted({m for m in re.findall(r"`api\.(\w+)`", table)})
    assert {"core", "surgery", "explore", "diff"} <= set(names), names
    code = ("import types, onnxprobe.api as api\n"
            f"for n in {names!r}:\n"
            "    v = getattr(api, n)\n"
            "    assert isinstance(v, types.ModuleType) or callable(v), (n, v)\n"
            "assert callable(api.diff) and api.surgery.mark is api.mark\n"
            "try:\n    api.no_such_thing\nexcept AttributeError:\n    pass\nelse:\n    raise SystemExit('no AttributeError')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)  # a fresh import of the API
    assert r.returncode == 0, r.stderr


def test_load_takes_a_model_proto_as_every_other_function_does(tmp_path):
    """api.load(proto) said 'expected the path of an .onnx file' where diff, layers... take a ModelProto."""
    proto = onnx.load(str(sample_path("cnn")))
    before = proto.SerializeToString()
    m = api.load(proto)
    assert [n.name for n in m.proto.graph.node] == [n.name for n in proto.graph.node]
    assert proto.SerializeToString() == before  # copied, never annotated in place
    with pytest.raises(UsageError, match="path of an .onnx file, an onnx.ModelProto or an api.Model"):
        api.load(b"not a model")


@pytest.mark.parametrize("call, want", [
    (lambda p: api.diff(p, vs_npz=123), "^vs_npz: expected a .npz file, a test data set folder or a dict of arrays, got int 123"),
    (lambda p: api.merge_stats([1, 2]), r"^reports\[0\]: expected a report path, a dict or a dataset result, got int 1"),
])
def test_a_wrong_argument_is_named_as_the_api_names_it(call, want):
    """They said '.npz file or test data set folder' and 'report file', the command line's words."""
    with pytest.raises(UsageError, match=want):
        call(sample_path("mlp"))
