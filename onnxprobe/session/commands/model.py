"""The debugger's commands about the model: info, nodes, node."""

from __future__ import annotations


from rich.text import Text

from onnxprobe import api
from onnxprobe.errors import UsageError
from onnxprobe.report.format import plural, safe, shape as fmt_shape
from onnxprobe.report.inspect import NODE_COLUMNS
from onnxprobe.report.table import Table
from onnxprobe.session import render
from onnxprobe.session.parse import pop_all, pop_option
from onnxprobe.session.commands.table import (Env, bad, command, completing, fresh, no_more, node_index, node_view, tag,
                                             target_of)
from onnxprobe.text import human_bytes, some


# -- the model -------------------------------------------------------------------------------------------


@command("info", "info [--model a|b]", "the model: format, opsets, ops, inputs, outputs, weights; the session's settings", "model")
def cmd_info(env: Env, args: list[str]):
    """Without --model, every loaded model is described.
    Examples: `info`, `info --model b`."""
    label = pop_option(args, "--model", "-m")
    no_more("info", args)
    st = env.state
    targets = [st.target(label)] if label else list(st.targets.values())
    out: list = []
    for t in targets:
        d = api.model_info(t.model)
        ops = some(d["ops"].items(), 12, lambda kv: f"{kv[0]} ×{kv[1]}")

        feed = st.feed(t)[0]
        runtime = t.results.shapes if fresh(env, t) else {}

        def io(items, inputs: bool) -> Text:
            x = Text()
            for i, it in enumerate(items):
                if i:
                    x.append("\n")
                x.append(safe(it["name"]), style="bold")
                declared = fmt_shape(it["shape"])
                actual = fmt_shape(feed[it["name"]].shape) if inputs and it["name"] in feed else (
                    fmt_shape(runtime[it["name"]]) if it["name"] in runtime else None)
                x.append(safe(f" {it['dtype'] or '?'} [{actual or declared}]"))
                if actual and actual != declared:
                    x.append(f" (declared [{declared}])", style="dim")
                if inputs:
                    x.append(safe(f"  ← {st.inputs.source(it['name'])}"), style="dim")
            return x

        pairs = [
            ("model", f"{d['path']}" + (f"   (--model {t.label})" if len(st.targets) > 1 else "")),
            ("producer", d["producer"] or "-"),
            ("format", f"IR {d['ir_version']} · " + ", ".join(f"{k} {v}" for k, v in d["opsets"].items())),
            ("graph", f"{d['nodes']} nodes" + (f" ({d['nodes_in_subgraphs']} in subgraphs)" if d["nodes_in_subgraphs"] else "")
             + f" · {d['initializers']} weight{'s' if d['initializers'] != 1 else ''} ({human_bytes(d['initializer_bytes'])})"),
            ("ops", ops or "-"),
            ("inputs", io(d["inputs"], True)),
            ("outputs", io(d["outputs"], False)),
            ("session", f"device {st.device}" + (f" ({st.resolved_device})" if st.device == "auto" else "")
             + f" · opt-level {st.opt_level} · seed {st.inputs.seed} · {plural(len(t.probes), 'probe')} · "
             + f"{plural(len(t.results.stats), 'tensor')} cached"),
        ]
        for w in d["warnings"]:
            pairs.append(("note", w))
        out.append(render.kv_table(pairs))
    return out


@command("nodes", "nodes [GLOB|op:TYPE] [--op TYPE] [--name GLOB] [--model a|b]", "list nodes in topological order, by name glob or op type", "model",
         args=("nodepattern",))
def cmd_nodes(env: Env, args: list[str]):
    """By op type as selections take one too: `op:Conv,Relu`, `--op Conv --op Relu`; by name, `--name GLOB`.
    Examples: `nodes`, `nodes 'conv*'`, `nodes op:Softmax`, `nodes op:Q*`."""
    t = target_of(env, args)
    ops, names = pop_all(args, "--op"), pop_all(args, "--name")
    ops += [a[3:] for a in args if a.startswith("op:")]
    names += [a for a in args if not a.startswith("op:")]
    # as a selection reads them: any of the names, and of the op types (comma-separated, an empty one refused); both
    # given, a node matches one of each (`nodes --op Conv --name 'Conv@1*'` was refused: "give one GLOB or op:TYPE")
    want = [names] if names else []
    want += [["op:" + ",".join(api.Selection(ops=tuple(ops)).ops)]] if ops else []
    sites = t.index.find_nodes(None)
    for patterns in want:
        hits = {s.index for p in patterns for s in t.index.find_nodes(p)}
        sites = [s for s in sites if s.index in hits]
    if not sites:
        said = " and ".join(" or ".join(repr(p) for p in patterns) for patterns in want)
        raise UsageError(f"nodes: nothing matches {said} (a name glob such as 'conv*', or op:TYPE)")
    table = Table(NODE_COLUMNS)
    for s in sites:
        ins = ", ".join(i for i in s.node.input if i)
        outs = ", ".join(o for o in s.node.output if o)
        name = s.path
        # a no-break space keeps the arrow on the line of the last input when the cell wraps
        table.add_row([str(s.index), name, s.node.op_type, f"{ins}\u00a0→ {outs}"], [s.index, name, s.node.op_type, f"{ins} → {outs}"])
    foot = Text(f"{tag(env, t)}{len(sites)} of {len(t.index.sites)} nodes", style="dim")
    return [table, foot]


@command("node", "node [NAME|#INDEX] [--model a|b]", "one node: inputs, outputs, attributes, shapes, producers and consumers", "model",
         args=("node",))
def cmd_node(env: Env, args: list[str]):
    """Without a name: the node at the cursor (see goto/step/back). Statistics appear once computed
    (run, stats, goto).
    Examples: `node`, `node conv1`, `node #12`."""
    t = target_of(env, args, env.state.current)
    if len(args) > 1:
        raise bad("node", "give one node name")
    if args:
        i = node_index(t, args[0])
    elif t.cursor is not None:
        i = t.cursor
    else:
        raise bad("node", f"which node? give a name{completing(' (Tab completes)', '')} or move the cursor with goto")
    return node_view(env, t, i)
