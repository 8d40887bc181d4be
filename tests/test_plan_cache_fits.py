"""``plan_cache._fits``: a probe read back from an entry's JSON is used only when each of its fields is of the
type ``store`` wrote and each output it names is one of the entry's graph's (a damaged or edited entry is a
miss). Each field a wrong type, one at a time."""

from __future__ import annotations

from dataclasses import replace

import pytest

from onnxprobe.runtime.plan_cache import _fits
from onnxprobe.types import Probe, TensorRef

OUTPUTS = {"s", "sh", "raw", "ext", "sums"}
REF = TensorRef(name="t", node="n", op_type="Conv", index=3, scope=("loop/body",), dtype="float32", shape=(1, "b", None))
GOOD = Probe(ref=REF, stats_output="s", stats_sums="sums", stats_block=1024, shape_output="sh", exact_extremes="ext",
             raw_output="raw", stats_on_host=False, raw_for_stats=True, raw_scalar=False)


def test_a_probe_store_wrote_fits():
    assert _fits(GOOD, OUTPUTS)
    assert _fits(replace(GOOD, stats_extras=False), OUTPUTS)
    assert _fits(Probe(ref=replace(REF, scope=(), dtype=None, shape=None, grad_of="x")), set())


@pytest.mark.parametrize("probe", [
    replace(GOOD, stats_output="nosuch"), replace(GOOD, raw_output=5), replace(GOOD, exact_extremes=["ext"]),
    replace(GOOD, stats_block=True), replace(GOOD, stats_block=-1), replace(GOOD, stats_block=1.0),
    replace(GOOD, stats_on_host=0), replace(GOOD, raw_scalar="no"), replace(GOOD, ref=replace(REF, is_output=1)),
    replace(GOOD, stats_extras=0), replace(GOOD, stats_extras="false"), replace(GOOD, stats_extras=None),
    replace(GOOD, ref=replace(REF, name=3)), replace(GOOD, ref=replace(REF, kind=None)),
    replace(GOOD, ref=replace(REF, scope=("a", 3))), replace(GOOD, ref=replace(REF, index="3")),
    replace(GOOD, ref=replace(REF, dtype=5)), replace(GOOD, ref=replace(REF, grad_of=1)),
    replace(GOOD, ref=replace(REF, shape=(1, 1.5))),
], ids=lambda p: "")
def test_a_field_of_another_type_does_not_fit(probe):
    assert not _fits(probe, OUTPUTS)
