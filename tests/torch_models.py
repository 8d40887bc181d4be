"""Small PyTorch models for the --vs-torch tests, one per thing exporters do to module outputs: Conv+BN
folding and a residual (CNN), 3-D Linear, LayerNorm, GELU, attention and Dropout (Block), an LSTM kept
sequence-major (Recurrent), and one module called twice (Shared). Imported only when torch is there."""

from __future__ import annotations

import torch
import torch.nn as nn


class ConvBNReLU(nn.Module):
    def __init__(self, i: int, o: int):
        super().__init__()
        self.conv = nn.Conv2d(i, o, 3, padding=1)
        self.bn = nn.BatchNorm2d(o)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)))


class Residual(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.body = nn.Sequential(ConvBNReLU(c, c), nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c))

    def forward(self, x):
        return torch.relu(x + self.body(x))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(ConvBNReLU(3, 8), Residual(8))
        self.drop = nn.Dropout(0.1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.drop(self.features(x))), 1))


class Attention(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.softmax = nn.Softmax(dim=-1)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads

        def split(y):
            return y.reshape(b, t, h, d // h).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        a = self.drop(self.softmax(q @ k.transpose(-1, -2) / (d // h) ** 0.5))
        return self.o((a @ v).transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, d: int = 16, heads: int = 2):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 12, batch_first=True)
        self.gru = nn.GRU(12, 10, batch_first=True)
        self.head = nn.Linear(10, 3)

    def forward(self, x):
        y, _ = self.lstm(x)
        z, _ = self.gru(y)
        return self.head(z)


class Shared(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.act = nn.Tanh()
        self.out = nn.Linear(8, 4)

    def forward(self, x):
        return self.out(self.act(self.lin(self.act(self.lin(x)))))


class FreshBN(nn.Module):
    """A Linear and a BatchNorm just initialised: its weight equals its running variance (ones) and its bias
    its running mean (zeros), which the legacy exporter stores as one initializer each."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.bn = nn.BatchNorm1d(8)

    def forward(self, x):
        return self.bn(self.fc(x))


class TwoConvBN(nn.Module):
    """conv1, bn1, conv2, bn2 as siblings (a ResNet basic block's layout)."""

    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4)
        self.conv2, self.bn2 = nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4)

    def forward(self, x):
        return self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))


class TanhMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(6, 8), nn.Linear(8, 8), nn.Linear(8, 3)

    def forward(self, x):
        return self.fc3(torch.tanh(self.fc2(torch.tanh(self.fc1(x)))))


class TanhMLPShifted(TanhMLP):
    """TanhMLP whose forward adds 0.001 after its last module: another function than TanhMLP's export."""

    def forward(self, x):
        return super().forward(x) + 0.001


class Scaled(nn.Module):
    """A Linear whose output a registered buffer scales: the buffer is an initializer of the export."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 4)
        self.register_buffer("scale", torch.linspace(0.5, 2.0, 4))

    def forward(self, x):
        return self.fc(x) * self.scale


class Square(nn.Module):
    """Square weights whose values cannot tell a MatMul's transposed weight from the weight itself: all
    zeros, an identity, and a decoder that is the encoder's transpose (separate parameters)."""

    def __init__(self):
        super().__init__()
        self.fc, self.proj, self.gate = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8, bias=False)
        self.enc, self.dec = nn.Linear(8, 8, bias=False), nn.Linear(8, 8, bias=False)
        nn.init.zeros_(self.proj.weight)
        nn.init.eye_(self.gate.weight)
        with torch.no_grad():
            self.dec.weight.copy_(self.enc.weight.t())

    def forward(self, x):
        h = torch.tanh(self.fc(x))
        return x + self.proj(h) + self.gate(h) + self.dec(torch.tanh(self.enc(h)))


def randomize_batchnorm(m: nn.Module) -> nn.Module:
    """Running statistics and affine parameters away from 0/1, so that folding them changes values."""
    g = torch.Generator().manual_seed(1)
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            with torch.no_grad():
                mod.running_mean.copy_(torch.rand(mod.num_features, generator=g) - 0.5)
                mod.running_var.copy_(torch.rand(mod.num_features, generator=g) + 0.5)
                mod.weight.copy_(torch.rand(mod.num_features, generator=g) + 0.5)
                mod.bias.copy_(torch.rand(mod.num_features, generator=g) - 0.5)
    return m


