"""Nodes with several results, and `result`, the op that reads one of them.

A node may compute several values at once (a scan's final carries and stacked
outputs, a cond's branch results). Its type is a `TupleType`, its kernel returns a
tuple of arrays (writing into a tuple of buffers when given `out=`), and the only ops
that read it are `result` nodes, one per result used, as torch.fx reads a
multi-output call with `getitem` nodes:

    %scan: (f32[B,8], f32[T,B,8]) = scan(%h0, %xs, body=..., ...)
    %h: f32[B,8] = result(%scan, index=0)
    %ys: f32[T,B,8] = result(%scan, index=1)

So every edge but those into `result` carries one tensor, and passes, plans and
pictures keep working value by value. The cotangent of a node with several results
is a tuple, one slot per result (None where no gradient arrives): `result`'s VJP
fills its slot, `add_cotangents` sums them slot by slot, and the node's own VJP rule
receives the tuple.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ir.errors import GraphcError, IndexRangeError
from graphc.ir.types import TensorType, TupleType
from graphc.ops.defop import defop, into
from graphc.ops.dispatch import bind


def _check(t: Any, index: Any) -> int:
    if not isinstance(t, TupleType):
        raise GraphcError(f"result: its input must have several results (a tuple type), got {t}")
    if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
        raise GraphcError(f"result: index must be an int, got {index!r}")
    if not 0 <= index < len(t.items):
        raise IndexRangeError(f"result: index {index} is out of range for {len(t.items)} results")
    return int(index)


def _infer(t: TupleType, index: int) -> TensorType:
    return t.items[_check(t, index)]


def _result_vjp(ct: Any, out: Any, t: Any, needs: tuple, index: int) -> tuple:
    """A tuple cotangent for the node read: `ct` in slot `index`, None elsewhere."""
    count = len(t) if isinstance(t, (tuple, list)) else len(t.type.items)
    return (tuple(ct if k == index else None for k in range(count)),)


result_op = defop(
    "result",
    infer=_infer,
    kernel=lambda t, out=None, index=0: into(out, t[index]),
    attrs={"index": 0},
    canonicalize=lambda t, index: {"index": _check(t, index)},
    vjp=_result_vjp,
    doc="Result `index` of a node with several results (scan, cond, while_loop).",
)


def results(value: Any) -> list[Any]:
    """The results of a node with several results: one `result` each for a graph value
    of a tuple type; the items themselves for a tuple of arrays or tensors."""
    if isinstance(value, (tuple, list)):
        return list(value)
    return [bind("result", value, index=k) for k in range(len(value.type.items))]


def add_cotangents(a: Any, b: Any) -> Any:
    """The sum of two cotangents; of a node with several results, slot by slot (None
    where a slot has none)."""
    if isinstance(a, tuple):
        return tuple(
            y if x is None else x if y is None else bind("add", x, y) for x, y in zip(a, b)
        )
    return bind("add", a, b)
