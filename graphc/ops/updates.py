"""Functional updates, as JAX writes them: `x.at[index].set(v)` (and add, subtract,
multiply, divide, power, min, max, get), `dynamic_slice` and `dynamic_update_slice`.

A graph value is never changed in place, so an update is a new value made of existing
ops (slice/unslice, take/scatter_add, comparisons and `where`): it differentiates,
batches under vmap, folds and exports as they do, on graph values, eager tensors and
arrays alike.

What an index may hold, per axis: an int, a slice, `...`, an integer scalar that is a
graph value (a loop counter: JAX's dynamic index), or (alone with `:` elsewhere, as
`getitem` allows) one integer array of indices. Where JAX differs:

- an index out of range is an error here (IndexRangeError, as `take` and torch give),
  where JAX clamps a read and drops an update;
- `set` through an index array naming one position twice writes the mean of its
  updates (JAX leaves unspecified which one wins); `add` and `subtract` accumulate, as
  in JAX; multiply, divide, power, min and max through an index array are refused.

The methods take JAX's keywords (`mode`, `indices_are_sorted`, `unique_indices`);
`mode="clip"` clamps indices into range as JAX's does, and JAX's "drop" and "fill" are
refused by name (their point is an index out of range). `apply(func)` sets `func` of
the region, as JAX's.

`dynamic_slice(x, starts, sizes)` and `dynamic_update_slice(x, update, starts)` take
start indices that may be graph values; as in JAX a negative start counts from the
end, and starts are clamped so the window fits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from graphc.ir.errors import DTypeError, GraphcError, ShapeError
from graphc.ir.types import is_symbol
from graphc.ops.dispatch import bind, dtype_of
from graphc.ops.shape import expand_dims

__all__ = ["at", "dynamic_slice", "dynamic_update_slice"]


def _shape(x: Any) -> tuple:
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def _is_int_scalar_value(item: Any) -> bool:
    """A scalar integer index held by a graph value, tensor or 0-d array (not a Python
    int, which is static)."""
    if isinstance(item, (bool, int, np.integer, slice)) or item is None or item is Ellipsis:
        return False
    return _shape(item) == () and np.issubdtype(dtype_of(item), np.integer)


def _is_index_array(item: Any) -> bool:
    if isinstance(item, (bool, int, np.integer, slice)) or item is None or item is Ellipsis:
        return False
    return len(_shape(item)) > 0


def _concrete(n: Any, what: str) -> int:
    if is_symbol(n):
        raise ShapeError(f"{what}: the axis has the symbolic size {n!r}; it needs a known size")
    return int(n)


def _like(v: Any, x: Any, shape: tuple) -> Any:
    """`v` in `x`'s dtype, broadcast to `shape` (JAX casts an update to the operand's)."""
    if dtype_of(v) != dtype_of(x):
        v = (
            bind("cast", v, dtype=dtype_of(x))
            if hasattr(v, "shape")
            else np.asarray(v, dtype_of(x))
        )
    return bind("broadcast_to", v, shape=shape)


def _normalized(i: Any, size: int) -> Any:
    """Index `i` as a position in [0, size): `take` of the positions, which wraps a
    negative index and raises for one out of range."""
    positions = np.arange(size, dtype=np.int64)
    return bind("take", positions, i, axis=0)


# -- x.at[index] ---------------------------------------------------------------------------


class At:
    """`x.at`: index it (`x.at[index]`) to update or read `x` there, as in JAX."""

    def __init__(self, x: Any) -> None:
        self._x = x

    def __getitem__(self, index: Any) -> _Where:
        return _Where(self._x, index)


def at(x: Any) -> At:
    """`x.at` for any value, numpy arrays too (which have no `.at`): `gc.at(x)[i].set(v)`
    is `x` with `v` at `i`, a new array.

    >>> import numpy as np, graphc as gc
    >>> gc.at(np.zeros(3))[1].set(5.0)
    array([0., 5., 0.])
    """
    return At(x)


def _combine(name: str) -> Callable[[Any, Any], Any]:
    return lambda a, b: bind(name, a, b)


# JAX's `mode=` of an update or read: what an index out of range does. graphc raises
# for it (IndexRangeError), which keeps JAX's promise_in_bounds; "clip" clamps indices.
_MODES = (None, "promise_in_bounds", "clip")


class _Where:
    """`x.at[index]`: each method returns a new value, `x` with the update applied.

    The methods take JAX's keywords: `mode` (None, "promise_in_bounds" or "clip", which
    clamps the indices into range; JAX's "drop" and "fill" are refused, since an index
    out of range is an error here), and `indices_are_sorted` / `unique_indices`, hints
    that change nothing.
    """

    def __init__(self, x: Any, index: Any) -> None:
        self._x = x
        self._index = index if isinstance(index, tuple) else (index,)

    def _at(self, what: str, mode: Any, fill_value: Any = None) -> tuple:
        """The index, clamped into range for mode="clip"."""
        if mode not in _MODES:
            raise GraphcError(
                f"at[...].{what}: mode={mode!r} is not supported: an index out of range is an "
                "error in graphc (IndexRangeError), not dropped or filled as in JAX; give "
                "mode='clip' to clamp indices into range, or keep them in range"
            )
        if fill_value is not None:
            raise GraphcError(f"at[...].{what}: fill_value needs mode='fill', which graphc lacks")
        if mode != "clip":
            return self._index
        return _clipped(self._index, _shape(self._x), what)

    def get(
        self,
        *,
        mode: Any = None,
        fill_value: Any = None,
        indices_are_sorted: bool = False,
        unique_indices: bool = False,
    ) -> Any:
        index = self._at("get", mode, fill_value)
        _check_index_dtypes(index, "at[...].get")
        if any(_is_int_scalar_value(i) for i in index) and not any(
            _is_index_array(i) for i in index
        ):
            return _get_dynamic(self._x, index)
        return self._x[index if len(index) > 1 else index[0]]

    def _update(self, values: Any, combine: Any, what: str, mode: Any) -> Any:
        return _update(self._x, self._at(what, mode), values, combine, what)

    def set(self, values: Any, *, mode: Any = None, **hints: bool) -> Any:
        return self._update(values, None, "set", mode)

    def apply(self, func: Callable[[Any], Any], *, mode: Any = None, **hints: bool) -> Any:
        """`func` (elementwise) applied to x there: `set(func(get()))`, as JAX's apply."""
        if not callable(func):
            raise GraphcError(f"at[...].apply: expected a function, got {type(func).__name__}")
        index = self._at("apply", mode)
        if any(_is_index_array(item) for item in index):
            raise GraphcError(  # a repeated index would apply func once per repetition in JAX
                "at[...].apply: through an index array only set, add and subtract are supported"
            )
        region = self._x[index if len(index) > 1 else index[0]]
        return _update(self._x, index, func(region), None, "apply")

    def add(self, values: Any, *, mode: Any = None, **hints: bool) -> Any:
        return self._update(values, _combine("add"), "add", mode)

    def subtract(self, values: Any, *, mode: Any = None, **hints: bool) -> Any:
        return self._update(values, _combine("sub"), "subtract", mode)

    def multiply(self, values: Any, *, mode: Any = None, **hints: bool) -> Any:
        return self._update(values, _combine("mul"), "multiply", mode)

    mul = multiply

    def divide(self, values: Any, *, mode: Any = None, **hints: bool) -> Any:
        return self._update(values, _combine("div"), "divide", mode)

    def power(self, values: Any, *, mode: Any = None, **hints: bool) -> Any:
        return self._update(values, _combine("pow"), "power", mode)

    def min(self, values: Any, *, mode: Any = None, **hints: bool) -> Any:
        return self._update(values, _combine("minimum"), "min", mode)

    def max(self, values: Any, *, mode: Any = None, **hints: bool) -> Any:
        return self._update(values, _combine("maximum"), "max", mode)


