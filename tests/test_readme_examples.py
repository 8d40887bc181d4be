"""The README's examples name what exists: every `onnxprobe CMD --flag` of its shell blocks (and of its
inline code that starts with `onnxprobe CMD`) is a flag of CMD, read from the Typer app itself (not from
--help text), and every `api.NAME`, `from onnxprobe... import NAME` and `ALIAS.NAME` (of `import
onnxprobe.X as ALIAS`) of its Python blocks exists. Nothing here runs a model: the examples that need one
are run by hand against the sample and real models (QA); this keeps them from naming a flag or a function
that was renamed or never existed."""

from __future__ import annotations

import importlib
import importlib.util
import re
import shlex
from pathlib import Path

import pytest
import typer.main

from onnxprobe.cli.main import app

README = Path(__file__).resolve().parent.parent / "README.md"
SHELL_LANGS = {"bash", "sh", "shell", "console", ""}
GLOBAL_FLAGS = {"--help", "-h", "--version", "-V"}
_FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
_INVOCATION = re.compile(r"(?:^|(?<=[\s/;&|(`]))onnxprobe[ \t]+(\S+)(.*)")


def command_options() -> dict[str, dict[str, bool]]:
    """Command name -> {flag as typed: whether it takes a value}, hidden options left out (those exist
    only to refuse an old spelling)."""
    group = typer.main.get_command(app)
    table = {}
    for name, cmd in group.commands.items():
        opts = {}
        for p in cmd.params:
            if getattr(p, "param_type_name", "") != "option" or getattr(p, "hidden", False):
                continue
            for o in [*p.opts, *p.secondary_opts]:
                opts[o] = not p.is_flag
        table[name] = opts
    return table


def _blocks(text: str) -> list[tuple[str, str]]:
    return [(lang.lower(), body) for lang, body in _FENCE.findall(text)]


def _words(rest: str) -> list[str]:
    """The words of one command line up to what ends it (a comment, a pipe, `&&`, `;`, a redirection)."""
    lex = shlex.shlex(rest, posix=True, punctuation_chars=True)
    lex.commenters = "#"
    lex.whitespace_split = True
    words = []
    try:
        for w in lex:
            if w and set(w) <= set("();<>|&"):
                break
            words.append(w)
    except ValueError:  # an unclosed quote: what was read so far
        pass
    return words


def shell_invocations(text: str) -> list[tuple[str, list[str], str, bool]]:
    """(command, its words, the line, whether it is a whole command line) for each `onnxprobe CMD ...` of
    the shell blocks and of inline code, and for each inline `CMD --flag` of a command CMD, which names a
    flag (`layers --save`, `diff --grad`) without its value (elsewhere `onnxprobe o max` is a Netron
    metric's name, not a command line)."""
    lines = []
    for lang, body in _blocks(text):
        if lang in SHELL_LANGS:
            lines += body.replace("\\\n", " ").splitlines()
    commands = set(command_options())
    found = []
    for line in lines:
        for m in _INVOCATION.finditer(line):
            found.append((m.group(1), _words(m.group(2)), line.strip(), True))
    comments = [line.split(" # ", 1)[1] for line in lines if " # " in line]  # `layers --save` in a comment
    for span in re.findall(r"`([^`\n]+)`", "\n".join([_FENCE.sub("", text), *comments])):
        words = span.split()
        if words[:1] == ["onnxprobe"] and words[1:2] and words[1] in commands:
            found.append((words[1], _words(span.split(None, 2)[2] if len(words) > 2 else ""), span, True))
        elif words[:1] and words[0] in commands and words[1:2] and words[1].startswith("--"):  # `diff --grad`
            found.append((words[0], _words(span.split(None, 1)[1]), span, False))
    return found


def flag_problems(text: str) -> list[str]:
    options = command_options()
    problems = []
    for cmd, words, line, whole in shell_invocations(text):
        if cmd not in options:
            if not cmd.startswith("-"):
                problems.append(f"`onnxprobe {cmd}`: no such command ({line})")
            elif cmd not in GLOBAL_FLAGS:
                problems.append(f"`onnxprobe {cmd}`: no such option of onnxprobe ({line})")
            continue
        known = options[cmd]
        i = 0
        while i < len(words):
            w = words[i]
            i += 1
            if w == "--":
                break
            if not re.match(r"--?[A-Za-z]", w):
                continue
            flag, eq, _ = w.partition("=")
            if flag in GLOBAL_FLAGS:
                continue
            if flag not in known:
                problems.append(f"onnxprobe {cmd} has no option {flag} ({line})")
            elif known[flag] and not eq:
                if whole and i >= len(words):
                    problems.append(f"onnxprobe {cmd} {flag} takes a value, none given ({line})")
                i += 1
    return problems


