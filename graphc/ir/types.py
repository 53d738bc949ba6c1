"""Tensor types: a shape whose dims are ints or named symbols, and a numpy dtype.

A symbolic dim such as ``"B"`` stands for a size known only when the graph runs.
Broadcasting follows numpy, extended to symbols: ``B`` against ``1`` gives ``B``,
``B`` against ``B`` gives ``B``; ``B`` against ``3`` or against another symbol ``C``
is an error, because the graph would then be valid only for some bindings.

The dtypes are `DTYPES`: float16/32/64, int8/16/32/64, uint8/16/32/64 and bool, under
short names (f32, u8, ...), and bfloat16 (bf16) where the ml_dtypes package is installed
(it comes with onnx and with jax; graphc does not depend on it). Type rules are numpy
2's (NEP 50: a Python scalar takes the array's dtype). Kernels are numpy's: its float16
loops compute in float32 and round each result; graphc's own loops that would round a
float16 sum at every term (convolutions) compute in float32 and round once.

bfloat16 is ml_dtypes' numpy dtype, of kind 'V' to numpy: `is_float` is the one test
of "a floating dtype" graphc's layers ask. Every op computes a 16-bit float operand
(bfloat16 or float16) in float32 and rounds its 16-bit result once, but a ufunc runs
ml_dtypes' bfloat16 loop or numpy's float16 loop, which round each element they compute
in float32 (ops/defop.py); the native backend leaves 16-bit steps to numpy ("no native
kernels for bfloat16"). Its type rules are
numpy's with ml_dtypes: bfloat16 with float32 or float16 gives float32 (as jax), with
float64 float64, with bool, int8 and uint8 bfloat16, with int16 and uint16 float32 and
with wider ints float64 (as float16 does; jax keeps bfloat16 there).
ml_dtypes is imported only when a bfloat16 is met or asked for (it takes about half a
second to import here); without it, asking for bfloat16 is a `DTypeError` saying to
install it.
"""

from __future__ import annotations

import importlib
import math
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphc.ir.errors import DTypeError, IndexRangeError, ShapeError

Dim = int | str
Shape = tuple[Dim, ...]

# The dtypes graphc supports, by their short text name.
DTYPES: dict[str, np.dtype] = {
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "bool": np.dtype(np.bool_),
    # the small ones: storage, and numpy's own kernels (float16 has numpy loops for
    # every ufunc; an op whose numpy kernel has none computes in float32 and casts back)
    "f16": np.dtype(np.float16),
    "i8": np.dtype(np.int8),
    "i16": np.dtype(np.int16),
    "u8": np.dtype(np.uint8),
    "u16": np.dtype(np.uint16),
    "u32": np.dtype(np.uint32),
    "u64": np.dtype(np.uint64),
}
_SHORT_NAME = {dt: name for name, dt in DTYPES.items()}
# bfloat16 joins both tables when first asked for (`bfloat16`), or at once if another
# library imported ml_dtypes already (that costs nothing more)
_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # used with fullmatch: "B\n" is no symbol

# numpy indexes with intp: no array has more bytes than this, and a larger dim or
# element count (from a hand-written file, say) would overflow numpy's arithmetic
MAX_BYTES = 2**63 - 1
MAX_RANK = 64  # numpy's NPY_MAXDIMS


def as_dtype(dtype: object) -> np.dtype:
    """Normalize anything numpy understands as a dtype (or a short name like 'f32')."""
    if isinstance(dtype, str) and dtype in DTYPES:
        return DTYPES[dtype]
    if isinstance(dtype, str) and dtype in BFLOAT16_NAMES:
        return bfloat16()
    if isinstance(dtype, np.dtype) and dtype in _SHORT_NAME:  # the common case, first
        return dtype
    # lists, dicts and tuples would make numpy build structured dtypes (or fail oddly)
    if not isinstance(dtype, (str, type, np.dtype)):
        raise DTypeError(f"not a dtype: {dtype!r}")
    try:
        dt = np.dtype(dtype)
    except (TypeError, ValueError):
        raise DTypeError(f"not a dtype: {dtype!r}") from None
    if dt not in _SHORT_NAME:
        if dt.name == "bfloat16":  # ml_dtypes' (or an impostor's): registered once, or refused
            bf16 = bfloat16()
            if dt == bf16:
                return bf16
        supported = ", ".join(str(d) for d in DTYPES.values())
        raise DTypeError(f"dtype {dt} is not supported; expected one of {supported}")
    return dt


BFLOAT16_MISSING = (
    "bfloat16 needs the ml_dtypes package: pip install ml_dtypes (or graphc's onnx extra, "
    "pip install 'graphc[onnx]')"
)
BFLOAT16_NAMES = ("bf16", "bfloat16")


def bfloat16() -> np.dtype:
    """ml_dtypes' bfloat16, imported and added to `DTYPES` (as "bf16") on first use.

    A `DTypeError` saying to install ml_dtypes where it is missing."""
    if "bf16" in DTYPES:
        return DTYPES["bf16"]
    try:
        ml_dtypes = importlib.import_module("ml_dtypes")
    except ImportError:
        raise DTypeError(BFLOAT16_MISSING) from None
    dt = np.dtype(ml_dtypes.bfloat16)
    _SHORT_NAME[dt] = "bf16"
    DTYPES["bf16"] = dt
    return dt