def _clipped(index: tuple, shape: tuple, what: str) -> tuple:
    """Each integer of `index` (Python, graph value or index array) clamped into its
    axis, a negative one counted from the end first (JAX's mode="clip")."""
    items = _per_axis(index, len(shape), f"at[...].{what}")
    out = []
    for item, n in zip(items, shape):
        if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            n = _concrete(n, f"at[...].{what}")
            out.append(min(max(int(item) + n if item < 0 else int(item), 0), n - 1))
        elif _is_int_scalar_value(item) or _is_index_array(item):
            n = _concrete(n, f"at[...].{what}")
            wrapped = bind("where", bind("lt", item, 0), bind("add", item, n), item)
            out.append(bind("clip", wrapped, a_min=0, a_max=n - 1))
        else:
            out.append(item)
    return tuple(out)


def _check_index_dtypes(index: tuple, what: str) -> None:
    """Each index that is a graph value, tensor or array holds integers (a bool array is
    a mask, which _update_by_array names)."""
    for item in index:
        if isinstance(item, (bool, int, np.integer, slice)) or item is None or item is Ellipsis:
            continue
        dtype = dtype_of(item)
        if not np.issubdtype(dtype, np.integer) and not (
            dtype == np.bool_ and _is_index_array(item)
        ):
            raise DTypeError(f"{what}: an index must hold integers, got {dtype} ({item!r})")


