"""Pairing the tensors of two models. Every pair records its strategy and reason; every rejected
candidate keeps a reason too. No metrics here."""
