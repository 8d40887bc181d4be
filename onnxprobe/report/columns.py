"""A report table's column (``report.table``), and the columns of the ``diff`` and ``layers`` reports: what the
command line checks ``--columns`` against before anything runs, without importing the reports' renderer (Rich: 30-50
ms that a repeated command spends while its session builds instead, ``runtime.direct.while_building``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    key: str  # what --columns and the CSV/JSON header call it
    header: str  # what the table shows
    justify: str = "left"  # "left" | "right"
    name: bool = False  # a tensor or node name: shortened to share the width the other columns leave
    head: bool = False  # on the first line when a row takes two lines (name columns always are)
    wrap: bool = False  # long text (the last column only): folds onto more lines instead of being cut
    # the cells leave out what the column of this key shows (a tensor name without its node's name as prefix):
    # when --columns drops that column, the cells show the whole value instead
    beside: str | None = None
    stat: bool = False  # a statistic: a row without values ("not run") says so in the first such column kept


DIFF_COLUMNS = [
    Column("index", "#", "right", head=True), Column("tensor", "tensor", name=True), Column("op", "op", head=True),
    Column("match", "match", head=True), Column("shape", "shape", head=True), Column("max_abs", "max|a-b|", "right"),
    Column("cosine", "cosine", "right"), Column("sqnr_db", "SQNR dB", "right"),
    Column("introduced_sqnr_db", "intro dB", "right"), Column("pass", "pass"),
]
# --profile: the kernel times of A's and of B's producer (report.profile)
DIFF_PROFILE_COLUMNS = [Column("kernel_ms_a", "A ms", "right"), Column("kernel_ms_b", "B ms", "right")]
# CSV and JSON rows only (``Table.data``), last: why a pair was not compared (an empty tensor, shapes that
# differ at run time, an If branch not run), which the table's "n/a" and notes say; blank when compared
DIFF_PROBLEM = Column("problem", "problem")
# and why a pair was measured but not judged (gradients that are rounding noise); blank where judged
UNJUDGED = Column("unjudged", "unjudged")
# the metrics a criterion can judge that the columns above do not show: shown when a pair is judged by one
DIFF_JUDGED_COLUMNS = {"mean_abs": Column("mean_abs", "mean|a-b|", "right"), "rmse": Column("rmse", "RMSE", "right"),
                       "max_rel": Column("max_rel", "max rel", "right")}


LAYERS_COLUMNS = [
    Column("index", "#", "right", head=True), Column("node", "node", name=True), Column("op", "op", head=True),
    Column("tensor", "tensor", name=True, beside="node"), Column("shape", "shape", head=True), Column("dtype", "dtype", head=True),
    Column("min", "min", "right", stat=True), Column("max", "max", "right", stat=True),
    Column("mean", "mean", "right", stat=True), Column("std", "std", "right", stat=True),
    Column("nan", "NaN", "right"), Column("inf", "Inf", "right"),
]
LAYERS_PERCENTILE_COLUMNS = [Column("p0.01", "p0.01", "right"), Column("p99.99", "p99.99", "right")]
LAYERS_PROFILE_COLUMNS = [Column("kernel_ms", "ms", "right")]  # --profile: the producer's kernel time (report.profile)
# CSV and JSON rows only (``Table.data``), last: "ran", "not run", "empty"..., which the table says in its cells
LAYERS_STATUS = Column("status", "status")
