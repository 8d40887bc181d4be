"""Options shared by several commands, as ``Annotated`` aliases, so a flag means the same everywhere."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import typer

try:  # the type Typer itself gives a Path parameter (recent Typers vendor click)
    from typer.models import TyperPath as _ClickPath
except ImportError:  # pragma: no cover
    from click.types import Path as _ClickPath


class _FilePath(_ClickPath):
    """A path argument that is not empty: Path('') is '.', so `--json ''` read as the current folder
    ('.: is a folder')."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value == "":
            self.fail("an empty path; give a file name", param, ctx)
        return super().convert(value, param, ctx)


FILE = _FilePath()


class _OutPath(_FilePath):
    """A file to write: not empty, and not a path that ends in '/', which names a folder (Path('out/') is
    Path('out'): the file would be written where the user named a folder)."""

    def convert(self, value, param, ctx):
        from onnxprobe.errors import UsageError
        from onnxprobe.fileio import not_a_folder

        try:
            not_a_folder(value, about="")
        except UsageError as e:  # said as click says a bad value (cli.main: "--json out/: ..."), exit 2
            self.fail(str(e), param, ctx)
        return super().convert(value, param, ctx)


OUT = _OutPath()

ModelArg = Annotated[Path, typer.Argument(help="ONNX model file (external data is read from beside it).", show_default=False, click_type=FILE)]

# selection
OpOpt = Annotated[Optional[list[str]], typer.Option("--op", help="Probe outputs of this op type (repeatable, or comma-separated: --op Conv,Relu).", rich_help_panel="Selection")]
NameOpt = Annotated[Optional[list[str]], typer.Option("--name", help="Probe tensors whose node or tensor name matches this glob (repeatable: one glob each, as names may hold commas).", rich_help_panel="Selection")]
AllOpt = Annotated[bool, typer.Option("--all", help="Probe every node output, inside If/Loop/Scan bodies too.", rich_help_panel="Selection")]
RangeOpt = Annotated[Optional[str], typer.Option("--range", help="Only nodes with index START..END (indices or node names), e.g. 10:40.", rich_help_panel="Selection")]
ConstOpt = Annotated[bool, typer.Option("--include-constants", help="Also probe weights computed from constants alone.", rich_help_panel="Selection")]

# inputs
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed of the random inputs.", rich_help_panel="Inputs")]
IntRangeOpt = Annotated[str, typer.Option("--int-range", help="LOW:HIGH range of random integer inputs (HIGH excluded).", rich_help_panel="Inputs")]
ShapeOpt = Annotated[Optional[list[str]], typer.Option("--shape", help="Fix an input's dynamic dimensions: NAME=1x3x224x224 (repeatable).", rich_help_panel="Inputs")]
InputOpt = Annotated[Optional[list[str]], typer.Option("--input", help="An input from a file, NAME=FILE.npy or NAME=FILE.pb, or a value, NAME=16000 or NAME=[1,2] (repeatable).", rich_help_panel="Inputs")]
InputsOpt = Annotated[Optional[Path], typer.Option("--inputs", help="All inputs from one .npz file keyed by input name, or from an ONNX test data set folder (its input_0.pb, input_1.pb...).", rich_help_panel="Inputs", click_type=FILE)]
InputsDirOpt = Annotated[Optional[Path], typer.Option("--inputs-dir", help="Dataset mode: a folder of .npz batches, or one .npz with a leading sample axis; statistics over all of them, one run per batch.", rich_help_panel="Inputs", click_type=FILE)]
InputsFromOpt = Annotated[Optional[str], typer.Option("--inputs-from", metavar="FILE.py:FUNC", help="Dataset mode from your own pipeline: FUNC() yields feed dicts {input name: array}, one run each.", rich_help_panel="Inputs")]

# dataset runs on a Ray cluster
RayOpt = Annotated[bool, typer.Option("--ray", help="Share the batches of --inputs-dir out to Ray actors (a local cluster started for the run, unless --ray-address). Needs the ray extra.", rich_help_panel="Ray")]
RayAddressOpt = Annotated[Optional[str], typer.Option("--ray-address", help="An existing Ray cluster instead of a local one: auto, HOST:PORT or ray://HOST:PORT (implies --ray).", rich_help_panel="Ray")]
RayWorkersOpt = Annotated[Optional[int], typer.Option("--ray-workers", help="Ray actors (default: the cluster's CPUs; implies --ray).", rich_help_panel="Ray")]

