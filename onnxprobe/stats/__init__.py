"""Tensor statistics and comparison metrics: pure numpy, no knowledge of graphs."""
