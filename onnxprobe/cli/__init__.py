"""The command line: one thin Typer function per command over onnxprobe.api."""
