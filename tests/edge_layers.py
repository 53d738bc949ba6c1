"""Builders of the hostile random graphs (tests/edge_graphs.py) for the ops of real models.

Convolutions (conv2d, conv_transpose2d: stride, padding as one int, a pair, four ints,
'same' or 'valid', dilation, groups, output_padding, bias) and pooling (max_pool2d with
dilation, avg_pool2d with count_include_pad and divisor_override, both with ceil_mode;
adaptive and global average pooling) on images viewed from any value (`nchw`: empty
batches and a symbolic batch "B" included); layer_norm, group_norm and batch_norm; pad
in every mode and spelling; cumsum, flip, tril, triu and arange (of a symbolic dim
too); argsort, sort and topk; take_along_axis and embedding; einsum contractions,
outer products, transposes and sums; log1p, expm1, rsqrt, reciprocal, erf, log2,
log10 and the trigonometric and hyperbolic functions and their inverses
(elementwise.py), rounding (rounding.py), logical_not, and the activations of
activation.py with varied attrs; remainder, fmod, floor_divide, logaddexp, logical
ops, and clamp with tensor bounds. (atan2 is left out: at tiny equal operands its two
partial derivatives are +-1e144 and cancel, so a gradient summed in another order
loses every other term, and tests/passes/test_forward.py's check of the tangents
against the VJP fails on rounding alone.) Weights, scales and bounds come from the
pool where one fits (`operand`), so the gradient graphs differentiate them too. As
everywhere in edge_graphs.py, an op whose type rule refuses is simply not drawn (the
builder's graphc error is caught).
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import graphc as gc
from graphc.ops.symbolic import Symbol
from tests.edge_draws import (
    Draw,
    draw_axis,
    draw_dtype,
    floating,
    nchw,
    operand,
    partner,
    pick,
    pick_where,
    scalar,
    scalar_value,
)


def _float_dtype(draw: Draw, x: Symbol) -> str:
    """A floating dtype for a weight: x's own (mostly) or the other one."""
    if floating(x) and draw(st.integers(0, 2)) > 0:
        return str(x.dtype)
    return draw_dtype(draw, floats=True)


def _pair(value: int | tuple[int, int]) -> tuple[int, int]:
    return value if isinstance(value, tuple) else (value, value)


def _conv(draw: Draw, pool: list[Symbol]) -> Symbol:
    x = nchw(draw, pool)
    channels = x.shape[1]
    groups = 1
    if isinstance(channels, int):
        groups = draw(st.sampled_from([g for g in (1, 2, 3, 4) if channels % g == 0]))
    per = draw(st.sampled_from([1, 1, 2, 2, 0]))  # 0: no output channels
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = draw(st.sampled_from([1, 1, 2, (1, 2), (3, 1)]))
    dilation = draw(st.sampled_from([1, 1, 2, (2, 1)]))
    padding = draw(st.sampled_from([0, 0, 1, (1, 0), (0, 1, 2, 1), (2, 2), "same", "valid"]))
    dtype = _float_dtype(draw, x)
    if draw(st.booleans()):
        if isinstance(padding, str):
            padding = 1
        weight = operand(draw, pool, (channels, per, *kernel), dtype)
        # PyTorch's limit: output_padding < max(stride, dilation), per axis
        reach = [max(s, d) for s, d in zip(_pair(stride), _pair(dilation))]
        extra = (draw(st.integers(0, reach[0] - 1)), draw(st.integers(0, reach[1] - 1)))
        bias = operand(draw, pool, (per * groups,), dtype) if draw(st.booleans()) else None
        return gc.conv_transpose2d(x, weight, bias, stride, padding, extra, groups, dilation)
    # a symbolic channel dim has groups 1: the weight takes that dim as it is
    per_group = channels // groups if isinstance(channels, int) else channels
    weight = operand(draw, pool, (per * groups, per_group, *kernel), dtype)
    bias = operand(draw, pool, (per * groups,), dtype) if draw(st.booleans()) else None
    return gc.conv2d(x, weight, bias, stride, padding, dilation, groups)


