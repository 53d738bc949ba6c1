"""The ONNX forms of graphc ops that are more than one ONNX op (see writer.py), one
function per op or family, each its op's "onnx" rule (ops that are one: direct.py)."""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ir.graph import Node
from graphc.ir.types import is_float, is_half, is_symbol
from graphc.onnx.importer import OnnxError, onnx_elem_type
from graphc.onnx.writer import Writer, computed, exporter
from graphc.ops.indexing import _expand_ellipsis, parse_index

INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)


@exporter("ne")
def _ne(w: Writer, node: Node, ins: list[str]) -> list[str]:
    return [w.one("Not", [w.one("Equal", computed(w, node, ins))])]


@exporter("sigmoid")
def _sigmoid(w: Writer, node: Node, ins: list[str]) -> list[str]:
    return [_logistic(w, computed(w, node, ins)[0], node.type.dtype)]


def _logistic(w: Writer, x: str, dtype: Any) -> str:
    """Sigmoid; in float64 written out as graphc computes it (e = exp(-|x|), then 1/(1+e)
    for x >= 0 and e/(1+e) below), since onnxruntime's float64 Sigmoid is accurate
    to float32 only and flushes results below about 1e-16 to 0."""
    if dtype != np.float64:
        return w.one("Sigmoid", [x])
    e = w.one("Exp", [w.one("Neg", [w.one("Abs", [x])])])
    one = w.const(np.asarray(1.0, dtype))
    upper = w.one("GreaterOrEqual", [x, w.const(np.asarray(0.0, dtype))])
    numerator = w.one("Where", [upper, one, e])
    return w.one("Div", [numerator, w.one("Add", [e, one])])


@exporter("gelu")
def _gelu(w: Writer, node: Node, ins: list[str]) -> list[str]:
    dtype = node.type.dtype
    return [_gelu_form(w, w.cast(ins[0], node.inputs[0].type.dtype, dtype), dtype)]


def _gelu_form(w: Writer, x: str, dtype: Any) -> str:
    # onnxruntime's float64 Gelu is accurate to about float32 (5e-9 off at 1): float64
    # is written as graphc computes it at every opset
    if w.opset >= 20 and dtype != np.float64:
        return w.one("Gelu", [x], approximate="tanh")
    cube = w.one("Mul", [w.one("Mul", [x, x]), x])
    inner = w.one("Add", [x, w.one("Mul", [cube, w.const(np.asarray(0.044715, dtype))])])
    t = w.one("Tanh", [w.one("Mul", [inner, w.const(np.asarray(np.sqrt(2 / np.pi), dtype))])])
    half = w.one("Mul", [x, w.const(np.asarray(0.5, dtype))])
    return w.one("Mul", [half, w.one("Add", [t, w.const(np.asarray(1.0, dtype))])])


@exporter("cast")
def _cast(w: Writer, node: Node, ins: list[str]) -> list[str]:
    return [w.one("Cast", ins, to=onnx_elem_type(node.attrs["dtype"]))]


def _axes(w: Writer, node: Node, axis: Any) -> list[int] | None:
    if axis is None:
        return None
    return [int(a) for a in (axis if isinstance(axis, tuple) else (axis,))]


def _reduce(op_type: str, axes_input_from: int) -> Any:
    def run(w: Writer, node: Node, ins: list[str], dtype: Any = None) -> list[str]:
        """The reduction, in `dtype` (the node's unless given)."""
        dtype = node.type.dtype if dtype is None else np.dtype(dtype)
        axes = _axes(w, node, node.attrs.get("axis"))
        keep = int(bool(node.attrs.get("keepdims", False)))
        x = w.cast(ins[0], node.inputs[0].type.dtype, dtype)
        if node.inputs[0].type.rank == 0 or axes == []:
            # over no axis (empty axes mean all in ONNX) or a 0-d value: each element
            # alone, to which numpy's sum adds a zero: -0.0 -> 0.0
            if op_type in ("ReduceSum", "ReduceLogSumExp"):
                return [w.one("Add", [x, w.const(np.zeros((), dtype))])]
            return [w.one("Identity", [x])]
        # ReduceMax / ReduceMin have no bool, int16 or uint16 form: those run as int32
        # (exactly) and are cast back
        widened = op_type in _EXTREMA and dtype in (np.bool_, np.int16, np.uint16)
        if widened:
            x = w.cast(x, dtype, np.int32)
        y = _reduce_over(w, op_type, x, axes, keep, axes_input_from)
        if op_type in _EXTREMA and is_float(dtype):
            # numpy's max / min is nan where a nan is reduced; onnxruntime's ReduceMax
            # and ReduceMin skip nans (but a leading one)
            flags = w.cast(w.one("IsNaN", [x]), np.bool_, np.int32)
            seen = _reduce_over(w, "ReduceMax", flags, axes, keep, axes_input_from)
            found = w.one("Greater", [seen, w.const(np.zeros((), np.int32))])
            y = w.one("Where", [found, w.const(np.asarray(np.nan, dtype)), y])
        return [w.cast(y, np.int32, dtype) if widened else y]

    return run


