"""The dtype cell of the tables: every element type onnx names gets a cell of its own (float8_e4m3fn and
float8_e4m3fnuz were both cut to "float8_e"), and the common ones stay short."""

from __future__ import annotations

import onnx

from onnxprobe.graph.shapes import dtype_name
from onnxprobe.report.format import dtype


def test_every_element_type_has_a_cell_of_its_own():
    names = {dtype_name(v) for v in onnx.TensorProto.DataType.values()} - {None}
    cells = {n: dtype(n) for n in names}
    assert len(set(cells.values())) == len(cells), cells
    assert dtype("float32") == "f32" and dtype("float8_e4m3fn") == "f8e4m3fn" and dtype("float8_e5m2fnuz") == "f8e5m2fnuz"
    assert all(len(c) <= 10 for c in cells.values()), cells
