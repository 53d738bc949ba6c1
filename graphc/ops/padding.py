"""`pad` (constant, reflect, edge, wrap) and its adjoint `unpad`.

Both ops hold the padding canonically: one (before, after) pair of non-negative ints
per axis. Every mode reads each padded position from one position of x (or from the
constant), axis by axis: `source_positions` says which. So the adjoint adds each cotangent of
a padded position back onto its source, and pad is linear apart from the constant;
unpad's gradient is pad with a constant 0.

PyTorch's pad list (last dim first, negatives crop) is graphc.nn.functional.pad.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from graphc.ir.attrs import int64_value
from graphc.ir.errors import DTypeError, GraphcError, ShapeError
from graphc.ir.types import Shape, TensorType, format_shape, is_float, is_symbol
from graphc.ops.defop import defop, into
from graphc.ops.spelling import count

_MODES = {
    "constant": "constant",
    "reflect": "reflect",
    "edge": "edge",
    "replicate": "edge",  # PyTorch's name
    "wrap": "wrap",
    "circular": "wrap",  # PyTorch's name
}

PadWidth = tuple[tuple[int, int], ...]


def _pad_width(pad_width: Any, rank: int, op: str) -> PadWidth:
    """numpy's spellings: n, (n,), (before, after), or one pair per axis (or one pair)."""
    if isinstance(pad_width, (int, np.integer)):
        pad_width = (pad_width,)
    try:
        items = tuple(pad_width)
    except TypeError:
        raise GraphcError(
            f"{op}: pad_width must be ints or pairs of ints, got {pad_width!r}"
        ) from None
    if items and all(isinstance(p, (int, np.integer)) for p in items):
        if len(items) > 2:
            raise GraphcError(
                f"{op}: pad_width {pad_width!r}: give one (before, after) pair per axis"
            )
        pairs = [tuple(items) * (2 // len(items))] * rank
    else:
        pairs = []
        for p in items:
            try:
                pair = tuple(p)
            except TypeError:
                raise GraphcError(f"{op}: pad_width {pad_width!r} mixes ints and pairs") from None
            pairs.append(pair * 2 if len(pair) == 1 else pair)
        if len(pairs) == 1:
            pairs = pairs * rank
    if len(pairs) != rank or any(len(p) != 2 for p in pairs):
        raise GraphcError(
            f"{op}: pad_width {pad_width!r} must give a (before, after) pair for each of "
            f"the {rank} axes"
        )
    return tuple(tuple(count(p, op, "a pad", low=0) for p in pair) for pair in pairs)  # type: ignore[return-value]


def _mode(mode: Any, op: str) -> str:
    if mode not in _MODES:
        raise GraphcError(f"{op}: mode must be one of {', '.join(_MODES)}, got {mode!r}")
    return _MODES[mode]


def _check_pads(shape: Shape, pad_width: PadWidth, mode: str, op: str) -> None:
    """Every pad fits its dim: none on a symbolic dim; reflect mirrors at most n - 1
    elements, wrap at most n, edge needs one (PyTorch's limits)."""
    for axis, (n, (before, after)) in enumerate(zip(shape, pad_width)):
        if not (before or after):
            continue
        if is_symbol(n):
            raise ShapeError(
                f"{op}: cannot pad the symbolic dim {n!r} (axis {axis}): a dim is one int or "
                "one symbol, never a sum such as B+2"
            )
        limit = {"constant": None, "reflect": n - 1, "edge": None, "wrap": n}[mode]
        if (limit is not None and max(before, after) > limit) or (mode == "edge" and n == 0):
            raise ShapeError(
                f"{op}: {mode} padding ({before}, {after}) of axis {axis} does not fit its "
                f"size {n} (reflect: at most size - 1, wrap: at most size, edge: size >= 1)"
            )


def _padded(shape: Shape, pad_width: PadWidth) -> Shape:
    return tuple(n if is_symbol(n) else n + b + a for n, (b, a) in zip(shape, pad_width))


def source_positions(n: int, before: int, after: int, mode: str) -> np.ndarray:
    """For each padded position along an axis, the position of x it copies."""
    k = np.arange(-before, n + after)
    if mode == "edge":
        return np.clip(k, 0, n - 1)
    if mode == "wrap":
        return k % n
    # reflect, without repeating the edge; the pads are at most n - 1
    return np.where(k < 0, -k, np.where(k > n - 1, 2 * (n - 1) - k, k))


def _value(value: Any, dtype: np.dtype) -> Any:
    """The constant as a Python scalar exactly representable in x's dtype."""
    if isinstance(value, np.generic):
        value = value.item()
    if not isinstance(value, (bool, int, float)):
        raise GraphcError(f"pad: constant_values must be a real scalar, got {value!r}")
    if is_float(dtype):
        return np.asarray(value, dtype).item()  # rounded once, to x's precision
    if not (np.isfinite(value) and float(value).is_integer()):
        raise DTypeError(f"pad: constant_values {value!r} is not a whole number for {dtype}")
    if dtype == np.bool_:
        if value not in (0, 1):
            raise DTypeError(f"pad: constant_values {value!r} is not a bool")
        return bool(value)
    info = np.iinfo(dtype)
    if not info.min <= int(value) <= info.max:
        raise DTypeError(f"pad: constant_values {value!r} does not fit {dtype}")
    hint = "pad gc.cast(x, 'int64') with constant_values - 2**64 and cast back to uint64"
    return int64_value(int(value), "pad", "constant_values", hint)


# -- pad ---------------------------------------------------------------------------------------


def _pad_canon(x: TensorType, pad_width: Any, mode: Any, constant_values: Any) -> dict:
    mode = _mode(mode, "pad")
    return {
        "pad_width": _pad_width(pad_width, x.rank, "pad"),
        "mode": mode,
        # only the constant mode reads it: one canonical 0 elsewhere
        "constant_values": _value(constant_values if mode == "constant" else 0, x.dtype),
    }


def _pad_infer(x: TensorType, pad_width: PadWidth, mode: str, constant_values: Any) -> TensorType:
    _check_pads(x.shape, pad_width, mode, "pad")
    return x.with_shape(_padded(x.shape, pad_width))


def _pad_kernel(
    x: np.ndarray,
    out: np.ndarray | None = None,
    pad_width: PadWidth = (),
    mode: str = "constant",
    constant_values: Any = 0,
) -> np.ndarray:
    _check_pads(x.shape, pad_width, mode, "pad")
    if out is None:
        out = np.empty(_padded(x.shape, pad_width), x.dtype)
    if mode == "constant":
        if any(b or a for b, a in pad_width):
            out.fill(constant_values)
        out[tuple(slice(b, b + n) for n, (b, a) in zip(x.shape, pad_width))] = x
        return out
    rows = [
        source_positions(n, b, a, mode) if b or a else np.arange(n)
        for n, (b, a) in zip(x.shape, pad_width)
    ]
    return into(out, x[np.ix_(*rows)] if rows else x)


_pad = defop(
    "pad",
    infer=_pad_infer,
    kernel=_pad_kernel,
    attrs={"pad_width": 0, "mode": "constant", "constant_values": 0},
    canonicalize=_pad_canon,
    vjp=lambda ct, out, x, needs, pad_width, mode, constant_values: (
        _unpad(ct, pad_width=pad_width, mode=mode),
    ),
    doc="x padded along each axis (np.pad's pad_width): constant, reflect, edge or wrap.",
)


def pad(x: Any, pad_width: Any, mode: str = "constant", constant_values: Any = 0) -> Any:
    """x padded along each axis, as np.pad: `pad_width` is one (before, after) pair per
    axis, or one pair (or one int) for all of them.

    Modes: "constant" (`constant_values`), "reflect" (mirrored without repeating the
    edge, at most size - 1), "edge" (the edge repeated; PyTorch's "replicate") and
    "wrap" (PyTorch's "circular", at most size). A symbolic dim cannot be padded.
    PyTorch's pad list is graphc.nn.functional.pad.

    >>> import numpy as np, graphc as gc
    >>> gc.pad(np.array([1, 2, 3]), (2, 1), mode="reflect").tolist()
    [3, 2, 1, 2, 3, 2]
    >>> gc.pad(np.ones((1, 2)), ((0, 0), (1, 0)), constant_values=9.0).tolist()
    [[9.0, 1.0, 1.0]]
    """
    return _pad(x, pad_width=pad_width, mode=mode, constant_values=constant_values)


# -- unpad, the adjoint ---------------------------------------------------------------------


def _unpad_canon(ct: TensorType, pad_width: Any, mode: Any) -> dict:
    return {"pad_width": _pad_width(pad_width, ct.rank, "unpad"), "mode": _mode(mode, "unpad")}


def _unpadded(shape: Shape, pad_width: PadWidth, op: str) -> Shape:
    result = []
    for n, (b, a) in zip(shape, pad_width):
        if (b or a) and (is_symbol(n) or n < b + a):  # type: ignore[operator]
            raise ShapeError(f"{op}: cannot take pads {pad_width} off shape {format_shape(shape)}")
        result.append(n if is_symbol(n) else n - b - a)  # type: ignore[operator]
    return tuple(result)


def _unpad_infer(ct: TensorType, pad_width: PadWidth, mode: str) -> TensorType:
    shape = _unpadded(ct.shape, pad_width, "unpad")
    _check_pads(shape, pad_width, mode, "unpad")
    return ct.with_shape(shape)


def _unpad_kernel(
    ct: np.ndarray, out: np.ndarray | None = None, pad_width: PadWidth = (), mode: str = "constant"
) -> np.ndarray:
    shape = _unpadded(ct.shape, pad_width, "unpad")
    _check_pads(shape, pad_width, mode, "unpad")
    interior = tuple(slice(b, b + n) for n, (b, a) in zip(shape, pad_width))
    if mode == "constant":
        return into(out, ct[interior])
    result = ct
    for axis, (n, (b, a)) in enumerate(zip(shape, pad_width)):
        if not (b or a):
            continue
        source = source_positions(n, b, a, mode)
        padded = np.moveaxis(result, axis, 0)
        folded = padded[b : b + n].copy()
        # pads are a few positions: one vectorized add per position, in a fixed order
        for j in itertools.chain(range(b), range(b + n, b + n + a)):
            folded[source[j]] += padded[j]
        result = np.moveaxis(folded, 0, axis)
    return into(out, result)


_unpad = defop(
    "unpad",
    inputs=("ct",),
    infer=_unpad_infer,
    kernel=_unpad_kernel,
    attrs={"pad_width": 0, "mode": "constant"},
    canonicalize=_unpad_canon,
    vjp=lambda ct, out, x, needs, pad_width, mode: (_pad(ct, pad_width=pad_width, mode=mode),),
    doc="The adjoint of pad: each padded position's value added back onto its source.",
)


def unpad(ct: Any, pad_width: Any, mode: str = "constant") -> Any:
    """The adjoint of pad (its gradient): the interior of ct, plus, for the reflect,
    edge and wrap modes, each padded position's value added onto the one it copies.

    >>> import numpy as np, graphc as gc
    >>> gc.unpad(np.array([1.0, 10.0, 100.0, 1000.0]), (1, 1), mode="edge").tolist()
    [11.0, 1100.0]
    """
    return _unpad(ct, pad_width=pad_width, mode=mode)
