"""A disk cache of probed copies: the second ``layers`` (or ``diff``, debugger run...) of the same model
with the same selection skips the rewrite (``graph.expose``).

An entry is keyed by onnxprobe's version and code (``code_fingerprint``), the model's skeleton (graph, small constants, names, types and
the shapes it carries; not the big weights' values, which a probed copy does not depend on), the probed
tensors, how they are probed and the input shapes. It holds the probed copy as a skeleton (its big
weights stubbed: they are the model's own, put back from the model on load, so an entry costs the
graph, not the weights) and the probes as JSON.

Where: ``$ONNXPROBE_CACHE_DIR`` (``~`` expanded), else ``$XDG_CACHE_HOME/onnxprobe`` (when absolute), else ``~/.cache/onnxprobe``;
bounded by ``$ONNXPROBE_CACHE_SIZE`` (``size_limit``: whole bytes, or with K, M, G, T as --max-memory; default 512 MiB; the oldest entries go first); safe to
delete at any time. ``ONNXPROBE_NO_CACHE=1`` or ``--no-cache`` (``RunConfig.cache``) turns it off. A
cache that cannot be read or written is skipped silently: it only ever saves time.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from onnxprobe import __version__
from onnxprobe.errors import UsageError, env_switch
from onnxprobe.fileio import expand_home, home, umask
from onnxprobe.text import clip, quote
from onnxprobe.types import Probe, TensorRef

if TYPE_CHECKING:  # onnx and the graph's skeletons only where an entry is made or read as a model: a cached
    # `layers` run (runtime.direct) reads and writes its entries with read_entry / write_entry, without onnx
    import onnx

DEFAULT_SIZE = 512 * 2**20

try:  # CPython's own blake2b: importing hashlib loads OpenSSL's libcrypto first (3.5 MB resident), which a cache
    # key does not need (numpy.random imports hashlib anyway, through secrets, when it makes random inputs)
    from _blake2 import blake2b
except ImportError:  # another Python: hashlib's
    from hashlib import blake2b


def cache_dir() -> Path | None:
    """$ONNXPROBE_CACHE_DIR (a leading ~ expanded, as a shell does only when unquoted: '~/c' made ./~/c), else
    $XDG_CACHE_HOME/onnxprobe where that is an absolute path (the XDG spec: a relative one is ignored),
    else ~/.cache/onnxprobe; None where that is needed and there is no home folder (``fileio.home``): no cache."""
    text = os.environ.get("ONNXPROBE_CACHE_DIR", "")
    if text:  # '~/c' kept as it is where there is no home folder: enabled refuses it
        return expand_home(text) or Path(text)
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):
        return Path(xdg) / "onnxprobe"
    base = home()
    return None if base is None else base / ".cache" / "onnxprobe"


def _broken_link(d: Path) -> tuple[Path, str] | None:
    """(the link, what it is) where ``d`` or a folder above it is a symbolic link that leads nowhere: a link
    to a path that does not exist, or a loop of links (mkdir says only "File exists"); None otherwise."""
    for p in (d, *d.parents):
        try:
            if not p.is_symlink():
                continue
            p.stat()
        except OSError as e:
            if e.errno == errno.ELOOP:
                return p, "a loop of symbolic links"
            try:
                return p, f"a link to {quote(os.readlink(p))}, which does not exist"
            except OSError:
                return p, "a symbolic link that leads nowhere"
    return None


def enabled(config_cache: bool = True) -> bool:
    """Whether the cache is used; raises UsageError when ``$ONNXPROBE_CACHE_SIZE`` cannot be read or the
    cache's folder is a file (a setting a user made and that would otherwise be ignored without a word)."""
    on = config_cache and not env_switch("ONNXPROBE_NO_CACHE")
    if on:
        size_limit()
        d = cache_dir()
        if d is None:  # no home folder to keep it in: off, as a cache that cannot be written
            return False
        where = "ONNXPROBE_CACHE_DIR " if os.environ.get("ONNXPROBE_CACHE_DIR") else "the plan cache's folder "
        fix = "point it at a folder, or set ONNXPROBE_NO_CACHE=1"
        if str(d).startswith("~"):  # '~/c' with no home folder to put for the '~': it made ./~/c
            raise UsageError(f"{where}{quote(str(d))}: no home folder for its '~' (HOME unset or not an absolute path); "
                             f"give an absolute path, or set ONNXPROBE_NO_CACHE=1")
        above = next((a for a in d.parents if a.exists()), None) if not d.exists() else None
        # either would never hold an entry: every run would rebuild, without a word
        broken = _broken_link(d)
        if broken is not None:
            link, what = broken
            at = f"{quote(str(d))} is" if link == d else f"{quote(str(d))} lies under {quote(str(link))},"
            raise UsageError(f"{where}{at} {what}; {fix}")
        if d.exists() and not d.is_dir():
            raise UsageError(f"{where}{quote(str(d))} is a file, not a folder; {fix}")
        if above is not None and not above.is_dir():
            raise UsageError(f"{where}{quote(str(d))} lies under the file {quote(str(above))}; {fix}")
        if os.environ.get("ONNXPROBE_CACHE_DIR"):  # a folder the user chose must take files (not one under /proc)
            try:
                d.mkdir(parents=True, exist_ok=True)
                with tempfile.TemporaryFile(dir=d):
                    pass
            except OSError as e:
                raise UsageError(f"{where}{quote(str(d))}: cannot write in it ({e.strerror or e}); {fix}") from None
    return on




