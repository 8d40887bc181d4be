"""``onnxprobe merge-stats``: combine dataset statistics computed shard by shard."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from onnxprobe.cli.errors import handle_errors
from onnxprobe.cli.options import JsonOpt


@handle_errors
def merge_stats(
    files: Annotated[list[Path], typer.Argument(help="JSON reports written by `layers --inputs-dir ... --json`.", show_default=False)],
    json_: JsonOpt = None,
) -> None:
    """Merge dataset statistics from several shards into one report, exactly and in any order.

    Each shard is a `layers --inputs-dir DIR --json FILE` report of the same model and selection,
    computed on part of the data (by separate workers, say). Counts, min/max, mean/std, NaN/Inf and the
    histograms (hence the percentiles) combine exactly: the same shards in any order give the same bytes.

    Examples:

        onnxprobe merge-stats shard0.json shard1.json shard2.json --json all.json
    """
    from onnxprobe.report import io as report_io
    from onnxprobe.report.console import stdout_console
    from onnxprobe.report.layers import print_layers
    from onnxprobe.stats.merge import merge_reports, read_report

    merged = merge_reports([read_report(f) for f in files])
    if json_ is not None:
        report_io.write_json(merged, json_)
    if json_ is None or str(json_) != "-":
        print_layers(merged, stdout_console())