def python_problems(text: str) -> list[str]:
    api = importlib.import_module("onnxprobe.api")
    problems = []
    for lang, body in _blocks(text):
        if lang not in ("python", "py"):
            continue
        aliases = {"api": api}
        for mod, alias in re.findall(r"^\s*import\s+(onnxprobe(?:\.\w+)*)\s+as\s+(\w+)", body, re.MULTILINE):
            aliases[alias] = importlib.import_module(mod)
        for mod, names in re.findall(r"^\s*from\s+(onnxprobe(?:\.\w+)*)\s+import\s+([\w, ]+)", body, re.MULTILINE):
            module = importlib.import_module(mod)
            for name in (n.strip().split(" as ")[0] for n in names.split(",")):
                if name and not hasattr(module, name) and importlib.util.find_spec(f"{mod}.{name}") is None:
                    problems.append(f"from {mod} import {name}: no such name")
        for alias, module in aliases.items():
            for name in re.findall(rf"(?<![\w.]){alias}\.(\w+)", body):
                if not hasattr(module, name):
                    problems.append(f"{alias}.{name}: {module.__name__} has no {name}")
    # the prose's `api.NAME` too (`api.Tolerance('max_abs', atol=0.5)`, `api.RUNTIMES`...)
    for name in set(re.findall(r"`[^`\n]*?(?<![\w.])api\.(\w+)", _FENCE.sub("", text))):
        if not hasattr(api, name):
            problems.append(f"api.{name}: onnxprobe.api has no {name}")
    return sorted(set(problems))


def test_readme_flags_exist():
    text = README.read_text(encoding="utf-8")
    assert len(shell_invocations(text)) > 50  # the parse found the examples
    assert flag_problems(text) == []


def test_readme_python_names_exist():
    assert python_problems(README.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("example, expected", [
    ("```bash\nonnxprobe layers model.onnx --no-such-flag x   # a comment --also-ignored\n```\n", "--no-such-flag"),
    ("```bash\nonnxprobe diff a.onnx b.onnx \\\n    --inputs-dir d/ --stats\n```\n", "--stats"),  # mark's, not diff's
    ("```bash\nonnxprobe extract m.onnx -o b.onnx --inputs a\n```\n", "--inputs"),  # hidden: only refuses
    ("```bash\nonnxprobe layrs model.onnx\n```\n", "no such command"),
    ("Run `onnxprobe grad model.onnx --chek` to check.\n", "--chek"),
    ("Then `onnxprobe layers` (with `--save`): `onnxprobe debug m.onnx --seed 1 --device cpu --json x`.\n", "--json"),
    ("As `layers --save` writes it, `grad --save acts.npz` (`show T --bins 3`: the debugger's).\n", "--save"),
    ("```bash\nonnxprobe diff m.onnx --vs-npz a.npz  # as `layers --saev` wrote it\n```\n", "--saev"),
    ("```bash\nonnxprobe layers model.onnx --json\n```\n", "takes a value"),
])
def test_a_wrong_flag_is_found(example, expected):
    problems = flag_problems(example)
    assert problems and expected in problems[0], problems


def test_what_is_not_a_flag_is_left_alone():
    text = ("```bash\nonnxprobe layers model.onnx --input x=-1 --range 1:3 | grep -v --foo  # --bar\n"
            "onnxprobe merge-stats a.json - --json m.json && echo --baz\n"
            "pip install 'onnxprobe[torch]'  # onnxprobe-models\n```\n"
            "```\nonnxprobe: error: --from does not cut\n```\n")
    assert flag_problems(text) == []


@pytest.mark.parametrize("example", [
    "```python\nfrom onnxprobe import api\nres = api.no_such_function('m.onnx')\n```\n",
    "```python\nfrom onnxprobe.api import no_such_name\n```\n",
    "```python\nimport onnxprobe.torch as opt\nopt.no_such_door(m, (x,), 'm.onnx')\n```\n",
    "In the API, `api.NoSuchTolerance('max_abs')`.\n",
])
def test_a_wrong_api_name_is_found(example):
    assert python_problems(example)
