"""Graph surgery on ONNX models: loading, shape inference, selection, exposing tensors. Never executes."""
