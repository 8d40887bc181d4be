"""``python -m onnxprobe`` is the same as the ``onnxprobe`` command."""

from onnxprobe.cli.main import run

if __name__ == "__main__":
    run()
