"""`gc.associative_scan`: the prefix combination of a sequence under an associative
function, in a number of levels logarithmic in its length (`lax.associative_scan`).

The algorithm (the classic odd/even recursion): combine neighbours pairwise, which
halves the sequence; scan the halved sequence recursively, which gives every prefix
ending at an odd position; each prefix ending at an even position k > 0 is then the
odd prefix before it combined with element k. Each level is a handful of strided
slices, one call of `fn` on whole slices and an interleave (a stack and a reshape), so
`fn` must work elementwise along the scanned axis, as in JAX, and the ops are graphc's
own: on graph values the result is a graph of slices (differentiable like any other),
on eager tensors and arrays it is computed at once. The length along the axis must be
known (the recursion's depth follows it): a symbolic dim is refused by name.

Invariant: `fn` is only ever called as fn(earlier, later), so a non-commutative `fn`
(matrix products) gives result[i] = elems[0] . elems[1] . ... . elems[i].
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from graphc.ir.errors import GraphcError, ShapeError, TracingError
from graphc.ir.types import is_symbol
from graphc.ops.arrays import flip
from graphc.ops.indexing import getitem
from graphc.ops.pytree import flatten, mismatch, unflatten
from graphc.ops.shape import concat, reshape, stack
from graphc.ops.symbolic import Symbol

__all__ = ["associative_scan"]


def _shape(value: Any) -> tuple:
    if isinstance(value, Symbol):
        return tuple(value.type.shape)
    shape = getattr(value, "shape", None)
    return tuple(np.shape(value) if shape is None else shape)


def associative_scan(
    fn: Callable[[Any, Any], Any], elems: Any, reverse: bool = False, axis: int = 0
) -> Any:
    """Every prefix combination of `elems` along `axis`: result[i] = fn(result[i - 1],
    elems[i]), computed in log-depth (`lax.associative_scan`). `elems` is a pytree of
    arrays of one length along `axis`; `fn(a, b)` takes and returns pytrees of elems'
    structure and must be associative and work on whole slices. With `reverse=True`
    the prefixes run from the end: result[i] = fn(result[i + 1], elems[i]).

    >>> import numpy as np, graphc as gc
    >>> gc.associative_scan(gc.add, np.arange(1.0, 6.0))
    array([ 1.,  3.,  6., 10., 15.])
    >>> gc.associative_scan(gc.maximum, np.array([1, 3, 2, 5, 4]), reverse=True)
    array([5, 5, 5, 5, 4])
    """
    leaves, tree = flatten(elems)
    if not leaves:
        raise GraphcError("associative_scan: elems has no arrays to scan")
    shapes = [_shape(x) for x in leaves]
    lengths = set()
    axes = []
    for k, shape in enumerate(shapes):
        if not -len(shape) <= axis < len(shape):
            raise ShapeError(
                f"associative_scan: axis {axis} is out of range for leaf {k} of elems, "
                f"of shape {shape}"
            )
        axes.append(axis % len(shape))
        lengths.add(shape[axes[-1]])
    if len(lengths) != 1:
        raise ShapeError(
            f"associative_scan: the leaves of elems have different lengths along axis "
            f"{axis}: {sorted(map(str, lengths))}"
        )
    length = lengths.pop()
    if is_symbol(length):
        raise ShapeError(
            f"associative_scan: the length along axis {axis} is the symbolic dim "
            f"{length!r}; the log-depth recursion needs it known (use gc.scan for a "
            "sequential scan of a symbolic length)"
        )
    name = getattr(fn, "__name__", "fn")

    def combine(a: list[Any], b: list[Any]) -> list[Any]:
        out_leaves, out_tree = flatten(fn(unflatten(tree, a), unflatten(tree, b)))
        if out_tree != tree:
            raise TracingError(
                f"associative_scan: '{name}' returns a different structure than elems "
                f"(they differ at {mismatch(tree, out_tree, 'result')}, elems vs returned)"
            )
        return out_leaves

    def part(xs: list[Any], start: int | None, stop: int | None, step: int | None) -> list[Any]:
        return [
            getitem(x, (slice(None),) * ax + (slice(start, stop, step),))
            for x, ax in zip(xs, axes, strict=True)
        ]

    def interleave(even: list[Any], odd: list[Any], n: int) -> list[Any]:
        """Slices 0, 2, 4, ... from even and 1, 3, ... from odd, as one sequence of n."""
        paired = part(even, 0, n // 2, None) if n % 2 else even
        out = []
        for e, o, ax in zip(paired, odd, axes, strict=True):
            both = stack([e, o], axis=ax + 1)
            shape = _shape(both)
            out.append(reshape(both, (*shape[:ax], 2 * shape[ax], *shape[ax + 2 :])))
        if n % 2:
            out = [
                concat([x, last], axis=ax)
                for x, last, ax in zip(out, part(even, n // 2, None, None), axes, strict=True)
            ]
        return out

    def prefixes(xs: list[Any], n: int) -> list[Any]:
        if n < 2:
            return xs
        odd = prefixes(combine(part(xs, 0, n - 1, 2), part(xs, 1, n, 2)), n // 2)
        # prefix 2k (k >= 1) = prefix 2k - 1 combined with element 2k
        rest = (n - 1) // 2
        even = part(xs, 0, 1, None)
        if rest:
            tail = combine(part(odd, 0, rest, None), part(xs, 2, None, 2))
            even = [concat([h, t], axis=ax) for h, t, ax in zip(even, tail, axes, strict=True)]
        return interleave(even, odd, n)

    if reverse:
        leaves = [flip(x, axis=ax) for x, ax in zip(leaves, axes, strict=True)]
    out = prefixes(leaves, int(length))
    if reverse:
        out = [flip(x, axis=ax) for x, ax in zip(out, axes, strict=True)]
    return unflatten(tree, out)
