"""diff --grad of one torch module exported twice, by the legacy exporter (dynamo=False) and by dynamo: an
LSTM's / GRU's zero initial state is a Constant expanded to the batch in one and an initializer in the other.
It is a constant of the export (the zero state torch starts from when given none), not a weight: the two
exports' weight gradients agreed and the verdict was still an error ('2 of the weight gradients could not
be compared': the two zero states, unpaired). The two exports are the same function (torch's), so their
weight gradients must agree; a weight changed in one export must fail."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from typer.testing import CliRunner

from onnxprobe.cli.main import app

torch = pytest.importorskip("torch")
pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")


def _export(tmp_path, kind: str):
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = getattr(nn, kind)(4, 6, batch_first=True)
            self.fc = nn.Linear(6, 3)

        def forward(self, x):
            return self.fc(self.rnn(x)[0])

    torch.manual_seed(0)
    net = Net().eval()
    x = torch.randn(2, 5, 4)
    legacy, dynamo = tmp_path / "legacy.onnx", tmp_path / "dynamo.onnx"
    torch.onnx.export(net, (x,), str(legacy), dynamo=False, input_names=["x"], output_names=["y"])
    torch.onnx.export(net, (x,), str(dynamo), dynamo=True, input_names=["x"], output_names=["y"], external_data=False)
    np.save(tmp_path / "x.npy", x.numpy())
    return legacy, dynamo


def _diff(tmp_path, a, b, *extra):
    js = tmp_path / "d.json"
    r = CliRunner().invoke(app, ["diff", "--grad", str(a), str(b), "--input", f"x={tmp_path / 'x.npy'}",
                                 "--json", str(js), *extra])
    return r, json.loads(js.read_text())


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_the_two_exports_of_an_rnn_pass_without_the_zero_state_as_a_weight(tmp_path, kind):
    legacy, dynamo = _export(tmp_path, kind)
    r, got = _diff(tmp_path, legacy, dynamo)
    assert r.exit_code == 0 and got["verdict"] == "pass", r.output
    weights = {p["a"]: p for p in got["pairs"] if p["is_output"]}
    # W, R, B of the RNN node and the Linear's two, each compared and agreeing
    assert len(weights) == 5, sorted(weights)
    m = onnx.load(str(legacy))
    node = next(n for n in m.graph.node if n.op_type == kind)
    for t in node.input[1:4]:
        assert weights[f"{t}_grad"]["passed"] is True
    # the zero initial states are no weight of either side: nothing unmatched is a weight gradient
    for u in got["unmatched_a"] + got["unmatched_b"]:
        assert not u["is_output"], u


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_a_weight_changed_in_one_export_fails(tmp_path, kind):
    legacy, dynamo = _export(tmp_path, kind)
    m = onnx.load(str(dynamo))
    node = next(n for n in m.graph.node if n.op_type == kind)
    init = next(i for i in m.graph.initializer if i.name == node.input[2])  # R
    r_ = numpy_helper.to_array(init).copy()
    r_[0, 0, 0] += 0.5
    init.CopyFrom(numpy_helper.from_array(r_, init.name))
    changed = tmp_path / "changed.onnx"
    onnx.save(m, str(changed))
    r, got = _diff(tmp_path, legacy, changed)
    assert r.exit_code == 1 and got["verdict"] == "fail", r.output


@pytest.mark.parametrize("side", ["A", "B"])
def test_wrt_in_one_exports_names_pairs_with_the_other_exports_tensors(tmp_path, side):
    """The exporters name the LSTM's weights apart (legacy 'onnx::LSTM_117', dynamo 'val_41'): --wrt with one
    side's names kept the other side's weights out before pairing, and 'nothing was compared'. The pairs
    are made first, then --wrt keeps those either of whose tensors it names."""
    legacy, dynamo = _export(tmp_path, "LSTM")
    named = onnx.load(str(legacy if side == "A" else dynamo))
    node = next(n for n in named.graph.node if n.op_type == "LSTM")
    r, got = _diff(tmp_path, legacy, dynamo, *[f for t in node.input[1:4] for f in ("--wrt", t)])
    assert r.exit_code == 0 and got["verdict"] == "pass", r.output
    pairs = got["pairs"]
    assert len(pairs) == 3 and all(p["is_output"] and p["passed"] for p in pairs), r.output
    mine = {p["a" if side == "A" else "b"] for p in pairs}
    assert mine == {f"{t}_grad" for t in node.input[1:4]}
    assert not got["unmatched_a"] and not got["unmatched_b"], r.output


def test_a_conv_with_its_batchnorm_folded_pairs_its_gradient_with_the_batchnorms_output(tmp_path):
    """Legacy export folds a BatchNormalization into its Conv; dynamo without its optimizer keeps it. diff pairs the
    folded Conv's output with the BatchNormalization's (match.folds), but diff --grad lost what tells them apart
    and paired the gradients of the folded Conv and of B's bare Conv: two FAILs (cosine 0.96) and a ▶ on two
    exports of one module. The gradient of the folded Conv's output is that of the BatchNormalization's."""
    from torch import nn

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 2, 1), nn.BatchNorm2d(2))
    for bn in (net[1], net[4]):
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 1.5)
        bn.weight.data.uniform_(0.5, 1.5)
    net.eval()
    x = torch.randn(2, 3, 5, 5)
    legacy, dynamo = tmp_path / "legacy.onnx", tmp_path / "dynamo.onnx"
    torch.onnx.export(net, (x,), str(legacy), dynamo=False, input_names=["x"], output_names=["y"])
    torch.onnx.export(net, (x,), str(dynamo), dynamo=True, optimize=False, external_data=False, input_names=["x"])
    assert sum(n.op_type == "BatchNormalization" for n in onnx.load(str(dynamo)).graph.node) == 2
    np.save(tmp_path / "x.npy", x.numpy())
    np.save(tmp_path / "dy.npy", np.random.default_rng(0).standard_normal((2, 2, 5, 5)).astype(np.float32))
    r, got = _diff(tmp_path, legacy, dynamo, "--output-grad", str(tmp_path / "dy.npy"), "--all")
    # every weight is folded in A (none is the same function in both): no weight verdict, as diff --grad says
    assert got["verdict"] == "error" and "folded" in got["verdict_reason"], r.output
    convs = [p for p in got["pairs"] if p["op_type"] == "Conv"]
    assert convs and all(p["passed"] for p in got["pairs"]), r.output
    assert all(p["op_type_b"] == "BatchNormalization" for p in convs), [(p["a"], p["b"], p["op_type_b"]) for p in convs]
    assert got["first_failure"] is None
    bare = {u["name"] for u in got["unmatched_b"] if u["op_type"] == "Conv"}
    assert len(bare) == 2, got["unmatched_b"]  # B's Convs before their BatchNormalization pair with nothing of A


def test_weights_the_exporters_name_apart_pair_by_what_their_layers_read(tmp_path):
    """An embedding tied to the output layer (legacy names it 'emb.weight', dynamo 'head.weight') and a Linear
    weight both hold transposed ('onnx::MatMul_27', 'val_0'): the gradient side dropped what each node reads
    (match.observe's sources), and the structural matching, left with op and shape alone, paired neither
    ('no counterpart') once a layer between (an addmm) shifted the alignment: two exports of one module were an
    error. With it they pair and agree."""
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.fc, self.fc2 = nn.Embedding(20, 8), nn.Linear(8, 8), nn.Linear(8, 8)
            self.head = nn.Linear(8, 20, bias=False)
            self.head.weight = self.emb.weight
            nn.init.zeros_(self.fc.bias)  # as a fresh GPT-2's: legacy reads one zero tensor for both biases
            nn.init.zeros_(self.fc2.bias)

        def forward(self, ids):
            h = torch.tanh(self.fc(self.emb(ids)))
            # GPT-2's Conv1D: dynamo holds W.t() as its Gemm's weight, legacy reads W with transB=1
            h = torch.addmm(self.fc2.bias, h.reshape(-1, 8), self.fc2.weight.t()).reshape(h.shape)
            return self.head(h)

    torch.manual_seed(0)
    net, ids = Net().eval(), torch.randint(0, 20, (2, 5))
    legacy, dynamo = tmp_path / "legacy.onnx", tmp_path / "dynamo.onnx"
    torch.onnx.export(net, (ids,), str(legacy), dynamo=False, input_names=["ids"], output_names=["y"])
    torch.onnx.export(net, (ids,), str(dynamo), dynamo=True, external_data=False, input_names=["ids"], output_names=["y"])
    np.save(tmp_path / "ids.npy", ids.numpy())
    js = tmp_path / "d.json"
    r = CliRunner().invoke(app, ["diff", "--grad", str(legacy), str(dynamo), "--input", f"ids={tmp_path / 'ids.npy'}",
                                 "--json", str(js)])
    assert js.exists(), r.output
    got = json.loads(js.read_text())
    assert r.exit_code == 0 and got["verdict"] == "pass", r.output
    pairs = {p["a"]: p["b"] for p in got["pairs"] if p["is_output"]}
    gather = next(n for n in onnx.load(str(dynamo)).graph.node if n.op_type == "Gather")
    assert pairs.get("emb.weight_grad") == f"{gather.input[0]}_grad", pairs
    assert not [u for u in got["unmatched_a"] + got["unmatched_b"] if u["is_output"] and u["cause"] == "no-counterpart"]


def _conv_bn_relu(tmp_path):
    """Conv+BatchNorm+ReLU twice, exported by legacy (its BatchNormalizations folded into the Convs) and by dynamo
    without its optimizer (kept); (legacy, dynamo, module, x)."""
    from torch import nn

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                        nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
    for bn in (net[1], net[4]):
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 1.5)
        bn.weight.data.uniform_(0.5, 1.5)
        bn.bias.data.uniform_(-0.5, 0.5)
    net.eval()
    x = torch.randn(1, 3, 8, 8)
    legacy, dynamo = tmp_path / "legacy.onnx", tmp_path / "dynamo.onnx"
    torch.onnx.export(net, (x,), str(legacy), dynamo=False, input_names=["x"], output_names=["y"])
    torch.onnx.export(net, (x,), str(dynamo), dynamo=True, optimize=False, external_data=False, input_names=["x"],
                      output_names=["y"])
    assert not any(n.op_type == "BatchNormalization" for n in onnx.load(str(legacy)).graph.node)
    assert sum(n.op_type == "BatchNormalization" for n in onnx.load(str(dynamo)).graph.node) == 2
    return legacy, dynamo, net, x


def test_the_first_folded_convs_gradient_pairs_with_its_batchnorms_and_the_bare_conv_is_folded(tmp_path):
    """The gradient of the graph input (an observable of diff --grad only) sorted after that of its first reader's
    output: a name anchor between the first folded Conv of A and B's BatchNormalization after it. The folded
    Conv's gradient was 'no counterpart in B' and B's bare Conv's too, where diff pairs the Conv with the
    BatchNormalization's output and calls the bare Conv folded. The gradients pair as the forward tensors do, and
    the pair holds the gradient torch autograd computes for the BatchNormalization's output."""
    from onnxprobe import api
    from onnxprobe.types import InputSpec

    legacy, dynamo, net, x = _conv_bn_relu(tmp_path)
    convs = [n.output[0] for n in onnx.load(str(legacy)).graph.node if n.op_type == "Conv"]
    feed = {"x": x.numpy()}
    res = api.diff_grad(legacy, dynamo, inputs=InputSpec(arrays=feed))
    by_a = {r.pair.a.name: r for r in res.results}
    for c in convs:
        assert c + "_grad" in by_a, [u.obs.name for u in res.matching.unmatched_a]
        assert by_a[c + "_grad"].pair.b.op_type == "BatchNormalization" and by_a[c + "_grad"].passed
    bare = [u for u in res.matching.unmatched_b if u.obs.effective_op == "Conv"]
    assert len(bare) == 2 and all(u.cause == "folded" for u in bare), [(u.obs.name, u.reason) for u in bare]
    assert not [u.obs.name for u in res.matching.unmatched_a + res.matching.unmatched_b if u.cause == "no-counterpart"]
    # the oracle: torch autograd's gradient of each BatchNormalization's output for the sum loss
    got = {}

    def keep(k):
        def hook(module, args, out):
            out.retain_grad()
            got[k] = out
        return hook

    hooks = [net[k].register_forward_hook(keep(k)) for k in (1, 4)]
    net(x.requires_grad_()).sum().backward()
    for h in hooks:
        h.remove()
    for c, k in zip(convs, (1, 4)):
        p = by_a[c + "_grad"].pair
        ga = res.a.runner.values([p.a.probe], feed)[p.a.probe]
        gb = res.b.runner.values([p.b.probe], feed)[p.b.probe]
        np.testing.assert_allclose(ga, got[k].grad.numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(gb, got[k].grad.numpy(), rtol=1e-4, atol=1e-5)


def test_one_initializer_for_several_equal_parameters_is_said_so(tmp_path):
    """Legacy export merges equal parameters into one initializer: a fresh nn.TransformerEncoderLayer's
    out_proj.bias, norm1.bias and norm2.bias (zeros) are one, which the other two names copy (Identity), and
    norm2.weight copies norm1.weight (ones). dynamo keeps each. diff --grad called the parameters B holds and
    A copies 'a constant folding (the exporter's or onnxruntime's)'; it says what happened: one initializer
    of A stands for those equal parameters of B, and its gradient is their sum (torch autograd's)."""
    import sys
    from pathlib import Path

    from onnxprobe import api
    from onnxprobe.types import InputSpec

    sys.path.insert(0, str(Path(__file__).parent))
    import torch_models as tm

    m, args = tm.build("encoder")
    legacy, dynamo = tmp_path / "legacy.onnx", tmp_path / "dynamo.onnx"
    torch.onnx.export(m, args, str(legacy), dynamo=False, input_names=["x"], output_names=["y"])
    torch.onnx.export(m, args, str(dynamo), dynamo=True, optimize=False, external_data=False, input_names=["x"],
                      output_names=["y"])
    feed = {"x": args[0].numpy()}
    merged = ["layer.self_attn.out_proj.bias", "layer.norm1.bias", "layer.norm2.bias"]
    for a, b, other in ((legacy, dynamo, "B"), (dynamo, legacy, "A")):
        res = api.diff_grad(a, b, inputs=InputSpec(arrays=feed))
        assert res.verdict()[0] == "pass", res.verdict()
        held = res.matching.unmatched_b if other == "B" else res.matching.unmatched_a
        why = {u.obs.name: u for u in held}
        for p in merged[1:]:
            u = why[p + "_grad"]
            assert u.cause == "folded" and "constant folding" not in u.reason, u.reason
            assert "'layer.self_attn.out_proj.bias'" in u.reason and all(q in u.reason for q in merged), u.reason
        u = why["layer.norm2.weight_grad"]
        assert "'layer.norm1.weight'" in u.reason and "constant folding" not in u.reason, u.reason
    # the oracle: the merged initializer's gradient (A = legacy) is the sum of the three parameters' in torch
    res = api.diff_grad(legacy, dynamo, inputs=InputSpec(arrays=feed))
    o = next(u.obs for u in res.matching.unmatched_a if u.obs.name == "layer.self_attn.out_proj.bias_grad")
    got = res.a.runner.values([o.probe], feed)[o.probe]
    m.zero_grad()
    m(*args).sum().backward()
    params = dict(m.named_parameters())
    want = sum(params[p].grad.numpy() for p in merged)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
