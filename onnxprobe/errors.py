"""The errors onnxprobe raises on purpose. The CLI turns each into one line and an exit code."""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Mapping

from onnxprobe.text import MAX_LINE, clean, clip, some


class OnnxProbeError(Exception):
    """Base class: a problem we can explain to the user in one line. ``cli_message``: the same line as the
    command line says it, where the message names an API parameter (``setting_error``)."""

    exit_code = 1
    cli_message: str | None = None
    about: str | None = None  # the input file the message names, where it names one (api.datasets.relabel)
    batch: str | None = None  # the dataset batch the message names (api.datasets.relabel)
    reason: str | None = None  # with ``batch``: the message without the batch's name, where it did not name it itself
    line_limit: int = MAX_LINE  # the length past which the command line clips its one line


class UsageError(OnnxProbeError):
    """The command line or API call is wrong (bad flag value, unknown input name...). Exit code 2."""

    exit_code = 2


class WriteFailed(UsageError):
    """A file could not be written after its checks passed (a folder that takes no new file, a full disk): the
    message names the file first ("PATH: cannot write it (...); nothing written"). A type to catch (the debugger
    leads it with its command: ``session.commands.table.writing``; the command line with the flag:
    ``writing_as``), not a message to reword. Exit code 2 where the path was the problem (a read-only folder), 1
    where the machine was (``cannot``: a full disk, an I/O error), as a stdout that takes nothing is."""

    @classmethod
    def cannot(cls, shown: str, e: OSError) -> "WriteFailed":
        """The failure to write file ``shown`` (as the message names it) that ``e`` says."""
        import errno

        err = cls(f"{shown}: cannot write it ({e.strerror or e}); nothing written")
        if getattr(e, "errno", None) in (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG):
            err.exit_code = 1
        return err


class OutputRefused(WriteFailed):
    """An output path refused where it is written, after the command's checks of its flags passed: a file the
    process learnt it read only then (an input model's external data, known once the model is read), or a
    check made by one that does not know the flag (``fileio.check_output_path`` without one, an API write).
    Its message names the path first, as WriteFailed's does, so that ``writing_as`` leads it with the flag
    ("--json PATH: is an input model's external data; ..."), as every other refused output is said."""


@contextmanager
def writing_as(lead: str):
    """A write whose failure or refusal after its checks (``WriteFailed``, ``OutputRefused``) is said in the shape
    of a bad flag value, led by ``lead``: the flag that named the file ("--json PATH: cannot write it (...)"), a
    debugger command's ("save:", "stats: --json")."""
    try:
        yield
    except WriteFailed as e:
        led = WriteFailed(f"{lead} {e}")
        led.exit_code = e.exit_code
        raise led from None


class ModelError(OnnxProbeError):
    """The model file cannot be read or is not valid ONNX. Exit code 1."""


class OpsetTooOld(ModelError):
    """A gradient needs an op version newer than the model's opset (``needed``): the caller may convert the
    model to a newer opset and try again."""

    def __init__(self, message: str, needed: int):
        super().__init__(message)
        self.needed = needed


class UnknownShape(ModelError):
    """A gradient rule needs a rank or shape that shape inference could not tell (an If branch the feed
    does not take, where no run can tell either)."""


class NoGradientRule(ModelError):
    """An op between the loss and a wanted tensor that has no gradient (rule). Its message is made from its
    parts, so that the If/Loop/Scan body it lies in can be named (``within``) without reading the text."""

    def __init__(self, op: str, node: str, hint: str, needed: list[str], supported: list[str], where: str | None = None,
                 through: list[str] = ()):
        self.op, self.node, self.hint, self.needed, self.supported, self.where = op, node, hint, needed, supported, where
        self.through = list(through)
        inside = f" (in {where})" if where else ""
        # the wanted tensors whose gradient passes through it, and the node's inputs they reach it by (where
        # those are other tensors: a body's node is reached through the outer tensors it reads)
        between = some(needed or through)
        if needed and set(through) - set(needed):
            between += f" (through its input{'s' if len(through) > 1 else ''} {some(through)})"

        def say(voice: Voice) -> str:
            return (f"cannot differentiate op {op} at node {node!r} ({hint}){inside}; it lies between the loss and "
                    f"{between}. Use {voice(('wrt', '--wrt'))} to ask only for gradients that do "
                    f"not pass through it (onnxprobe has gradient rules for {len(supported)} ops: README, 'Gradient rules')")

        super().__init__(say(Voice(cli=False)))
        self.cli_message = say(Voice(cli=True))

    def within(self, where: str) -> "NoGradientRule":
        """The same error, saying which body the node lies in."""
        return NoGradientRule(self.op, self.node, self.hint, self.needed, self.supported, where, self.through)


