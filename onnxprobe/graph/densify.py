"""``dense_weights(model)``: a copy of ``model`` whose sparse weights are dense, for a runtime that reads none.

A sparse initializer, and a Constant node's ``sparse_value``, hold the same values to every node that reads
them as the dense tensor they stand for (onnxruntime densifies them at load). ``onnx.reference`` cannot load a
model holding one ("SparseTensorProto has no data_location field"): its copy has them as dense initializers and
Constant ``value`` attributes, of the same names, in the main graph, in every model-local function and in every
If / Loop / Scan body of either. Any data type onnx reads (bfloat16, float8, int4 ... through ml_dtypes) keeps
its type: the values are placed without converting them.

Contract: ``model`` is left as it was (a model without sparse weights is returned as it is, no copy); the
values are the sparse ones placed at their indices (linear [NNZ] or coordinates [NNZ, rank]), zeros elsewhere.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from onnxprobe.graph.tensor_data import tensor_values
from onnxprobe.graph.walk import all_graphs, subgraphs


def dense_array(s: onnx.SparseTensorProto) -> np.ndarray:
    """The dense values a sparse tensor stands for."""
    values = tensor_values(s.values).reshape(-1)
    dims = tuple(int(d) for d in s.dims)
    out = np.zeros(dims, values.dtype)
    if values.size:
        idx = tensor_values(s.indices).astype(np.int64)
        if idx.ndim == 2:  # coordinates, one row per value
            out[tuple(idx.T)] = values
        else:  # positions in the flattened tensor
            out.reshape(-1)[idx.reshape(-1)] = values
    return out


def dense_tensor(s: onnx.SparseTensorProto) -> onnx.TensorProto:
    """``s`` as a dense TensorProto of its name (its values' name)."""
    return numpy_helper.from_array(dense_array(s), s.values.name)


def _node_lists(model: onnx.ModelProto):
    """Each graph of ``model`` (main graph, bodies) and each model-local function: what holds nodes."""
    yield from all_graphs(model.graph)
    for f in model.functions:
        yield f
        for n in f.node:
            for _, sg in subgraphs(n):
                yield from all_graphs(sg)


def _sparse_constant(n: onnx.NodeProto) -> bool:
    return n.op_type == "Constant" and n.domain in ("", "ai.onnx") and any(a.name == "sparse_value" for a in n.attribute)


def _has_sparse(model: onnx.ModelProto) -> bool:
    return any(isinstance(x, onnx.GraphProto) and len(x.sparse_initializer) or any(_sparse_constant(n) for n in x.node)
               for x in _node_lists(model))


def dense_weights(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` with every sparse initializer a dense initializer and every Constant's
    ``sparse_value`` a ``value``, in its graphs and its model-local functions (``model`` itself where it
    holds neither)."""
    if not _has_sparse(model):
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for g in _node_lists(out):
        if isinstance(g, onnx.GraphProto):
            g.initializer.extend(dense_tensor(s) for s in g.sparse_initializer)
            del g.sparse_initializer[:]
        for n in g.node:
            if not _sparse_constant(n):
                continue
            for k, a in enumerate(n.attribute):
                if a.name == "sparse_value":
                    n.attribute[k].CopyFrom(onnx.helper.make_attribute("value", dense_tensor(a.sparse_tensor)))
    return out
