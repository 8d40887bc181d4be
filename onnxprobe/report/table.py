"""The one table layout of every report (``layers``, ``diff``, ``grad``, ``inspect``, ``mark``,
``merge-stats`` and the debugger's views): columns chosen by key, four output formats, and width rules
that never drop a column.

At a given width the layout is the first of these that fits:

1. one line per row, every cell whole;
2. one line per row, the name columns (tensor and node names) shortened by whole path parts, keeping
   the layer index and the op (``report.names``), no narrower than ``NAME_MIN`` nor than the width at
   which the names of the column stay readable: all different, paths with their last part whole;
3. stacked: the index, names and other ``head`` columns on a first line, the other columns indented on
   as many lines below as the width needs (names on the same terms; head columns move down while the
   names need the room); where the names cannot share the first line, each name column after the first
   takes an indented line of its own;
4. one record per row: the head line, each name whole (folded at its ``/``), then ``header value``
   pairs wrapped to the width.

``wide`` shows every cell whole on one line whatever the width. ``csv()``, ``markdown()`` and
``records()`` give the rows with full names (and, in CSV and JSON, the raw numbers).

Rich's own Table measures and wraps every cell, which takes 1.7 s for the 440 rows of a PP-OCR model and
cuts columns with an ellipsis when they do not fit; this layout computes widths once and each row is one
f-string. A ``Table`` is a Rich renderable: colour follows the console, so it disappears on a pipe.
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from onnxprobe.errors import UsageError, setting_error
from onnxprobe.report import cells as cl
from onnxprobe.report.columns import Column  # noqa: F401 (of the reports: a table's columns)
from onnxprobe.report import widths as wd
from onnxprobe.report.format import json_word
from onnxprobe.report.format import shape as fmt_shape
from onnxprobe.report.names import shorten_names
from onnxprobe.report.wrap import GAP  # GAP: spaces between columns
from onnxprobe.report.wrap import flow as _flow
from onnxprobe.report.wrap import fold as _fold
from onnxprobe.report.wrap import wrap as _wrap
from onnxprobe.text import as_word, clean

if TYPE_CHECKING:  # Rich is imported where a table is first drawn (report.columns)
    from rich.console import Console, ConsoleOptions, RenderResult

NAME_MIN = 20
NAME_FLOOR = 12  # no name column is ever narrower (unless its names are shorter)
WRAP_MIN = 30  # a name column is not shortened below this in the one-line layout
INDENT = 4  # of the second line of a two-line row
FORMATS = ("table", "csv", "markdown", "json")
FORMAT, COLUMNS = ("format", "--format"), ("columns", "--columns")  # as api.text and the command line name them


@dataclass
class Row:
    cells: list[str]  # as shown
    values: list  # raw (CSV, JSON): full names, numbers
    style: str | None = None
    data: list | None = None  # the values of ``Table.data``
    order: dict | None = None  # column key -> the page's sort key of a cell whose raw value is not (a verdict's [rank])


class Table:
    def __init__(self, columns: list[Column], *, main: bool = True, header: bool = True, data: tuple[str, ...] = ()):
        if any(c.wrap for c in columns[:-1]):
            raise ValueError("only the last column may wrap")
        self.columns = list(columns)
        self.rows: list[Row] = []
        self.wide = False
        self.main = main  # the table --columns and --format act on, when a report has several
        self.header = header
        # keys that CSV and JSON rows add after the columns, whatever --columns: what the table says in its cells
        # in words a reader of raw values would miss (a tensor's status: "not run" beside a count of 0)
        self.data = list(data)

    def add_row(self, cells: list[str], values: list | None = None, style: str | None = None, data: list | None = None, order: dict | None = None) -> None:
        if len(cells) != len(self.columns) or len(data or ()) != len(self.data):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns, {len(data or ())} data for {len(self.data)}")
        self.rows.append(Row([clean(c) for c in cells], list(values) if values is not None else list(cells), style, list(data or ()), dict(order or {})))

    def __len__(self) -> int:
        return len(self.rows)

    # --- choosing columns --------------------------------------------------------------------------------

    def keys(self) -> list[str]:
        return [c.key for c in self.columns]

    def choose(self, keys: list[str] | None) -> None:
        """Keep only these columns, in this order (``--columns``); a key may also be the shown header. A key
        of ``data`` named becomes a column (shown, in the order given); unnamed, it is dropped."""
        if not keys:
            return
        named = {k.strip().lower() for k in keys}
        for j, k in enumerate(self.data):  # named: a column of its own, in the order given, in every format
            if k in named and k not in self.keys():
                self.columns.append(Column(k, k))
                for r in self.rows:
                    r.cells.append("-" if r.data[j] is None else clean(str(r.data[j])))
                    r.values.append(r.data[j])
        self.data = []
        for r in self.rows:
            r.data = []
        index = {}
        for i, c in enumerate(self.columns):
            index.setdefault(c.key.lower(), i)
            index.setdefault(c.header.lower(), i)
        picked = []
        for k in keys:
            i = index.get(k.strip().lower())
            if i is None:
                raise setting_error(UsageError, COLUMNS, f": no column {k.strip()!r}; this table has {', '.join(self.keys())}")
            if i not in picked:
                picked.append(i)
        kept = {self.columns[i].key for i in picked}
        whole = {i for i in picked if self.columns[i].beside and self.columns[i].beside not in kept}
        stats = [i for i, c in enumerate(self.columns) if c.stat]
        first = next((i for i in picked if i in stats), None)
        self.columns = [self.columns[i] for i in picked]
        for r in self.rows:
            said = next((r.cells[i] for i in stats if r.values[i] is None and r.cells[i] != "-"), None)
            r.cells = [said if i == first and said and r.values[i] is None else
                       clean(str(r.values[i])) if i in whole and r.values[i] is not None else r.cells[i] for i in picked]
            r.values = [r.values[i] for i in picked]

    # --- text formats ------------------------------------------------------------------------------------

    def records(self) -> list[dict]:
        return [{**{c.key: _raw(v) for c, v in zip(self.columns, r.values)}, **{k: _raw(v) for k, v in zip(self.data, r.data)}}
                for r in self.rows]

    def csv(self) -> str:
        import csv  # here: only --format csv needs it

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(self.keys() + self.data)
        keys = self.keys() + self.data
        for r in self.rows:
            w.writerow(["" if v is None else _csv_value(v, k) for k, v in zip(keys, r.values + r.data)])
        return buf.getvalue()

    def markdown(self) -> str:
        def cell(s: str) -> str:  # the table's own bars escaped; HTML too: a renderer may pass tags through
            s = (s.replace("\\", "\\\\").replace("|", "\\|").replace("&", "&amp;").replace("<", "&lt;")
                 .replace(">", "&gt;"))
            # and Markdown's own syntax, so that a model's names make no link, code, emphasis or strikethrough:
            # [ ] ` * ~ $ always (GitHub strikes through ~a~ too, and reads $a$ as maths), _ where it starts or
            # ends a word (conv1_out stays as it reads; __init__ is not bold); GitHub's bare autolinks (http://,
            # https://, ftp://, www.) are broken by an escaped ':' or '.', and spaces a cell would trim or a
            # renderer collapse are &nbsp;
            s = re.sub(r"([\[\]`*~$])", r"\\\1", s)
            s = re.sub(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])", r"\\_", s)
            s = re.sub(r"(?i)(https?|ftp)(:)|(www)(\.)", r"\1\3\\\2\4", s)
            return re.sub(r"^ +| +$|(?<= ) ", lambda m: "&nbsp;" * len(m.group(0)), s)

        lines = ["| " + " | ".join(cell(c.header or c.key) for c in self.columns) + " |",
                 "|" + "|".join("---:" if c.justify == "right" else "---" for c in self.columns) + "|"]
        lines += ["| " + " | ".join(cell(s) for s in cells) + " |" for cells in self._full()]
        return "\n".join(lines) + "\n"

    def text(self, fmt: str) -> str:
        if fmt == "csv":
            return self.csv()
        if fmt == "markdown":
            return self.markdown()
        if fmt == "json":
            import json

            from onnxprobe.text import json_words

            return json.dumps(json_words(self.records()), indent=1, allow_nan=False) + "\n"
        raise setting_error(UsageError, FORMAT, f"{as_word(fmt)}: choose {', '.join(FORMATS)}")

    # --- layout ------------------------------------------------------------------------------------------

    def _full(self) -> list[list[str]]:
        """Cells with the name columns whole (``--wide``, markdown), a body's mark ("↳ ") kept."""
        def whole(s: str, v: str) -> str:
            return ("↳ " if s.startswith("↳ ") and not v.startswith("↳ ") else "") + clean(v)

        return [[whole(s, v) if c.name and isinstance(v, str) else s for c, s, v in zip(self.columns, r.cells, r.values)]
                for r in self.rows]

    def _whole_beside(self, cells: list[list[str]]) -> list[list[str]]:
        """``cells`` with the columns that leave out what another column shows (``Column.beside``) whole;
        ``cells`` itself when there are none."""
        beside = [i for i, c in enumerate(self.columns) if c.beside and c.name]
        if not beside:
            return cells
        return [[clean(r.values[i]) if i in beside and isinstance(r.values[i], str) else row[i] for i in range(len(row))]
                for row, r in zip(cells, self.rows)]

    def lines(self, width: int) -> list[tuple[str, str | None]]:
        """(text, style) per line at ``width``: the first layout (module doc) that fits."""
        cols = self.columns
        if not cols:
            return []
        full = self._full() if self.wide else [r.cells for r in self.rows]
        heads = [c.header for c in cols]
        need = wd.need_of(heads, full)
        if cols[-1].wrap and not self.wide:  # the folding column takes what the others leave, at least WRAP_MIN and
            # its longest word (a tensor's name), which the other layouts give it room for (stacked: a line of its own
            # below): whole node names of 64 cells left it 30 at 120 columns, each row folded over 3-4 lines and
            # names cut mid-word, worse than at 80
            longest = max((cl.cells(w) for r in full for w in r[-1].split(" ")), default=0)
            floor = max(WRAP_MIN, min(longest, width - 4))  # (4: the stacked layout's indent)
            need[-1] = min(need[-1], max(floor, width - wd.span(need[:-1]) - GAP))
        names = [i for i, c in enumerate(cols) if c.name]
        readable: dict[int, int] = {}

        def fewest(one: list) -> list:  # a folding column: the one-line layout, or stacked where that takes fewer lines
            if not cols[-1].wrap or self.wide:
                return one
            readable.update({i: max(wd.readable_width([r[i] for r in full], need[i]), min(need[i], NAME_FLOOR)) for i in names
                             if i not in readable})
            stacked = self._stack(full, need, names, readable, [], width)
            return stacked if stacked is not None and len(stacked) < len(one) else one

        if self.wide or wd.span(need) <= width:
            if not self.wide:  # 1. every cell whole, where the width takes it: cells shortened beside
                # another column (a tensor name without its node's prefix) shown whole too
                whole = self._whole_beside(full)
                if whole is not full and wd.span(need_whole := wd.need_of(heads, whole)) <= width:
                    return fewest(self._one_line(whole, need_whole))
            return fewest(self._one_line(full, need))
        readable.update({i: max(wd.readable_width([r[i] for r in full], need[i]), min(need[i], NAME_FLOOR)) for i in names})
        fixed = [i for i in range(len(cols)) if i not in names]
        floors = {i: max(readable[i], min(need[i], NAME_MIN)) for i in names}
        # names that, shortened to their floor, take fewer cells (a long part dropped: 'model/…/tail') need
        # only those: the floor padded out would push a table that fits onto more lines
        at_floor = self._used(self._shortened(full, [floors.get(i, n) for i, n in enumerate(need)], names), need, names)
        floors = {i: min(floors[i], at_floor[i]) for i in names}
        widths = wd.share(need, names, width - wd.span([need[i] for i in fixed]) - GAP * len(names), floors)
        if widths is not None:
            rows = self._shortened(full, widths, names)
            return fewest(self._one_line(rows, self._used(rows, widths, names)))
        for alone in ([], names[1:]):  # 3. stacked: every name on the first line, else each after the first on its own
            stacked = self._stack(full, need, names, readable, alone, width)
            if stacked is not None:
                return stacked
        first = [i for i, c in enumerate(cols) if c.head or c.name]
        # 4. names whole: a tensor's too, not '…_output_0' beside its node's
        return self._records(self._whole_beside(full), first, [i for i in range(len(cols)) if i not in first], names, width)

    def _stack(self, full, need, names, readable, alone, width) -> list[tuple[str, str | None]] | None:
        """Layout 3 (module doc), or None where it does not fit: the head columns and the names on a first
        line, less the name columns ``alone``, which take an indented line each below it (two long names that
        cannot share a line: silero-vad's mark at 80 columns), then the other columns; head columns move down
        while the names on the first line need the room. A name alone on its line is not shortened beside
        another column."""
        cols, heads = self.columns, [c.header for c in self.columns]
        if alone:  # a line of its own has the room for what a name leaves out beside another ('…_out')
            whole = self._whole_beside(full)
            full = [[w[i] if i in alone else f[i] for i in range(len(f))] for f, w in zip(full, whole)]
            need = wd.need_of(heads, full)
            readable = {**readable, **{i: max(wd.readable_width([r[i] for r in full], need[i]), min(need[i], NAME_FLOOR))
                                       for i in alone}}
        first = [i for i, c in enumerate(cols) if (c.head or c.name) and i not in alone]
        rest = [i for i in range(len(cols)) if i not in first and i not in alone]
        movable = [i for i in reversed(first) if i not in names and i != 0]  # to the lines below, when names need room
        on_first = [i for i in names if i not in alone]
        below = {i: min(need[i], width - INDENT) for i in alone}  # a name alone on its line takes what it needs of it
        if any(below[i] < readable[i] for i in alone):
            return None
        while all(INDENT + need[i] <= width for i in rest):
            w1 = wd.share(need, on_first, width - wd.span([need[i] for i in first if i not in names]) - GAP * len(on_first), readable)
            if w1 is not None and (rest or alone):
                w1 = [below.get(i, w) for i, w in enumerate(w1)]
                groups = [first] + [[i] for i in alone] + (wd.line_groups(rest, need, width - INDENT) if rest else [])
                # a first line that takes every name whole, beside columns too ('conv1_out' beside node
                # 'conv1', not '…_out': QA, the sample CNN at 80 columns with room to spare)
                whole = self._whole_beside(full)
                if whole is not full:  # the names' columns as wide as their whole cells, the others as they were
                    need_whole = [w if i in names else n for i, (w, n) in enumerate(zip(wd.need_of(heads, whole), need))]
                    if wd.span([need_whole[i] for i in first]) <= width and all(INDENT + need_whole[i] <= width for i in alone):
                        return self._stacked(whole, need_whole, groups, width)
                rows = self._shortened(full, w1, names)
                return self._stacked(rows, self._used(rows, w1, names), groups, width)
            if not movable:
                return None
            i = movable.pop(0)
            first.remove(i)
            rest = sorted(rest + [i])
        return None

    def _shortened(self, full: list[list[str]], widths: list[int], names: list[int]) -> list[list[str]]:
        rows = [list(r) for r in full]
        mark = "↳ "  # a body's mark is kept whole: the name after it is what is shortened
        for i in names:
            marked = [r[i].startswith(mark) for r in full]
            bare = [r[i][len(mark):] if m else r[i] for r, m in zip(full, marked)]
            short = shorten_names(bare, widths[i] - (cl.cells(mark) if any(marked) else 0))
            # a name without the mark has its cells too: 'if1' beside '↳ n' was cut to 'if' in a column of 4
            unmarked = shorten_names(bare, widths[i]) if any(marked) and not all(marked) else short
            for r, s, u, m in zip(rows, short, unmarked, marked):
                r[i] = mark + s if m else u
        return rows

    def _used(self, rows: list[list[str]], widths: list[int], names: list[int]) -> list[int]:
        """``widths`` with each name column as wide as its shortened names (and header) are, no wider: a
        share of the width that the shortening left unused is not padded out."""
        used = list(widths)
        for i in names:
            used[i] = min(widths[i], max([cl.cells(self.columns[i].header)] + [cl.cells(r[i]) for r in rows]))
        return used

    def _fmt(self, cells: list[str], widths: list[int], idx: list[int]) -> str:
        parts = [cl.rjust(cells[i], widths[i]) if self.columns[i].justify == "right" else cl.ljust(cells[i], widths[i]) for i in idx]
        return (" " * GAP).join(parts).rstrip()

    def _one_line(self, rows: list[list[str]], widths: list[int]) -> list[tuple[str, str | None]]:
        idx = list(range(len(self.columns)))
        out = self._head([(self._fmt([c.header for c in self.columns], widths, idx), "bold")], wd.span(widths))
        for cells, r in zip(rows, self.rows):
            out += self._folded(cells, widths, idx, "", widths[-1], r.style)
        return out

    def _folded(self, cells: list[str], widths: list[int], idx: list[int], pad: str, room: int,
                style: str | None) -> list[tuple[str, str | None]]:
        """The line of columns ``idx`` after ``pad``; where they end with a folding column (``Column.wrap``)
        whose cell is longer than ``room``, that cell goes on as many lines as it needs, under itself."""
        last = len(self.columns) - 1
        if not (self.columns[last].wrap and not self.wide and idx[-1] == last and cl.cells(cells[last]) > room):
            return [(pad + self._fmt(cells, widths, idx), style)]
        chunks = _wrap(cells[last], room)
        lead = len(pad) + (wd.span([widths[i] for i in idx[:-1]]) + GAP if len(idx) > 1 else 0)
        return [(pad + self._fmt(cells[:last] + [chunks[0]], widths, idx), style)] + [(" " * lead + c, style) for c in chunks[1:]]

    def _head(self, lines: list[tuple[str, str | None]], span: int) -> list[tuple[str, str | None]]:
        return lines + [("─" * span, "dim")] if self.header else []

    def _stacked(self, rows, widths, groups: list[list[int]], width: int) -> list[tuple[str, str | None]]:
        """Each row on one line per group of columns: the first group as it is, the others indented; a
        folding last column takes the rest of its line's ``width`` and goes on below itself."""
        heads = [c.header for c in self.columns]
        pad = [""] + [" " * INDENT] * (len(groups) - 1)
        span = max(len(p) + wd.span([widths[i] for i in g]) for p, g in zip(pad, groups))
        out = self._head([(p + self._fmt(heads, widths, g), "bold") for p, g in zip(pad, groups)], span)
        rooms = [max(widths[-1], width - len(p) - (wd.span([widths[i] for i in g[:-1]]) + GAP if len(g) > 1 else 0))
                 for p, g in zip(pad, groups)]
        for cells, r in zip(rows, self.rows):
            for p, g, room in zip(pad, groups, rooms):
                out += self._folded(cells, widths, g, p, room, r.style)
        return out

    def _records(self, full, first, second, names, width) -> list[tuple[str, str | None]]:
        """One record per row: the head cells, each name whole on lines of its own (folded at its '/'),
        then the other cells, as 'header value' items wrapped to the width."""
        cols = self.columns

        def label(i: int) -> str:
            return cols[i].header or cols[i].key

        out: list[tuple[str, str | None]] = []
        for cells, r in zip(full, self.rows):
            head = [f"#{cells[i]}" if cols[i].key == "index" else f"{label(i)} {cells[i]}" for i in first if i not in names]
            out += [(line, r.style or "bold") for line in _flow(head, width, "", hang=" " * GAP)]
            for i in names:
                out += [(line, r.style) for line in _fold(cells[i], width, " " * GAP, label=f"{label(i)} ")]
            out += [(line, r.style) for line in _flow([f"{label(i)} {cells[i]}" for i in second], width, " " * GAP)]
        return out

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from onnxprobe.report.console import Lines

        yield Lines(self.lines(options.max_width))


