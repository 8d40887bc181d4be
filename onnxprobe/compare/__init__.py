"""Comparing two sides (two models, two devices, two optimisation levels, onnxruntime against the
reference evaluator, or a model against saved activations): values, pairs, metrics, introduced error."""
