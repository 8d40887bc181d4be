"""Notes that name settings (``errors.said``) are kept in the API's words in a result, and in the command
line's in what the command line writes: its --json (file or '-') and the debugger's JSON said the API's
('api.diff(a, b) shows where'), which the command line's own note lines did not."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parent.parent
MLP = ROOT / "sample_models" / "mlp.onnx"


def _scaled_copy(tmp_path: Path) -> Path:
    m = onnx.load(MLP)
    t = m.graph.initializer[0]
    t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t) * np.float32(1.5), t.name))
    out = tmp_path / "mlp_b.onnx"
    onnx.save(m, out)
    return out


def test_cli_json_notes_in_command_line_words(tmp_path):
    b = _scaled_copy(tmp_path)
    from onnxprobe import api

    api_notes = [n for n in api.diff_grad(str(MLP), str(b)).notes if "losses differ" in n]
    assert api_notes and "api.diff(a, b)" in api_notes[0]  # the API's words in the result
    for target in ("-", str(tmp_path / "r.json")):
        p = subprocess.run([sys.executable, "-m", "onnxprobe", "diff", str(MLP), str(b), "--grad", "--json", target],
                           capture_output=True, text=True, cwd=tmp_path)
        assert p.returncode in (0, 1), p.stderr
        data = json.loads(p.stdout if target == "-" else Path(target).read_text())
        [note] = [n for n in data["notes"] if "losses differ" in n]
        assert "`diff A B` (without --grad) shows where" in note and "api.diff(" not in note, note


def test_json_text_uses_the_command_line_words_everywhere():
    from onnxprobe.errors import said
    from onnxprobe.report.io import json_text

    n = said(lambda say: say.either("use api.x", "use --x"))
    assert str(n) == "use api.x"
    data = {"notes": [n, "plain"], "rows": [{"why": n, "v": 1.5}], "t": (n,)}
    assert json.loads(json_text(data)) == {"notes": ["use --x", "plain"], "rows": [{"why": "use --x", "v": 1.5}], "t": ["use --x"]}
