"""An .npz writer that streams: each array goes into the zip as soon as it is added, so a dump never
holds more than one chunk of tensors. The file appears (atomically renamed) only when closed cleanly."""

from __future__ import annotations

import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np


class NpzWriter:
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        folder = self.path.parent if str(self.path.parent) else Path(".")
        fd, self.tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=folder)
        os.close(fd)
        self.zf = zipfile.ZipFile(self.tmp, "w", compression=zipfile.ZIP_STORED, allowZip64=True)
        self.names: set[str] = set()

    def add(self, name: str, array: np.ndarray) -> None:
        if name in self.names:
            return
        self.names.add(name)
        with self.zf.open(name + ".npy", "w", force_zip64=True) as f:
            np.lib.format.write_array(f, np.asanyarray(array), allow_pickle=False)

    def close(self) -> None:
        self.zf.close()
        os.replace(self.tmp, self.path)

    def abort(self) -> None:
        self.zf.close()
        if os.path.exists(self.tmp):
            os.unlink(self.tmp)

    def __enter__(self) -> "NpzWriter":
        return self

    def __exit__(self, exc_type, *_):
        if exc_type is None:
            self.close()
        else:
            self.abort()
