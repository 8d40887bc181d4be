"""Execution: input feeds, onnxruntime sessions, providers and IOBinding. Never prints."""
