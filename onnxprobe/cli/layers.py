"""``onnxprobe layers``: every probed tensor with its statistics."""

from __future__ import annotations

import importlib

from onnxprobe.cli.errors import handle_errors
from onnxprobe.errors import writing_as
from onnxprobe.cli.options import (
    AllOpt, ConstOpt, DeviceOpt, InputsDirOpt, InputsFromOpt, InputOpt, InputsOpt, IntRangeOpt, JsonOpt, ModelArg, NameOpt,
    OpOpt, MaxMemoryOpt, OptLevelOpt, NoCacheOpt, ProfileOpt, RangeOpt, RayAddressOpt, RayOpt, RayWorkersOpt, RuntimeOpt,
    RuntimeOptionOpt, SaveOpt, SeedOpt, ShapeOpt, inputs_of, ray_of, selection_of, ColumnsOpt, FormatOpt, HtmlOpt, NetronOpt,
    OverlayOpt, WideOpt, dataset_flag, inputs_in_dataset, one_input_profile, one_input_save, view_of,
)
from onnxprobe.cli.output import check_outputs, emit, notes, require_html, write_html, write_pictures, wrote


# what the light statistics leave out (api.layers(extras=False)): the keys JSON rows name them by
EXTRA_STATS = ("abs_mean", "zero_fraction")


def light_stats(json_, html, dataset: bool, view) -> bool:
    """Whether this ``layers`` run may leave out Σ|x| and the zero count (``api.layers(extras=False)``): only
    where nothing it writes shows abs_mean or zero_fraction. --json (the full dict) and --html (which embeds
    it) show them; a dataset run (--inputs-dir, --inputs-from) keeps full statistics for its moments and
    merge-stats; --columns could only name them if the table had such columns (it has not: refused, but
    checked here should one be added). The table in every --format (csv and json rows hold the table's
    columns and status), --overlay and --netron (max |x|, min, max, mean, std, NaN, Inf, percentiles),
    --save (raw values) and --profile (kernel times) do not."""
    named = {k.strip().lower() for k in view.columns}
    return json_ is None and html is None and not dataset and not named.intersection(EXTRA_STATS)


