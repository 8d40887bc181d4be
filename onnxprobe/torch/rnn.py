"""The parameters of ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` inside the ONNX LSTM / GRU / RNN nodes the exporters write.

Both exporters (legacy at opset 17, dynamo at opsets 17 and 18; measured with torch 2.13, which keeps
LSTM and GRU nodes and decomposes neither; an ``nn.RNN``, tanh or relu, is an RNN node of the legacy
exporter only: dynamo unrolls it into MatMuls of the weights transposed, which ``torch.params`` links)
write layer ``k`` of such a module as one node whose

- ``W`` [dirs, G*H, I] is ``weight_ih_l{k}`` (direction 0) and ``weight_ih_l{k}_reverse`` (direction 1),
- ``R`` [dirs, G*H, H] is ``weight_hh_l{k}`` and ``weight_hh_l{k}_reverse``,
- ``B`` [dirs, 2*G*H] is ``bias_ih_l{k}`` (the first half) then ``bias_hh_l{k}`` (the second),

each [G*H, ...] block with its G gate blocks of H rows reordered: ONNX gate block q holds torch's gate
block ``ORDER[q]`` (LSTM: torch i, f, g, o -> ONNX i, o, f, c; GRU: torch r, z, n -> ONNX z, r, h; RNN: one
block, as it is, the node's ``activations`` the module's ``nonlinearity``).

So no initializer holds such a parameter as it is, and ``torch.params`` calls them derived. Here the
correspondence comes from the module's structure (``mode``, ``num_layers``, ``bidirectional``,
``hidden_size``, ``input_size``, ``bias``) and the ONNX nodes its scope reads (their op, ``hidden_size``,
``direction`` and weight shapes; layers in graph order, which is topological): each parameter is a
``Block`` of an initializer, the rows ``rows`` of its direction ``direction``, in torch's order. A block
whose values are not the parameter's is the model contradicting the module (the forward check); the
gradient of each block (``add_block_grads``) is compared with torch's gradient of its parameter.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import onnx
from onnx import helper

from onnxprobe.graph.builder import GraphBuilder, all_names, opset_version
from onnxprobe.graph.rnn_states import initial_states
from onnxprobe.graph.tensor_data import to_array
from onnxprobe.match.engine import FOLDED, OTHER_VALUES, Pair, Unmatched
from onnxprobe.match.observe import Observable
from onnxprobe.text import some
from onnxprobe.types import grad_name

# ONNX gate block q = torch gate block ORDER[q], by the module's ``mode``
ORDER = {"LSTM": [0, 3, 1, 2], "GRU": [1, 0, 2], "RNN_TANH": [0], "RNN_RELU": [0]}
GATES = {"LSTM": ("i", "f", "g", "o"), "GRU": ("r", "z", "n"), "RNN_TANH": ("h",), "RNN_RELU": ("h",)}  # torch's names
OP = {"LSTM": "LSTM", "GRU": "GRU", "RNN_TANH": "RNN", "RNN_RELU": "RNN"}  # the ONNX op of each mode
ACTIVATION = {"RNN_TANH": b"Tanh", "RNN_RELU": b"Relu"}  # an RNN node's activations (ONNX's default: Tanh)


@dataclass
class Block:
    init: str  # the ONNX initializer (W, R or B of an LSTM / GRU / RNN node)
    param: str  # the torch parameter it holds a part of
    direction: int  # its index along the initializer's first axis
    rows: list[int]  # the rows of init[direction] (B: of its 2*G*H values) that are the parameter's, in torch's order
    mode: str  # the module's: "LSTM", "GRU", "RNN_TANH" or "RNN_RELU"
    holds: bool = True  # whether those values are the parameter's (False: the model contradicts the module)
    half: str = ""  # B's: "first" (bias_ih) or "second" (bias_hh)

    @property
    def name(self) -> str:
        """As reported: the part of the initializer that stands for the parameter."""
        return f"{self.init}[{self.param}]"

    def how(self) -> str:
        if len(ORDER[self.mode]) == 1:  # nn.RNN: one block, as it is
            return f"direction {self.direction} of {self.init}" + (f", its {self.half} half" if self.half else "")
        onnx_order = ",".join(GATES[self.mode][q] for q in ORDER[self.mode])
        half = f", its {self.half} half" if self.half else ""
        return (f"direction {self.direction} of {self.init}{half}, its {self.mode} gate blocks "
                f"{onnx_order} put back in torch's order {','.join(GATES[self.mode])}")


def rnn_modules(mod) -> list[tuple[str, object]]:
    """The module's nn.LSTM / nn.GRU / nn.RNN modules (``mode`` in ``ORDER``, no projection), by path."""
    return [(p, m) for p, m in mod.named_modules() if getattr(m, "mode", None) in ORDER
            and isinstance(getattr(m, "num_layers", None), int) and not getattr(m, "proj_size", 0)]


