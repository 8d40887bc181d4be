"""The interactive debugger (``onnxprobe debug``): a state object with no I/O (state.py), one table of
commands (commands.py), and the front ends over it (repl.py: a prompt_toolkit prompt and ``--script``)."""
