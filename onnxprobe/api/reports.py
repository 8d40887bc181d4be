"""``report``: what ``--json`` writes of a result, as a plain dict (json.dumps writes it; jq reads it)."""

from __future__ import annotations

import json
import sys

from onnxprobe.errors import UsageError


def _is(result, module: str, name: str) -> bool:
    """Whether ``result`` is a ``module.name``: a workflow's result exists only once its module is loaded,
    so asking imports nothing (``report`` of a layers result never imports diff or grad)."""
    cls = getattr(sys.modules.get(module), name, None)
    return cls is not None and isinstance(result, cls)


def report(result) -> dict:
    """The JSON report of a result, as the command line's ``--json`` writes it: of ``layers``
    (``ProbeResult``), ``layers_dataset`` (``DatasetResult``: the report ``merge_stats`` merges), ``diff``
    and ``diff_dataset`` (``DiffResult``), ``grad`` (``GradResult``), ``inspect``, ``mark`` and ``extract``.
    Plain Python values only (numbers that are not finite as the reports write them)."""
    from onnxprobe.report.io import json_default

    d = _dict(result)
    return json.loads(json.dumps(d, allow_nan=False, default=json_default))


def _dict(result) -> dict:
    if _is(result, "onnxprobe.api.core", "DatasetResult"):
        from onnxprobe.report.layers import dataset_dict

        return dataset_dict(result)
    if _is(result, "onnxprobe.types", "ProbeResult"):
        from onnxprobe.report.layers import layers_dict

        return layers_dict(result)
    if _is(result, "onnxprobe.compare.diff", "DiffResult"):
        if result.samples is not None:
            from onnxprobe.report.diff_dataset import diff_dataset_dict

            return diff_dataset_dict(result)
        from onnxprobe.report.diff import diff_dict

        d = diff_dict(result)
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
