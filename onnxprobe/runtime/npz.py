"""An .npz writer that streams: each array goes into the zip as soon as it is added, so a dump never
holds more than one chunk of tensors. The file appears (atomically renamed) only when closed cleanly.

Entry names are safe: a tensor name is used as it is when it is a plain path of names (``conv1_out``,
``/features/0/Conv_output_0`` as the PyTorch exporter writes them, ``onnx::Conv_27``, ``Add@0``), so that
``np.load(f)[name]`` reads it; anything else (``../../x``, empty or dot components, backslashes, control
characters, a drive letter, names over 200 characters), and a name whose file unzip would extract where
another entry's file or folder is (it strips a leading ``/``: ``/abs`` and ``abs`` were one file, QA; ``a``
and ``a.npy/b``), or whose key ``np.load`` would read as another entry (``a.npy`` beside ``a``, whose member is
``a.npy``), gets a safe entry name, and the true names of every entry are stored in the entry
``NAMES_ENTRY`` (a string array, loadable without pickle) when any entry differs from its tensor name. ``np.load`` reads the archive as usual;
``runtime.arrays.read_npz`` maps the entries back to tensor names.
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from typing import NamedTuple

import numpy as np

from onnxprobe.errors import UsageError, WriteFailed
from onnxprobe.fileio import atomic_output
from onnxprobe.text import as_word

NAMES_ENTRY = "onnxprobe.names"
_UNSAFE = re.compile(r"[\x00-\x1f\x7f\\]")  # control characters and backslashes
_DRIVE = re.compile(r"^[A-Za-z]:")


def _places(entry: str) -> tuple[str, list[str]]:
    """Where unzip (and Python's zipfile) extract ``entry`` (without a leading ``/``): its file, and the folders made
    for it, outermost first."""
    parts = entry.lstrip("/").split("/")
    return "/".join(parts) + ".npy", ["/".join(parts[:i]) for i in range(1, len(parts))]


def safe_entry(name: str, k: int) -> str:
    """The archive entry (without ``.npy``) for tensor ``name``, the ``k``-th of the archive: the name where it
    is a plain path (no empty, ``.`` or ``..`` component; one leading ``/`` allowed), else ``tK_...``."""
    parts = name[1:].split("/") if name.startswith("/") else name.split("/")
    if 0 < len(name) <= 200 and not _UNSAFE.search(name) and not _DRIVE.match(name) and name != NAMES_ENTRY \
            and all(p.strip() not in ("", ".", "..") for p in parts):
        return name
    return f"t{k}_" + re.sub(r"[^A-Za-z0-9_.\-]", "_", name.strip("/"))[:100]


def true_names(z) -> dict[str, str] | None:
    """entry -> tensor name, from an open ``np.load`` archive that has a NAMES_ENTRY; None where that entry is no
    JSON object of names (a damaged map: its entries' names are then not the tensors')."""
    try:
        names = json.loads(str(z[NAMES_ENTRY]))
    except (ValueError, TypeError):
        return None
    if not isinstance(names, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in names.items()):
        return None
    return names


def _no_objects(a: np.ndarray, name: str, path) -> np.ndarray:
    """``a`` as an array np.load reads without pickle: a string tensor (onnxruntime's object array of str)
    as numpy unicode (bytes as numpy bytes)."""
    if a.dtype != object:
        return a
    flat = list(a.reshape(-1))
    for kind in (str, bytes):
        if all(isinstance(v, kind) for v in flat):
            return np.array(flat, dtype=np.str_ if kind is str else np.bytes_).reshape(a.shape)
    from onnxprobe.text import quote

    raise UsageError(f"{path}: tensor {quote(name)} holds Python objects, which an .npz keeps only pickled; nothing written")


class _Stream:
    """A file written front to back only. zipfile seeks back to patch each entry's header when ``tell``
    works, and /dev/null's ``tell`` answers 0 whatever was written (struct.error on closing): a target that
    is not a regular file (/dev/null, a FIFO, /dev/stdout) gets a zip with data descriptors instead."""

    def __init__(self, f):
        self.f = f

    def write(self, b) -> int:
        return self.f.write(b)

    def flush(self) -> None:
        self.f.flush()

    def tell(self) -> int:
        raise OSError("not seekable")

    def seekable(self) -> bool:
        return False


SOURCE_PREFIX = b"onnxprobe source graph "


def graph_fingerprint(model) -> str:
    """A digest of a model's main graph (its nodes' ops and tensor names, its inputs): an archive that
    ``layers --save`` wrote from this very model holds it, so ``diff --vs-npz`` knows the saved values are
    the model's own tensors (names alone cannot tell: a QDQ model keeps its float model's tensor names)."""
    import hashlib  # here: at import it loads OpenSSL's libcrypto into every command (``runtime.plan_cache``)

    h = hashlib.sha256()
    for n in model.graph.node:
        h.update("\x00".join([n.op_type, *n.input, "->", *n.output, "\x01"]).encode())
    h.update("\x00".join(i.name for i in model.graph.input).encode())
    return h.hexdigest()[:32]


MADE_BY = " by "  # after the fingerprint: the runtime, device and float precision that computed the values
QUANTIZED = "quantized"  # the comment's last word where the model is quantized (``Origin.quantized``)


class Origin(NamedTuple):
    """What the zip comment of an archive ``layers --save`` wrote says (``npz_origin``)."""
    source: str | None  # the ``graph_fingerprint`` of the model the tensors are from
    made_by: tuple[str, str, str | None] | None  # runtime, device, precision (such as 'bf16', or None) that computed them
    # the model is quantized (QDQ pairs, integer operators or integer weights): its values against a float model are
    # judged as a diff of the two models judges them, even where the archive holds no quantized tensor (the default
    # selection saves a QDQ model's layers as float values, without their DequantizeLinear views)
    quantized: bool = False


def npz_origin(path) -> Origin:
    """What the zip comment of an archive ``layers --save`` wrote says (``Origin``): older archives hold the
    fingerprint alone; any other archive says nothing (all None)."""
    try:
        with zipfile.ZipFile(path) as z:
            c = z.comment
    except (OSError, zipfile.BadZipFile):
        return Origin(None, None)
    if not c.startswith(SOURCE_PREFIX):
        return Origin(None, None)
    source, _, made = c[len(SOURCE_PREFIX):].decode("ascii", "replace").partition(MADE_BY)
    parts = made.split(" ")
    quantized = len(parts) == 4 and parts[3] == QUANTIZED
    made_by = (parts[0], parts[1], None if parts[2] == "-" else parts[2]) if len(parts) == 3 or quantized else None
    return Origin(source, made_by, quantized)


def npz_source(path) -> str | None:
    """The ``graph_fingerprint`` stored in the zip comment of an archive ``layers --save`` wrote, or None."""
    return npz_origin(path)[0]


def _word(w: str | None) -> str:
    """One word of the comment's ``made_by``: '-' for None, spaces taken out."""
    return "-" if w is None else "_".join(str(w).split()) or "-"


