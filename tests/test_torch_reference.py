"""`diff --vs-torch`: an ONNX export against the nn.Module it came from, module by module, for both of
torch's exporters, and its gradients against torch autograd. torch is the oracle: every pair is an ONNX
tensor (onnxruntime) against the module output torch computes, so a wrong pairing (a Conv against the
BatchNorm folded into it) fails, and an altered weight must fail first at its own module."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from typer.testing import CliRunner

torch = pytest.importorskip("torch")

from conftest import scale_weight_row  # noqa: E402
import torch_models as tm  # noqa: E402  (needs torch)
from onnxprobe import api  # noqa: E402
from onnxprobe.cli.main import app  # noqa: E402
from onnxprobe.errors import UsageError  # noqa: E402
from onnxprobe.match.engine import FOLDED, NO_COUNTERPART, NOT_OBSERVABLE  # noqa: E402
from onnxprobe.match.modules import module_scopes  # noqa: E402

runner = CliRunner()
FILE = Path(__file__).with_name("torch_models.py")
NAMES = ["cnn", "block", "recurrent", "shared"]
KINDS = ["legacy", "dynamo"]
LAYERS = ("Conv2d", "Linear", "BatchNorm2d", "LayerNorm", "LSTM", "GRU")


def spec(func: str) -> str:
    return f"{FILE}:{func}"


def _export(name: str, kind: str, path: Path) -> Path:
    if kind == "dynamo":
        pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
    m, args = tm.build(name)
    kwargs = {"opset_version": 17} if kind == "legacy" else {}
    torch.onnx.export(m, args, str(path), dynamo=kind == "dynamo", input_names=["x"], output_names=["y"],
                      verbose=False, **kwargs)
    return path


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    d = tmp_path_factory.mktemp("exports")
    cache: dict = {}

    def get(name: str, kind: str) -> Path:
        if (name, kind) not in cache:
            cache[name, kind] = _export(name, kind, d / f"{name}_{kind}.onnx")
        return cache[name, kind]

    return get


def _paired(res) -> dict[str, object]:
    return {r.pair.b.module: r for r in res.results if r.pair.b.module}


def _unmatched(res) -> dict[str, object]:
    return {u.obs.name: u for u in res.matching.unmatched_b}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", NAMES)
def test_clean_export_passes_and_every_layer_is_accounted_for(exports, name, kind):
    path = exports(name, kind)
    res = api.diff_torch(path, spec(name))
    assert res.verdict()[0] == "pass", res.verdict()
    assert res.compared >= 1 and all(r.metrics is not None for r in res.results)
    assert max(r.metrics.max_abs for r in res.results) < 1e-5
    module, _ = tm.build(name)
    paired, unmatched = _paired(res), _unmatched(res)
    for path_, m in module.named_modules():
        if type(m).__name__ in LAYERS:
            assert path_ in paired or path_ in unmatched, f"{path_} is neither paired nor unmatched"
    expected = {
        "cnn": ({"features.0.bn", "features.1.body.0.bn", "features.1.body.2", "pool", "fc"},
                {"features.0.conv": FOLDED, "features.1.body.0.conv": FOLDED, "features.1.body.1": FOLDED,
                 "drop": NOT_OBSERVABLE}),
        "block": ({"ln1", "attn.q", "attn.k", "attn.v", "attn.softmax", "attn.o", "ln2", "mlp.0", "mlp.1", "mlp.2"},
                  {"attn.drop": NOT_OBSERVABLE}),
        "recurrent": ({"lstm", "gru", "head"}, {}),
        "shared": ({"out"}, {"lin": NO_COUNTERPART, "act": NO_COUNTERPART}),
    }[name]
    assert expected[0] <= set(paired), set(paired)
    for p, cause in expected[1].items():
        assert unmatched[p].cause == cause, (p, unmatched[p].reason)
    if name == "cnn":  # the BatchNorm folded into the Conv is compared through the Conv's tensor
        assert "BatchNormalization" in unmatched["features.0.conv"].reason or "fused" in unmatched["features.0.conv"].reason
    if name == "shared":
        assert "called 2 times" in unmatched["lin"].reason
    for r in res.results:
        assert r.pair.strategy.startswith("torch-") and r.pair.reason
    # a correct export introduces no error of its own anywhere: each layer's introduced error is within the
    # float32 rounding the accumulated one shows (an in-place ReLU after a replayed module overwrote A's own
    # value, and read 3 dB on a layer at 138)
    for r in res.results:
        if r.introduced is not None and not r.introduced.exact and r.metrics.sqnr_db < 1e9:
            assert r.introduced.sqnr_db > min(r.metrics.sqnr_db, 100.0) - 20.0, (r.pair.b.module, r.introduced.sqnr_db, r.metrics.sqnr_db)


def _weight_of(path: Path, module: str, known: set[str]) -> str:
    """The weight initializer of the first Conv/Gemm/MatMul node that ran inside ``module``."""
    m = onnx.load(str(path))
    scopes = module_scopes(m, known)
    inits = {i.name for i in m.graph.initializer}
    for i in scopes[module].nodes:
        n = m.graph.node[i]
        if n.op_type in ("Conv", "Gemm", "MatMul") and len(n.input) > 1 and n.input[1] in inits:
            return n.input[1]
    raise AssertionError(f"no weight in {module}")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name, modules, blamed", [
    # the Conv folded with its BatchNormalization: its weight is in the Conv's scope (legacy) or the BN's
    # (dynamo), and the error is blamed on the BN, whose output the fused Conv computes
    ("cnn", ("features.1.body.1", "features.1.body.2"), "features.1.body.2"),
    ("cnn", ("features.0.conv", "features.0.bn"), "features.0.bn"),
    ("block", ("mlp.0",), "mlp.0"),
    ("block", ("attn.v",), "attn.v"),
    ("recurrent", ("head",), "head"),
])
def test_altered_weight_fails_first_at_its_module(exports, tmp_path, name, modules, blamed, kind):
    path = exports(name, kind)
    known = {p for p, _ in tm.build(name)[0].named_modules()}
    scopes = module_scopes(onnx.load(str(path)), known)
    module = next(mod for mod in modules if mod in scopes and scopes[mod].nodes)
    w = _weight_of(path, module, known)
    m = onnx.load(str(path))
    for t in m.graph.initializer:
        if t.name == w:
            a = numpy_helper.to_array(t).copy()
            a.flat[: max(1, a.size // 3)] *= 1.5
            t.CopyFrom(numpy_helper.from_array(a, t.name))
    broken = tmp_path / "broken.onnx"
    onnx.save(m, str(broken))
    res = api.diff_torch(broken, spec(name))
    assert res.verdict()[0] == "fail"
    first = res.first_failure
    assert first is not None and first.pair.b.module == blamed
    before = [r for r in res.results if r.pair.a.index < first.pair.a.index]
    assert all(r.passed for r in before), "a pair before the altered module failed"
    # teacher forcing: the altered module introduces the error; the next one, fed the ONNX values, does not
    assert first.introduced is not None and first.introduced.sqnr_db < 60
    after = [r for r in res.results if r.pair.a.index > first.pair.a.index and r.introduced is not None
             and not r.pair.a.is_output]
    if after:
        assert after[0].introduced.sqnr_db > 100 or after[0].introduced.exact


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", NAMES)
def test_gradients_agree_with_torch_autograd(exports, name, kind):
    path = exports(name, kind)
    res = api.diff_grad_torch(path, spec(name))
    assert res.verdict()[0] == "pass", res.verdict()
    module, _ = tm.build(name)
    params = {n: p.detach().numpy() for n, p in module.named_parameters()}
    m = onnx.load(str(path))
    paired_a = {r.pair.a.name for r in res.results if r.metrics is not None}
    # every parameter that is an initializer of the export (same name, same values) is paired and agrees
    as_is = [i.name for i in m.graph.initializer
             if i.name in params and np.array_equal(numpy_helper.to_array(i), params[i.name])]
    assert as_is
    for n in as_is:
        assert f"{n}_grad" in paired_a, f"{n} is an initializer but its gradient was not compared"
    rows = {r.pair.a.name: r for r in res.results}
    for n in as_is:
        assert rows[f"{n}_grad"].passed
    assert abs(res.grad["loss_a"] - res.grad["loss_b"]) <= 1e-4 * max(1.0, abs(res.grad["loss_b"]))
    assert all(not r.pair.b.name.endswith("_grad") for r in res.results)  # B: torch parameter names
    if name == "block":  # fresh LayerNorms are merged into one initializer: the sum of their gradients
        merged = [r for r in res.results if "+" in r.pair.b.name]
        assert merged and all(r.passed for r in merged)


@pytest.mark.parametrize("kind", KINDS)
def test_square_weights_equal_to_their_transpose_are_paired_transposed(exports, kind):
    """A zero or identity weight, and two parameters each the other's transpose, equal a MatMul's
    (transposed) initializer both as they are and transposed: they are paired by the module that reads
    the initializer, or by its use as a MatMul's B, so their gradients pass against torch autograd (they
    were paired untransposed and failed, at about 0.06, on right gradients)."""
    res = api.diff_grad_torch(exports("square", kind), spec("square"))
    assert res.verdict()[0] == "pass", [(r.pair.a.name, r.pair.b.name) for r in res.results if not r.passed]
    paired = {r.pair.b.name for r in res.results if r.metrics is not None}
    assert {"proj.weight", "gate.weight", "enc.weight", "dec.weight"} <= paired, paired


@pytest.mark.parametrize("kind", KINDS)
def test_what_forward_adds_after_the_last_module_is_blamed_on_the_output(exports, kind):
    """A module whose forward() adds 0.001 after its last Linear, against the export of the one without:
    the failure is the model's output (output[0]), not fc3, whose own output agrees (it was labelled fc3
    and blamed on it); fc3 is listed with the reason."""
    res = api.diff(exports("tanhmlp", kind), vs_torch=spec("tanhmlp_shifted"))
    failing = [r for r in res.results if r.metrics is not None and not r.passed]
    assert [r.pair.b.name for r in failing] == ["output[0]"], [(r.pair.a.name, r.pair.b.name) for r in failing]
    assert failing[0].metrics.max_abs == pytest.approx(0.001, rel=1e-3)
    assert any(u.obs.name == "fc3" and "changed by forward() after it" in u.reason for u in res.matching.unmatched_b)


def test_gradients_of_a_changed_module_fail(exports):
    path = exports("block", "legacy")
    module, args = tm.build("block")
    with torch.no_grad():
        module.mlp[2].weight.mul_(1.5)
    res = api.diff_grad_torch(path, (module, args))
    assert res.verdict()[0] == "fail"
    refused = {u.obs.name: u for u in res.matching.unmatched_a}
    assert "mlp.2.weight_grad" not in refused or "other values" in refused["mlp.2.weight_grad"].reason
    # the forward passes differ, which the losses show: said, so that no failing gradient reads as the cause
    assert any("the losses differ" in n for n in res.notes), res.notes


@pytest.mark.parametrize("kind", KINDS)
def test_a_changed_matmul_weight_without_batchnorm_is_not_called_derived(exports, kind):
    """mlp.0 (a Linear, stored transposed as a MatMul weight) changed in torch after the export, in a module
    without BatchNorm: the weight is not "derived by the exporter (folded, reordered or reshaped)" but the
    parameter with other values, said on both sides."""
    module, args = tm.build("block")
    with torch.no_grad():
        module.mlp[0].weight[3].mul_(1.3)
    res = api.diff_grad_torch(exports("block", kind), (module, args))
    why_b = {u.obs.name: u.reason for u in res.matching.unmatched_b}
    assert "not an export of the module as it is now" in why_b.get("mlp.0.weight", ""), why_b
    assert not any("derived from the parameters" in u.reason and "mlp.0" in u.reason for u in res.matching.unmatched_a)


@pytest.mark.parametrize("loss", ["mean", "mse", "cross-entropy"])
def test_gradient_losses_match_torch(exports, loss):
    path = exports("cnn", "legacy")
    rng = np.random.default_rng(0)
    extra = {"mse": {"target": rng.standard_normal((2, 5)).astype(np.float32)},
             "cross-entropy": {"labels": np.array([1, 4], dtype=np.int64)}}.get(loss, {})
    res = api.diff_grad_torch(path, spec("cnn"), api.GradSpec(loss=loss, **extra))
    assert res.verdict()[0] == "pass", res.verdict()
    assert abs(res.grad["loss_a"] - res.grad["loss_b"]) <= 1e-4 * max(1.0, abs(res.grad["loss_b"]))


def test_cli_json_has_modules_and_first_failure_module(exports, tmp_path):
    path = exports("block", "dynamo")
    r = runner.invoke(app, ["diff", str(path), "--vs-torch", spec("block"), "--json", "-"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["verdict"] == "pass" and d["first_failure_module"] is None
    assert {"ln1", "mlp.0", "attn.q"} <= {p["module"] for p in d["pairs"]}
    assert all(p["introduced_sqnr_db"] is not None or p["introduced_exact"] for p in d["pairs"])
    m = onnx.load(str(path))
    names = [t.name for t in m.graph.initializer]
    assert "mlp.2.bias" in names  # a random bias keeps its parameter's name in both exporters
    for t in m.graph.initializer:
        if t.name == "mlp.2.bias":
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t) + 0.5, t.name))
    onnx.save(m, str(tmp_path / "b.onnx"))
    r = runner.invoke(app, ["diff", str(tmp_path / "b.onnx"), "--vs-torch", spec("block"), "--json", "-"])
    d = json.loads(r.stdout)
    assert r.exit_code == 1 and d["verdict"] == "fail" and d["first_failure_module"] == "mlp.2"


def test_grad_json_names_the_module_of_a_parameter_row(exports):
    """diff --grad --vs-torch: a parameter's gradient row had "module": null, and "first_failure_module" was null
    where such a row failed first (m.transformer.h.0.mlp.c_proj.weight_grad, QA). Its module is the one that holds
    it. Every row fails here (max |a-b| <= 0: float32 gradients are never all exact), the first a parameter's."""
    path = exports("block", "dynamo")
    r = runner.invoke(app, ["diff", "--grad", str(path), "--vs-torch", spec("block"), "--metric", "max_abs", "--atol", "0",
                            "--json", "-"])
    d = json.loads(r.stdout)
    params = [p for p in d["pairs"] if p["b"] in {n for n, _ in tm.build("block")[0].named_parameters()}]
    assert params and all(p["module"] == p["b"].rsplit(".", 1)[0] for p in params), [(p["b"], p["module"]) for p in params]
    first = next(p for p in d["pairs"] if p["a"] == d["first_failure"])
    assert r.exit_code == 1 and d["first_failure_module"] == first["module"] is not None, (d["first_failure"], first)