def size_limit() -> int:
    """``$ONNXPROBE_CACHE_SIZE`` in bytes: a whole number, optionally with K, M, G or T (powers of 1024;
    "512M", "512MiB" and "512MB" all mean 512 MiB); DEFAULT_SIZE when unset."""
    from onnxprobe.runtime.sizes import parse_size  # --max-memory's parser, one for every size setting

    text = os.environ.get("ONNXPROBE_CACHE_SIZE", "").strip()
    return parse_size(clip(text, 40), "ONNXPROBE_CACHE_SIZE", whole=True, minimum=0) if text else DEFAULT_SIZE


def key(model: onnx.ModelProto, refs: list[TensorRef], options: dict, input_shapes: dict | None) -> str:
    return key_of({"model": structure(model), "refs": [[r.name, r.kind, list(r.scope)] for r in refs],
                   "options": {k: (sorted(v) if isinstance(v, (set, frozenset)) else v) for k, v in sorted(options.items())},
                   "inputs": {k: list(v) for k, v in sorted((input_shapes or {}).items())}})


def structure(model: onnx.ModelProto) -> str:
    """The hash of what a probed copy depends on: the model's skeleton, not the values of its big weights,
    initializers or Constant nodes (an entry keeps both as stubs, filled from the model it is used for;
    hashing PP-OCRv4 rec's 10 MB of Constant weights took 70 ms of every run)."""
    from onnxprobe.graph.skeleton import skeleton

    return blake2b(skeleton(model, constants=True).SerializeToString(), digest_size=32).hexdigest()