def _values(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    out = {t.name: to_array(t) for t in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "Constant" and n.output:
            a = next((x for x in n.attribute if x.name == "value"), None)
            if a is not None:
                out[n.output[0]] = to_array(a.t)
    return out


def _attr(node, name: str, default):
    a = next((x for x in node.attribute if x.name == name), None)
    return default if a is None else helper.get_attribute_value(a)


def rnn_blocks(model: onnx.ModelProto, mod, params: dict[str, np.ndarray],
               users: dict[str, set[str]] | None) -> list[Block]:
    """Each parameter of the module's LSTMs, GRUs and RNNs as a block of the initializer of the node that reads it
    (module doc). A module whose nodes cannot be told apart (not one node per layer of the right op,
    hidden size, direction and weight shapes among those its scope reads) or stored in another dtype gets
    none: its initializers stay derived."""
    values = _values(model)
    out: list[Block] = []
    for path, m in rnn_modules(mod):
        mode, h, layers, dirs = m.mode, m.hidden_size, m.num_layers, 2 if m.bidirectional else 1
        g = len(ORDER[mode])
        direction = b"bidirectional" if dirs == 2 else b"forward"
        nodes, seen = [], set()
        for n in model.graph.node:
            if n.op_type != OP[mode] or len(n.input) < 3 or _attr(n, "hidden_size", None) != h:
                continue
            if mode in ACTIVATION and any(a != ACTIVATION[mode] for a in _attr(n, "activations", [b"Tanh"] * dirs)):
                continue  # an RNN node of the other nonlinearity: not this module's
            if _attr(n, "direction", b"forward") != direction or _attr(n, "layout", 0) != 0:
                continue
            w, r = n.input[1], n.input[2]
            b = n.input[3] if len(n.input) > 3 and n.input[3] else None
            if w not in values or r not in values or (b is not None and b not in values):
                continue
            readers = (users or {}).get(w)
            if path and readers and path not in readers:  # another module's node (no scopes: any may be)
                continue
            if (w, r, b) not in seen:  # a module called twice reads one set of initializers
                seen.add((w, r, b))
                nodes.append((w, r, b))
        if len(nodes) != layers:
            continue
        prefix = path + "." if path else ""
        blocks = []
        for k, (w, r, b) in enumerate(nodes):
            size = m.input_size if k == 0 else h * dirs
            if (values[w].shape != (dirs, g * h, size) or values[r].shape != (dirs, g * h, h)
                    or (b is None) == bool(m.bias) or (b is not None and values[b].shape != (dirs, 2 * g * h))):
                blocks = []
                break
            rows = [ORDER[mode].index(j) * h + i for j in range(g) for i in range(h)]
            for d in range(dirs):
                sfx = f"_l{k}" + ("_reverse" if d else "")
                parts = [(w, "weight_ih", rows, ""), (r, "weight_hh", rows, "")]
                if b is not None:
                    parts += [(b, "bias_ih", rows, "first"), (b, "bias_hh", [x + g * h for x in rows], "second")]
                for init, what, rs, half in parts:
                    blocks.append(Block(init, prefix + what + sfx, d, list(rs), mode, half=half))
        if not blocks or any(bl.param not in params for bl in blocks):
            continue
        for bl in blocks:
            v, p = values[bl.init][bl.direction][bl.rows], params[bl.param]
            if v.dtype != p.dtype:  # another precision than the module's: not compared, as torch.params says
                blocks = []
                break
            bl.holds = v.shape == p.shape and np.array_equal(v, p)
        out += blocks
    return out


def attach_blocks(pm, blocks: list[Block]) -> list[Block]:
    """Puts the blocks into ``pm`` (a ``torch.params.ParamMap``): their initializers are no longer derived,
    their parameters no longer unused (a block with other values: unused for that reason). Blocks of an
    initializer ``pm`` links, or of a parameter it links or ties, are left out. Returns the blocks kept."""
    claimed = {p for link in pm.links.values() for p in link.params} | set(pm.ties)
    kept = [b for b in blocks if b.init not in pm.links and b.param not in claimed]
    for b in kept:
        pm.refused.pop(b.init, None)
        pm.derived.discard(b.init)
        if pm.copies.pop(b.init, None) is not None:  # taken for a changed copy (a few values): the blocks say it
            pm.contradicts.discard(b.init)
        if b.holds:
            pm.unused.pop(b.param, None)
        else:
            pm.unused[b.param] = (f"{b.name} ({b.how()}) holds other values: the model is not an export of the "
                                  "module as it is now (compare the weights, or re-export)")
    pm.blocks = kept
    return kept


def mark_initial_states(pm, model: onnx.ModelProto, shapes: dict[str, tuple]) -> None:
    """Says of ``initial_states`` in ``pm`` (a ``torch.params.ParamMap``) what they are: a constant of the export,
    not a parameter, where nothing else was said of them (no parameter or buffer holds them: those
    ``map_parameters`` reasons stay, a changed weight among them) and no parameter that no initializer holds
    may be it (``shapes``: each parameter's; one that broadcasts to its shape, a learnable initial state
    the exporter expanded to the batch, changed to zeros: it stays derived)."""
    def fits(p: tuple, t: tuple) -> bool:
        try:
            return np.broadcast_shapes(p, t) == t
        except ValueError:
            return False

    values = _values(model)
    for t, where in initial_states(model).items():
        if t in pm.links or any(b.init == t for b in pm.blocks) or (t in pm.refused and t not in pm.derived):
            continue
        if any(fits(tuple(shapes[p]), values[t].shape) for p in pm.unused if p in shapes):
            continue
        pm.refused[t] = (f"all zeros, read only as the {where}: a constant of the export (the zero initial state the "
                         "module starts from when given none), not a parameter: nothing to compare")
        pm.derived.discard(t)


def add_block_grads(plan, blocks: list[Block], cands: list[tuple[str, Observable]], shapes: dict[str, tuple]
                    ) -> tuple[dict[str, Block], list[tuple[str, Observable]]]:
    """Adds to ``plan``'s backward graph each block's gradient in its parameter's layout (a Gather of the
    direction, a Gather of the rows in torch's order) and to ``plan.grads`` under its own name; returns
    tensor -> block and the candidates ``grad_side`` makes their observables of. An initializer without a
    whole gradient of its own in the plan gets none (its parameters then say why)."""
    bw = plan.backward.model
    partial = getattr(plan.backward, "partial", {})
    first: dict[str, Observable] = {}
    for t, o in cands:
        first.setdefault(t, o)
    b = GraphBuilder(all_names(bw), opset_version(bw, default=13), nodes=bw.graph.node, scope="onnxprobe_rnn")

    done: dict[str, Block] = {}
    extra = []
    for blk in blocks:
        if blk.init not in plan.grads or blk.init in partial or blk.init not in first:
            continue
        g = plan.grads[blk.init]
        part = b.node("Gather", [g, b.const(np.asarray(blk.direction, np.int64))], f"{g}_dir{blk.direction}_value", axis=0)
        tensor = b.node("Gather", [part, b.ints(blk.rows)], f"{blk.param}_grad_from_{blk.init}", axis=0)
        plan.grads[tensor] = tensor  # its own key: grad_side reads each candidate's gradient there
        done[tensor] = blk
        extra.append((tensor, replace(first[blk.init], key=tensor, name=tensor, shape=tuple(shapes[blk.param]))))
    return done, extra


def name_blocks(side, done: dict[str, Block]) -> None:
    """The blocks' observables of ``side`` named as reported (``Block.name``, a gradient's name)."""
    obs = side.observation.observables
    obs[:] = [replace(o, key=grad_name(done[o.probe].name), name=grad_name(done[o.probe].name)) if o.probe in done else o
              for o in obs]


def pair_blocks(obs_a: list[Observable], blocks: list[Block], done: dict[str, Block], b_obs
                ) -> tuple[list[Pair], list[Unmatched], set[str]]:
    """Each block's gradient paired with torch's gradient of its parameter (``b_obs(a, parameter)``: B's
    observable), or unmatched with cause other-values where it holds other values; the initializers' own
    gradients unmatched (compared block by block). Returns the pairs, the unmatched and the names done."""
    of_init: dict[str, list[Block]] = {}
    for b in blocks:
        of_init.setdefault(grad_name(b.init), []).append(b)
    pairs, un_a, names = [], [], set()
    for o in obs_a:
        if o.probe in done:
            b = done[o.probe]
            if b.holds:
                pairs.append(Pair(o, b_obs(o, b.param), "torch-param", f"gradient of the parameter {b.param}: {b.how()}"))
            else:
                un_a.append(Unmatched(o, f"holds other values than the torch parameter {b.param} ({b.how()}): the model "
                                         "is not an export of the module as it is now", OTHER_VALUES))
            names.add(o.name)
        elif o.name in of_init:
            parts = of_init[o.name]
            said = some((b.param for b in parts), 4, str)
            how = "with their gate blocks reordered" if len(ORDER[parts[0].mode]) > 1 else "stacked over directions"
            un_a.append(Unmatched(o, f"holds the torch parameters {said} {how}: compared block by block, each with "
                                     "its parameter", FOLDED))
            names.add(o.name)
    return pairs, un_a, names