@pytest.mark.parametrize("flag, given, other", [("--atol", "atol", ("rtol", 1e-4)), ("--rtol", "rtol", ("atol", 1e-5))])
def test_a_per_tensor_threshold_keeps_the_exports_default_for_the_other(exports, flag, given, other):
    """--atol NAME:V under --vs-torch: the rule's rtol is the export's default (1e-4, README), as the
    whole-model --atol's is, not the generic 1e-3 (and --rtol NAME:V's atol 1e-5, not 1e-4)."""
    path = exports("block", "dynamo")
    r = runner.invoke(app, ["diff", str(path), "--vs-torch", spec("block"), flag, "mlp.0:0.01", "--json", "-"])
    assert r.exit_code == 0, r.output
    rule = json.loads(r.stdout)["per_tensor"]["mlp.0"]
    assert rule[given] == 0.01 and rule[other[0]] == other[1], rule


def test_cli_grad_table(exports):
    path = exports("cnn", "dynamo")
    r = runner.invoke(app, ["diff", "--grad", str(path), "--vs-torch", spec("cnn"), "--loss", "mean"])
    assert r.exit_code == 0, r.output
    assert "fc.weight" in r.output and "torch autograd" in r.output


def test_selection_by_module_path(exports):
    res = api.diff_torch(exports("block", "legacy"), spec("block"), selection=api.Selection(names=("attn.*",)))
    mods = {r.pair.b.module for r in res.results if not r.pair.a.is_output}
    assert mods and all(m.startswith("attn.") for m in mods)
    with pytest.raises(UsageError, match="matches no module"):
        api.diff_torch(exports("block", "legacy"), spec("block"), selection=api.Selection(names=("nothing*",)))


