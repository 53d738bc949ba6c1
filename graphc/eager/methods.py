"""Tensor methods that need a tensor's data or memory, so graph values cannot have them.

Every method that applies an op is shared with graph values (`ValueMethods` in
graphc/ops/methods.py); what is left here reads memory layout (`view` checks that no
copy is needed, `contiguous`), reads values (`equal`, boolean-mask indexing), or makes
new tensors from data (`new_zeros`, ...). In-place methods are in inplace.py, autograd
and conversion to Python and numpy in tensor.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.eager.errors import ArgumentError
from graphc.eager.inplace import basic_index
from graphc.ir.errors import DTypeError, IndexRangeError, ShapeError
from graphc.ir.graph import active_graph
from graphc.ir.types import as_dtype, is_float, normalize_axis
from graphc.ops import elementwise as E
from graphc.ops import indexing as I
from graphc.ops import shape as S
from graphc.ops.methods import ROUNDING_MODES, MinMax, ValueMethods
from graphc.ops.symbolic import Symbol


def check_basic_index(index: Any, rank: int) -> None:
    """torch's IndexErrors: a float or bool item, more indices than dims."""
    items = index if isinstance(index, tuple) else (index,)
    used = 0
    for item in items:
        array = getattr(item, "_data", item)
        if isinstance(item, (float, np.floating, bool, np.bool_)) or (
            isinstance(array, np.ndarray) and array.dtype.kind not in "iub"
        ):
            raise IndexRangeError(
                f"getitem: only integers, slices (:), ellipsis (...), None and integer or "
                f"boolean tensors are valid indices, got {item!r}"
            )
        if isinstance(item, slice) and item.step is not None and item.step <= 0:
            # torch has no negative strides (numpy would reverse): x.flip(dim) does that
            raise ArgumentError(
                f"getitem: a slice's step must be greater than zero, got {item.step} "
                "(use .flip(dim) to reverse)"
            )
        if item is not None and item is not Ellipsis:
            used += 1
    if used > rank:
        raise IndexRangeError(f"getitem: too many indices ({used}) for a tensor of rank {rank}")


def _beyond_getitem(index: Any) -> bool:
    """Whether numpy's advanced indexing is needed beyond what the `getitem` op function
    takes (one integer array with plain ':' slices, as graph values have it): several
    arrays, arrays beside ints, None, ... or partial slices, boolean arrays in a tuple."""
    items = index if isinstance(index, tuple) else (index,)
    arrays = [
        item
        for item in items
        if not (item is None or item is Ellipsis or isinstance(item, (slice, int, np.integer)))
    ]
    if not arrays:
        return False
    if len(arrays) > 1 or np.asarray(getattr(arrays[0], "_data", arrays[0])).dtype == np.bool_:
        return True  # a list of bools too: a mask, as in torch
    return any(
        item is not arrays[0] and not (isinstance(item, slice) and item == slice(None))
        for item in items
    )


def _gather(x: Any, index: Any) -> Any:
    """`x[index]` for any index numpy takes, as a `take` from x's entries in order, so its
    gradient (a scatter_add) adds up the entries read more than once."""
    items = index if isinstance(index, tuple) else (index,)
    plain = tuple(getattr(item, "_data", item) for item in items)
    try:
        positions = np.arange(int(np.prod(x.shape))).reshape(x.shape)[plain]
    except IndexError as exc:
        raise IndexRangeError(f"getitem: {exc}") from None
    return I.take(S.reshape(x, (-1,)), positions)


def _scalars_as_ints(index: Any) -> Any:
    """0-d integer tensors in an index as the ints they hold: torch indexes by them as by
    ints (x[t] is then a view of x, not a copy)."""
    items = index if isinstance(index, tuple) else (index,)
    plain = tuple(
        int(item._data)
        if isinstance(item, EagerMethods) and item._data.ndim == 0 and item.dtype.kind == "i"
        else item
        for item in items
    )
    return plain if isinstance(index, tuple) else plain[0]


def _indexed(t: Any) -> Any:
    """A read by an integer-array or boolean index: torch's node is IndexBackward0."""
    return _spelled(t, "IndexBackward0")


def _spelled(t: Any, name: str) -> Any:
    from graphc.eager.grad_fn import spelled  # grad_fn imports Tensor

    return spelled(t, name)


