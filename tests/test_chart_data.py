"""The data of the HTML report's charts (the plotly figures, no browser needed): every failing pair is marked,
and a mark's hover says what it is, where the value it stands for is no number."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from conftest import make_model
from onnxprobe.cli.main import app
from onnxprobe.report import charts

pytest.importorskip("plotly", reason="the charts need the html extra (plotly)")
runner = CliRunner()
F = TensorProto.FLOAT


def _report(tmp_path, args) -> dict:
    out = tmp_path / "r.json"
    r = runner.invoke(app, [*args, "--json", str(out)])
    assert out.is_file(), r.output
    return json.loads(out.read_text())


def _traces(fig) -> dict:
    return {t["name"]: t for t in fig["data"]}


def _diff(tmp_path, a_nodes, b_nodes, inits=()):
    paths = []
    for side, nodes in (("a", a_nodes), ("b", b_nodes)):
        m = make_model(nodes, [helper.make_tensor_value_info("x", F, [8])], [helper.make_tensor_value_info("y", F, [8])],
                       list(inits))
        onnx.save(m, tmp_path / f"{side}.onnx")
        paths.append(str(tmp_path / f"{side}.onnx"))
    np.save(tmp_path / "x.npy", np.linspace(-1, 1, 8, dtype=np.float32))
    d = _report(tmp_path, ["diff", *paths, "--all", "--input", f"x={tmp_path / 'x.npy'}"])
    fig = charts.diff_figure(d, {k: f"r{k}" for k in range(len(d["pairs"]))})
    return d, _traces(fig)


def test_pairs_at_minus_inf_db_are_marked_failing_at_the_axis_bottom(tmp_path):
    """A = Relu(x * 1), B = Relu(x * 0): both pairs fail at -inf dB (B all zeros), and the figure drew no ✖ (its
    SQNR is JSON's null), only the introduced 'exact' point at 140: a page that read as a clean pass."""
    k1, k0 = (numpy_helper.from_array(np.array(v, np.float32), "k") for v in (1.0, 0.0))
    nodes = [helper.make_node("Mul", ["x", "k"], ["m"], name="mul"), helper.make_node("Relu", ["m"], ["y"], name="relu")]
    for side, k in (("a", k1), ("b", k0)):
        onnx.save(make_model(nodes, [helper.make_tensor_value_info("x", F, [8])], [helper.make_tensor_value_info("y", F, [8])], [k]),
                  tmp_path / f"{side}.onnx")
    np.save(tmp_path / "x.npy", np.linspace(-1, 1, 8, dtype=np.float32))
    d = _report(tmp_path, ["diff", str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), "--all", "--input", f"x={tmp_path / 'x.npy'}"])
    assert [p["passed"] for p in d["pairs"]] == [False, False]
    traces = _traces(charts.diff_figure(d, {k: f"r{k}" for k in range(len(d["pairs"]))}))
    bad = traces["failing"]
    assert sorted(bad["x"]) == sorted(p["index"] for p in d["pairs"])  # every failing pair marked
    drawn = [y for t in traces.values() if t["name"] != "failing" for y in t["y"] if y is not None]
    assert all(y < min(drawn) for y in bad["y"])  # below everything drawn: the bottom of the axis
    assert all("-inf dB" in c[2] for c in bad["customdata"])


def test_pairs_with_nan_on_one_side_only_are_marked_failing(tmp_path):
    """A = Sqrt(x - 0.5), B = Sqrt(Relu(x - 0.5)): NaN on A's side only, no error over the finite values."""
    half = numpy_helper.from_array(np.array(0.5, np.float32), "h")
    sub = helper.make_node("Sub", ["x", "h"], ["s"], name="sub")
    a = [sub, helper.make_node("Sqrt", ["s"], ["y"], name="sqrt")]
    b = [sub, helper.make_node("Relu", ["s"], ["r"], name="relu"), helper.make_node("Sqrt", ["r"], ["y"], name="sqrt")]
    d, traces = _diff(tmp_path, a, b, [half])
    x = np.linspace(-1, 1, 8, dtype=np.float64)
    n_nan = int(np.sum(np.isnan(np.sqrt(np.where(x - 0.5 < 0, np.nan, x - 0.5)))))  # the oracle: x < 0.5
    failing = [p for p in d["pairs"] if p["passed"] is False]
    assert failing and all(p["nonfinite_mismatch"] == n_nan for p in failing)
    bad = traces["failing"]
    assert sorted(bad["x"]) == sorted(p["index"] for p in failing)
    assert all(f"NaN/Inf on one side only, or a different one on each ({n_nan}" in c[2] for c in bad["customdata"])


