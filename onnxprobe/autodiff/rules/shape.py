"""Shape and data movement: each gradient moves dy back to where the values came from (summing when one
value went to several places)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, numpy_helper

from onnxprobe.autodiff.registry import rule


def shape_of(g, t: str) -> str:
    dims = g.static_dims(t)
    return g.ints(dims) if dims is not None else g.Shape(t)


def _zero_value(g):
    return numpy_helper.from_array(np.zeros([1], g.dtype))


@rule("Reshape", "Flatten", "Squeeze", "Unsqueeze")
def reshape(g):
    """y = x with another shape (Reshape, Flatten, Squeeze, Unsqueeze)  ->  dx = reshape(dy, shape(x))"""
    return [g.Reshape(g.dy, shape_of(g, g.x[0]))]


@rule("Transpose")
def transpose(g):
    """y = transpose(x, perm)  ->  dx = transpose(dy, inverse(perm))"""
    perm = g.attr("perm")
    if not perm:
        perm = list(range(g.rank(g.x[0])))[::-1]
    return [g.Transpose(g.dy, perm=[int(i) for i in np.argsort(perm)])]


@rule("Concat", inputs=None)
def concat(g):
    """y = concat(x_1, ..., x_n, axis)  ->  dx_i = dy[..., offset_i : offset_i + len_i, ...] (one Split when
    the lengths are static)"""
    r = g.rank(g.x[0])
    a = g.attr("axis")
    a = a + r if a < 0 else a
    lens = []
    for x in g.x:
        s = g.sshape(x)
        lens.append(s[a] if s is not None and isinstance(s[a], int) else None)
    if all(v is not None for v in lens):
        if sum(1 for i in range(len(g.x)) if g.wants(i)) > 1 or len(g.x) == 1:
            parts = g.split(g.dy, a, lens, len(lens))
            return [p if g.wants(i) else None for i, p in enumerate(parts)]
        off = 0
        out = []
        for i, n in enumerate(lens):
            out.append(g.slice(g.dy, [off], [off + n], [a]) if g.wants(i) else None)
            off += n
        return out
    out, off = [], g.ints([0])
    for i, x in enumerate(g.x):
        n = g.ints([lens[i]]) if lens[i] is not None else g.shape(x, a, a + 1)
        end = g.Add(off, n)
        out.append(g.slice(g.dy, off, end, [a]) if g.wants(i) else None)
        off = end
    return out


@rule("Split")
def split(g):
    """y_1, ..., y_n = split(x, axis)  ->  dx = concat(dy_1, ..., dy_n, axis), zeros for unused outputs"""
    parts = [d if d is not None else g.zeros_like(y) for d, y in zip(g.dys, g.y) if y]
    a = g.attr("axis", 0)
    return [parts[0] if len(parts) == 1 else g.Concat(*parts, axis=a)]


def _slice_args(g):
    """starts, ends, axes, steps as lists when constant (axes normalised), else None."""
    r = g.rank(g.x[0])
    if g.opset < 10:
        starts, ends = list(g.attr("starts")), list(g.attr("ends"))
        axes = list(g.attr("axes") or range(len(starts)))
        steps = [1] * len(starts)
    else:
        starts, ends = g.ints_input(1), g.ints_input(2)
        axes = g.ints_input(3) if g.has(3) else (list(range(len(starts))) if starts is not None else None)
        steps = g.ints_input(4) if g.has(4) else ([1] * len(starts) if starts is not None else None)
        if None in (starts, ends, axes, steps):
            return None
    return starts, ends, [a + r if a < 0 else a for a in axes], steps


def _index_scatter(g, picked_idx: str, updates: str, reduction: str | None = None) -> str:
    """dx = zeros(size(x)) with ``updates`` added at the flat indices ``picked_idx``, reshaped to x."""
    x = g.x[0]
    zeros = g.ConstantOfShape(g.Reshape(g.Size(x), g.ints([1])), value=_zero_value(g))
    dx = g.ScatterElements(zeros, g.flat(picked_idx), g.flat(updates), axis=0, reduction=reduction)
    return g.Reshape(dx, g.Shape(x))


def _flat_index(g) -> str:
    """An int64 tensor shaped like x that holds each element's flat index."""
    x = g.x[0]
    n = g.Cast(g.Size(x), to=TensorProto.INT64)
    return g.Reshape(g.Range(g.const(np.array(0, np.int64)), n, g.const(np.array(1, np.int64))), g.Shape(x))


