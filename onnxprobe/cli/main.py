"""The ``onnxprobe`` Typer app. Commands are registered here; their modules import heavy libraries
(onnx, onnxruntime, numpy) only when they run, so ``--help`` and ``--version`` stay fast."""

from __future__ import annotations

import contextlib
import gc
import inspect as inspect_module
import os
import sys
from typing import Annotated, Optional

import typer
from typer.core import TyperCommand, TyperGroup

from onnxprobe import __version__
from onnxprobe.cli.output import error
from onnxprobe.cli.debug import debug
from onnxprobe.cli.diff import diff
from onnxprobe.cli.extract import extract
from onnxprobe.cli.grad import grad
from onnxprobe.cli.inspect import inspect
from onnxprobe.cli.layers import layers
from onnxprobe.cli.mark import mark
from onnxprobe.cli.merge_stats import merge_stats

# the cyclic collector's thresholds while a command runs (``run``): generation 0 every 50,000 allocations
CLI_GC_THRESHOLD = (50_000, 10, 10)


def _stdout_id() -> tuple | None:
    try:
        st = os.fstat(sys.stdout.fileno())
        return st.st_dev, st.st_ino, st.st_rdev
    except (OSError, ValueError, AttributeError):  # no descriptor (tests' capture)
        return None


def _devnull_id() -> tuple:
    st = os.stat(os.devnull)
    return st.st_dev, st.st_ino, st.st_rdev


def _visible_suggestions(e, ctx) -> None:
    """click's "Possible options" of an unknown flag, without the hidden ones (a command's own --version) and --help,
    which say nothing of what was meant: `mark --json -` was offered --version, `inspect --shape` --help."""
    found = getattr(e, "possibilities", None)
    if not found or ctx is None:
        return
    import difflib

    hidden = {o for p in ctx.command.get_params(ctx) if getattr(p, "hidden", False) for o in (*p.opts, *p.secondary_opts)}
    # alike without their dashes, which made '--op' close to '--json' and '--device' to '--reduce' for click
    asked = (getattr(e, "option_name", "") or "").lstrip("-")
    e.possibilities = [o for o in found if o not in hidden and o != "--help"
                       and difflib.SequenceMatcher(None, asked, o.lstrip("-")).ratio() >= 0.6]


def _elsewhere(e, ctx) -> str:
    """Where an unknown flag of this command is another command's ('--json is an option of layers, diff...'): what
    a user who typed it meant is said, in place of the flags of this command click offered for merely looking alike
    (`diff --save` was offered --shape, `layers --sort` --format)."""
    name = getattr(e, "option_name", None)
    if not name or ctx is None or ctx.command is None:
        return ""
    from typer.main import get_command

    group = get_command(app)  # every command (app_for built this one alone), on this error's path only
    have = [c for c, cmd in getattr(group, "commands", {}).items() if c != ctx.command.name
            and not getattr(cmd, "hidden", False) and any(name in (*p.opts, *p.secondary_opts) for p in cmd.params)]
    if not have:
        return ""
    e.possibilities = []  # (the message is formatted after this)
    return f" ({name} is an option of {', '.join(have)}, not of {ctx.command.name})"


def _sane_columns() -> None:
    """$COLUMNS as the tables read it (``report.console.env_width``), for the help's own Rich console too, which read
    it raw: 0 printed an empty help, 1 a column of box corners, 99999999 ran for minutes. One that is no width (0,
    not a number, 7 digits or more) is dropped (the terminal's own width, or 80), one under 20 made 20."""
    text = os.environ.get("COLUMNS")
    if text is None:
        return
    from onnxprobe.report.console import env_width

    width = env_width(0)
    if width:
        os.environ["COLUMNS"] = str(width)
    else:
        del os.environ["COLUMNS"]


