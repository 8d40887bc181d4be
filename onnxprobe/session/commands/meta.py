"""The debugger's commands about the session itself: device, help, quit."""

from __future__ import annotations

import re
import textwrap
from typing import Iterable

from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from onnxprobe.session.commands.table import ALIASES, COMMANDS, Env, GROUPS, Quit, bad, command, lookup, no_more


HELP_TEXT_MIN = 30  # the narrowest description column of `help`'s list beside the usages

# -- session ---------------------------------------------------------------------------------------------


@command("device", "device [auto|cpu|cuda]", "the device runs use (without an argument: show it)", "session", args=("device",))
def cmd_device(env: Env, args: list[str]):
    """Examples: `device`, `device cpu`, `device cuda`."""
    st = env.state
    if len(args) > 1:
        raise bad("device", "give one of auto, cpu, cuda")
    if args:
        st.set_device(args[0])
    extra = f" ({st.resolved_device})" if st.device == "auto" else ""
    return f"device {st.device}{extra}"


@command("help", "help [COMMAND]", "the commands, or one command in detail", "session", args=("command",), aliases=("?",))
def cmd_help(env: Env, args: list[str]):
    """Examples: `help`, `help show`."""
    if len(args) > 1:
        raise bad("help", "give one command")
    if args:
        c = lookup(args[0])
        out = Text()
        out.append(c.usage, style="bold")
        fill = (lambda text, indent="  ": textwrap.fill(" ".join(text.split()), max(env.width - 2, 20), initial_indent=indent,
                                                       subsequent_indent=indent, break_on_hyphens=False, break_long_words=False))
        out.append("\n" + fill(c.help))
        # the docstring reflowed to the terminal (its own line breaks are the source's), its examples one a line
        # (the examples: the backquoted commands of the sentence that starts "Examples:", up to its full stop)
        prose, _, rest = c.details.partition("Examples:")
        m = re.match(r"((?:[^`.]|`[^`]*`)*)\.?", rest)
        examples, after = (re.findall(r"`([^`]+)`", m.group(1)), rest[m.end():]) if rest else ([], "")
        paragraphs = [p for text in (prose, after) for p in text.split("\n\n") if p.strip()]
        if paragraphs:
            out.append("\n\n" + "\n\n".join(fill(p) for p in paragraphs))
        if examples:
            out.append("\n\n  Examples:\n" + "\n".join(f"    {e}" for e in examples))
        if c.aliases:
            out.append(f"\n\n  also: {', '.join(c.aliases)}", style="dim")
        return out
    w = max(len(c.short_usage) for c in COMMANDS.values()) + 2
    if env.width - w - 2 < HELP_TEXT_MIN:  # too narrow for the descriptions beside the usages (Rich dropped their
        # column, and cropped the longest usage): each description goes under its usage, indented
        table = Table(box=None, pad_edge=False, padding=0, show_header=False)
        table.add_column(overflow="fold")
        for g in GROUPS:
            table.add_row(Text(g, style="bold underline"))
            for c in COMMANDS.values():
                if c.group == g:
                    table.add_row(Text("  " + c.short_usage, style="bold", overflow="fold"))
                    table.add_row(Padding(c.help, (0, 0, 0, 6)))
    else:
        table = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0), show_header=False)
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
    """Examples: `quit`, `exit`, `q`."""
    no_more("quit", args)
    raise Quit()


def command_names() -> Iterable[str]:
    return list(COMMANDS) + list(ALIASES)
