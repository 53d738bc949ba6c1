"""Attribute values: the kinds an op node's attrs may hold, and exact comparison.

An attr is None, a bool, an int that fits int64, a float, a str, a supported dtype,
a tuple of attrs, an array (a constant's value) or a Graph (a fused node's body).
Nothing else: a value of another type could run code of its own when an op's rule
compares or converts it, and text and JSON could not write it down.

Two attrs are the same only when they have the same type and the same value, floats
bit for bit: ``1`` is not ``1.0`` nor ``True``, ``-0.0`` is not ``0.0``. That is the
sense in which `verify` asks a node's attrs to equal their canonical form.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

import numpy as np

from graphc.ir.errors import GraphcError
from graphc.ir.graph import Graph
from graphc.ir.types import DTYPES

# deeper nesting than any real attr (numpy's arrays have at most 64 dims) only
# serves to exhaust the stack of whatever walks the value next
MAX_DEPTH = 64
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

_PLAIN = (type(None), bool, str, float)


def attr_problem(value: Any, depth: int = 0) -> str | None:
    """Why `value` cannot be an attribute value, or None when it can."""
    kind = type(value)
    if kind in _PLAIN:
        return None
    if kind is int:
        if INT64_MIN <= value <= INT64_MAX:
            return None
        return f"the int {value}, which does not fit int64"
    if kind is tuple:
        if depth >= MAX_DEPTH:
            return f"tuples nested more than {MAX_DEPTH} deep"
        for item in value:
            problem = attr_problem(item, depth + 1)
            if problem:
                return problem
        return None
    if isinstance(value, np.dtype):
        if any(type(value) is type(d) and value == d for d in DTYPES.values()):
            return None
        return f"dtype {value} is not one graphc supports"
    if kind is np.ndarray or isinstance(value, Graph):
        return None  # whether the op takes one is the op's rule's business
    if kind is list:
        return "a list (sequences in attributes are tuples)"
    return f"a value of type {kind.__name__}"


def attrs_problem(attrs: Mapping[str, Any]) -> str | None:
    """Why a node's `attrs` cannot be its attributes (naming the first attr that cannot
    be one), or None when they all can: what verify and the recording of a node ask."""
    for key, value in attrs.items():
        problem = attr_problem(value)
        if problem:
            return f"attr '{key}' cannot hold {problem}"
    return None


def int64_value(value: int, op: str, attr: str, hint: str) -> int:
    """`value` when a graph can keep it as an integer attribute, else an error naming the op.

    numpy takes uint64's values past int64's range; a graph does not (see the module's
    doc), so an op that accepts any value of its dtype refuses those, saying `hint`.
    """
    if INT64_MIN <= value <= INT64_MAX:
        return value
    raise GraphcError(
        f"{op}: {attr} {value} does not fit int64, which a graph keeps integer attributes "
        f"in; {hint}"
    )


def same_attr(a: Any, b: Any) -> bool:
    """Are two attr values the same: same types, equal values, floats bit for bit?"""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return struct.pack("<d", a) == struct.pack("<d", b)
    if type(a) in (tuple, list):
        return len(a) == len(b) and all(same_attr(x, y) for x, y in zip(a, b))
    if type(a) is np.ndarray:
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, Graph):
        return a is b
    return bool(a == b)


def show_attr(value: Any, other: Any) -> str:
    """`value` for an error message, with its type when `other` would look the same;
    dtypes by the names the text form writes (f32, not dtype('float32'))."""
    text = _short(_shown(value))
    if text == _short(_shown(other)):
        text += f" ({type(value).__name__})"
    return text


def _shown(value: Any) -> str:
    if isinstance(value, np.dtype) and value in DTYPES.values():
        return next(name for name, dtype in DTYPES.items() if dtype == value)
    if type(value) is tuple:
        inner = ", ".join(_shown(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return repr(value)


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
