"""Advice inside the debugger named command-line commands where the debugger has its own: `probe add --op
Conv2` said "`onnxprobe inspect MODEL` lists its op types", a `--range` end naming no node "use ... a node name
from `onnxprobe inspect --nodes`", a `--name` glob matching nothing "quote globs such as '*attn*'" (the
debugger's words are not globbed by a shell). In the debugger each says its own command (`nodes`) and no
shell advice; the command line keeps its words, and the API its own."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import UsageError

ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
MLP = str(sample_path("mlp"))

# (a selection that refuses, what the debugger says, what the command line says)
CASES = [
    (["--op", "Softplus"], "(`nodes` lists its op types)", "(`onnxprobe inspect MODEL` lists its op types)"),
    (["--range", "zzqq:0"], "(use an index or a node name from `nodes`)", "from `onnxprobe inspect --nodes`)"),
    (["--name", "zzqq*"], "matches no node, tensor or input name of the model (names are case-sensitive)",
     "(names are case-sensitive; quote globs such as '*attn*')"),
]


def _debug(tmp_path, lines):
    f = tmp_path / "session.txt"
    f.write_text("\n".join(lines) + "\n")
    r = CliRunner().invoke(app, ["debug", MLP, "--script", str(f)], env=ENV)
    assert "Traceback" not in r.output, r.output
    return r


@pytest.mark.parametrize("words,debugger,cli", CASES, ids=["op", "range", "name"])
def test_the_debugger_names_its_own_commands(tmp_path, words, debugger, cli):
    sel = " ".join(words)
    r = _debug(tmp_path, [f"probe add {sel}", f"stats {sel}"])
    assert r.exit_code == 1, r.output
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("onnxprobe: error: line ")]
    assert len(errors) == 2, r.stderr
    for said in errors:
        assert said.endswith(debugger), said
        assert "onnxprobe inspect" not in said and "quote globs" not in said, said


@pytest.mark.parametrize("words,debugger,cli", CASES, ids=["op", "range", "name"])
def test_the_command_line_keeps_its_words(tmp_path, words, debugger, cli):
    r = CliRunner().invoke(app, ["layers", MLP, *words], env=ENV)
    assert r.exit_code == 2 and r.stderr.strip().endswith(cli), r.output


def test_the_api_keeps_its_words():
    with pytest.raises(UsageError, match=r"api\.inspect\(model\)\.summary\.op_histogram lists its op types\)"):
        api.layers(MLP, api.Selection(ops=("Softplus",)))


def test_random_data_refused_names_the_input_setting_in_the_readers_words():
    """No random data of a dtype: the advice named `--input NAME=FILE` as fixed text, also in the debugger."""
    import numpy as np

    from onnxprobe.errors import speaking
    from onnxprobe.runtime.feeds import random_array
    from onnxprobe.session.commands.table import ADVICE, WORDS

    def said() -> UsageError:
        with pytest.raises(UsageError) as e:
            random_array((2,), np.dtype("datetime64[s]"), np.random.default_rng(0), (0, 100))
        return e.value

    assert said().cli_message.endswith("give this input with --input NAME=FILE")
    with speaking(WORDS, ADVICE):
        assert said().cli_message.endswith("give this input with input NAME FILE")
