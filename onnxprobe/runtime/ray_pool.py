"""Batches on a Ray cluster (``--ray``): one actor per worker, each building its worker once (the models
loaded with the same runner as in one process) and processing the batches sent to it; results come back
as they are done, each a mergeable partial the caller merges with the exact merge of one process.

Plain Ray actors and ``ray.wait``, no scheduler of our own: every batch is sent at the start, round-robin.
A worker process that dies is restarted by Ray and its pending batches retried there (``max_restarts``,
``max_task_retries``: tasks are pure, so at-least-once is fine); when Ray's retries are used up, the batch
is sent to another actor, up to ``ATTEMPTS`` times. A batch whose processing raises comes back as that
exception, for the caller to report by file name.

By default a private local cluster is started (``address="local"``: never one that ``ray start`` left
running) with ``workers`` CPUs, quiet (no dashboard, no log forwarding, Ray's own stdout lines kept
aside), its session files in a temporary folder removed at the end, and shut down at the end, with every
process it started waited for. ``address="auto"`` or ``"host:port"`` or ``"ray://host:port"`` joins an
existing cluster instead (its address checked first: Ray itself retries an unreachable one for minutes).
"""

from __future__ import annotations

import contextlib
import io
import numbers
import os
import shutil
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

from onnxprobe.fileio import private_folder
from onnxprobe.errors import ExecutionError, MissingExtra, UsageError, debug_enabled, first_line, setting_error

ATTEMPTS = 3  # sends of one batch (Ray's own retry included in the first)
WAIT_EXIT_S = 10.0  # how long the processes of a local cluster get to exit after ray.shutdown()


ADDRESS = ("address", "--ray-address")  # RayOptions(address=) as the command line names it (errors.setting_error)


@dataclass(frozen=True)
class RayOptions:
    """``address``: None for a local cluster started for the run, "auto", "host:port" or
    "ray://host:port" for an existing one; ``workers``: actors (default: the cluster's CPUs)."""

    address: str | None = None
    workers: int | None = None

    def __post_init__(self) -> None:
        w = self.workers
        if w is not None:
            if not isinstance(w, numbers.Integral) or isinstance(w, bool) or w < 1:
                raise setting_error(UsageError, ("workers", "--ray-workers"), f"{w!r}: give a whole number of actors, at least 1")
            object.__setattr__(self, "workers", int(w))  # frozen
        if self.address is not None:
            if not isinstance(self.address, str):
                raise setting_error(UsageError, ADDRESS, f"{self.address!r}: expected auto, HOST:PORT or ray://HOST:PORT")
            check_address(self.address)


@dataclass
class Executor:
    """What processed the batches: JSON ``{"engine": ..., "workers": N}``; the seconds Ray took to start
    (cluster and actors) and the seconds of the batches themselves are kept for benchmarks."""

    engine: str = "local"
    workers: int = 1
    startup_seconds: float = 0.0
    run_seconds: float = 0.0
    messages: list[str] = field(default_factory=list)  # what Ray printed (worker died, task retried)
    digests: dict[int, str] = field(default_factory=dict)  # batch index -> its inputs' digest (api.datasets)

    def __post_init__(self) -> None:
        # checked when made (api.Executor): a wrong value would otherwise surface in a report, or never
        if self.engine not in ("local", "ray"):
            raise UsageError(f"Executor engine: expected 'local' or 'ray', got {type(self.engine).__name__} {self.engine!r}")
        if not isinstance(self.workers, numbers.Integral) or isinstance(self.workers, bool) or self.workers < 1:
            raise UsageError(f"Executor workers: expected a positive int, got {type(self.workers).__name__} {self.workers!r}")
        for k in ("startup_seconds", "run_seconds"):
            v = getattr(self, k)
            if not isinstance(v, numbers.Real) or isinstance(v, bool) or not v >= 0:
                raise UsageError(f"Executor {k}: expected a number of seconds >= 0, got {type(v).__name__} {v!r}")
        if not isinstance(self.messages, list) or not isinstance(self.digests, dict):
            raise UsageError("Executor messages, digests: expected a list and a dict")

    def sample_digests(self) -> list[str]:
        """The digests of the batches' inputs in batch order (the reports' ``sample_digests``)."""
        return [self.digests[k] for k in sorted(self.digests)]

    def notes(self) -> list[str]:
        """What people should know of the run (a worker that died and was replaced)."""
        if any("worker died" in m or "actor was restarted" in m for m in self.messages):
            return ["a Ray worker died during the run: Ray restarted it and ran its batches again (nothing is missing)"]
        return []

    def to_dict(self) -> dict:
        return {"engine": self.engine} if self.engine == "local" else {"engine": self.engine, "workers": self.workers}