class NpzWriter:
    def __init__(self, path: str | os.PathLike, source: str | None = None,
                 made_by: tuple[str, str, str | None] | None = None, quantized: bool = False):
        """``source``: the ``graph_fingerprint`` of the model the tensors are from, kept in the zip comment
        (np.load ignores it: the archive's entries stay the tensors), with ``made_by``: the runtime, device
        and float precision (None: the graph's own) that computed them, and whether the model is quantized
        (``npz_origin``)."""
        self.path = path
        self._out = atomic_output(path, ".tmp.npz")
        self._fh = None
        try:
            self.tmp = self._out.__enter__()
            if self.tmp.exists() and not self.tmp.is_file():  # written in place (fileio.atomic_output)
                self._fh = open(self.tmp, "wb")
                self.zf = zipfile.ZipFile(_Stream(self._fh), "w", compression=zipfile.ZIP_STORED, allowZip64=True)
            else:
                self.zf = zipfile.ZipFile(self.tmp, "w", compression=zipfile.ZIP_STORED, allowZip64=True)
        except OSError as e:
            raise WriteFailed.cannot(as_word(os.fspath(path)), e) from None
        self.names: dict[str, str] = {}  # tensor name -> entry
        self._files = {NAMES_ENTRY + ".npy"}  # the paths unzip writes, and the folders it makes for them
        self._folders: set[str] = set()
        self._keys: set[str] = set()  # the entries' names, as np.load's keys (no leading /, as _places)
        if source is not None:
            made = "" if made_by is None else MADE_BY + " ".join(_word(w) for w in made_by) + (
                " " + QUANTIZED if quantized else "")
            self.zf.comment = SOURCE_PREFIX + (source + made).encode("ascii", "replace")

    def add(self, name: str, array: np.ndarray) -> None:
        if name in self.names:
            return
        entry = safe_entry(name, len(self.names))
        while self._taken(entry):
            entry = f"t{len(self.names)}_{entry}"
        self.names[name] = entry
        self._keys.add(entry.lstrip("/"))
        file, folders = _places(entry)
        self._files.add(file)
        self._folders.update(folders)
        try:
            with self.zf.open(entry + ".npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, _no_objects(np.asanyarray(array), name, self.path), allow_pickle=False)
        except OSError as e:
            raise WriteFailed.cannot(as_word(os.fspath(self.path)), e) from None

    def _taken(self, entry: str) -> bool:
        """Whether unzip would write ``entry``'s file where another entry's file or folder is, or needs a
        folder where another entry's file is; or whether ``np.load(f)[key]`` would read one entry for another's key:
        it takes a key that is a member's own file name as that member (tensors ``a`` and ``a.npy``, in files
        ``a.npy`` and ``a.npy.npy``: the key ``a.npy`` read tensor ``a``)."""
        file, folders = _places(entry)
        return (file in self._files or file in self._folders or any(f in self._files for f in folders)
                or entry.lstrip("/") in self._files or entry.lstrip("/") + ".npy" in self._keys)

    def add_all(self, arrays: dict[str, np.ndarray]) -> None:
        for name, array in arrays.items():
            self.add(name, array)

    def close(self) -> None:
        try:
            if any(e != n for n, e in self.names.items()):  # only when some entry is not its tensor's name
                mapping = json.dumps({e: n for n, e in self.names.items()})
                with self.zf.open(NAMES_ENTRY + ".npy", "w") as f:
                    np.lib.format.write_array(f, np.array(mapping), allow_pickle=False)
            self.zf.close()
            if self._fh is not None:
                self._fh.close()
            self._out.__exit__(None, None, None)
        except OSError as e:
            self.abort()
            raise WriteFailed.cannot(as_word(os.fspath(self.path)), e) from None
        except BaseException:  # a SIGTERM's SystemExit or a Ctrl-C while the zip closes: no hidden OUT.tmp left (the
            self.abort()       # process ends in os._exit, which never runs the atomic output's own clean-up)
            raise

    def abort(self) -> None:
        try:
            try:
                self.zf.close()
            finally:
                if self._fh is not None:
                    self._fh.close()
        except Exception:  # noqa: BLE001 - a zip half closed may fail any way: what matters is the file going
            pass
        finally:
            err = RuntimeError("npz dump aborted")
            self._out.__exit__(RuntimeError, err, None)  # removes the temporary file

    def __enter__(self) -> "NpzWriter":
        return self

    def __exit__(self, exc_type, *_):
        if exc_type is None:
            self.close()
        else:
            self.abort()


def save_npz(arrays: dict[str, np.ndarray], path: str | os.PathLike) -> None:
    """All of ``arrays`` into one .npz, atomically, with safe entry names."""
    with NpzWriter(path) as w:
        w.add_all(arrays)
