"""A tensor's status beside its statistics; no numpy here: the reports' formatting imports it at start."""

from __future__ import annotations


def values_status(count, shape, not_observed=None) -> str:
    """What a tensor's row of statistics stands on, said where a count of 0 and null statistics would read
    like an all-NaN tensor (CSV and JSON rows): "ran" (values counted), "empty" (it ran, its shape has a
    0), "not run" (an If branch not taken, a Loop of no iterations), "not observed" (the runtime cannot
    return it), "no statistics" (values that are no numbers: a string tensor's; "empty" where it has none)."""
    if count:
        return "ran"
    if count == 0 or count is None and not not_observed and shape is not None and 0 in shape:
        return "empty" if shape is not None and 0 in shape else "not run"
    return "not observed" if not_observed else "no statistics"
