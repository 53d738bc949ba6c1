"""ONNX handlers: elementwise math read as more than one graphc op, or with a twist (Div
of integers truncates, Max takes any number of inputs), Gemm, Clip, reductions, softmax.
The op types that are one graphc op (Add, Exp, ...) are read by direct.py's table."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from graphc.ir.types import is_float
from graphc.onnx.importer import Context, Value, handler, ints, known
from graphc.ops import elementwise as E
from graphc.ops import linalg as L
from graphc.ops import logical, rounding, selection
from graphc.ops import nn as N
from graphc.ops import reduce as R
from graphc.ops.indexing import getitem
from graphc.ops.shape import reshape, transpose


@handler("Div")
def _div(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    a, b = inputs
    if np.dtype(a.dtype).kind in "iu":
        # ONNX integer division truncates toward zero, in integers (through float64 it
        # lost the low bits past 2**53): the floor quotient, one more where the division
        # was inexact and the signs differ
        q = rounding.floor_divide(a, b)
        inexact = selection.ne(E.sub(a, E.mul(q, b)), 0)
        signs_differ = selection.ne(selection.lt(a, 0), selection.lt(b, 0))
        return [selection.where(logical.logical_and(inexact, signs_differ), E.add(q, 1), q)]
    return [E.div(a, b)]


@handler("Pow", since=7)
def _pow(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x, e = inputs
    if np.dtype(x.dtype) == np.dtype(e.dtype):
        return [E.pow(x, e)]
    # ONNX: the result has the base's type (numpy would promote int64 ** float32 to float64)
    common = np.result_type(x.dtype, e.dtype)
    return [selection.cast(E.pow(selection.cast(x, common), selection.cast(e, common)), x.dtype)]


@handler("Reciprocal")
def _reciprocal(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x = inputs[0]
    return [E.div(np.ones((), x.dtype), x)]


def _unary(op: Any) -> Any:
    """The handler of an op type that is graphc's `op` of one input."""

    def read(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
        return [op(inputs[0])]

    return read


# written by exporters_math.py (atan and sinh are direct.py entries, both ways)
handler("Tan", since=7)(_unary(E.tan))
handler("Asin", since=7)(_unary(E.asin))
handler("Acos", since=7)(_unary(E.acos))
handler("Cosh", since=9)(_unary(E.cosh))
handler("Asinh", since=9)(_unary(E.asinh))
handler("Acosh", since=9)(_unary(E.acosh))
handler("Atanh", since=9)(_unary(E.atanh))


@handler("IsNaN", since=9)
def _isnan(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    return [selection.isnan(inputs[0])]


@handler("IsInf", since=10)
def _isinf(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x = inputs[0]
    hits = []
    if attrs.get("detect_positive", 1):
        hits.append(selection.eq(x, np.asarray(np.inf, x.dtype)))
    if attrs.get("detect_negative", 1):
        hits.append(selection.eq(x, np.asarray(-np.inf, x.dtype)))
    if not hits:
        return [selection.lt(x, x)]  # nothing detected: all false (x < x)
    return [hits[0] if len(hits) == 1 else E.maximum(*hits)]  # or, on bools


@handler("Not")
def _not(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    return [selection.eq(inputs[0], False)]


@handler("And")
def _and(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    return [E.mul(*inputs)]  # on bools: and


@handler("Or")
def _or(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    return [E.maximum(*inputs)]  # on bools: or


@handler("Xor")
def _xor(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    return [selection.ne(*inputs)]


def _variadic(fn: Any) -> Any:
    def run(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
        result = inputs[0]
        for x in inputs[1:]:
            result = fn(result, x)
        return [result]

    return run


handler("Max", since=8)(_variadic(E.maximum))
handler("Min", since=8)(_variadic(E.minimum))
handler("Sum", since=8)(_variadic(E.add))


@handler("Mean", since=8)
def _mean(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    dtype = np.result_type(*(x.dtype for x in inputs))
    # a half-precision sum would overflow where the mean does not (3 x 60000): it is
    # summed in float32, as onnxruntime does, and the mean rounded once back
    wide = np.dtype(np.float32) if dtype.itemsize < 4 else dtype
    terms = [x if x.dtype == wide else selection.cast(x, wide) for x in inputs]
    total = _variadic(E.add)(ctx, terms, attrs)[0]
    mean = E.div(total, np.asarray(len(inputs), wide))
    return [mean if wide == dtype else selection.cast(mean, dtype)]


@handler("MatMul")
def _matmul(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    return [L.matmul(*inputs)]


@handler("Gemm", since=7)
def _gemm(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    # spelled out, not graphc's gemm op: matmul + add is what fuse_matmul_epilogue turns
    # into one node with the layer's activation (a Linear layer's Gemm, then Relu)
    a, b = inputs[0], inputs[1]
    if attrs.get("transA", 0):
        a = transpose(a, (1, 0))
    if attrs.get("transB", 0):
        b = transpose(b, (1, 0))
    y = L.matmul(a, b)
    alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
    if alpha != 1.0:
        y = E.mul(y, np.asarray(alpha, y.dtype))
    if len(inputs) > 2 and inputs[2] is not None:
        c = inputs[2]
        y = E.add(y, c if beta == 1.0 else E.mul(c, np.asarray(beta, c.dtype)))
    return [y]


@handler("Clip", since=11)
def _clip(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x = inputs[0]
    low = inputs[1] if len(inputs) > 1 else None
    high = inputs[2] if len(inputs) > 2 else None
    if all(b is None or (known(b) and np.size(b) == 1) for b in (low, high)):
        # known bounds: graphc's clip (numpy's), the op graphc exports as Clip
        bounds = [None if b is None else np.asarray(b).reshape(()).item() for b in (low, high)]
        return [selection.clip(x, *bounds)]
    if low is not None:
        x = E.maximum(x, low)
    if high is not None:
        x = E.minimum(x, high)
    return [x]


@handler("Clip", since=6)
def _clip_attrs(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    x = inputs[0]
    low = np.asarray(attrs.get("min", -np.inf), x.dtype)
    high = np.asarray(attrs.get("max", np.inf), x.dtype)
    return [E.minimum(E.maximum(x, low), high)]


def _reduce_axes(ctx: Context, inputs: list[Value], attrs: dict, as_input: bool) -> tuple | None:
    axes = None
    if as_input and len(inputs) > 1 and inputs[1] is not None:
        axes = [int(a) for a in ints(ctx, inputs[1], "axes")]
    elif "axes" in attrs:
        axes = list(attrs["axes"])
    if not axes:  # absent (the input left out, "") or empty: every axis, or none at all
        return () if attrs.get("noop_with_empty_axes", 0) else None
    return tuple(axes)


_EMPTY = {R.max: "low", R.min: "high", R.logsumexp: "low"}  # ONNX: the identity on no elements


def identity_of(dtype: np.dtype, end: str) -> Any:
    if dtype == np.bool_:
        return end == "high"
    if is_float(dtype):
        return -np.inf if end == "low" else np.inf
    info = np.iinfo(dtype)
    return info.min if end == "low" else info.max


def reduction_handler(fn: Any, as_input_from: int) -> Any:
    def make(as_input: bool) -> Any:
        def run(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
            axes = _reduce_axes(ctx, inputs, attrs, as_input)
            x = inputs[0]
            if axes == ():
                return [x]  # noop_with_empty_axes
            keep = bool(attrs.get("keepdims", 1))
            rank = len(x.shape)
            reduced = range(rank) if axes is None else [a % rank for a in axes]
            if fn in _EMPTY and any(x.shape[a] == 0 for a in reduced):
                shape = tuple(
                    1 if k in reduced else d
                    for k, d in enumerate(x.shape)
                    if keep or k not in reduced
                )
                value = identity_of(np.dtype(x.dtype), _EMPTY[fn])
                ctx.check_size(math.prod(shape), "the reduction's result")
                return [np.full(shape, value, x.dtype)]
            y = fn(x, axis=axes, keepdims=keep)
            # ONNX keeps the element type (an int32 sum wraps in int32, an int mean is an
            # int); numpy widens: the cast back gives the same bits for sums (mod 2**32)
            return [selection.cast(y, x.dtype) if y.dtype != x.dtype else y]

        return run

    return make


for _name, _fn, _from in (
    ("ReduceSum", R.sum, 13),
    ("ReduceMean", R.mean, 18),
    ("ReduceMax", R.max, 18),
    ("ReduceMin", R.min, 18),
    ("ReduceLogSumExp", R.logsumexp, 18),
):
    handler(_name, since=1)(reduction_handler(_fn, _from)(False))
    handler(_name, since=_from)(reduction_handler(_fn, _from)(True))


@handler("ReduceSumSquare")
def _sum_square(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
    axes = _reduce_axes(ctx, inputs, attrs, ctx.opset >= 18)
    x = inputs[0]
    return [R.sum(E.mul(x, x), axis=axes, keepdims=bool(attrs.get("keepdims", 1)))]


def _index(fn: Any) -> Any:
    def run(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
        x, axis, keep = inputs[0], attrs.get("axis", 0), bool(attrs.get("keepdims", 1))
        if not attrs.get("select_last_index", 0):
            return [fn(x, axis=axis, keepdims=keep)]
        # the last index of an extremum: the first in the reversed axis, counted back
        axis %= len(x.shape)
        size = x.shape[axis]
        if isinstance(size, str):
            raise ctx.error("select_last_index=1 along a symbolic dim is not supported")
        index = tuple(
            slice(None, None, -1) if k == axis else slice(None) for k in range(len(x.shape))
        )
        first = fn(getitem(x, index), axis=axis, keepdims=keep)
        return [E.sub(np.asarray(size - 1, np.int64), first)]

    return run


handler("ArgMax")(_index(R.argmax))
handler("ArgMin")(_index(R.argmin))


def _softmax(fn: Any) -> Any:
    def new(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
        return [fn(inputs[0], axis=attrs.get("axis", -1))]

    def old(ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
        # before opset 13 the input is coerced to 2-D at `axis` (default 1)
        x = inputs[0]
        axis = attrs.get("axis", 1) % max(len(x.shape), 1)
        dims = list(x.shape)
        if axis == len(dims) - 1:
            return [fn(x, axis=-1)]
        if any(isinstance(d, str) for d in dims[axis:]):
            raise ctx.error("Softmax (opset < 13) over several symbolic dims")
        inner = int(np.prod(dims[axis:], dtype=np.int64))
        flat = reshape(x, (*dims[:axis], inner))
        return [reshape(fn(flat, axis=-1), tuple(dims))]

    return new, old


for _name, _fn in (("Softmax", N.softmax), ("LogSoftmax", N.log_softmax)):
    _new, _old = _softmax(_fn)
    handler(_name, since=1)(_old)
    handler(_name, since=13)(_new)

__all__: list[str] = []
