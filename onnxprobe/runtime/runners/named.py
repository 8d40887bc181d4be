"""``NamedRunner``: a runner whose errors say whose they are. A diff runs two runners; an error of one
(the runtime refusing its model, a run that fails, a model it cannot read) starts with the side's name and
file ("B (b.onnx): onnxruntime: ..."), whichever method raised it: one wrapper, not a word in each message."""

from __future__ import annotations

import functools
from contextlib import contextmanager

from onnxprobe.errors import ExecutionError, ModelError


def name_error(e: BaseException, who: tuple[str, str]) -> None:
    """Start ``e``'s message (and its command line's) with ``who`` (the API's words, the command line's), once:
    the same exception object, its class and attributes kept; ``e.side`` is the API's words."""
    if not isinstance(e, (ExecutionError, ModelError)) or getattr(e, "side", None) is not None:
        return
    cli = e.cli_message or str(e)
    e.args = (f"{who[0]}: {e}",) + tuple(e.args[1:])
    e.cli_message = f"{who[1]}: {cli}"
    e.side = who[0]


@contextmanager
def naming(who: tuple[str, str] | None):
    """``name_error`` for each error the block raises (where ``who`` is given): work on one side's model done
    outside its runner (api.grad_plan's own runs of it, for diff --grad) is named as its runner's is."""
    try:
        yield
    except (ExecutionError, ModelError) as e:
        if who is not None:
            name_error(e, who)
        raise


class NamedRunner:
    """``runner`` as it is (its attributes read and set through this), each error its methods raise named
    by ``who`` (``name_error``). ``unnamed``: the runner itself, for runs that are not this side's alone
    (diff's one run of both models)."""

    def __init__(self, runner, who: tuple[str, str]):
        object.__setattr__(self, "unnamed", runner)
        object.__setattr__(self, "who", who)

    def __getattr__(self, name):
        if name.startswith("__") or name in ("unnamed", "who"):  # (copy and pickle ask before __init__ ran)
            raise AttributeError(name)
        value = getattr(self.unnamed, name)
        if not callable(value) or isinstance(value, type):
            return value

        @functools.wraps(value)
        def named(*args, **kwargs):
            try:
                return value(*args, **kwargs)
            except (ExecutionError, ModelError) as e:
                name_error(e, self.who)
                raise

        return named

    def __setattr__(self, name, value):
        setattr(self.unnamed, name, value)
