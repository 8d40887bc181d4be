"""``onnxprobe diff``: compare two models (or one model two ways) layer by layer."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Annotated, Optional

import typer

from onnxprobe.cli.errors import handle_errors
from onnxprobe.cli.options import (
    FILE,
    ConstOpt, DeviceOpt, GradOutputOpt, InputOpt, InputsDirOpt, InputsFromOpt, InputsOpt, IntRangeOpt, JsonOpt,
    LabelsOpt, LossOpt, MaxMemoryOpt, ModelArg, NameOpt, OpOpt, OutputGradOpt, NoCacheOpt, ProfileOpt, RangeOpt,
    RayAddressOpt, RayOpt, RayWorkersOpt, RuntimeOpt, RuntimeOptionOpt, SeedOpt, ShapeOpt, TargetOpt, WrtOpt, grad_spec_of,
    inputs_of, ray_of, selection_of, ColumnsOpt, FormatOpt, HtmlOpt, NetronOpt, OverlayOpt, WideOpt, dataset_flag,
    inputs_in_dataset, one_input_profile, view_of,
)
from onnxprobe.cli.output import check_outputs, emit, exit_for, notes, require_html, write_html, write_pictures

Cmp = "Comparison"
# layers' --all reaches inside If/Loop/Scan bodies; diff pairs main-graph and If-branch tensors (a Loop or Scan
# body tensor has a value per iteration), so its help says so, and a note lists the body tensors left out
DiffAllOpt = Annotated[bool, typer.Option("--all", help="Compare every node output of the main graph and of If branches "
                                          "(tensors inside Loop/Scan bodies are not compared; a note lists them).",
                                          rich_help_panel="Selection")]

# what a light diff leaves out (api.diff(extras=False); compare.criteria.EXTRA_METRICS): the keys rows name them by
EXTRA_METRICS = ("max_rel", "mean_abs")


def light_metrics(json_, html, netron, view) -> bool:
    """Whether this one-input ``diff`` may leave out the max relative error and mean |a-b|
    (``api.diff(extras=False)``): only where nothing it writes shows them. --json (the full dict), --html
    (which embeds it) and --netron (every metric of a row) show them, as does --columns naming one; the
    table in every --format (csv and json rows hold the table's columns), --overlay (SQNR) and --profile do
    not. A criterion that judges by one keeps them (``compare.diff.prepare``); a dataset diff keeps them
    all (its pooled sums)."""
    named = {k.strip().lower() for k in view.columns}
    return json_ is None and html is None and netron is None and not named.intersection(EXTRA_METRICS)


@handle_errors
def diff(
    model: ModelArg,
    reference: Annotated[Optional[Path], typer.Argument(help="Reference model B (e.g. the fp32 original).", show_default=False, click_type=FILE)] = None,
    vs_device: Annotated[Optional[str], typer.Option("--vs-device", help="Compare MODEL with itself on this device (cpu|cuda; with --vs-runtime: that runtime's device).", rich_help_panel=Cmp)] = None,
    vs_opt_level: Annotated[Optional[str], typer.Option("--vs-opt-level", help="Compare with itself at this optimisation level.", rich_help_panel=Cmp)] = None,
    vs_reference: Annotated[bool, typer.Option("--vs-reference", help="Compare with onnx.reference's ReferenceEvaluator (--vs-runtime reference).", rich_help_panel=Cmp)] = False,
    vs_runtime: Annotated[Optional[str], typer.Option("--vs-runtime", help="Compare MODEL with itself on another runtime (B): ort | openvino | tensorrt | reference; A runs on --runtime.", rich_help_panel=Cmp)] = None,
    vs_npz: Annotated[Optional[Path], typer.Option("--vs-npz", help="Compare with activations saved elsewhere (.npz keyed by tensor name), or with the expected outputs of an ONNX test data set folder (output_N.pb).", rich_help_panel=Cmp, click_type=FILE)] = None,
    vs_torch: Annotated[Optional[str], typer.Option("--vs-torch", metavar="FILE.py:FUNC", help="Compare MODEL with the PyTorch module it was exported from: FUNC() returns the nn.Module or (module, example_args). Modules pair with their ONNX tensors by the exporter's scopes; with --grad, gradients against torch autograd. Needs the torch extra.", rich_help_panel=Cmp)] = None,
    map_: Annotated[Optional[Path], typer.Option("--map", help="JSON file {tensor of A: tensor of B}; overrides matching.", rich_help_panel=Cmp, click_type=FILE)] = None,
    atol: Annotated[Optional[list[str]], typer.Option("--atol", help="Absolute tolerance (allclose, max_abs, mean_abs, rmse), or NAME:VALUE for one tensor (repeatable). The default depends on the comparison (1e-4; 1e-5 with --vs-torch) and the report prints it; a NAME:VALUE rule takes the rest from it. With max_abs, mean_abs or rmse and no --rtol, the threshold is atol alone.", rich_help_panel=Cmp)] = None,
    rtol: Annotated[Optional[list[str]], typer.Option("--rtol", help="Relative tolerance, or NAME:VALUE (repeatable). The default depends on the comparison (1e-3; 1e-4 with --vs-torch) and the report prints it.", rich_help_panel=Cmp)] = None,
    metric: Annotated[Optional[str], typer.Option("--metric", help="Pass/fail criterion: allclose | max_abs | mean_abs | rmse | max_rel | cosine | sqnr. Default: chosen by what is compared (and printed).", rich_help_panel=Cmp)] = None,
    min_sqnr: Annotated[Optional[float], typer.Option("--min-sqnr", help="The least SQNR in dB that passes (implies --metric sqnr). Default 30 under --metric sqnr (where the comparison's own default judges by SQNR, its threshold); with no criterion flag, the comparison has its own default (10 dB for a quantized model against a float one...), printed in the report.", rich_help_panel=Cmp)] = None,
    min_cosine: Annotated[Optional[float], typer.Option("--min-cosine", help="The least cosine similarity that passes (implies --metric cosine). Default 0.999.", rich_help_panel=Cmp)] = None,
    fp32_sensitivity: Annotated[int, typer.Option("--fp32-sensitivity", help="For the N QDQ layers with the lowest intro SQNR, rerun A with that one layer in fp32 and report the output SQNR it gives.", rich_help_panel=Cmp)] = 0,
    sort: Annotated[str, typer.Option("--sort", help="Row order: topo | introduced | accumulated (worst first).", rich_help_panel=Cmp)] = "topo",
    grad: Annotated[bool, typer.Option("--grad", help="Compare the gradients of A and B (same loss, same inputs) instead of their activations; the flags of `grad` (--loss-output, --loss, --target, --labels, --output-grad, --wrt) set the loss.", rich_help_panel=Cmp)] = False,
    output: GradOutputOpt = None,
    loss: LossOpt = "sum",
    target: TargetOpt = None,
    labels: LabelsOpt = None,
    output_grad: OutputGradOpt = None,
    wrt: WrtOpt = None,
    op: OpOpt = None,
    name: NameOpt = None,
    all_: DiffAllOpt = False,
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
    opt_level: Annotated[Optional[str], typer.Option("--opt-level", help="onnxruntime graph optimisation: off | basic | extended | layout | all (default: off; all with --grad).", rich_help_panel="Execution")] = None,
    profile: ProfileOpt = False,
    no_cache: NoCacheOpt = False,
    separate_runs: Annotated[bool, typer.Option("--separate-runs", help="Run A and B in separate sessions and measure the tensors on the host in float64, instead of both models in one graph with the metrics computed there (the default for two models on onnxruntime with the same settings).", rich_help_panel="Execution")] = False,
    json_: JsonOpt = None,
    max_memory: MaxMemoryOpt = None,
    wide: WideOpt = False,
    columns: ColumnsOpt = None,
    fmt: FormatOpt = "table",
    html: HtmlOpt = None,
    overlay: OverlayOpt = None,
    netron: NetronOpt = None,
) -> None:
    """Compare MODEL (A) with a reference (B) layer by layer and show where the error starts.

    Tensors are paired by name, through QDQ and QOperator quantization, by node name, or by structural
    alignment; each pair gets max/mean abs error, max rel error, RMSE, cosine, SQNR, and the error the
    layer introduces on its own (B's node run on A's inputs). Exit code 1 when a model output fails.

    With --grad, both models get the same loss and inputs and their gradients are compared instead:
    weight gradients (keyed by the weight, through quantization) and activation gradients (the tensor's
    name with _grad appended); exit code 1 when a weight gradient fails.

    Examples:

        onnxprobe diff model_int8.onnx model_fp32.onnx --sort introduced

        # the int8 kernels as deployed

        onnxprobe diff model_int8.onnx model_fp32.onnx --opt-level extended

        onnxprobe diff model.onnx --vs-reference --all

        # onnxruntime (A) against OpenVINO (B)

        onnxprobe diff model.onnx --vs-runtime openvino --all

        onnxprobe diff model.onnx --vs-npz torch_acts.npz --metric cosine

        # the export against the nn.Module it came from

        onnxprobe diff model.onnx --vs-torch make_model.py:build

        onnxprobe diff --grad a.onnx b.onnx --loss cross-entropy --labels y.npy

        # metrics pooled over a dataset, in one process or on Ray

        onnxprobe diff model_int8.onnx model_fp32.onnx --inputs-dir calib/

        onnxprobe diff a.onnx b.onnx --inputs-dir calib/ --ray --ray-workers 4
    """
    from onnxprobe import api
    from onnxprobe.errors import UsageError
    # the report's columns, not its renderer (Rich): a repeated diff imports that while its session builds (api.diff_lean)
    from onnxprobe.report.columns import DIFF_COLUMNS as COLUMNS
    from onnxprobe.report.columns import DIFF_JUDGED_COLUMNS as JUDGED_COLUMNS
    from onnxprobe.report.columns import DIFF_PROBLEM as PROBLEM
    from onnxprobe.report.columns import DIFF_PROFILE_COLUMNS as PROFILE_COLUMNS
    from onnxprobe.report.columns import UNJUDGED
    from onnxprobe.report.io import in_cli_words
    from onnxprobe.report.progress import Progress
    from onnxprobe.text import as_word

    absent = {} if profile else {c.key: "comes only with --profile" for c in PROFILE_COLUMNS}
    if grad:  # gradients have no introduced error
        absent["introduced_sqnr_db"] = "is not one of gradients (--grad has no introduced error)"
    view = view_of(wide, columns, fmt, COLUMNS + list(JUDGED_COLUMNS.values()) + PROFILE_COLUMNS + [PROBLEM, UNJUDGED], json_, absent)
    if sort not in api.SORTS:
        raise UsageError(f"--sort {as_word(sort)}: choose {', '.join(api.SORTS)}")
    if grad and sort == "introduced":
        raise UsageError("--sort introduced: gradients have no introduced error (--grad); sort by topo or accumulated")
    base, per, (per_atol, per_rtol) = api.tolerances_from_flags(metric, atol, rtol, min_sqnr, min_cosine)
    if grad:  # one tensor by its forward and its gradient name: the later would silently win
        from onnxprobe.api.diff_grad import one_tensor_once

        for flag, given in (("--atol", per_atol), ("--rtol", per_rtol), ("--atol/--rtol", set(per_atol) | set(per_rtol))):
            one_tensor_once(sorted(given), flag)
    user_map = None
    if map_ is not None:
        user_map = api.read_map(map_)
    # before any output is checked or written: model B, the files compared with, the dataset
    api.protect_inputs(reference, what="an input model")
    api.protect_inputs(vs_npz, inputs_dir=inputs_dir, inputs_from=inputs_from, py_specs=[vs_torch])
    check_outputs(model, json_, files={"--html": html, "--overlay": overlay, "--netron": netron})
    require_html(html)
    selection = selection_of(op, name, all_, range_, include_constants)
    spec_in = inputs_of(seed, int_range, shape, input_, inputs)
    loss_flags = [f for f, v in (("--loss-output", output), ("--target", target), ("--labels", labels),
                                 ("--output-grad", output_grad), ("--wrt", wrt)) if v] + (["--loss"] if loss != "sum" else [])
    if not grad and loss_flags:
        raise UsageError(f"{loss_flags[0]} sets the loss of diff --grad: add --grad")
    if grad and profile:
        raise UsageError("--profile times a forward diff: not with --grad (grad --check and bench/grad.py time gradients)")
    if grad and fp32_sensitivity:
        raise UsageError("--fp32-sensitivity reruns A's quantized layers in fp32 to compare activations: not with --grad")
    if grad and separate_runs:
        raise UsageError("--separate-runs splits a forward diff's runs: not with --grad (each model's gradients come from one run)")
    if grad and (vs_device or vs_opt_level or vs_reference or vs_npz or vs_runtime or (reference is None) == (vs_torch is None)):
        raise UsageError("diff --grad compares two models: give the reference model B or --vs-torch (and no other --vs-* option)")
    if grad and (runtime != "ort" or set(api.own_options("ort", api.parse_runtime_options(runtime_option)) or ()) - {"tf32"}):
        raise UsageError("diff --grad runs backward graphs on onnxruntime: drop --runtime, and --runtime-option but tf32=0|1")
    max_mem = api.parse_size(max_memory) if max_memory is not None else None  # '' is refused, not the default
    ray_options = ray_of(ray, ray_address, ray_workers, inputs_dir is not None)
    # a reference a dataset diff cannot take: what it can take is said; a mode of one input: that alone (a model B
    # was given, and the list of references read as though it were what was refused)
    references = " (a dataset diff compares with a model B, --vs-device, --vs-opt-level, --vs-runtime or --vs-reference)"
    one_input = [(bool(given), f"{what} compares on one input: not with {{flag}}{references if listed else ''}")
                 for given, what, listed in ((grad, "--grad", False), (vs_npz, "--vs-npz", True), (vs_torch, "--vs-torch", True),
                                             (fp32_sensitivity, "--fp32-sensitivity", False))]
    if dataset_flag(inputs_dir, inputs_from, *one_input, one_input_profile(profile),
                    inputs_in_dataset(input_, inputs, shape, seed, int_range)):
        where = inputs_dir.name if inputs_dir is not None else inputs_from
        with Progress(f"comparing {model.name} over {where}", "batches") as progress:
            res = api.diff_dataset(model, reference, inputs_dir, inputs_from=inputs_from, vs_device=vs_device,
                                   vs_opt_level=vs_opt_level, vs_reference=vs_reference, runtime=runtime,
                                   vs_runtime=vs_runtime, runtime_options=api.parse_runtime_options(runtime_option),
                                   selection=selection,
                                   config=api.RunConfig(device=device, opt_level=opt_level or "off", cache=not no_cache),
                                   tolerance=base, per_tensor=per, user_map=user_map, max_memory=max_mem,
                                   progress=progress.update, fuse=not separate_runs, ray=ray_options)
        _report_dataset(res, sort, json_, view, overlay, netron, html, f"dataset {where}")
        return
    with Progress(f"comparing {model.name}") as progress:
        if grad:
            spec = grad_spec_of(output, loss, target, labels, output_grad, wrt)
            res = api.diff_grad(model, reference, spec, vs_torch=vs_torch, selection=selection,
                                config=api.ort_config(api.RunConfig(device=device, opt_level=opt_level or api.GRAD_OPT_LEVEL,
                                                                    cache=not no_cache), api.parse_runtime_options(runtime_option)),
                                inputs=spec_in, tolerance=base, per_tensor=per, user_map=user_map, max_memory=max_mem,
                                progress=progress.update)
        else:
            from onnxprobe.api.lean import while_building

            with while_building(lambda: importlib.import_module("onnxprobe.report.diff")):
                res = api.diff(model, reference, vs_device=vs_device, vs_opt_level=vs_opt_level, vs_reference=vs_reference,
                               vs_npz=vs_npz, vs_torch=vs_torch, runtime=runtime, vs_runtime=vs_runtime,
                               runtime_options=api.parse_runtime_options(runtime_option), selection=selection,
                               config=api.RunConfig(device=device, opt_level=opt_level or "off", cache=not no_cache),
                               inputs=spec_in, tolerance=base, per_tensor=per, user_map=user_map, max_memory=max_mem,
                               progress=progress.update, fp32_sensitivity=fp32_sensitivity, fuse=not separate_runs,
                               extras=not light_metrics(json_, html, netron, view), **({"profile": True} if profile else {}))
    from onnxprobe.report.diff import diff_dict, diff_renderables

    notes(res.notes)
    order = api.sort_results(res.results, sort)
    data = in_cli_words(diff_dict(res, order))  # the criterion and verdict in the command line's words (errors.said)
    extra = (lambda width: [])
    if res.profile:
        from onnxprobe.report.profile import diff_profile_renderables, with_diff_profile

        data = with_diff_profile(data, res)
        extra = (lambda width: diff_profile_renderables(data, width))
    write_pictures(res, overlay=overlay, netron=netron, sort=sort)
    if html is not None:
        from onnxprobe.report.html import worst_rows

        with Progress("histograms of the worst rows for the HTML report"):
            # the tensors the result measured, on its own inputs (--vs-torch's are the module's example arguments,
            # which no random draw of the spec gives: token ids past the vocabulary stopped the page)
            hists = api.diff_histograms(res, worst_rows("diff", data), None, max_memory=max_mem)
        source = f"the example arguments of {vs_torch}" if isinstance(vs_torch, str) else None
        write_html(html, res, histograms=hists, sort=sort, view=view,
                   inputs=api.describe_inputs(res.a.model, spec_in, feed=res.feed or None, source=source))
    emit(data, json_, lambda width: diff_renderables(data, width, asked=view.columns) + extra(width), view)
    exit_for(*res.verdict())


def _report_dataset(res, sort: str, json_: Path | None, view, overlay, netron, html, inputs: str) -> None:
    """A dataset diff's notes, report (table or JSON, overlays, the HTML page of the pooled metrics: no
    histograms, which are of one input's tensors), and the exit code of its verdict."""
    from onnxprobe import api
    from onnxprobe.report.diff_dataset import diff_dataset_dict, diff_dataset_renderables
    from onnxprobe.report.io import in_cli_words

    notes(res.notes)
    data = in_cli_words(diff_dataset_dict(res, api.sort_results(res.results, sort)))
    write_pictures(res, overlay=overlay, netron=netron, sort=sort)
    write_html(html, res, inputs=[inputs], sort=sort, view=view)
    emit(data, json_, lambda width: diff_dataset_renderables(data, width, asked=view.columns), view)
    exit_for(*res.verdict())