def test_capture_keys_are_onnx_names_and_vs_npz_passes(exports, tmp_path):
    path = exports("cnn", "legacy")
    module, args = tm.build("cnn")
    import onnxprobe.torch as opt

    acts = opt.capture(module, args, path)
    names = {o.name for o in onnx.load(str(path)).graph.output} | {n for node in onnx.load(str(path)).graph.node for n in node.output}
    assert acts and set(acts) <= names | {"x"} and "y" in acts
    # the input it ran on is kept too (under its ONNX name): --vs-npz then runs A on it, with no --input
    # (A ran on seeded random data, and every pair failed)
    assert np.array_equal(acts["x"], args[0].numpy())
    np.savez(tmp_path / "acts.npz", **{k: v for k, v in acts.items()})
    res = api.diff(path, vs_npz=tmp_path / "acts.npz", selection=api.Selection(all=True),
                   tolerance=api.Tolerance(atol=1e-5, rtol=1e-4))
    assert res.verdict()[0] == "pass" and res.compared == len(acts) - 1


@pytest.mark.parametrize("dynamo", [False, True])
def test_export_and_diff(dynamo):
    if dynamo:
        pytest.importorskip("onnxscript")
    import onnxprobe.torch as opt

    module, args = tm.build("block")
    res = opt.export_and_diff(module, args, dynamo=dynamo)
    assert res.verdict()[0] == "pass" and res.compared >= 10
    res = opt.diff(module, args, res.a.model)
    assert res.verdict()[0] == "pass"


