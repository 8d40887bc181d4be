"""--fp32-sensitivity where the output has no SQNR (NaN/Inf where B has numbers): the lines read 'SQNR nan dB as
quantized' and '(+nan)' gains; they say the output is not measurable and that there is no gain to measure."""

from __future__ import annotations

from onnxprobe.report.diff import sensitivity_lines


def test_an_output_without_sqnr_is_said_in_words():
    rows = [{"layer": "relu2_out", "op_type": "Conv", "introduced_sqnr_db": 1.48, "output": "logits",
             "output_sqnr_db": "nan", "output_sqnr_db_fp32_layer": "nan", "gain_db": "nan"}]
    text = "\n".join(t.plain for t in sensitivity_lines(rows, 100))
    assert "not measurable as quantized" in text and "no gain measurable" in text and "+nan" not in text, text
    rows = [dict(rows[0], output_sqnr_db=20.0, output_sqnr_db_fp32_layer=26.5, gain_db=6.5)]
    text = "\n".join(t.plain for t in sensitivity_lines(rows, 100))
    assert "20 dB as quantized" in text and "(+6.50)" in text, text
