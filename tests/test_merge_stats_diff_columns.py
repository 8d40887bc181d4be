"""`merge-stats` of diff reports takes the data columns its CSV and JSON rows carry, as `diff --columns` does:
`--columns tensor,problem` was refused ("no column 'problem'") though its own default CSV holds it."""

from __future__ import annotations

import csv
import io

import numpy as np
from typer.testing import CliRunner

from conftest import sample_path
from onnxprobe.cli.main import app


def test_merge_stats_of_diffs_takes_problem_and_unjudged(tmp_path):
    m = str(sample_path("mlp"))
    reports = []
    for s in range(2):
        d = tmp_path / f"ds{s}"
        d.mkdir()
        for k in range(2):
            np.savez(d / f"b{k}.npz", x=np.random.default_rng(10 * s + k).standard_normal((4, 16)).astype(np.float32))
        out = tmp_path / f"d{s}.json"
        r = CliRunner().invoke(app, ["diff", m, m, "--all", "--inputs-dir", str(d), "--json", str(out)])
        assert r.exit_code == 0, r.output
        reports.append(str(out))
    r = CliRunner().invoke(app, ["merge-stats", *reports, "--columns", "tensor,problem,unjudged", "--format", "csv"])
    assert r.exit_code == 0, r.output
    rows = list(csv.reader(io.StringIO(r.stdout)))
    assert rows[0] == ["tensor", "problem", "unjudged"] and len(rows) > 1, r.stdout
