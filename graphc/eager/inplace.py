"""In-place tensor methods (`add_`, `mul_`, `zero_`, `copy_`, `x[i] = v`, `+=`, ...).

An in-place op computes its result with the ordinary op function (so it is recorded
like any other op), then writes it into the tensor's own memory and bumps the
tensor's version counter; the tensor takes over the result's `grad_fn`, as in
PyTorch's "rebase". A leaf that requires grad may only be modified under `no_grad`
(that is how optimizers update parameters). Saved tensors remember the version they
were saved at, so a modification before backward is caught when the value is used.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.eager.errors import ArgumentError
from graphc.eager.grad_mode import STATE
from graphc.ir.errors import AutodiffError, DTypeError, IndexRangeError, ShapeError
from graphc.ir.types import normalize_axis
from graphc.ops import elementwise as E
from graphc.ops import indexing as I
from graphc.ops import rounding, scatters
from graphc.ops import shape as S
from graphc.ops.methods import scaled


def check_inplace(x: Any, op: str) -> None:
    if not x._data.flags.writeable:
        raise ShapeError(
            f"{op}: unsupported operation: more than one element of the written-to tensor "
            "refers to a single memory location (an expand()ed or broadcast view), or its "
            "memory is read-only; clone() it before writing"
        )
    if x._base is not None:
        from graphc.eager.views import check_view_inplace  # views.py imports Tensor

        check_view_inplace(x, op)
    elif STATE.enabled and x._requires_grad and x.grad_fn is None:
        raise AutodiffError(
            f"{op}: a leaf tensor that requires grad is being used in an in-place operation; "
            "update it under `with no_grad():` (or work on a copy)"
        )


def check_overlap(target: np.ndarray, source: Any, op: str) -> None:
    """torch refuses to write into memory that a tensor read by the write shares only in
    part (x[1:] += x[:-1]: its result would depend on the order of the loop); the very
    same memory (x.mul_(x)) is fine. numpy would buffer and write as if copied first."""
    data = getattr(source, "_data", None)
    if not isinstance(data, np.ndarray) or not np.may_share_memory(target, data):
        return
    same = (
        target.__array_interface__["data"][0] == data.__array_interface__["data"][0]
        and target.shape == data.shape
        and target.strides == data.strides
    )
    if not same:
        raise ShapeError(
            f"{op}: unsupported operation: some elements of the input tensor and the "
            "written-to tensor refer to a single memory location; clone() the input first"
        )


def write_result(x: Any, result: Any, op: str) -> Any:
    """Store `result` into x's memory; x takes over the result's place on the tape."""
    data = x._data
    if result.shape != data.shape:
        raise ShapeError(
            f"{op}: the result has shape {result.shape}, which does not fit the "
            f"in-place target of shape {data.shape}"
        )
    if not np.can_cast(result.dtype, data.dtype, casting="same_kind"):
        raise DTypeError(f"{op}: result dtype {result.dtype} can't be cast to {data.dtype}")
    if result.grad_fn is not None and x._base is not None and not x._tracks:
        from graphc.eager.views import raise_untracked

        raise_untracked(op)  # before writing, as torch
    np.copyto(data, result._data, casting="same_kind")
    x._counter[0] += 1
    if result.grad_fn is not None and x._base is not None:
        from graphc.eager.views import rebase_history

        rebase_history(x, result)  # the base's history, as PyTorch's CopySlices
    elif result.grad_fn is not None:
        from graphc.eager.grad_fn import move_retained  # grad_fn imports Tensor

        old, old_nr = x.grad_fn, x._output_nr
        x.grad_fn = result.grad_fn
        x._output_nr = result._output_nr
        x._requires_grad = True
        result.grad_fn.rebase_output(x)  # results come from registry ops: an OpBackward
        move_retained(x, old, old_nr)
    return x


def _original(x: Any, args: tuple) -> Any:
    """What the op reads as x: x itself, or when the tape may save it, a copy of its values
    with its history (torch's `original_self`), since the write below changes x's memory."""
    if not STATE.enabled:
        return x
    if not (x._requires_grad or any(getattr(a, "_requires_grad", False) for a in args)):
        return x
    from graphc.eager.tensor import make

    copy = make(x._data.copy())
    copy.grad_fn = x.grad_fn
    copy._output_nr = x._output_nr
    copy._requires_grad = x._requires_grad  # never a leaf needing grad: check_inplace
    return copy


def _inplace(op: str, compute: Any, reads_self: bool = True) -> Any:
    """An in-place method; `reads_self=False` when the op's rule never reads x's values
    (add, or rules reading only the output), so no copy of x is kept for the tape."""

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        check_inplace(self, op)
        for arg in (*args, *kwargs.values()):
            check_overlap(self._data, arg, op)
        x = _original(self, args) if reads_self else self
        return write_result(self, compute(x, *args, **kwargs), op)

    method.__name__ = op
    method.__doc__ = f"In-place version of {op[:-1]}: writes into this tensor's memory."
    return method


def basic_index(index: Any) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return all(
        item is None or item is Ellipsis or isinstance(item, (slice, int, np.integer))
        for item in items
    )


class InPlaceMethods:
    """In-place methods and operators (mixed into `Tensor`)."""

    add_ = _inplace("add_", lambda x, y, alpha=1: E.add(x, scaled(y, alpha)), reads_self=False)
    sub_ = _inplace("sub_", lambda x, y, alpha=1: E.sub(x, scaled(y, alpha)), reads_self=False)
    mul_ = _inplace("mul_", lambda x, y: E.mul(x, y))
    div_ = _inplace("div_", lambda x, y: E.div(x, y))
    pow_ = _inplace("pow_", lambda x, y: E.pow(x, y))
    neg_ = _inplace("neg_", lambda x: E.neg(x), reads_self=False)
    exp_ = _inplace("exp_", lambda x: E.exp(x), reads_self=False)
    log_ = _inplace("log_", lambda x: E.log(x))
    sqrt_ = _inplace("sqrt_", lambda x: E.sqrt(x), reads_self=False)
    abs_ = _inplace("abs_", lambda x: E.abs(x))
    tanh_ = _inplace("tanh_", lambda x: E.tanh(x), reads_self=False)
    sigmoid_ = _inplace("sigmoid_", lambda x: E.sigmoid(x), reads_self=False)
    relu_ = _inplace("relu_", lambda x: E.relu(x), reads_self=False)
    clamp_ = clip_ = _inplace("clamp_", lambda x, min=None, max=None: E.clip(x, min, max))
    floor_ = _inplace("floor_", lambda x: rounding.floor(x))
    ceil_ = _inplace("ceil_", lambda x: rounding.ceil(x))
    trunc_ = _inplace("trunc_", lambda x: rounding.trunc(x))
    round_ = _inplace("round_", lambda x, decimals=0: rounding.round(x, decimals=decimals))
    clamp_min_ = _inplace("clamp_min_", lambda x, min: E.clip(x, min, None))  # noqa: A006
    clamp_max_ = _inplace("clamp_max_", lambda x, max: E.clip(x, None, max))  # noqa: A006
    reciprocal_ = _inplace("reciprocal_", lambda x: E.reciprocal(x))
    rsqrt_ = _inplace("rsqrt_", lambda x: E.rsqrt(x))
    square_ = _inplace("square_", lambda x: x.square())
    sign_ = _inplace("sign_", lambda x: E.sign(x))
    sin_ = _inplace("sin_", lambda x: E.sin(x))
    cos_ = _inplace("cos_", lambda x: E.cos(x))
    log1p_ = _inplace("log1p_", lambda x: E.log1p(x))
    expm1_ = _inplace("expm1_", lambda x: E.expm1(x))
    remainder_ = _inplace("remainder_", lambda x, y: rounding.remainder(x, y))
    fmod_ = _inplace("fmod_", lambda x, y: rounding.fmod(x, y))
    floor_divide_ = _inplace("floor_divide_", lambda x, y: rounding.floor_divide(x, y))
    tril_ = _inplace("tril_", lambda x, diagonal=0: x.tril(diagonal))
    triu_ = _inplace("triu_", lambda x, diagonal=0: x.triu(diagonal))
    # what optimizers write: exp_avg.lerp_(grad, 1 - beta1), p.addcdiv_(m, denom, value=-lr)
    lerp_ = _inplace("lerp_", lambda x, end, weight: x.lerp(end, weight))
    addcmul_ = _inplace("addcmul_", lambda x, t1, t2, value=1: x.addcmul(t1, t2, value=value))
    addcdiv_ = _inplace("addcdiv_", lambda x, t1, t2, value=1: x.addcdiv(t1, t2, value=value))
    masked_fill_ = _inplace(  # the value cast to x's dtype (masked_fill)
        "masked_fill_", lambda x, mask, value: x.masked_fill(mask, value), reads_self=False
    )

    def __iadd__(self, other: Any) -> Any:
        return self.add_(other)

    def __isub__(self, other: Any) -> Any:
        return self.sub_(other)

    def __imul__(self, other: Any) -> Any:
        return self.mul_(other)

    def __itruediv__(self, other: Any) -> Any:
        return self.div_(other)

    def __ipow__(self, other: Any) -> Any:
        return self.pow_(other)

    def zero_(self) -> Any:
        """Fill with zeros in place; gradients no longer flow to the old values."""
        return _assign(self, ..., 0, "zero_")

    def fill_(self, value: Any) -> Any:
        """Fill with `value` in place."""
        return _assign(self, ..., value, "fill_")

    def uniform_(self, a: float = 0.0, b: float = 1.0) -> Any:
        """Fill with samples uniform in [a, b) from the generator `manual_seed` seeds;
        gradients no longer flow to the old values (how weights are initialized)."""
        from graphc.eager.creation import generator  # creation imports Tensor

        return _assign(self, ..., generator().uniform(a, b, self.shape), "uniform_")

    def normal_(self, mean: float = 0.0, std: float = 1.0) -> Any:
        """Fill with normal samples of `mean` and `std` (see uniform_)."""
        from graphc.eager.creation import generator

        return _assign(self, ..., generator().normal(mean, std, self.shape), "normal_")

    def copy_(self, source: Any) -> Any:
        """Copy `source` (broadcast, cast) into this tensor; gradients flow to `source`."""
        return _assign(self, ..., source, "copy_")

    def __setitem__(self, index: Any, value: Any) -> None:
        """`x[index] = value`, in place; differentiable for every index numpy takes."""
        _assign(self, index, value, "__setitem__")

    def scatter_(self, dim: int, index: Any, src: Any = None, *, value: Any = None) -> Any:
        """torch's scatter_: for dim 1, self[i][index[i][j]] = src[i][j] (or a number). A
        position written twice gets the mean of its values, as out-of-place scatter's
        (torch leaves which one wins unspecified)."""
        where, part = _scatter_index(self, dim, index, value if src is None else src)
        if hasattr(part, "shape") and _repeats(where, self.shape):
            whole = scatters.scatter(self, dim, index, src)
            return _spelled(_assign(self, ..., whole, "scatter_"), "ScatterBackward0")
        result = _assign(self, where, part, "scatter_")
        named = "ScatterBackward0" if hasattr(part, "shape") else "ScatterBackward1"
        return _spelled(result, named)

    def scatter_add_(self, dim: int, index: Any, src: Any) -> Any:
        """torch's scatter_add_: for dim 1, self[i][index[i][j]] += src[i][j], repeats
        adding up."""
        where, part = _scatter_index(self, dim, index, src)
        return _spelled(_accumulate(self, where, part, "scatter_add_"), "ScatterAddBackward0")

    def index_add_(self, dim: int, index: Any, source: Any, *, alpha: Any = 1) -> Any:
        """Add alpha * source[i] into the index[i]-th slice along dim (repeats add up)."""
        added = _accumulate(self, _along(self, dim, index), scaled(source, alpha), "index_add_")
        return _spelled(added, "IndexAddBackward0")

    def index_fill_(self, dim: int, index: Any, value: Any) -> Any:
        """Fill the index[i]-th slices along dim with value."""
        return _spelled(
            _assign(self, _along(self, dim, index), value, "index_fill_"), "IndexFillBackward0"
        )

    def index_copy_(self, dim: int, index: Any, source: Any) -> Any:
        """Copy source[i] into the index[i]-th slice along dim; a slice copied to twice
        gets the mean, as out-of-place index_copy's."""
        where = _along(self, dim, index)
        if _repeats(where, self.shape):
            where, source = ..., scatters.index_copy(self, dim, index, source)
        return _spelled(_assign(self, where, source, "index_copy_"), "IndexCopyBackward0")

    def index_put_(self, indices: Any, values: Any, accumulate: bool = False) -> Any:
        """`x[indices] = values` (indices: a tuple of index tensors), or with
        `accumulate=True` `x[indices] += values` where a repeated position adds up every
        value sent to it, as torch's index_put_.

        >>> from graphc.eager import tensor
        >>> tensor([0.0, 0.0]).index_put_((tensor([1, 1]),), tensor(2.0), accumulate=True)
        tensor([0., 4.])
        """
        index = tuple(indices) if isinstance(indices, (tuple, list)) else (indices,)
        if not accumulate:
            return _assign(self, index, values, "index_put_")
        return _accumulate(self, index, values, "index_put_")


def _spelled(t: Any, name: str) -> Any:
    from graphc.eager.grad_fn import spelled  # grad_fn imports Tensor, which imports us

    return spelled(t, name)


def _integer_index(index: Any, op: str) -> np.ndarray:
    array = np.asarray(getattr(index, "_data", index))
    if array.dtype.kind not in "iu":
        raise DTypeError(f"{op}: the index must be of an integer dtype, got {array.dtype}")
    return array


def _along(x: Any, dim: int, index: Any) -> tuple:
    """The index picking the index[i]-th slices of x along dim (index_add_, ...)."""
    axis = normalize_axis(dim, max(len(x.shape), 1), "index along a dim")
    return (slice(None),) * axis + (_integer_index(index, "index_add_").reshape(-1),)


def _repeats(where: tuple, shape: tuple) -> bool:
    """Whether the index `where` (integer arrays beside full slices, as scatter_'s and
    index_copy_'s) writes a position twice: whether the arrays, broadcast together,
    repeat a row of coordinates (the slices sweep their axes once). Read from the index
    alone, not from an array of x's size."""
    at = [(k, np.asarray(i)) for k, i in enumerate(_plain_index(where)) if not isinstance(i, slice)]
    try:
        arrays = np.broadcast_arrays(*(a for _, a in at))
        # "wrap": a negative index counts from the end (one past it: scatters' error)
        flat = [a.reshape(-1) for a in arrays]
        rows = np.ravel_multi_index(flat, [shape[k] for k, _ in at], mode="wrap")
    except ValueError:  # arrays that do not broadcast: _assign says so
        return False
    return np.unique(rows).size < rows.size


def _scatter_index(x: Any, dim: int, index: Any, src: Any) -> tuple[tuple, Any]:
    """torch's scatter addressing as numpy's: position p of `index` writes to x at p with
    its dim-th coordinate replaced by index[p]; src is read over index's shape."""
    ids = _integer_index(index, "scatter")
    axis = normalize_axis(dim, max(len(x.shape), 1), "scatter")
    if ids.ndim != len(x.shape):
        raise ShapeError(
            f"scatter: index must have as many dims as self ({len(x.shape)}), got shape {ids.shape}"
        )
    coords = list(np.indices(ids.shape, sparse=True))
    coords[axis] = ids
    if hasattr(src, "shape") and tuple(src.shape) != ids.shape:
        src = src[tuple(slice(0, n) for n in ids.shape)]
    return tuple(coords), src


def _assign(x: Any, index: Any, value: Any, op: str) -> Any:
    """`x[index] = value`; on the tape a `where` of the placed value over x's old one, so
    the gradient goes to `value` inside the window and to x's history outside it."""
    check_inplace(x, op)
    index = _plain_index(index)
    try:
        window = x._data[index] if basic_index(index) else x._data
    except IndexError as exc:
        raise IndexRangeError(f"{op}: {exc}") from None
    check_overlap(window, value, op)
    value = _without_leading_ones(x, index, value)
    value_grad = getattr(value, "_requires_grad", False)
    if not (STATE.enabled and (x._requires_grad or value_grad)):
        try:
            x._data[index] = np.asarray(value)
        except IndexError as exc:
            raise IndexRangeError(f"{op}: {exc}") from None
        except ValueError as exc:  # numpy's broadcast failure
            raise ShapeError(f"{op}: {exc}") from None
        x._counter[0] += 1
        return x
    from graphc.eager.tensor import make

    if not basic_index(index):
        mask, placed = _scattered(x, index, value, op)
        return write_result(x, _named(E.where(make(mask), placed, x), op, index, value), op)
    mask = np.zeros(x.shape, np.bool_)
    try:
        mask[index] = True
    except IndexError as exc:
        raise IndexRangeError(f"{op}: {exc}") from None
    placed = I.unslice(
        S.broadcast_to(E.cast(value, x.dtype), x._data[index].shape),
        shape=x.shape,
        index=I.format_index(index),
    )
    return write_result(x, _named(E.where(make(mask), placed, x), op, index, value), op)


def _without_leading_ones(x: Any, index: Any, value: Any) -> Any:
    """`value` without the leading dims of size 1 it has beyond the written window's
    rank: torch writes x[1] = tensor([5.]) (numpy would refuse a sequence in one slot)."""
    shape = tuple(getattr(value, "shape", ()))
    if not shape or shape[0] != 1:
        return value
    rank = np.zeros(x.shape, np.bool_)[index].ndim if x._data.size else len(shape)
    extra = 0
    while extra < len(shape) - rank and shape[extra] == 1:
        extra += 1
    if not extra:
        return value
    if isinstance(value, np.ndarray):
        return value.reshape(shape[extra:])
    return S.reshape(value, shape[extra:])


def _array(item: Any) -> bool:
    return isinstance(item, (np.ndarray, list))


def _named(result: Any, op: str, index: Any, value: Any) -> Any:
    """The `where` a write records, named as torch names the node of that write: x[i] = v
    is a copy_ into the view x[i] (CopySlices), an advanced index index_put_, a write to
    all of x (x[...] = v) a fill_ of a number or a copy_ of a tensor."""
    from graphc.eager.grad_fn import spelled  # grad_fn imports Tensor, which imports us

    items = index if isinstance(index, tuple) else (index,)
    whole = all(item is Ellipsis or item == slice(None) for item in items if not _array(item))
    number = not hasattr(value, "shape")
    if op == "__setitem__" and not basic_index(index) or op == "index_put_":
        name = "IndexPutBackward0"
    elif op == "__setitem__" and not whole:
        name = "CopySlices"
    elif op == "zero_":
        name = "ZeroBackward0"
    elif op == "fill_" and number:
        name = "FillBackward2"  # fill_(Scalar); setitem makes a 0-d tensor of a number
    elif op == "fill_" or op != "copy_" and number:
        name = "FillBackward3"
    else:
        name = "CopyBackwards"
    return spelled(result, name)


def _scattered(x: Any, index: Any, value: Any, op: str) -> tuple[np.ndarray, Any]:
    """For `x[index] = value` with an integer-array or boolean index (torch's index_put_
    without accumulate): the mask of the positions written, and a value of x's shape
    holding there what is written, as ops on the tape (a take of value's entries).

    A position written more than once keeps its last write (numpy's order, and torch's
    on the CPU), and the gradient is that of what was computed: the overwritten entries of
    value get none (torch gives them the gradient of the position they lost)."""
    positions = np.arange(x._data.size).reshape(x.shape)
    try:
        written = positions[index]  # the flat position each element of value goes to
    except IndexError as exc:
        raise IndexRangeError(f"{op}: {exc}") from None
    flat = written.reshape(-1)
    mask = np.zeros(x._data.size, np.bool_)
    mask[flat] = True
    source = np.zeros(x._data.size, np.int64)  # which element of value lands at each position
    if flat.size:
        # np.unique of the reversed positions finds each position's last write
        kept, first_from_end = np.unique(flat[::-1], return_index=True)
        source[kept] = flat.size - 1 - first_from_end
    spread = S.broadcast_to(E.cast(value, x.dtype), written.shape)  # the shape check
    if not flat.size:  # nothing written: no entry of value lands in x
        return mask.reshape(x.shape), x
    placed = S.reshape(I.take(S.reshape(spread, (-1,)), source), x.shape)
    return mask.reshape(x.shape), placed


def _accumulate(x: Any, index: Any, value: Any, op: str) -> Any:
    """`x[index] += value`, every write to a repeated position added (np.add.at); on the
    tape x plus a scatter_add of value's entries, whose gradient is a take."""
    check_inplace(x, op)
    index = _plain_index(index)
    positions = np.arange(x._data.size).reshape(x.shape)
    try:
        written = positions[index]
    except IndexError as exc:
        raise IndexRangeError(f"{op}: {exc}") from None
    value_grad = getattr(value, "_requires_grad", False)
    if not (STATE.enabled and (x._requires_grad or value_grad)):
        try:
            spread = np.broadcast_to(np.asarray(getattr(value, "_data", value)), written.shape)
        except ValueError as exc:
            raise ShapeError(f"{op}: {exc}") from None
        if not np.can_cast(spread.dtype, x.dtype, casting="same_kind"):
            raise DTypeError(f"{op}: values of dtype {spread.dtype} can't be added to {x.dtype}")
        # by coordinates, not into a reshape of x's memory: that may be a copy (a view)
        np.add.at(x._data, np.unravel_index(written.reshape(-1), x.shape), spread.reshape(-1))
        x._counter[0] += 1
        return x
    spread = S.reshape(S.broadcast_to(E.cast(value, x.dtype), written.shape), (-1,))
    added = I.scatter_add(spread, written.reshape(-1), shape=(x._data.size,))
    return write_result(x, _named(E.add(x, S.reshape(added, x.shape)), op, index, value), op)


def _plain_index(index: Any) -> Any:
    """Tensors inside an index become their arrays, 0-d integer ones ints (as torch)."""
    if isinstance(index, tuple):
        return tuple(_plain_index(i) for i in index)
    if isinstance(index, slice) and index.step is not None and index.step <= 0:
        # torch has no negative strides (numpy would write reversed)
        raise ArgumentError(f"a slice's step must be greater than zero, got {index.step}")
    array = getattr(index, "_data", index)
    if isinstance(array, np.ndarray) and array.ndim == 0 and array.dtype.kind == "i":
        return int(array)
    return array
