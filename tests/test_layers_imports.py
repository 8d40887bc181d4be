"""One run of ``layers`` (not a dataset's) imports none of the modules only a dataset's statistics need
(``stats.moments``, ``stats.histogram``, ``stats.pooled`` and through it ``stats.metrics``: 4-5 ms of a
command's start, CPU); ``layers_dataset`` imports them when it merges its batches. Nor ``fractions`` (with
``decimal``: 1.4 ms), which only parsing a size (``--max-memory``, ``$ONNXPROBE_CACHE_SIZE``) needs."""

from __future__ import annotations

import subprocess
import sys

from conftest import sample_path

DATASET_ONLY = ("onnxprobe.stats.moments", "onnxprobe.stats.histogram", "onnxprobe.stats.pooled", "onnxprobe.stats.metrics",
                "fractions")

SCRIPT = """
import sys
from onnxprobe import api
res = api.layers(sys.argv[1], api.Selection(all=True), api.RunConfig(device="cpu", cache=False))
assert res.stats
print(" ".join(m for m in {names} if m in sys.modules))
""".format(names=DATASET_ONLY)


def test_one_run_of_layers_imports_no_dataset_module():
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(sample_path("mlp"))], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [], r.stdout