def _extremum(x: Any, which: str, dim: Any, keepdim: bool, axis: Any, keepdims: bool) -> Any:
    """torch.max / torch.min on a tensor: the shared method (along a dim, the values are
    the entries at the indices returned, so the whole gradient goes to them: torch's
    max(dim)), its grad_fn named as torch names it."""
    method = ValueMethods.max if which == "max" else ValueMethods.min
    if dim is None and axis is None:  # (torch's gradient of a nan result: methods.extremum)
        return _spelled(method(x), f"{which.title()}Backward1")
    result = method(x, dim, keepdim, axis=axis, keepdims=keepdims)
    if axis is not None or not isinstance(dim, (int, np.integer)) or active_graph() is not None:
        return result
    return MinMax(_spelled(result.values, f"{which.title()}Backward0"), result.indices)


def _check_float(dtype: np.dtype, op: str) -> None:
    if not is_float(dtype):
        raise DTypeError(
            f"{op}(): could not infer output dtype: the input must be of a floating point "
            f"dtype, got {dtype} (cast it first, e.g. x.float().{op}())"
        )


def _number(value: Any) -> bool:
    return isinstance(value, (int, float, np.number)) and not isinstance(value, bool)


def _copied(x: Any, out: Any) -> Any:
    """`out`, or a copy of it on the tape where it shares x's memory."""
    if isinstance(out, Symbol) or not np.shares_memory(out._data, x._data):
        return out
    return E.cast(out, out.dtype)