def require_ray():
    # Ray's C++ crash handler (absl's, read at import) takes SIGTERM too: a SIGTERM while it stood printed a stack
    # trace, and its removal at shutdown left SIGTERM's default action for the rest of the run (killed: -15, not 143)
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
    try:
        import ray
    except ImportError:
        raise MissingExtra(("ray", "--ray"), "ray", "Ray") from None
    return ray


def check_address(address: str) -> tuple[str, int] | None:
    """(host, port) of an address to check for reachability, None for "auto"; UsageError when malformed."""
    if address == "auto":
        return None
    rest = address[len("ray://"):] if address.startswith("ray://") else address
    host, sep, port = rest.rpartition(":")
    if not sep or not host or "/" in host or not port.isdigit() or not 0 < int(port) < 65536:  # (http://h:1: no Ray scheme)
        raise setting_error(UsageError, ADDRESS, f"{address!r}: expected auto, HOST:PORT or ray://HOST:PORT")
    return host.strip("[]"), int(port)


def _resolved(address: str) -> str:
    """The HOST:PORT that Ray's `auto` stands for (RAY_ADDRESS, the last cluster's file, a running GCS), so that it
    is checked as a given address is: Ray retries an unreachable one for minutes."""
    if address != "auto":
        return address
    try:  # Ray's own reading of `auto`: a private function, so a Ray without it leaves `auto` to Ray, unchecked
        from ray._private.services import canonicalize_bootstrap_address
    except (ImportError, AttributeError):
        return address
    try:
        found = canonicalize_bootstrap_address(address)
    except (ConnectionError, RuntimeError, ValueError):
        found = None
    if found is None:
        raise setting_error(ExecutionError, ADDRESS, "auto: no running Ray cluster found on this machine (nor in "
                            "RAY_ADDRESS); start one (ray start --head) or give its address")
    return found


HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])  # + an empty SETTINGS frame


def _reachable(address: str, given: str | None = None) -> None:
    """A Ray address that something answers as Ray does: a gRPC server (Ray's GCS, or Ray Client's), which answers
    HTTP/2's client preface with a SETTINGS frame. A TCP connect alone let a port where another service listens (the
    dashboard's 8265, any web server) through, and Ray then retried it for minutes, its C++ log on stderr. Not
    checked with TLS on (RAY_USE_TLS: the preface would need a TLS handshake first)."""
    hp = check_address(address)
    if hp is None:
        return
    said = address if given in (None, address) else f"{given} ({address})"
    try:
        with socket.create_connection(hp, timeout=3) as sock:
            if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
                return
            sock.sendall(HTTP2_PREFACE)
            head = b""
            while len(head) < 9:
                got = sock.recv(9 - len(head))
                if not got:
                    break
                head += got
    except socket.timeout:
        raise setting_error(ExecutionError, ADDRESS, f"{said}: something listens there but does not answer as a Ray "
                            "cluster would (no reply in 3 s); give the address of its head (ray start prints it)") from None
    except OSError as e:
        raise setting_error(ExecutionError, ADDRESS, f"{said}: nothing answers there ({e.strerror or type(e).__name__}); "
                            "start the cluster (ray start --head) or give its address") from None
    if len(head) < 9 or head[3] != 4:  # no HTTP/2 SETTINGS frame: no gRPC server (an HTTP/1 server answers 400)
        raise setting_error(ExecutionError, ADDRESS, f"{said}: what answers there is no Ray cluster (not Ray's gRPC); "
                            "give the address of its head, HOST:6379 (ray start prints it), or ray://HOST:10001")