# execution
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Do not reuse (or keep) the probed copy of the model from an earlier run (cached under ~/.cache/onnxprobe, $ONNXPROBE_CACHE_DIR; safe to delete).", rich_help_panel="Execution")]
DeviceOpt = Annotated[str, typer.Option("--device", help="The device within the runtime: onnxruntime auto | cpu | cuda (auto picks CUDA only when a session really gets it); OpenVINO CPU, GPU, NPU... (auto: CPU); TensorRT cuda[:N].", rich_help_panel="Execution")]
# grad and debug run onnxruntime only: their --device names onnxruntime's devices alone
OrtDeviceOpt = Annotated[str, typer.Option("--device", help="onnxruntime's device: auto | cpu | cuda (auto picks CUDA only when a session really gets it).", rich_help_panel="Execution")]
RuntimeOpt = Annotated[str, typer.Option("--runtime", help="ort | openvino | tensorrt | reference: the runtime that runs the model (openvino and tensorrt need their extras: pip install 'onnxprobe\\[openvino]').", rich_help_panel="Execution")]
RuntimeOptionOpt = Annotated[Optional[list[str]], typer.Option("--runtime-option", help="A setting of the runtime, KEY=VALUE (repeatable): OpenVINO properties such as INFERENCE_PRECISION_HINT=f16, TensorRT mode=debug|output, workspace=2G, tf32=0|1; onnxruntime's CUDA provider tf32=0|1 (on by default); RUNTIME:KEY=VALUE for one runtime of a diff.", rich_help_panel="Execution")]
# and grad's settings of onnxruntime (the one runtime it runs): its CUDA provider's alone
OrtRuntimeOptionOpt = Annotated[Optional[list[str]], typer.Option("--runtime-option", help="A setting of onnxruntime, KEY=VALUE: its CUDA provider's tf32=0|1 (on by default), the one it takes (its others are --device and --opt-level).", rich_help_panel="Execution")]
OptLevelOpt = Annotated[str, typer.Option("--opt-level", help="onnxruntime graph optimisation: off | basic | extended | layout | all.", rich_help_panel="Execution")]
ProfileOpt = Annotated[bool, typer.Option("--profile", help="Per-node time from onnxruntime's profiler: each row gets its producer's kernel time (probed and plain runs, or the node it was fused into), and a summary of what the probes cost (their kernels, the layout reorders and fusions they forced). Four extra runs of each model, one untimed and three profiled: each time is the fastest of the three.", rich_help_panel="Execution")]

# output
JsonOpt = Annotated[Optional[Path], typer.Option("--json", help="Write the report as JSON to FILE ('-' for stdout, instead of the table).", rich_help_panel="Output", click_type=OUT)]
MaxMemoryOpt = Annotated[Optional[str], typer.Option("--max-memory", help="Most memory raw tensors may take at once (e.g. 512M, 2G); more runs when needed. Default: a quarter of the available memory.", rich_help_panel="Output")]
WideOpt = Annotated[bool, typer.Option("--wide", help="Tables with every cell whole: full names, one line per row, whatever the width.", rich_help_panel="Output")]
ColumnsOpt = Annotated[Optional[list[str]], typer.Option("--columns", help="The table's columns, in this order: comma-separated keys (or the flag repeated), e.g. index,tensor,min,max for layers, index,tensor,sqnr_db,pass for diff (a wrong one lists them all).", rich_help_panel="Output")]
FormatOpt = Annotated[str, typer.Option("--format", help="table | csv | markdown | json: how the table goes to stdout (csv and json: full names, raw numbers; the whole report is --json).", rich_help_panel="Output")]
# the same for a command whose table is its whole report (mark: no --json)
TableFormatOpt = Annotated[str, typer.Option("--format", help="table | csv | markdown | json: how the table goes to stdout (csv and json: full names, raw numbers).", rich_help_panel="Output")]
HtmlOpt = Annotated[Optional[Path], typer.Option("--html", help="Also write a self-contained HTML report to FILE: header, a chart along depth, the sortable table, histograms of the worst rows (needs the html extra).", rich_help_panel="Output", click_type=OUT)]
OverlayOpt = Annotated[Optional[Path], typer.Option("--overlay", help="Write node data for Google's Model Explorer to FILE.json (model-explorer --extensions=model_explorer_onnx MODEL --node_data_paths=FILE.json).", rich_help_panel="Output", click_type=OUT)]
NetronOpt = Annotated[Optional[Path], typer.Option("--netron", help="Write a Netron attachment to FILE.json (open the model in Netron, then this file): the statistics of every value.", rich_help_panel="Output", click_type=OUT)]
SaveOpt = Annotated[Optional[Path], typer.Option("--save", help="Save the probed tensors to FILE.npz, keyed by tensor name.", rich_help_panel="Output", click_type=OUT)]


# surgery commands (mark, extract)
OutOpt = Annotated[Path, typer.Option("--output", "-o", help="The model to write (its weights go to OUT.data beside it when the input keeps them outside or it passes 2 GB).", show_default=False, rich_help_panel="Output", click_type=OUT)]


