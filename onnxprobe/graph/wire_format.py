"""An ONNX model file's protobuf wire format, walked without onnx as far as its weights go: where each weight's bytes
lie (``weight_extents``, for the plan cache's direct mode, ``runtime.direct``), and the file's bytes without its big
inline weights (``without_weights``, for ``graph.io.load_model``'s lazy read). The walk reads the headers, WINDOW
at a time, and skips the weights' bytes, which it never reads.
"""

from __future__ import annotations

WINDOW = 2**16  # the headers are read this much at a time
CHUNK = 2**20  # never more than this at once


class FileBytes:
    """An open file's ``size`` bytes as ``weight_extents`` indexes them (``b[i]``, ``b[a:z]``), read on demand, WINDOW
    (at most ``most``) at a time: the walk reads headers and skips the weights' bytes, which are never read."""

    def __init__(self, f, size: int, most: int = CHUNK):
        self.f, self.size, self.window = f, size, max(1, min(WINDOW, most))
        self.start, self.buf = 0, b""

    def __len__(self) -> int:
        return self.size

    def _read(self, a: int, z: int) -> bytes:
        self.f.seek(a)
        got = self.f.read(z - a)
        if len(got) != z - a:
            raise ValueError("the file is shorter than it was")
        return got

    def __getitem__(self, i):
        if isinstance(i, slice):
            a, z = i.start, min(i.stop, self.size)
            if self.start <= a and z <= self.start + len(self.buf):
                return self.buf[a - self.start:z - self.start]
            return b"".join(self._read(p, min(z, p + self.window)) for p in range(a, z, self.window))
        if not self.start <= i < self.start + len(self.buf):
            if not 0 <= i < self.size:
                raise IndexError(i)
            self.start, self.buf = i, self._read(i, min(self.size, i + self.window))
        return self.buf[i - self.start]


# --- the protobuf wire format, as far as the weights go ---------------------------------------------------------

def _varint(b, i: int) -> tuple[int, int]:
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        if c < 0x80:
            return v, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _fields(b, start: int, end: int):
    """(field number, wire type, value start, value end or the varint) of a message's bytes ``b[start:end]``."""
    i = start
    while i < end:
        key, i = _varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(b, i)
            yield num, wt, v, i
        elif wt == 2:
            n, i = _varint(b, i)
            if i + n > end:
                raise ValueError("field past its message")
            yield num, wt, i, i + n
            i += n
        elif wt == 1:
            i += 8
        elif wt == 5:
            i += 4
        else:  # groups: no ONNX message has any
            raise ValueError("unexpected wire type")
        if i > end:
            raise ValueError("field past its message")


# TensorProto's fields whose bytes in the file are the tensor's own little-endian bytes: raw_data, and float_data
# and double_data packed (fixed-width floats, as proto3 writes a repeated float: Paddle2ONNX's exports store their
# weights so); int32_data and int64_data are varints, whose bytes are not the values'
_DATA_FIELDS = (9, 4, 10)


def _tensor(b, start: int, end: int) -> tuple[str | None, tuple[int, int] | None, bool]:
    """A TensorProto's (name, (offset, length) of its data's bytes: raw_data, or float_data / double_data packed,
    whether its data lie elsewhere: data_location or external_data); data given twice (two such fields, or one
    repeated: protobuf keeps the last, or joins them) is not served. Every extent is checked against the tensor the
    normal path read (``entry``): these are where its bytes may be, never taken on trust."""
    name, raw, elsewhere = None, None, False
    for num, wt, a, z in _fields(b, start, end):
        if num == 8 and wt == 2:
            name = bytes(b[a:z]).decode("utf-8", "surrogateescape")
        elif num in _DATA_FIELDS and wt == 2:
            if raw is not None:
                return name, None, True
            raw = (a, z - a)
        elif (num == 14 and wt == 0 and a != 0) or num == 13:
            elsewhere = True
    return name, raw, elsewhere


def _constant(b, start: int, end: int) -> tuple[str | None, tuple[int, int] | None, bool]:
    """A main-graph Constant node's (first output, its ``value`` tensor's data extent, whether those data lie in
    another file: ``_tensor``), else (None, None, False)."""
    outputs, op, value, elsewhere = [], None, None, False
    for num, wt, a, z in _fields(b, start, end):
        if num == 2 and wt == 2:
            outputs.append(bytes(b[a:z]).decode("utf-8", "surrogateescape"))
        elif num == 4 and wt == 2:
            op = bytes(b[a:z])
        elif num == 5 and wt == 2:
            attr, t = None, None
            for n2, w2, a2, z2 in _fields(b, a, z):
                if n2 == 1 and w2 == 2:
                    attr = bytes(b[a2:z2])
                elif n2 == 5 and w2 == 2:
                    t = (a2, z2)
            if attr == b"value" and t is not None:
                _, value, elsewhere = _tensor(b, *t)
    named = outputs[0] if op == b"Constant" and outputs else None
    return named, (value if named is not None and not elsewhere else None), named is not None and elsewhere


