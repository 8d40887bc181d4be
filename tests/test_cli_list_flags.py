"""List-valued flags take one rule in every command and in the debugger: a repeated flag, or values
separated by commas where an item cannot hold one. `--op Conv,Relu` is `--op Conv --op Relu` (an op type
holds no comma): it was read as one op type named 'Conv,Relu' and refused with "did you mean 'Relu'?",
while the debugger's `--op Conv,Relu` took both. An empty op type (`--op ,`, `--op Conv,,Relu`) is
refused everywhere, as extract's `--from a,,b` is: the debugger took `--op ,` as the default selection (QA)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe import api
from onnxprobe.cli.main import app
from onnxprobe.errors import UsageError

runner = CliRunner()
CNN = str(sample_path("cnn"))


def _ops_of(args):
    r = runner.invoke(app, [*args, "--format", "json", "--columns", "tensor,op"])
    assert r.exit_code == 0, r.output
    return [row["op"] for row in json.loads(r.stdout)]


@pytest.mark.parametrize("command", [["layers", CNN], ["grad", CNN], ["diff", CNN, "--vs-reference"]])
def test_comma_separated_op_types_are_the_repeated_flag(command):
    repeated = _ops_of([*command, "--op", "Conv", "--op", "Relu"])
    assert set(repeated) >= {"Conv", "Relu"}
    assert _ops_of([*command, "--op", "Conv,Relu"]) == repeated
    assert _ops_of([*command, "--op", "Conv, Relu"]) == repeated


def test_mark_takes_comma_separated_op_types(tmp_path):
    r = runner.invoke(app, ["mark", CNN, "-o", str(tmp_path / "m.onnx"), "--op", "Conv,Relu", "--format", "json"])
    assert r.exit_code == 0, r.output
    assert {row["op"] for row in json.loads(r.stdout)} == {"Conv", "Relu"}


@pytest.mark.parametrize("value", [",", "Conv,,Relu", "Conv,", ""])
def test_an_empty_op_type_is_refused_in_one_line(value):
    r = runner.invoke(app, ["layers", CNN, "--op", value])
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--op" in lines[0] and "empty op type" in lines[0], r.output


def test_the_api_and_the_debugger_read_op_lists_alike(tmp_path):
    assert api.Selection(ops="Conv,Relu").ops == api.Selection(ops=("Conv", "Relu")).ops == ("Conv", "Relu")
    with pytest.raises(UsageError, match="empty op type"):
        api.Selection(ops=("Conv,",))
    script = tmp_path / "s.txt"
    script.write_text("probe add --op ,\n")
    r = runner.invoke(app, ["debug", CNN, "--script", str(script)])
    assert r.exit_code == 1 and "empty op type" in r.stderr, r.output


def test_help_says_op_takes_a_comma_separated_list():
    for command in ("layers", "diff", "grad", "mark", "debug"):
        r = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
        assert "--op Conv,Relu" in r.stdout, command


def test_the_debugger_names_a_setting_as_the_command_line_does(tmp_path):
    # one check serves the API and the flags: the debugger's words are the flags', not "ops (--op)"
    script = tmp_path / "s.txt"
    script.write_text("probe add --op ,\nprobe add --range ' '\n")
    r = runner.invoke(app, ["debug", CNN, "--script", str(script)])
    lines = r.stderr.strip().splitlines()
    assert r.exit_code == 1 and len(lines) == 2, r.output
    assert lines[0].startswith("onnxprobe: error: line 1: --op ','") and lines[1].startswith("onnxprobe: error: line 2: --range ''"), r.output


@pytest.mark.parametrize("args, flag", [(["layers", CNN, "--name"], "--name"), (["grad", CNN, "--wrt"], "--wrt"),
                                        (["mark", CNN, "-o", "unused.onnx", "--name"], "--name")])
def test_a_glob_flag_given_a_comma_list_says_to_repeat_it(args, flag, tmp_path, monkeypatch):
    # a name may hold a comma, so --name/--wrt take one glob each: a list that matches nothing as a whole,
    # and whose parts each match, is refused with the repeated flags to give (not "did you mean 'relu1_out'")
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, [*args, "conv1_out,relu*"])
    lines = r.stderr.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1, r.output
    assert f"{flag} takes one glob" in lines[0] and f"{flag} conv1_out {flag} 'relu*'" in lines[0], r.output
    assert not list(tmp_path.iterdir())


def test_the_debugger_refuses_a_single_value_option_given_twice_as_the_command_line_does(tmp_path):
    # `stats --format csv --format markdown` printed Markdown (the last won), where the command line's
    # `--format csv --format markdown` is refused naming the flag; the same value twice is taken
    script = tmp_path / "s.txt"
    script.write_text("stats --format csv --format=markdown\nshow conv1_out --bins 3 --bins 4\n"
                      "stats --format csv --format csv --columns tensor\n")
    r = runner.invoke(app, ["debug", CNN, "--script", str(script)])
    lines = r.stderr.strip().splitlines()
    assert r.exit_code == 1 and len(lines) == 2, r.output
    assert lines[0] == ("onnxprobe: error: line 1: --format given twice with different values ('csv' and 'markdown'); "
                        "give it once"), r.output
    assert lines[1].startswith("onnxprobe: error: line 2: --bins given twice with different values ('3' and '4')"), r.output
    assert r.stdout.splitlines()[0] == "tensor" and "| tensor |" not in r.stdout, r.output


def test_columns_are_a_list_repeated_or_comma_separated(tmp_path):
    # a column key holds no comma: `--columns tensor --columns max,min` is `--columns tensor,max,min`, on the
    # command line (it was refused as a single-value flag given twice) and in the debugger
    def rows(args):
        r = runner.invoke(app, ["layers", CNN, "--format", "csv", *args])
        assert r.exit_code == 0, r.output
        return r.stdout

    assert rows(["--columns", "tensor", "--columns", "max,min"]) == rows(["--columns", "tensor,max,min"])
    assert rows(["--columns", "tensor,max,min"]).splitlines()[0] == "tensor,max,min"
    script = tmp_path / "s.txt"
    script.write_text("stats --format csv --columns tensor --columns=max\n")
    r = runner.invoke(app, ["debug", CNN, "--script", str(script)])
    assert r.exit_code == 0 and r.stdout.splitlines()[0] == "tensor,max", r.output


def test_extract_shows_its_table_as_mark_does(tmp_path):
    # extract's table of the cut's inputs and outputs takes --format/--columns/--wide as mark's and
    # inspect's do; stdout carries the rows alone, what was written is said on stderr
    out = tmp_path / "e.onnx"
    r = runner.invoke(app, ["extract", CNN, "-o", str(out), "--from", "relu1_out", "--to", "relu2_out", "--format", "csv"])
    assert r.exit_code == 0, r.output
    assert r.stdout == "role,name,dtype,shape\ninput,relu1_out,float32,1x8x32x32\noutput,relu2_out,float32,1x16x8x8\n"
    assert "wrote" in r.stderr and out.exists()
    r = runner.invoke(app, ["extract", CNN, "-o", str(out), "--to", "relu2_out", "--format", "json", "--columns", "name"])
    assert r.exit_code == 0 and json.loads(r.stdout) == [{"name": "image"}, {"name": "relu2_out"}], r.output
    r = runner.invoke(app, ["extract", CNN, "-o", str(tmp_path / "f.onnx"), "--to", "relu2_out", "--columns", "nope"])
    assert r.exit_code == 2 and "no column 'nope'" in r.stderr and not (tmp_path / "f.onnx").exists(), r.output


@pytest.mark.parametrize("args, where", [(["--input", "nope=1"], "(--input)"), (["--shape", "nope=1x2"], "(--shape)")])
def test_debug_names_the_flag_of_an_unknown_input_as_layers_does(args, where):
    lines = {}
    for command in (["layers", CNN], ["debug", CNN, "--script", "/dev/null"]):
        r = runner.invoke(app, [*command, *args])
        assert r.exit_code == 2, r.output
        lines[command[0]] = r.stderr.strip()
    assert lines["debug"] == lines["layers"] and f"unknown input name 'nope' {where}" in lines["debug"], lines


def test_the_debuggers_nodes_reads_op_types_as_selections_do(tmp_path):
    # `stats op:Conv,Relu` took both op types, `nodes op:Conv,Relu` matched nothing; `nodes --op Conv`
    # was an unknown option where every selection takes --op
    script = tmp_path / "s.txt"
    script.write_text("nodes op:Conv,Relu\nnodes --op Conv,Relu\nnodes --op=Conv --op Relu\nnodes op:Conv\nnodes op:Relu\n")
    r = runner.invoke(app, ["debug", CNN, "--script", str(script)])
    assert r.exit_code == 0, r.output
    foots = [line for line in r.stdout.splitlines() if " nodes" in line and " of " in line]
    assert len(foots) == 5 and foots[0] == foots[1] == foots[2] == "4 of 9 nodes", r.output
    assert foots[3] == foots[4] == "2 of 9 nodes", r.output


@pytest.mark.parametrize("cols", ["tensor,,max", "tensor,", ",tensor", " , "])
def test_an_empty_column_key_is_refused_as_an_empty_op_type_is(tmp_path, cols):
    # `--op Conv,,Relu` and extract's `--from a,,b` are refused; `--columns tensor,,max` was taken, the empty
    # key dropped, on the command line and in the debugger
    r = runner.invoke(app, ["layers", CNN, "--columns", cols])
    assert r.exit_code == 2 and "--columns" in r.output and "empty column key" in r.output, r.output
    script = tmp_path / "s.txt"
    script.write_text(f"stats --columns '{cols}'\n")
    r = runner.invoke(app, ["debug", CNN, "--script", str(script)])
    assert r.exit_code == 1 and "empty column key" in r.output, r.output
