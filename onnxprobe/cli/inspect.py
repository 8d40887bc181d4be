"""``onnxprobe inspect``: what is in a model, without running it."""

from __future__ import annotations

from typing import Annotated

import typer

from onnxprobe.cli.errors import handle_errors, warn
from onnxprobe.cli.options import JsonOpt, ModelArg

NodesOpt = Annotated[bool, typer.Option("--nodes", help="Also list every node: index, name, op, inputs → outputs with shapes.", rich_help_panel="Output")]


@handle_errors
def inspect(model: ModelArg, nodes: NodesOpt = False, json_: JsonOpt = None) -> None:
    """Show what is in a model: IR and opset versions, producer, inputs and outputs, weights and
    parameter count, op types, nodes whose shapes could not be inferred, If/Loop/Scan bodies, external
    data files and custom domains. Nothing is run; external weights are not read.

    --nodes numbers the nodes as `layers --range` does.

    Examples:

        onnxprobe inspect model.onnx

        onnxprobe inspect model.onnx --nodes | grep Softmax

        onnxprobe inspect model.onnx --json - | jq .op_histogram
    """
    from onnxprobe import api
    from onnxprobe.report import io as report_io
    from onnxprobe.report.console import stdout_console
    from onnxprobe.report.inspect import inspect_dict, print_inspect

    if json_ is not None and str(json_) != "-":
        report_io.check_writable(json_, model)
    result = api.inspect(model)
    warn(result.warnings)
    if json_ is not None:
        report_io.write_json(inspect_dict(result), json_)
    if json_ is None or str(json_) != "-":
        print_inspect(result, stdout_console(), nodes=nodes)
