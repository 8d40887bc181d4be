"""``onnxprobe extract``: write the subgraph between given tensors as a model of its own."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from onnxprobe.cli.errors import handle_errors
from onnxprobe.errors import writing_as
from onnxprobe.cli.output import OUTPUT_FLAG, check_outputs, notes, show_written, stdout_width
from onnxprobe.cli.options import (
    ColumnsOpt, InputOpt, IntRangeOpt, ModelArg, OutOpt, SeedOpt, ShapeOpt, TableFormatOpt, WideOpt, inputs_of, view_of,
)

CutInputsOpt = Annotated[Optional[list[str]], typer.Option("--from", help="Tensors that become the inputs, comma-separated (repeatable). Default: the model's inputs.", rich_help_panel="Cut")]
CutOutputsOpt = Annotated[Optional[list[str]], typer.Option("--to", help="Tensors that become the outputs, comma-separated (repeatable). Default: the model's outputs.", rich_help_panel="Cut")]


# the old names of --from / --to, hidden: the error points to the new ones, where the parser would suggest
# --input and --output, which mean something else here
OldInputsOpt = Annotated[Optional[list[str]], typer.Option("--inputs", hidden=True)]
OldOutputsOpt = Annotated[Optional[list[str]], typer.Option("--outputs", hidden=True)]


@handle_errors
def extract(
    model: ModelArg,
    output: OutOpt,
    inputs: CutInputsOpt = None,
    outputs: CutOutputsOpt = None,
    old_inputs: OldInputsOpt = None,
    old_outputs: OldOutputsOpt = None,
    seed: SeedOpt = 0,
    int_range: IntRangeOpt = "0:100",
    shape: ShapeOpt = None,
    input_: InputOpt = None,
    wide: WideOpt = False,
    columns: ColumnsOpt = None,
    fmt: TableFormatOpt = "table",
) -> None:
    """Write the subgraph between the given tensors as a model of its own: the nodes that compute
    --to from --from (and from weights), unchanged and in their order.

    The inputs must cut the outputs off from the rest of the graph; if they do not, the error names the tensors that reach the outputs around them.

    Without --from the cut starts at the model's inputs; without --to it ends at its outputs. (--from and --to, not --inputs, which names an input file in the other commands, nor --outputs.) `inspect --nodes` lists the tensor names.

    The seed, shape and input options matter only when shape inference cannot type a boundary tensor: the model then runs once to see it.

    Examples:

        onnxprobe extract model.onnx -o block.onnx --from a,mask --to b

        onnxprobe extract model.onnx -o head.onnx --from features

        onnxprobe extract model.onnx -o stem.onnx --to conv1_out

        onnxprobe extract model.onnx -o stem.onnx --to conv1_out --format csv
    """
    from onnxprobe import api
    from onnxprobe.errors import UsageError
    from onnxprobe.report.progress import Progress

    if old_inputs or old_outputs:
        raise UsageError("extract names the cut with --from and --to (" + (
            "not --inputs, which names an input .npz file in the other commands)" if old_inputs else
            "its outputs with --to: there is no --outputs)"))
    from onnxprobe.report.inspect import IO_COLUMNS
    from onnxprobe.report.surgery import extract_renderables

    view = view_of(wide, columns, fmt, IO_COLUMNS)  # before anything is written
    check_outputs(model, files={OUTPUT_FLAG: output})

    spec = inputs_of(seed, int_range, shape, input_)  # no --inputs FILE.npz here: the cut's tensors are what it reads from
    # a refused cut is said with the flags (its cli_message); a file that cannot be written, with -o/--output
    with Progress(f"extracting from {model.name}"), writing_as(OUTPUT_FLAG):
        result = api.extract(model, output, inputs, outputs, inputs=spec)
    notes(result.notes)
    show_written(extract_renderables(result, stdout_width()), view)
