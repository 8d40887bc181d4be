"""The debugger's commands, all in one table (``COMMANDS``). Each is one small function
``fn(env, args) -> renderables`` with a usage line, one line of help, and the kinds of argument it takes
(which the REPL's Tab completion reads). Commands return what to show (strings, Rich Text/Table) and
never print; a bad command or argument raises a one-line ``UsageError``; ``quit`` raises ``Quit``.

``execute(env, line)`` runs one line. The interactive front end (``session.repl``) and ``--script``
mode both go through it, so a script exercises exactly what a user types.
"""

from onnxprobe.session.commands import compare, inputs, looking, meta, model, walking  # noqa: F401 - registers the commands
from onnxprobe.session.commands.meta import command_names
from onnxprobe.session.commands.table import ALIASES, COMMANDS, GROUPS, Command, Env, Quit, execute, lookup

__all__ = ["ALIASES", "COMMANDS", "GROUPS", "Command", "Env", "Quit", "command_names", "execute", "lookup"]