def weight_extents(data) -> dict[str, tuple[int, int]] | None:
    """Name -> (offset, length) in the model file's bytes ``data`` (bytes, or an open file's: ``FileBytes``) of the
    data of every main-graph initializer and main-graph Constant value stored inline (``_DATA_FIELDS``; by its node's
    first output, as ``graph.skeleton`` names its stubs); None where the bytes cannot be walked (no graph, a graph
    given twice) or where a weight of the main graph lies in another file (external data: the model is then more
    than this file's bytes, and an entry that checks only these would serve a run of weights edited since)."""
    b = data if isinstance(data, FileBytes) else memoryview(data)
    try:
        graphs = [(a, z) for num, wt, a, z in _fields(b, 0, len(b)) if num == 7 and wt == 2]
        if len(graphs) != 1:
            return None
        out: dict[str, tuple[int, int]] = {}
        seen: set[str] = set()
        for num, wt, a, z in _fields(b, *graphs[0]):
            if wt != 2 or num not in (1, 5):
                continue
            if num == 1:
                name, raw, elsewhere = _constant(b, a, z)
            else:
                name, raw, elsewhere = _tensor(b, a, z)
            if elsewhere:
                return None
            if name is None:
                continue
            if name in seen:  # two tensors of one name: which one did the model use? not served
                out.pop(name, None)
                continue
            seen.add(name)
            if raw is not None:
                out[name] = raw
        return out
    except (ValueError, IndexError):
        return None


# --- the file's bytes without its big inline weights --------------------------------------------------------------

# a tensor of more values than this is a weight (``graph.skeleton`` stubs it; the lazy read leaves it in its file):
# smaller ones, shapes, axes and scales, shape inference reads
KEEP_ELEMENTS = 4096
_STRING = 8  # TensorProto.STRING


def _spans(b, start: int, end: int):
    """(field number, wire type, the field's first byte, its value's first byte, its end) of ``b[start:end]``'s fields."""
    i = start
    while i < end:
        first = i
        key, i = _varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:  # the value: the varint itself
            value = i
            _, i = _varint(b, i)
        elif wt == 2:
            n, value = _varint(b, i)
            i = value + n
        elif wt in (1, 5):
            value, i = i, i + (8 if wt == 1 else 4)
        else:  # groups: no ONNX message has any
            raise ValueError("unexpected wire type")
        if i > end:
            raise ValueError("field past its message")
        yield num, wt, first, value, i


def _varint_bytes(v: int) -> bytes:
    out = bytearray()
    while True:
        c, v = v & 0x7F, v >> 7
        out.append(c | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _field(num: int, payload: bytes) -> bytes:
    return _varint_bytes(num << 3 | 2) + _varint_bytes(len(payload)) + payload


def _weight(b, spans) -> bool:
    """Whether a TensorProto's fields ``spans`` give it more than KEEP_ELEMENTS values (its dims: field 1, packed or
    not) and a type other than STRING (field 2)."""
    dims, kind = [], 0
    for num, wt, _, value, end in spans:
        if num == 1 and wt == 0:
            dims.append(_varint(b, value)[0])
        elif num == 1 and wt == 2:
            i = value
            while i < end:
                d, i = _varint(b, i)
                dims.append(d)
        elif num == 2 and wt == 0:
            kind = _varint(b, value)[0]
    count = 1
    for d in dims:
        count *= d if d < 2**63 else 0  # a negative dim (two's complement): no weight
    return kind != _STRING and count > KEEP_ELEMENTS


def without_weights(b) -> tuple[bytes, list[tuple[int, int, int]]] | None:
    """The model file's bytes ``b`` (``FileBytes``) with the raw_data of each main-graph initializer of STRIP bytes or
    more left out, and where each left-out raw_data lies: (the initializer's index in the graph, offset, length). An
    initializer whose data are given twice or lie in another file is kept whole (``_tensor``'s rules). None where the
    bytes cannot be walked so (no graph, a graph given twice) or nothing is left out: the caller reads the file."""
    try:
        top = list(_spans(b, 0, len(b)))
        graphs = [s for s in top if s[0] == 7 and s[1] == 2]
        if len(graphs) != 1:
            return None
        graph, left, k = bytearray(), [], 0
        for num, wt, first, value, end in _spans(b, graphs[0][3], graphs[0][4]):
            whole = True
            if num == 5 and wt == 2:
                _, raw, elsewhere = _tensor(b, value, end)
                if raw is not None and not elsewhere and raw[1] > KEEP_ELEMENTS // 2:  # (4-bit values: two a byte)
                    spans = list(_spans(b, value, end))
                    # its data one raw_data field, more values than KEEP_ELEMENTS, not strings
                    if [s[3] for s in spans if s[:2] == (9, 2)] == [raw[0]] and _weight(b, spans):
                        graph += _field(5, b"".join(b[f:e] for n, w, f, _, e in spans if (n, w) != (9, 2)))
                        left.append((k, raw[0], raw[1]))
                        whole = False
                k += 1
            if whole:
                graph += b[first:end]
        if not left:
            return None
        out = bytearray()
        for num, wt, first, value, end in top:
            out += _field(7, bytes(graph)) if (num, wt, first) == graphs[0][:3] else b[first:end]
        return bytes(out), left
    except (ValueError, IndexError):
        return None
