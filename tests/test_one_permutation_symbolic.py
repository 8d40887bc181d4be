"""A dynamic-batch dynamo export declares an LSTM's output [seq, 'batch', hidden]: torch's [batch, seq, hidden] was
"another shape, and no single transposition of torch's gives it", and the LSTM went unpaired. A symbolic dimension
takes any size, the same one wherever the symbol stands."""

from __future__ import annotations

from onnxprobe.torch.module_outputs import one_permutation


def test_a_symbolic_dimension_takes_the_size_torch_gives_it():
    assert one_permutation((2, 4, 7), (4, "batch", 7)) == (1, 0, 2)
    assert one_permutation((2, 4, 7), (4, None, 7)) == (1, 0, 2)
    assert one_permutation((2, 4, 7), (4, 2, 7)) == (1, 0, 2)  # static, as before
    assert one_permutation((2, 4, 7), ("s", "s", 7)) is None  # one symbol, two sizes
    assert one_permutation((3, 3, 7), ("a", "b", 7)) is None  # two ways: which is which is unknown
    assert one_permutation((2, 4, 7), (4, 7, 9)) is None
