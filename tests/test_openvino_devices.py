"""OpenVINO's virtual devices (AUTO:, HETERO:, MULTI:) compute as the devices they choose: their precision
is those devices' (their compiled models lack INFERENCE_PRECISION_HINT). Oracle: OpenVINO's CPU plugin
called directly. Skipped without the openvino extra."""

from __future__ import annotations

import pytest

from conftest import sample_feeds, sample_path
from onnxprobe import api

pytest.importorskip("openvino")
pytestmark = pytest.mark.openvino


def _cpu_precision(options: dict) -> str:
    import openvino as ov

    core = ov.Core()
    cm = core.compile_model(core.read_model(str(sample_path("cnn"))), "CPU", options)
    return cm.get_property("INFERENCE_PRECISION_HINT").get_type_name()


@pytest.mark.parametrize("device", ["AUTO:CPU", "HETERO:CPU", "MULTI:CPU"])
@pytest.mark.parametrize("options", [{}, {"INFERENCE_PRECISION_HINT": "f32"}])
def test_a_virtual_device_has_the_precision_of_the_device_it_chose(device, options):
    """AUTO:CPU on a CPU computing in bf16: precision null, no note, the f32 criterion (60 dB) and every
    pair failing; the same SQNRs on CPU pass under bf16's 20 dB."""
    want = _cpu_precision(options)
    res = api.layers(sample_path("cnn"), runtime="openvino", config=api.RunConfig(device=device), runtime_options=options)
    assert res.info.precision == want
    feeds = api.InputSpec(arrays=sample_feeds("cnn"))
    on = api.diff(sample_path("cnn"), vs_runtime="openvino", vs_device=device, runtime_options=options, inputs=feeds)
    cpu = api.diff(sample_path("cnn"), vs_runtime="openvino", vs_device="CPU", runtime_options=options, inputs=feeds)
    assert on.b.runner.inference_precision() == want
    assert on.criterion == cpu.criterion
    assert (want in ("bf16", "f16")) == any(f"computes in {want}" in n for n in on.notes), on.notes


def test_openvino_against_itself_run_the_same_way_says_so():
    """--runtime openvino --vs-runtime openvino printed no note, where ort against ort, --vs-device of A's
    device and --vs-opt-level of A's level say B is A run the same way."""
    same = lambda res: any("is A's own runtime" in n for n in res.notes)  # noqa: E731
    assert same(api.diff(sample_path("cnn"), runtime="openvino", vs_runtime="openvino"))
    assert same(api.diff(sample_path("cnn"), runtime="openvino", vs_runtime="openvino", vs_device="cpu",
                         runtime_options={"INFERENCE_PRECISION_HINT": "f32"}))
    assert not same(api.diff(sample_path("cnn"), runtime="openvino", vs_runtime="openvino", vs_device="AUTO:CPU"))
    assert not same(api.diff(sample_path("cnn"), runtime="openvino", vs_runtime="ort"))
    assert not same(api.diff(sample_path("cnn"), vs_runtime="openvino"))


@pytest.mark.parametrize("form", ["AUTO:{}", "HETERO:{},CPU", "MULTI:CPU,{}", "AUTO:{}(1)"])
def test_a_device_a_virtual_device_names_but_openvino_lacks_is_said_before_anything_runs(form):
    """AUTO:GPU without a GPU failed at compile time, on OpenVINO's words about a library it could not load;
    each device a virtual one lists is checked as --device itself is: DeviceUnavailable, as --device cuda
    without CUDA (exit code 1: the machine lacks it, the flag is well formed)."""
    import openvino as ov

    from onnxprobe.errors import DeviceUnavailable

    have = {d.split(".")[0] for d in ov.Core().available_devices}
    absent = next((d for d in ("GPU", "NPU") if d not in have), None)
    if absent is None:
        pytest.skip("OpenVINO sees a GPU and an NPU here")
    device = form.format(absent)
    with pytest.raises(DeviceUnavailable, match=f"{absent}.*OpenVINO has no such device here"):
        api.layers(sample_path("cnn"), runtime="openvino", config=api.RunConfig(device=device))


@pytest.mark.parametrize("device", ["auto:cpu", "hetero:cpu", "Multi:Cpu"])
def test_virtual_device_names_are_case_blind_as_plain_ones_are(device):
    """--device gpu.1 reached OpenVINO as GPU.1 but auto:cpu as itself, refused as 'no such device here'."""
    res = api.layers(sample_path("cnn"), runtime="openvino", config=api.RunConfig(device=device))
    assert res.stats and res.info.device == device.upper()


@pytest.mark.parametrize("device", ["HETERO:", "MULTI:", ":"])
def test_a_virtual_device_listing_no_device_is_a_usage_error(device):
    """HETERO: with no device after the colon failed in OpenVINO's words ('Unexpected node type found in model
    after query_model_update()'), exit code 1."""
    from onnxprobe.errors import UsageError

    with pytest.raises(UsageError, match="device"):
        api.layers(sample_path("cnn"), runtime="openvino", config=api.RunConfig(device=device))


@pytest.mark.parametrize("device", ["CPU.0", "cpu.1"])
def test_an_index_on_the_cpu_is_a_usage_error_naming_the_device(device):
    """OpenVINO's CPU plugin takes no device id: CPU.0 failed at compiling in OpenVINO's words alone ("CPU plugin
    supports only '' as device id"), exit code 1, without naming --device."""
    from onnxprobe.errors import UsageError

    with pytest.raises(UsageError, match="takes no index") as e:
        api.layers(sample_path("cnn"), runtime="openvino", config=api.RunConfig(device=device))
    assert "device" in str(e.value) and device.upper() in str(e.value)