def test_a_tensor_with_no_finite_value_says_so_in_the_layers_chart(tmp_path):
    """The ✖ of a tensor all NaN was drawn at the largest other max |x| (3e38 here), and its hover claimed
    that value: it says "no finite value". Oracle: numpy (log of negatives is NaN, x * 1e38 is finite)."""
    consts = [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in (("big", 1e38), ("m", -1.0))]
    nodes = [helper.make_node("Mul", ["x", "big"], ["huge"], name="mul"), helper.make_node("Abs", ["x"], ["a"], name="abs"),
             helper.make_node("Mul", ["a", "m"], ["neg"], name="neg"), helper.make_node("Log", ["neg"], ["nan"], name="log"),
             helper.make_node("Add", ["huge", "nan"], ["y"], name="add")]
    onnx.save(make_model(nodes, [helper.make_tensor_value_info("x", F, [4])], [helper.make_tensor_value_info("y", F, [4])], consts),
              tmp_path / "m.onnx")
    x = np.array([1, 2, 3, 3], np.float32)
    np.save(tmp_path / "x.npy", x)
    d = _report(tmp_path, ["layers", str(tmp_path / "m.onnx"), "--all", "--input", f"x={tmp_path / 'x.npy'}"])
    bad = _traces(charts.layers_figure(d, {k: f"r{k}" for k in range(len(d["tensors"]))}))["NaN / Inf"]
    with np.errstate(invalid="ignore"):
        assert np.isnan(np.log(-np.abs(x.astype(np.float64)))).all()
    hover = {c[0]: c[2] for c in bad["customdata"]}
    assert set(hover) == {"nan", "y"}, hover  # y = huge + NaN: all NaN too
    assert all(h.startswith("no finite value") and "4 NaN" in h for h in hover.values()), hover
    assert "e+38" not in " ".join(hover.values())