def known_dtype(name: str) -> np.dtype | None:
    """The dtype of a short name from the text form or JSON ('f32', 'bf16', ...), or None."""
    if name == "bf16":
        return bfloat16()
    return DTYPES.get(name)


def is_float(dtype: np.dtype) -> bool:
    """Is `dtype` a floating dtype (float16/32/64 or bfloat16)? The one test of it: numpy
    calls bfloat16 kind 'V', so `dtype.kind == "f"` and `np.floating` miss it.

    >>> is_float(np.dtype("float16")), is_float(np.dtype("int8"))
    (True, False)
    """
    kind = dtype.kind
    return kind == "f" or (kind == "V" and dtype.name == "bfloat16")


def finfo(dtype: np.dtype) -> Any:
    """`np.finfo` of a floating dtype, bfloat16's from ml_dtypes (numpy has none)."""
    if is_bfloat16(dtype):
        return importlib.import_module("ml_dtypes").finfo(dtype)
    return np.finfo(dtype)


def is_bfloat16(dtype: object) -> bool:
    """Is `dtype` (a dtype, or None) bfloat16? Without importing ml_dtypes."""
    return isinstance(dtype, np.dtype) and dtype.kind == "V" and dtype.name == "bfloat16"


def is_half(dtype: np.dtype) -> bool:
    """A 16-bit float (float16, bfloat16): what convolutions and pooling sum in float32.

    >>> is_half(np.dtype("float16")), is_half(np.dtype("float32"))
    (True, False)
    """
    return dtype == np.float16 or is_bfloat16(dtype)


def dtype_name(dtype: np.dtype) -> str:
    """The short text name of a supported dtype ('f32', 'i64', ...)."""
    return _SHORT_NAME[dtype]


def is_symbol(dim: Dim) -> bool:
    return isinstance(dim, str)


def as_dim(dim: object) -> Dim:
    """Validate one dim: a non-negative int or an identifier naming a symbol."""
    if isinstance(dim, (bool, np.bool_)):
        raise ShapeError(f"a dim must be an int or a symbol name, got {dim!r}")
    if isinstance(dim, (int, np.integer)):
        if dim < 0:
            raise ShapeError(f"a dim must be >= 0, got {dim}")
        if dim > MAX_BYTES:
            raise ShapeError(f"a dim must be at most 2**63 - 1, got {dim}")
        return int(dim)
    if isinstance(dim, str) and _SYMBOL.fullmatch(dim):
        return str(dim)  # a str subclass (a dim read from a graph value's shape) as plain str
    raise ShapeError(f"a dim must be an int or a symbol name, got {dim!r}")


def as_shape(shape: object, op: str = "op") -> Shape:
    """A shape from an int, a symbol name or a sequence of them; errors name `op`."""
    if isinstance(shape, (int, str, np.integer)):
        dims: tuple = (shape,)
    else:
        try:
            dims = tuple(shape)  # type: ignore[arg-type]
        except TypeError:
            raise ShapeError(f"{op}: a shape is a sequence of dims, got {shape!r}") from None
    try:
        return tuple(as_dim(d) for d in dims)
    except ShapeError as exc:
        raise ShapeError(f"{op}: bad shape {dims}: {exc}") from None


@dataclass(frozen=True)
class TensorType:
    """The static type of a value: shape (ints and symbols) and dtype.

    >>> TensorType(("B", 3), "float32")
    TensorType(f32[B,3])
    """

    shape: Shape
    dtype: np.dtype

    def __init__(self, shape: Iterable[object], dtype: object = "float32") -> None:
        dims = tuple(as_dim(d) for d in shape)
        if len(dims) > MAX_RANK:
            raise ShapeError(f"a type has at most {MAX_RANK} dims (numpy's limit), got {len(dims)}")
        dt = as_dtype(dtype)
        nbytes = dt.itemsize
        for d in dims:
            if isinstance(d, int) and d:
                nbytes *= d
        if nbytes > MAX_BYTES:
            raise ShapeError(
                f"the type {dtype_name(dt)}{list(dims)} has more bytes than an array can hold"
            )
        object.__setattr__(self, "shape", dims)
        object.__setattr__(self, "dtype", dt)
        object.__setattr__(self, "_hash", hash((dims, dt)))

    def __hash__(self) -> int:  # computed once: types are dict keys in every pass
        return self._hash  # type: ignore[attr-defined, no-any-return]

    def __reduce__(self) -> tuple:  # rebuilt, not copied: a str's hash is per process
        return TensorType, (self.shape, self.dtype)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_concrete(self) -> bool:
        return not any(is_symbol(d) for d in self.shape)

    @property
    def symbols(self) -> tuple[str, ...]:
        return tuple(d for d in self.shape if isinstance(d, str))

    @property
    def size(self) -> int | None:
        """Number of elements, or None while a dim is symbolic."""
        if not self.is_concrete:
            return None
        return math.prod(self.shape)  # type: ignore[arg-type]

    @property
    def nbytes(self) -> int | None:
        size = self.size
        return None if size is None else size * self.dtype.itemsize

    def with_shape(self, shape: Iterable[object]) -> TensorType:
        return TensorType(shape, self.dtype)

    def with_dtype(self, dtype: object) -> TensorType:
        return TensorType(self.shape, dtype)

    def bind(self, bindings: Mapping[str, int]) -> TensorType:
        """Replace the symbols that `bindings` knows by their sizes."""
        return TensorType(bind_shape(self.shape, bindings), self.dtype)

    def matches(self, array: np.ndarray) -> bool:
        """Does a concrete array fit this type (symbols match any size)?"""
        if array.dtype != self.dtype or array.ndim != self.rank:
            return False
        return all(is_symbol(d) or d == n for d, n in zip(self.shape, array.shape))

    def __str__(self) -> str:
        return f"{dtype_name(self.dtype)}[{','.join(str(d) for d in self.shape)}]"

    def __repr__(self) -> str:
        return f"TensorType({self})"

    @classmethod
    def of(cls, array: np.ndarray) -> TensorType:
        """The type of a concrete array."""
        return cls(array.shape, array.dtype)


