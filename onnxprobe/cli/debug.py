"""``onnxprobe debug``: an interactive debugging session over one model (or two), or a script of its commands."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from onnxprobe.cli.errors import handle_errors
from onnxprobe.cli.output import notes, writing_stdout
from onnxprobe.cli.options import (
    FILE,
    AllOpt, ConstOpt, OrtDeviceOpt, InputOpt, InputsOpt, IntRangeOpt, MaxMemoryOpt, ModelArg, NameOpt, NoCacheOpt, OpOpt, OptLevelOpt,
    RangeOpt, SeedOpt, ShapeOpt, inputs_of, selection_of,
)

OtherArg = Annotated[Optional[Path], typer.Argument(help="A second model to compare with (diff, match; --model b).", show_default=False, click_type=FILE)]
ScriptOpt = Annotated[Optional[Path], typer.Option("--script", help="Run the session's commands from FILE ('-' for stdin), one per line, and exit.", rich_help_panel="Session", click_type=FILE)]
EchoOpt = Annotated[bool, typer.Option("--echo", help="In --script mode (or with commands piped in), print each command before its output; refused at a terminal without --script.", rich_help_panel="Session")]


@handle_errors
def debug(
    model: ModelArg,
    other: OtherArg = None,
    script: ScriptOpt = None,
    echo: EchoOpt = False,
    op: OpOpt = None,
    name: NameOpt = None,
    all_: AllOpt = False,
    range_: RangeOpt = None,
    include_constants: ConstOpt = False,
    seed: SeedOpt = 0,
    int_range: IntRangeOpt = "0:100",
    shape: ShapeOpt = None,
    input_: InputOpt = None,
    inputs: InputsOpt = None,
    device: OrtDeviceOpt = "auto",
    opt_level: OptLevelOpt = "off",
    no_cache: NoCacheOpt = False,
    max_memory: MaxMemoryOpt = None,
) -> None:
    """Debug a model interactively: the model stays loaded and its results cached between commands.

    Type `help` in the session for the commands (info, nodes, node, inputs, input, seed, probe, run,
    stats, show, save, where, goto, step, back, diff, match, grad, device, quit). Tab completes
    commands, node and tensor names; Ctrl-C cancels a command; Ctrl-D quits. The selection and input
    options mean the same as in `layers` and set the session's starting probes and inputs.

    With --script FILE the same commands run one per line, output on stdout; a failing line prints its
    error on stderr and the script goes on; the exit code is 1 when any line failed, or a `diff` line's verdict
    failed (as `onnxprobe diff` exits).

    Examples:

        onnxprobe debug model.onnx --shape x=1x3x224x224

        onnxprobe debug model.onnx --script checks.txt

        onnxprobe debug model_int8.onnx model_fp32.onnx
    """
    from onnxprobe import api
    from onnxprobe.errors import UsageError
    from onnxprobe.report.console import stdout_console
    from onnxprobe.session import repl
    from onnxprobe.session.inputs import session_notes
    from onnxprobe.session.state import State

    if echo and script is None and sys.stdin.isatty():  # refused before any work, as other conflicting flags are
        raise UsageError("--echo prints each command of a script before its output, and an interactive session has "
                         "no script: give --script FILE (or pipe the commands in), or drop --echo")
    selection = selection_of(op, name, all_, range_, include_constants)
    spec = inputs_of(seed, int_range, shape, input_, inputs)
    budget = api.parse_size(max_memory) if max_memory is not None else None  # '' is refused, not the default
    models = [api.load(model)] + ([api.load(other)] if other is not None else [])
    state = State(models, inputs=spec, device=device, opt_level=opt_level, selection=selection, cache=not no_cache,
                  max_memory=budget)
    for t in state.targets.values():
        state.feed(t)  # a bad input or shape fails here, before the session starts
    if script is None and not sys.stdin.isatty():
        script = Path("-")  # piped commands: run them as a script
    if script is None:
        from onnxprobe.memory import park_when_done

        park_when_done(False)  # a long-lived session: what it is done with is freed at once (memory.py)
        repl.repl(state)
        return
    lines = repl.read_script(script)
    notes([n for t in state.targets.values() for n in session_notes(state.feed(t)[2]) + list(t.model.warnings)])
    with writing_stdout():  # a stdout that takes nothing: one error, exit code 1
        failed = repl.run_script(state, lines, stdout_console(), echo=echo)
    if failed:
        raise typer.Exit(1)
