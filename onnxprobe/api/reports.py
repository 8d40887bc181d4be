"""``report``: what ``--json`` writes of a result, as a plain dict (json.dumps writes it; jq reads it)."""

from __future__ import annotations

import json
import os
import sys
from typing import Union

from onnxprobe.api import hints  # annotations only (hints.DiffResult): a report imports only the workflow of its result
from onnxprobe.errors import UsageError, command_line_words, report_voice, setting_error  # noqa: F401 (command_line_words: the CLI's)
from onnxprobe.api.inputs import ModelLike
from onnxprobe.text import as_word

# what the reports take: the result of an api function (or api.layers_dataset's DatasetResult: api.core, which
# imports this module, is not imported back). Named as ``hints.X``, which imports X's module only when
# typing.get_type_hints asks (an IDE, a docs generator): a class imported under TYPE_CHECKING alone was a NameError
Result = Union["hints.ProbeResult", "hints.DiffResult", "hints.GradResult", "hints.InspectResult", "hints.MarkResult", "hints.ExtractResult"]


def _is(result, module: str, name: str) -> bool:
    """Whether ``result`` is a ``module.name``: a workflow's result exists only once its module is loaded,
    so asking imports nothing (``report`` of a layers result never imports diff or grad)."""
    cls = getattr(sys.modules.get(module), name, None)
    return cls is not None and isinstance(result, cls)


def report(result: Result, *, sort: str = "topo", profile: hints.LayersProfile | None = None) -> dict:
    """The JSON report of a result, as the command line's ``--json`` writes it: of ``layers``
    (``ProbeResult``), ``layers_dataset`` (``DatasetResult``: the report ``merge_stats`` merges), ``diff``
    and ``diff_dataset`` (``DiffResult``), ``grad`` (``GradResult``), ``inspect``, ``mark`` and ``extract``.
    Plain Python values only (numbers that are not finite as the reports write them).
    ``sort``: a diff's pairs in model order (``topo``) or worst first (``accumulated``, ``introduced``), as
    ``diff --sort``; ``profile``: ``api.profile_layers(...)`` of a ``layers`` result, as ``layers --profile``."""
    from onnxprobe.report.io import json_default
    from onnxprobe.text import json_words

    d = _dict(result, sort, profile)
    return json.loads(json.dumps(json_words(d), allow_nan=False, default=json_default))


def _dict(result, sort: str = "topo", profile=None) -> dict:
    d = _made(result, sort, profile)
    if report_voice().cli:
        from onnxprobe.report.io import in_cli_words

        return in_cli_words(d)
    return d


def _made(result, sort: str = "topo", profile=None) -> dict:
    diff = _is(result, "onnxprobe.compare.result", "DiffResult")
    if sort != "topo" and not diff:
        raise UsageError(f"sort={sort!r}: sort orders the pairs of a diff's result, not of a {type(result).__name__}")
    if profile is not None:
        if not _is(profile, "onnxprobe.api.profile", "LayersProfile"):
            raise UsageError(f"profile: expected the result of api.profile_layers, got {type(profile).__name__}")
        if _is(result, "onnxprobe.api.core", "DatasetResult") or not _is(result, "onnxprobe.types", "ProbeResult"):
            raise UsageError(f"profile: the profile of a layers result (a ProbeResult), not of a {type(result).__name__}"
                             " (api.diff(..., profile=True) keeps a diff's own)")
        from onnxprobe.report.layers import layers_dict
        from onnxprobe.report.profile import with_profile

        return with_profile(layers_dict(result), profile)
    if _is(result, "onnxprobe.api.core", "DatasetResult"):
        from onnxprobe.report.layers import dataset_dict

        return dataset_dict(result)
    if _is(result, "onnxprobe.types", "ProbeResult"):
        from onnxprobe.report.layers import layers_dict

        return layers_dict(result)
    if diff:
        from onnxprobe.compare.result import sort_results

        order = sort_results(result.results, sort) if sort != "topo" else None
        if result.samples is not None:
            from onnxprobe.report.diff_dataset import diff_dataset_dict

            return diff_dataset_dict(result, order)
        from onnxprobe.report.diff import diff_dict

        d = diff_dict(result, order)
        if result.profile:
            from onnxprobe.report.profile import with_diff_profile

            d = with_diff_profile(d, result)
        return d
    if _is(result, "onnxprobe.api.grad", "GradResult"):
        from onnxprobe.report.grad import grad_dict

        return grad_dict(result)
    if _is(result, "onnxprobe.api.surgery", "InspectResult"):
        from onnxprobe.report.inspect import inspect_dict

        return inspect_dict(result)
    if _is(result, "onnxprobe.api.surgery", "MarkResult") or _is(result, "onnxprobe.api.surgery", "ExtractResult"):
        from onnxprobe.report.surgery import extract_dict, mark_dict

        return mark_dict(result) if _is(result, "onnxprobe.api.surgery", "MarkResult") else extract_dict(result)
    raise UsageError(f"report: expected the result of an api function (ProbeResult, DatasetResult, DiffResult, GradResult, "
                     f"InspectResult, MarkResult, ExtractResult), got {type(result).__name__}")