def test_all_zero_tensors_and_zero_gradients_are_drawn_not_dropped(tmp_path):
    """A log axis has no 0: a tensor all zeros (a dead Relu) and a zero gradient were gaps, so a chart of
    dead layers read as a chart of fewer layers. They are drawn at the bottom, the hover saying so. Oracle:
    numpy (Relu of negative values is 0 everywhere)."""
    x = -np.linspace(1, 2, 4, dtype=np.float32)
    assert not np.maximum(x, 0).any()
    nodes = [helper.make_node("Relu", ["x"], ["dead"], name="relu"), helper.make_node("Neg", ["x"], ["alive"], name="neg"),
             helper.make_node("Add", ["dead", "alive"], ["y"], name="add")]
    onnx.save(make_model(nodes, [helper.make_tensor_value_info("x", F, [4])], [helper.make_tensor_value_info("y", F, [4])]),
              tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", x)
    d = _report(tmp_path, ["layers", str(tmp_path / "m.onnx"), "--all", "--input", f"x={tmp_path / 'x.npy'}"])
    traces = _traces(charts.layers_figure(d, {k: f"r{k}" for k in range(len(d["tensors"]))}))
    dead = next(r["index"] for r in d["tensors"] if r["name"] == "dead")
    drawn = [(x_, y_) for t in traces.values() for x_, y_ in zip(t["x"], t["y"]) if x_ == dead and y_ is not None]
    assert drawn, traces  # the dead Relu is on the chart
    zero = traces["all zeros"]
    assert list(zero["x"]) == [dead] and "all zeros" in zero["customdata"][0][2]
    assert zero["y"][0] < min(y for t in ("max |x|", "std") for y in traces[t]["y"] if y is not None)  # below the rest
    # a gradient of 0: Relu passes none back to its input where x < 0
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Sigmoid", ["r"], ["y"], name="sig")]
    onnx.save(make_model(nodes, [helper.make_tensor_value_info("x", F, [4])], [helper.make_tensor_value_info("y", F, [4])]),
              tmp_path / "g.onnx")
    d = _report(tmp_path, ["grad", str(tmp_path / "g.onnx"), "--all", "--input", f"x={tmp_path / 'x.npy'}", "--wrt", "x", "--wrt", "r"])
    norms = {g["tensor"]: g["norm"] for g in d["gradients"]}
    assert norms["x"] == 0 and norms["r"] > 0, norms  # d sigmoid(r)/dr = 1/4 at r = 0
    traces = _traces(charts.grad_figure(d, {k: f"r{k}" for k in range(len(d["gradients"]))}))
    x_row = next(g["index"] for g in d["gradients"] if g["tensor"] == "x")
    assert list(traces["zero"]["x"]) == [x_row] and "norm 0" in traces["zero"]["customdata"][0][2], traces


@pytest.mark.parametrize("values", [np.array([-1.7e308, -1e308, 0.0, 1e308, 1.7e308]), np.array([1.7e308, 1.6e308, 1.5e308]),
                                    np.array([1e-320, 2e-320, 5e-320]), np.array([1e-300, 1.0000001e-300, 1.0000002e-300])])
def test_histogram_bars_of_float64s_extremes_are_numbers_on_an_axis_plotly_draws(values):
    """The bars of a histogram over values near float64's largest sat at x = (a + b) / 2, which overflows:
    every x was inf, written null, and plotly.js threw on them, as it does on an axis past about 1e300 or one
    of a span below about 1e-300 (subnormal float64 values): the page's script stopped before the table could
    sort or filter. The axis is drawn in plotly's range, every bar a finite number, its hover and the ticks
    saying the values themselves."""
    from onnxprobe.api import histogram_of

    bins = histogram_of(values)["values"]
    fig = charts.histogram_figure("values", bins)
    bar = fig["data"][0]
    edges = bins["edges"]
    assert len(bar["x"]) == len(bar["width"]) == len(edges) - 1 and sum(bar["y"]) == values.size
    assert all(abs(v) <= 1e300 for v in [*bar["x"], *bar["width"]]) and min(bar["width"]) >= 1e-300
    for x, lo, hi in zip(bar["customdata"], edges, edges[1:]):
        assert lo <= float(x) <= hi, (x, lo, hi)  # the hover says the value (as text, with the digits it needs)
    ticks = fig["layout"]["xaxis"]
    assert [float(t) for t in ticks["ticktext"]][::4] == pytest.approx([edges[0], edges[-1]], rel=1e-2)


def test_histogram_axes_in_plotlys_range_are_drawn_as_they_are():
    from onnxprobe.api import histogram_of

    fig = charts.histogram_figure("values", histogram_of(np.array([-3e38, 0.5, 3e38], np.float32))["values"])
    assert "tickvals" not in fig["layout"].get("xaxis", {}) and min(fig["data"][0]["x"]) < -2e38


def _float64_pair(tmp_path, k_b: float) -> tuple[list[str], np.ndarray]:
    """A = Neg(Relu(x) * 1), B = Neg(Relu(x) * k_b), in float64: Relu's pair is exact, the Mul's measured."""
    D = TensorProto.DOUBLE
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Mul", ["r", "k"], ["m"], name="mul"),
             helper.make_node("Neg", ["m"], ["y"], name="neg")]
    paths = []
    for side, k in (("a", 1.0), ("b", k_b)):
        m = make_model(nodes, [helper.make_tensor_value_info("x", D, [8])], [helper.make_tensor_value_info("y", D, [8])],
                       [numpy_helper.from_array(np.array(k, np.float64), "k")])
        onnx.save(m, tmp_path / f"{side}.onnx")
        paths.append(str(tmp_path / f"{side}.onnx"))
    x = np.linspace(-1, 1, 8, dtype=np.float64)
    np.save(tmp_path / "x.npy", x)
    return paths, x


def test_exact_pairs_are_drawn_above_every_measured_sqnr(tmp_path):
    """float64 pairs measure above 140 dB: exact pairs drawn at a fixed 140 sat below a pair at 160 dB, so the
    chart read exact agreement as the worse one. They are drawn above the highest measured SQNR."""
    k_b = 1 + 1e-8
    paths, x = _float64_pair(tmp_path, k_b)
    d = _report(tmp_path, ["diff", *paths, "--all", "--input", f"x={tmp_path / 'x.npy'}"])
    b = np.maximum(x, 0) * k_b  # the oracle: numpy float64
    want = 10 * np.log10(np.sum(b ** 2) / np.sum((np.maximum(x, 0) - b) ** 2))
    assert want > 150
    traces = _traces(charts.diff_figure(d, {k: f"r{k}" for k in range(len(d["pairs"]))}))
    acc = traces["SQNR dB (accumulated)"]
    by_row = {c[1]: y for y, c in zip(acc["y"], acc["customdata"])}
    exact = [by_row[f"r{k}"] for k, p in enumerate(d["pairs"]) if p["exact"]]
    measured = [by_row[f"r{k}"] for k, p in enumerate(d["pairs"]) if not p["exact"]]
    assert exact and measured and max(measured) == pytest.approx(want, abs=0.5)
    assert min(exact) > max(measured)
