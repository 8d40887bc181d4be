"""Writing output files safely: to a temporary file beside the target, renamed over it at the end, so a
crash never leaves half a file. The result has the usual permissions (0666 minus the umask; mkstemp's
0600 would hide reports from other users). A target that exists and is not a regular file (/dev/null,
/dev/stdout, a FIFO) is written in place: renaming over it would replace the device with a file; a symbolic link
is written through (``output_target``).
Reading: ``input_file`` says in one line why a path given as an input file is not one."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO, Callable, Iterator


def file_state(st) -> tuple[int, int, int, int, int]:
    """What says that a file (a model, its external data) is still the one it was (an ``os.stat_result``'s size,
    modification time, inode, device and change time): a normal run during which the model file changed is not
    indexed (``runtime.model_file``), a weight left in its file is not read again (``graph.weight_files``). The change
    time too: an edit whose modification time was put back (os.utime, cp -p, rsync -t) moves it, and an entry would
    otherwise pair the graph the run read with the digest of the bytes edited since."""
    return (int(st.st_size), int(st.st_mtime_ns), int(st.st_ino), int(st.st_dev), int(st.st_ctime_ns))


def open_regular(path: str | os.PathLike, follow: bool = True) -> BinaryIO:
    """``path`` opened for reading when it is a regular file (OSError otherwise): opened without blocking, so that a
    FIFO swapped in since the caller's stat never waits for a writer, then checked. ``follow`` False: a symbolic link
    is refused too (O_NOFOLLOW), as onnx refuses one for external data."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path}: not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def home() -> Path | None:
    """The user's home folder: $HOME when it is an absolute path; where HOME is unset or empty, the user's
    entry in the password database (as ``os.path.expanduser`` reads it). None where neither gives an absolute
    path (HOME relative, or unset in a container run as a uid of its own, ``env -i``, a service): what is
    kept under ~ (the plan cache, the debugger's history) is then not kept, never written under a folder
    named '~' in the current one, which is what ``os.path.expanduser('~')`` gives there."""
    path = os.environ.get("HOME", "")
    if not path:
        import pwd

        try:
            path = pwd.getpwuid(os.getuid()).pw_dir
        except (KeyError, OSError):
            return None
    return Path(path) if os.path.isabs(path) else None


def expand_home(text: str) -> Path | None:
    """``text`` (a path from a setting) with a leading '~' or '~/' put as the home folder ``home`` finds;
    None where it has one and there is no home folder; '~user/...' as ``os.path.expanduser`` has it."""
    if text == "~" or text.startswith("~/"):
        base = home()
        return None if base is None else base / text[2:]
    return Path(os.path.expanduser(text))


def temp_beside(target: Path, suffix: str = ".tmp") -> Path:
    folder = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix, dir=folder)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~umask())
    return Path(tmp)


# Every file onnxprobe has read as input in this process (models, their external data, input arrays), by
# real path: no output may replace one, whichever command or API call writes it and whichever flag named
# it (--json, --save, --html, --export on a model, model B of a diff, or a model's .data file). One
# registry here, consulted by every writer (``atomic_output``, ``graph.io.check_output_path``), instead
# of each command passing "the source" to each of its writers: a writer that forgot was how B and the
# .data files got overwritten.
_INPUTS: dict[str, str] = {}
# and by what the file is, (device, inode): a hard link to an input has its own real path but is the same
# file (written over, the name stops being the model's: the write renames a new file over it). With the real path
# it was read at: an identity counts while that path still names it, for a file deleted since frees its inode to
# the next file made (in a long process, a notebook's or a test run's, a new output's inode was an old input's:
# "is an input model", refused)
_INPUT_FILES: dict[tuple[int, int], tuple[str, str]] = {}


def _identity(path) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path``, through links; None where there is none."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):  # no such file, or a name the system refuses (a NUL in it)
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None


def same_file(a, b) -> bool:
    """Whether paths ``a`` and ``b`` name one regular file (one real path, or hard links to one file)."""
    ia = _identity(a)
    return ia is not None and ia == _identity(b)


def protect(path: str | os.PathLike, what: str) -> None:
    """Record ``path`` (a file this process read; ``what`` says what it is) as never to be written."""
    real = os.path.realpath(path)
    _INPUTS[real] = what
    ident = _identity(path)
    if ident is not None:
        _INPUT_FILES[ident] = (what, real)


