"""``onnxprobe merge-stats``: combine dataset statistics computed shard by shard."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from onnxprobe.cli.errors import handle_errors
from onnxprobe.cli.output import check_outputs, emit, exit_for, notes
from onnxprobe.cli.options import FILE, ColumnsOpt, FormatOpt, JsonOpt, WideOpt, view_of


@handle_errors
def merge_stats(
    files: Annotated[list[Path], typer.Argument(help="JSON reports written by `layers --inputs-dir ... --json` or `diff ... --inputs-dir ... --json`.", show_default=False, click_type=FILE)],
    json_: JsonOpt = None,
    wide: WideOpt = False,
    columns: ColumnsOpt = None,
    fmt: FormatOpt = "table",
) -> None:
    """Merge dataset statistics from several shards into one report, exactly and in any order.

    Each shard is a `layers --inputs-dir DIR --json FILE` report of the same model and selection,
    computed on part of the data (by separate workers, say). Counts, min/max, mean/std, NaN/Inf and the
    histograms (hence the percentiles) combine exactly: the same shards in any order give the same bytes.

    Examples:

        onnxprobe merge-stats shard0.json shard1.json shard2.json --json all.json

        onnxprobe merge-stats diff0.json diff1.json --json diff_all.json

        ssh worker cat shard1.json | onnxprobe merge-stats shard0.json -
    """
    from onnxprobe import api
    from onnxprobe.report import diff as diff_report
    from onnxprobe.report.diff_dataset import diff_dataset_renderables
    from onnxprobe.report.layers import COLUMNS, PERCENTILE_COLUMNS, STATUS, layers_renderables

    files = _stdin_for_dash(files)
    api.protect_inputs(*(files or ()), what="an input report")  # every report, not only the first: --json names none of them
    check_outputs(files[0] if files else None, json_, model_is="an input report")
    merged = api.merge_stats(files)
    notes(merged.get("notes") or [])  # the shards' notes, and the merge's own (shards that share samples)
    if "pairs" in merged:  # diff reports: the pooled comparison, judged again
        # the data columns its CSV and JSON rows carry too, as diff takes them (problem, unjudged)
        view = view_of(wide, columns, fmt, diff_report.COLUMNS + list(diff_report.JUDGED_COLUMNS.values())
                       + [diff_report.PROBLEM, diff_report.UNJUDGED], json_)
        emit(merged, json_, lambda width: diff_dataset_renderables(merged, width, asked=view.columns), view)
        exit_for(merged["verdict"], merged["verdict_reason"])
        return
    view = view_of(wide, columns, fmt, COLUMNS + PERCENTILE_COLUMNS + [STATUS], json_)
    emit(merged, json_, lambda width: layers_renderables(merged, width), view)


def _stdin_for_dash(files: list[Path] | None) -> list[Path] | None:
    """``-`` reads a report from standard input, as ``--script -`` and ``--json -`` use it: read once, as a
    pipe (``/dev/stdin``, named "shard N" by its place, as `<(...)` is)."""
    import sys

    from onnxprobe.errors import UsageError

    if not files or not any(str(f) == "-" for f in files):
        return files
    if sum(str(f) == "-" for f in files) > 1:
        raise UsageError("merge-stats: '-' given twice; standard input holds one report")
    if sys.stdin is None or sys.stdin.isatty():
        raise UsageError("merge-stats -: standard input is a terminal; pipe a report into it (`cat r.json | onnxprobe merge-stats a.json -`)")
    return [Path("/dev/stdin") if str(f) == "-" else f for f in files]