def _pool(draw: Draw, pool: list[Symbol]) -> Symbol:
    x = nchw(draw, pool)
    kind = draw(st.sampled_from(["max", "max", "avg", "avg", "adaptive", "global"]))
    kernel = draw(st.sampled_from([1, 2, 3, (2, 1), (1, 3)]))
    stride = draw(st.sampled_from([None, 1, 2, (1, 2)]))
    padding = draw(st.sampled_from([0, 0, 1, (0, 1), (1, 0, 0, 1)]))
    ceil_mode = draw(st.booleans())
    if kind == "max":
        dilation = draw(st.sampled_from([1, 1, 2, (2, 1)]))
        return gc.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode)
    if kind == "avg":
        include = draw(st.booleans())
        divisor = draw(st.sampled_from([None, None, 1, 3]))
        return gc.avg_pool2d(x, kernel, stride, padding, ceil_mode, include, divisor)
    if kind == "adaptive":
        return gc.adaptive_avg_pool2d(x, draw(st.sampled_from([1, 2, (1, 3), (2, None), (3, 2)])))
    return gc.global_avg_pool2d(x)


def _affine(draw: Draw, pool: list[Symbol], dims: tuple, dtype: str) -> Symbol | float | None:
    """A norm's scale or shift for the trailing `dims`: None, a number, or a value of a
    suffix of them (some dims 1, a symbolic one always 1)."""
    how = draw(st.integers(0, 3))
    if how == 0:
        return None
    if how == 1:
        return draw(st.sampled_from([2.0, -0.0, float("nan")]))
    suffix = dims[draw(st.integers(0, len(dims))) :]
    shape = tuple(1 if isinstance(d, str) or draw(st.booleans()) else d for d in suffix)
    return operand(draw, pool, shape, dtype)


def _norm(draw: Draw, pool: list[Symbol]) -> Symbol:
    kind = draw(st.sampled_from(["layer_norm", "layer_norm", "group_norm", "batch_norm"]))
    x = pick_where(draw, pool, lambda v: v.type.rank >= (1 if kind == "layer_norm" else 2))
    eps = draw(st.sampled_from([1e-5, 0.0, 1.0, 1e-30]))
    dtype = _float_dtype(draw, x)
    if kind == "layer_norm":
        at = draw(st.integers(-x.type.rank, x.type.rank - 1)) if x.type.rank else 0
        dims = x.shape[at:]
        weight, bias = _affine(draw, pool, dims, dtype), _affine(draw, pool, dims, dtype)
        return gc.layer_norm(x, weight, bias, axis=at, eps=eps)
    channels = x.shape[1] if x.type.rank >= 2 else 1
    per_channel = [None] * 4
    if isinstance(channels, int):
        per_channel = [
            operand(draw, pool, (channels,), dtype) if draw(st.booleans()) else None
            for _ in range(4)
        ]
    weight, bias, mean, var = per_channel
    if kind == "group_norm":
        divisors = [g for g in (1, 2, 3) if isinstance(channels, int) and channels % g == 0]
        return gc.group_norm(x, draw(st.sampled_from(divisors or [2])), weight, bias, eps)
    training = draw(st.booleans())
    if not training and isinstance(channels, int):  # eval mode: running statistics needed
        mean = operand(draw, pool, (channels,), dtype) if mean is None else mean
        var = operand(draw, pool, (channels,), dtype) if var is None else var
    return gc.batch_norm(x, mean, var, weight, bias, training=training, eps=eps).output


def _pad(draw: Draw, pool: list[Symbol]) -> Symbol:
    x = pick(draw, pool)
    symbolic = not x.type.is_concrete
    mode = draw(
        st.sampled_from(
            ["constant", "constant", "reflect", "edge", "wrap", "replicate", "circular"]
        )
    )
    form = 2 if symbolic else draw(st.integers(0, 2))
    widths = st.integers(0, 2)
    if form == 0:  # one width for every side
        pad_width = draw(widths)
    elif form == 1:  # one (before, after) for every axis
        pad_width = (draw(widths), draw(widths))
    else:  # a pair per axis, none on a symbolic dim (which cannot grow)
        pad_width = tuple(
            (0, 0) if isinstance(d, str) else (draw(widths), draw(widths)) for d in x.shape
        )
    if mode == "constant" and draw(st.booleans()):
        return gc.pad(x, pad_width, mode, constant_values=scalar_value(draw, x.dtype))
    return gc.pad(x, pad_width, mode)