def _kind(result, who: str, also: str = "") -> str:
    """'layers', 'diff' or 'grad': the results the HTML report and the overlays draw; ``who``: the function
    asked, which the message about another value starts with (as ``report``'s does); ``also``: the other
    results it takes, said in that message."""
    if _is(result, "onnxprobe.api.core", "DatasetResult") or _is(result, "onnxprobe.types", "ProbeResult"):
        return "layers"
    if _is(result, "onnxprobe.compare.result", "DiffResult"):
        return "diff"
    if _is(result, "onnxprobe.api.grad", "GradResult"):
        return "grad"
    raise UsageError(f"{who}: expected the result of api.layers, api.layers_dataset, api.diff, api.diff_dataset or "
                     f"api.grad{also}, "
                     f"got {type(result).__name__}")


def html(result: Result, path: str | os.PathLike | None = None, *, histograms: dict | None = None, inputs: list[str] | None = None,
         sort: str = "topo", profile: hints.LayersProfile | None = None, columns: list[str] | str | None = None) -> str:
    """The self-contained HTML report of a ``layers``, ``diff`` or ``grad`` result, as ``--html`` writes it:
    the table (sortable, filterable), the facts and charts; ``histograms``: those of the worst rows
    (``api.layers_histograms``, ``diff_histograms``, ``grad_histograms``), drawn where given; ``inputs``:
    the inputs in words (``api.describe_inputs``); ``sort`` and ``profile`` as for ``report``; ``columns``: as
    for ``text``, but the page keeps every column and adds those asked for that the table shows only when
    asked (``rmse``, ``problem``, ``status``...). Returns the page; ``path``: also written there
    (atomically). Needs plotly (the ``html`` extra: MissingExtra)."""
    from onnxprobe.report import io as report_io
    from onnxprobe.report.html import html_report, require_plotly

    kind = _kind(result, "html")
    if inputs is not None and (not isinstance(inputs, (list, tuple)) or not all(isinstance(i, str) for i in inputs)):
        raise UsageError(f"inputs: the inputs in words, a list of strings (api.describe_inputs(model, spec) makes it), "
                         f"got {type(inputs).__name__}")
    if histograms is not None and not isinstance(histograms, dict):
        raise UsageError(f"histograms: a dict of tensor name -> histogram (api.layers_histograms, diff_histograms, "
                         f"grad_histograms make it), got {type(histograms).__name__}")
    asked = _columns(columns)
    require_plotly()
    data = _dict(result, sort, profile)
    if kind == "layers":
        from onnxprobe.report.layers import layers_table

        table = layers_table(data)[0]
    elif kind == "diff":
        from onnxprobe.report.diff import diff_table

        table = diff_table(data, asked)
    else:
        from onnxprobe.report.grad import grad_table

        table = grad_table(data)[0]
    table.choose(table.keys() + list(asked))  # every column, then those only --columns shows (a wrong key: UsageError)
    page = html_report(kind, data, table, histograms, inputs)
    if path is not None:
        report_io.write_text(page, path)
    return page


