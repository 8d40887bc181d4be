"""``layers --profile``: the statistics of small tensors are computed on the host from their raw values, in no kernel, so
the profile read 'probes 0 µs' (``probe_overhead_ms`` 0) for a run whose every tensor is summarised there, and 2.6 ms
once a tensor crossed 256 KiB. The summary times that work beside the run (``host_statistics_ms``, the tensors counted
in ``host_statistics_tensors``) and counts it in what probing costs."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from conftest import SAMPLES
from onnxprobe import api
from onnxprobe.cli.main import app


def test_the_statistics_computed_on_the_host_are_part_of_what_probing_costs():
    m = api.load(str(SAMPLES / "mlp.onnx"))  # small tensors: every statistic on the host
    res = api.layers(m, api.Selection(all=True), api.RunConfig(device="cpu", cache=False))
    on_host = [p for p in res.plan.probes if p.stats_on_host]
    assert on_host  # the case at hand
    s = api.profile_layers(m, res, res.feed).summary()
    assert s["host_statistics_tensors"] == len({p.raw_output for p in on_host})
    assert s["host_statistics_ms"] >= 0 and s["probe_kernels_ms"] >= 0
    assert abs(s["probe_overhead_ms"] - (s["probe_kernels_ms"] + s["host_statistics_ms"])) < 1e-3
    r = CliRunner().invoke(app, ["layers", str(SAMPLES / "mlp.onnx"), "--all", "--profile", "--no-cache"],
                           env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert r.exit_code == 0, r.output
    assert f"the statistics of {s['host_statistics_tensors']} tensors on the host" in " ".join(r.output.split())
    r = CliRunner().invoke(app, ["layers", str(SAMPLES / "mlp.onnx"), "--all", "--profile", "--no-cache", "--json", "-"])
    prof = json.loads(r.stdout)["profile"]
    assert prof["host_statistics_tensors"] == s["host_statistics_tensors"] and "host_statistics_ms" in prof