_EXTREMA = ("ReduceMax", "ReduceMin")


def _reduce_over(
    w: Writer, op_type: str, x: str, axes: list[int] | None, keep: int, axes_input_from: int
) -> str:
    """op_type over `axes` (all when None), which are an input from `axes_input_from` on."""
    if w.opset >= axes_input_from:
        return w.one(op_type, [x] if axes is None else [x, w.ints(axes)], keepdims=keep)
    return w.one(op_type, [x], keepdims=keep, axes=axes)


exporter("sum")(_reduce("ReduceSum", 13))
exporter("prod")(_reduce("ReduceProd", 18))


@exporter("mean")
def _mean(w: Writer, node: Node, ins: list[str]) -> list[str]:
    """The sum divided by the count, as numpy computes it (an empty mean is nan, where
    ReduceMean gives 0); a mean of half floats in float32, rounded once, as numpy's
    (and torch's): a sum rounded to half before the division would round twice."""
    dtype = node.type.dtype
    work = np.dtype(np.float32) if is_half(dtype) else dtype
    total = _reduce("ReduceSum", 13)(w, node, ins, work)[0]
    axis = node.attrs.get("axis")
    shape = node.inputs[0].type.shape
    dims = list(shape) if axis is None else [shape[a] for a in axis]
    if any(is_symbol(d) for d in dims):
        n = w.cast(w.one("ReduceProd", [w.shape(dims)], keepdims=0), np.int64, work)
    else:
        n = w.const(np.asarray(np.prod(dims, dtype=np.int64), work))
    return [w.cast(w.one("Div", [total, n]), work, dtype)]


exporter("max")(_reduce("ReduceMax", 18))
exporter("min")(_reduce("ReduceMin", 18))
exporter("logsumexp")(_reduce("ReduceLogSumExp", 18))


def _arg_extreme(w: Writer, op_type: str, x: str, axis: Any, keep: int, rank: int) -> str:
    """ArgMax / ArgMin along `axis`, or over all elements (None) as numpy: flattened."""
    if axis is not None:
        return w.one(op_type, [x], axis=int(axis), keepdims=keep)
    flat = w.one("Reshape", [x, w.ints([-1])])
    out = w.one(op_type, [flat], axis=0, keepdims=0)
    return w.one("Reshape", [out, w.ints([1] * rank)]) if keep else out


def _index(op_type: str) -> Any:
    def run(w: Writer, node: Node, ins: list[str]) -> list[str]:
        axis, keep = node.attrs.get("axis"), int(bool(node.attrs.get("keepdims", False)))
        source, rank = node.inputs[0].type.dtype, node.inputs[0].type.rank
        x = w.cast(ins[0], np.bool_, np.int32) if source == np.bool_ else ins[0]
        found = _arg_extreme(w, op_type, x, axis, keep, rank)
        if source.kind != "f":
            return [found]
        # numpy: the first nan wins, as the extreme it is (onnxruntime skips nans)
        nan = w.cast(w.one("IsNaN", [x]), np.bool_, np.int32)
        first_nan = _arg_extreme(w, "ArgMax", nan, axis, keep, rank)
        has_nan = _any(w, nan, axis, keep, rank)
        return [w.one("Where", [has_nan, first_nan, found])]

    return run


