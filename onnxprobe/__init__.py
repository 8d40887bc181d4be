"""onnxprobe: see inside ONNX models.

The plain Python API lives in :mod:`onnxprobe.api`; the command line in :mod:`onnxprobe.cli`.
"""

import os as _os

__version__ = "0.1.0"

# onnxruntime 1.32 keeps a telemetry queue and a device id under ~/.cache/Microsoft/DeveloperTools (events
# that carry graph and node names) unless this is set before it initialises: onnxprobe sends nothing
# anywhere and writes only where it is told to. A user's own setting stands.
_os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