class EagerMethods:
    """Mixed into `Tensor`, before the shared `ValueMethods`.

    Some methods below only name the node the shared method made as torch names it
    (`t()` is TBackward0, `transpose(0, 1)` TransposeBackward0, both a `transpose` op)."""

    shape: tuple
    dtype: np.dtype
    _data: np.ndarray

    def view(self, *shape: Any) -> Any:
        """The same memory in another shape; like torch, an error when no view can do it."""
        out = super().view(*shape)  # type: ignore[misc]
        if isinstance(out, Symbol):  # while tracing: a graph value has no memory to check
            return out
        if out._base is None and out._data.size:
            raise ShapeError(
                f"view: view size {tuple(out.shape)} is not compatible with the input's "
                f"size {tuple(self.shape)} and strides (its dims span non-contiguous "
                "memory); use .reshape(...) instead, which copies"
            )
        return out

    def contiguous(self) -> Any:
        """Self when its memory is in row-major order, else a row-major copy on the tape."""
        if self._data.flags.c_contiguous:
            return self
        out = E.cast(self, self.dtype)
        if isinstance(out, Symbol):  # while tracing
            return out
        out._data = np.ascontiguousarray(out._data)
        if out.grad_fn is not None:
            out.grad_fn.rebase_output(out)
        return _spelled(out, "CloneBackward0")

    def is_contiguous(self) -> bool:
        """True when the memory is in row-major order without gaps (a copy is not needed)."""
        return bool(self._data.flags.c_contiguous)

    def __getitem__(self, index: Any) -> Any:
        """numpy/PyTorch indexing; eagerly a boolean mask (x[x > 0]) and every other
        advanced index (x[[0, 2], [1, 1]]) are fine too, all differentiable."""
        index = _scalars_as_ints(index)
        mask = getattr(index, "_data", index)
        if getattr(mask, "dtype", None) == np.bool_:
            if tuple(mask.shape) == tuple(self.shape):
                return _indexed(I.take(S.reshape(self, (-1,)), np.flatnonzero(mask)))
            if mask.ndim == 1 and self.shape and mask.shape[0] == self.shape[0]:
                return _indexed(I.take(self, np.flatnonzero(mask), axis=0))
            raise IndexRangeError(
                f"getitem: a boolean mask of shape {tuple(mask.shape)} does not fit the "
                f"indexed tensor's shape {self.shape}"
            )
        check_basic_index(index, len(self.shape))
        if _beyond_getitem(index):
            return _indexed(_gather(self, index))
        out = I.getitem(self, index)
        return out if basic_index(index) else _indexed(out)

    def __rtruediv__(self, other: Any) -> Any:
        """`2 / x` is `reciprocal(x) * 2`, as in torch: its backward reads the result only,
        so writing x in place afterwards is no error (div's would read x)."""
        number = isinstance(other, (int, float)) and not isinstance(other, bool)
        if number and active_graph() is None:
            return E.mul(E.reciprocal(self), other)
        return E.div(other, self)

    # -- reductions with torch's semantics -----------------------------------------------

    def max(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None,
            keepdims: bool = False) -> Any:  # fmt: skip
        """The largest element; (values, indices) along dim; maximum with a value."""
        return _extremum(self, "max", dim, keepdim, axis, keepdims)

    def min(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None,
            keepdims: bool = False) -> Any:  # fmt: skip
        """The smallest element; (values, indices) along dim; minimum with a value."""
        return _extremum(self, "min", dim, keepdim, axis, keepdims)

    def median(self, dim: Any = None, keepdim: bool = False) -> Any:
        """The lower of the two middle values (of all elements, or (values, indices) along
        dim), nan if there is one, as torch.median. The gradient goes to the element
        picked along dim; of all elements, it is shared among the elements equal to the
        median (among the nans when it is nan), as torch's."""
        out = ValueMethods.median(self, dim, keepdim)
        if dim is None:
            return _spelled(out, "MedianBackward0") if self._data.size else out
        return MinMax(_spelled(out.values, "MedianBackward1"), out.indices)

    def amax(self, *args: Any, **kwargs: Any) -> Any:
        return _spelled(ValueMethods.amax(self, *args, **kwargs), "AmaxBackward0")  # type: ignore[attr-defined]

    def amin(self, *args: Any, **kwargs: Any) -> Any:
        return _spelled(ValueMethods.amin(self, *args, **kwargs), "AminBackward0")  # type: ignore[attr-defined]

    def prod(self, *args: Any, **kwargs: Any) -> Any:
        out = ValueMethods.prod(self, *args, **kwargs)  # type: ignore[attr-defined]
        along = (args and args[0] is not None) or kwargs.get("dim") is not None
        return _spelled(out, "ProdBackward1") if along else out  # torch's prod(dim) overload

    def mean(self, *args: Any, dtype: Any = None, **kwargs: Any) -> Any:
        """The mean (over dim); as torch, of floating-point tensors (or `dtype=` one) only."""
        _check_float(self.dtype if dtype is None else as_dtype(dtype), "mean")
        return ValueMethods.mean(self, *args, dtype=dtype, **kwargs)  # type: ignore[attr-defined]

    def norm(self, p: Any = "fro", dim: Any = None, keepdim: bool = False,
             dtype: Any = None) -> Any:  # fmt: skip
        """The vector p-norm over dim (all elements by default): p = 2 ("fro"), 1, inf,
        -inf, 0 (the count of nonzeros) or any other number; of floating-point tensors."""
        _check_float(self.dtype if dtype is None else as_dtype(dtype), "norm")
        if p != "fro" and (isinstance(p, bool) or not isinstance(p, (int, float))):
            raise ArgumentError(f"norm: p must be a number or 'fro', got {p!r}")
        out = ValueMethods.norm(self, p, dim, keepdim, dtype)
        return _spelled(out, "LinalgVectorNormBackward0")

    def var(self, *args: Any, **kwargs: Any) -> Any:
        """The variance (see ValueMethods.var); as torch, of floating-point tensors only."""
        _check_float(self.dtype, "var")
        return _spelled(ValueMethods.var(self, *args, **kwargs), "VarBackward0")

    def std(self, *args: Any, **kwargs: Any) -> Any:
        """The standard deviation (see ValueMethods.std), of floating-point tensors only."""
        _check_float(self.dtype, "std")
        return _spelled(ValueMethods.std(self, *args, **kwargs), "StdBackward0")

    # -- torch's names for the nodes of operators with a number on one side ---------------

    def __rsub__(self, other: Any) -> Any:
        out = E.sub(other, self)
        return _spelled(out, "RsubBackward1") if _number(other) else out

    def __pow__(self, other: Any) -> Any:
        out = E.pow(self, other)
        return _spelled(out, "PowBackward1") if isinstance(other, EagerMethods) else out

    def pow(self, other: Any) -> Any:
        return self.__pow__(other)

    def square(self) -> Any:
        return _spelled(E.square(self), "PowBackward0")  # torch's square is pow(x, 2)

    def __rpow__(self, other: Any) -> Any:
        out = E.pow(other, self)
        return _spelled(out, "PowBackward2") if _number(other) else out

    # -- torch's names for the nodes of shared ops -----------------------------------------

    def t(self) -> Any:
        return _spelled(ValueMethods.t(self), "TBackward0")

    def transpose(self, *dims: Any, **named: Any) -> Any:
        """transpose(d0, d1) (or dim0=, dim1=) swaps two dims (PyTorch); a full
        permutation also works."""
        out = ValueMethods.transpose(self, *dims, **named)
        pair = (*dims, *named.values())
        swapped = len(pair) == 2 and all(isinstance(d, (int, np.integer)) for d in pair)
        return _spelled(out, "TransposeBackward0") if swapped else out

    swapaxes = swapdims = transpose

    def unsqueeze(self, dim: int) -> Any:
        return _spelled(ValueMethods.unsqueeze(self, dim), "UnsqueezeBackward0")

    def squeeze(self, dim: Any = None) -> Any:
        """Drop dims of size 1 (all, or those of `dim` that are 1: torch keeps the others)."""
        overload = 0 if dim is None else 2 if isinstance(dim, (tuple, list)) else 1
        return _spelled(ValueMethods.squeeze(self, dim), f"SqueezeBackward{overload}")

    def repeat(self, *repeats: Any) -> Any:
        """Tiled `repeats` times along each dim: always new memory, as torch (by 1s the
        op's result is a view of self, and writes to it reached self)."""
        return _spelled(_copied(self, ValueMethods.repeat(self, *repeats)), "RepeatBackward0")

    def tile(self, *dims: Any) -> Any:
        return _spelled(_copied(self, ValueMethods.tile(self, *dims)), "RepeatBackward0")

    def bmm(self, other: Any) -> Any:
        """Batches of matrices multiplied (torch.bmm: both of rank 3)."""
        return _spelled(ValueMethods.bmm(self, other), "BmmBackward0")

    def unbind(self, dim: int = 0) -> tuple:
        return tuple(_spelled(p, "UnbindBackward0") for p in ValueMethods.unbind(self, dim))

    def split(self, split_size: Any, dim: int = 0) -> tuple:
        name = (
            "SplitWithSizesBackward0" if isinstance(split_size, (list, tuple)) else "SplitBackward0"
        )
        return tuple(_spelled(p, name) for p in ValueMethods.split(self, split_size, dim))

    def chunk(self, chunks: int, dim: int = 0) -> tuple:
        return tuple(_spelled(p, "SplitBackward0") for p in ValueMethods.chunk(self, chunks, dim))

    def sort(self, *args: Any, **kwargs: Any) -> Any:
        out = ValueMethods.sort(self, *args, **kwargs)
        return type(out)(_spelled(out.values, "SortBackward0"), out.indices)

    def topk(self, *args: Any, **kwargs: Any) -> Any:
        out = ValueMethods.topk(self, *args, **kwargs)
        return type(out)(_spelled(out.values, "TopkBackward0"), out.indices)

    def gather(self, dim: int, index: Any) -> Any:
        return _spelled(ValueMethods.gather(self, dim, index), "GatherBackward0")

    def nan_to_num(self, *args: Any, **kwargs: Any) -> Any:
        return _spelled(ValueMethods.nan_to_num(self, *args, **kwargs), "NanToNumBackward0")

    def clone(self) -> Any:
        """A copy that stays differentiable (gradients flow back to self)."""
        return _spelled(ValueMethods.clone(self), "CloneBackward0")

    def nansum(self, *args: Any, **kwargs: Any) -> Any:
        """The sum counting nan as 0 (a sum of where's: torch's node is NansumBackward0)."""
        return _spelled(ValueMethods.nansum(self, *args, **kwargs), "NansumBackward0")  # type: ignore[attr-defined]

    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
        """The diagonal of dims dim1 and dim2 as a last dim (a strided slice: torch's node
        is DiagonalBackward0)."""
        out = ValueMethods.diagonal(self, offset, dim1, dim2)
        return _spelled(out, "DiagonalBackward0")

    def masked_fill(self, mask: Any, value: Any) -> Any:
        """`value` where mask holds, self elsewhere; of self's dtype, as torch (an int
        tensor filled with 2.5 gets 2). A tensor value must be 0-d; it gets a gradient."""
        out = ValueMethods.masked_fill(self, mask, value)
        number = isinstance(value, (bool, int, float, np.generic, np.ndarray))
        return _spelled(out, "MaskedFillBackward0" if number else "MaskedFillBackward1")

    def add(self, other: Any, alpha: Any = 1) -> Any:
        """self + alpha * other (a number times a number stays a weak Python number)."""
        from graphc.eager.functional import add  # functional imports Tensor

        return add(self, other, alpha)

    def sub(self, other: Any, alpha: Any = 1) -> Any:
        from graphc.eager.functional import sub

        return sub(self, other, alpha)

    subtract = sub

    def div(self, other: Any, *, rounding_mode: str | None = None) -> Any:
        """self / other; `rounding_mode="floor"` rounds the quotient down (Python's //),
        "trunc" towards zero, both keeping integer dtypes (torch.div)."""
        if rounding_mode not in ROUNDING_MODES:
            raise ArgumentError(
                f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}"
            )
        return ValueMethods.div(self, other, rounding_mode=rounding_mode)

    divide = div

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        if other is None or isinstance(other, str):  # Python's answer: not equal, as torch
            return NotImplemented
        return E.eq(self, other)

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        if other is None or isinstance(other, str):
            return NotImplemented
        return E.ne(self, other)

    __hash__ = object.__hash__  # defining __eq__ would drop it: tensors key dicts by identity

    def clamp(self, min: Any = None, max: Any = None) -> Any:  # noqa: A002 - torch's names
        """Bounds may be scalars or tensors; at least one must be given, as torch."""
        if min is None and max is None:
            raise ArgumentError("clamp: at least one of min or max must not be None")
        return ValueMethods.clamp(self, min, max)

    def nonzero(self, *, as_tuple: bool = False) -> Any:
        """The indices of the nonzero elements: one row each, or one tensor per dim."""
        from graphc.eager.tensor import make  # tensor imports this module

        if as_tuple:  # a 0-d tensor counts as 1-d, as torch
            found = np.nonzero(np.atleast_1d(self._data))
            return tuple(make(i.astype(np.int64)) for i in found)
        return make(np.argwhere(self._data).astype(np.int64))

    argwhere = nonzero

    def to(self, *args: Any, copy: bool = False, **kwargs: Any) -> Any:
        """`to(dtype)` or `to(other)` (other's dtype; devices are ignored); `copy=True`
        copies even when nothing changes."""
        args = tuple(a.dtype if isinstance(a, EagerMethods) else a for a in args)
        out = ValueMethods.to(self, *args, **kwargs)
        return (
            _spelled(E.cast(self, self.dtype), "ToCopyBackward0") if copy and out is self else out
        )

    # -- memory layout, read from the array ----------------------------------------------

    def element_size(self) -> int:
        """Bytes per element."""
        return self._data.itemsize

    @property
    def itemsize(self) -> int:
        return self._data.itemsize

    @property
    def nbytes(self) -> int:
        return self._data.nbytes

    def stride(self, dim: int | None = None) -> Any:
        """Steps in elements between neighbours along each dim (numpy's are in bytes)."""
        steps = tuple(step // self._data.itemsize for step in self._data.strides)
        if dim is None:
            return steps
        return steps[normalize_axis(dim, len(steps), "stride")]

    def storage_offset(self) -> int:
        """Where this tensor starts in its base's memory, in elements (0 for a base)."""
        base = getattr(self, "_base", None)
        if base is None:
            return 0
        start = self._data.__array_interface__["data"][0]
        origin = base._data.__array_interface__["data"][0]
        return (start - origin) // self._data.itemsize + base.storage_offset()

    def equal(self, other: Any) -> bool:
        """Same shape and the same values (PyTorch's torch.equal)."""
        return tuple(self.shape) == tuple(other.shape) and bool(E.eq(self, other).all())

    def new_tensor(self, data: Any) -> Any:
        from graphc.eager.creation import tensor  # creation imports Tensor

        return tensor(data, dtype=self.dtype)

    def new_zeros(self, *shape: Any) -> Any:
        from graphc.eager.creation import zeros

        return zeros(*shape, dtype=self.dtype)

    def new_ones(self, *shape: Any) -> Any:
        from graphc.eager.creation import ones

        return ones(*shape, dtype=self.dtype)

    def new_full(self, size: Any, fill_value: Any) -> Any:
        from graphc.eager.creation import full

        return full(size, fill_value, dtype=self.dtype)

    def new_empty(self, *shape: Any) -> Any:
        from graphc.eager.creation import empty

        return empty(*shape, dtype=self.dtype)
