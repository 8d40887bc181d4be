"""The debugger's commands about inputs and probes: inputs, input, seed, probe."""

from __future__ import annotations


from rich.text import Text

from onnxprobe import api
from onnxprobe.errors import UsageError
from onnxprobe.report.format import plural, safe, shape as fmt_shape
from onnxprobe.report.table import Column, Table
from onnxprobe.session import render
from onnxprobe.session.inputs import session_notes
from onnxprobe.session.parse import describe_selection, parse_selection
from onnxprobe.session.targets import Target
from onnxprobe.session.commands.table import Env, bad, command, display_ref, no_more, parse_int, tag, target_of
from onnxprobe.text import quote


PROBE_COLUMNS = [Column("index", "#", "right", head=True), Column("node", "node", name=True), Column("op", "op", head=True),
                 Column("tensor", "tensor", name=True), Column("shape", "shape"), Column("dtype", "dtype")]


# -- inputs and probes -----------------------------------------------------------------------------------


def _inputs_table(env: Env, t: Target) -> list:
    feed, _, notes = env.state.feed(t)
    rows = []
    for s in env.state.specs(t):
        v = feed[s.name]
        st = api.TensorStats.from_array(v) if api.has_statistics(v.dtype) else None
        rows.append({"role": "", "name": s.name, "shape": tuple(v.shape), "known": True, "dtype": "string" if v.dtype == object else str(v.dtype),
                     "stats": st, "link": env.state.inputs.source(s.name)})
    table = render.tensor_table(rows, env.width, link="source")
    out: list = [table]
    out += [Text(f"note: {n}", style="dim") for n in session_notes(notes)]
    return out


@command("inputs", "inputs [FILE.npz|FOLDER] [--model a|b]", "list the inputs and where they come from; or load them all from an .npz",
         "inputs and probes", args=("file",))
def cmd_inputs(env: Env, args: list[str]):
    """`inputs batch.npz` sets every input found in the file (keyed by input name); `inputs test_data_set_0`
    those of an ONNX test data set folder, as --inputs reads it (its input_N.pb; one without a name is the
    model's input of its position; a folder of output_N.pb alone is the data set of a model without inputs).
    Examples: `inputs`, `inputs batch.npz`, `inputs batch.npz --model b`, `inputs test_data_set_0`."""
    t = target_of(env, args)
    if len(args) > 1:
        raise bad("inputs", "give at most one .npz file or test data set folder")
    out: list = []
    if args:
        # read as --inputs reads it: a file of no arrays refused, a test data set of outputs alone is no inputs
        given = api.given_inputs(args[0], t.model)
        notes = env.state.set_all_inputs(given.arrays, origin=f"from {args[0]}", complete=given.complete)
        out.append(safe(f"inputs from {args[0]}: {', '.join(given.arrays) or 'none (a test data set of a model without inputs)'}"))
        out += [Text(safe(f"note: {n}"), style="dim") for n in notes]
    return out + _inputs_table(env, t)


@command("input", "input NAME random [DIMS]|FILE|VALUE", "set one input: seeded random data (optionally of shape DIMS), a .npy/.pb file, or a value",
         "inputs and probes", args=("input", "inputhow"))
def cmd_input(env: Env, args: list[str]):
    """Examples: `input x random`, `input x random 1x3x48x320`, `input x x.npy`, `input sr 16000`,
    `input ids [[1, 2, 3]]`. Without a value: shows the input."""
    st = env.state
    if not args:
        raise bad("input", "which input? (`inputs` lists them)")
    name, rest = st.input_name(args[0]), args[1:]
    shape = None
    dropped: list[str] = []  # backward graphs made for the old input shapes
    if rest:
        if rest[0] == "random":
            if len(rest) > 2:
                raise bad("input", "random takes at most one DIMS, e.g. 1x3x224x224")
            if len(rest) == 2:
                what = f"input {name} random {rest[1]}"
                shape = api.parse_dims(rest[1], what)
                # named as the user wrote it, not as the --shape flag; against the model as loaded (a backward graph,
                # made for the input shapes it was attached at, declares those fixed: set_input drops it, and says so)
                for spec in (s for t in st.targets.values() for s in st.specs_of(t.forward or t.model) if s.name == name):
                    api.check_shape(spec, shape, what)
            dropped = st.set_input(name, "random", shape)
        else:
            dropped = st.set_input(name, " ".join(rest))
    feed = next((f for f in (st.feed(t)[0] for t in st.targets.values()) if name in f), None)
    if feed is None:  # an input of a type that gets no value made (a sequence)
        raise UsageError(f"input {quote(name)}: no value made for it (give one: input NAME FILE)")
    v = feed[name]
    line = Text()
    line.append(safe(f"input {name}"), style="bold")
    line.append(safe(f" ← {st.inputs.source(name)}: {'string' if v.dtype == object else v.dtype} [{fmt_shape(v.shape)}]  "))
    line.append_text(render.stats_line(api.TensorStats.from_array(v) if api.has_statistics(v.dtype) else None, compact=True, dtype=v.dtype))
    notes = [n for t in st.targets.values() for n in session_notes(st.feed(t)[2], name)]
    return [line] + [Text(f"note: {n}", style="dim") for n in dict.fromkeys(notes + dropped)]


