"""Small formatting helpers shared by every table: numbers, shapes, shortened names."""

from __future__ import annotations

import math
import re

from onnxprobe.graph.ops import OP_ABBREVIATIONS
from onnxprobe.report.cells import cells, head, tail
from onnxprobe.stats.status import values_status
from onnxprobe.text import clean, json_float, json_word  # noqa: F401 (json_word: of the reports)

safe = clean  # text from a model, for a Text or a table cell
# where an exact pair (infinite SQNR) is drawn or coloured, in every picture (JSON has no inf): float32
# agrees to about 140 dB; float64 pairs measure more (exact_db)
EXACT_DB = 140.0
# a pair's NaN/Inf positions that disagree (stats.metrics' nonfinite_mismatch), as every report words them
NONFINITE_UNALIKE = "NaN/Inf on one side only, or a different one on each"


def plural(n: int, word: str) -> str:
    """'1 tensor', '2 tensors', '1,024 tensors'."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def finite(v) -> float | None:
    """``v`` as a float when it is a finite number (JSON values: None, bools and NaN/Inf are not)."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def exact_db(pairs) -> float:
    """Where the pictures of a diff (the chart, Model Explorer's node data) put an exact pair: ``EXACT_DB``, or
    above the highest SQNR a pair measures (accumulated or introduced) where one reaches it: float64 pairs
    measure 160 dB and more, and an exact pair drawn at 140 below them read as the worse one."""
    top = max((v for p in pairs for v in (finite(p.get("sqnr_db")), finite(p.get("introduced_sqnr_db"))) if v is not None),
              default=None)
    return EXACT_DB if top is None or top < EXACT_DB else float(math.floor(top / 10) * 10 + 20)


def num_or_word(v, digits: int = 4) -> str:
    """``num`` of a value, or the word ``json_word`` made of it as it is."""
    return v if isinstance(v, str) else num(v, digits)


def num(v: float | None, digits: int = 4) -> str:
    """Significant digits, compact: 0.0001641, 1.234e+05, nan, inf. A number below 100000 that ``digits``
    would put in an exponent reads as its plain digits, rounded to an integer: 65504, not 6.55e+04 (a
    float16 at its limit read as 65500), 60000, not 6e+04; as few cells, or fewer, and no digit less."""
    if v is None:
        return "-"
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if v == 0:
        return "0"
    text = f"{v:.{digits}g}"
    return f"{v:.0f}" if "e+" in text and abs(v) < 99999.5 else text


def no_values(shape) -> str:
    """What a tensor with no element counted shows: "empty" when its run's shape has a 0 (it ran), else
    "not run" (an If branch not taken, a Loop of no iterations): ``values_status`` of a count of 0."""
    return values_status(0, shape)


def spread_digits(lo, hi, digits: int = 4, most: int = 10) -> int:
    """Significant digits that show a row's values apart: ``digits``, plus as many as the magnitude exceeds
    the spread (min 10000.496 and max 10000.504 read 1e+04 and 1e+04 with four; 10000.496 and 10000.504
    with nine), at most ``most``. A constant row (min = max) gets float32's seven, at least: 10000.5 reads
    10000.5, not 1e+04 three times; one of a 64-bit type (``most`` past 10) the digits its float64 value
    needs to read back (an int64 123456789017 is not 1.234568e+11, a float64 1e7 + 4e-9 not 10000000)."""
    lo, hi = finite(lo), finite(hi)
    if lo is not None and hi is not None and hi == lo:
        return min(most, max(digits, 7, round_trip_digits(lo) if most > 10 else 0))
    if lo is None or hi is None or hi < lo or not math.isfinite(hi - lo):  # a spread past float64's range needs none
        return digits
    # (a magnitude within about three times the spread needs nothing more: 0.2 to 0.6 reads well with four)
    return min(most, digits + max(0, math.ceil(math.log10(max(abs(lo), abs(hi)) / (hi - lo)) - 0.5)))