def _line(r) -> str:
    out = r.output.strip()
    assert r.exit_code != 0
    assert "Traceback" not in out and len(out.splitlines()) == 1, out
    return out


@pytest.mark.parametrize("func, words", [
    ("nope.py:build", "no such Python file"),
    ("FILE:nothing", "has no function 'nothing'"),
    ("FILE:raises", "raises() raised RuntimeError: cannot build the model"),
    ("FILE:not_a_module", "returned int, not an nn.Module"),
    ("FILE:args_only", "returned a tuple (Tensor, Tensor), not an nn.Module"),
    ("FILE", "expected FILE.py:FUNC"),
    ("FILE:two_outputs", "returns 2 tensor(s), the ONNX model has 1 output(s)"),
    ("FILE:wrong_width", "has shape [3, 5]"),
    ("FILE:too_many_args", "example arguments hold 2 tensor(s)"),
    ("FILE:block", "input x (from the example arguments): shape [2, 5, 16]"),
    ("FILE:block_module_only", "the torch module's forward raised RuntimeError"),
])
def test_bad_modules_get_one_line(exports, func, words):
    path = exports("shared", "legacy")
    func = func.replace("FILE", str(FILE)) if func != "FILE" else str(FILE)
    out = _line(runner.invoke(app, ["diff", str(path), "--vs-torch", func]))
    assert words in out, out


def test_not_a_python_file(exports, tmp_path):
    (tmp_path / "m.txt").write_text("x")
    out = _line(runner.invoke(app, ["diff", str(exports("shared", "legacy")), "--vs-torch", f"{tmp_path / 'm.txt'}:f"]))
    assert "not a Python file" in out


def test_conflicting_references(exports):
    p = str(exports("shared", "legacy"))
    assert "exactly one reference" in _line(runner.invoke(app, ["diff", p, p, "--vs-torch", spec("shared")]))
    assert "--vs-torch" in _line(runner.invoke(app, ["diff", "--grad", p, p, "--vs-torch", spec("shared")]))


def test_torch_missing_names_the_extra(exports, monkeypatch):
    p = str(exports("shared", "legacy"))
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    out = _line(runner.invoke(app, ["diff", p, "--vs-torch", spec("shared")]))
    assert "pip install 'onnxprobe[torch]'" in out


def test_map_and_per_module_tolerance(exports, tmp_path):
    path = exports("block", "legacy")
    res = api.diff_torch(path, spec("block"), user_map={"/attn/o/Add_output_0": "attn"},
                         per_tensor={"mlp.0": api.Tolerance(atol=0.0, rtol=0.0, metric="max_abs")})
    by_module = _paired(res)
    assert by_module["attn"].pair.strategy == "map" and by_module["attn"].passed
    assert "attn.o" not in by_module  # the tensor now stands for the parent
    assert by_module["mlp.0"].tolerance.metric == "max_abs"
    with pytest.raises(UsageError, match="not a module"):
        api.diff_torch(path, spec("block"), user_map={"/attn/o/Add_output_0": "nope"})
    (tmp_path / "m.json").write_text(json.dumps({"/attn/o/Add_output_0": "attn"}))
    r = runner.invoke(app, ["diff", str(path), "--vs-torch", spec("block"), "--map", str(tmp_path / "m.json"), "--json", "-"])
    assert r.exit_code == 0, r.output
    assert any(p["module"] == "attn" and p["strategy"] == "map" for p in json.loads(r.stdout)["pairs"])


