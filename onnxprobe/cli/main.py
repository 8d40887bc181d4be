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


app.command("layers")(layers)
app.command("grad")(grad)
app.command("inspect")(inspect)
app.command("mark")(mark)
app.command("extract")(extract)
app.command("debug")(debug)
app.command("diff")(diff)
app.command("merge-stats")(merge_stats)


def run() -> None:
    app()