def _model_of(result, kind: str, model, what: str = "overlay"):
    """The ModelProto a result's report is about: ``model`` (a Model, path or ModelProto) when given, else the
    result's own (layers: the probed model's original; diff: model A); a grad result holds its model with
    the loss added, so it takes ``model``. ``what``: the api function asking (the overlay's or netron's)."""
    from onnxprobe.api.inputs import proto_of

    if model is not None:
        return proto_of(model)
    if kind == "layers":
        return result.plan.base if result.plan.base is not None else result.plan.model
    if kind == "diff":
        return result.a.model.proto
    raise UsageError(f"model: the {what} of a grad result needs the model it is about (api.{what}(result, model))")


def _about(proto, kind: str, d: dict, model) -> None:
    """A ``model`` given for a result that holds none of its tensors is not the model it is about: a
    UsageError, not node data of another model's nodes (or none) written without a word."""
    from onnxprobe.graph.walk import all_graphs
    from onnxprobe.text import clean
    from onnxprobe.types import forward_name

    if kind == "layers":
        names = [t["name"] for t in d.get("tensors") or ()]
    elif kind == "grad":
        names = [g["tensor"] for g in d.get("gradients") or ()]
    else:
        names = [p["a"][len(p["scope"]) + 1:] if p.get("scope") and p["a"].startswith(p["scope"] + "/") else p["a"]
                 for p in d.get("pairs") or ()]
        names = [forward_name(n) or n for n in names] if d.get("grad") else names
    held = {v for g in all_graphs(proto.graph) for v in [*(i.name for i in g.input), *(t.name for t in g.initializer),
                                                         *(o for n in g.node for o in n.output)]}
    if names and not held.intersection(names):
        what = model if isinstance(model, (str, bytes)) or hasattr(model, "__fspath__") else type(model).__name__
        raise UsageError(f"model: {clean(str(what))} holds none of the result's tensors ({clean(names[0])}, ...): give the "
                         "model the result is about")


def overlay(result: Result, model: ModelLike | None = None, *, sort: str = "topo") -> dict:
    """Model Explorer node data of a ``layers``, ``diff`` or ``grad`` result (``--overlay``): each node coloured
    by its row's worst number. ``model``: the model the result is about (default: the result's own; a grad
    result needs it; one that holds none of the result's tensors is a UsageError). json.dumps writes it; Model Explorer's "node data" reads the file."""
    from onnxprobe.report import overlay as pictures

    kind = _kind(result, "overlay")
    proto = _model_of(result, kind, model)
    make = {"layers": pictures.layers_overlay, "diff": pictures.diff_overlay, "grad": pictures.grad_overlay}[kind]
    d = _dict(result, sort)
    if model is not None:
        _about(proto, kind, d, model)
    return make(proto, d)


def netron(result: Result, model: ModelLike | None = None, *, sort: str = "topo") -> dict:
    """A Netron attachment of a ``layers``, ``diff`` or ``grad`` result (``--netron``): each tensor's numbers,
    under the names Netron shows. ``model`` as for ``overlay``."""
    from onnxprobe.report import overlay as pictures

    kind = _kind(result, "netron")
    proto, d = _model_of(result, kind, model, "netron"), _dict(result, sort)
    if model is not None:
        _about(proto, kind, d, model)
    return pictures.netron_attachment(kind, d, proto)


