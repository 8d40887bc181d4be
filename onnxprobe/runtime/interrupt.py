"""Runs that Ctrl-C stops: the interactive session's way to call onnxruntime.

onnxruntime's ``run`` is one C call; Python only sees a Ctrl-C after it returns, which for a long run is
much too late. Here the call runs in a worker thread while the calling (main) thread waits in short
slices, so the ``KeyboardInterrupt`` arrives at once; the run is then stopped through
``RunOptions.terminate`` (onnxruntime checks it between nodes, Loop and Scan bodies included) and the
``KeyboardInterrupt`` is raised again once the worker has finished, so nothing keeps running behind the
user's back.

- ``call_interruptibly(fn, ...)``: any blocking call; on Ctrl-C, ``on_interrupt()`` is called and, when
  the worker does not stop within ``grace`` seconds, it is left to finish alone (its result is dropped).
``runtime.ort.run_bound(..., interruptible=True)`` runs onnxruntime this way, with a terminate flag.

Never prints.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from typing import Any, Callable


POLL_S = 0.05


@contextlib.contextmanager
def held_back():
    """A Ctrl-C (or a SIGTERM, a SIGHUP) in the block is raised when it ends (the main thread's handler, called then), not in it: for imports of C
    extensions, which a KeyboardInterrupt raised while they initialise breaks. onnxruntime's turns it into
    ImportError('import numpy failed'), a caller that goes on without what failed then importing it again and the
    Ctrl-C lost; onnx's (nanobind) ends the process ('terminate called after throwing an instance of
    nanobind::python_error', exit code 134, or a segmentation fault), more often while a session builds beside it
    (``api.diff_lean``). Elsewhere than the main thread, or with a handler not Python's, the block runs as it is."""
    import signal

    # SIGTERM and SIGHUP too, where their handlers are Python's (the command line's, cli.main): a kill while
    # onnxruntime's extension initialised read 'internal error: ImportError: initialization failed', and a cache-hit
    # path that went on without what failed ran the whole command before it ended
    names = ("SIGINT", "SIGTERM", "SIGHUP")
    sigs = [getattr(signal, n) for n in names if hasattr(signal, n)] if threading.current_thread() is threading.main_thread() else []
    previous = {s: signal.getsignal(s) for s in sigs}
    previous = {s: h for s, h in previous.items() if callable(h)}  # ignored / the system's default: not held back
    if not previous:
        yield
        return
    held: list = []
    for s in previous:
        signal.signal(s, lambda signum, frame: held.append((signum, frame)))
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        if held:
            previous[held[0][0]](*held[0])


def call_interruptibly(fn: Callable[..., Any], *args, on_interrupt: Callable[[], None] | None = None,
                       grace: float = 10.0, **kwargs) -> Any:
    """``fn(*args, **kwargs)`` in a worker thread; Ctrl-C in the calling thread interrupts the wait.

    Only the main thread receives KeyboardInterrupt; from any other thread this simply calls ``fn``."""
    if threading.current_thread() is not threading.main_thread():
        return fn(*args, **kwargs)
    done = threading.Event()
    box: dict[str, Any] = {}
    context = contextvars.copy_context()  # the caller's (errors.speaking: whose words its messages use)

    def work() -> None:
        try:
            box["value"] = context.run(fn, *args, **kwargs)
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["error"] = e
        finally:
            done.set()

    t = threading.Thread(target=work, name="onnxprobe-run", daemon=True)
    t.start()
    try:
        while not done.wait(POLL_S):
            pass
    except KeyboardInterrupt:
        if on_interrupt is not None:
            on_interrupt()
        deadline = time.monotonic() + grace
        while not done.is_set() and time.monotonic() < deadline:
            try:
                done.wait(POLL_S)
            except KeyboardInterrupt:  # a second Ctrl-C while stopping: keep stopping
                pass
        raise
    if "error" in box:
        raise box["error"]
    return box.get("value")
