"""The errors onnxprobe raises on purpose. The CLI turns each into one line and an exit code."""


class OnnxProbeError(Exception):
    """Base class: a problem we can explain to the user in one line."""

    exit_code = 1


class UsageError(OnnxProbeError):
    """The command line or API call is wrong (bad flag value, unknown input name...). Exit code 2."""

    exit_code = 2


class ModelError(OnnxProbeError):
    """The model file cannot be read or is not valid ONNX. Exit code 1."""


class ExecutionError(OnnxProbeError):
    """onnxruntime could not build a session for, or run, the model. Exit code 1."""