@rule("Slice")
def slice_(g):
    """y = x[starts:ends:steps] on axes  ->  dx = zeros with dy written back at the sliced positions:
    a zero Pad when the steps are 1 and the bounds are known, else a scatter at the slice of an index grid"""
    x, y = g.x[0], g.y[0]
    r = g.rank(x)
    args = _slice_args(g)
    xs = g.sshape(x)
    if args is not None:
        starts, ends, axes, steps = args
        if all(s == 1 for s in steps):
            begins = [0] * r
            ok = True
            for st, ax in zip(starts, axes):
                dim = xs[ax] if xs is not None else None
                if st >= 0:
                    begins[ax] = min(st, dim) if isinstance(dim, int) else st
                elif isinstance(dim, int):
                    begins[ax] = max(st + dim, 0)
                else:
                    ok = False
            xd, yd = g.static_dims(x), g.static_dims(y)
            if ok and xd is not None and yd is not None:
                pads = begins + [a - b - c for a, b, c in zip(xd, begins, yd)]
                return [g.pad(g.dy, pads)]
            if ok and g.opset >= 11:
                b = g.ints(begins)
                pads = g.Concat(b, g.Sub(g.Sub(g.Shape(x), b), g.Shape(y)), axis=0)
                return [g.pad(g.dy, pads)]
    if g.opset < 11:
        raise g.needs_opset(11, "this Slice")
    ins = [g.x[i] if g.has(i) else None for i in range(1, 5)]
    picked = g.Slice(_flat_index(g), *ins)
    return [_index_scatter(g, picked, g.dy)]


def _gather_perm(r: int, axis: int, ri: int):
    """Permutation of dy (rank r - 1 + ri) that brings the index axes to the front, and of data that
    brings ``axis`` to the front."""
    dyp = list(range(axis, axis + ri)) + list(range(axis)) + list(range(axis + ri, r - 1 + ri))
    dp = [axis] + list(range(axis)) + list(range(axis + 1, r))
    return dyp, dp


@rule("Gather")
def gather(g):
    """y = take(x, idx, axis)  ->  dx = zeros with dy added at the gathered rows (repeated indices add
    up): ScatterND with reduction='add' (opset >= 16), else onehot(idx)^T @ dy"""
    x, idx = g.x[0], g.x[1]
    r = g.rank(x)
    ri = g.rank(idx)
    a = g.attr("axis", 0)
    a = a + r if a < 0 else a
    dyp, dp = _gather_perm(r, a, ri)
    inv = [int(i) for i in np.argsort(dp)]
    dy = g.Transpose(g.dy, perm=dyp) if dyp != sorted(dyp) else g.dy
    ii = idx if g.engine.elem(idx) == TensorProto.INT64 else g.Cast(idx, to=TensorProto.INT64)
    dim = g.shape(x, a, a + 1)
    if g.opset >= 16:
        # dim as a scalar: a scalar index (Gather dropping the axis) must stay a scalar
        ii = g.Where(g.Less(ii, g.const(np.array(0, np.int64))), g.Add(ii, g.squeeze(dim, [0])), ii)
        xshape = g.Shape(x)
        tshape = xshape if a == 0 else g.Gather(xshape, g.ints(dp), axis=0)
        zeros = g.ConstantOfShape(tshape, value=_zero_value(g))
        dxt = g.ScatterND(zeros, g.unsqueeze(ii, [-1]), dy, reduction="add")
    else:
        onehot = g.OneHot(g.flat(ii), dim, g.const(np.array([0, 1], g.dtype)), axis=-1)  # (I, D)
        n_idx = g.Reshape(g.Size(ii), g.ints([1]))
        dy2 = g.Reshape(dy, g.Concat(n_idx, g.ints([-1]), axis=0))  # (I, rest)
        dx2 = g.MatMul(g.Transpose(onehot, perm=[1, 0]), dy2)  # (D, rest)
        xshape = g.Shape(x)
        tshape = xshape if a == 0 else g.Gather(xshape, g.ints(dp), axis=0)
        dxt = g.Reshape(dx2, tshape)
    return [dxt if a == 0 else g.Transpose(dxt, perm=inv)]


