"""``onnxprobe inspect``: what is in a model, without running it."""

from __future__ import annotations

from typing import Annotated

import typer

from onnxprobe.cli.errors import handle_errors
from onnxprobe.cli.output import check_outputs, emit, error, notes
from onnxprobe.cli.options import ColumnsOpt, FormatOpt, JsonOpt, ModelArg, WideOpt, view_of

NodesOpt = Annotated[bool, typer.Option("--nodes", help="Also list every node: index, name, op, inputs → outputs with shapes.", rich_help_panel="Output")]


@handle_errors
def inspect(model: ModelArg, nodes: NodesOpt = False, json_: JsonOpt = None, wide: WideOpt = False,
            columns: ColumnsOpt = None, fmt: FormatOpt = "table") -> None:
    """Show what is in a model: IR and opset versions, producer, inputs and outputs, weights and
    parameter count, op types, nodes whose shapes could not be inferred, If/Loop/Scan bodies, external
    data files and custom domains. Nothing is run; external weights are not read.

    --nodes numbers the nodes as `layers --range` does. --columns and --format act on the node table
    with --nodes, on the inputs and outputs otherwise.

    Examples:

        onnxprobe inspect model.onnx

        onnxprobe inspect model.onnx --nodes | grep Softmax

        onnxprobe inspect model.onnx --json - | jq .op_histogram
    """
    from onnxprobe import api
    from onnxprobe.report.inspect import IO_COLUMNS, NODE_COLUMNS, inspect_dict, inspect_report

    view = view_of(wide, columns, fmt, NODE_COLUMNS if nodes else IO_COLUMNS, json_)
    check_outputs(model, json_)
    result = api.inspect(model)
    notes(result.warnings)
    emit(inspect_dict(result), json_, lambda width: inspect_report(result, width, nodes=nodes), view)
    if result.problems:  # the whole report, then the line and exit of a model problem (README: 1)
        more = f" (and {len(result.problems) - 1} more, listed above)" if len(result.problems) > 1 else ""
        error(f"{model}: {result.problems[0]}{more}: onnxruntime will not load the model")
        raise typer.Exit(1)
