"""``onnxprobe grad``: attach a backward graph to a model and show every gradient with its statistics."""

from __future__ import annotations

from typing import Annotated

import typer

from onnxprobe.cli.errors import handle_errors
from onnxprobe.errors import writing_as
from onnxprobe.cli.options import (
    CheckOpt, ConstOpt, OrtDeviceOpt, ExportOpt, GradOutputOpt, InputOpt, InputsDirOpt, InputsFromOpt, InputsOpt, IntRangeOpt,
    JsonOpt, LabelsOpt, LossOpt, MaxMemoryOpt, ModelArg, NameOpt, NoCacheOpt, OpOpt, OptLevelOpt, OutputGradOpt, RangeOpt, RayAddressOpt, RayOpt,
    RayWorkersOpt, OrtRuntimeOptionOpt, SaveGradsOpt, SeedOpt, ShapeOpt, TargetOpt, WrtOpt, grad_spec_of, inputs_of, ray_of, selection_of,
    ColumnsOpt, FormatOpt, HtmlOpt, NetronOpt, OverlayOpt, WideOpt, dataset_flag, inputs_in_dataset, view_of,
)
from onnxprobe.cli.output import check_outputs, emit, error, notes, require_html, write_html, write_pictures, wrote

ReduceOpt = Annotated[str, typer.Option("--reduce", help="With --inputs-dir or --inputs-from: the dataset's loss is the sum or the mean of the samples' losses.", rich_help_panel="Loss")]


# layers' --all reaches inside If/Loop/Scan bodies; grad's rows are main-graph tensors and weights (the
# bodies are differentiated, their weights included, but a body tensor gets no row: a note lists them)
GradAllOpt = Annotated[bool, typer.Option("--all", help="Every node output of the main graph and every weight (tensors "
                                          "inside If/Loop/Scan bodies get no row; a note lists them).",
                                          rich_help_panel="Selection")]