@rule("OneHot", inputs=(2,))
def onehot(g):
    """y = values[1] where onehot(indices, depth), else values[0]: linear in values (label smoothing writes
    OneHot(labels, K, [eps / K, 1 - eps]))  ->  dvalues = [sum(dy) - sum(dy * mask), sum(dy * mask)], the mask
    OneHot itself makes of the indices (negative ones wrapped, those out of range hot nowhere)"""
    mask = g.OneHot(g.x[0], g.x[1], g.const(np.array([0, 1], g.dtype)), axis=g.attr("axis", -1))
    hot = g.reduce_sum(g.flat(g.Mul(g.dy, mask)), [0], keepdims=1)
    return {2: g.Concat(g.Sub(g.reduce_sum(g.flat(g.dy), [0], keepdims=1), hot), hot, axis=0)}


@rule("Range", inputs=(0, 2))
def arange(g):
    """y[i] = start + i * delta  ->  dstart = sum(dy), ddelta = sum(i * dy); limit only sets how many there are
    (piecewise constant: no gradient)"""
    i = g.Cast(g.Range(g.const(np.array(0, np.int64)), g.Size(g.dy), g.const(np.array(1, np.int64))), to=g.elem)
    return {0: g.reduce_sum(g.dy, [0], keepdims=0), 2: g.reduce_sum(g.Mul(i, g.dy), [0], keepdims=0)}


@rule("GatherElements")
def gather_elements(g):
    """y[i][j] = x[idx[i][j]][j] (axis 0, and likewise for other axes)  ->  dx = zeros with dy added
    at the gathered positions (ScatterElements with reduction='add', opset >= 16)"""
    x, idx = g.x[0], g.x[1]
    if g.opset < 16:
        raise g.needs_opset(16, "GatherElements (a scatter-add)")
    a = g.attr("axis", 0)
    r = g.rank(x)
    a = a + r if a < 0 else a
    ii = idx if g.engine.elem(idx) == TensorProto.INT64 else g.Cast(idx, to=TensorProto.INT64)
    ii = g.Where(g.Less(ii, g.const(np.array(0, np.int64))), g.Add(ii, g.shape(x, a, a + 1)), ii)
    zeros = g.ConstantOfShape(g.Shape(x), value=_zero_value(g))
    return [g.ScatterElements(zeros, ii, g.dy, axis=a, reduction="add")]


@rule("Expand", broadcast=(0,))
def expand(g):
    """y = broadcast(x, shape)  ->  dx = dy summed over the broadcast axes (by the engine)"""
    return [g.dy]


@rule("Tile")
def tile(g):
    """y = tile(x, repeats): y has shape (r_0 d_0, r_1 d_1, ...)  ->  reshape dy to (r_0, d_0, r_1, d_1, ...)
    and sum over the r axes"""
    x, reps = g.x[0], g.x[1]
    r = g.rank(x)
    inter = g.Reshape(g.Concat(g.unsqueeze(reps, [1]), g.unsqueeze(g.Shape(x), [1]), axis=1), g.ints([-1]))
    return [g.reduce_sum(g.Reshape(g.dy, inter), [2 * i for i in range(r)], keepdims=0)]


