"""Hypothesis strategy for random graphs that go where tame ones do not.

`edge_graphs()` declares graphs through the public API with float32, float64, int32,
int64 and bool placeholders (and, one time in eight, float16, bfloat16 where ml_dtypes is
installed, int8, int16 or uint8-uint64: tests/edge_draws.py's `draw_dtype`), 0-d and empty (a 0-size dim) shapes, a symbolic batch
dim "B" (sliced with ``x[0:2]``, ``x[:, 1:3]``, concatenated), and ops without
taming: exp, log, sqrt, div and pow see whatever comes (nan and inf are allowed
results), plus comparisons, where, casts between every pair of dtypes, reductions
(sum, mean, max, min, prod, argmax, argmin, logsumexp, var), softmax, log_softmax,
matmul, reshape, transpose, broadcast_to, squeeze, getitem, take, clip and concat,
and the ops of real models (tests/edge_layers.py: convolutions and pooling on images
with an empty or symbolic batch, norms, pad, cumsum, flip, tril/triu, arange, sorting,
take_along_axis, embedding, einsum, activations, rounding, remainders, logical ops
and clamp with tensor bounds; operands are drawn by tests/edge_draws.py).
Placeholders and outputs get hostile names (newlines, quotes, '#', backslashes,
unicode). Every op a builder declares reaches an output, so every value is compared.
An op whose type rule refuses its operands (relu of bool, say) is simply not drawn:
the builder's error is caught and the graph rebuilt from a copy without it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

import graphc as gc
from graphc.ir.errors import GraphcError
from graphc.ops.symbolic import Symbol
from tests.edge_draws import (
    FLOATS,
    SMALL_ALLOWED,
    SMALL_FLOATS,
    Draw,
    broadcasts,
    draw_axis,
    draw_dtype,
    floating,
    pick,
    scalar,
)
from tests.edge_layers import LAYER_BUILDERS
from tests.edge_values import edge_array

# concrete shapes: 0-d, empty, ones (broadcasting) and small
SHAPES: tuple[tuple[int | str, ...], ...] = (
    (),
    (0,),
    (1,),
    (3,),
    (2, 3),
    (3, 1),
    (1, 3),
    (0, 3),
    (2, 0),
    (2, 1, 3),
    (1, 2, 3, 3),
)
ONE_ELEMENT: tuple[tuple[int, ...], ...] = ((), (1,), (1, 1))
SYMBOLIC_SHAPES: tuple[tuple[int | str, ...], ...] = (
    ("B",),
    ("B", 3),
    ("B", 1),
    ("B", 2, 3),
    ("B", 2, 3, 3),
)

# names a plan's source must never run or choke on
HOSTILE_NAMES = (
    "x\nimport os",
    "a'b\"c",
    "#comment",
    "back\\slash\\n",
    "ü名🙂",
    '"""triple',
    "sp ace\t%tab",
    "{brace}",
    "x)\n  output %y = %x",
)

