"""Loading and saving models: external data, clear errors, atomic writes, >2 GB models.

``load_model`` never writes to the file it reads. ``save_model`` writes to a temporary file beside the
destination and renames it, so a crash never leaves half a model behind.
"""

from __future__ import annotations

import os
from pathlib import Path

import onnx

from onnxprobe.errors import ModelError, UsageError, first_line

# protobuf cannot serialise a single message over 2 GiB; stay well below it.
PROTO_LIMIT = 2**31 - 2**26


def load_model(path: str | os.PathLike, *, load_external_data: bool = True) -> onnx.ModelProto:
    """Read an ONNX model (and its external data), or raise a one-line ModelError."""
    p = Path(path)
    if not p.exists():
        raise ModelError(f"{p}: no such file")
    if p.is_dir():
        raise ModelError(f"{p}: is a folder, not an ONNX model file")
    try:
        size = p.stat().st_size
    except OSError as e:  # pragma: no cover - permissions etc.
        raise ModelError(f"{p}: cannot read ({e.strerror})") from e
    if size == 0:
        raise ModelError(f"{p}: file is empty, not an ONNX model")
    try:
        model = onnx.load(str(p), load_external_data=False)
    except Exception as e:  # DecodeError and friends
        raise ModelError(
            f"{p}: not a readable ONNX model (protobuf decoding failed: truncated or not ONNX)"
        ) from e
    if not _looks_like_model(model):
        raise ModelError(f"{p}: not an ONNX model (no graph or IR version in the file)")
    if load_external_data and _has_external_data(model):
        try:
            onnx.external_data_helper.load_external_data_for_model(model, str(p.parent))
        except FileNotFoundError as e:
            raise ModelError(
                f"{p}: external data file missing: {e.filename or e} (keep it beside the model)"
            ) from e
        except Exception as e:
            raise ModelError(f"{p}: cannot load its external data: {first_line(e)}") from e
    return model


def _looks_like_model(model: onnx.ModelProto) -> bool:
    return model.ir_version > 0 and model.HasField("graph") and (
        len(model.graph.node) > 0 or len(model.graph.output) > 0
    )


def _has_external_data(model: onnx.ModelProto) -> bool:
    return any(
        t.data_location == onnx.TensorProto.EXTERNAL
        for t in onnx.external_data_helper._get_all_tensors(model)
    )


def model_size(model: onnx.ModelProto) -> int:
    """Approximate serialised size in bytes, from the initializers' dims (ByteSize() walks every byte:
    75 ms on a 45 MB model)."""
    from onnxprobe.graph.skeleton import weight_bytes

    return weight_bytes(model) + 1_000_000


def is_large(model: onnx.ModelProto) -> bool:
    return model_size(model) >= PROTO_LIMIT


def check_output_path(out: str | os.PathLike, *, source: str | os.PathLike | None = None) -> Path:
    """Validate a path we are asked to write: its folder exists and it is not the user's model."""
    o = Path(out)
    if not o.parent.exists() if str(o.parent) else False:
        raise UsageError(f"{o}: folder {o.parent} does not exist")
    if o.is_dir():
        raise UsageError(f"{o}: is a folder; give a file name")
    if source is not None and o.exists() and Path(source).exists() and o.resolve() == Path(source).resolve():
        raise UsageError(f"{o}: refusing to overwrite the input model; choose another output path")
    return o


def save_model(model: onnx.ModelProto, out: str | os.PathLike, *, external_data: bool | None = None) -> Path:
    """Write ``model`` atomically (graph.external.write_model). Models over 2 GB (or
    ``external_data=True``) get their weights in ``OUT.data`` beside the output file."""
    from onnxprobe.graph.external import write_model

    return write_model(model, out, external=external_data).path
