"""The baseline: plain onnxruntime inference of an unmodified model, as a user's script would do it.
Usage: plain.py MODEL NAME=DIMS... (integer inputs get values in [0, 100), as onnxprobe's default --int-range 0:100)"""

import sys

import numpy as np
import onnxruntime as ort

model, *specs = sys.argv[1:]
shapes = dict(s.split("=") for s in specs if "=" in s)
sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
rng = np.random.default_rng(0)
feeds = {}
for i in sess.get_inputs():
    dims = [int(d) for d in shapes[i.name].split("x")] if i.name in shapes else [d if isinstance(d, int) else 1 for d in i.shape]
    if "int" in i.type:
        feeds[i.name] = rng.integers(0, 100, size=dims).astype(np.int64 if "int64" in i.type else np.int32)
    else:
        feeds[i.name] = rng.random(dims, dtype=np.float32)
sess.run(None, feeds)
