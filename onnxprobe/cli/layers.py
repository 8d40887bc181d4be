"""``onnxprobe layers``: every probed tensor with its statistics."""

from __future__ import annotations

from onnxprobe.cli.errors import handle_errors
from onnxprobe.cli.options import (
    AllOpt, ConstOpt, DeviceOpt, InputsDirOpt, InputsFromOpt, InputOpt, InputsOpt, IntRangeOpt, JsonOpt, ModelArg, NameOpt,
    OpOpt, MaxMemoryOpt, OptLevelOpt, RangeOpt, RayAddressOpt, RayOpt, RayWorkersOpt, SaveOpt, SeedOpt, ShapeOpt,
    inputs_of, ray_of, selection_of,
)
from onnxprobe.cli.output import check_outputs, emit, notes


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
    opt_level: OptLevelOpt = "off",
    json_: JsonOpt = None,
    save: SaveOpt = None,
    max_memory: MaxMemoryOpt = None,
) -> None:
    """Show every probed intermediate tensor with its statistics, in topological order.

    By default the outputs of Conv, ConvTranspose, Gemm, MatMul and attention ops, plus the model's
    outputs, are probed; statistics are computed inside the graph, on the device.

    Examples:

        onnxprobe layers model.onnx

        onnxprobe layers model.onnx --all --shape image=1x3x224x224 --json report.json

        onnxprobe layers model.onnx --op Softmax --name '*attn*' --save acts.npz

        onnxprobe layers model.onnx --inputs-dir calib/ --json shard0.json   # statistics over a dataset

        onnxprobe layers model.onnx --inputs-from prep.py:images             # your own pipeline's inputs

        onnxprobe layers model.onnx --inputs-dir calib/ --ray --ray-workers 4
    """
    from onnxprobe import api
    from onnxprobe.errors import UsageError
    from onnxprobe.report.layers import dataset_dict, layers_dict, layers_renderables
    from onnxprobe.report.progress import Progress

    selection = selection_of(op, name, all_, range_, include_constants)
    config = api.RunConfig(device=device, opt_level=opt_level)
    spec = inputs_of(seed, int_range, shape, input_, inputs)
    check_outputs(model, save, json_)
    budget = api.parse_size(max_memory) if max_memory else None
    ray_options = ray_of(ray, ray_address, ray_workers, inputs_dir is not None)
    if inputs_dir is not None or inputs_from is not None:
        flag = "--inputs-dir" if inputs_dir is not None else "--inputs-from"
        if inputs_dir is not None and inputs_from is not None:
            raise UsageError("--inputs-dir and --inputs-from are two datasets: give one")
        if save is not None or input_ or inputs is not None or shape:
            raise UsageError(f"{flag} takes all inputs from the dataset: drop --save, --input, --inputs and --shape")
        where = inputs_dir.name if inputs_dir is not None else inputs_from
        with Progress(f"probing {model.name} over {where}") as progress:
            res = api.layers_dataset(model, inputs_dir, selection, config, max_memory=budget, progress=progress.update,
                                     inputs_from=inputs_from, ray=ray_options)
        notes(res.notes)
        data = dataset_dict(res)
    else:
        with Progress(f"probing {model.name}") as progress:
            res = api.layers(model, selection, config, spec, save_to=save, max_memory=budget, progress=progress.update)
        notes(res.notes + res.plan.warnings)
        data = layers_dict(res)
    emit(data, json_, lambda width: layers_renderables(data, width))