class RuleRefused(ModelError):
    """A gradient rule that cannot handle this use of its op (an Einsum diagonal, a size left dynamic). Made from its
    parts, so that the If/Loop/Scan body the node lies in can be named (``within``), as ``NoGradientRule`` is."""

    def __init__(self, op: str, node: str, why: str, where: str | None = None):
        self.op, self.node, self.why, self.where = op, node, why, where
        inside = f" (in {where})" if where else ""
        super().__init__(f"cannot differentiate {op} node {node!r}{inside}: {why}")

    def within(self, where: str) -> "RuleRefused":
        return RuleRefused(self.op, self.node, self.why, where)


class ExecutionError(OnnxProbeError):
    """onnxruntime (or another runtime) could not build a session for, or run, the model. Exit code 1."""


class SessionError(ExecutionError):
    """The runtime could not load the model at all (an opset it lacks, a graph it refuses): nothing to do
    with the inputs. Exit code 1."""


class DeviceUnavailable(ExecutionError):
    """The device asked for cannot be used here (no usable CUDA provider...): nothing about the model or
    its inputs, so no hint about them follows the message. Exit code 1."""


class NothingToCut(UsageError):
    """``extract`` was given no tensor to cut at. Its message names the API's parameters; its ``cli_message``
    the command line's flags (a type to catch, not a message to reword)."""


class CutLeaks(UsageError):
    """``extract``'s inputs do not cut the outputs off from the rest of the graph: ``tensors`` reach them around
    the cut, and ``cut_inputs`` is the whole list that cuts (the given inputs and those, less any it would leave
    unused). Its line gives that list whole, ready to paste (clipped only past ``line_limit``)."""

    line_limit = 20_000

    def __init__(self, message: str, tensors: list[str], cut_inputs: list[str]):
        super().__init__(message)
        self.tensors, self.cut_inputs = tensors, cut_inputs


class MissingExtra(UsageError):
    """An optional dependency is not installed: the message names the extra to install. ``what`` needs it: text,
    or a setting (API parameter, flag) with the ``value`` it was given, said in each reader's words ("runtime
    (--runtime) openvino" to the API, "--runtime openvino" on the command line)."""

    def __init__(self, what: str | tuple[str, str], extra: str, module: str, value: str = ""):
        def say(voice: Voice) -> str:
            named = what if isinstance(what, str) else " ".join(filter(None, [voice(what), value]))
            return f"{named} needs {module}, which is not installed: pip install 'onnxprobe[{extra}]'"

        super().__init__(say(Voice(cli=False)))
        self.cli_message = say(Voice(cli=True))
        self.extra = extra


def plain_class(e: OnnxProbeError) -> type[OnnxProbeError]:
    """The class of ``e`` to raise the same error again under another message (a dataset's batch named in it):
    ``e``'s own, or, for a class built from arguments of its own (``NoGradientRule``, ``CutLeaks``), its nearest
    base built from a message alone, so that the kind of error (and its exit code) is kept."""
    return next(c for c in type(e).__mro__ if issubclass(c, OnnxProbeError) and "__init__" not in c.__dict__)


RUNTIME_OPTIONS = ("runtime_options", "--runtime-option")  # a setting as the API and the command line name it


def setting_error(cls: type[OnnxProbeError], what: tuple[str, str], rest: str) -> OnnxProbeError:
    """A ``cls`` error about one setting's value, ``what`` = (API parameter, command-line flag): the message
    names both ("vs_device (--vs-device) cuda: ..."), the command line's the flag alone ("--vs-device cuda: ..."),
    one check serving both."""
    return hinted_setting_error(cls, what, rest, lambda say: "")


def error_about(cls: type[OnnxProbeError], what, rest: str) -> OnnxProbeError:
    """A ``cls`` error whose message starts with what it is about, then ``rest`` (its separator included: ": ...").
    ``what``: a setting, (API parameter, flag) or (API parameter, flag, value): a ``setting_error``
    ("ops (--op) Conv2: ...", the command line's "--op Conv2: ..."); ``what(voice)``, said in each reader's
    words (``Voice.given``: "--input x=a.npy"); or text as the user wrote it (a debugger's command), said as it
    is. Checks shared by the API, the command line and the debugger take one."""
    if callable(what):
        return settings_error(cls, lambda say: f"{what(say)}{rest}")
    if isinstance(what, str):
        return cls(f"{what}{rest}")
    value = " ".join(what[2:])
    return setting_error(cls, (what[0], what[1]), f"{value}{rest}" if value else rest.lstrip(" "))