def _descendants(pid: int) -> set[int]:
    """The processes under ``pid`` (Linux /proc; empty elsewhere)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return set()
    for e in entries:
        if not e.isdigit():
            continue
        try:
            with open(f"/proc/{e}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(e))
    out: set[int] = set()
    todo = [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return b") Z " not in f.read()  # a zombie has exited
    except OSError:
        return False


def _reap(pids: set[int]) -> None:
    """Wait for the processes a local cluster started to exit; kill (by id) any still there after
    WAIT_EXIT_S (Ray's agents can linger for minutes)."""
    deadline = time.monotonic() + WAIT_EXIT_S
    while time.monotonic() < deadline:
        for p in list(pids):
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(p, os.WNOHANG)
        pids = {p for p in pids if _alive(p)}
        if not pids:
            return
        time.sleep(0.1)
    for p in pids:
        with contextlib.suppress(OSError):
            os.kill(p, signal.SIGKILL)


def _one_line(e: BaseException) -> BaseException:
    """The exception a batch's failure stands for: the original one inside a RayTaskError."""
    from ray.exceptions import RayActorError, RayTaskError

    if isinstance(e, RayTaskError):
        cause = getattr(e, "cause", None)
        return cause if isinstance(cause, BaseException) else ExecutionError(first_line(e))
    if isinstance(e, RayActorError):
        if getattr(e, "actor_init_failed", False):  # its set-up raised (the model not at its path on that node,
            # onnxprobe not installed there): Ray keeps the error's text alone, its last line naming it
            said = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
            return ExecutionError(f"its set-up failed: {said[-1][:300]}" if said else "its set-up failed")
        return ExecutionError(f"the worker process died ({type(e).__name__})")
    return e


class OnnxprobeWorker:
    """The body of an actor: ``factory()`` builds the worker once (models loaded, sessions made on
    first use); ``run(batch)`` returns ``worker(batch)``."""

    def __init__(self, factory: Callable):
        self.worker = factory()

    def run(self, batch):
        return self.worker(batch)


def ray_map(factory: Callable, batches: list, options: RayOptions, executor: Executor,
            done: Callable[[object, object], None]) -> None:
    """``done(batch, partial or the exception it raised)`` for every batch, as they are done."""
    ray = require_ray()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_IGNORE_UNHANDLED_ERRORS", "1")
    from ray.exceptions import RayActorError, RayError, RayTaskError

    start = time.perf_counter()
    local = options.address is None
    # its own, swept by a later run where a signal landed while it was removed (Ray's processes still writing in it)
    # (its sockets' paths, ~62 bytes below it, 'session_<date>_<time>_<pid>/sockets/plasma_store', must hold in 107)
    temp = private_folder("onnxprobe-ray-", room=45) if local else None
    before = _descendants(os.getpid()) if local else set()
    term = signal.getsignal(signal.SIGTERM)  # ours (cli.main), which Ray replaces
    said = io.StringIO()  # Ray prints "(raylet) ..." lines to sys.stdout from a thread: keep them aside
    outer = sys.stdout
    try:
        with contextlib.redirect_stdout(said), _ray_environment(temp):
            workers = _init(ray, options, temp)
            actor = ray.remote(num_cpus=1, max_restarts=1, max_task_retries=1)(OnnxprobeWorker)
            actors = [actor.remote(factory) for _ in range(workers)]
            executor.engine, executor.workers = "ray", workers
            try:
                ray.get([a.__ray_ready__.remote() for a in actors])
            except RayError as e:
                raise ExecutionError(f"a Ray worker could not start: {first_line(_one_line(e))[:300]}") from None
            _sigterm_back(term)
            executor.startup_seconds = time.perf_counter() - start
            pending = {actors[k % workers].run.remote(b): (b, k % workers, 1) for k, b in enumerate(batches)}
            while pending:
                [ref], _ = ray.wait(list(pending), num_returns=1)
                b, on, attempt = pending.pop(ref)
                try:
                    got = ray.get(ref)
                except RayTaskError as e:
                    got = _one_line(e)
                except RayActorError as e:
                    if attempt < ATTEMPTS:  # Ray's retries are used up: another actor takes it
                        nxt = (on + 1) % workers
                        pending[actors[nxt].run.remote(b)] = (b, nxt, attempt + 1)
                        continue
                    got = _one_line(e)
                with contextlib.redirect_stdout(outer):  # the caller's own output is not Ray's
                    done(b, got)
            executor.run_seconds = time.perf_counter() - start - executor.startup_seconds
    finally:
        with contextlib.redirect_stdout(said), _quiet_stderr():
            with contextlib.suppress(Exception):
                ray.shutdown()
        _sigterm_back(term)  # (its core worker's shutdown put back SIGTERM's default action, where it had its own)
        executor.messages = [ln for ln in said.getvalue().splitlines() if ln.strip()]
        if local:
            _reap(_descendants(os.getpid()) - before)
            shutil.rmtree(temp, ignore_errors=True)


@contextlib.contextmanager
def _quiet_stderr():
    """File descriptor 2 sent to /dev/null while Ray shuts down: its C++ core worker writes there itself, and a run
    cut short (Ctrl-C, SIGTERM) with batches still out got 15-30 lines of "task_manager.cc: Failed to push error to
    driver" before its one line. Nothing of onnxprobe's is said meanwhile."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no descriptor 2 (a test's capture): nothing to quiet
        yield
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def _init(ray, options: RayOptions, temp: str | None) -> int:
    import logging  # here: only a Ray run needs it

    quiet = dict(log_to_driver=False, logging_level=logging.ERROR)
    term = signal.getsignal(signal.SIGTERM)
    try:
        if options.address is None:
            n = options.workers or os.cpu_count() or 1
            ray.init(address="local", num_cpus=n, include_dashboard=False, _temp_dir=temp, **quiet)
            return n
        address = _resolved(options.address)
        _reachable(address, options.address)
        # `auto` as given: Ray reads the cluster's token (~/.ray/auth_token) for `auto` alone, and the address it
        # stands for, given instead, failed on a cluster with token authentication. Ray's retries of a cluster that
        # refuses it write ~20 lines of its C++ log to stderr: off, the error says why (not with ONNXPROBE_DEBUG=1)
        with contextlib.nullcontext() if debug_enabled() else _quiet_stderr():
            ray.init(address="auto" if options.address == "auto" else address, **quiet)
    except (OSError, RuntimeError, ValueError, ray.exceptions.RayError) as e:  # (its AuthenticationError: a RayError; a
        # ConnectionError is an OSError, and so is a socket path longer than a Unix socket's 107 bytes)
        raise ExecutionError(f"Ray did not start: {first_line(e)[:300]}{_auth_hint(options.address)}") from None
    except SystemExit as e:
        # a SIGTERM while Ray starts meets Ray's own handler, which exits with the signal's number (15): the exit
        # code of a terminated run, 128 + it, as ours gives once it is back
        if e.code == signal.SIGTERM and term is not None and term not in (signal.SIG_DFL, signal.SIG_IGN):
            raise SystemExit(128 + signal.SIGTERM) from None
        raise
    finally:
        _sigterm_back(term)
    cpus = int(ray.cluster_resources().get("CPU", 0))
    if options.workers and options.workers > max(cpus, 1):  # each worker takes a CPU: the others would wait for ever
        raise setting_error(UsageError, ("workers", "--ray-workers"),
                            f"{options.workers}: the Ray cluster at {options.address} has {cpus} CPU{'s' if cpus != 1 else ''}, "
                            f"and each worker takes one: give at most {max(cpus, 1)}")
    return options.workers or max(cpus, 1)


def _sigterm_back(term) -> None:
    """Our SIGTERM handler ``term`` back in place. Ray's core worker puts its own there, in Python at ``ray.init``
    (a crash report, exit 15) and in C once its workers run (exit 1, nothing said, where Python's view of the
    handler still reads ours: the call is made whatever it reads), so that SIGTERM ends a Ray run as any run
    (temporary files removed, exit 143)."""
    if term is None:
        return
    with contextlib.suppress(ValueError, OSError):  # (not the main thread: left as it is)
        signal.signal(signal.SIGTERM, term)


def _auth_hint(address: str | None) -> str:
    """Where a cluster's token may be what failed: an explicit address, which Ray gives no token of its own accord."""
    if address in (None, "auto") or os.environ.get("RAY_AUTH_MODE", "").lower() == "token":
        return ""
    from pathlib import Path

    if not (Path.home() / ".ray" / "auth_token").is_file() and not os.environ.get("RAY_AUTH_TOKEN"):
        return ""
    return ("; a cluster with token authentication (ray start turns it on where ~/.ray/auth_token exists) takes an "
            "explicit address only with RAY_AUTH_MODE=token set (its token in ~/.ray/auth_token or RAY_AUTH_TOKEN); "
            "--ray-address auto on its head reads the token itself")


@contextlib.contextmanager
def _ray_environment(temp: str | None):
    """The environment of a private local cluster's run (``temp``: its folder; None: an existing cluster, left as it
    is), put back after it: token authentication with a token of its own, in a file in that folder, which the
    cluster's processes read (RAY_AUTH_TOKEN_PATH): Ray's default made one and wrote it to ~/.ray/auth_token, where
    onnxprobe writes nothing. A setting of the user's own (RAY_AUTH_MODE, a token) is left alone."""
    import secrets

    keys = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
    if temp is None or any(os.environ.get(k) for k in keys):
        yield
        return
    token = os.path.join(temp, "auth_token")
    with open(os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        f.write(secrets.token_hex(32))
    before = {k: os.environ.get(k) for k in keys}
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=token)
    _reread_auth()
    try:
        yield
    finally:
        for k, v in before.items():  # (Ray sets RAY_AUTH_MODE itself too)
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        _reread_auth()


def _reread_auth() -> None:
    """This process's Ray reads its authentication settings again (it keeps them from its import, and the driver then
    offered the cluster no token): as Ray itself does where it turns token authentication on. A Ray without these
    (no token authentication) has nothing to read."""
    try:
        from ray._raylet import AuthenticationTokenLoader, Config
    except ImportError:
        return
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()
