"""QA: `--html FILE` and `--overlay FILE` wrote their file without a word, where `grad --export` said "wrote OUT: ..."
(on stderr, three bare lines) and mark/extract say "wrote OUT ..." (on stderr as a note beside a row format). Every
file a command writes beside its report is said in one line on stderr, in one form: "onnxprobe: note: wrote FILE: what"."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app

runner = CliRunner()
MLP = str(sample_path("mlp"))


def _wrote(stderr: str) -> dict[str, str]:
    """{file: what} of the 'wrote' lines; every one in the one form."""
    lines = [ln for ln in stderr.splitlines() if "wrote" in ln]
    assert all(ln.startswith("onnxprobe: note: wrote ") for ln in lines), stderr
    return dict(ln[len("onnxprobe: note: wrote "):].split(": ", 1) for ln in lines)


def test_layers_says_each_file_it_writes(tmp_path):
    files = {f: str(tmp_path / f) for f in ("r.json", "acts.npz", "r.html", "o.json", "n.json")}
    r = runner.invoke(app, ["layers", MLP, "--json", files["r.json"], "--save", files["acts.npz"], "--html", files["r.html"],
                            "--overlay", files["o.json"], "--netron", files["n.json"]], env={"COLUMNS": "400"})
    assert r.exit_code == 0, r.output
    got = _wrote(r.stderr)
    assert set(got) == set(files.values()), r.stderr
    assert all((tmp_path / f).exists() for f in files)
    assert "wrote" not in r.stdout  # stdout is the report's
    json.loads((tmp_path / "r.json").read_text())


def test_json_on_stdout_is_not_said(tmp_path):
    r = runner.invoke(app, ["layers", MLP, "--json", "-"])
    assert r.exit_code == 0 and "wrote" not in r.stderr, r.output


def test_grad_export_says_it_as_the_other_files_are_said(tmp_path):
    out, html = tmp_path / "bw.onnx", tmp_path / "g.html"
    r = runner.invoke(app, ["grad", MLP, "--export", str(out), "--html", str(html), "--device", "cpu"], env={"COLUMNS": "400"})
    assert r.exit_code == 0, r.output
    got = _wrote(r.stderr)
    assert set(got) == {str(out), str(html)}, r.stderr
    assert "gradients" in got[str(out)] and "inputs:" in got[str(out)], got


def test_mark_with_a_row_format_says_it_in_the_same_form(tmp_path):
    out = tmp_path / "m.onnx"
    r = runner.invoke(app, ["mark", MLP, "-o", str(out), "--all", "--format", "csv"])
    assert r.exit_code == 0, r.output
    assert [ln for ln in r.stderr.splitlines() if "wrote" in ln][0].startswith(f"onnxprobe: note: wrote {out}"), r.stderr
