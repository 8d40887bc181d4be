"""``onnxprobe mark``: write a copy of a model with intermediate tensors as extra graph outputs."""

from __future__ import annotations

from typing import Annotated

import typer

from onnxprobe.cli.errors import handle_errors
from onnxprobe.errors import writing_as
from onnxprobe.cli.output import OUTPUT_FLAG, check_outputs, notes, show_written, stdout_width
from onnxprobe.cli.options import (
    AllOpt, ConstOpt, InputOpt, InputsOpt, IntRangeOpt, ModelArg, NameOpt, OpOpt, OutOpt, RangeOpt, SeedOpt,
    ShapeOpt, inputs_of, selection_of, ColumnsOpt, TableFormatOpt, WideOpt, view_of,
)

StatsOpt = Annotated[bool, typer.Option("--stats", help="Expose each tensor's in-graph statistics ([1, 11] float64 row: count, nan, nonfinite, min, max, shift c, sum of x-c, sum of (x-c)^2, sum of |x|, non-zero count, the unit u of the three sums: 1 but for float64 past 2^400 or below 2^-400) instead of the tensor.", rich_help_panel="Output")]


@handle_errors
def mark(
    model: ModelArg,
    output: OutOpt,
    op: OpOpt = None,
    name: NameOpt = None,
    all_: AllOpt = False,
    range_: RangeOpt = None,
    include_constants: ConstOpt = False,
    stats: StatsOpt = False,
    seed: SeedOpt = 0,
    int_range: IntRangeOpt = "0:100",
    shape: ShapeOpt = None,
    input_: InputOpt = None,
    inputs: InputsOpt = None,
    wide: WideOpt = False,
    columns: ColumnsOpt = None,
    fmt: TableFormatOpt = "table",
) -> None:
    """Write a copy of the model with the selected intermediate tensors as extra graph outputs, typed,
    so that any runtime (onnxruntime in Python or C++, ...) returns them.

    The selection works as in `layers`. Tensors inside If/Loop/Scan bodies are carried out: stacked per iteration in a loop, empty when their If branch did not run. The metadata key onnxprobe.exposed lists the added outputs.

    The inputs options matter only when shape inference cannot type a tensor: the model then runs once to see it.

    Examples:

        onnxprobe mark model.onnx -o marked.onnx --op Conv --op Softmax

        onnxprobe mark model.onnx -o marked.onnx --all --range 10:40

        onnxprobe mark model.onnx -o stats.onnx --all --stats
    """
    from onnxprobe import api
    from onnxprobe.report.progress import Progress
    from onnxprobe.report.surgery import MARK_COLUMNS, MARK_TENSOR, mark_renderables

    view = view_of(wide, columns, fmt, MARK_COLUMNS + [MARK_TENSOR])
    check_outputs(model, files={OUTPUT_FLAG: output})
    selection = selection_of(op, name, all_, range_, include_constants)
    spec = inputs_of(seed, int_range, shape, input_, inputs)
    with Progress(f"marking {model.name}"), writing_as(OUTPUT_FLAG):  # "-o/--output PATH: cannot write it"
        result = api.mark(model, output, selection, stats=stats, inputs=spec)
    notes(result.notes)
    show_written(mark_renderables(result, stdout_width()), view)