@command("seed", "seed [N]", "the seed of the random inputs (without N: show it)", "inputs and probes")
def cmd_seed(env: Env, args: list[str]):
    """Examples: `seed`, `seed 7`."""
    st = env.state
    if len(args) > 1:
        raise bad("seed", "give one integer")
    dropped = st.set_seed(parse_int("seed", args[0])) if args else []
    rnd = [s.name for s in st.specs(st.a) if s.name not in st.inputs.files and s.name not in st.inputs.arrays]
    return [f"seed {st.inputs.seed}" + (f" (random inputs: {', '.join(rnd)})" if rnd else " (no random inputs)")] + \
        [Text(safe(f"note: {n}"), style="dim") for n in dropped]


@command("probe", "probe add|rm|list|clear [SELECTION] [--model a|b]",
         "choose the tensors run/stats/save look at, with the selection language of `layers`", "inputs and probes",
         args=("probesub", "selection"))
def cmd_probe(env: Env, args: list[str]):
    """SELECTION: --op TYPE (or op:TYPE), --name GLOB (or just GLOB), --all (or all), --range A:B
    (or range:A:B), --include-constants. The session starts with the default probes of `layers`
    (Conv/Gemm/MatMul/attention outputs and the model outputs), or what --op/--name/--all chose.
    Examples: `probe add op:Conv`, `probe add 'layer.3*'`, `probe rm conv1_out`, `probe list`, `probe clear`."""
    t = target_of(env, args)
    sub = args[0] if args else "list"
    rest = args[1:]
    st = env.state
    if sub == "add":
        if not rest:
            raise bad("probe", "probe add needs a selection, e.g. `probe add op:Relu` or `probe add 'conv*'`")
        sel = parse_selection(rest)
        new = st.probe_add(t, sel)
        return f"{tag(env, t)}added {len(new)} probe{'s' if len(new) != 1 else ''} for {describe_selection(sel)} ({len(t.probes)} in all)"
    if sub in ("rm", "remove", "del"):
        if not rest:
            raise bad("probe", "probe rm needs a selection")
        gone = st.probe_rm(t, parse_selection(rest))
        return f"{tag(env, t)}removed {len(gone)} probe{'s' if len(gone) != 1 else ''} ({len(t.probes)} left)"
    if sub == "clear":
        no_more("probe", rest)
        n = st.probe_clear(t)
        return f"{tag(env, t)}removed all {plural(n, 'probe')} (run and stats now cover the model outputs only)"
    if sub == "list":
        if rest:
            names = [n for n in st.select(t, parse_selection(rest)) if n in set(t.probes)]
        else:
            names = list(t.probes)
        if not names:
            return f"{tag(env, t)}no probes (probe add SELECTION)"
        table = Table(PROBE_COLUMNS)
        for n in names:
            r = display_ref(t, n)
            table.add_row([str(r.index), r.node, r.op_type, n, fmt_shape(r.shape), r.dtype or "?"],
                          [r.index, r.node, r.op_type, n, r.shape, r.dtype])
        return [table, Text(f"{tag(env, t)}{plural(len(names), 'probe')}", style="dim")]
    raise bad("probe", f"unknown subcommand {sub!r}; use add, rm, list or clear")

