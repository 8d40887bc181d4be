"""How a signal ends a command: SIGTERM and SIGHUP (a `kill`, a closed terminal, a CI timeout) as an exception, so
that what is being written is cleaned up (``fileio.atomic_output``: no hidden OUT.tmp left beside the output) and
the exit code says which signal it was (128 + its number, as the shell reports it); Ctrl-C as KeyboardInterrupt.

None of them is raised while a module is being imported: an exception raised while a C extension initialises breaks
it (onnxruntime's read 'ImportError: initialization failed', which a path that goes on without what failed caught,
running the whole command before it ended; onnx's and numpy's end the process, exit 134 or 139). The signal is sent
again a moment later, until it lands outside every import (``runtime.interrupt.held_back`` does the same around
onnxruntime's import, for the handlers of others)."""

from __future__ import annotations

import sys

# the exit code of the termination signal received, whatever SystemExit reaches ``run``: Ray's wait turns the
# handler's SystemExit(143) raised inside it into a SystemExit(1) of its own (a SIGTERM of a --ray run read as a
# failed verdict)
SIGNALLED: list[int] = []


def exit_on_termination() -> None:
    """The handlers of SIGTERM, SIGHUP and SIGINT, and the hook that sends again a signal whose exception Python
    swallowed (module doc)."""
    import signal

    def handle(signum, frame):
        if _importing(frame):
            _again(signum)
            return
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        SIGNALLED.append(128 + signum)
        raise SystemExit(128 + signum)

    previous = sys.unraisablehook

    def again(unraisable) -> None:
        # the handler's SystemExit raised where Python cannot pass it on (a __del__, as subprocess.Popen's while
        # Ray shuts down): Python printed "Exception ignored in ..." and the command went on to exit 0 (stderr
        # is /dev/null during Ray's shutdown). The signal is sent again, a moment later: sent from here (or
        # waited for), its handler would run in this hook, whose exceptions Python prints and swallows too
        exc = unraisable.exc_value
        if isinstance(exc, SystemExit) and SIGNALLED and exc.code == SIGNALLED[-1]:
            _again(exc.code - 128)
            return
        previous(unraisable)

    sys.unraisablehook = again
    for name in ("SIGTERM", "SIGHUP", "SIGINT"):
        if not hasattr(signal, name):
            continue
        if name == "SIGINT" and signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            continue  # ignored by whoever started the process (nohup, a shell's background job): left so
        try:
            signal.signal(getattr(signal, name), handle)
        except (ValueError, OSError):  # not the main thread, or a platform without it
            pass


def _importing(frame) -> bool:
    """Whether the interrupted code runs inside an import (importlib's frames below it)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _again(signum: int) -> None:
    """Signal ``signum`` sent again a moment later, from a thread this does not wait for."""
    import _thread

    _thread.start_new_thread(_send_later, (signum,))


def _send_later(signum: int) -> None:
    import signal
    import time

    time.sleep(0.05)
    signal.raise_signal(signum)