def _sequence(draw: Draw, pool: list[Symbol]) -> Symbol:
    kind = draw(st.sampled_from(["cumsum", "cumsum", "flip", "flip", "tril", "triu", "arange"]))
    x = pick_where(draw, pool, lambda v: v.type.rank >= (2 if kind in ("tril", "triu") else 0))
    if kind == "cumsum":
        along = draw_axis(draw, x)
        if along is None and not x.type.is_concrete and x.type.rank > 1:
            along = -1  # flattening would (mostly) merge a symbolic dim with others
        return gc.cumsum(x, along)
    if kind == "flip":
        rank = x.type.rank
        if rank == 0:  # PyTorch allows 0 and -1 on a 0-d value
            return gc.flip(x, draw(st.sampled_from([None, 0, -1, ()])))
        axes = st.lists(st.integers(-rank, rank - 1), max_size=rank, unique_by=lambda a: a % rank)
        chosen = draw(st.one_of(st.none(), axes, st.integers(-rank, rank - 1)))
        return gc.flip(x, tuple(chosen) if isinstance(chosen, list) else chosen)
    if kind in ("tril", "triu"):
        return getattr(gc, kind)(x, k=draw(st.integers(-2, 2)))
    symbols = [d for d in x.shape if isinstance(d, str)]
    if symbols and draw(st.booleans()):
        return gc.arange(symbols[0])  # 0..B-1: a creation op of symbolic length
    start = draw(st.sampled_from([0, -2, 1.5]))
    stop = draw(st.sampled_from([0, 3, 5, -1, 2.5]))
    step = draw(st.sampled_from([1, 2, -1, 0.5]))
    return gc.arange(start, stop, step, draw(st.sampled_from([None, "int32", "float64", "int64"])))


def _sorting(draw: Draw, pool: list[Symbol]) -> Symbol:
    x = pick(draw, pool)
    rank = x.type.rank
    along = draw(st.integers(-rank, rank - 1)) if rank else -1
    kind = draw(st.sampled_from(["argsort", "sort", "topk"]))
    descending = draw(st.booleans())
    if kind == "argsort":
        return gc.argsort(x, along, descending)
    if kind == "sort":
        values, indices = gc.sort(x, along, descending)
    else:
        size = x.shape[along] if rank else 1
        k = draw(st.integers(0, size) if isinstance(size, int) else st.sampled_from([0, 1, 2]))
        values, indices = gc.topk(x, k, along, largest=descending)
    return values if draw(st.integers(0, 3)) else indices


def _gather(draw: Draw, pool: list[Symbol]) -> Symbol | None:
    x = pick(draw, pool)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    index_dtype = draw(st.sampled_from(["int64", "int32"]))
    if draw(st.integers(0, 3)) == 0:  # embedding: rows of a 2-d weight
        weight = draw(st.sampled_from([v for v in pool if v.type.rank == 2] or [None]))
        if weight is None:
            return None
        rows = weight.shape[0] if isinstance(weight.shape[0], int) else 2
        shape = draw(st.sampled_from([(), (3,), (2, 2), (0,)]))
        high = rows + 1 if draw(st.integers(0, 7)) == 0 else rows  # now and then out of range
        ids = gc.constant(rng.integers(0, max(high, 1), shape).astype(index_dtype))
        return gc.embedding(ids, weight, draw(st.sampled_from([None, 0, -1])))
    along = draw_axis(draw, x)
    if draw(st.booleans()):  # a permutation: argsort of a value of x's shape (sort)
        same = [v for v in pool if v.shape == x.shape]
        order = gc.argsort(draw(st.sampled_from(same)), -1 if along is None else along)
        return gc.take_along_axis(x, order, axis=-1 if along is None else along)
    if not x.type.is_concrete:
        return None
    if along is None:
        size, shape = x.type.size, (draw(st.sampled_from([0, 1, 3, 5])),)
    else:
        size = x.shape[along]
        # the window torch.gather reads: other dims at most x's, this one any length
        shape = tuple(
            draw(st.sampled_from([0, 1, 2, 4]))
            if i == along % x.type.rank
            else draw(st.integers(0, d))
            for i, d in enumerate(x.shape)
        )
    if size == 0:
        indices = np.zeros(shape, np.int64)
        if indices.size:
            return None  # nothing to pick from
    else:
        indices = rng.integers(-size, size, shape)
    return gc.take_along_axis(x, gc.constant(indices.astype(index_dtype)), along)


