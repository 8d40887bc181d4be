"""Two details of the HTML report's histograms: a bar's hover said its centre to 4 significant digits, so every
bar of 1e6 + N(0, 1e-3) read '1e+06'; and a page with no histogram (every pair exact, a dataset diff) kept a heading
that promised them over an empty section. Oracle: the bins' own edges (numpy)."""

from __future__ import annotations

import numpy as np

from conftest import sample_path
from onnxprobe import api
from onnxprobe.report.charts import histogram_figure


def test_each_bar_hovers_with_the_digits_that_tell_it_from_its_neighbours():
    x = 1e6 + np.random.default_rng(0).normal(0, 1e-3, 10000)
    bins = api.histogram_of(x)["values"]
    fig = histogram_figure("values", bins)
    (bar,) = fig["data"]
    # what the hover shows: customdata as its template formats it
    fmt = bar["hovertemplate"].partition("%{customdata")[2].partition("}")[0].lstrip(":")
    said = [format(v, fmt) if isinstance(v, float) else v for v in bar["customdata"]]
    edges = np.asarray(bins["edges"], dtype=np.float64)
    centres = (edges[:-1] + edges[1:]) / 2
    assert len(set(said)) == len(set(centres.tolist())) > 10, said[:5]
    assert all(abs(float(s) - c) <= (edges[1] - edges[0]) / 2 for s, c in zip(said, centres))


def test_a_page_without_histograms_says_why(tmp_path):
    res = api.diff(sample_path("mlp"), sample_path("mlp"))
    page = api.html(res, tmp_path / "r.html", histograms={})
    assert "none: every pair is exact" in page