@handle_errors
def layers(
    model: ModelArg,
    op: OpOpt = None,
    name: NameOpt = None,
    all_: AllOpt = False,
    range_: RangeOpt = None,
    include_constants: ConstOpt = False,
    seed: SeedOpt = 0,
    int_range: IntRangeOpt = "0:100",
    shape: ShapeOpt = None,
    input_: InputOpt = None,
    inputs: InputsOpt = None,
    inputs_dir: InputsDirOpt = None,
    inputs_from: InputsFromOpt = None,
    ray: RayOpt = False,
    ray_address: RayAddressOpt = None,
    ray_workers: RayWorkersOpt = None,
    device: DeviceOpt = "auto",
    runtime: RuntimeOpt = "ort",
    runtime_option: RuntimeOptionOpt = None,
    opt_level: OptLevelOpt = "off",
    json_: JsonOpt = None,
    save: SaveOpt = None,
    max_memory: MaxMemoryOpt = None,
    wide: WideOpt = False,
    columns: ColumnsOpt = None,
    fmt: FormatOpt = "table",
    html: HtmlOpt = None,
    overlay: OverlayOpt = None,
    netron: NetronOpt = None,
    profile: ProfileOpt = False,
    no_cache: NoCacheOpt = False,
) -> None:
    """Show every probed intermediate tensor with its statistics, in topological order.

    By default the outputs of Conv, ConvTranspose, Gemm, MatMul and attention ops, plus the model's
    outputs, are probed; statistics are computed inside the graph, on the device.

    Examples:

        onnxprobe layers model.onnx

        onnxprobe layers model.onnx --all --shape image=1x3x224x224

        onnxprobe layers model.onnx --op Softmax --name '*attn*' --save acts.npz

        # statistics over a dataset; over your own pipeline's inputs; on Ray

        onnxprobe layers model.onnx --inputs-dir calib/ --json shard0.json

        onnxprobe layers model.onnx --inputs-from prep.py:images

        onnxprobe layers model.onnx --inputs-dir calib/ --ray --ray-workers 4

        # the HTML report, and node data for Model Explorer

        onnxprobe layers model.onnx --html report.html --overlay nd.json

        # per-node time, and what probing costs

        onnxprobe layers model.onnx --all --profile --opt-level all

        # as OpenVINO computes them (and what it cannot observe)

        onnxprobe layers model.onnx --runtime openvino
    """
    from onnxprobe import api
    from onnxprobe.api.lean import while_building
    # the report's columns, not its renderer (Rich): a repeated run imports that while its session builds
    from onnxprobe.report import columns as report
    from onnxprobe.report.progress import Progress

    over_dataset = inputs_dir is not None or inputs_from is not None
    absent = {} if over_dataset else {c.key: "comes only with a dataset (--inputs-dir, --inputs-from)"
                                      for c in report.LAYERS_PERCENTILE_COLUMNS}
    absent.update({} if profile else {c.key: "comes only with --profile" for c in report.LAYERS_PROFILE_COLUMNS})
    view = view_of(wide, columns, fmt, report.LAYERS_COLUMNS + report.LAYERS_PERCENTILE_COLUMNS + report.LAYERS_PROFILE_COLUMNS
                   + [report.LAYERS_STATUS], json_, absent)
    selection = selection_of(op, name, all_, range_, include_constants)
    config = api.RunConfig(device=device, opt_level=opt_level, cache=not no_cache)
    spec = inputs_of(seed, int_range, shape, input_, inputs)
    api.protect_inputs(inputs_dir=inputs_dir, inputs_from=inputs_from)  # before any output is checked or written
    check_outputs(model, json_, files={"--save": save, "--html": html, "--overlay": overlay, "--netron": netron})
    require_html(html)
    budget = api.parse_size(max_memory) if max_memory is not None else None  # '' is refused, not the default
    rt = dict(runtime=runtime, runtime_options=api.parse_runtime_options(runtime_option))
    if profile:
        api.check_profile(runtime)
    ray_options = ray_of(ray, ray_address, ray_workers, inputs_dir is not None)
    dataset = dataset_flag(inputs_dir, inputs_from,
                           inputs_in_dataset(input_, inputs, shape, seed, int_range),
                           one_input_profile(profile), one_input_save(save is not None)) is not None
    if dataset:
        where = inputs_dir.name if inputs_dir is not None else inputs_from
        with Progress(f"probing {model.name} over {where}", "batches") as progress:
            res = api.layers_dataset(model, inputs_dir, selection, config, max_memory=budget, progress=progress.update,
                                     inputs_from=inputs_from, ray=ray_options, **rt)
        from onnxprobe.report.layers import dataset_dict

        notes(res.notes)
        data = dataset_dict(res)
    else:
        with (Progress(f"probing {model.name}") as progress, writing_as("--save"),  # its file, as tensors come
              while_building(lambda: importlib.import_module("onnxprobe.report.layers"))):  # the report, as it builds
            res = api.layers(model, selection, config, spec, save_to=save, max_memory=budget, progress=progress.update,
                             extras=not light_stats(json_, html, dataset, view), **rt)
        from onnxprobe.report.layers import layers_dict

        notes(res.notes + res.plan.warnings)
        wrote(save, "the probed tensors")
        data = layers_dict(res)
        if profile:
            from onnxprobe.report.profile import profile_renderables, with_profile

            with Progress(f"profiling {model.name}"):
                m = api.load(model)
                prof = api.profile_layers(m, res, api.feeds(m, spec).values, config)
            data = with_profile(data, prof)
    write_pictures(res, overlay=overlay, netron=netron)
    if html is not None:
        from onnxprobe.report.html import worst_rows

        with Progress("histograms of the worst rows for the HTML report"):
            hists = api.layers_histograms(res, worst_rows("layers", data), spec, config=config, max_memory=budget)
        shown = [f"dataset {inputs_dir or inputs_from}"] if dataset else api.describe_inputs(res.plan.base, spec)
        write_html(html, res, histograms=hists, inputs=shown, profile=prof if profile and not dataset else None,
                   view=view)
    from onnxprobe.report.layers import layers_renderables

    if profile and not dataset:
        emit(data, json_, lambda width: layers_renderables(data, width) + profile_renderables(data, width), view)
    else:
        emit(data, json_, lambda width: layers_renderables(data, width), view)