def checked_path(path, what: str = "output path") -> str | os.PathLike:
    """``path`` when it is one (a str or os.PathLike); else a UsageError saying what came (an API caller's
    ``save_to=123`` or ``out=None``), not a TypeError from os.path. An empty str is refused too: as a Path it
    is '.', the current folder, which no one meant."""
    from onnxprobe.errors import UsageError

    if isinstance(path, str) and path == "":
        raise UsageError(f"{what}: an empty path; give a file name")
    if isinstance(path, (str, os.PathLike)):
        return path

    from onnxprobe.text import clip, controls

    # what came, as Python writes it (a number as a number, not quoted as if it were a name: ``got int 5``)
    raise UsageError(f"{what}: expected a file path, got {type(path).__name__} {clip(controls(repr(path)), 40)}")


def not_a_folder(path, about: str | None = None) -> None:
    """A UsageError for an output path written with a trailing separator: it names a folder, which a
    Path drops ('out/' is Path('out')), so the file would land where the user named a folder. ``about``: what
    the message starts with (the flag and its value, "--json out/"; '' for nothing: click's error names them);
    the path itself by default."""
    s = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if isinstance(s, str) and s.endswith(tuple(c for c in (os.sep, os.altsep) if c)):
        from onnxprobe.errors import UsageError
        from onnxprobe.text import as_word

        head = as_word(s) if about is None else about
        raise UsageError(f"{head + ': ' if head else ''}ends in {s[-1]!r}, a folder; give a file name")


def input_file(path, what: str, flag=None, pipe_ok: bool = False, shown: str | None = None) -> Path:
    """``path`` as a Path when it is a regular file; else a UsageError naming it and saying why it is not
    (no such file, a folder, or a device, pipe or socket, which a read could wait on for ever), with
    ``what`` the kind of file the flag wants ("input file", ".npz file"...), ``flag`` the flag to name first (or
    the setting, (API parameter, flag): ``errors.error_about``; or ``flag(voice, path)``, the words that name
    the file, ``path`` as shown: "--input x=a.npy").
    ``pipe_ok``: a pipe is taken too (a shell's ``<(...)``, /dev/fd/N, a FIFO), for files read once from
    front to back (``read_bounded``); never for one memory-mapped, sought in or read twice. ``shown``: what the
    message calls the file, where not its path (a dataset's batch: its path in the dataset's folder)."""
    p = Path(checked_path(path, what))
    if p.is_file():
        return p
    if pipe_ok:
        try:
            if stat.S_ISFIFO(p.stat().st_mode):
                return p
        except OSError:
            pass
    from onnxprobe.errors import UsageError, error_about
    from onnxprobe.text import clean

    if not p.exists() and p.is_symlink():  # a link to nothing, or a loop of links: not "no such file"
        why = f"is a symbolic link that leads to no file (broken, or a loop of links; {what} expected)"
    else:
        why = (f"no such {what}" if not p.exists() else f"is a folder ({what} expected)" if p.is_dir()
               else f"is {_special(p)}, not a regular file ({what} expected)")
    shown = clean(str(p) if shown is None else shown)
    about = ((lambda say: flag(say, shown)) if callable(flag) else (*flag, shown) if isinstance(flag, tuple)
             else f"{flag + ' ' if flag else ''}{shown}")
    raise error_about(UsageError, about, f": {why}")


def _special(p: Path) -> str:
    """What a path that is no file nor folder is: named as it is (a command that takes pipes said "a device,
    pipe or socket" of /dev/null)."""
    try:
        mode = p.stat().st_mode
    except OSError:
        return "a device, pipe or socket"
    return ("a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a pipe" if stat.S_ISFIFO(mode) else "a device, pipe or socket")