def _scalar(v):
    """A numpy scalar as the Python number it holds."""
    return v.item() if type(v).__module__ == "numpy" and hasattr(v, "item") else v


def _raw(v):
    """A JSON row's value: a non-finite float said as "nan", "inf" or "-inf" (``format.json_word``, as the
    reports' --json says a gradient norm or a loss), never dropped to null, which means "none"."""
    return json_word(_scalar(v))


def _csv_value(v, key: str = "") -> str:
    v = _scalar(v)
    if key == "shape" and isinstance(v, (list, tuple)) and not v:  # as the table says it (an empty cell: unknown)
        return "scalar"
    if isinstance(v, (list, tuple)):  # a shape, as the table says it (unknown dims "?", onnx's 'unk__0' too)
        return clean(fmt_shape(v))
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else json_word(v)  # nan, inf, -inf: what csv readers parse as floats
    return clean(v) if isinstance(v, str) else str(v)


class Verbatim(str):
    """Text to write as it is (CSV, Markdown, JSON): front ends print it unwrapped and uncut."""


def column_keys(columns: str | None) -> list[str]:
    """The keys of --columns given comma-separated (a key holds no comma), spaces around each dropped; an
    empty one (``tensor,,max``, ``tensor,``) is refused, as an empty --op type is."""
    if columns is None:
        return []
    keys = [k.strip() for k in columns.split(",")]
    if not all(keys):
        raise setting_error(UsageError, COLUMNS, f"{columns!r}: an empty column key; give keys separated by commas or repeat "
                         "the flag, e.g. index,tensor,min,max")
    return keys