@rule("Pad")
def pad(g):
    """y = pad(x, pads, mode)  ->  constant mode, pads >= 0: dx = dy[begin : begin + shape(x)];
    reflect / edge / wrap or negative pads: every y value comes from one x value (a padded index grid
    tells which), and dx adds them up there (scatter-add, opset >= 16)"""
    x = g.x[0]
    r = g.rank(x)
    mode = g.attr("mode", "constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if g.opset < 11:
        pads = list(g.attr("pads"))
        axes = list(range(r))
        pads_t = None
    else:
        pads = g.ints_input(1)
        axes = g.ints_input(3) if g.has(3) else list(range(r))
        if axes is None:
            raise g.fail("Pad with runtime axes is not supported")
        axes = [a + r if a < 0 else a for a in axes]
        pads_t = g.x[1]
    k = len(axes)
    nonneg = pads is not None and all(p >= 0 for p in pads)
    if mode == "constant" and (nonneg or pads is None):
        if pads is not None:
            begins = pads[:k]
            starts = g.ints(begins)
        else:
            starts = g.slice(pads_t, [0], [k], [0])
        xd = g.static_dims(x)
        if pads is not None and xd is not None:
            return [g.slice(g.dy, begins, [b + xd[a] for b, a in zip(begins, axes)], axes)]
        ends = g.Add(starts, g.Shape(x) if axes == list(range(r)) else g.Gather(g.Shape(x), g.ints(axes), axis=0))
        return [g.slice(g.dy, starts, ends, axes)]
    if g.opset < 16:
        raise g.needs_opset(16, f"Pad mode={mode} (or negative pads)")
    ins = [g.x[i] if g.has(i) else None for i in range(1, 4)]
    ins[1] = g.const(np.array(-1, np.int64)) if mode == "constant" else None
    picked = g.Pad(_flat_index(g), *ins, mode=mode)
    keep = g.GreaterOrEqual(picked, g.const(np.array(0, np.int64)))
    upd = g.Where(keep, g.dy, g.scalar(0.0))
    where = g.Where(keep, picked, g.const(np.array(0, np.int64)))
    return [_index_scatter(g, where, upd, reduction="add")]


def _resize_inputs(g):
    """(scales values or None, sizes values or None) as numpy arrays, from constants."""
    if g.node.op_type == "Upsample" and g.attr("scales") is not None:  # opset 7 and 8: an attribute
        return np.array(g.attr("scales"), np.float32), None
    if g.opset < 11 or g.node.op_type == "Upsample":
        return g.value(g.x[1]), None
    sc = g.value(g.x[2]) if g.has(2) else None
    sz = g.value(g.x[3]) if g.has(3) else None
    if sc is not None and sc.size == 0:
        sc = None
    return sc, sz


def _shape_ints(g, t: str, depth: int = 0) -> list | None:
    """The values of a 1-D integer tensor computed from shapes and constants (Shape, Slice / Gather of it at
    constant indices, Concat, Unsqueeze, Squeeze, Cast, Identity): ints, and (tensor, axis) for a dimension
    of a tensor; None for anything else."""
    v = g.value(t)
    if v is not None:
        return [int(a) for a in np.asarray(v).reshape(-1)]
    n = next((n for n in g.engine.graph.node if t in n.output), None) if depth < 12 else None
    if n is None or n.domain not in ("", "ai.onnx"):
        return None
    if n.op_type == "Shape":
        r = g.sshape(n.input[0])
        dims = None if r is None else [(n.input[0], a) for a in range(len(r))]
        span = {a.name: a.i for a in n.attribute if a.name in ("start", "end")}
        return None if dims is None else dims[span.get("start"):span.get("end")]
    if n.op_type in ("Cast", "Identity", "Unsqueeze", "Squeeze"):
        return _shape_ints(g, n.input[0], depth + 1)
    if n.op_type == "Concat":
        parts = [_shape_ints(g, i, depth + 1) for i in n.input]
        return None if any(p is None for p in parts) else [d for p in parts for d in p]
    base = _shape_ints(g, n.input[0], depth + 1) if n.input else None
    idx = [g.value(i) if i else None for i in n.input[1:]]
    if base is None or any(i is None for i in idx[:1]):
        return None
    if n.op_type == "Gather" and not any(a.name == "axis" and a.i != 0 for a in n.attribute):
        return [base[int(i)] for i in np.asarray(idx[0]).reshape(-1)]
    if n.op_type == "Slice" and len(idx) >= 2 and idx[1] is not None and all(i is None or np.asarray(i).size == 1 for i in idx):
        if len(idx) > 2 and idx[2] is not None and int(np.asarray(idx[2]).reshape(-1)[0]) != 0:
            return None
        step = int(np.asarray(idx[3]).reshape(-1)[0]) if len(idx) > 3 and idx[3] is not None else 1
        start, end = (int(np.asarray(i).reshape(-1)[0]) for i in idx[:2])
        return base[start:end:step]
    return None


def _sizes_from_output(g, axes: list[int]) -> np.ndarray | None:
    """Sizes computed in the graph (torch's legacy export of ``F.interpolate(x, size=...)``: the batch and
    channels sliced from Shape(x), then the constant sizes): each a constant, a dimension of x itself (not
    resized: -1, whatever its size), or else the output's size along that axis where shape inference or
    the run tells it. None where one is unknown."""
    x = g.x[0]
    xs, ys = g.sshape(x), g.sshape(g.y[0])
    sym = _shape_ints(g, g.x[3])
    if sym is not None and len(sym) != len(axes):
        sym = None
    out = []
    for j, a in enumerate(axes):
        d = sym[j] if sym is not None else None
        if isinstance(d, tuple) and d == (x, a):
            out.append(-1)
        elif isinstance(d, tuple) and g.sshape(d[0]) is not None and isinstance(g.sshape(d[0])[d[1]], int):
            out.append(g.sshape(d[0])[d[1]])
        elif isinstance(d, int):
            out.append(d)
        elif ys is not None and xs is not None and len(ys) == len(xs) and isinstance(ys[a], int):
            out.append(ys[a])
        else:
            return None
    return np.array(out, np.int64)


@rule("Resize", "Upsample")
def resize(g):
    """y = resize(x): separable along each resized axis a, y = M_a x there, with M_a (out_a x in_a) the
    interpolation matrix (nearest or linear, any coordinate transformation)  ->  dx = M_a^T dy along each
    axis. M_a is built by resizing an identity matrix with the node's own op and attributes (Upsample,
    opset 7 to 9, is Resize with asymmetric coordinates)."""
    x = g.x[0]
    r = g.rank(x)
    mode = g.attr("mode", "nearest")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    ctm = g.attr("coordinate_transformation_mode", "half_pixel")
    ctm = ctm.decode() if isinstance(ctm, bytes) else ctm
    if ctm == "tf_crop_and_resize":
        raise g.fail("coordinate_transformation_mode=tf_crop_and_resize is not supported")
    kar = g.attr("keep_aspect_ratio_policy", "stretch")
    kar = kar.decode() if isinstance(kar, bytes) else kar
    if kar != "stretch":
        raise g.fail(f"keep_aspect_ratio_policy={kar} is not supported")
    node_axes = g.attr("axes")
    node_axes = [a + r if a < 0 else a for a in node_axes] if node_axes else list(range(r))
    scales, sizes = _resize_inputs(g)
    xs = g.sshape(x)
    if scales is None and sizes is None and g.opset >= 11 and g.node.op_type == "Resize" and g.has(3):
        sizes = _sizes_from_output(g, node_axes)
    resized = []
    for j, a in enumerate(node_axes):
        if scales is not None:
            if float(scales.reshape(-1)[j]) != 1.0:
                resized.append((a, float(scales.reshape(-1)[j]), None))
        elif sizes is not None:
            n = int(sizes.reshape(-1)[j])
            if not (n == -1 or xs is not None and xs[a] == n):
                resized.append((a, None, n))
        else:
            raise g.fail("Resize with runtime scales/sizes is not supported")
    attrs = {k: g.attr(k) for k in ("mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a",
                                    "exclude_outside", "extrapolation_value", "antialias")
             if g.attr(k) is not None}
    d = g.dy
    for a, s, n in resized:
        b = 0 if a != 0 else 1
        in_a = g.shape(x, a, a + 1)
        eye = g.EyeLike(g.ConstantOfShape(g.Concat(in_a, in_a, axis=0), value=_zero_value(g)))
        eshape = [g.ints([1])] * r
        eshape[a] = in_a
        eshape[b] = in_a
        e = g.Reshape(eye, g.Concat(*eshape, axis=0))  # basis index along b, values along a
        if g.node.op_type == "Upsample":
            sc = [s if q == a else 1.0 for q in range(r)]
            m = g.Upsample(e, g.const(np.array(sc, np.float32)), **attrs)  # opset 9 (7, 8: converted to 17)
        elif g.opset >= 18:
            ax = sorted([a, b])
            if s is not None:
                m = g.Resize(e, None, g.const(np.array([s if q == a else 1.0 for q in ax], np.float32)), axes=ax, **attrs)
            else:
                m = g.Resize(e, None, None, g.Concat(*[g.ints([n]) if q == a else in_a for q in ax], axis=0), axes=ax, **attrs)
        else:
            roi = g.const(np.array([], np.float32)) if g.opset >= 11 else None
            if s is not None:
                sc = g.const(np.array([s if q == a else 1.0 for q in range(r)], np.float32))
                m = g.Resize(e, roi, sc, **attrs) if g.opset >= 11 else g.Resize(e, sc, **attrs)
            else:
                dims = [g.ints([1])] * r
                dims[a] = g.ints([n])
                dims[b] = in_a
                m = g.Resize(e, roi, g.const(np.array([], np.float32)), g.Concat(*dims, axis=0), **attrs)
        # m holds the basis index i along b and the output position o along a; wt[i, o] = weight of x[i] in y[o]
        if b < a:
            wt = g.Reshape(m, g.Concat(in_a, g.ints([-1]), axis=0))
        else:
            wt = g.Transpose(g.Reshape(m, g.Concat(g.ints([-1]), in_a, axis=0)), perm=[1, 0])
        if a == r - 1:
            d = g.MatMul(d, g.Transpose(wt, perm=[1, 0]))
        elif a == r - 2:
            d = g.MatMul(wt, d)
        else:
            perm = [q for q in range(r) if q != a] + [a]
            t = g.MatMul(g.Transpose(d, perm=perm), g.Transpose(wt, perm=[1, 0]))
            d = g.Transpose(t, perm=[int(i) for i in np.argsort(perm)])
    return [d]


@rule("CenterCropPad")
def center_crop_pad(g):
    """y = x cropped or zero-padded about its centre to ``shape`` on ``axes`` (opset 18; on each axis
    both take the window that starts (n - m) // 2 into the larger of n (x's size) and m (y's))  ->
    dx = CenterCropPad(dy, x's sizes on those axes): a crop's adjoint is the pad with the same offsets,
    and a pad's the crop"""
    axes = g.attr("axes")
    size = g.Shape(g.x[0]) if axes is None else g.Gather(g.Shape(g.x[0]), g.ints(list(axes)), axis=0)
    return [g.CenterCropPad(g.dy, size, axes=None if axes is None else list(axes))]