# what an entry holds, how probes read it (rows, pair outputs) and how its graph is laid out: a change bumps it, so that a
# development build never reads an entry an older build of the same version wrote (8: tensors of old-opset models
# whose shapes only the version-converted inference tells are planned onto the host when small; 13: tensors whose
# shapes only folding the shape computations tells, graph.shape_values; 14: Σ|x| over rows longer than 1024 elements
# or of a length not known in float64, graph.stats_nodes.ABS_ROW_MAX; 15: pair rows with one Cast and max |d| at
# its argmax; 16-17: declared shapes the inputs contradict left out, graph.stale_shapes, and the merged graph's IR
# and cone names; 18: an If branch's scalar carried as [1], Probe.raw_scalar; 19: If branches' runtime shapes;
# 20: statistics rows of 11 columns, the unit of the sums last, and int64 tensors centred in the integers;
# 21: a string tensor's dtype is "string", not numpy's "object"; 22: int64 extremes kept in the type, not moved an
# ulp up where distinct values round to one float64; 23: tensors of sibling bodies that share a name are probes of
# their own, TensorRef.qualified; 24: sequences and optionals are not probed; 25: small model outputs are summarised
# on the host too, exactly; 26: the pair rows' max relative error divides by max(|b|, the smallest subnormal);
# 27: Probe.planned_shape, the dims a float row was laid out for, checked against the run's; 28: zeros counted
# with Equal; 29: com.microsoft float ops' outputs typed from onnxruntime's schemas, graph.contrib_types: an
# entry's refs kept the unknown dtype of a model such an op holds; 30: a body's inputs keep the types inference
# gave them, so such an op reading a Loop's carried value is typed too; 31: shape folding reads Constant nodes'
# value_int(s) / value_float(s) forms too, graph.constants; 32: a pair row whose size may be 0 takes its argmax
# over |d| and a trailing 0, graph.pair_nodes; 33: the branches of an unnamed If are scoped by its listed name,
# graph.walk; 34: the .json holds the digest of both files, ``_digest``; 35: an entry's files are KEY.probed.onnx
# and KEY.probed.json, ``ENTRY``; 36: a Constant's value_float(s) is a weight to grad, graph.constants.constant_of;
# 37: a boolean tensor is no structural pair of an integer one, match.integers; 38: the digest holds the key too;
# 39: int64 / uint64 tensors summarised in the graph carry their exact extremes, Probe.exact_extremes; 40: block
# summaries without Σ|x| and the zero count, Probe.stats_extras, the option ``extras`` in the key; 41: a diff's rows
# without extras leave out the argmax, and an introduced error's Σ|d| too, graph.pair_nodes.EXTRAS; 42: a pair row's
# Σ|d| is its last sum, not its first; 43: the .json's first line holds the digest of the text after it, which may
# hold a part parsed later, ``Deferred``; 44: ai.onnx.ml ops' outputs typed from onnxruntime's schemas too)
FORMAT = 44


def key_of(parts: dict) -> str:
    """An entry's key: the hash of ``parts`` (JSON), onnxprobe's version, the entries' FORMAT and the code
    that made it (``code_fingerprint``)."""
    return blake2b(json.dumps({"version": __version__, "format": FORMAT, "code": code_fingerprint(), **parts},
                              sort_keys=True, default=str).encode(), digest_size=16).hexdigest()


_CODE: dict[str, str] = {}