class Pair(nn.Module):
    """Returns two tensors of one shape: which ONNX tensor is which is not known."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        return self.a(x), self.b(x) * 3


class TupleUser(nn.Module):
    def __init__(self):
        super().__init__()
        self.t, self.head = Pair(), nn.Linear(4, 2)

    def forward(self, x):
        p, q = self.t(x)
        return self.head(q - p)


class ScaledBy(nn.Module):
    """forward takes a float besides the tensor: the dynamo exporter bakes it into the graph."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x, s: float = 1.0):
        return self.fc(x) * s


class Encoder(nn.Module):
    """nn.TransformerEncoderLayer: the legacy exporter merges its all-zero biases (out_proj's, both
    LayerNorms') into one initializer, read by out_proj in self_attn's scope."""

    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.layer(x))


class Heads(nn.Module):
    """A ModuleList of blocks and a ModuleDict of heads: containers with no forward of their own (legacy names
    the heads' nodes /a/Gemm and /b/Gemm, no component for the ModuleDict)."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(6, 6) for _ in range(2)])
        self.heads = nn.ModuleDict({"a": nn.Linear(6, 4), "b": nn.Linear(6, 3)})

    def forward(self, x):
        for b in self.blocks:
            x = torch.tanh(b(x))
        return self.heads["a"](x), self.heads["b"](x)


def build(name: str):
    """(module in eval mode, example args), seeded."""
    torch.manual_seed(0)
    if name == "cnn":
        return randomize_batchnorm(CNN()).eval(), (torch.randn(2, 3, 12, 12),)
    if name == "block":
        return Block().eval(), (torch.randn(2, 5, 16),)
    if name == "recurrent":
        return Recurrent().eval(), (torch.randn(2, 7, 6),)
    if name == "shared":
        return Shared().eval(), (torch.randn(3, 8),)
    if name == "freshbn":
        return FreshBN().eval(), (torch.randn(4, 8),)
    if name == "twoconvbn":
        return randomize_batchnorm(TwoConvBN()).eval(), (torch.randn(2, 3, 6, 6),)
    if name == "tanhmlp":
        return TanhMLP().eval(), (torch.randn(4, 6),)
    if name == "scaled":
        return Scaled().eval(), (torch.randn(3, 6),)
    if name == "square":
        return Square().eval(), (torch.randn(2, 3, 8),)  # 3-D: the exporters' MatMul with the weight transposed
    if name == "encoder":
        return Encoder().eval(), (torch.randn(2, 5, 16),)
    if name == "tupleuser":
        return TupleUser().eval(), (torch.randn(3, 4),)
    if name == "scaledby":
        return ScaledBy().eval(), (torch.randn(3, 4), 2.0)
    if name == "heads":
        return Heads().eval(), (torch.randn(3, 6),)
    raise KeyError(name)


# FILE.py:FUNC entry points, as a user writes them
def cnn():
    return build("cnn")


def square():
    return build("square")


def scaled():
    return build("scaled")


def tanhmlp_shifted():
    m, args = build("tanhmlp")
    shifted = TanhMLPShifted()
    shifted.load_state_dict(m.state_dict())
    return shifted.eval(), args


def freshbn():
    return build("freshbn")


def twoconvbn():
    return build("twoconvbn")


def tanhmlp():
    return build("tanhmlp")


def block():
    return build("block")


def block_module_only():
    return build("block")[0]


def recurrent():
    return build("recurrent")


def shared():
    return build("shared")


def raises():
    raise RuntimeError("cannot build the model")


def not_a_module():
    return 42


def args_only():
    return torch.randn(2, 3), torch.randn(2, 3)


def two_outputs():
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 5)

        def forward(self, x):
            return self.fc(x), self.fc(x) * 2

    torch.manual_seed(0)
    return Two().eval(), (torch.randn(3, 8),)


def wrong_width():
    torch.manual_seed(0)
    return nn.Linear(8, 5).eval(), (torch.randn(3, 8),)


def too_many_args():
    return build("shared")[0], (torch.randn(3, 8), torch.randn(3, 8))


def tupleuser():
    return build("tupleuser")


def scaledby():
    return build("scaledby")


def scripted():
    m, args = build("scaled")
    return torch.jit.script(m), args


def encoder():
    return build("encoder")


def kwargs_dict():
    m, args = build("scaled")
    return m, {"x": args[0]}


def heads():
    return build("heads")