def test_html_report_and_overlay_of_a_torch_diff(exports, tmp_path):
    """--html and --overlay are those of diff: the module path is in the page's rows, the overlay keys
    are nodes of the ONNX model."""
    pytest.importorskip("plotly", reason="the HTML report needs the html extra (plotly)")
    from browser import CHROMIUM, dump_dom, element

    path = exports("block", "legacy")
    page, overlay, js = tmp_path / "r.html", tmp_path / "o.json", tmp_path / "r.json"
    r = runner.invoke(app, ["diff", str(path), "--vs-torch", spec("block"), "--html", str(page), "--overlay", str(overlay),
                            "--json", str(js)])
    assert r.exit_code == 0, r.output
    report = json.loads(js.read_text())
    text = page.read_text(encoding="utf-8")
    assert all(p["module"] in text for p in report["pairs"] if p["module"])
    assert overlay.is_file() and json.loads(overlay.read_text())
    if CHROMIUM is not None:
        rows = element(dump_dom(page), "tbody", "rows")
        assert rows.count("<tr") == len(report["pairs"])


def test_a_parameter_merged_with_a_buffer_is_not_compared(exports):
    """A fresh BatchNorm's weight equals its running variance and its bias its running mean: the legacy
    exporter keeps one initializer for each pair (bn.running_var = Identity(bn.weight)), whose gradient
    then also flows through the buffer's use. Those gradients are unmatched with the reason, not failed;
    the rest passes. Dynamo folds the BatchNorm into the Linear's Gemm: the parameters of both are compared by
    the chain rule (torch.bnfold; test_torch_grad_bnfold checks the values against float64 autograd)."""
    res = api.diff_grad_torch(exports("freshbn", "legacy"), spec("freshbn"))
    refused = {u.obs.name: u.reason for u in res.matching.unmatched_a}
    assert "buffer bn.running_var" in refused["bn.weight_grad"] and "buffer bn.running_mean" in refused["bn.bias_grad"]
    assert not any(r.passed is False for r in res.results)
    assert res.verdict()[0] == "pass", res.verdict()
    assert {r.pair.b.name for r in res.results} >= {"fc.weight", "fc.bias"}
    res = api.diff_grad_torch(exports("freshbn", "dynamo"), spec("freshbn"))
    assert res.verdict()[0] == "pass", res.verdict()
    assert {r.pair.b.name for r in res.results if r.passed} >= {"fc.weight", "fc.bias", "bn.weight", "bn.bias"}
    assert any(n.startswith("BatchNorm folds") for n in res.notes)


def test_a_batchnorm_fused_by_dynamo_is_named_right(exports):
    """conv1/bn1/conv2/bn2 as siblings: dynamo fuses each BatchNorm with the Conv before it; each Conv's
    reason names its own BatchNorm (conv2's was bn1)."""
    res = api.diff_torch(exports("twoconvbn", "dynamo"), spec("twoconvbn"))
    why = {u.obs.name: u.reason for u in res.matching.unmatched_b}
    for conv, bn in (("conv1", "bn1"), ("conv2", "bn2")):
        assert f"fused it into {bn} " in why[conv], why


def test_a_gradient_error_starts_where_backpropagation_first_goes_wrong(exports, monkeypatch):
    """A wrong gradient rule (Tanh's, scaled by 1.1) corrupts every gradient before the last Tanh in the
    forward order and none after: the error starts at the last Tanh's input (fc2's output, or fc2's
    weights), not at the model's input, which is where the first failing pair in forward order is."""
    from dataclasses import replace as dc_replace

    from onnxprobe.autodiff import registry

    good = registry.RULES["Tanh"]
    monkeypatch.setitem(registry.RULES, "Tanh", dc_replace(good, fn=lambda g: [g.Mul(d, g.scalar(1.1)) for d in good.fn(g)]))
    res = api.diff_grad_torch(exports("tanhmlp", "legacy"), spec("tanhmlp"), api.GradSpec(loss="mean"))
    failing = [r for r in res.results if r.passed is False]
    assert failing and res.verdict()[0] == "fail"
    assert res.first_failure.pair.b.name in ("fc2", "fc2.weight", "fc2.bias"), res.first_failure.pair.b.name
    assert all(r.passed for r in res.results if r.pair.b.name in ("fc3", "fc3.weight", "fc3.bias"))


def test_a_weight_changed_in_a_module_without_batchnorm_is_not_called_a_fold(exports, tmp_path):
    """A same-named initializer with other values, in a module that has no BatchNorm to fold: the reason
    says the model is not the module's export (it read 'the exporter folded another layer into it')."""
    path = exports("tanhmlp", "dynamo")
    m = scale_weight_row(onnx.load(str(path)), "fc2.weight", 1, 1.2)
    broken = tmp_path / "broken.onnx"
    onnx.save(m, broken)
    res = api.diff_grad_torch(broken, spec("tanhmlp"), api.GradSpec(loss="mean"))
    refused = {u.obs.name: u.reason for u in res.matching.unmatched_a}
    assert "not an export of the module as it is now" in refused["fc2.weight_grad"] and "folded" not in refused["fc2.weight_grad"]


