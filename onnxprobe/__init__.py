"""onnxprobe: see inside ONNX models.

The plain Python API lives in :mod:`onnxprobe.api`; the command line in :mod:`onnxprobe.cli`.
"""

__version__ = "0.1.0"
