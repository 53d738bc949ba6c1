"""torch's composite functions and Tensor methods, a few op functions each: `roll`, `lerp`,
`addcmul`, `addcdiv`, `matrix_trace` (torch.trace), `diff`, `aminmax`, `frac`,
`count_nonzero`, `unflatten`, `tensor_split`, `is_floating_point`, `vector_norm`
(Tensor.norm), `dist`, `logcumsumexp`, `rot90`, `unfold`, `inner`, `matrix_power`,
`diag_embed`, `diagflat`, `narrow_copy`.

They apply graphc's op functions, so one call records nodes on graph values and
computes (with a tape entry) on eager tensors: `ValueMethods` gives both kinds them as
methods, and they are `gc.roll`, `gc.lerp`, ... (torch.trace is `gc.matrix_trace`: the
name `gc.trace` is the tracer). The eager Tensor names each result's node as torch does
(`RollBackward0`, ...). Arguments are torch's, with numpy's `axis=` beside `dim=` where
numpy has the function (roll, diff, count_nonzero).

>>> import numpy as np, graphc as gc
>>> g = gc.trace(lambda x: x.roll(1, 0).lerp(x, 0.25), gc.TensorSpec((3,)))
>>> [n.op for n in g.nodes if n.kind == "op" and n.op != "constant"]
['slice', 'slice', 'concat', 'sub', 'mul', 'add']
>>> gc.roll(np.arange(4), 1).tolist()
[3, 0, 1, 2]
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from graphc.ir.errors import ArgumentError, DTypeError, IndexRangeError, ShapeError
from graphc.ir.types import format_shape, is_float, is_symbol, normalize_axis
from graphc.ops import arrays, linalg, padding, rounding, sequences
from graphc.ops import elementwise as E
from graphc.ops import indexing as I
from graphc.ops import logical as L
from graphc.ops import reduce as R
from graphc.ops import shape as S
from graphc.ops.dispatch import dtype_of, is_python_scalar
from graphc.ops.spelling import pick_axis

__all__ = [
    "addcdiv",
    "addcmul",
    "aminmax",
    "count_nonzero",
    "diag_embed",
    "diagflat",
    "diff",
    "dist",
    "frac",
    "inner",
    "is_floating_point",
    "lerp",
    "logcumsumexp",
    "matrix_power",
    "matrix_trace",
    "narrow_copy",
    "roll",
    "rot90",
    "tensor_split",
    "unflatten",
    "unfold",
]


class MinMaxPair(NamedTuple):
    """What `aminmax` returns, as torch.return_types.aminmax."""

    min: Any
    max: Any


def narrow(x: Any, axis: int, start: Any, length: Any) -> Any:
    """`length` entries of axis `axis` (already normalized) from `start`: a `slice` op."""
    return I.slice_(x, index=(slice(None),) * axis + (slice(start, start + length),))


def known_size(size: Any, op: str, axis: int, shape: tuple) -> int:
    if is_symbol(size):
        raise ShapeError(
            f"{op}: dim {axis} of shape {format_shape(shape)} is symbolic, and {op} needs "
            "its size while the graph is built"
        )
    return int(size)


def roll(x: Any, shifts: Any, dims: Any = None, *, axis: Any = None) -> Any:
    """x's elements shifted by `shifts` along `dims`, those pushed off the end coming
    back at the start (torch.roll; np.roll's `axis=` works too). Without dims, x is
    rolled as if flattened, keeping its shape. A shift may be negative or larger than
    the dim; the result is always new memory.

    >>> import numpy as np, graphc as gc
    >>> gc.roll(np.arange(6).reshape(2, 3), -1, dims=1).tolist()
    [[1, 2, 0], [4, 5, 3]]
    """
    dims = pick_axis(axis, dims, "roll", names=("axis", "dims"))
    if dims is None:
        if isinstance(shifts, (tuple, list)) and len(shifts) != 1:
            raise ShapeError(
                f"roll: {len(shifts)} shifts need as many dims, got dims=None (which rolls "
                "the flattened value by one shift)"
            )
        flat = S.reshape(x, (-1,))
        return S.reshape(roll(flat, shifts, 0), x.shape)
    shifts = tuple(shifts) if isinstance(shifts, (tuple, list)) else (shifts,)
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    if len(shifts) != len(dims):
        raise ShapeError(f"roll: {len(shifts)} shifts but {len(dims)} dims; give one per dim")
    shape = tuple(x.shape)
    if not shape:
        raise IndexRangeError("roll: a 0-d value has no dims to roll along (give dims=None)")
    out = x
    for shift, dim in zip(shifts, dims):
        axis = normalize_axis(dim, len(shape), "roll")
        if is_symbol(shape[axis]):
            out = _roll_symbolic(out, int(shift), axis)
            continue
        size = int(shape[axis])
        cut = size - int(shift) % size if size else 0
        if 0 < cut < size:  # the last `size - cut` elements move to the front
            tail, head = narrow(out, axis, cut, size - cut), narrow(out, axis, 0, cut)
            out = S.concat([tail, head], axis=axis)
    return E.cast(out, x.dtype) if out is x else out  # whole turns: still a copy


def _roll_symbolic(x: Any, shift: int, axis: int) -> Any:
    """roll along a dim whose size is known when the graph runs: a take of the positions
    (i - shift) mod size, the size counted from an arange of the dim."""
    positions = sequences.arange(x.shape[axis])
    size = E.maximum(R.sum(E.full_like(positions, 1)), 1)  # 1 for an empty dim: no zero
    return I.take(x, rounding.remainder(E.sub(positions, shift), size), axis=axis)


def lerp(start: Any, end: Any, weight: Any) -> Any:
    """start + weight * (end - start), of floating-point values (torch.lerp).

    >>> import numpy as np, graphc as gc
    >>> gc.lerp(np.array([0.0, 2.0]), np.array([4.0, 4.0]), 0.25).tolist()
    [1.0, 2.5]
    """
    for name, value in (("start", start), ("end", end)):
        if not is_float(dtype_of(value)):
            raise DTypeError(
                f"lerp: {name} must be of a floating-point dtype, got {dtype_of(value)}"
            )
    return E.add(start, E.mul(weight, E.sub(end, start)))


def _weak_value(value: Any, x: Any, op: str) -> Any:
    """torch casts `value=` to x's dtype: a float value for an int x is truncated."""
    if not is_python_scalar(value):
        raise DTypeError(f"{op}: value must be a Python number, got {type(value).__name__}")
    if isinstance(value, float) and not is_float(dtype_of(x)):
        return int(value)
    return value


def addcmul(x: Any, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Any:
    """x + value * tensor1 * tensor2 (torch.addcmul)."""
    product = E.mul(tensor1, tensor2)
    value = _weak_value(value, x, "addcmul")
    return E.add(x, product if value == 1 else E.mul(product, value))


def addcdiv(x: Any, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Any:
    """x + value * tensor1 / tensor2 (torch.addcdiv); an integer quotient is refused,
    as torch refuses it."""
    if not (is_float(dtype_of(tensor1)) or is_float(dtype_of(tensor2))):
        raise DTypeError(
            f"addcdiv: tensor1 and tensor2 are both integers ({dtype_of(tensor1)}, "
            f"{dtype_of(tensor2)}): integer division is not supported; cast one to a float"
        )
    quotient = E.div(tensor1, tensor2)
    value = _weak_value(value, x, "addcdiv")
    return E.add(x, quotient if value == 1 else E.mul(quotient, value))


def matrix_trace(x: Any) -> Any:
    """The sum of a matrix's diagonal (torch.trace; integers summed in int64).

    >>> import numpy as np, graphc as gc
    >>> int(gc.matrix_trace(np.arange(6).reshape(2, 3)))
    4
    """
    if len(x.shape) != 2:
        raise ShapeError(f"trace: expected a matrix, got a value of shape {format_shape(x.shape)}")
    if dtype_of(x) == np.bool_:
        raise DTypeError("trace: not defined for bool values (cast to an integer dtype first)")
    return R.sum(arrays.diagonal(x, 0, 0, 1))


def diff(
    x: Any,
    n: int = 1,
    dim: int | None = None,
    prepend: Any = None,
    append: Any = None,
    *,
    axis: int | None = None,
) -> Any:
    """The n-th forward difference along dim (the last by default), after joining
    prepend and append to x there (torch.diff, np.diff); of bools, `!=` (logical xor).

    >>> import numpy as np, graphc as gc
    >>> gc.diff(np.array([1, 4, 9, 16]), n=2).tolist()
    [2, 2]
    """
    axis = pick_axis(axis, dim, "diff", default=-1)
    if not x.shape:
        raise ShapeError("diff: expects a value of at least one dim, got a 0-d one")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ShapeError(f"diff: n must be a non-negative int, got {n!r}")
    axis = normalize_axis(axis, len(x.shape), "diff")
    parts = [_along(p, x, axis, name) for p, name in ((prepend, "prepend"), (append, "append"))]
    if parts[0] is not None or parts[1] is not None:
        x = S.concat([p for p in (parts[0], x, parts[1]) if p is not None], axis=axis)
    if n:
        known_size(x.shape[axis], "diff", axis, tuple(x.shape))
    before = (slice(None),) * axis
    out = x
    for _ in range(int(n)):  # past the size, empty minus empty: empty, as torch
        later = I.slice_(out, index=(*before, slice(1, None)))
        earlier = I.slice_(out, index=(*before, slice(None, -1)))
        boolean = dtype_of(out) == np.bool_
        out = L.logical_xor(later, earlier) if boolean else E.sub(later, earlier)
    return out


def _along(part: Any, x: Any, axis: int, name: str) -> Any:
    """A prepend or append of diff: a value of x's rank, or a number or 0-d value spread
    over x's shape with size 1 along axis (numpy's)."""
    if part is None:
        return None
    shape = tuple(np.shape(part)) if not hasattr(part, "shape") else tuple(part.shape)
    if not shape:
        target = tuple(1 if d == axis else size for d, size in enumerate(x.shape))
        return S.broadcast_to(part, target)
    if len(shape) != len(x.shape):
        raise ShapeError(
            f"diff: {name} must have the rank of the input ({len(x.shape)}), got shape "
            f"{format_shape(shape)}"
        )
    return part


def aminmax(x: Any, *, dim: Any = None, keepdim: bool = False) -> MinMaxPair:
    """(min, max) of all elements or along dim, as torch.aminmax (a tie shares its
    gradient, as amin and amax do).

    >>> import numpy as np, graphc as gc
    >>> [v.tolist() for v in gc.aminmax(np.array([[3, 1], [2, 5]]), dim=1)]
    [[1, 2], [3, 5]]
    """
    return MinMaxPair(R.min(x, axis=dim, keepdims=keepdim), R.max(x, axis=dim, keepdims=keepdim))


def frac(x: Any) -> Any:
    """The fractional part, with x's sign: x - trunc(x) (torch.frac), of floats."""
    if not is_float(dtype_of(x)):
        raise DTypeError(f"frac: expects a floating-point value, got {dtype_of(x)}")
    return E.sub(x, rounding.trunc(x))


def count_nonzero(x: Any, dim: Any = None, *, axis: Any = None, keepdims: bool = False) -> Any:
    """How many elements are not 0 (over dim or dims), as int64 (torch's, numpy's)."""
    axis = pick_axis(axis, dim, "count_nonzero")
    return R.sum(E.cast(E.ne(x, 0), np.int64), axis=axis, keepdims=keepdims)


def unflatten(x: Any, dim: int, sizes: Any) -> Any:
    """Dim `dim` split into several of `sizes`, one of which may be -1 (torch's)."""
    shape = tuple(x.shape)
    if not shape:
        raise IndexRangeError("unflatten: a 0-d value has no dim to unflatten")
    axis = normalize_axis(dim, len(shape), "unflatten")
    sizes = tuple(sizes)
    known = [s for s in sizes if s != -1]
    if not is_symbol(shape[axis]) and not any(is_symbol(s) for s in known):
        product = int(np.prod(known, dtype=np.int64))
        fits = shape[axis] % product == 0 if -1 in sizes and product else shape[axis] == product
        if sizes.count(-1) > 1 or not fits:
            raise ShapeError(
                f"unflatten: sizes {list(sizes)} do not multiply up to the size of dim {axis} "
                f"({shape[axis]}) of shape {format_shape(shape)}"
            )
    return S.reshape(x, (*shape[:axis], *sizes, *shape[axis + 1 :]))


def tensor_split(
    x: Any, indices_or_sections: Any, dim: int | None = None, *, axis: int | None = None
) -> tuple:
    """x cut along dim into n parts whose sizes differ by at most one (the first ones
    larger), or at the given indices (parts may be empty; a negative index counts from
    the end), as torch.tensor_split and np.array_split. The count or the indices must be
    known while the graph is built.

    >>> import numpy as np, graphc as gc
    >>> [p.tolist() for p in gc.tensor_split(np.arange(5), 2)]
    [[0, 1, 2], [3, 4]]
    """
    axis = pick_axis(axis, dim, "tensor_split", default=0)
    shape = tuple(x.shape)
    if not shape:
        raise ShapeError("tensor_split: expects a value of at least one dim, got a 0-d one")
    axis = normalize_axis(axis, len(shape), "tensor_split")
    length = known_size(shape[axis], "tensor_split", axis, shape)
    split = _split_points(indices_or_sections)
    if isinstance(split, int):
        if split < 1:
            raise ShapeError(
                f"tensor_split: the number of sections must be at least 1, got {split}"
            )
        size, extra = divmod(length, split)
        counts = [size + 1] * extra + [size] * (split - extra)
        cuts = [0, *np.cumsum(counts).tolist()]
    else:
        inner = [min(max(i + length if i < 0 else i, 0), length) for i in split]
        cuts = [0, *inner, length]
    # each part runs from one cut to the next (empty where that is not further on)
    return tuple(narrow(x, axis, a, max(b - a, 0)) for a, b in zip(cuts, cuts[1:]))


def _split_points(value: Any) -> int | list[int]:
    """tensor_split's second argument as a count or a list of indices; a 0-d integer
    array (or tensor) is a count, a 1-d one indices."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, (tuple, list)):
        array = np.asarray(value, dtype=np.int64) if value else np.zeros(0, np.int64)
    else:
        array = np.asarray(value)  # a graph value refuses this with a TracingError
    if array.dtype.kind not in "iu" or array.ndim > 1:
        raise DTypeError(
            "tensor_split: indices_or_sections must be an int or a 1-d list of ints, got "
            f"{array.dtype} of shape {array.shape}"
        )
    return int(array) if array.ndim == 0 else [int(i) for i in array]


def is_floating_point(x: Any) -> bool:
    """Whether x's dtype is a floating-point one (torch's; no op is applied)."""
    return is_float(dtype_of(x))


def vector_norm(x: Any, p: Any = 2, dim: Any = None, keepdim: bool = False) -> Any:
    """torch's vector p-norm over dim (all elements by default): p = 2 ("fro"), 1, inf,
    -inf, 0 (the count of nonzeros) or any other number; the gradient is 0 at a 2-norm
    of 0, as torch's."""
    if p in ("fro", 2):  # gradient 0 at a norm of 0, as torch
        return E.root_flat_at_zero(R.sum(x * x, axis=dim, keepdims=keepdim))
    if p == 1:
        return R.sum(E.abs(x), axis=dim, keepdims=keepdim)
    if p == float("inf"):
        return R.max(E.abs(x), axis=dim, keepdims=keepdim)
    if p == -float("inf"):
        return R.min(E.abs(x), axis=dim, keepdims=keepdim)
    if p == 0:
        nonzero = E.cast(E.ne(x, 0), x.dtype)
        return R.sum(nonzero, axis=dim, keepdims=keepdim)
    if isinstance(p, (int, float)) and not isinstance(p, bool):
        powered = R.sum(E.abs(x) ** p, axis=dim, keepdims=keepdim)
        return powered ** (1.0 / p)
    raise ArgumentError(f"norm: p must be a number or 'fro', got {p!r}")


def dist(x: Any, other: Any, p: Any = 2) -> Any:
    """The p-norm of x - other (torch.dist)."""
    return vector_norm(E.sub(x, other), p)


def logcumsumexp(x: Any, dim: int) -> Any:
    """log(cumsum(exp(x))) along dim, as running `logaddexp`s (an associative scan), so
    that no prefix overflows or underflows (torch.logcumsumexp)."""
    if not x.shape:
        normalize_axis(dim, 0, "logcumsumexp")
        return E.cast(x, dtype_of(x))
    axis = normalize_axis(dim, len(x.shape), "logcumsumexp")
    from graphc.ops.parallel_scan import associative_scan  # it imports symbolic, which us

    return associative_scan(E.logaddexp, x, axis=axis)


def rot90(x: Any, k: int = 1, dims: Any = (0, 1)) -> Any:
    """x turned by k quarter turns in the plane of dims, from the first towards the
    second (torch.rot90, np.rot90's axes)."""
    if len(dims) != 2:
        raise ShapeError(f"rot90: dims must name two dims, got {dims!r}")
    rank = len(x.shape)
    first, second = (normalize_axis(d, rank, "rot90") for d in dims)
    if first == second:
        raise ShapeError(f"rot90: dims must be two different dims, got {tuple(dims)}")
    turns = int(k) % 4
    if turns == 0:
        return E.cast(x, dtype_of(x))
    if turns == 2:
        return arrays.flip(x, (first, second))
    if turns == 1:
        return S.swapaxes(arrays.flip(x, (second,)), first, second)
    return arrays.flip(S.swapaxes(x, first, second), (second,))


def unfold(x: Any, dimension: int, size: int, step: int) -> Any:
    """The windows of `size` entries along `dimension`, `step` apart, as a new last dim
    (that dim then counts the windows): torch's Tensor.unfold."""
    shape = tuple(x.shape)
    axis = normalize_axis(dimension, max(len(shape), 1), "unfold")
    length = known_size(shape[axis], "unfold", axis, shape) if shape else 1
    if not 0 <= size <= length or step < 1:
        raise ShapeError(
            f"unfold: size {size} must be in [0, {length}] (the size of dim {axis}) and "
            f"step {step} at least 1"
        )
    starts = np.arange(0, length - size + 1, step)
    windows = starts[:, None] + np.arange(size)[None, :]
    picked = I.take(x if shape else S.reshape(x, (1,)), windows, axis=axis)
    return S.moveaxis(picked, axis + 1, -1)


def inner(x: Any, other: Any) -> Any:
    """Sums of products over the last dims of x and other (torch.inner, np.inner); a
    number times a value when either is 0-d."""
    if not x.shape or not other.shape:
        return E.mul(x, other)
    return linalg.tensordot(x, other, axes=([-1], [-1]))


def matrix_power(x: Any, n: int) -> Any:
    """x (a matrix, or a batch of them) multiplied by itself n times, n >= 0 (the
    identity for 0), as torch.matrix_power and np.linalg.matrix_power."""
    shape = tuple(x.shape)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ShapeError(f"matrix_power: expects square matrices, got shape {format_shape(shape)}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ShapeError(
            f"matrix_power: n must be a non-negative int (graphc has no matrix inverse), got {n!r}"
        )
    size = known_size(shape[-1], "matrix_power", len(shape) - 1, shape)
    if n == 0:
        # ones of x's kind (a graph value, a tensor) times the identity: no gradient to x
        return E.mul(E.full_like(x, 1), np.eye(size, dtype=dtype_of(x)))
    result, power, n = None, x, int(n)
    while n:  # by squaring: log2(n) products
        if n & 1:
            result = power if result is None else linalg.matmul(result, power)
        n >>= 1
        if n:
            power = linalg.matmul(power, power)
    return result


def diag_embed(x: Any, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Any:
    """Matrices whose `offset` diagonal holds x's last dim, zeros elsewhere, the two new
    dims at dim1 and dim2 of the result (torch.diag_embed).

    >>> import numpy as np, graphc as gc
    >>> gc.diag_embed(np.array([1, 2]), 1).tolist()
    [[0, 1, 0], [0, 0, 2], [0, 0, 0]]
    """
    if not x.shape:
        raise ShapeError("diag_embed: expects a value of at least one dim, got a 0-d one")
    rank = len(x.shape) + 1
    first, second = (normalize_axis(d, rank, "diag_embed") for d in (dim1, dim2))
    if first == second:
        raise ShapeError(f"diag_embed: dim1 and dim2 must differ, got {dim1} and {dim2}")
    length = known_size(x.shape[-1], "diag_embed", rank - 2, tuple(x.shape))
    size = length + abs(int(offset))
    # row r holds x[r] (offset >= 0) or x[r + offset]: x padded with |offset| zeros after
    # (or before), spread along the row and kept only on the diagonal
    pad = [(0, 0)] * (rank - 2) + [(0, abs(int(offset))) if offset >= 0 else (abs(int(offset)), 0)]
    rows = S.expand_dims(padding.pad(x, pad), -1)
    square = E.where(np.eye(size, size, int(offset), dtype=np.bool_), rows, 0)
    if (first, second) == (rank - 2, rank - 1):
        return square
    if first > second:  # torch fills dim1 with rows: swap them and place the pair
        square, first, second = S.swapaxes(square, -2, -1), second, first
    return S.moveaxis(square, (rank - 2, rank - 1), (first, second))


def diagflat(x: Any, offset: int = 0) -> Any:
    """A matrix with x's elements (flattened) on its `offset` diagonal (np.diagflat)."""
    return arrays.diag(S.reshape(x, (-1,)), offset)


def narrow_copy(x: Any, dim: int, start: int, length: int) -> Any:
    """A copy of `length` entries of dim from `start` (torch's narrow_copy): a slice."""
    axis = normalize_axis(dim, len(x.shape), "narrow_copy")
    size = known_size(x.shape[axis], "narrow_copy", axis, tuple(x.shape))
    begin = int(start) + (size if start < 0 else 0)
    if not 0 <= begin <= begin + length <= size:
        raise IndexRangeError(
            f"narrow_copy: start {start} + length {length} exceeds dim {axis} of size {size}"
        )
    return E.cast(narrow(x, axis, begin, length), x.dtype)