def test_example_arguments_may_be_numpy_arrays(exports):
    """A notebook's example arguments as numpy arrays: the ONNX inputs take their values, as torch tensors'."""
    module, args = tm.build("cnn")
    res = api.diff_torch(exports("cnn", "legacy"), module, example_args=(args[0].numpy(),))
    assert res.verdict()[0] == "pass", res.verdict()
    (name,) = res.feed
    assert np.array_equal(res.feed[name], args[0].numpy())


@pytest.mark.parametrize("kind", KINDS)
def test_wrt_reaches_parameters_by_their_torch_names_and_leaves_the_rest_out(exports, kind):
    """--wrt 'mlp.*': mlp.0.weight is stored as onnx::MatMul_* (legacy) or val_* (dynamo), which the glob
    missed; every other parameter was listed as "has no gradient in A (the loss does not depend on it)".
    Now the torch name reaches it, and what --wrt leaves out is not listed."""
    res = api.diff_grad_torch(exports("block", kind), spec("block"), spec=api.GradSpec(wrt=("mlp.*",)))
    names = {r.pair.b.name for r in res.results}
    assert {"mlp.0.weight", "mlp.0.bias", "mlp.2.weight", "mlp.2.bias"} <= names, names
    assert all(n.startswith("mlp.") for n in names), names
    assert not any("does not depend on it" in u.reason for u in res.matching.unmatched_b), res.matching.unmatched_b
    assert res.verdict()[0] == "pass", res.verdict()


@pytest.mark.parametrize("dynamo", [False, True])
def test_a_layer_whose_forward_never_runs_is_listed(dynamo):
    """A Linear whose weight the parent reads directly (F.linear(h, self.side.weight)) has no forward call
    and no scope: it was absent from the report; it is unmatched, saying its forward never ran."""
    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(6, 6)
            self.side = torch.nn.Linear(6, 6)

        def forward(self, x):
            return torch.nn.functional.linear(torch.tanh(self.fc(x)), self.side.weight)

    import onnxprobe.torch as opt

    torch.manual_seed(0)
    res = opt.export_and_diff(Tied().eval(), (torch.randn(3, 6),), dynamo=dynamo)
    why = {u.obs.name: u.reason for u in res.matching.unmatched_b}
    assert "forward never ran" in why.get("side", ""), why
    assert res.verdict()[0] == "pass", res.verdict()


def test_a_dynamo_export_below_opset_18_is_said_to_carry_no_scopes(tmp_path):
    """onnx's version converter (a dynamo export at opset 17) drops the node metadata: the file was an
    "unknown exporter" and each module "fused away or removed by the exporter"; now the exporter is named
    from the node names and each module says the file carries no module scopes."""
    pytest.importorskip("onnxscript")
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)).eval()
    x, path = torch.randn(2, 8), tmp_path / "m.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=True, opset_version=17, input_names=["x"])
    assert not any(p.key == "pkg.torch.onnx.name_scopes" for n in onnx.load(str(path)).graph.node for p in n.metadata_props)
    res = api.diff_torch(path, (m, (x,)), introduced=False)
    assert "dynamo exporter" in res.measured, res.measured
    why = _unmatched(res)
    for p in ("0", "1"):
        assert "carries no module scopes" in why[p].reason and "fused away" not in why[p].reason, why[p].reason
    assert any("opset >= 18" in n for n in res.notes), res.notes


class _Branch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(4, 4), torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh())

    def forward(self, x):
        return self.a(x) if x.sum() > 0 else self.b(x)


def test_an_export_of_the_other_branch_is_said_so(tmp_path):
    """Exported where x.sum() > 0 (a's branch), compared where it is not (torch runs b): b was "fused away
    or removed by the exporter" and a's "forward never ran"; both now say the export traced another branch,
    and so do b's weights under --grad (not "no initializer holds its values"). Legacy: the dynamo exporter
    refuses data-dependent control flow (GuardOnDataDependentSymNode)."""
    torch.manual_seed(0)
    m, path = _Branch().eval(), tmp_path / "m.onnx"
    torch.onnx.export(m, (torch.ones(1, 4),), str(path), dynamo=False, input_names=["x"], opset_version=17)
    x = -torch.ones(1, 4)
    res = api.diff_torch(path, (m, (x,)), introduced=False)
    why = _unmatched(res)
    for p in ("a", "b"):
        assert "traced another branch" in why[p].reason and "holds module a's nodes but torch ran b:" in why[p].reason, why
    assert res.verdict()[0] == "fail"  # the outputs differ
    res = api.diff_grad_torch(path, (m, (x,)))
    why = {u.obs.name: u.reason for u in res.matching.unmatched_b}
    assert all("traced another branch" in why[p] for p in ("b.0.weight", "b.0.bias")), why
    # a's weights, which torch's loss does not depend on (a did not run): compared with torch's zeros, failing
    assert {"a.weight", "a.bias"} <= {r.pair.b.name for r in res.results}, [(u.obs.name, u.reason) for u in res.matching.unmatched_a]
    assert res.verdict()[0] == "fail", res.verdict()


