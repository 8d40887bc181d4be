"""--netron FILE whose name does not end in .json was written without a word: Netron takes a dropped file as an
attachment only by that name (metadata.Attachment), and opens another as a model. The note says so."""

from __future__ import annotations

from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app


def test_a_netron_file_not_named_json_is_said(tmp_path):
    for name, told in (("a.txt", True), ("a.json", False), ("b.JSON", False)):
        r = CliRunner().invoke(app, ["layers", str(sample_path("mlp")), "--netron", str(tmp_path / name)])
        assert r.exit_code == 0 and (tmp_path / name).is_file(), r.output
        assert ("only from a file named *.json" in r.stderr) == told, (name, r.stderr)
