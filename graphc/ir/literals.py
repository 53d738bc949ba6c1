"""Literals read from untrusted text or JSON, turned into values within graphc's limits.

Shared by the text parser and the JSON loader: the input as a str (UTF-8 bytes are
decoded, a leading byte order mark dropped), a constant's nested list or raw bytes as an array of its declared type
(each element must fit the dtype: no int that wraps, no finite float that becomes
inf), and short excerpts of hostile input for error messages.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphc.ir.errors import ParseError
from graphc.ir.types import TensorType, dtype_name


@dataclass(frozen=True)
class Base64Array:
    """A b64"..." literal: raw bytes whose dtype and shape come from the node's type."""

    data: bytes


def as_text(text: Any, what: str = "the graph's text") -> str:
    """`text` as a str: UTF-8 bytes are decoded; anything else is a ParseError."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        try:
            return _without_bom(bytes(text).decode("utf-8"))
        except UnicodeDecodeError as exc:
            line = bytes(text).count(b"\n", 0, exc.start) + 1
            raise ParseError(
                f"line {line}: {what} is not UTF-8 (byte {exc.start}: {exc.reason})"
            ) from None
    if isinstance(text, os.PathLike):  # gc.parse(Path("g.txt")): the contents are wanted
        raise ParseError(
            f"expected {what} as a str or bytes, got the path {short(repr(os.fspath(text)))}; "
            "pass the file's contents (Path(...).read_text()), or gc.load a JSON file"
        )
    if not isinstance(text, str):
        raise ParseError(f"expected {what} as a str or bytes, got {type(text).__name__}")
    return _without_bom(text)


def _without_bom(text: str) -> str:
    """`text` without a leading byte order mark, which Windows editors write at the start
    of a UTF-8 file and open(..., encoding="utf-8") keeps (JSON's RFC 8259 lets a
    parser ignore it; graphc never writes one)."""
    return text[1:] if text.startswith("\ufeff") else text


def short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def array_from_literal(value: Any, declared: TensorType, error: Any) -> np.ndarray:
    """A read-only array of the declared type from a nested list, scalar or base64 bytes."""
    if not declared.is_concrete:
        raise error(f"a constant must have a concrete type, not {declared}")
    shape = tuple(int(d) for d in declared.shape)
    dtype = declared.dtype
    if isinstance(value, Base64Array):
        expected = declared.size * dtype.itemsize  # type: ignore[operator]
        if len(value.data) != expected:
            raise error(f"b64 data holds {len(value.data)} bytes, {declared} needs {expected}")
        problem = bool_bytes_problem(value.data, dtype)
        if problem:
            raise error(f"b64 data: {problem}")
        array = np.frombuffer(value.data, dtype.newbyteorder("<")).astype(dtype).reshape(shape)
    else:
        _check_scalars(value, dtype, error)
        try:
            array = np.array(value, dtype=dtype)
        except ValueError:  # ragged nesting, or more dims than numpy has
            raise error(f"the value is not a nested list of the shape of {declared}") from None
        if array.shape != shape:
            if array.size != 0 or declared.size != 0:
                raise error(f"the value has shape {array.shape}, the declared type {declared}")
            array = array.reshape(shape)
    array.flags.writeable = False
    return array


def bool_bytes_problem(data: bytes, dtype: np.dtype) -> str | None:
    """Why raw `data` is no bool array (a byte other than 0 and 1, which numpy would
    keep as a "bool" that compares and hashes unlike True), or None."""
    if dtype != np.bool_:
        return None
    raw = np.frombuffer(data, np.uint8)
    odd = np.flatnonzero(raw > 1)
    if odd.size == 0:
        return None
    return f"byte {odd[0]} of a bool array is {raw[odd[0]]}; bools are the bytes 0 and 1"


def _check_scalars(value: Any, dtype: np.dtype, error: Any) -> None:
    """Every element is a literal of the dtype's kind whose value the dtype holds."""
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_scalars(item, dtype, error)
        return
    if dtype == np.bool_:
        ok = isinstance(value, bool)
    elif np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        ok = type(value) is int and info.min <= value <= info.max
    else:
        ok = type(value) in (int, float)
        # a finite literal that the dtype rounds to inf (1e39 in f32) would load changed
        if ok and math.isfinite(value) and not np.isfinite(_as_float(value, dtype)):
            ok = False
    if not ok:
        raise error(f"the element {short(repr(value))} does not fit dtype {dtype_name(dtype)}")


def _as_float(value: float, dtype: np.dtype) -> Any:
    with np.errstate(over="ignore"):
        return np.array(value, dtype=dtype)