@pytest.mark.parametrize("dynamo", [False, True])
def test_a_container_whose_last_child_is_called_twice_takes_its_tensor(dynamo):
    """Sequential(l, Tanh(), l) with one Linear used twice: seq's tensor was said to be "compared there" with
    its last child, which (called twice) pairs with nothing; seq, called once, is compared with it."""
    class Twice(torch.nn.Module):
        def __init__(self):
            super().__init__()
            lin = torch.nn.Linear(5, 5)
            self.seq = torch.nn.Sequential(lin, torch.nn.Tanh(), lin)

        def forward(self, x):
            return self.seq(x) * 2

    import onnxprobe.torch as opt

    torch.manual_seed(0)
    res = opt.export_and_diff(Twice().eval(), (torch.randn(3, 5),), dynamo=dynamo)
    assert "seq" in {r.pair.b.name for r in res.results}, [(r.pair.a.name, r.pair.b.name) for r in res.results]
    why = {u.obs.name: u.reason for u in res.matching.unmatched_b}
    assert "called 2 times" in why.get("seq.0", ""), why
    assert not any("compared there" in w for w in why.values()), why
    assert res.verdict()[0] == "pass", res.verdict()


def test_what_the_users_code_prints_leaves_stdout_to_the_report(exports, tmp_path):
    """Prints in the user's file, its FUNC and its module's forward go to stderr: `--json -` stays JSON
    (the report read 'loading ...' first, and jq failed)."""
    f = tmp_path / "noisy.py"
    f.write_text(f"import sys\nsys.path.insert(0, {str(FILE.parent)!r})\nprint('loading')\nimport torch_models as tm\n"
                 "class Loud(tm.TanhMLP):\n    def forward(self, x):\n        print('forward')\n        return super().forward(x)\n"
                 "def build():\n    print('building')\n    m, a = tm.build('tanhmlp')\n    l = Loud()\n"
                 "    l.load_state_dict(m.state_dict())\n    return l.eval(), a\n")
    for extra in ([], ["--grad"]):
        r = runner.invoke(app, ["diff", *extra, str(exports("tanhmlp", "legacy")), "--vs-torch", f"{f}:build", "--json", "-"])
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["verdict"] == "pass"
        assert "building" in r.stderr and "forward" in r.stderr


def test_bfloat16_tensors_cross_between_torch_and_numpy():
    """bfloat16 example arguments and feeds (torch's .numpy() refuses bfloat16: an internal error, or "the
    module's forward raised" for onnxprobe's own conversion) go through float32, exactly both ways."""
    import ml_dtypes

    from onnxprobe.torch.runner import from_numpy, to_numpy

    t = torch.randn(3, 5).bfloat16()
    a = to_numpy(t)
    assert a.dtype == np.dtype(ml_dtypes.bfloat16) and np.array_equal(a.astype(np.float32), t.float().numpy())
    back = from_numpy(a)
    assert back.dtype == torch.bfloat16 and torch.equal(back, t)
    assert from_numpy(np.ones(2, np.float32)).dtype == torch.float32


def test_a_flag_naming_one_threshold_keeps_the_defaults_other(exports):
    """--atol alone against a torch export keeps the export default's rtol (1e-4): the generic 1e-3 took
    its place. A full criterion from the API stays as given; another metric stays itself."""
    from onnxprobe.compare.criteria import EXPORT_TOLERANCE

    t = api.Tolerance.from_flags(atol=1.0).over(EXPORT_TOLERANCE)
    assert (t.metric, t.atol, t.rtol) == ("allclose", 1.0, EXPORT_TOLERANCE.rtol) and "--atol given" in t.why
    full = api.Tolerance(atol=1.0)
    assert full.over(EXPORT_TOLERANCE) is full
    sq = api.Tolerance.from_flags(min_sqnr=20.0)
    assert sq.over(EXPORT_TOLERANCE) is sq
    res = api.diff(exports("tanhmlp", "legacy"), vs_torch=spec("tanhmlp"), tolerance=api.Tolerance.from_flags(atol=1.0))
    assert all(r.tolerance.rtol == EXPORT_TOLERANCE.rtol for r in res.results if r.tolerance is not None)


def test_a_wrt_pattern_naming_nothing_is_refused(exports):
    """diff --grad --vs-torch --wrt bogus beside one that matches: refused, as grad refuses it (ignored)."""
    with pytest.raises(UsageError, match=r"wrt \(--wrt\) 'bogus'"):
        api.diff_grad_torch(exports("tanhmlp", "legacy"), spec("tanhmlp"), api.GradSpec(wrt=("fc1.weight", "bogus")))
    res = api.diff_grad_torch(exports("tanhmlp", "legacy"), spec("tanhmlp"), api.GradSpec(wrt=("fc1.weight",)))
    assert [r.pair.b.name for r in res.results] == ["fc1.weight"]


def test_a_float16_export_gets_float16_gradient_defaults(tmp_path):
    """The gradient check of a float16 export used float32's criterion (0.0001 + 0.001|b|) and failed on
    float16 rounding; its forward diff had the float16 one already."""
    from onnx import TensorProto, helper

    from onnxprobe.compare.criteria import GRAD_TOLERANCE, HALF_GRAD_TOLERANCE, HALF_TOLERANCE, export_tolerance

    for elem, want, want_grad in ((TensorProto.FLOAT16, HALF_TOLERANCE, HALF_GRAD_TOLERANCE),
                                  (TensorProto.FLOAT, None, GRAD_TOLERANCE)):
        g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", elem, [2])],
                              [helper.make_tensor_value_info("y", elem, [2])])
        p = tmp_path / f"m{elem}.onnx"
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
        m = api.load(p)
        assert export_tolerance(m, grads=True) is want_grad
        if want is not None:
            assert export_tolerance(m) is want


