"""Options shared by several commands, as ``Annotated`` aliases, so a flag means the same everywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

ModelArg = Annotated[Path, typer.Argument(help="ONNX model file (external data is read from beside it).", show_default=False)]

# selection
OpOpt = Annotated[Optional[list[str]], typer.Option("--op", help="Probe outputs of this op type (repeatable).", rich_help_panel="Selection")]
NameOpt = Annotated[Optional[list[str]], typer.Option("--name", help="Probe tensors whose node or tensor name matches this glob (repeatable).", rich_help_panel="Selection")]
AllOpt = Annotated[bool, typer.Option("--all", help="Probe every node output, inside If/Loop/Scan bodies too.", rich_help_panel="Selection")]
RangeOpt = Annotated[Optional[str], typer.Option("--range", help="Only nodes with index START..END (indices or node names), e.g. 10:40.", rich_help_panel="Selection")]
ConstOpt = Annotated[bool, typer.Option("--include-constants", help="Also probe weights computed from constants alone.", rich_help_panel="Selection")]

# inputs
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed of the random inputs.", rich_help_panel="Inputs")]
IntRangeOpt = Annotated[str, typer.Option("--int-range", help="LOW:HIGH range of random integer inputs (HIGH excluded).", rich_help_panel="Inputs")]
ShapeOpt = Annotated[Optional[list[str]], typer.Option("--shape", help="Fix an input's dynamic dimensions: NAME=1x3x224x224 (repeatable).", rich_help_panel="Inputs")]
InputOpt = Annotated[Optional[list[str]], typer.Option("--input", help="An input from a file, NAME=FILE.npy or NAME=FILE.pb, or a value, NAME=16000 or NAME=[1,2] (repeatable).", rich_help_panel="Inputs")]
InputsOpt = Annotated[Optional[Path], typer.Option("--inputs", help="All inputs from one .npz file, keyed by input name.", rich_help_panel="Inputs")]
InputsDirOpt = Annotated[Optional[Path], typer.Option("--inputs-dir", help="Dataset mode: a folder of .npz batches, or one .npz with a leading sample axis; statistics over all of them, one run per batch.", rich_help_panel="Inputs")]
InputsFromOpt = Annotated[Optional[str], typer.Option("--inputs-from", metavar="FILE.py:FUNC", help="Dataset mode from your own pipeline: FUNC() yields feed dicts {input name: array}, one run each.", rich_help_panel="Inputs")]

# dataset runs on a Ray cluster
RayOpt = Annotated[bool, typer.Option("--ray", help="Share the batches of --inputs-dir out to Ray actors (a local cluster started for the run, unless --ray-address). Needs the ray extra.", rich_help_panel="Ray")]
RayAddressOpt = Annotated[Optional[str], typer.Option("--ray-address", help="An existing Ray cluster instead of a local one: auto, HOST:PORT or ray://HOST:PORT (implies --ray).", rich_help_panel="Ray")]
RayWorkersOpt = Annotated[Optional[int], typer.Option("--ray-workers", help="Ray actors (default: the cluster's CPUs; implies --ray).", rich_help_panel="Ray")]

# execution
DeviceOpt = Annotated[str, typer.Option("--device", help="auto | cpu | cuda. auto picks CUDA only when a session really gets it.", rich_help_panel="Execution")]
OptLevelOpt = Annotated[str, typer.Option("--opt-level", help="onnxruntime graph optimisation: off | basic | extended | layout | all.", rich_help_panel="Execution")]

# output
JsonOpt = Annotated[Optional[Path], typer.Option("--json", help="Write the report as JSON to FILE ('-' for stdout, instead of the table).", rich_help_panel="Output")]
MaxMemoryOpt = Annotated[Optional[str], typer.Option("--max-memory", help="Most memory raw tensors may take at once (e.g. 512M, 2G); more runs when needed. Default: a quarter of the available memory.", rich_help_panel="Output")]
SaveOpt = Annotated[Optional[Path], typer.Option("--save", help="Save the probed tensors to FILE.npz, keyed by tensor name.", rich_help_panel="Output")]


# surgery commands (mark, extract)
OutOpt = Annotated[Path, typer.Option("--output", "-o", help="The model to write (its weights go to OUT.data beside it when the input keeps them outside or it passes 2 GB).", show_default=False, rich_help_panel="Output")]


# gradients (grad)
GradOutputOpt = Annotated[Optional[str], typer.Option("--output", help="The model output the loss is computed from (default: the first).", rich_help_panel="Loss")]
LossOpt = Annotated[str, typer.Option("--loss", help="sum | mean | mse (with --target) | cross-entropy (with --labels). --output-grad FILE sets dL/dy directly.", rich_help_panel="Loss")]
TargetOpt = Annotated[Optional[Path], typer.Option("--target", help="The target of --loss mse, a .npy shaped like the output.", rich_help_panel="Loss")]
LabelsOpt = Annotated[Optional[Path], typer.Option("--labels", help="Class indices (integer .npy, the output's shape without its class axis) or class probabilities (float, the output's shape) for --loss cross-entropy.", rich_help_panel="Loss")]
OutputGradOpt = Annotated[Optional[Path], typer.Option("--output-grad", help="dL/d(output) given directly, a .npy shaped like the output (replaces --loss).", rich_help_panel="Loss")]
WrtOpt = Annotated[Optional[list[str]], typer.Option("--wrt", help="Only the gradients of these tensors (names or globs: weights, inputs, activations; repeatable).", rich_help_panel="Selection")]
SaveGradsOpt = Annotated[Optional[Path], typer.Option("--save-grads", help="Save the gradients to FILE.npz, keyed by the forward tensor's name.", rich_help_panel="Output")]
ExportOpt = Annotated[Optional[Path], typer.Option("--export", help="Write the model with its backward graph to OUT.onnx (outputs: the loss and the gradients).", rich_help_panel="Output")]
CheckOpt = Annotated[bool, typer.Option("--check", help="Check every gradient against central finite differences (float64 where onnxruntime allows).", rich_help_panel="Output")]


# --- turning the shared options into API arguments, once -------------------------------------------------

def selection_of(op: list[str] | None, name: list[str] | None, all_: bool, range_: str | None, include_constants: bool):
    """The Selection that --op/--name/--all/--range/--include-constants describe."""
    from onnxprobe import api

    return api.Selection(ops=tuple(op or ()), names=tuple(name or ()), all=all_, range=range_, include_constants=include_constants)


def inputs_of(seed: int, int_range: str, shape: list[str] | None, input_: list[str] | None, inputs: Path | None = None):
    """The api.InputSpec of --seed/--int-range/--shape/--input/--inputs."""
    from onnxprobe import api

    return api.input_spec(seed, int_range, shape, input_, inputs)


def grad_spec_of(output: str | None, loss: str, target: Path | None, labels: Path | None, output_grad: Path | None,
                 wrt: list[str] | None):
    """The api.GradSpec that --output/--loss/--target/--labels/--output-grad/--wrt describe (grad, diff --grad)."""
    from onnxprobe import api

    return api.grad_spec(output, loss, target, labels, output_grad, wrt)


def ray_of(ray: bool, address: str | None, workers: int | None, dataset: bool):
    """The api.RayOptions that --ray/--ray-address/--ray-workers describe (None: run here); the Ray flags
    shard a dataset, so they need ``dataset`` (--inputs-dir)."""
    from onnxprobe import api
    from onnxprobe.errors import UsageError

    if not (ray or address is not None or workers is not None):
        return None
    flag = "--ray" if ray else ("--ray-address" if address is not None else "--ray-workers")
    if not dataset:
        raise UsageError(f"{flag} shares the batches of a dataset out to workers: give --inputs-dir DIR")
    return api.RayOptions(address=address, workers=workers)