def _any(w: Writer, flags: str, axis: Any, keep: int, rank: int) -> str:
    """Whether any int32 0/1 flag along `axis` (all when None) is set."""
    if axis is None:
        total = w.one("ReduceSum", [flags], keepdims=keep)
    else:
        total = w.one("ReduceSum", [flags, w.ints([int(axis)])], keepdims=keep)
    return w.one("Greater", [total, w.const(np.zeros((), np.int32))])


exporter("argmax")(_index("ArgMax"))
exporter("argmin")(_index("ArgMin"))


def _softmax(op_type: str) -> Any:
    def run(w: Writer, node: Node, ins: list[str]) -> list[str]:
        x = w.cast(ins[0], node.inputs[0].type.dtype, node.type.dtype)
        if node.type.rank == 0:  # ONNX wants rank >= 1: one element, axis 0
            x = w.one("Unsqueeze", [x, w.ints([0])])
            return [w.one("Squeeze", [w.one(op_type, [x], axis=0), w.ints([0])])]
        if op_type == "LogSoftmax" and node.type.dtype == np.float64:
            return [_log_softmax_form(w, x, node.attrs["axis"] % node.type.rank)]
        return [w.one(op_type, [x], axis=node.attrs["axis"])]

    return run


def _log_softmax_form(w: Writer, x: str, axis: int) -> str:
    """float64 log_softmax as graphc's kernel computes it, x - max - log(sum(exp(x -
    max))): onnxruntime's float64 LogSoftmax skips a nan in finding the row's maximum
    and gives finite numbers where the row holds a nan or +inf."""
    top = _reduce_over(w, "ReduceMax", x, [axis], 1, 18)
    nan = w.const(np.asarray(np.nan, np.float64))
    flags = w.cast(w.one("IsNaN", [x]), np.bool_, np.int32)
    seen = w.one("Greater", [_reduce_over(w, "ReduceMax", flags, [axis], 1, 18),
                             w.const(np.zeros((), np.int32))])  # fmt: skip
    shifted = w.one("Sub", [x, w.one("Where", [seen, nan, top])])
    total = _reduce_over(w, "ReduceSum", w.one("Exp", [shifted]), [axis], 1, 13)
    return w.one("Sub", [shifted, w.one("Log", [total])])


exporter("softmax")(_softmax("Softmax"))
exporter("log_softmax")(_softmax("LogSoftmax"))


@exporter("transpose")
def _transpose(w: Writer, node: Node, ins: list[str]) -> list[str]:
    axes = list(node.attrs["axes"])
    return [w.one("Transpose", ins, perm=axes) if axes else w.one("Identity", ins)]


exporter("concat")(
    lambda w, node, ins: [w.one("Concat", computed(w, node, ins), axis=node.attrs["axis"])]
)
exporter("take")(lambda w, node, ins: [w.one("Gather", ins, axis=node.attrs["axis"])])


@exporter("reshape")
def _reshape(w: Writer, node: Node, ins: list[str]) -> list[str]:
    return [_reshape_to(w, node, ins[0], node.type.shape)]


def _reshape_to(w: Writer, node: Node, x: str, shape: Any) -> str:
    """Reshape to `shape`; a 0 in it is a size here, not ONNX's 'copy the input's dim'."""
    if 0 not in shape:
        return w.one("Reshape", [x, w.shape(shape)])
    if w.opset < 14:
        raise OnnxError(f"export_model: {node.describe()}: a reshape to size 0 needs opset 14")
    return w.one("Reshape", [x, w.shape(shape)], allowzero=1)


@exporter("broadcast_to")
def _broadcast_to(w: Writer, node: Node, ins: list[str]) -> list[str]:
    if any(d == 0 for d in node.type.shape if isinstance(d, int)):
        # no elements: onnxruntime's Expand keeps a dim of 1 that numpy's rule (and
        # ONNX's) broadcasts to 0, so the empty result is written as it is
        return [w.filled(w.shape(node.type.shape), 0, node.type.dtype)]
    return [w.one("Expand", [ins[0], w.shape(node.type.shape)])]


@exporter("full_like")
def _full_like(w: Writer, node: Node, ins: list[str]) -> list[str]:
    return [w.filled(w.one("Shape", ins), node.attrs["value"], node.type.dtype)]


