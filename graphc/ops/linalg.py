"""matmul, numpy's semantics: 1-D operands are promoted and squeezed, batches broadcast;
contract_rows (the weight gradient of rows times a matrix); and the builders outer, dot
and tensordot."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from graphc.ir.errors import GraphcError, ShapeError
from graphc.ir.types import TensorType, broadcast_shapes, format_shape, normalize_axis
from graphc.ops import elementwise as E
from graphc.ops import shape as S
from graphc.ops.defop import defop, ufunc_dtype
from graphc.ops.spelling import merged_dim, shape_of


def _matmul_infer(a: TensorType, b: TensorType) -> TensorType:
    if a.rank == 0 or b.rank == 0:
        raise ShapeError("matmul: operands must have at least one dim (use mul for scalars)")
    a_shape = (1,) + a.shape if a.rank == 1 else a.shape
    b_shape = b.shape + (1,) if b.rank == 1 else b.shape
    if a_shape[-1] != b_shape[-2]:
        raise ShapeError(
            f"matmul: inner dims differ: {format_shape(a.shape)} @ {format_shape(b.shape)} "
            f"({a_shape[-1]!r} vs {b_shape[-2]!r})"
        )
    batch = broadcast_shapes(a_shape[:-2], b_shape[:-2], op="matmul")
    shape = batch + (a_shape[-2],) * (a.rank > 1) + (b_shape[-1],) * (b.rank > 1)
    return TensorType(shape, ufunc_dtype(np.matmul, "matmul", a.dtype, b.dtype))


def _is_transposed_matrix(x: Any) -> bool:
    """Whether `x` is a 2-d transpose of another value (a Linear layer's ``x @ w.T``):
    a graph value made by transpose, or an eager tensor whose recorded backward is
    transpose's. Both engines see the same thing, so they choose the same formula."""
    return len(x.shape) == 2 and getattr(x, "made_by", None) == "transpose"


def _matmul_vjp(ct: Any, out: Any, a: Any, b: Any, needs: tuple) -> tuple:
    # d(AB) = dA B + A dB, so ct_A = ct B^T and ct_B = A^T ct (then undo batch broadcasting)
    a2 = S.expand_dims(a, 0) if len(a.shape) == 1 else a
    b2 = S.expand_dims(b, -1) if len(b.shape) == 1 else b
    ct2 = ct
    if len(a.shape) == 1:
        ct2 = S.expand_dims(ct2, -2 if len(b.shape) > 1 else -1)
    if len(b.shape) == 1:
        ct2 = S.expand_dims(ct2, -1)
    ga = gb = None
    # sum the batch dims away against the promoted operand first, then drop the
    # promoted dim: a 1-D operand against a batched one gets a batch of gradients
    if needs[0]:
        ga = E.unbroadcast(matmul(ct2, S.swapaxes(b2, -1, -2)), a2)
        ga = S.reshape(ga, a.shape) if len(a.shape) == 1 else ga
    if (
        needs[1]
        and len(a.shape) >= 2
        and a.dtype == b.dtype == ct.dtype
        and _is_transposed_matrix(b)
    ):
        # b = w^T: b's gradient as the transpose of w's, computed in w's layout (as
        # torch's linear computes grad_weight = grad_out^T input), so that the two
        # transposes cancel in w's gradient and w's update reads it in order
        gw = matmul(S.swapaxes(ct, 0, 1), a) if len(a.shape) == 2 else contract_rows(ct, a)
        gb = S.swapaxes(gw, 0, 1)
    elif needs[1] and len(b.shape) == 2 and len(a.shape) > 2:
        # a batch of activations times one weight: the weight's gradient is one GEMM
        # over every row of the batch (as torch's linear), not a GEMM per batch entry
        # and a sum of their (k, n) products
        gb = E.unbroadcast(contract_rows(a, ct), b)  # in b's dtype (ct may be wider)
    elif needs[1]:
        gb = E.unbroadcast(matmul(S.swapaxes(a2, -1, -2), ct2), b2)
        gb = S.reshape(gb, b.shape) if len(b.shape) == 1 else gb
    return ga, gb


BLAS_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _dense(x: np.ndarray) -> bool:
    return x.flags.c_contiguous or x.flags.f_contiguous


def _product(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """a @ b for 2-d operands into `out`. Where both are dense (C or F order) arrays of
    one BLAS float type and `out` a C-contiguous one, np.dot: numpy makes the same BLAS
    call for dot and matmul there (the same bits, a @ a.T's syrk included:
    tests/ops/test_matmul_kernel.py), and dot's costs 0.35 us less, a third of a one-row
    product's time. Strided operands stay matmul's: it may run its own loop on them
    where dot copies them for BLAS; and so does a 1 x 1 product, which dot computes as a
    scalar multiply (0 * -1 is -0.0 there, +0.0 from matmul's sum)."""
    if (
        out.size > 1
        and a.dtype == b.dtype == out.dtype
        and a.dtype in BLAS_DTYPES
        and out.flags.c_contiguous
        and _dense(a)
        and _dense(b)
    ):
        return np.dot(a, b, out=out)
    return np.matmul(a, b, out=out)


def _matmul_kernel(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """np.matmul; C-contiguous rows times one matrix, into a C-contiguous buffer, are one
    GEMM over all the rows, where numpy calls one per batch entry (1.6-2.2x slower at a
    transformer's shapes). Strided rows stay numpy's (a copy would be hidden scratch);
    every value has one layout at every level (docs/trust.md), so the levels agree."""
    if a.ndim == 2 and b.ndim == 2:  # with or without `out`: one call, so the same bits
        if out is None:
            out = np.empty((a.shape[0], b.shape[1]), np.result_type(a.dtype, b.dtype))
        return _product(a, b, out)
    if a.ndim < 3 or b.ndim != 2 or not a.flags.c_contiguous:
        return np.matmul(a, b, out=out)
    if out is None:
        out = np.empty((*a.shape[:-1], b.shape[1]), np.result_type(a.dtype, b.dtype))
    elif not out.flags.c_contiguous:
        return np.matmul(a, b, out=out)
    rows = math.prod(a.shape[:-1])
    _product(a.reshape(rows, a.shape[-1]), b, out.reshape(rows, b.shape[1]))
    return out


def _matmul_cost(out: TensorType, a: TensorType, b: TensorType) -> int:
    inner = a.shape[-1]
    return 2 * (out.size or 0) * (inner if isinstance(inner, int) else 1)


matmul = defop(
    "matmul",
    inputs=("x", "y"),
    infer=_matmul_infer,
    kernel=_matmul_kernel,
    vjp=_matmul_vjp,
    cost=_matmul_cost,
    doc="Matrix product with numpy's rules (batched, 1-D promoted). gc.matmul(x, w) is x @ w",
)


def _contract_rows_infer(x: TensorType, y: TensorType) -> TensorType:
    if x.rank == 0 or y.rank == 0 or x.shape[:-1] != y.shape[:-1]:
        raise ShapeError(
            f"contract_rows: operands need the same leading dims and at least one dim, got "
            f"{format_shape(x.shape)} and {format_shape(y.shape)}"
        )
    return TensorType(
        (x.shape[-1], y.shape[-1]), ufunc_dtype(np.matmul, "contract_rows", x.dtype, y.dtype)
    )


def _contract_rows_kernel(
    x: np.ndarray, y: np.ndarray, out: np.ndarray | None = None
) -> np.ndarray:
    rows = math.prod(x.shape[:-1])  # not -1: a reshape cannot infer it when k is 0
    return np.matmul(x.reshape(rows, x.shape[-1]).T, y.reshape(rows, y.shape[-1]), out=out)


def _contract_rows_cost(out: TensorType, x: TensorType, y: TensorType) -> int:
    rows = 1
    for d in x.shape[:-1]:
        rows *= d if isinstance(d, int) else 1
    return 2 * rows * (out.size or 0)


contract_rows = defop(
    "contract_rows",
    inputs=("x", "y"),
    infer=_contract_rows_infer,
    kernel=_contract_rows_kernel,
    # d(x^T y) = dx^T y + x^T dy: ct_x = y ct^T and ct_y = x ct, row by row
    vjp=lambda ct, out, x, y, needs: (
        E.unbroadcast(matmul(y, S.swapaxes(ct, 0, 1)), x) if needs[0] else None,
        E.unbroadcast(matmul(x, ct), y) if needs[1] else None,
    ),
    cost=_contract_rows_cost,
    doc="x^T @ y over all rows: x (..., k) and y (..., n) with the same leading dims give "
    "(k, n), the leading dims flattened into the one contracted axis (the weight gradient "
    "of a batch of rows times a matrix, as one GEMM).",
)


# -- outer ---------------------------------------------------------------------------------------


def outer(x: Any, y: Any) -> Any:
    """The outer product x[i] * y[j] of two 1-D values, as torch.outer (also spelled
    torch.ger) and np.outer: a builder, a column times a row, so its gradients are
    ct @ y and x @ ct. torch refuses other ranks, and so does graphc (numpy would
    flatten them).

    >>> import numpy as np, graphc as gc
    >>> gc.outer(np.array([1, 2]), np.array([3, 4, 5])).tolist()
    [[3, 4, 5], [6, 8, 10]]
    """
    for name, value in (("x", x), ("y", y)):
        shape = tuple(shape_of(value))
        if len(shape) != 1:
            raise ShapeError(f"outer: expects a 1-D {name}, got shape {format_shape(shape)}")
    return E.mul(S.expand_dims(x, 1), S.expand_dims(y, 0))


# -- tensordot and dot ---------------------------------------------------------------------------


def _contracted_axes(axes: Any, a_rank: int, b_rank: int) -> tuple[list[int], list[int]]:
    """tensordot's `axes` as two lists of axes of a and b: an int N means the last N of a
    with the first N of b; a pair of ints or of sequences names them."""
    if isinstance(axes, (int, np.integer)) and not isinstance(axes, (bool, np.bool_)):
        n = int(axes)
        if n < 0 or n > a_rank or n > b_rank:
            raise ShapeError(
                f"tensordot: axes={n} needs 0 to {min(a_rank, b_rank)} "
                f"(the ranks are {a_rank} and {b_rank})"
            )
        return list(range(a_rank - n, a_rank)), list(range(n))
    if not isinstance(axes, (tuple, list)) or len(axes) != 2:
        raise GraphcError(
            f"tensordot: axes must be an int or a pair (axes of a, axes of b), got {axes!r}"
        )
    pair = []
    for named, rank in zip(axes, (a_rank, b_rank)):
        items = list(named) if isinstance(named, (tuple, list)) else [named]
        pair.append([normalize_axis(int(i), rank, "tensordot") for i in items])
    if len(pair[0]) != len(pair[1]):
        raise ShapeError(f"tensordot: axes {axes!r} name different numbers of axes of a and b")
    return pair[0], pair[1]


def tensordot(a: Any, b: Any, axes: Any = 2, *, dims: Any = None) -> Any:
    """The sums of products of a and b over the axes `axes` pairs, as np.tensordot and
    torch.tensordot (`dims=`, torch's name): the free axes of a, then those of b. A
    builder: the contracted axes moved together and merged into one, b reshaped to a
    matrix, one matmul, so its gradients are matmul's.

    >>> import numpy as np, graphc as gc
    >>> a, b = np.arange(24.0).reshape(2, 3, 4), np.ones((4, 3))
    >>> gc.tensordot(a, b, axes=([1, 2], [1, 0])).tolist()
    [66.0, 210.0]
    """
    if dims is not None:
        axes = dims
    a_shape, b_shape = tuple(shape_of(a)), tuple(shape_of(b))
    a_axes, b_axes = _contracted_axes(axes, len(a_shape), len(b_shape))
    for i, j in zip(a_axes, b_axes):
        if a_shape[i] != b_shape[j]:
            raise ShapeError(
                f"tensordot: axis {i} of a {format_shape(a_shape)} and axis {j} of b "
                f"{format_shape(b_shape)} differ in size"
            )
    if len(set(a_axes)) != len(a_axes) or len(set(b_axes)) != len(b_axes):
        raise ShapeError(f"tensordot: repeated axis in {axes!r}")
    a_free = [i for i in range(len(a_shape)) if i not in a_axes]
    b_free = [j for j in range(len(b_shape)) if j not in b_axes]
    contracted = merged_dim(tuple(a_shape[i] for i in a_axes), "tensordot")
    # a keeps its free dims (symbolic ones too) as matmul's batch; b becomes a matrix
    a2 = _reshaped(_ordered(a, a_free + a_axes), (*(a_shape[i] for i in a_free), contracted))
    b2 = _reshaped(
        _ordered(b, b_axes + b_free),
        (contracted, merged_dim(tuple(b_shape[j] for j in b_free), "tensordot")),
    )
    shape = tuple(a_shape[i] for i in a_free) + tuple(b_shape[j] for j in b_free)
    return _reshaped(matmul(a2, b2), shape)


def _reshaped(x: Any, shape: tuple) -> Any:
    return x if tuple(shape_of(x)) == tuple(shape) else S.reshape(x, shape)


def _ordered(x: Any, order: list[int]) -> Any:
    return x if order == sorted(order) else S.transpose(x, tuple(order))


def dot(a: Any, b: Any) -> Any:
    """np.dot: a product for a 0-d operand, matmul up to a matrix b (vectors: the inner
    product), and for a b of more dims the sums over the last axis of a and the
    second-to-last of b (tensordot). torch.dot is the 1-D case.

    >>> import numpy as np, graphc as gc
    >>> gc.dot(np.array([1, 2, 3]), np.array([4, 5, 6])).item()
    32
    """
    a_shape, b_shape = tuple(shape_of(a)), tuple(shape_of(b))
    a_rank, b_rank = len(a_shape), len(b_shape)
    if a_rank == 0 or b_rank == 0:
        return E.mul(a, b)
    inner = b_shape[0] if b_rank == 1 else b_shape[-2]
    if a_shape[-1] != inner:
        which = "only" if b_rank == 1 else "second-to-last"
        raise ShapeError(
            f"dot: the last axis of a {format_shape(a_shape)} and the {which} axis of b "
            f"{format_shape(b_shape)} differ in size ({a_shape[-1]!r} vs {inner!r})"
        )
    if b_rank <= 2 or a_rank == 1:
        return matmul(a, b)
    return tensordot(a, b, axes=([a_rank - 1], [b_rank - 2]))