def _get_dynamic(x: Any, index: tuple) -> Any:
    """x[index] where some items are integer scalars held by graph values (a loop
    counter): the static part sliced first (those axes kept), then each of them taken
    along its axis, last first so that the earlier axes keep their places."""
    items = _per_axis(index, len(_shape(x)), "at[...].get")
    static = tuple(slice(None) if _is_int_scalar_value(i) else i for i in items)
    kept = [a for a, i in enumerate(static) if not isinstance(i, (int, np.integer))]
    region = bind("slice", x, index=static) if static != (slice(None),) * len(items) else x
    for a in reversed([a for a, i in enumerate(items) if _is_int_scalar_value(i)]):
        region = bind("take", region, items[a], axis=kept.index(a))
    return region


def _update(
    x: Any, index: tuple, values: Any, combine: Callable[[Any, Any], Any] | None, what: str
) -> Any:
    what = f"at[...].{what}"
    _check_index_dtypes(index, what)
    arrays = [k for k, item in enumerate(index) if _is_index_array(item)]
    if any(item is None for item in index):
        raise GraphcError(f"{what}: None (a new axis) has no place in an update's index")
    if arrays:
        return _update_by_array(x, index, arrays, values, combine, what)
    return _update_region(x, index, values, combine, what)


def _update_region(
    x: Any, index: tuple, values: Any, combine: Callable[[Any, Any], Any] | None, what: str
) -> Any:
    """Ints, slices and scalar graph-value indices: the region x[static part] (a
    scalar graph-value index stands for its whole axis there, and picks its position
    by a one-hot mask along it)."""
    shape = _shape(x)
    items = _per_axis(index, len(shape), what)
    static = tuple(slice(None) if _is_int_scalar_value(i) else i for i in items)
    region = _region_shape(shape, static)
    # the region's axis of each x axis it keeps (ints drop theirs)
    kept = [a for a, i in enumerate(static) if not isinstance(i, (int, np.integer))]
    dynamic = [a for a, i in enumerate(items) if _is_int_scalar_value(i)]
    final = tuple(d for a, d in zip(kept, region) if a not in dynamic)  # x[index]'s shape
    v = _like(values, x, final)
    mask = None
    for a in dynamic:
        at = kept.index(a)
        size = _concrete(shape[a], what)
        v = expand_dims(v, at)
        hot = bind("eq", np.arange(size, dtype=np.int64), _normalized(items[a], size))
        hot = bind("reshape", hot, shape=(1,) * at + (size,) + (1,) * (len(region) - at - 1))
        mask = hot if mask is None else bind("logical_and", mask, hot)
    v = bind("broadcast_to", v, shape=region)
    if mask is None:
        mask = bind("full_like", v, value=1)
    else:
        mask = bind("cast", bind("broadcast_to", mask, shape=region), dtype=dtype_of(x))
    if combine is not None:  # on the region only: no x / 0 outside it
        v = combine(bind("slice", x, index=static), v)
    placed = bind("unslice", v, shape=shape, index=static)
    hit = bind("ne", bind("unslice", mask, shape=shape, index=static), np.zeros((), dtype_of(x)))
    return bind("where", hit, placed, x)