@exporter("clip")
def _clip(w: Writer, node: Node, ins: list[str]) -> list[str]:
    dtype = node.type.dtype
    limits = [node.attrs["a_min"], node.attrs["a_max"]]
    if dtype.kind in "iu":  # a bound past the dtype's range limits nothing: its edge
        info = np.iinfo(dtype)
        limits = [None if b is None else min(max(b, int(info.min)), int(info.max)) for b in limits]
    bounds = ["" if b is None else w.const(np.asarray(b, dtype)) for b in limits]
    x = w.cast(ins[0], node.inputs[0].type.dtype, dtype)
    if dtype == np.bool_:  # ONNX's Clip has no bool form: on bools max is or, min is and
        for op_type, bound in zip(("Or", "And"), bounds):
            x = w.one(op_type, [x, bound]) if bound else x
        return [x]
    if is_float(dtype) and "" in bounds:
        # onnxruntime's Clip without a bound clamps to the dtype's finite extreme (inf
        # became 3.4e38); numpy's keeps inf: the bound given is a Max or a Min
        for op_type, bound in zip(("Max", "Min"), bounds):
            x = w.one(op_type, [x, bound]) if bound else x
        return [x]
    return [w.one("Clip", [x, *bounds])]


@exporter("one_hot")
def _one_hot(w: Writer, node: Node, ins: list[str]) -> list[str]:
    depth = w.const(np.asarray(node.attrs["num_classes"], np.int64))
    values = w.const(np.asarray([0, 1], np.float32))  # the value types onnxruntime has
    labels, classes, ignore = ins[0], node.attrs["num_classes"], node.attrs["ignore_index"]
    scalar = node.inputs[0].type.rank == 0  # ONNX's OneHot takes indices of rank >= 1
    if scalar:
        labels = w.one("Unsqueeze", [labels, w.ints([0])])
    hot = w.one("OneHot", [labels, depth, values], axis=-1)
    dtype = node.inputs[0].type.dtype
    limits = np.iinfo(dtype)
    # OneHot's row of an index outside [-depth, depth) is zeros already (one inside is a
    # class, counted from the end when negative); an ignored one inside is masked
    if ignore is not None and -classes <= ignore < classes and limits.min <= ignore <= limits.max:
        kept = w.one("Not", [w.one("Equal", [labels, w.const(np.asarray(ignore, dtype))])])
        kept = w.cast(w.one("Unsqueeze", [kept, w.ints([-1])]), np.bool_, np.float32)
        hot = w.one("Mul", [hot, kept])
    if scalar:
        hot = w.one("Squeeze", [hot, w.ints([0])])
    return [w.cast(hot, np.float32, node.attrs["dtype"])]


@exporter("sum_to")
def _sum_to(w: Writer, node: Node, ins: list[str]) -> list[str]:
    source, target = node.inputs[0].type.shape, node.type.shape
    lead = len(source) - len(target)
    x, dtype = ins[0], node.type.dtype
    # a sum of bools in bool is an or: count, then != 0; ReduceSum has no 8- or 16-bit
    # integers: those sum in int64, whose low bits wrap as theirs do
    flag = dtype == np.bool_ or dtype in (np.int8, np.uint8, np.int16, np.uint16)
    if flag:
        x = w.cast(x, dtype, np.int64)
    if lead:
        x = w.one("ReduceSum", [x, w.ints(list(range(lead)))], keepdims=0)
    axes = [k for k, (s, t) in enumerate(zip(source[lead:], target)) if t == 1 and s != 1]
    if axes:
        x = w.one("ReduceSum", [x, w.ints(axes)], keepdims=1)
    if flag:
        return [w.cast(x, np.int64, dtype)]
    return [x if lead or axes else w.one("Identity", [x])]


@exporter("count")
def _count(w: Writer, node: Node, ins: list[str]) -> list[str]:
    shape, axis = node.attrs["shape"], node.attrs["axis"]
    dims = list(shape) if axis is None else [shape[a] for a in axis]
    if not any(is_symbol(d) for d in dims):
        return [w.const(np.asarray(int(np.prod(dims, dtype=np.int64)), node.attrs["dtype"]))]
    product = w.one("ReduceProd", [w.shape(dims)], keepdims=0)
    return [w.one("Cast", [product], to=onnx_elem_type(node.attrs["dtype"]))]