def check_json_stdout(json_path, fmt: str, fmt_given: bool, columns, wide: bool) -> None:
    """``--json -`` writes the whole report to stdout instead of the table: refused beside --format (which
    writes there too) and beside --columns or --wide, which would do nothing."""
    if json_path is None or str(json_path) != "-":
        return
    if fmt != "table" or fmt_given:
        raise UsageError(f"--json - and --format {fmt} both write to stdout: give --json a file" if fmt != "table" else
                         "--format table: --json - writes the whole report to stdout instead of the table: give --json a file")
    if columns or wide:
        flag, what = ("--columns", "chooses the table's columns") if columns else ("--wide", "widens the table")
        raise UsageError(f"{flag} {what}, and --json - writes the whole report instead of the "
                         "table: give --json a file, or --format json for the table's rows as JSON")


def check_view(fmt: str, columns: list[str] | None, known: list[Column] | None = None,
               absent: dict[str, str] | None = None) -> None:
    """Refuse a bad --format, or a --columns key none of ``known`` has, before any work is done
    (``absent``: keys this run's table will not have -> why, e.g. 'comes only with --check')."""
    if fmt not in FORMATS:
        raise setting_error(UsageError, FORMAT, f"{as_word(fmt)}: choose {', '.join(FORMATS)}")
    for k in columns or ():
        if k.strip().lower() in {a.lower() for a in absent or {}}:
            why = next(v for a, v in absent.items() if a.lower() == k.strip().lower())
            raise setting_error(UsageError, COLUMNS, f": column {k.strip()!r} {why}")
    if columns and known is not None:
        names = {c.key.lower() for c in known} | {c.header.lower() for c in known if c.header}
        for k in columns:
            if k.strip().lower() not in names:
                keys = ", ".join(dict.fromkeys(c.key for c in known))
                raise setting_error(UsageError, COLUMNS, f": no column {k.strip()!r}; the columns are {keys}")


def present(items: list, *, wide: bool = False, columns: list[str] | None = None, fmt: str = "table") -> list:
    """A report's renderables as asked: ``columns`` chosen in its main table (the first with ``main``
    set, or the first table), every table ``wide`` or not; for ``fmt`` csv, markdown or json, only the
    main table's rows, as one string."""
    tables = [r for r in items if isinstance(r, Table)]
    main = next((t for t in tables if t.main), tables[0] if tables else None)
    if (columns or fmt != "table") and main is None:
        raise setting_error(UsageError, COLUMNS, ": this report has no table") if columns else \
            setting_error(UsageError, FORMAT, f"{fmt}: this report has no table")
    if columns:
        main.choose(columns)
    for t in tables:
        t.wide = wide
    if fmt != "table":
        return [Verbatim(main.text(fmt))]
    return items
