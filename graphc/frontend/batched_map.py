"""`gc.map(f, xs, batch_size=k)`: `lax.map` in batches of k slices, each batch by vmap.

Without `batch_size` (or with 1) `map` is graphc.ops.flow's: a `scan` without carries,
one slice of xs per step. With `batch_size=k` it is JAX's batched map, built from
`gc.vmap` and `gc.scan`:

1. the first `(n // k) * k` slices of every leaf of xs are reshaped to
   `(n // k, k, ...)`, and a scan applies `vmap(f)` to one batch of k slices per step;
   its stacked results are reshaped back to `((n // k) * k, ...)`;
2. the remaining `n % k` slices, if any, go through one more `vmap(f)` call, whose
   results are concatenated after the scan's;
3. when k >= n there is no scan at all: `vmap(f)(xs)` (JAX scans once when k == n).

It lives here, above ops/, because vmap is a frontend transformation (it traces `f`
and batches the graph with graphc.passes), which ops/ may not import. It works
wherever `map` and `vmap` do: on graph values (the scan's body holds the vmapped
`f`), on eager tensors (inlined, so gradients flow) and on arrays (vmap compiles the
batched `f` once and the scan runs it per batch). A body `vmap` cannot batch (an op
without a batching rule) is a named error, as is a batch_size that is no positive
int, or a symbolic length (the batches must be counted when the graph is built).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from graphc.frontend.vmap import vmap
from graphc.ir.errors import GraphcError, ShapeError
from graphc.ir.types import is_symbol
from graphc.ops.batching import VmapError
from graphc.ops.closure import fn_name
from graphc.ops.dispatch import bind, is_python_scalar
from graphc.ops.flow import map as map_slices
from graphc.ops.flow import scan
from graphc.ops.pytree import flatten, unflatten
from graphc.ops.symbolic import Symbol


def _shape(value: Any) -> tuple:
    if isinstance(value, Symbol):
        return tuple(value.type.shape)
    if is_python_scalar(value):
        return ()
    return tuple(getattr(value, "shape", np.shape(value)))


def _length(leaves: list[Any]) -> Any:
    """The common leading axis of the leaves (checked)."""
    firsts = []
    for leaf in leaves:
        shape = _shape(leaf)
        if not shape:
            raise ShapeError("map: every leaf of xs must have a leading axis to map over")
        firsts.append(shape[0])
    if not firsts:
        raise GraphcError("map: xs has no arrays to map over")
    if len(set(firsts)) != 1:
        raise ShapeError(f"map: the leaves of xs have different leading axes: {firsts}")
    return firsts[0]


def _check_batch_size(batch_size: Any) -> None:
    is_int = isinstance(batch_size, (int, np.integer)) and not isinstance(batch_size, bool)
    if is_int and batch_size >= 1:
        return
    hint = ""
    if is_int and batch_size == 0:
        hint = " (JAX reads 0 as one batch of every slice: write gc.vmap(f)(xs) for that)"
    raise GraphcError(f"map: batch_size must be a positive int, got {batch_size!r}{hint}")


def _reshape(value: Any, shape: tuple) -> Any:
    return bind("reshape", value, shape=tuple(shape))


def map(f: Callable[[Any], Any], xs: Any, *, batch_size: int | None = None) -> Any:  # noqa: A001
    """`f` applied to each slice of `xs` along its first axis, the results stacked
    (`lax.map`): a `scan` without carries, or with `batch_size=k` a scan of
    `gc.vmap(f)` over batches of k slices (the `len % k` left over in one more
    vmapped call), which computes the same values with fewer, larger steps.

    >>> import numpy as np, graphc as gc
    >>> gc.map(lambda row: gc.sum(row * row), np.arange(10.0).reshape(5, 2), batch_size=2)
    array([  1.,  13.,  41.,  85., 145.])
    """
    if batch_size is not None:
        _check_batch_size(batch_size)
    if batch_size is None or batch_size == 1:
        return map_slices(f, xs)
    leaves, tree = flatten(xs)
    length = _length(leaves)
    if is_symbol(length):
        raise GraphcError(
            f"map: batch_size={batch_size} needs a known length, but xs' leading axis is the "
            f"symbolic dim {str(length)!r}; give batch_size=None to map one slice at a time"
        )
    length, size = int(length), int(batch_size)
    if length == 0:  # no slice to batch: the empty ys of the slice path
        return map_slices(f, xs)
    batched = vmap(f)
    try:
        return _batched_map(f, batched, leaves, tree, length, size)
    except VmapError as error:
        raise VmapError(
            f"map: batch_size={size} maps {fn_name(f, 'f')} with vmap, which cannot batch it: "
            f"{error}; give batch_size=None to map one slice at a time"
        ) from error


def _batched_map(
    f: Callable[[Any], Any],
    batched: Callable[[Any], Any],
    leaves: list[Any],
    tree: Any,
    length: int,
    size: int,
) -> Any:
    if size >= length:  # one batch holds every slice
        return batched(unflatten(tree, leaves))
    count, rest = divmod(length, size)
    whole = count * size
    heads = [leaf if whole == length else leaf[:whole] for leaf in leaves]
    chunks = [_reshape(x, (count, size, *_shape(x)[1:])) for x in heads]

    def step(carry: None, chunk: Any) -> tuple[None, Any]:
        return None, batched(chunk)

    step.__name__ = fn_name(f, "map_body")
    ys = scan(step, None, unflatten(tree, chunks))[1]
    y_leaves, y_tree = flatten(ys)
    y_leaves = [_reshape(y, (whole, *_shape(y)[2:])) for y in y_leaves]
    if rest:
        tails, _ = flatten(batched(unflatten(tree, [leaf[whole:] for leaf in leaves])))
        y_leaves = [bind("concat", y, t, axis=0) for y, t in zip(y_leaves, tails)]
    return unflatten(y_tree, y_leaves)


__all__ = ["map"]