@handle_errors
def grad(
    model: ModelArg,
    output: GradOutputOpt = None,
    loss: LossOpt = "sum",
    target: TargetOpt = None,
    labels: LabelsOpt = None,
    output_grad: OutputGradOpt = None,
    wrt: WrtOpt = None,
    op: OpOpt = None,
    name: NameOpt = None,
    all_: GradAllOpt = False,
    range_: RangeOpt = None,
    include_constants: ConstOpt = False,
    seed: SeedOpt = 0,
    int_range: IntRangeOpt = "0:100",
    shape: ShapeOpt = None,
    input_: InputOpt = None,
    inputs: InputsOpt = None,
    inputs_dir: InputsDirOpt = None,
    inputs_from: InputsFromOpt = None,
    reduce: ReduceOpt = "sum",
    ray: RayOpt = False,
    ray_address: RayAddressOpt = None,
    ray_workers: RayWorkersOpt = None,
    device: OrtDeviceOpt = "auto",
    opt_level: OptLevelOpt = "all",
    no_cache: NoCacheOpt = False,
    runtime_option: OrtRuntimeOptionOpt = None,
    json_: JsonOpt = None,
    save_grads: SaveGradsOpt = None,
    max_memory: MaxMemoryOpt = None,
    export: ExportOpt = None,
    check: CheckOpt = False,
    wide: WideOpt = False,
    columns: ColumnsOpt = None,
    fmt: FormatOpt = "table",
    html: HtmlOpt = None,
    overlay: OverlayOpt = None,
    netron: NetronOpt = None,
) -> None:
    """Backpropagate a loss through the model and show the gradient of every weight and probed
    activation: norm, |grad| / |tensor|, min, max, mean, std, NaN and Inf counts.

    The backward graph is built as ONNX nodes and runs with the forward pass in one onnxruntime session
    (CPU or CUDA). The selection flags pick gradients as they pick tensors in `layers`: --op Conv shows
    the gradients of Conv outputs and of the weights Conv nodes read.

    Examples:

        onnxprobe grad model.onnx

        onnxprobe grad model.onnx --loss cross-entropy --labels y.npy --check

        onnxprobe grad model.onnx --output-grad dy.npy --save-grads grads.npz

        onnxprobe grad model.onnx --export model_bw.onnx

        # the gradients of a dataset's loss

        onnxprobe grad model.onnx --inputs-dir calib/ --reduce mean
    """
    from onnxprobe import api
    from onnxprobe.errors import UsageError, cli_words
    from onnxprobe.report.grad import CHECK, CHECK_OK, COLUMNS, UNJUDGED, export_summary, grad_dict, grad_renderables
    from onnxprobe.text import as_word
    from onnxprobe.report.progress import Progress

    view = view_of(wide, columns, fmt, COLUMNS + [CHECK, CHECK_OK, UNJUDGED], json_,
                   {} if check else {c.key: "comes only with --check" for c in (CHECK, CHECK_OK, UNJUDGED)})
    spec = grad_spec_of(output, loss, target, labels, output_grad, wrt)
    selection = selection_of(op, name, all_, range_, include_constants)
    config = api.ort_config(api.RunConfig(device=device, opt_level=opt_level, cache=not no_cache),
                            api.parse_runtime_options(runtime_option))
    spec_in = inputs_of(seed, int_range, shape, input_, inputs)
    api.protect_inputs(inputs_dir=inputs_dir, inputs_from=inputs_from)  # before any output is checked or written
    check_outputs(model, json_, files={"--save-grads": save_grads, "--export": export, "--html": html, "--overlay": overlay,
                                       "--netron": netron})
    require_html(html)
    budget = api.parse_size(max_memory) if max_memory is not None else None  # '' is refused, not the default
    # conflicting flags are refused before any work (--export builds its model first)
    ray_options = ray_of(ray, ray_address, ray_workers, inputs_dir is not None)
    dataset = dataset_flag(inputs_dir, inputs_from,
                           inputs_in_dataset(input_, inputs, shape, seed, int_range),
                           (check, "{flag} runs a dataset, and --check is of one input: drop --check"))
    if reduce not in api.REDUCE:
        raise UsageError(f"--reduce {as_word(reduce)}: choose {' or '.join(api.REDUCE)}")
    if not dataset and reduce != "sum":
        raise UsageError("--reduce sets how a dataset's losses add up: give --inputs-dir or --inputs-from")
    loaded = api.load(model)
    said: list[str] = []  # notes the export gave: the run that follows finds the same, said once
    exported = None  # built and checked before the run; written only once the run succeeded
    if export is not None:
        with Progress(f"attaching the backward graph to {model.name}"):
            exported = api.export_plan(loaded, spec, selection, spec_in)
        notes(exported.warnings)
        said = list(exported.warnings)
    if dataset:
        where = inputs_dir.name if inputs_dir is not None else inputs_from
        with Progress(f"forward and backward on {model.name} over {where}", "batches") as progress:
            result = api.grad_dataset(loaded, inputs_dir, selection, config, spec, reduce=reduce,
                                      progress=progress.update, ray=ray_options, inputs_from=inputs_from, max_memory=budget)
    else:
        with Progress(f"forward and backward on {model.name}") as progress, writing_as("--save-grads"):
            def checking(done: int, total: int) -> None:
                if done == 0:
                    progress.phase(f"checking {model.name}", "gradients checked")
                progress.update(done, total)

            result = api.grad(loaded, selection, config, spec, spec_in, save=html is not None, save_to=save_grads,
                              check=check, progress=checking, max_memory=budget)
    notes([n for n in dict.fromkeys(result.notes + result.plan.warnings) if n not in said])
    if not result.rows:  # asked for, and none got a gradient: the notes say why; no (empty) table, no success
        constant = result.plan.constant_output  # a loss no input or weight changes: that is why
        error(f"the loss is a constant: {constant}, so no {'tensor --wrt asks for' if wrt else 'selected tensor'} gets a gradient"
              if constant else "none of the tensors --wrt asks for gets a gradient (the notes say why)" if wrt else
              f"none of the selected tensors gets a gradient ({selection.describe()}; the notes say why)")
        raise typer.Exit(1)
    if exported is not None:
        with writing_as("--export"):
            api.write_export(exported, export)
        wrote(export, export_summary(exported))
    data = grad_dict(result)
    write_pictures(result, overlay=overlay, netron=netron, model=loaded.proto)
    if html is not None:
        from onnxprobe.report.html import worst_rows

        # a dataset's result holds the summed weight gradients only: their histograms
        hists = api.grad_histograms(result, [n for n in worst_rows("grad", data) if n in result.arrays])
        shown = [f"dataset {inputs_dir or inputs_from}"] if dataset else api.describe_inputs(loaded, spec_in)
        write_html(html, result, histograms=hists, inputs=shown, view=view)
    emit(data, json_, lambda width: grad_renderables(data, width), view)
    if save_grads is not None and dataset:  # one input's gradients went to the file as they came (api.grad save_to)
        with writing_as("--save-grads"):
            api.save_npz(result.arrays, save_grads)
    wrote(save_grads, "the gradients")
    verdict = result.verdict()  # the check's: its reason is the error line, as in --json
    if verdict is not None and verdict[0] != "pass":
        error(cli_words(verdict[1]))
        raise typer.Exit(1)