def round_trip_digits(v: float) -> int:
    """The significant digits of float64 ``v``'s shortest repr, which reads back as ``v`` (0.1: 1,
    10000000.000000004: 17)."""
    mantissa = repr(float(v)).lstrip("-").split("e")[0].replace(".", "").strip("0")  # '10000000.000000004'
    return max(1, len(mantissa))


def type_digits(dtype) -> int:
    """The most significant digits ``spread_digits`` may give a tensor of ``dtype`` (a name or numpy dtype):
    17 for float64 and the 64-bit integers, whose float64 statistics tell values apart to 17 (ten read
    1e10 and 1e10 + 2e-5 as 1e+10 three times), else 10 (float32 values need 9; their float64 mean one more)."""
    name = "" if dtype is None else str(dtype)
    return 17 if name in ("float64", "int64", "uint64") else 10


def dim(d) -> str:
    """One dimension: its size, its symbolic name, or "?" when unknown (None, or the placeholder names
    onnx's shape inference makes up for dims it cannot tell, "unk__0", which name nothing)."""
    return "?" if d is None or (isinstance(d, str) and d.startswith("unk__") and d[5:].isdigit()) else str(d)


def json_shape(s: tuple | list | None) -> list | None:
    """A declared shape for JSON: its sizes, null for each dimension that is not a number (a symbolic
    name, unknown); null for an unknown rank."""
    if s is None:
        return None
    return [d if isinstance(d, int) else None for d in s]


def graph_dims(s: tuple | list | None) -> list | None:
    """A shape a graph declares, for JSON (inspect, mark, extract): its sizes and symbolic names, null for
    each dimension the tables show as "?" (unknown, or a name onnx's inference made up: ``dim``); null for
    an unknown rank."""
    if s is None:
        return None
    return [None if isinstance(d, str) and dim(d) == "?" else d for d in s]


def shape(s: tuple | list | None) -> str:
    """2x4, scalar, ?; with a symbolic dimension spaced out (batch x 3 x 224 x 224: 'batchx3' would read
    as one name)."""
    if s is None:
        return "?"
    if len(s) == 0:
        return "scalar"
    return (" x " if any(isinstance(d, str) and dim(d) != "?" for d in s) else "x").join(dim(d) for d in s)


def shorten(name: str, width: int) -> str:
    """Keep both ends of a long name, in ``width`` cells: '/model/encoder/layer.0/…/MatMul_output_0'. Control characters are
    escaped first (``text.clean``): names come from model files."""
    return cut_middle(clean(name), width)


def cut_middle(name: str, width: int) -> str:
    """``shorten`` of text already escaped for display (a table's cell): escaping it again would double its
    backslashes, and ``a\\nb`` is how the name of a backslash and an n reads."""
    if width <= 0 or cells(name) <= width:
        return name
    if width <= 3:
        return head(name, width)
    start = head(name, (width - 1) // 3)  # in terminal cells: a CJK character takes two
    return start + "…" + tail(name, width - 1 - cells(start))


DTYPE_ABBREVIATIONS = {"float32": "f32", "float16": "f16", "float64": "f64", "bfloat16": "bf16", "int64": "i64",
                       "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "uint16": "u16", "uint32": "u32",
                       "uint64": "u64", "bool": "bool"}


def op(name: str, width: int = 0) -> str:
    """Short op names for tables (the JSON keeps the real ones); cut to ``width`` only when one is given."""
    return shorten(OP_ABBREVIATIONS.get(name, name), width)


def dtype(name: str | None) -> str:
    """A dtype as tables show it: f32, i64...; the narrow float types whole, as f8e4m3fn and f8e4m3fnuz (cut to 8
    characters, float8_e4m3fn and float8_e4m3fnuz read alike, and so did float8_e5m2 and float8_e5m2fnuz)."""
    if not name:
        return "?"
    if name in DTYPE_ABBREVIATIONS:
        return DTYPE_ABBREVIATIONS[name]
    return clean(re.sub(r"^float(\d+)_", r"f\1", name))