@exporter("slice")
def _slice(w: Writer, node: Node, ins: list[str]) -> list[str]:
    return [_sliced(w, ins[0], node.attrs["index"], node.inputs[0].type.shape)]


@exporter("unslice")
def _unslice(w: Writer, node: Node, ins: list[str]) -> list[str]:
    """Zeros with ct placed at the window: ct padded with zeros around it (exactly, no
    arithmetic), where every axis sliced is known; else the window's flat positions are
    the same slice of an iota of the shape, and ScatterND writes ct there (a flat count
    of a symbolic shape has no graphc form: that model does not read back)."""
    padded = _unslice_by_padding(w, node, ins[0])
    if padded is not None:
        return [padded]
    shape = node.type.shape
    if any(is_symbol(d) for d in shape):
        flat = w.one("ReduceProd", [w.shape(shape)], keepdims=1)
    else:
        flat = w.ints([int(np.prod(shape, dtype=np.int64))])
    one, zero = w.const(np.asarray(1, np.int64)), w.const(np.asarray(0, np.int64))
    count = w.one("Squeeze", [flat, w.ints([0])])
    iota = _reshape_to(w, node, w.one("Range", [zero, count, one]), shape)
    where = _sliced(w, iota, node.attrs["index"], shape)
    where = w.one("Reshape", [where, w.ints([-1, 1])])
    values = w.one("Reshape", [ins[0], w.ints([-1])])
    placed = w.one("ScatterND", [_zeros(w, flat, node.type.dtype), where, values])
    return [_reshape_to(w, node, placed, shape)]


def _unslice_by_padding(w: Writer, node: Node, ct: str) -> str | None:
    """ct (the slice's shape) placed in zeros of node's shape by Pad: None items
    squeezed, int ones unsqueezed, each sliced axis padded before and after its window;
    a reversed window flipped first, a strided one spread by a zero pad of a new axis
    after it and a reshape; None where a sliced axis is symbolic."""
    shape = list(node.type.shape)
    items = _expand_ellipsis(parse_index(node.attrs["index"]), len(shape))
    added = [k for k, item in enumerate(i for i in items if not isinstance(i, int)) if item is None]
    per_axis = [item for item in items if item is not None]  # one per axis of the shape
    taken = [a for a, item in enumerate(per_axis) if isinstance(item, int)]
    if any(item != slice(None) and is_symbol(d) for item, d in zip(per_axis, shape)):
        return None
    # x's shape as the axes are done: the window's, with the ints' axes of size 1
    current = [
        1 if isinstance(item, int) else size if item == slice(None) else len(range(size)[item])
        for item, size in zip(per_axis, shape)
    ]
    if 0 in current and 0 not in shape:  # an empty window: all zeros
        return _zeros(w, w.shape(shape), node.type.dtype)
    x = w.one("Squeeze", [ct, w.ints(added)]) if added else ct
    x = w.one("Unsqueeze", [x, w.ints(taken)]) if taken else x
    rank = len(shape)
    before, after = [0] * rank, [0] * rank
    for axis, (item, size) in enumerate(zip(per_axis, shape)):
        if isinstance(item, int):
            before[axis], after[axis] = item % size, size - item % size - 1
            continue
        if item == slice(None):
            continue
        picked = range(size)[item]
        if not picked:  # (an empty shape: nothing to place)
            continue
        if picked.step < 0:  # a reversed window: flipped into order
            ends = w.ints([INT64_MIN])
            x = w.one("Slice", [x, w.ints([-1]), ends, w.ints([axis]), w.ints([-1])])
            picked = picked[::-1]
        if picked.step > 1:  # each element followed by step - 1 zeros
            x = w.one("Unsqueeze", [x, w.ints([axis + 1])])
            spread = [0] * (2 * rank + 2)
            spread[rank + 1 + axis + 1] = picked.step - 1
            x = w.one("Pad", [x, w.ints(spread)])
            current[axis] = len(picked) * picked.step
            x = w.one("Reshape", [x, w.shape(current)])
        before[axis] = picked[0]
        after[axis] = size - picked[0] - current[axis]  # < 0: the trailing zeros cut
    if any(before) or any(after):
        x = w.one("Pad", [x, w.ints(before + after)])
    return x


