"""Build and call tests/cpp/run_model.cc: a C++ program that runs an ONNX model through onnxruntime's C API
(the libonnxruntime.so shipped in the onnxruntime wheel, loaded with dlopen; no Python in the process).
``runner(tmp_dir)`` compiles it (skipping the calling test without g++ or that library);
``run(runner, model, feeds, work_dir)`` returns every output of the model by name."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

HERE = Path(__file__).resolve().parent
TYPES = {np.dtype(np.float32): 1, np.dtype(np.int32): 6, np.dtype(np.int64): 7, np.dtype(np.float64): 11}


def runner(build_dir: Path) -> tuple[Path, Path]:
    """(executable, libonnxruntime.so)."""
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed: the C++ runner cannot be built")
    libs = sorted((Path(ort.__file__).parent / "capi").glob("libonnxruntime.so*"))
    if not libs:
        pytest.skip("this onnxruntime package ships no libonnxruntime.so")
    exe = Path(build_dir) / "run_model"
    r = subprocess.run(["g++", "-std=c++17", "-O1", "-Wall", "-o", str(exe), str(HERE / "cpp" / "run_model.cc"), "-ldl"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return exe, libs[0]


def run(built: tuple[Path, Path], model: Path, feeds: dict[str, np.ndarray], work: Path) -> dict[str, np.ndarray]:
    exe, lib = built
    work.mkdir()
    with open(work / "inputs.txt", "w") as spec:
        for k, (name, v) in enumerate(feeds.items()):
            v = np.ascontiguousarray(v)
            spec.write(f"{name} {TYPES[v.dtype]} {v.ndim} {' '.join(str(d) for d in v.shape)}\n")
            (work / f"in_{k}.bin").write_bytes(v.tobytes())
    r = subprocess.run([str(exe), str(lib), str(model), str(work)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    back = {t: d for d, t in TYPES.items()}
    out = {}
    for k, line in enumerate((work / "outputs.txt").read_text().splitlines()):
        name, typ, ndim, *dims = line.split()
        assert int(ndim) == len(dims)
        out[name] = np.frombuffer((work / f"out_{k}.bin").read_bytes(), dtype=back[int(typ)]).reshape([int(d) for d in dims])
    return out