def read_bounded(p: Path, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of ``p`` (a file or a pipe): over ``limit`` means too big, said by the caller."""
    with open(p, "rb") as f:
        return f.read(limit + 1)


def input_kind(path: str | os.PathLike) -> str | None:
    """What ``path`` is where it is a file ``protect`` recorded ("an input model's external data"), else None."""
    what = _INPUTS.get(os.path.realpath(checked_path(path)))
    if what is None:
        ident = _identity(path)
        what, real = _INPUT_FILES.get(ident, (None, None)) if ident is not None else (None, None)
        if what is not None and _identity(real) != ident:  # that input is gone: its inode is another file's now
            what = None
    return what


def refuse_inputs(path: str | os.PathLike, flag: str | None = None) -> None:
    """A UsageError when ``path`` is a file ``protect`` recorded (or no path at all), its message led by
    ``flag`` with the path ("--json data/b0.npz: is ..."); without a flag, an ``OutputRefused`` that starts
    with the path, which the command line leads with the flag that named it (``errors.writing_as``)."""
    what = input_kind(path)
    if what is not None:
        from onnxprobe.errors import OutputRefused, UsageError
        from onnxprobe.text import as_word

        shown = as_word(os.fspath(path))
        raise (UsageError if flag else OutputRefused)(
            f"{flag + ' ' if flag else ''}{shown}: is {what}; refusing to overwrite it, choose another output path")


def is_stream(st: os.stat_result, fd: int) -> bool:
    """Whether the file ``st`` describes is this process's descriptor ``fd`` (1: stdout, 2: stderr) itself."""
    try:
        std = os.fstat(fd)
    except (OSError, ValueError):
        return False
    return (st.st_dev, st.st_ino) == (std.st_dev, std.st_ino)


def output_target(path: str | os.PathLike, about: str | None = None) -> Path:
    """The file a write to ``path`` lands in: a symbolic link is written through, never replaced by a file
    (renaming over ``path`` itself swapped the link for a regular file: ``--json /dev/stdout`` replaced the
    machine's /dev/stdout), so the file it leads to is the target. A link to this process's standard output
    or error that the shell redirected to a regular file is refused: rewriting that file would clobber what
    the stream holds (``-`` writes to stdout where a flag takes it: --json). ``about``: how the message names the path
    (its flag and the path, as every bad flag value is said), else the path."""
    not_a_folder(path)
    target = Path(checked_path(path))
    if not target.is_symlink():
        try:  # the file the shell redirected stdout or stderr to, named as itself (`--json out.txt > out.txt`)
            st = target.stat()
        except (OSError, ValueError):
            return target
        if stat.S_ISREG(st.st_mode):
            _not_a_stream(st, path, target, about)
        return target
    try:
        st = target.stat()  # through the link: /proc/self/fd/N leads to pipes and terminals realpath cannot name
    except OSError as e:  # a link to a file not there yet: created there, as '>' would, where its folder is
        if e.errno == errno.ELOOP:  # no file at its end to write through: the write would replace the link
            from onnxprobe.errors import UsageError
            from onnxprobe.text import clean

            raise UsageError(f"{clean(str(path))}: is a loop of symbolic links, which leads to no file; give another "
                             "output path") from None
        real = Path(os.path.realpath(target))
        if not real.parent.is_dir():  # said as the plain path into a missing folder is, not "No such file"
            from onnxprobe.errors import UsageError
            from onnxprobe.text import clean

            raise UsageError(f"{clean(str(path))}: is a symbolic link to {clean(os.readlink(target))}, whose folder "
                             f"{clean(str(real.parent))} does not exist")
        return real
    if not stat.S_ISREG(st.st_mode):
        return target  # a device or a pipe: written in place (``atomic_output``)
    _not_a_stream(st, path, target, about)
    return Path(os.path.realpath(target))


def _not_a_stream(st: os.stat_result, path, target: Path, about: str | None) -> None:
    """A UsageError where the regular file ``st`` is this process's standard output or error (a shell's redirect):
    replacing it lost what the stream wrote there (a CSV on stdout, beside --json of the same file, exit 0)."""
    for fd, name in ((1, "standard output"), (2, "standard error")):
        if is_stream(st, fd):
            from onnxprobe.errors import UsageError
            from onnxprobe.text import clean

            json_flag = bool(about) and about.startswith("--json ")
            raise UsageError(f"{about or clean(str(path))}: is this command's {name}, redirected to the file "
                             f"{clean(os.path.realpath(target))}; writing it as a file would clobber what the stream "
                             "holds: give another file" + (" (or --json - for JSON on stdout)" if json_flag else ""))


def replace_keeping_mode(tmp: str | os.PathLike, target: str | os.PathLike) -> None:
    """``os.replace(tmp, target)``, the file it replaces keeping its permissions (a report locked to 0600 became
    0644, the umask's, when written again)."""
    if os.path.exists(target):
        with suppress(OSError):
            os.chmod(tmp, stat.S_IMODE(os.stat(target).st_mode))
    os.replace(tmp, target)


@contextmanager
def atomic_output(path: str | os.PathLike, suffix: str = ".tmp") -> Iterator[Path]:
    """Yields the path to write; on success it becomes ``path``'s target (``output_target``: a link is
    written through; never an input: ``refuse_inputs``)."""
    refuse_inputs(path)
    target = output_target(path)
    if target.exists() and not target.is_file():
        yield target
        return
    tmp = temp_beside(target, suffix)
    try:
        yield tmp
        replace_keeping_mode(tmp, target)
    except BaseException:
        if tmp.exists():
            tmp.unlink()
        raise


def write_file(path: str | os.PathLike, write: Callable[[BinaryIO], None]) -> None:
    """``write(f)`` into ``path`` through ``atomic_output``: a failure (read-only folder, full disk,
    /dev/full) leaves nothing behind and is one UsageError naming the file and the cause. A stream that
    cannot seek (/dev/stdout on a pipe, a FIFO) gets the bytes from a buffer: ``np.save`` asks the file for
    its position after the header, which a pipe refuses, and the header alone had gone out."""
    import io

    from onnxprobe.errors import WriteFailed
    from onnxprobe.text import as_word

    try:
        with atomic_output(path) as tmp:
            with open(tmp, "wb") as f:
                if f.seekable():
                    write(f)
                else:
                    buf = io.BytesIO()
                    write(buf)
                    f.write(buf.getbuffer())
    except OSError as e:
        import errno

        if e.errno == errno.EPIPE:  # a pipe whose reader left (/dev/stdout into `| head`): the rest goes nowhere, as
            return  # the stdout channel's does (cli.output.reader_gone); no error, the command's own exit code
        raise WriteFailed.cannot(as_word(os.fspath(path)), e) from None


def check_output_path(out: str | os.PathLike, *, source: str | os.PathLike | None = None,
                      source_is: str = "an input model", flag: str | None = None) -> Path:
    """Validate a path we are asked to write: its folder exists and it is not the user's model (``source``,
    which ``source_is``; checked before it is read, when ``fileio.protect`` does not know it yet). ``flag``: the
    option that gave it, which the message names first with the path, as every bad flag value is said
    ("--json /x/r.json: folder /x does not exist"); else the message starts with the path."""
    from onnxprobe.errors import OutputRefused, UsageError
    from onnxprobe.text import as_word

    # an empty one led by its flag, as any bad value of it is said ("--json '': ...", the debugger's "save: '': ...")
    o = Path(checked_path(out, f"{flag} ''" if flag else "output path"))
    about = f"{flag} {as_word(os.fspath(out))}" if flag else as_word(os.fspath(out))  # quoted as WriteFailed's
    refused = UsageError if flag else OutputRefused  # without the flag: the command line leads it with its flag
    not_a_folder(out, about)
    if str(out) == "-":  # stdout, for --json (handled before this); a model, a tensor, a page are files of their own
        raise UsageError("'-' is standard output, and this writes a file of its own: give a file name, not '-'")
    if not o.parent.is_dir() if str(o.parent) else False:
        # the nearest of its folders that is there: a file where a folder should be fails the write too, after the work
        there = next((p for p in o.parents if p.exists()), None)
        if there is not None and not there.is_dir():
            raise refused(f"{about}: {as_word(there)} is a file, not a folder")
        raise refused(f"{about}: folder {as_word(o.parent)} does not exist")
    if o.is_dir():
        raise refused(f"{about}: is a folder; give a file name")
    refuse_inputs(out, flag)  # what the process read, by what it is
    if source is not None and o.exists() and Path(source).exists() and (o.resolve() == Path(source).resolve()
                                                                       or same_file(o, source)):
        raise refused(f"{about}: is {source_is}; refusing to overwrite it, choose another output path")
    return output_target(o, about)  # a link is written through, never replaced; one to a redirected stdout is refused


def private_folder(prefix: str, room: int | None = None) -> str:
    """A new folder of this process's own in the temporary folder (``tempfile.mkdtemp``: 0700), named ``prefix``, this
    process's id and '-', after removing those of that prefix whose process has ended without removing its own (a
    SIGKILL, the OOM killer, a signal that landed while it was removed: each left its files for good). ``room``: the
    longest path the folder may have, where /tmp is taken for a temporary folder of a longer path (a Unix socket's
    path holds at most 107 bytes: Ray's session sockets in a long $TMPDIR failed its start)."""
    folder = tempfile.gettempdir()
    if room is not None and len(folder) + len(prefix) + 17 > room and os.access("/tmp", os.W_OK):  # (/, pid, -, 8 more)
        folder = "/tmp"
    try:
        names = [n for n in os.listdir(folder) if n.startswith(prefix)]
    except OSError:
        names = []
    for name in names:
        pid, path = name[len(prefix):].split("-", 1)[0], os.path.join(folder, name)
        try:
            if not pid.isdigit() or int(pid) == os.getpid() or os.lstat(path).st_uid != os.getuid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            import shutil

            shutil.rmtree(path, ignore_errors=True)
        except (OSError, ValueError, OverflowError):  # alive under another user (EPERM), or no such check here
            continue
    return tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=folder)