def einsum_equation(draw: Draw, x: Symbol, y: Symbol | None = None) -> str:
    """An equation for x (and y): a label of y shared with x where dims agree (or one is
    1, broadcast), fresh otherwise; an explicit output of some labels in any order, or
    none (implicit: the labels used once, sorted); x alone may write '...' for leading
    dims."""
    labels = iter("abcdefghijklmnop")
    terms = [[next(labels) for _ in x.shape]]
    if y is not None:
        term: list[str] = []
        for d in y.shape:
            shared = [
                a for a, e in zip(terms[0], x.shape) if a not in term and (e == d or 1 in (d, e))
            ]
            fresh = not shared or draw(st.integers(0, 3)) == 0
            term.append(next(labels) if fresh else draw(st.sampled_from(shared)))
        terms.append(term)
    used = list(dict.fromkeys(a for term in terms for a in term))
    ellipsis = y is None and x.type.rank >= 1 and draw(st.integers(0, 3)) == 0
    if ellipsis:  # the leading dims as '...', kept in front of the output
        terms[0] = ["...", *terms[0][draw(st.integers(1, x.type.rank)) :]]
        used = terms[0][1:]
    inputs = ",".join("".join(term) for term in terms)
    if not ellipsis and draw(st.integers(0, 3)) == 0:
        return inputs
    output = "".join(draw(st.permutations([a for a in used if draw(st.booleans())])))
    return f"{inputs}->{'...' if ellipsis else ''}{output}"


def _einsum(draw: Draw, pool: list[Symbol]) -> Symbol:
    """Contractions, outer products, transposes and sums of one or two pool values."""
    x = pick(draw, pool)
    if draw(st.integers(0, 3)) == 0:
        return gc.einsum(einsum_equation(draw, x), x)
    y = draw(st.sampled_from(pool))
    return gc.einsum(einsum_equation(draw, x, y), x, y)


UNARY_MATH = (
    "log1p", "expm1", "rsqrt", "reciprocal", "erf", "silu", "gelu_exact", "hardsigmoid",
    "softsign", "selu", "relu6", "floor", "ceil", "trunc", "logical_not",
    "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "log2", "log10",
)  # fmt: skip


def _math_unary(draw: Draw, pool: list[Symbol]) -> Symbol:
    x = pick(draw, pool)
    name = draw(
        st.sampled_from(UNARY_MATH + ("round", "softplus", "leaky_relu", "elu", "celu", "hardtanh"))
    )
    if name == "round":
        return gc.round(x, decimals=draw(st.sampled_from([0, 0, 1, 2, -1, -3])))
    if name == "softplus":
        beta = draw(st.sampled_from([1.0, 2.0, 0.5, -1.0]))
        return gc.softplus(x, beta, draw(st.sampled_from([20.0, 1.0, 0.0, -5.0])))
    if name == "leaky_relu":
        return gc.leaky_relu(x, draw(st.sampled_from([0.01, 0.2, 0.0, -1.0, 1.5])))
    if name == "elu":
        alpha = draw(st.sampled_from([1.0, 0.5, 2.0]))
        return gc.elu(
            x, alpha, draw(st.sampled_from([1.0, 1.0507])), draw(st.sampled_from([1.0, 0.5]))
        )
    if name == "celu":
        return gc.celu(x, draw(st.sampled_from([1.0, 0.5, 2.0])))
    if name == "hardtanh":
        low, high = draw(
            st.sampled_from([(-1.0, 1.0), (0.0, 6.0), (-0.0, 0.0), (-2.0, 0.5), (1.0, -1.0)])
        )
        return gc.hardtanh(x, low, high)
    return getattr(gc, name)(x)


def _bound(draw: Draw, pool: list[Symbol], x: Symbol) -> Symbol | float | None:
    how = draw(st.integers(0, 3))
    if how == 0:
        return None
    if how == 1:
        return scalar(draw, x.dtype)
    return partner(draw, pool, x)


def _math_binary(draw: Draw, pool: list[Symbol]) -> Symbol:
    x = pick(draw, pool)
    name = draw(
        st.sampled_from(
            [
                "remainder",
                "fmod",
                "floor_divide",
                "logaddexp",
                "logical_and",
                "logical_or",
                "logical_xor",
                "clamp",
            ]
        )
    )
    if name == "clamp":  # tensor bounds broadcast against x: maximum and minimum
        low, high = _bound(draw, pool, x), _bound(draw, pool, x)
        if low is None and high is None:
            low = partner(draw, pool, x)
        if draw(st.booleans()):
            return gc.clip(x, a_min=low, a_max=high)
        return gc.clamp(x, low, high)
    if draw(st.integers(0, 3)) == 0:
        y = scalar(draw, x.dtype if draw(st.booleans()) else draw_dtype(draw))
    else:
        y = partner(draw, pool, x)
    if draw(st.booleans()):
        x, y = y, x
    return getattr(gc, name)(x, y)


LAYER_BUILDERS = (
    _conv,
    _pool,
    _norm,
    _pad,
    _sequence,
    _sorting,
    _gather,
    _einsum,
    _math_unary,
    _math_binary,
)