UNARY_FLOAT = ("exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "gelu")
UNARY_ANY = ("neg", "abs", "sign", "square", "relu")
BINARY = ("add", "sub", "mul", "div", "maximum", "minimum")
COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")
REDUCE = ("sum", "mean", "max", "min", "prod", "argmax", "argmin", "logsumexp", "var")


def _unary(draw: Draw, pool: list[Symbol]) -> Symbol:
    x = pick(draw, pool)
    names = (UNARY_FLOAT if floating(x) else ()) + UNARY_ANY
    return getattr(gc, draw(st.sampled_from(names)))(x)


def _binary(draw: Draw, pool: list[Symbol]) -> Symbol:
    x = pick(draw, pool)
    name = draw(st.sampled_from(BINARY))
    if draw(st.integers(0, 3)) == 0:
        y: Any = scalar(draw, x.dtype)
    else:
        y = draw(st.sampled_from([y for y in pool if broadcasts(x, y)]))
    if draw(st.booleans()):
        x, y = y, x
    return getattr(gc, name)(x, y)


def _compare_where(draw: Draw, pool: list[Symbol]) -> Symbol:
    x = pick(draw, pool)
    y = draw(st.sampled_from([y for y in pool if broadcasts(x, y)]))
    cond = getattr(gc, draw(st.sampled_from(COMPARE)))(x, y)
    if draw(st.booleans()):
        return cond
    a, b = (draw(st.sampled_from([v for v in pool if broadcasts(cond, v)])) for _ in range(2))
    return gc.where(cond, a, b)


def _cast(draw: Draw, pool: list[Symbol]) -> Symbol:
    return gc.cast(pick(draw, pool), draw_dtype(draw))


def _pow(draw: Draw, pool: list[Symbol]) -> Symbol:
    x = pick(draw, pool)
    exponents = [-2, -1, 0, 1, 2, 3, 0.5, 2.0, 3.0] if floating(x) else [0, 1, 2, 3]
    exponent = draw(st.sampled_from(exponents))
    if draw(st.booleans()):
        exponent = gc.constant(
            np.array(exponent, dtype=x.dtype if x.dtype.kind != "b" else "int64")
        )
    return gc.pow(x, exponent)


def _clip(draw: Draw, pool: list[Symbol]) -> Symbol:
    x = pick(draw, pool)
    if floating(x):
        bounds = [None, -1.0, 0.0, -0.0, 1.0, 1e30]
    else:
        bounds = [None, -3, 0, 2, 100]
    low, high = draw(st.sampled_from(bounds)), draw(st.sampled_from(bounds))
    if low is None and high is None:
        low = bounds[1]
    if low is not None and high is not None and low > high:
        low, high = high, low
    return gc.clip(x, low, high)


def _reduce(draw: Draw, pool: list[Symbol]) -> Symbol:
    x = pick(draw, pool)
    name = draw(st.sampled_from(REDUCE))
    axis = draw_axis(draw, x)
    keepdims = draw(st.booleans())
    if x.type.rank == 0 and draw(st.booleans()):
        axis = 0  # numpy allows axis 0 (and -1) on a 0-d array for most reductions
    return getattr(gc, name)(x, axis=axis, keepdims=keepdims)


def _softmax(draw: Draw, pool: list[Symbol]) -> Symbol:
    x = pick(draw, pool)
    axis = draw_axis(draw, x, allow_none=False)
    name = draw(st.sampled_from(["softmax", "log_softmax"]))
    return getattr(gc, name)(x, axis=-1 if axis is None else axis)


def _matmul(draw: Draw, pool: list[Symbol]) -> Symbol | None:
    x = draw(st.sampled_from([v for v in pool if v.type.rank >= 1] or [None]))
    if x is None:
        return None
    k = x.shape[-1]
    partners = [y for y in pool if y.type.rank >= 1 and y.shape[max(0, y.type.rank - 2)] == k]
    if partners and draw(st.booleans()):
        return gc.matmul(x, draw(st.sampled_from(partners)))
    dtype = x.dtype if x.dtype.kind != "b" else np.dtype("int64")
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    n = draw(st.sampled_from([0, 1, 2]))
    if draw(st.booleans()):  # a constant on the left: (n, m) @ x, m = x's row count
        m = x.shape[-2] if x.type.rank >= 2 else x.shape[0]
        if isinstance(m, str):
            return None
        return gc.matmul(gc.constant(rng.integers(-3, 4, (n, m)).astype(dtype)), x)
    if isinstance(k, str):
        return None
    return gc.matmul(x, gc.constant(rng.integers(-3, 4, (k, n)).astype(dtype)))


def _reshape(draw: Draw, pool: list[Symbol]) -> Symbol | None:
    x = pick(draw, pool)
    choice = draw(st.sampled_from(["reshape", "transpose", "broadcast_to", "squeeze", "unsqueeze"]))
    if choice == "transpose":
        axes = draw(st.permutations(range(x.type.rank)))
        return gc.transpose(x, tuple(axes))
    if choice == "unsqueeze":
        return gc.unsqueeze(x, draw(st.integers(-x.type.rank - 1, x.type.rank)))
    if choice == "squeeze":
        return gc.squeeze(x)
    if choice == "broadcast_to":
        lead = draw(st.sampled_from([(), (2,), (0,), (1,)]))
        shape = tuple(3 if d == 1 and draw(st.booleans()) else d for d in x.shape)
        return gc.broadcast_to(x, lead + shape)
    if not x.type.is_concrete:
        # keep the batch dim, flatten the rest
        if isinstance(x.shape[0], str) and all(isinstance(d, int) for d in x.shape[1:]):
            rest = int(np.prod(x.shape[1:], dtype=np.int64))
            return gc.reshape(x, (x.shape[0], rest))
        return None
    size = x.type.size
    if size == 0:
        shape = draw(st.sampled_from([(0,), (0, 5), (3, 0, 1)]))
    else:
        factors = [d for d in range(1, size + 1) if size % d == 0]
        first = draw(st.sampled_from(factors))
        shape = draw(st.sampled_from([(size,), (first, size // first), (size // first, 1, first)]))
        if size == 1:
            shape = draw(st.sampled_from([(), (1,), (1, 1)]))
    return gc.reshape(x, shape)


def _slice_item(draw: Draw, dim: int | str) -> Any:
    if isinstance(dim, str):
        # on a symbolic dim only ':' and windows with non-negative bounds are allowed
        return draw(
            st.sampled_from(
                [slice(None), slice(0, 2), slice(1, 3), slice(0, 1), slice(0, 0), slice(0, 3, 2)]
            )
        )
    options = [
        slice(None),
        slice(1, None),
        slice(None, -1),
        slice(None, None, -1),
        slice(0, 0),
        slice(-2, None),
        slice(None, None, 2),
        slice(5, 1, -2),
    ]
    if dim > 0:
        options += [0, -1, dim - 1]
    return draw(st.sampled_from(options))


def _getitem(draw: Draw, pool: list[Symbol]) -> Symbol | None:
    candidates = [v for v in pool if v.type.rank >= 1]
    if not candidates:
        return None
    x = draw(st.sampled_from(candidates))
    count = draw(st.integers(1, x.type.rank))
    index = tuple(_slice_item(draw, d) for d in x.shape[:count])
    if draw(st.integers(0, 4)) == 0:
        index = (None, *index)
    return x[index if len(index) > 1 else index[0]]


def _take(draw: Draw, pool: list[Symbol]) -> Symbol | None:
    candidates = [(v, a) for v in pool for a in range(v.type.rank) if isinstance(v.shape[a], int)]
    if not candidates:
        return None
    x, axis = draw(st.sampled_from(candidates))
    size = x.shape[axis]
    count = draw(st.sampled_from([0, 1, 2, 4]))
    if size == 0:
        count = 0
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    indices = rng.integers(-size, size, count) if size else np.zeros(0, np.int64)
    dtype = draw(st.sampled_from(["int64", "int32"]))
    if draw(st.integers(0, 3)) == 0 and count:
        indices = indices.reshape(count, 1) if count else indices
    return gc.take(x, gc.constant(indices.astype(dtype)), axis=axis)


def _concat(draw: Draw, pool: list[Symbol]) -> Symbol | None:
    x = pick(draw, pool)
    if x.type.rank == 0:
        return None
    axis = draw(st.integers(0, x.type.rank - 1))
    if isinstance(x.shape[axis], str):
        # a symbolic total is one symbol: only empty pieces may join it (x[0:0] on "B")
        empty = x[tuple(slice(0, 0) if i == axis else slice(None) for i in range(x.type.rank))]
        pieces = [empty, x] if draw(st.booleans()) else [x, empty]
        return gc.concat(pieces, axis=axis)
    others = [
        v
        for v in pool
        if v.type.rank == x.type.rank
        and isinstance(v.shape[axis], int)
        and all(a == b for i, (a, b) in enumerate(zip(v.shape, x.shape)) if i != axis)
    ]
    pieces = [x, *draw(st.lists(st.sampled_from(others), min_size=1, max_size=2))]
    return gc.concat(draw(st.permutations(pieces)), axis=axis)


def _constant(draw: Draw, pool: list[Symbol]) -> Symbol:
    """A hostile constant array: ops on it are folded at O1 and O2, by the op's kernel."""
    shape = draw(st.sampled_from([s for s in SHAPES if all(isinstance(d, int) for d in s)]))
    dtype = draw_dtype(draw)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    return gc.constant(edge_array(rng, shape, dtype))


def _misc(draw: Draw, pool: list[Symbol]) -> Symbol | None:
    """The rarer ops: full_like, stack, one_hot, sum_to, var with ddof, swapaxes, mse_loss."""
    x = pick(draw, pool)
    choice = draw(
        st.sampled_from(["full_like", "stack", "one_hot", "sum_to", "var", "swapaxes", "mse"])
    )
    if choice == "full_like":
        value = scalar(draw, draw_dtype(draw))
        value = value if not isinstance(value, Symbol) else draw(st.sampled_from([-1, 0, 1.5]))
        return gc.full_like(x, value)
    if choice == "stack":
        others = [v for v in pool if v.shape == x.shape]
        pieces = [x, *draw(st.lists(st.sampled_from(others), max_size=2))]
        return gc.stack(pieces, axis=draw(st.integers(-x.type.rank - 1, x.type.rank)))
    if choice == "one_hot":
        labels = x if x.dtype.kind in "iu" else gc.cast(x, "int64")
        return gc.one_hot(labels, draw(st.sampled_from([0, 1, 3])), draw_dtype(draw))
    if choice == "sum_to":
        shape = tuple(1 if draw(st.booleans()) else d for d in x.shape)
        return gc.sum_to(x, shape[draw(st.integers(0, len(shape))) :])
    if choice == "var":
        return gc.var(x, axis=draw_axis(draw, x), ddof=draw(st.sampled_from([0, 1])))
    if choice == "swapaxes" and x.type.rank >= 2:
        return gc.swapaxes(x, 0, -1)
    if choice == "mse":
        partners = [v for v in pool if v.shape == x.shape]
        return gc.mse_loss(x, draw(st.sampled_from(partners)))
    return None


BUILDERS = (
    _misc,
    *LAYER_BUILDERS[:2],  # convolution and pooling: early, as hypothesis draws those more
    _constant,
    _unary,
    _unary,
    _binary,
    _binary,
    _compare_where,
    _cast,
    _pow,
    _clip,
    _reduce,
    _reduce,
    _softmax,
    _matmul,
    _reshape,
    _getitem,
    _take,
    _concat,
    *LAYER_BUILDERS[2:],
)


def _name(draw: Draw, plain: str) -> str:
    """`plain`, or (one time in three) a hostile name ending in it, so names stay unique."""
    if draw(st.integers(0, 2)) == 0:
        return draw(st.sampled_from(HOSTILE_NAMES)) + plain
    return plain


@st.composite
def edge_graphs(
    draw: Draw,
    min_ops: int = 2,
    max_ops: int = 8,
    symbolic: bool | None = None,
    float_input: bool = False,
    small_dtypes: bool = True,
) -> gc.Graph:
    """A valid graph of `min_ops`..`max_ops` drawn ops over 1-3 placeholders of any dtype,
    every op reaching an output; with `symbolic` (drawn when None) some use the dim "B";
    with `float_input` the first placeholder is floating (gradient graphs need one);
    without `small_dtypes` only float32/64, int32/64 and bool are drawn."""
    token = SMALL_ALLOWED.set(small_dtypes)
    try:
        return _edge_graph(draw, min_ops, max_ops, symbolic, float_input)
    finally:
        SMALL_ALLOWED.reset(token)


def _edge_graph(
    draw: Draw, min_ops: int, max_ops: int, symbolic: bool | None, float_input: bool
) -> gc.Graph:
    if symbolic is None:
        symbolic = draw(st.booleans())
    shapes = SHAPES + SYMBOLIC_SHAPES * 2 if symbolic else SHAPES
    if not symbolic and draw(st.integers(0, 3)) == 0:
        shapes = ONE_ELEMENT  # every value one element: plans on numpy scalars (scalar.py)
    count = draw(st.integers(1, 3))
    specs = [(draw(st.sampled_from(shapes)), draw_dtype(draw)) for _ in range(count)]
    if symbolic and not any("B" in shape for shape, _ in specs):
        specs[0] = (draw(st.sampled_from(SYMBOLIC_SHAPES)), specs[0][1])
    if float_input and specs[0][1] not in FLOATS + SMALL_FLOATS:
        specs[0] = (specs[0][0], draw_dtype(draw, floats=True))
    graph = gc.Graph("edge")
    with graph:
        pool = [
            gc.placeholder(_name(draw, f"x{i}"), shape=shape, dtype=dtype)
            for i, (shape, dtype) in enumerate(specs)
        ]
        target = draw(st.integers(min_ops, max_ops))
        for _ in range(4 * target):
            if len(pool) - count >= target:
                break
            try:
                value = draw(st.sampled_from(BUILDERS))(draw, pool)
            except GraphcError:
                # the op's type rule refused (relu of bool, an int to a float power...):
                # the nodes declared before it stay, and reach an output below
                continue
            if value is not None:
                pool.append(value)
        users = graph.users()
        leaves = [Symbol(n) for n in graph.op_nodes if not n.is_constant and not users.get(n)]
        extra = draw(st.lists(st.sampled_from(pool), min_size=0 if leaves else 1, max_size=2))
        for i, value in enumerate(leaves + extra):
            gc.output(value, name=_name(draw, f"out{i}"))
    return graph