@pytest.mark.parametrize("kind", KINDS)
def test_a_buffers_gradient_is_said_to_be_a_buffers(exports, kind):
    """A registered buffer's initializer has an ONNX gradient and no torch one: it read "derived from the
    parameters by the exporter (folded, reordered or reshaped)"; it says it holds a buffer."""
    res = api.diff_grad_torch(exports("scaled", kind), spec("scaled"))
    reasons = [u.reason for u in res.matching.unmatched_a if "buffer" in u.reason]
    assert reasons and all("holds the buffer scale" in r for r in reasons), [u.reason for u in res.matching.unmatched_a]
    assert res.verdict()[0] == "pass"


@pytest.mark.parametrize("kind", KINDS)
def test_a_module_returning_two_tensors_of_one_shape_is_not_compared(tmp_path, kind):
    """Pair returns (a(x), b(x) * 3): its scope's tensor is the second, torch's first output the first, and the
    row compared them (a false FAIL, "error starts at t", wrong intro dB after it). Which is which is not
    known: the module is listed with that reason; its Linears and the model output still pass."""
    if kind == "dynamo":
        pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
    m, args = tm.build("tupleuser")
    path = tmp_path / "t.onnx"
    torch.onnx.export(m, args, str(path), dynamo=kind == "dynamo", verbose=False, **({"opset_version": 17} if kind == "legacy" else {}))
    res = api.diff_torch(path, spec("tupleuser"))
    assert all(r.passed for r in res.results if r.passed is not None), [(r.pair.b.name, r.passed) for r in res.results]
    assert not any(r.pair.b.name == "t" for r in res.results)
    (why,) = [u.reason for u in res.matching.unmatched_b if u.obs.name == "t"]
    assert "2 tensors of one shape" in why


def test_a_float_argument_the_export_baked_in_reaches_torch(tmp_path):
    """forward(x, s=2.0) exported by dynamo (s baked into the graph): torch ran forward(x), s = 1, and every
    row failed by a factor of 2; the example's non-tensor arguments go to torch as given."""
    pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
    m, args = tm.build("scaledby")
    path = tmp_path / "s.onnx"
    torch.onnx.export(m, args, str(path), dynamo=True, verbose=False)
    res = api.diff_torch(path, spec("scaledby"))
    assert res.verdict()[0] == "pass" and all(r.passed for r in res.results if r.passed is not None)
    res = api.diff_grad(path, vs_torch=spec("scaledby"))
    assert res.verdict()[0] == "pass"


def test_a_torchscript_module_is_refused_in_one_line(tmp_path):
    """FUNC returning torch.jit.script(m): 'internal error: RuntimeError: register_forward_pre_hook is not
    supported on ScriptModules'."""
    m, args = tm.build("scaled")
    path = tmp_path / "s.onnx"
    torch.onnx.export(m, args, str(path), dynamo=False, opset_version=17, verbose=False)
    with pytest.raises(api.UsageError, match="TorchScript"):
        api.diff_torch(path, (torch.jit.script(m), args))
    r = CliRunner().invoke(app, ["diff", str(path), "--vs-torch", f"{FILE}:scripted"])
    assert r.exit_code == 2 and "TorchScript" in r.stderr and "internal error" not in r.stderr, r.output


def test_the_merged_zero_biases_of_a_transformer_layer_pair_with_all_their_parameters(tmp_path):
    """The legacy export of nn.TransformerEncoderLayer holds out_proj.bias, norm1.bias and norm2.bias (all
    zeros) as one initializer; its gradient is the sum of the three. out_proj.bias was left out (read in
    self_attn's scope, not out_proj's), and the faithful export's weight gradients FAILED."""
    m, args = tm.build("encoder")
    path = tmp_path / "enc.onnx"
    torch.onnx.export(m, args, str(path), dynamo=False, opset_version=17, verbose=False)
    res = api.diff_grad(path, vs_torch=spec("encoder"))
    assert res.verdict()[0] == "pass", [(r.pair.a.name, r.pair.b.name, r.passed) for r in res.results if r.passed is False]
    merged = [r for r in res.results if "norm1.bias" in r.pair.b.name]
    assert merged and "out_proj.bias" in merged[0].pair.b.name


def test_example_arguments_given_as_keywords_are_refused_saying_so(tmp_path):
    """FUNC returning (module, {"ids": ..., "mask": ...}) read as 'the example arguments hold 0 tensor(s)'."""
    m, args = tm.build("scaled")
    path = tmp_path / "s.onnx"
    torch.onnx.export(m, args, str(path), dynamo=False, opset_version=17, verbose=False)
    r = CliRunner().invoke(app, ["diff", str(path), "--vs-torch", f"{FILE}:kwargs_dict"])
    assert r.exit_code == 2 and "as a dict" in r.stderr, r.output
    with pytest.raises(api.UsageError, match="a dict"):
        api.diff_torch(path, (m, {"x": args[0]}))


def test_losses_one_float16_step_apart_are_no_disagreement():
    """A faithful float16 export's loss 5.60938 against torch's 5.61328 (one float16 step) was said to show
    that the forward passes disagree."""
    from onnxprobe.compare.gradients import forward_note

    grad = {"loss_a": 5.60938, "loss_b": 5.61328}
    assert forward_note(grad, half=True) == []
    assert forward_note(grad) and "disagree" in forward_note(grad)[0]
    assert forward_note({"loss_a": 5.0, "loss_b": 5.5}, half=True)