# gradients (grad)
GradOutputOpt = Annotated[Optional[str], typer.Option("--loss-output", help="The model output the loss is computed from (default: the first). Not --output, which names the file a command writes.", rich_help_panel="Loss")]
LossOpt = Annotated[str, typer.Option("--loss", help="sum | mean | mse (with --target) | cross-entropy (with --labels). --output-grad FILE sets dL/dy directly.", rich_help_panel="Loss")]
TargetOpt = Annotated[Optional[Path], typer.Option("--target", help="The target of --loss mse, a .npy shaped like the output.", rich_help_panel="Loss", click_type=FILE)]
LabelsOpt = Annotated[Optional[Path], typer.Option("--labels", help="Class indices (integer .npy, the output's shape without its class axis) or class probabilities (float, the output's shape) for --loss cross-entropy.", rich_help_panel="Loss", click_type=FILE)]
OutputGradOpt = Annotated[Optional[Path], typer.Option("--output-grad", help="dL/d(output) given directly, a .npy shaped like the output (replaces --loss).", rich_help_panel="Loss", click_type=FILE)]
WrtOpt = Annotated[Optional[list[str]], typer.Option("--wrt", help="Only the gradients of these tensors (names or globs: weights, inputs, activations; repeatable: one glob each, as names may hold commas).", rich_help_panel="Selection")]
SaveGradsOpt = Annotated[Optional[Path], typer.Option("--save-grads", help="Save the gradients to FILE.npz, keyed by the forward tensor's name.", rich_help_panel="Output", click_type=OUT)]
ExportOpt = Annotated[Optional[Path], typer.Option("--export", help="Write the model with its backward graph to OUT.onnx (outputs: the loss and the gradients).", rich_help_panel="Output", click_type=OUT)]
CheckOpt = Annotated[bool, typer.Option("--check", help="Check every gradient against central finite differences (float64 where onnxruntime allows).", rich_help_panel="Output")]


# --- turning the shared options into API arguments, once -------------------------------------------------

@dataclass(frozen=True)
class View:
    """How a table goes to stdout: --wide, --columns, --format."""

    wide: bool = False
    columns: tuple[str, ...] = ()
    format: str = "table"


def view_of(wide: bool, columns: list[str] | str | None, fmt: str, known=None, json_: Path | None = None,
            absent: dict[str, str] | None = None) -> View:
    """The View of --wide/--columns/--format, checked before any work (``known``: the columns the
    command's table can have; ``absent``: those this run's will not, with why; ``json_``: --json, which
    must not write to stdout beside --format). --columns may be repeated: its values are one list."""
    from onnxprobe.report.table import check_json_stdout, check_view, column_keys

    if isinstance(columns, list):
        columns = ",".join(columns) if columns else None

    if json_ is not None and str(json_) == "-":
        check_json_stdout(json_, fmt, _given("fmt"), columns is not None, wide)
    keys = tuple(column_keys(columns))
    check_view(fmt, list(keys), known, absent)
    return View(wide, keys, fmt)


def _given(param: str) -> bool:
    """Whether the running command's ``param`` was given on the command line (``--format table`` is the
    default's value, which says nothing)."""
    try:  # typer >= 0.16 vendors click; older ones use it
        from typer._click.core import ParameterSource
        from typer._click.globals import get_current_context
    except ImportError:  # pragma: no cover
        from click.core import ParameterSource
        from click.globals import get_current_context

    ctx = get_current_context(silent=True)
    return ctx is not None and ctx.get_parameter_source(param) == ParameterSource.COMMANDLINE


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
    """The api.GradSpec that --loss-output/--loss/--target/--labels/--output-grad/--wrt describe (grad, diff --grad)."""
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


def dataset_flag(inputs_dir: Path | None, inputs_from: str | None, *refusals: tuple[bool, str]) -> str | None:
    """Dataset mode: '--inputs-dir' or '--inputs-from', whichever was given (None: one input), after
    refusing both at once and then, in order, each ``refusal``: (given, the message, where ``{flag}``
    stands for the dataset's flag), as ``one_input_profile`` and ``inputs_in_dataset`` make them."""
    from onnxprobe.errors import UsageError

    if inputs_dir is None and inputs_from is None:
        return None
    if inputs_dir is not None and inputs_from is not None:
        raise UsageError("--inputs-dir and --inputs-from are two datasets: give one")
    flag = "--inputs-dir" if inputs_dir is not None else "--inputs-from"
    for given, message in refusals:
        if given:
            raise UsageError(message.format(flag=flag))
    return flag


def one_input_profile(profile: bool) -> tuple[bool, str]:
    """The refusal of --profile in dataset mode (``dataset_flag``)."""
    return profile, "--profile times one input: drop {flag} (or --profile)"


def one_input_save(save: bool) -> tuple[bool, str]:
    """The refusal of --save in dataset mode (``dataset_flag``): it saves one input's tensors."""
    return save, "--save writes the tensors of one input; {flag} runs many: drop --save (or {flag})"


def inputs_in_dataset(input_: list[str] | None, inputs: Path | None, shape: list[str] | None, seed: int,
                      int_range: str) -> tuple[bool, str]:
    """The refusal, in dataset mode (``dataset_flag``), of the flags that give one input (--input, --inputs,
    --shape, --seed and --int-range other than their defaults, which say nothing), for every command alike."""
    given = {"--input": bool(input_), "--inputs": inputs is not None, "--shape": bool(shape),
             "--seed": seed != 0, "--int-range": int_range != "0:100"}
    names = [flag for flag, yes in given.items() if yes]  # those given, not all
    listed = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0] if names else ""
    return bool(names), "{flag} takes all inputs from the dataset: drop " + listed
