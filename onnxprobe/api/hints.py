"""The api's public classes for the annotations of its own modules, each imported when first asked for:
``hints.DiffResult`` in ``pictures.diff_histograms`` loads compare.result only when typing.get_type_hints (an
IDE, a docs generator, pydantic, a typer-style wrapper) resolves it, so a layers picture or report still imports
neither diff nor grad. A class imported under TYPE_CHECKING alone was a NameError there. The names are
``onnxprobe.api``'s own (its one table, ``_NAMES``): the package, whose module this is, is loaded already."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the same classes, for type checkers and editors
    from onnxprobe.api.grad import GradResult  # noqa: F401
    from onnxprobe.api.grad_plan import GradSpec  # noqa: F401
    from onnxprobe.api.profile import LayersProfile  # noqa: F401
    from onnxprobe.api.surgery import ExtractResult, InspectResult, MarkResult  # noqa: F401
    from onnxprobe.compare.result import DiffResult  # noqa: F401
    from onnxprobe.types import ProbeResult  # noqa: F401


def __getattr__(name: str):
    if name.startswith("_"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(sys.modules[__package__], name)  # onnxprobe.api: imports the class's module on first use