def _per_axis(index: tuple, rank: int, what: str) -> tuple:
    """One item per axis of x (`...` and the missing trailing axes as ':')."""
    # identity tests only: `==` on an index that is a graph value would be elementwise
    ellipses = [k for k, i in enumerate(index) if i is Ellipsis]
    if len(ellipses) > 1:
        raise ShapeError(f"{what}: an index can only have a single ellipsis")
    used = len(index) - len(ellipses)
    if used > rank:
        raise ShapeError(f"{what}: too many indices ({used}) for rank {rank}")
    if ellipses:
        at = ellipses[0]
        return index[:at] + (slice(None),) * (rank - used) + index[at + 1 :]
    return index + (slice(None),) * (rank - used)


def _region_shape(shape: tuple, static: tuple) -> tuple:
    """x[static]'s shape, from x's (a symbolic dim stays where a ':' keeps it)."""
    out = []
    for d, item in zip(shape, static):
        if isinstance(item, (int, np.integer)):
            n = _concrete(d, "at[...]") if not is_symbol(d) else None
            if n is not None and not -n <= int(item) < n:
                raise ShapeError(f"at[...]: index {int(item)} is out of range for a dim of {n}")
            continue
        if item == slice(None):
            out.append(d)
        else:
            out.append(len(range(*item.indices(_concrete(d, "at[...] with a slice")))))
    return tuple(out)


def _update_by_array(
    x: Any,
    index: tuple,
    arrays: list[int],
    values: Any,
    combine: Callable[[Any, Any], Any] | None,
    what: str,
) -> Any:
    """One integer array of indices along an axis, ':' elsewhere: take's adjoint,
    scatter_add, places the updates (summing those of a repeated position)."""
    shape = _shape(x)
    if len(arrays) > 1 or any(
        not (isinstance(i, slice) and i == slice(None))
        for k, i in enumerate(index)
        if k not in arrays
    ):
        raise GraphcError(
            f"{what}: an integer array index may only be combined with ':' (one array)"
        )
    if any(i is Ellipsis for i in index):
        raise GraphcError(f"{what}: an integer array index may only be combined with ':'")
    axis, positions = arrays[0], index[arrays[0]]
    if not np.issubdtype(dtype_of(positions), np.integer):
        raise DTypeError(
            f"{what}: an index array must hold integers, got {dtype_of(positions)} (a "
            "boolean mask gives a data-dependent shape: use gc.where)"
        )
    if combine is not None and what.split(".")[-1] not in ("add", "subtract"):
        raise GraphcError(
            f"{what}: through an index array only set, add and subtract are supported "
            "(a repeated index makes the others order-dependent)"
        )
    dtype = dtype_of(x)
    if dtype == np.bool_:
        raise DTypeError(f"{what}: a bool array is updated through an index array by gc.where")
    target = shape[:axis] + _shape(positions) + shape[axis + 1 :]
    v = _like(values, x, target)
    summed = bind("scatter_add", v, positions, shape=shape, axis=axis)
    count = bind("scatter_add", bind("full_like", v, value=1), positions, shape=shape, axis=axis)
    hit = bind("ne", count, np.zeros((), dtype))
    if combine is not None:
        new = combine(x, summed)
    elif np.issubdtype(dtype, np.integer):
        new = bind("floor_divide", summed, bind("maximum", count, np.ones((), dtype)))
    else:
        new = bind("div", summed, bind("maximum", count, np.ones((), dtype)))
    return bind("where", hit, new, x)