class _Group(TyperGroup):
    """The app's command group: errors that Typer and click raise themselves (a bad option value, a
    missing argument, an unknown option or command) get the one-line format of every other error; help
    that a bare command asks for is shown as usual."""

    def main(self, *args, standalone_mode: bool = True, **kwargs):
        from onnxprobe.errors import OnnxProbeError, debug_enabled

        try:  # typer >= 0.16 vendors click; older ones use it
            from typer._click.exceptions import BadParameter, ClickException, MissingParameter, NoArgsIsHelpError
        except ImportError:  # pragma: no cover
            from click.exceptions import BadParameter, ClickException, MissingParameter, NoArgsIsHelpError

        piped = _stdout_id()
        _sane_columns()
        if os.environ.get("NO_COLOR", "") != "":  # the help's own Rich console: plain text, as every table's
            from typer import rich_utils  # (report.console.SafeConsole); Rich's NO_COLOR kept bold and dim

            rich_utils.COLOR_SYSTEM = None
        try:
            rv = super().main(*args, standalone_mode=False, **kwargs)
        except SystemExit as e:
            # Rich's help printer, whose pipe's reader has gone, sends the rest to /dev/null and exits 1 at once:
            # help that was shown as far as anyone read it is no failure (stdout was not /dev/null before)
            if e.code == 1 and piped != _stdout_id() == _devnull_id():
                sys.exit(0)
            raise
        except NoArgsIsHelpError as e:
            e.show()
            sys.exit(e.exit_code)
        except ClickException as e:
            ctx = getattr(e, "ctx", None)
            _visible_suggestions(e, ctx)
            param = getattr(e, "param", None)  # BadParameter, MissingParameter: an argument named as the usage line does
            if getattr(param, "param_type_name", None) == "argument" and getattr(e, "param_hint", None) is None:
                e.param_hint = f"'{argument_word(param)}'"
            where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
            if isinstance(e, BadParameter) and not isinstance(e, MissingParameter) and \
                    getattr(param, "param_type_name", None) == "option":
                # a flag's bad value as onnxprobe's own checks say one: "--seed abc: ...", not click's
                # "Invalid value for '--seed': ... (see --help)"
                error(_bad_value(e, param, ctx))
            else:
                elsewhere = _elsewhere(e, ctx)
                error(f"{e.format_message()}{elsewhere}{where}")
            sys.exit(e.exit_code)
        except typer.Abort:
            error("aborted")
            sys.exit(1)
        except OnnxProbeError as e:  # raised outside a command (--version's output): as handle_errors says it
            if debug_enabled():
                raise
            error(str(e))
            sys.exit(e.exit_code)
        except OSError as e:  # --help into a stdout that takes nothing (/dev/full); a closed pipe (EPIPE) is
            # typer's own sys.exit(1), read above
            if e.filename is not None:
                raise
            error(f"cannot write to standard output ({e.strerror or type(e).__name__})")
            sys.exit(1)
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)

    def make_context(self, *args, **kwargs):
        with _interrupted_in_one_line():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx):
        from onnxprobe.cli.output import STDOUT_FILE

        STDOUT_FILE.set(None)  # each command's outputs say anew whether one takes stdout (a process runs several: tests)
        with _interrupted_in_one_line():
            return super().invoke(ctx)


@contextlib.contextmanager
def _interrupted_in_one_line():
    """A Ctrl-C while click parses the command line (outside the command's own handler, cli.errors), which
    Typer ended with exit code 130 and no word: the line of every interrupted command."""
    try:
        yield
    except KeyboardInterrupt:
        error("interrupted")
        raise typer.Exit(130) from None


APP_SETTINGS = dict(
    name="onnxprobe",
    cls=_Group,
    help="See inside ONNX models: probe intermediate tensors, find where the numbers go wrong.\n\n"
         "Examples:\n\n"
         "    onnxprobe layers model.onnx --all\n\n"
         "    onnxprobe diff model_int8.onnx model_fp32.onnx\n\n"
         "    onnxprobe grad model.onnx --check\n\n"
         "    onnxprobe COMMAND --help   # each command's options and examples",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    add_completion=False,
)
app = typer.Typer(**APP_SETTINGS)


