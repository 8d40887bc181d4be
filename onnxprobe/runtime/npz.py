"""An .npz writer that streams: each array goes into the zip as soon as it is added, so a dump never
holds more than one chunk of tensors. The file appears (atomically renamed) only when closed cleanly."""

from __future__ import annotations

import os
import zipfile

import numpy as np

from onnxprobe.fileio import atomic_output


class NpzWriter:
    def __init__(self, path: str | os.PathLike):
        self._out = atomic_output(path, ".tmp.npz")
        self.tmp = self._out.__enter__()
        self.zf = zipfile.ZipFile(self.tmp, "w", compression=zipfile.ZIP_STORED, allowZip64=True)
        self.names: set[str] = set()

    def add(self, name: str, array: np.ndarray) -> None:
        if name in self.names:
            return
        self.names.add(name)
        with self.zf.open(name + ".npy", "w", force_zip64=True) as f:
            np.lib.format.write_array(f, np.asanyarray(array), allow_pickle=False)

    def add_all(self, arrays: dict[str, np.ndarray]) -> None:
        for name, array in arrays.items():
            self.add(name, array)

    def close(self) -> None:
        self.zf.close()
        self._out.__exit__(None, None, None)

    def abort(self) -> None:
        self.zf.close()
        err = RuntimeError("npz dump aborted")
        self._out.__exit__(RuntimeError, err, None)  # removes the temporary file

    def __enter__(self) -> "NpzWriter":
        return self

    def __exit__(self, exc_type, *_):
        if exc_type is None:
            self.close()
        else:
            self.abort()