# -- dynamic_slice and dynamic_update_slice ----------------------------------------------


def _starts(x_shape: tuple, starts: Sequence[Any], sizes: Sequence[int], what: str) -> list:
    if len(starts) != len(x_shape) or len(sizes) != len(x_shape):
        raise ShapeError(
            f"{what}: give one start index and one size per axis of the operand "
            f"({len(x_shape)}), got {len(starts)} and {len(sizes)}"
        )
    clamped = []
    for axis, (s, size, n) in enumerate(zip(starts, sizes, x_shape)):
        n = _concrete(n, what)
        if not 0 <= size <= n:
            raise ShapeError(f"{what}: size {size} of axis {axis} does not fit its dim {n}")
        # as JAX: a negative start counts from the end, then the start is clamped so the
        # window fits
        if isinstance(s, (int, np.integer)) and not isinstance(s, bool):
            s = int(s) + n if s < 0 else int(s)
            clamped.append(min(max(s, 0), n - size))
        elif _shape(s) == () and np.issubdtype(dtype_of(s), np.integer):
            s = bind("where", bind("lt", s, 0), bind("add", s, n), s)
            clamped.append(bind("clip", s, a_min=0, a_max=n - size))
        else:
            raise DTypeError(f"{what}: start index {axis} must be an integer scalar, got {s!r}")
    return clamped


def dynamic_slice(x: Any, start_indices: Sequence[Any], slice_sizes: Sequence[int]) -> Any:
    """The window of `x` of shape `slice_sizes` starting at `start_indices` (ints or
    integer scalars that are graph values), as `jax.lax.dynamic_slice`: starts are
    clamped so the window fits.

    >>> import numpy as np, graphc as gc
    >>> gc.dynamic_slice(np.arange(10), (np.int64(8),), (3,))
    array([7, 8, 9])
    """
    sizes = [int(s) for s in slice_sizes]
    starts = _starts(_shape(x), list(start_indices), sizes, "dynamic_slice")
    for axis, (s, size) in enumerate(zip(starts, sizes)):
        if isinstance(s, int):
            if (s, size) != (0, _shape(x)[axis]):
                x = bind("slice", x, index=(slice(None),) * axis + (slice(s, s + size),))
            continue
        x = bind("take", x, bind("add", np.arange(size, dtype=np.int64), s), axis=axis)
    return x


def dynamic_update_slice(x: Any, update: Any, start_indices: Sequence[Any]) -> Any:
    """`x` with `update` written at `start_indices` (ints or integer scalars that are
    graph values), as `jax.lax.dynamic_update_slice`: starts are clamped so the update
    fits.

    >>> import numpy as np, graphc as gc
    >>> gc.dynamic_update_slice(np.zeros(5), np.ones(2), (np.int64(1),))
    array([0., 1., 1., 0., 0.])
    """
    shape, sizes = _shape(x), _shape(update)
    if len(sizes) != len(shape):
        raise ShapeError(
            f"dynamic_update_slice: the update has rank {len(sizes)}, the operand {len(shape)}"
        )
    starts = _starts(shape, list(start_indices), [int(s) for s in sizes], "dynamic_update_slice")
    if any(int(s) == 0 for s in sizes):
        return x
    placed = _like(update, x, sizes)
    mask = None
    for axis, (s, size) in enumerate(zip(starts, sizes)):
        n = int(shape[axis])
        offset = bind("sub", np.arange(n, dtype=np.int64), s)  # x's position - start
        inside = bind("logical_and", bind("ge", offset, 0), bind("lt", offset, int(size)))
        source = bind("clip", offset, a_min=0, a_max=int(size) - 1)
        placed = bind("take", placed, source, axis=axis)
        inside = bind("reshape", inside, shape=(1,) * axis + (n,) + (1,) * (len(shape) - axis - 1))
        mask = inside if mask is None else bind("logical_and", mask, inside)
    return bind("where", mask, placed, x)
