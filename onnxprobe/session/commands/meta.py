"""The debugger's commands about the session itself: device, help, quit."""

from __future__ import annotations

import textwrap
from typing import Iterable

from rich.table import Table
from rich.text import Text

from onnxprobe.session.commands.table import ALIASES, COMMANDS, Env, GROUPS, Quit, bad, command, lookup


# -- session ---------------------------------------------------------------------------------------------


@command("device", "device [auto|cpu|cuda]", "the device runs use (without an argument: show it)", "session", args=("device",))
def cmd_device(env: Env, args: list[str]):
    st = env.state
    if len(args) > 1:
        raise bad("device", "give one of auto, cpu, cuda")
    if args:
        st.set_device(args[0])
    extra = f" ({st.resolved_device})" if st.device == "auto" else ""
    return f"device {st.device}{extra}"


@command("help", "help [COMMAND]", "the commands, or one command in detail", "session", args=("command",), aliases=("?",))
def cmd_help(env: Env, args: list[str]):
    if len(args) > 1:
        raise bad("help", "give one command")
    if args:
        c = lookup(args[0])
        out = Text()
        out.append(c.usage, style="bold")
        out.append(f"\n  {c.help}")
        if c.details:
            out.append("\n\n" + textwrap.indent(c.details, "  "))
        if c.aliases:
            out.append(f"\n\n  also: {', '.join(c.aliases)}", style="dim")
        return out
    table = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0), show_header=False)
    w = max(len(c.short_usage) for c in COMMANDS.values()) + 2
    table.add_column(no_wrap=True, min_width=w, max_width=w)
    table.add_column(ratio=1)
    for g in GROUPS:
        table.add_row(Text(g, style="bold underline"), "")
        for c in COMMANDS.values():
            if c.group == g:
                table.add_row(Text("  " + c.short_usage, style="bold"), c.help)
    foot = Text("help COMMAND for its options and details. Tab completes commands, node and tensor names; "
                "Ctrl-C cancels a command; Ctrl-D quits.", style="dim")
    return [table, foot]


@command("quit", "quit", "end the session (Ctrl-D too)", "session", aliases=("exit", "q"))
def cmd_quit(env: Env, args: list[str]):
    raise Quit()


def command_names() -> Iterable[str]:
    return list(COMMANDS) + list(ALIASES)
