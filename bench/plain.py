"""The baseline: plain onnxruntime inference of an unmodified model, as a user's script would do it.
Usage: plain.py MODEL NAME=DIMS... (each input gets values of its own type: integers in [0, 100), as onnxprobe's default
--int-range 0:100; floats in [0, 1); bools True or False)"""

import sys

import numpy as np
import onnxruntime as ort

if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):  # bench/run.py's helper: its usage, not a traceback
    print(__doc__)
    raise SystemExit(0 if len(sys.argv) > 1 else 2)
model, *specs = sys.argv[1:]
shapes = dict(s.split("=") for s in specs if "=" in s)
sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
rng = np.random.default_rng(0)
# onnxruntime's type names: the input's own type (a float32 array for a float16 input is refused, and a crashed
# baseline is no baseline)
TYPES = {"float": np.float32, "float16": np.float16, "double": np.float64, "bool": np.bool_, "int8": np.int8,
         "uint8": np.uint8, "int16": np.int16, "uint16": np.uint16, "int32": np.int32, "uint32": np.uint32,
         "int64": np.int64, "uint64": np.uint64}
feeds = {}
for i in sess.get_inputs():
    dims = [int(d) for d in shapes[i.name].split("x")] if i.name in shapes else [d if isinstance(d, int) else 1 for d in i.shape]
    kind = i.type.removeprefix("tensor(").removesuffix(")")
    if kind not in TYPES:
        raise SystemExit(f"plain.py: input {i.name!r} of type {i.type}: no random data for it")
    dtype = np.dtype(TYPES[kind])
    if dtype.kind == "b":
        feeds[i.name] = rng.random(dims) < 0.5
    elif dtype.kind in "iu":
        feeds[i.name] = rng.integers(0, 100, size=dims).astype(dtype)
    else:
        feeds[i.name] = rng.random(dims).astype(dtype)
sess.run(None, feeds)