def _sliced(w: Writer, value: str, index: str, shape: tuple) -> str:
    """`value[index]` for basic indices (value of `shape`): Slice, then Squeeze for ints,
    Unsqueeze for None. Slices of known dims are written as the positions Python takes
    (ONNX clamps a start before the first element to it where a negative step is
    taken, so x[-3::-1] of 1 element is that element in ONNX and nothing in numpy)."""
    rank = len(shape)
    items = _expand_ellipsis(parse_index(index), rank)
    starts, ends, axes, steps, squeezed, new = [], [], [], [], [], []
    axis = 0
    position = 0  # axis in the result before ints are squeezed
    for item in items:
        if item is None:
            new.append(position)
            position += 1
            continue
        if isinstance(item, int):
            starts.append(item)
            ends.append(item + 1 if item != -1 else INT64_MAX)
            axes.append(axis)
            steps.append(1)
            squeezed.append(axis)
        elif item != slice(None) and not is_symbol(shape[axis]):
            picked = range(shape[axis])[item]
            if not picked:  # nothing: an empty slice ONNX's clamping keeps empty
                picked = range(0)
            starts.append(picked.start)
            ends.append(picked.stop if picked.stop >= 0 else INT64_MIN)  # -1: before 0
            axes.append(axis)
            steps.append(picked.step)
        elif item != slice(None):
            step = item.step or 1
            starts.append(item.start if item.start is not None else (0 if step > 0 else -1))
            ends.append(
                item.stop if item.stop is not None else (INT64_MAX if step > 0 else INT64_MIN)
            )
            axes.append(axis)
            steps.append(step)
        if not isinstance(item, int):
            position += 1
        axis += 1
    if axes:
        value = w.one("Slice", [value, w.ints(starts), w.ints(ends), w.ints(axes), w.ints(steps)])
    if squeezed:
        value = w.one("Squeeze", [value, w.ints(squeezed)])
    if new:
        value = w.one("Unsqueeze", [value, w.ints(new)])
    return value if (axes or squeezed or new) else w.one("Identity", [value])


# -- what graphc made: written as their decomposition ----------------------------------


@exporter("custom_vjp")
def _custom(w: Writer, node: Node, ins: list[str]) -> list[str]:
    body = node.attrs["forward"]
    return w.write(body, dict(zip(body.inputs, ins)))


@exporter("scatter_add")
def _scatter_add(w: Writer, node: Node, ins: list[str]) -> list[str]:
    """Zeros with ct's rows added at the indices: ScatterND (reduction add) on the axis
    moved to the front, the indices flattened to one list."""
    if w.opset < 16:
        raise OnnxError(f"export_model: {node.describe()}: scatter_add needs opset 16 or later")
    ct, indices = node.inputs
    shape, axis = node.type.shape, node.attrs["axis"]
    rank, k = len(shape), indices.type.rank
    front = [axis, *[a for a in range(rank) if a != axis]]
    back = [front.index(a) for a in range(rank)]
    dims = [shape[a] for a in front]
    zeros = _zeros(w, w.shape(dims), node.type.dtype)
    ct_front = ins[0]
    if k != 1 or axis != 0:  # ct's index dims moved first and flattened to one
        if axis:
            perm = [*range(axis, axis + k), *range(axis), *range(axis + k, ct.type.rank)]
            ct_front = w.one("Transpose", [ct_front], perm=perm)
        if k != 1:
            count = indices.type.shape
            if any(is_symbol(d) for d in count):
                n = w.one("ReduceProd", [w.shape(count)], keepdims=1)
                target = w.one("Concat", [n, w.shape(dims[1:])], axis=0)
            else:
                target = w.shape([int(np.prod(count, dtype=np.int64)), *dims[1:]])
            zero = {"allowzero": 1} if w.opset >= 14 else {}  # sizes here may be 0
            ct_front = w.one("Reshape", [ct_front, target], **zero)
    flat = w.one("Reshape", [ins[1], w.ints([-1, 1])])
    flat = w.cast(flat, indices.type.dtype, np.int64)
    added = w.one("ScatterND", [zeros, flat, ct_front], reduction="add")
    return [w.one("Transpose", [added], perm=back) if axis != 0 else added]


def _zeros(w: Writer, shape: str, dtype: Any) -> str:
    """Zeros of dtype whose shape is the 1-D int64 value `shape`."""
    return w.filled(shape, 0, dtype)