class Voice:
    """How a message names what its reader gives: ``voice((API parameter, flag))`` a setting ("loss (--loss)"
    to the API, "--loss" on the command line); ``voice.given(setting, NAME, VALUE)`` a value given to one
    input ("--input x=1e39"); ``voice.either(api, cli)`` advice said one way to a caller of the API
    ("api.inspect(model).nodes lists them") and another on the command line ("`onnxprobe inspect --nodes MODEL`
    lists them"); ``voice.cli``: which of the two it is. The command line's words for a flag are the words
    ``speaking`` gives it where a reader set that setting otherwise (the debugger's ``seed N``), and so are
    those of advice named by what it is for (``either(api, cli, about=LIST_NODES)``) where that reader has
    commands of its own for it (the debugger's `nodes`, not `onnxprobe inspect --nodes`)."""

    def __init__(self, cli: bool):
        self.cli = cli
        self.words = _WORDS.get() if cli else {}
        self.advice = _ADVICE.get() if cli else {}

    def __call__(self, what: tuple[str, str]) -> str:
        return self.flag(what[1]) if self.cli else f"{what[0]} ({what[1]})"

    def flag(self, flag: str) -> str:
        """``flag`` as this reader sets it (the flag itself but where ``speaking`` says otherwise)."""
        return self.words.get(flag, (flag,))[0]

    def given(self, what: tuple[str, str], name: str, value: str) -> str:
        """Setting ``what`` given ``value`` for input ``name``: "--shape x=1x3", the debugger's "input x random 1x3"."""
        form = self.words.get(what[1], (what[1], "{name}={value}"))[1] if self.cli else "{name}={value}"
        return f"{self(what)} {form.format(name=name, value=value)}"

    def either(self, api: str, cli: str, about: str | None = None) -> str:
        """``api`` or ``cli``; ``about``: what the advice is for (``LIST_NODES``...), by which a reader with
        commands of its own for it says its own words (``speaking``'s ``advice``)."""
        if not self.cli:
            return api
        return self.advice.get(about, cli) if about is not None else cli


# advice that names a command-line command, by what it is for: a reader with commands of its own for that (the
# debugger, ``speaking``) gives its own words for it, the whole advice, where the command line names its commands
LIST_NODES = "list the nodes"  # `onnxprobe inspect --nodes MODEL`
LIST_OPS = "list the op types"  # `onnxprobe inspect MODEL`
GLOB_QUOTES = "names and globs"  # a name glob matched nothing: case-sensitive, and quoted in a shell
STATS_ONLY = "statistics without values"  # a body's values that cannot stack: `layers` without --save, `mark --stats`

# flag -> (how the reader sets that setting, how it gives an input's NAME and VALUE for it): ``speaking``'s
_WORDS: ContextVar[Mapping[str, tuple[str, str]]] = ContextVar("onnxprobe_words", default={})
# advice (LIST_NODES...) -> the reader's words for it: ``speaking``'s
_ADVICE: ContextVar[Mapping[str, str]] = ContextVar("onnxprobe_advice", default={})


@contextmanager
def speaking(words: Mapping[str, tuple[str, str]], advice: Mapping[str, str] | None = None):
    """Within the block, messages say the settings in ``words`` (flag -> (the reader's words for it, its form of
    "{name}={value}")) as the reader sets them: the debugger's commands run in its words (``seed -1``, ``input x
    1e39``, not ``--seed -1``, ``--input x=1e39``); and the advice in ``advice`` (what it is for, ``LIST_NODES``...
    -> the reader's words) names the reader's own commands (`nodes`, not `onnxprobe inspect --nodes`). The
    command line's words (``cli_message``, a ``said`` note's) are made in them; the API's stay the API's."""
    token, told = _WORDS.set(words), _ADVICE.set(advice or {})
    try:
        yield
    finally:
        _ADVICE.reset(told)
        _WORDS.reset(token)


def settings_error(cls: type[OnnxProbeError], say) -> OnnxProbeError:
    """A ``cls`` error that names settings or gives advice anywhere in its text: ``say(voice)`` writes the
    message, calling ``voice((API parameter, flag))`` for each setting it names and ``voice.either(api, cli)``
    for advice (a ``Voice``); the message says "loss (--loss)", the command line's "--loss" (``setting_error``'s
    form, for a message that does not start with the setting)."""
    e = cls(say(Voice(cli=False)))
    e.cli_message = say(Voice(cli=True))
    return e


class Said(str):
    """Text that is not an error (a note in a result's ``notes``) said in the API's words, carrying the command
    line's (``cli``): made by ``said``, printed by the command line as ``cli_words`` gives it."""

    cli = ""