def code_fingerprint(root: str | None = None) -> str:
    """The name, size and modification time of every module of onnxprobe (under ``root``, default the
    package's folder), hashed: an edited module of a development checkout, or a reinstall of another build of
    the same version, is another key, where FORMAT alone relied on each change that alters a plan bumping it
    (a QA session read stale plans that hid its own fix). About 2 ms per process, once."""
    root = root or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if root not in _CODE:
        h = blake2b(digest_size=16)
        for folder, subs, files in os.walk(root):
            subs[:] = sorted(d for d in subs if d != "__pycache__")
            for f in sorted(files):
                if f.endswith(".py"):
                    path = os.path.join(folder, f)
                    try:
                        st = os.stat(path)
                    except OSError:
                        continue
                    h.update(f"{os.path.relpath(path, root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
        _CODE[root] = h.hexdigest()
    return _CODE[root]


def _ref(d: dict) -> TensorRef:
    d = dict(d)
    if not isinstance(d.get("scope") or [], list) or not isinstance(d.get("shape") or [], list):
        raise ValueError("not an entry's TensorRef")
    d["scope"] = tuple(d.get("scope") or ())
    if d.get("shape") is not None:
        d["shape"] = tuple(d["shape"])
    return TensorRef(**d)


def load(k: str, base: onnx.ModelProto, restore: bool = True) -> tuple[onnx.ModelProto, list[Probe], list[str]] | None:
    """(probed copy, probes, warnings) of entry ``k``, its stubbed weights taken from ``base`` (``restore``
    False: left as stubs, for a runner that takes them apart); None on a miss or an entry that does not
    fit ``base``."""
    from onnxprobe.graph.skeleton import weights_of

    got = load_entry(k, weights_of(base), restore)
    if got is None:
        return None
    model, meta = got
    warnings = meta.get("warnings", [])
    if not strings(warnings):
        return None
    probes = probes_from(meta.get("probes"), {o.name for o in model.graph.output})
    return None if probes is None else (model, probes, list(warnings))


def probes_from(probes, outputs: set[str]) -> list[Probe] | None:
    """The probes of an entry's JSON (``store`` wrote them as ``Probe.record``), each checked to be one ``store`` could
    have written for a graph of these ``outputs`` (``_fits``); None where any is not."""
    if not isinstance(probes, list) or not all(isinstance(p, dict) and isinstance(p.get("ref"), dict) for p in probes):
        return None
    try:
        # every field as ``store`` wrote it (Probe.record): a field added to Probe comes back without a line here
        probes = [Probe(**{**p, "ref": _ref(p["ref"]),
                           "planned_shape": tuple(p["planned_shape"]) if p.get("planned_shape") is not None else None})
                  for p in probes]
    except (KeyError, TypeError, ValueError):
        return None
    if not all(_fits(p, outputs) for p in probes):
        return None
    return probes


def strings(x) -> bool:
    """Whether ``x`` (from an entry's JSON) is a list of str."""
    return isinstance(x, list) and all(isinstance(v, str) for v in x)


def _fits(p: Probe, outputs: set[str]) -> bool:
    """Whether a probe read back from an entry is one ``store`` could have written for its graph: each
    field of its type, each output it names one of the graph's (an edited or damaged entry is a miss, not
    a KeyError at the run). Plain loops, not all() over generators: this runs for every probe of every
    cache hit (330 on PP-OCRv4 det, where the generators took 3 ms)."""
    r = p.ref
    for v in (p.stats_output, p.stats_sums, p.shape_output, p.raw_output, p.exact_extremes):
        if v is not None and not (isinstance(v, str) and v in outputs):
            return False
    if not isinstance(p.stats_block, int) or isinstance(p.stats_block, bool) or p.stats_block < 0:
        return False
    for v in (p.stats_on_host, p.raw_for_stats, p.raw_scalar, p.stats_extras, r.is_output):
        if not isinstance(v, bool):
            return False
    for v in (r.name, r.node, r.op_type, r.direction, r.kind, *r.scope):
        if not isinstance(v, str):
            return False
    if not isinstance(r.index, int) or not (r.dtype is None or isinstance(r.dtype, str)) \
            or not (r.grad_of is None or isinstance(r.grad_of, str)):
        return False
    if r.shape is not None:
        for d in r.shape:
            if d is not None and not isinstance(d, (int, str)):
                return False
    return True


def store(k: str, model: onnx.ModelProto, probes: list[Probe], warnings: list[str]) -> None:
    store_entry(k, model, {"probes": [p.record() for p in probes], "warnings": warnings})


def load_entry(k: str, weights: dict[str, onnx.TensorProto], restore: bool = True) -> tuple[onnx.ModelProto, dict] | None:
    """(model, metadata) of entry ``k``, its stubbed weights put back from ``weights`` (by name; with
    ``restore`` False left as stubs, for a caller that gives onnxruntime the weights apart); None on a
    miss, a damaged entry or one whose weights are not all there."""
    import onnx

    from onnxprobe.graph.skeleton import fill_stubs

    got = read_entry(k)
    if got is None:
        return None
    data, meta = got
    try:
        model = onnx.load_model_from_string(data)
    except Exception:  # noqa: BLE001 - a damaged entry is a miss
        return None
    if not fill_stubs(model, weights, copy=restore):  # initializers', and Constants', by their output
        return None
    touch(k)
    return model, meta


class Deferred:
    """A part of an entry's metadata left as JSON text till it is asked for (``write_entry``'s ``later``): a diff's
    template (7 MB of JSON for 6,000 pairs: 0.13 s to parse) is parsed while the merged graph's session builds, not
    before the build starts. Its bytes are under the entry's digest, checked when the entry was read; ``value``
    parses them (a ValueError for text that is no JSON)."""

    def __init__(self, text: bytes):
        self._text = text

    def value(self):
        return json.loads(self._text)


MAGIC = b"onnxprobe-entry "  # the .json file's first line: MAGIC, the digest in hex, a newline


def read_entry(k: str) -> tuple[bytes, dict] | None:
    """(the .onnx file's bytes, the metadata) of entry ``k`` as ``write_entry`` wrote them, checked against their
    digest; None on a miss or a damaged entry. A part written ``later`` comes back as a ``Deferred``. Not marked
    used (``touch``): the caller says when it serves."""
    d = cache_dir()
    if d is None:
        return None
    try:
        text = _read(d / entry_name(k, "json"))
        data = _read(d / entry_name(k, "onnx"))
        # a file cut short (a crash before its data reached the disk) or edited may still parse, as
        # another graph (a ModelProto cut after its graph has no opsets): only the bytes store wrote serve
        first, _, rest = text.partition(b"\n")
        if not first.startswith(MAGIC) or first[len(MAGIC):].decode("ascii") != _digest(k, data, rest):
            return None
        head, _, later = rest.partition(b"\n")
        meta = json.loads(head)
        if not isinstance(meta, dict):
            return None
        name = meta.pop(LATER, None)
        if name is not None:
            if not isinstance(name, str) or name in meta:
                return None
            meta[name] = Deferred(later)
    except Exception:  # noqa: BLE001 - a missing or damaged entry is a miss
        return None
    return data, meta


def touch(k: str) -> None:
    """Entry ``k`` recently used: kept longest (``_trim``)."""
    d = cache_dir()
    try:
        if d is not None:  # the entry's own file, never a file a link planted there leads to
            os.utime(d / entry_name(k, "json"), follow_symlinks=False)
    except (OSError, NotImplementedError):
        pass


def _read(path: Path) -> bytes:
    """An entry file's bytes: a regular file's only, never through a link (``_write`` writes neither a link nor
    anything else), and of at most the cache's size. A name planted as a link to /dev/zero read for ever, a
    FIFO waited for a writer; anything else is an OSError, a miss."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > size_limit():
            raise OSError(errno.EINVAL, "not an entry file")
        return f.read()


def store_entry(k: str, model: onnx.ModelProto, meta: dict) -> None:
    """Entry ``k``: ``model`` as a skeleton (its big weights stubbed, Constant nodes' too: ``structure``
    does not hash their values) and ``meta`` as JSON."""
    from onnxprobe.graph.skeleton import skeleton

    try:
        data = skeleton(model, constants=True).SerializeToString()
    except ValueError:  # past protobuf's 2 GB
        return
    write_entry(k, data, meta)


def write_entry(k: str, data: bytes, meta: dict, later: str | None = None) -> None:
    """Entry ``k``: ``data`` (a serialised model) and ``meta`` as JSON under their digest, then the cache trimmed to
    its size; ``later``: a key of ``meta`` whose value ``read_entry`` leaves as JSON text (``Deferred``). An entry of
    more than a quarter of the cache's size is not written."""
    d, limit = cache_dir(), size_limit()
    if d is None:
        return
    try:
        d.mkdir(parents=True, exist_ok=True)
        if len(data) <= limit // 4:
            _write(d, entry_name(k, "onnx"), data)
            head = {key: v for key, v in meta.items() if key != later}
            if later is not None:
                head[LATER] = later
            rest = json.dumps(head, default=list).encode() + b"\n" + (
                json.dumps(meta[later], default=list).encode() if later is not None else b"")
            _write(d, entry_name(k, "json"), MAGIC + _digest(k, data, rest).encode() + b"\n" + rest)
    except (OSError, ValueError):
        pass
    try:  # after a failed write too: on a full disk, where every write fails, what failed ones left still goes
        _trim(d, limit)
    except OSError:
        pass


def _write(d: Path, name: str, data: bytes) -> None:
    """``data`` into ``d / name``, atomically: a temporary in ``d`` (``TEMP``) renamed onto the name. A link
    found there is replaced, never written through (fileio.atomic_output's way, for a user's outputs): the
    cache writes in its folder only, whatever a shared folder holds."""
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            os.chmod(tmp, 0o666 & ~umask())  # as any file the user makes, not mkstemp's 0600
            f.write(data)
        os.replace(tmp, d / name)
    except BaseException:
        _unlink(Path(tmp))
        raise


def _digest(k: str, data: bytes, rest: bytes) -> str:
    """The hash of an entry's key and its two files' contents: its .onnx bytes and its metadata's JSON text (the
    .json file past its first line, as written: no second serialisation of 8 MB of a deep model's diff to check it,
    0.17 s). The key binds the files to their name: both files of another entry copied over this one's agree
    with each other, and served another selection's (or model's) probed copy."""
    return blake2b(k.encode() + b"\0" + data + b"\0" + rest, digest_size=16).hexdigest()


LATER = "~later"  # the metadata's key that names its part written after it (``write_entry``'s ``later``)


# an entry's files, KEY (key_of's 16-byte digest in hex).probed.onnx and KEY.probed.json. Not KEY.onnx: a user's file named by a digest of
# that length (an md5sum) in the folder $ONNXPROBE_CACHE_DIR names would pass for one, and be trimmed
ENTRY = re.compile(r"([0-9a-f]{32})\.probed\.(onnx|json)")
# what builds before FORMAT 35 named an entry's files (KEY.onnx, KEY.json): never read again, they go from onnxprobe's own folder
# (not from one $ONNXPROBE_CACHE_DIR names, where such a name may be a user's file)
OLD_ENTRY = re.compile(r"\.?[0-9a-f]{32}\.(?:onnx|json)(?:\..+\.tmp)?")  # their temporaries too
TEMP = re.compile(r"\.[0-9a-f]{32}\.probed\.(?:onnx|json)\..+\.tmp")  # what _write writes an entry's file to first
# a half entry (its .onnx without its .json: a failed write, a process killed between the two) or a temporary
# left by a killed writer is deleted once this old (seconds): a concurrent writer's are seconds old at most
STALE_S = 300


def entry_name(k: str, ext: str) -> str:
    """The name of entry ``k``'s file of extension ``ext`` (onnx or json): ``ENTRY``."""
    return f"{k}.probed.{ext}"


def _trim(d: Path, limit: int) -> None:
    """The oldest entries deleted until the cache holds at most ``limit`` bytes: only entries, named as ``ENTRY``
    says, never another file that shares the folder ($ONNXPROBE_CACHE_DIR may be any folder: a user's
    models and JSON reports there are not the cache's to trim). Half entries and temporaries that nobody
    writes any more (``STALE_S``) go first: no run ever reads them, and they are bytes all the same."""
    now, parts, own = time.time(), {}, not os.environ.get("ONNXPROBE_CACHE_DIR")
    for f in d.iterdir():
        try:
            st = f.lstat()
        except OSError:
            continue
        entry = ENTRY.fullmatch(f.name)
        if own and OLD_ENTRY.fullmatch(f.name) and stat.S_ISREG(st.st_mode):
            _unlink(f)
        elif TEMP.fullmatch(f.name):
            if now - st.st_mtime > STALE_S:
                _unlink(f)
        elif entry and stat.S_ISREG(st.st_mode):
            parts.setdefault(entry[1], {})[entry[2]] = (f, st)
    entries = []
    for files in parts.values():
        newest = max(st.st_mtime for _, st in files.values())
        if len(files) < 2 and now - newest > STALE_S:
            for f, _ in files.values():
                _unlink(f)
            continue
        used = files["json"][1].st_mtime if "json" in files else newest  # load touches the .json: recently used
        entries.append((used, [f for f, _ in files.values()], sum(st.st_size for _, st in files.values())))
    total = sum(e[2] for e in entries)
    for _, files, size in sorted(entries, key=lambda e: e[0]):
        if total <= limit:
            break
        for f in files:
            _unlink(f)
        total -= size


def _unlink(f: Path) -> None:
    try:
        f.unlink()
    except OSError:
        pass