@dataclass(frozen=True)
class TupleType:
    """The type of a node with several results (a scan's carries and stacked outputs,
    a cond's branch results): one TensorType per result, read by `result` nodes.

    >>> TupleType((TensorType(("B", 3)), TensorType((), "int64")))
    TupleType((f32[B,3], i64[]))
    """

    items: tuple[TensorType, ...]

    def __init__(self, items: Iterable[TensorType]) -> None:
        items = tuple(items)
        for t in items:
            if not isinstance(t, TensorType):
                raise ShapeError(f"a tuple type holds tensor types, got {t!r}")
        object.__setattr__(self, "items", items)

    def __len__(self) -> int:
        return len(self.items)

    @property
    def is_concrete(self) -> bool:
        return all(t.is_concrete for t in self.items)

    @property
    def symbols(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(d for t in self.items for d in t.symbols))

    @property
    def nbytes(self) -> int | None:
        sizes = [t.nbytes for t in self.items]
        return None if None in sizes else sum(sizes)  # type: ignore[arg-type]

    def bind(self, bindings: Mapping[str, int]) -> TupleType:
        return TupleType(t.bind(bindings) for t in self.items)

    def __str__(self) -> str:
        inner = ", ".join(str(t) for t in self.items)
        return f"({inner},)" if len(self.items) == 1 else f"({inner})"

    def __repr__(self) -> str:
        return f"TupleType({self})"


ValueType = TensorType | TupleType


def bind_shape(shape: Sequence[Dim], bindings: Mapping[str, int]) -> Shape:
    return tuple(bindings.get(d, d) if isinstance(d, str) else d for d in shape)


def format_shape(shape: Sequence[Dim]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def broadcast_shapes(*shapes: Sequence[Dim], op: str = "op") -> Shape:
    """numpy broadcasting over shapes that may hold symbolic dims."""
    rank = max((len(s) for s in shapes), default=0)
    result: list[Dim] = []
    for axis in range(-rank, 0):
        dims = [s[axis] for s in shapes if len(s) >= -axis]
        out: Dim = 1
        for d in dims:
            if d == 1 or d == out:
                continue
            if out == 1:
                out = d
            else:
                shown = ", ".join(format_shape(s) for s in shapes)
                raise ShapeError(
                    f"{op}: shapes {shown} do not broadcast: dim {out!r} against {d!r} "
                    f"(axis {axis}); symbolic dims broadcast only with 1 or the same symbol"
                )
        result.append(out)
    return tuple(result)


def normalize_axis(axis: object, rank: int, op: str = "op") -> int:
    """`axis` as a non-negative int; numpy's negative axes count from the end."""
    # an int only, as numpy wants: 1.0, True or "1" in a loaded file must not pass as 1
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise ShapeError(f"{op}: an axis must be an int, got {axis!r}")
    if (axis not in (0, -1)) if rank == 0 else not -rank <= axis < rank:  # 0-d: torch's 0, -1
        # an IndexRangeError (a ShapeError and an IndexError), as numpy's AxisError and torch
        raise IndexRangeError(f"{op}: axis {axis} is out of range for rank {rank}")
    return int(axis) % rank if rank else 0


def normalize_axes(axis: object, rank: int, op: str = "op") -> tuple[int, ...] | None:
    """None (all axes) or a sorted tuple of distinct non-negative axes."""
    if axis is None:
        return None
    items = axis if isinstance(axis, (tuple, list)) else (axis,)
    axes = sorted({normalize_axis(a, rank, op) for a in items})
    if len(axes) != len(items):
        raise ShapeError(f"{op}: repeated axis in {axis!r}")
    return tuple(axes)


if "ml_dtypes" in sys.modules:  # imported by jax or onnx before graphc: bfloat16 is free
    bfloat16()
