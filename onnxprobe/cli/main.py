"""The ``onnxprobe`` Typer app. Commands are registered here; their modules import heavy libraries
(onnx, onnxruntime, numpy) only when they run, so ``--help`` and ``--version`` stay fast."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from onnxprobe import __version__
from onnxprobe.cli.debug import debug
from onnxprobe.cli.diff import diff
from onnxprobe.cli.extract import extract
from onnxprobe.cli.grad import grad
from onnxprobe.cli.inspect import inspect
from onnxprobe.cli.layers import layers
from onnxprobe.cli.mark import mark
from onnxprobe.cli.merge_stats import merge_stats

app = typer.Typer(
    name="onnxprobe",
    help="See inside ONNX models: probe intermediate tensors, find where the numbers go wrong.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        print(f"onnxprobe {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[Optional[bool], typer.Option("--version", "-V", callback=_version, is_eager=True, help="Print the version and exit.")] = None,
) -> None:
    """See inside ONNX models: probe intermediate tensors, find where the numbers go wrong.

    Set ONNXPROBE_DEBUG=1 to see full tracebacks.
    """


app.command("layers", short_help="Every probed tensor with its statistics (in-graph, on the device).")(layers)
app.command("diff", short_help="Compare two models layer by layer; show where the error starts.")(diff)
app.command("grad", short_help="Attach a backward graph; gradient statistics, export, --check.")(grad)
app.command("inspect", short_help="What a model holds: versions, inputs/outputs, weights, ops, subgraphs.")(inspect)
app.command("mark", short_help="Write a copy with chosen tensors (or their statistics) as outputs.")(mark)
app.command("extract", short_help="Write the subgraph between given tensors as a model of its own.")(extract)
app.command("debug", short_help="An interactive session: the model stays loaded, results cached.")(debug)
app.command("merge-stats", short_help="Merge dataset statistics of several shards, exactly.")(merge_stats)


def run() -> None:
    app()
