"""``python -m onnxprobe`` is the same as the ``onnxprobe`` command: both start at ``main`` (pyproject's entry
point), which imports nothing before it can take a Ctrl-C."""

import sys


def main() -> None:
    """The command line. Loading it (Typer, Rich, the commands: a few tenths of a second on a busy machine)
    is the first thing that can be interrupted: a Ctrl-C then ends it as it ends any command, in one line
    with exit code 130, not with a traceback through the imports."""
    try:
        from onnxprobe.cli.main import run
    except KeyboardInterrupt:
        import os

        try:
            sys.stderr.write("onnxprobe: error: interrupted\n")
            sys.stderr.flush()
        except (OSError, ValueError, AttributeError):  # a stderr that takes nothing (closed: None)
            pass
        os._exit(130)
    run()


if __name__ == "__main__":
    main()