def text(result: Result | dict, *, width: int = 100, format: str = "table", columns: list[str] | str | None = None, wide: bool = False,
         sort: str = "topo", profile: hints.LayersProfile | None = None) -> str:
    """The report a command prints for ``result``, as a string (print it in a notebook): the table and its
    header and footer lines at ``width`` columns, every column kept (``wide``: as ``--wide``, lines as long as
    they need, ``width`` aside); ``format`` csv, markdown or json: the main table's rows alone (``--format``);
    ``columns``: those of the main table (``--columns``: a list of keys, or one string of keys separated by
    commas); ``sort`` and ``profile`` as for ``report``. ``result``: of any api function that makes a report,
    and the dict ``api.merge_stats`` returns. No colour."""
    import io

    from onnxprobe.report.console import WIDE, SafeConsole
    from onnxprobe.report.render import print_items
    from onnxprobe.report.table import FORMAT, FORMATS, present

    if not isinstance(width, int) or isinstance(width, bool) or width < 20:
        raise UsageError(f"width: expected a number of columns (an int, 20 or more), got {width!r}")
    if not isinstance(wide, bool):
        raise UsageError(f"wide: expected True or False (--wide), got {wide!r}")
    if format not in FORMATS:
        raise setting_error(UsageError, FORMAT, f"{as_word(format)}: choose {', '.join(FORMATS)}")
    asked = _columns(columns)
    # wide, as --wide: laid out at WIDE columns, so that no row is folded onto the next line at ``width``
    width = WIDE if wide else width
    items = _renderables(result, width, asked, sort, profile)
    out = io.StringIO()
    print_items(SafeConsole(file=out, width=width, soft_wrap=False, color_system=None, force_terminal=False),
                present(items, wide=wide, columns=list(asked), fmt=format))
    return out.getvalue()


def _columns(columns) -> tuple[str, ...]:
    """``columns`` as ``--columns`` takes them: comma-separated keys in a string, or a list of such strings."""
    from onnxprobe.report.table import column_keys

    if not columns:
        return ()
    given = [columns] if isinstance(columns, str) else list(columns) if isinstance(columns, (list, tuple)) else None
    if given is None or not all(isinstance(c, str) for c in given):
        raise UsageError(f"columns: expected column keys (a list of strings, or one string of keys separated by commas), "
                         f"got {columns!r}")
    return tuple(column_keys(",".join(given)))


def _renderables(result, width: int, asked: tuple[str, ...], sort: str, profile) -> list:
    """What the command prints of ``result`` (report/'s renderables of its report dict); a dict: what
    ``api.merge_stats`` returns, as ``merge-stats`` prints it."""
    if isinstance(result, dict) and "merged_from" in result:
        if "pairs" in result:
            from onnxprobe.report.diff_dataset import diff_dataset_renderables

            return diff_dataset_renderables(result, width, asked=asked)
        from onnxprobe.report.layers import layers_renderables

        return layers_renderables(result, width)
    if _is(result, "onnxprobe.api.surgery", "InspectResult"):
        from onnxprobe.report.inspect import inspect_renderables

        return inspect_renderables(result, width)
    if _is(result, "onnxprobe.api.surgery", "MarkResult") or _is(result, "onnxprobe.api.surgery", "ExtractResult"):
        from onnxprobe.report.surgery import extract_renderables, mark_renderables

        return (mark_renderables if _is(result, "onnxprobe.api.surgery", "MarkResult") else extract_renderables)(result, width)
    kind = _kind(result, "text", " (or of api.inspect, api.mark or api.extract, or what api.merge_stats returns)")
    data = _dict(result, sort, profile)
    if kind == "layers":
        from onnxprobe.report.layers import layers_renderables
        from onnxprobe.report.profile import profile_renderables

        return layers_renderables(data, width) + (profile_renderables(data, width) if profile is not None else [])
    if kind == "grad":
        from onnxprobe.report.grad import grad_renderables

        return grad_renderables(data, width)
    if result.samples is not None:
        from onnxprobe.report.diff_dataset import diff_dataset_renderables

        return diff_dataset_renderables(data, width, asked=asked)
    from onnxprobe.report.diff import diff_renderables
    from onnxprobe.report.profile import diff_profile_renderables

    return diff_renderables(data, width, asked=asked) + (diff_profile_renderables(data, width) if result.profile else [])