def said(say) -> str:
    """``say(voice)`` (``Voice``, as for ``settings_error``) as text in the API's words whose ``cli_words`` are
    the command line's: for notes that name settings or give advice."""
    api, cli = say(Voice(cli=False)), say(Voice(cli=True))
    if api == cli:
        return api
    out = Said(api)
    out.cli = cli
    return out


def cli_words(text: str) -> str:
    """``text`` as the command line says it (a ``said`` note's ``cli``; any other text as it is)."""
    return getattr(text, "cli", "") or text


def in_words(text: str, say: Voice) -> str:
    """``text`` as ``say``'s reader says it: a ``said`` text's command-line words (``cli_words``) to the command
    line, its API words to the API; any other text as it is. For a said text made of said parts
    (``said(lambda say: f"... {in_words(part, say)}")``): an f-string of a said text keeps only its API words."""
    return cli_words(text) if say.cli else str(text)


_CLI_READS: ContextVar[bool] = ContextVar("onnxprobe_report_words", default=False)


@contextmanager
def command_line_words():
    """Within the block, reports (tables, HTML pages, overlays: ``api.reports``, ``report``) are read by the command
    line or the debugger: what they say in two wordings (``said``: a criterion's advice, a verdict's, a note's, a
    footer's "see --json") is said in the command line's words; outside it, in the API's."""
    token = _CLI_READS.set(True)
    try:
        yield
    finally:
        _CLI_READS.reset(token)


def report_voice() -> Voice:
    """The ``Voice`` of whoever reads the report being made: the command line's within ``command_line_words``,
    else the API's (``api.text``, ``api.html`` called from a notebook)."""
    return Voice(cli=_CLI_READS.get())


def hinted_setting_error(cls: type[OnnxProbeError], what: tuple[str, str], rest: str, hint) -> OnnxProbeError:
    """``setting_error``'s message followed by ``hint(voice)`` (``Voice``): advice said in each reader's words."""
    sep = "" if rest.startswith(":") else " "
    return settings_error(cls, lambda say: f"{say(what)}{sep}{rest}{hint(say)}")


def debug_enabled() -> bool:
    """ONNXPROBE_DEBUG=1: show tracebacks instead of one-line errors."""
    return env_switch("ONNXPROBE_DEBUG")


OFF_WORDS = ("", "0", "false", "no", "off")  # what turns a switch in the environment off, in any case


def env_switch(name: str) -> bool:
    """Whether the environment's switch ``name`` is on (ONNXPROBE_DEBUG, ONNXPROBE_NO_CACHE, ONNXPROBE_KEEP_MALLOC):
    unset, empty, 0, false, no and off are off (ONNXPROBE_NO_CACHE=false turned the cache off: any value but "" and "0"
    read as on); any other value is on."""
    return os.environ.get(name, "").strip().lower() not in OFF_WORDS


_own_process = [False]


def own_the_process() -> None:
    """The command line's process is onnxprobe's own: settings that hold for the whole process (onnxruntime's
    default logger) may be changed. Through the API they are the user's, and left as they are."""
    _own_process[0] = True


def owns_the_process() -> bool:
    return _own_process[0]


_SGR = re.compile(r"\x1b\[[0-9;]*m")  # terminal colours other libraries put in their messages (torch.export's)


def first_line(e: BaseException) -> str:
    """The first line of an exception's message, or its type's name when it has none: for one-line errors.
    Colour codes other libraries put in their messages are dropped (they read as '[96m' once escaped)."""
    lines = [ln.strip() for ln in _SGR.sub("", str(e)).strip().splitlines() if ln.strip()]
    if len(lines) > 1 and lines[0].endswith(":"):  # a line that announces its cause: the cause with it (torch's
        return f"{lines[0]} {lines[1]}"  # "... unless it is captured completely with torch.compile. Got graph break/error:")
    return lines[0] if lines else type(e).__name__


def internal_error_text(e: BaseException) -> str:
    """The one line shown for an unexpected exception (the traceback needs ONNXPROBE_DEBUG=1)."""
    first = (str(e).strip().splitlines() or [""])[0][:300]
    return f"internal error: {type(e).__name__}: {first} (run with ONNXPROBE_DEBUG=1 for the traceback)"


def path_error_text(e: OSError) -> str:
    """The one line shown for a path the system refuses (a name too long, no permission, a read-only
    folder): the path (its start, when it is long) and the system's reason."""
    return f"{clip(clean(e.filename), 120)}: {e.strerror or 'cannot be used'}"
