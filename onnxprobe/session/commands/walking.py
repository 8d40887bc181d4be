"""The debugger's commands about finding and walking: where, goto, step, back."""

from __future__ import annotations


from rich.text import Text

from onnxprobe import api
from onnxprobe.report.format import plural, safe
from onnxprobe.session.parse import pop_option
from onnxprobe.session.targets import Target
from onnxprobe.session.commands.table import (Env, bad, command, completing, no_more, node_index, node_view, parse_int,
                                             tag, target_of)


# -- finding and walking ---------------------------------------------------------------------------------


@command("where", "where nan|inf|nonfinite|STAT<X|STAT>X [--next] [--weights] [--model a|b]",
         "the first tensor, in topological order, where a condition holds, and the node that produced it",
         "finding and walking", args=("condition",))
def cmd_where(env: Env, args: list[str]):
    """STAT: absmax, min, max, mean, std, abs_mean, zero_fraction, nan, inf, count; OP: < <= > >= == !=.
    Examples: `where nan`, `where absmax>1e4`, `where std<1e-6`. The cursor moves to the producing node
    (a graph input's or weight's first reader that ran; then `back` walks upstream); `where COND --next` searches after the cursor (after the tensor the last `where` found, while the cursor is where it left it). The search covers the
    graph inputs and every activation (a model output is one, whatever it is computed from); --weights adds
    initializers, Constant outputs and what is computed from them alone. Statistics of every tensor are computed once per inputs/device."""
    t = target_of(env, args, env.state.current)
    nxt = pop_option(args, "--next", flag=True)
    weights = bool(pop_option(args, "--weights", flag=True))
    if not args:
        raise bad("where", f"give a condition, e.g. {api.CONDITION_EXAMPLES}")
    text = " ".join(args)
    cond = api.parse_condition(text)
    after = t.cursor if nxt and t.cursor is not None else None
    since = None
    if after is not None and t.where_hit is not None and t.where_hit[0] == t.cursor:  # where the last hit left it:
        after, since = None, t.where_hit[1]  # on after that tensor (a graph input's reader's outputs come later)
    hit = env.state.where(t, cond, after=after, weights=weights, since=since)
    label = tag(env, t)
    scope = f" after node #{after}" if after is not None else f" after {safe(t.index.order[since])}" if since is not None else ""
    if hit is None:
        n = len(env.state.where_domain(t, weights=weights, after=after, since=since))
        extra = "" if weights else "; --weights searches the weights too"
        return f"{label}no tensor{scope} where {cond.text} ({plural(n, 'tensor')} searched{extra})"
    ref, stats = hit
    kind = t.index.kinds[ref.key]
    pos = t.index.position[ref.key]
    msg = Text(f"{label}first tensor{scope} where {cond.text}: ")
    msg.append(safe(ref.key), style="bold")
    msg.append(f" (tensor {pos} in topological order), ")
    if kind == "node":
        msg.append("produced by node ")
        msg.append(safe(ref.node), style="bold")
        msg.append(safe(f" ({ref.op_type}, #{ref.index})"))
        site = ref.index
    else:
        cons = t.index.consumers.get(ref.name, [])
        msg.append("a graph input" if kind == "input" else "a weight")
        ran = env.state.readers_that_ran(t, ref.name)  # not a reader in an If branch not taken
        first = ran[0] if ran else (cons[0] if cons else None)
        if first is not None:
            idle = "" if ran else ", which did not run on these inputs"
            msg.append(safe(f", read first by node {first.name} ({first.node.op_type}, #{first.index}){idle}"))
        site = first.index if first is not None else None
    msg.append(f": {cond.describe(stats)}")
    out: list = [msg]
    if site is not None:
        env.state.goto(t, site)
        env.state.ensure_walk_window(t, site)
        out += node_view(env, t, site)
    t.where_hit = (t.cursor, pos)
    return out


def _walk(env: Env, t: Target, i: int) -> list:
    env.state.ensure_walk_window(t, i)
    return node_view(env, t, i)


@command("goto", "goto NODE|#INDEX|TENSOR [--model a|b]", "move the cursor to a node and show its inputs and outputs", "finding and walking",
         args=("node",))
def cmd_goto(env: Env, args: list[str]):
    """A tensor name goes to the node that produced it (for a graph input or a weight, the first node
    that reads it).
    Examples: `goto conv1`, `goto #12`, `goto relu1_out`."""
    t = target_of(env, args, env.state.current)
    if len(args) != 1:
        raise bad("goto", f"give one node name or #index {completing('(Tab completes names)', '(`nodes` lists them)')}")
    return _walk(env, t, env.state.goto(t, node_index(t, args[0])))


@command("step", "step [N] [--weights] [--model a|b]", "move the cursor N nodes forward in topological order (default 1)", "finding and walking")
def cmd_step(env: Env, args: list[str]):
    """Nodes that only compute weights (Constant nodes, and nodes fed by constants alone) are passed
    over; --weights stops at them too. `goto` reaches any node.
    Examples: `step`, `step 5`, `step --weights`."""
    return _move(env, args, "step", 1)


@command("back", "back [N] [--weights] [--model a|b]", "move the cursor N nodes back in topological order (default 1)", "finding and walking")
def cmd_back(env: Env, args: list[str]):
    """Like step, backwards: weight-only nodes are passed over unless --weights.
    Examples: `back`, `back 3`."""
    return _move(env, args, "back", -1)


def _move(env: Env, args: list[str], cmd: str, direction: int) -> list:
    """``step`` (``direction`` 1) and ``back`` (-1): N nodes that way, 1 by default."""
    t = target_of(env, args, env.state.current)
    weights = bool(pop_option(args, "--weights", flag=True))
    n = parse_int(cmd, args.pop(0)) if args else 1
    no_more(cmd, args)
    if n < 1:
        raise bad(cmd, f"N is how many nodes to move: 1 or more, not {n}")
    return _walk(env, t, env.state.step(t, direction * n, weights=weights))