def _version(value: bool) -> None:
    if value:
        from onnxprobe.cli.output import writing_stdout

        with writing_stdout():  # click would end a closed pipe with exit code 1
            print(f"onnxprobe {__version__}", flush=True)
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[Optional[bool], typer.Option("--version", "-V", callback=_version, is_eager=True, help="Print the version and exit.")] = None,
) -> None:
    """See inside ONNX models: probe intermediate tensors, find where the numbers go wrong.

    Set ONNXPROBE_DEBUG=1 to see full tracebacks.
    """


def reflowed(doc: str) -> str:
    """A command's docstring for its help: each prose paragraph on one line, which the help then wraps at
    the terminal's width (Typer's rich mode keeps the docstring's own line breaks, which broke lines
    mid-sentence at 80 columns); indented blocks (the examples) stay as written."""
    paragraphs = inspect_module.cleandoc(doc or "").split("\n\n")
    return "\n\n".join(p if p.startswith(" ") else " ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


COMMANDS = [
    ("layers", layers, "Every probed tensor with its statistics (in-graph, on the device)."),
    ("diff", diff, "Compare two models layer by layer; show where the error starts."),
    ("grad", grad, "Attach a backward graph; gradient statistics, export, --check."),
    ("inspect", inspect, "What a model holds: versions, inputs/outputs, weights, ops, subgraphs."),
    ("mark", mark, "Write a copy with chosen tensors (or their statistics) as outputs."),
    ("extract", extract, "Write the subgraph between given tensors as a model of its own."),
    ("debug", debug, "An interactive session: the model stays loaded, results cached."),
    ("merge-stats", merge_stats, "Merge dataset statistics of several shards, exactly."),
]


class _Command(TyperCommand):
    """A command whose single-value options given twice with different values are refused, as ``--shape``
    does for one input: click keeps the last (``--device tpu --device cpu`` ran on the CPU while the other
    order failed on 'tpu'). The same value twice is taken."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        ctx.meta[_GIVEN] = _single_values(self.params, args)  # what a bad value's message names (_bad_value)
        return super().parse_args(ctx, args)

    def get_params(self, ctx) -> list:
        """The command's options, and the app's ``--version``/``-V`` (hidden: the app's help lists it): a user
        who types it after a command (``onnxprobe layers --version``) wants the version, not click's guess at
        a command option ('No such option: --version (Possible options: --json, --netron)')."""
        return [*super().get_params(ctx), *_app_version(ctx)]

    def collect_usage_pieces(self, ctx) -> list[str]:
        """The usage line's arguments as README writes them: MODEL, [REFERENCE] (optional), FILES... (several);
        Typer writes a required one as its lower-case name in braces ('{files}...')."""
        pieces = [self.options_metavar] if self.options_metavar else []
        for p in self.get_params(ctx):
            if p.param_type_name == "argument":
                pieces.append(argument_word(p) if p.required else f"[{argument_word(p, bare=True)}]{'...' * (p.nargs != 1)}")
        return pieces


def argument_word(p, bare: bool = False) -> str:
    """A command's argument as its usage line and its errors name it: MODEL, FILES... (several; ``bare``:
    without the dots). Typer's own errors said 'files', its lower-case name, under a usage line of FILES..."""
    name = (p.metavar or p.name or "").upper()
    return name if bare or p.nargs == 1 else f"{name}..."


def _app_version(ctx) -> list:
    """The app's own ``--version`` option (as Typer made it of ``main``'s parameter, whatever its click),
    for a command: its value not passed to the command's function, and left out of the command's help."""
    import copy

    group = ctx.parent.command if ctx.parent is not None else None
    found = [p for p in getattr(group, "params", []) if p.name == "version"]
    options = [copy.copy(p) for p in found]
    for o in options:
        o.expose_value, o.hidden = False, True
    return options


_GIVEN = "onnxprobe.given"  # ctx.meta: option name -> the values given for it, as typed


def _bad_value(e, param, ctx) -> str:
    """A click error about an option's value (a number that is not one, an empty path), in the one shape of
    every bad flag value: the flag, the value as typed, what is wrong ("--seed abc: 'abc' is not a valid
    int"). An option given several values, of which click does not say which failed, is named alone."""
    from onnxprobe.text import as_word

    flag = "/".join(sorted(param.opts, key=len))
    values = (ctx.meta.get(_GIVEN, {}) if ctx is not None else {}).get(param.name, [])
    given = f" {as_word(values[0])}" if len(set(values)) == 1 else ""
    return f"{flag}{given}: {e.message.rstrip('.')}"


def _single_values(params, args: list[str]) -> dict[str, list[str]]:
    """Refuses a single-value option given twice with different values; returns each option's values as typed."""
    from onnxprobe.errors import UsageError

    takes = {o: p for p in params if getattr(p, "opts", None) and not getattr(p, "is_flag", True)
             and not getattr(p, "count", False) and getattr(p, "param_type_name", "") == "option"
             for o in p.opts + p.secondary_opts}
    seen: dict[str, tuple[str, str]] = {}
    given: dict[str, list[str]] = {}
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":  # what follows is arguments
            break
        flag, eq, value = a.partition("=")
        if a.startswith("--") and eq and flag in takes:
            i += 1
        elif a in takes:
            flag, value = a, args[i + 1] if i + 1 < len(args) else None
            i += 2
        elif a.startswith("-") and not a.startswith("--") and a[:2] in takes:  # -oFILE
            flag, value = a[:2], a[2:]
            i += 1
        else:
            i += 1
            continue
        p = takes[flag]
        if value is not None:
            given.setdefault(p.name, []).append(value)
        if p.multiple or value is None:
            continue
        if p.name in seen and seen[p.name][1] != value:
            first, was = seen[p.name]
            raise UsageError(f"{first} given twice with different values ({was!r} and {value!r}); give it once")
        seen.setdefault(p.name, (flag, value))
    return given


def _register(into: typer.Typer, name: str, fn, short: str) -> None:
    into.command(name, cls=_Command, short_help=short, help=reflowed(fn.__doc__))(fn)


for entry in COMMANDS:
    _register(app, *entry)


def app_for(argv: list[str]) -> typer.Typer:
    """The app that runs ``argv``: when it starts with a command's name, an app of that command alone
    (with the same callback, settings and help), else ``app``. Typer turns every registered command into
    a click command (signatures, Annotated options, help) before it runs any: 40-60 ms of a command's
    start for the seven it does not run."""
    entry = next((e for e in COMMANDS if argv and argv[0] == e[0]), None)
    if entry is None:
        return app
    one = typer.Typer(**APP_SETTINGS)
    one.callback()(main)
    _register(one, *entry)
    return one


def run() -> None:
    """The console entry point (``onnxprobe``, ``python -m onnxprobe``): the app, then ``finish``."""
    from onnxprobe.cli.termination import SIGNALLED, exit_on_termination
    from onnxprobe.errors import own_the_process
    from onnxprobe.memory import park_when_done

    _standard_streams()
    try:
        own_the_process()  # process-wide settings (onnxruntime's default logger) are onnxprobe's to set here
        park_when_done()  # the process ends with finish's os._exit: no session need be freed before (memory.py)
        exit_on_termination()
        app = app_for(sys.argv[1:])
        # what the command line has imported (Typer, Rich, the command) lives till finish's os._exit: the cyclic
        # collector need not walk it again, as the one full pass a cache-hit `layers --all` of PP-OCRv4 made did
        # (13 ms of its 27 ms of collections; what the command makes later is collected as before)
        gc.freeze()
        # and collects what the command makes every 50,000 allocations, not Python's 700: a command makes its
        # objects to keep them till it ends (a deep model's 6,000 pairs: their sums, metrics, rows), and the
        # default's young-generation passes walked them again and again (a served `diff --all` of the bench's
        # deep_mlp: 878 collections, 0.63 s of a 3.3 s run; 0.07-0.13 s at this threshold). Cycles are still
        # collected, only in fewer passes (mypy's command line does the same); the API leaves the caller's own.
        gc.set_threshold(*CLI_GC_THRESHOLD)
        app()
    except SystemExit as e:
        finish(SIGNALLED[0] if SIGNALLED else e.code)
    except KeyboardInterrupt:  # before a command's own handler (cli.errors) takes it: while the app is built
        error("interrupted")
        finish(130)
    except Exception:  # what a handler could not say (a terminal that hung up: stderr's writes fail with EIO): left
        from onnxprobe.errors import debug_enabled  # to the interpreter's teardown, with onnxruntime's threads alive,

        if debug_enabled():  # it aborted (exit 134); the signal's code where one came (129), else 1
            raise
        finish(SIGNALLED[0] if SIGNALLED else 1)
    finish(SIGNALLED[0] if SIGNALLED else 0)  # a signal whose SystemExit something swallowed: still its code


def _standard_streams() -> None:
    """A standard stream the shell closed (``<&-``, ``>&-``, ``2>&-``) is Python's ``None``, which every read,
    write, flush and ``isatty`` failed on with an internal error and a traceback. Its descriptor gets /dev/null,
    so that no file the command opens takes it: stdin reads as empty (``</dev/null``); stdout is read-only, so
    that what is written there fails as on any stdout that takes nothing ('cannot write to standard output
    (Bad file descriptor)', exit code 1); stderr writable, so that the messages go nowhere and the exit code
    is the command's own, as with ``2>/dev/null``. A stream in an encoding short of Unicode writes what it
    cannot encode escaped."""
    for fd, name, mode in ((0, "stdin", os.O_RDONLY), (1, "stdout", os.O_RDONLY), (2, "stderr", os.O_WRONLY)):
        if getattr(sys, name) is not None:
            continue
        try:
            os.fstat(fd)
        except OSError:
            got = os.open(os.devnull, mode)
            if got != fd:
                os.dup2(got, fd)
                os.close(got)
        setattr(sys, name, open(fd, "r" if fd == 0 else "w", encoding="utf-8", errors="backslashreplace", closefd=False))
    for stream in (sys.stdout, sys.stderr):
        # one that cannot write all of Unicode (PYTHONIOENCODING=ascii, a C locale Python did not coerce to UTF-8):
        # what it cannot take ('·', '─', a model's names) is written escaped, not an internal UnicodeEncodeError
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
        if not encoding.startswith("utf") and getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


def finish(code) -> None:
    """End the process with ``code`` (what ``sys.exit`` takes), without tearing the interpreter down.

    The teardown frees every module, object and onnxruntime session one by one: 0.15-0.3 s of a 1-2 s
    command (measured: ``layers --all`` on PP-OCRv4 rec, whose probed session has 8,546 kernels), work
    the operating system does at once. Nothing of onnxprobe's waits for it: files are closed where they
    are written. What others registered to run at exit still runs (``atexit``: temporary folders kept
    by the OpenVINO and TensorRT runners, Ray's shutdown), then stdout and stderr are flushed. With
    ``ONNXPROBE_DEBUG=1``, or while a thread that is not a daemon still runs, the exit is the usual one.
    """
    import os
    import threading

    from onnxprobe.errors import debug_enabled

    if isinstance(code, str):  # what sys.exit does with a message: print it, exit 1
        print(code, file=sys.stderr)
        code = 1
    code = 0 if code is None else code
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if debug_enabled() or others or not isinstance(code, int):
        import gc

        gc.unfreeze()  # the usual teardown collects everything, what run() froze too (cycles with a __del__)
        sys.exit(code)
    import atexit

    atexit._run_exitfuncs()  # CPython's own exit runs these the same way (undocumented, present since 3.0)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:  # its reader has gone (`| head`): what is left is read by no one, no failure
            if stream is sys.stdout:
                from onnxprobe.cli.output import reader_gone

                reader_gone()
        except (OSError, ValueError):  # a stream that takes nothing more: what is left cannot be written
            code = code or 1
    os._exit(code)
