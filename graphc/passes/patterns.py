"""Patterns for local rewrite rules: what a node and its inputs must look like.

    op("mul", X, ONE)                 mul of anything by a constant (or full_like) of ones
    op("transpose", X, axes="a")      binds the node's attr `axes` as m.a
    op("sub", X, X)                   both inputs the same node

`X`, `Y`, `Z` bind input nodes by name (a second use of a name must be the same
node); `ZERO`, `ONE`, ... match constants whose every element has that value, and
`full_like` nodes filling that value; `C`, `D` bind scalar (one-element) constants.
Binary commutative ops (add, mul, ...) also match with their inputs swapped. A
pattern prints as the algebra it matches (`mul(x, 1)`), which the report shows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from graphc.ir.graph import OP, Node
from graphc.ir.registry import get_op

Bindings = dict[str, Any]

UNIFORM_CHECK_LIMIT = 1 << 16  # larger constants are not scanned for a uniform value


class Pattern:
    def match(self, node: Node, bound: Bindings) -> bool:
        raise NotImplementedError

    @property
    def root_op(self) -> str | None:
        """The op a matching node must have, or None for any node."""
        return None


class Var(Pattern):
    """Any node, bound to `name`; a name used twice must bind the same node."""

    def __init__(self, name: str) -> None:
        self.name = name

    def match(self, node: Node, bound: Bindings) -> bool:
        if self.name in bound:
            return bound[self.name] is node
        bound[self.name] = node
        return True

    def __str__(self) -> str:
        return self.name


def uniform_value(node: Node) -> Any:
    """The one value every element of a constant (or full_like) node has, else None."""
    if node.kind != OP:
        return None
    if node.op == "full_like":  # the value as stored: full_like(x_bool, -1) holds True
        try:
            return np.full((), node.attrs["value"], node.type.dtype).item()
        except (OverflowError, ValueError, TypeError):
            return None
    if node.op != "constant":
        return None
    array = node.value
    if array.size == 0 or array.size > UNIFORM_CHECK_LIMIT:
        return None
    if array.size == 1:
        return array.item()
    first = array.flat[0]
    return first.item() if np.all(array == first) else None


class Uniform(Pattern):
    """A constant or full_like node all of whose elements equal `value`."""

    def __init__(self, value: float) -> None:
        self.value = value

    def match(self, node: Node, bound: Bindings) -> bool:
        found = uniform_value(node)
        return found is not None and not isinstance(found, str) and found == self.value

    def __str__(self) -> str:
        return f"{self.value:g}"


class Scalar(Pattern):
    """A constant node holding one element, bound to `name` (its array is `m.<name>.value`)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def match(self, node: Node, bound: Bindings) -> bool:
        if not (node.is_constant and node.value.size == 1):
            return False
        return Var(self.name).match(node, bound)

    def __str__(self) -> str:
        return self.name


class Op(Pattern):
    """A node of op `op` whose inputs match `args`, binding attrs as `attrs` says."""

    def __init__(self, op: str, args: tuple[Pattern, ...], attrs: dict[str, str]) -> None:
        self.op = op
        self.args = args
        self.attrs = attrs
        self._swaps: bool | None = None  # matches with its two inputs swapped too

    @property
    def root_op(self) -> str:
        return self.op

    def match(self, node: Node, bound: Bindings) -> bool:
        # (every rule of a rewrite is tried on every node of its op: kept lean)
        inputs = node.inputs
        if node.op != self.op or node.kind != OP or len(inputs) != len(self.args):
            return False
        if self._swaps is None:  # asked once the ops are registered
            self._swaps = len(self.args) == 2 and get_op(self.op).has("commutative")
        if self._trial(node, inputs, bound):
            return True
        return self._swaps and self._trial(node, inputs[::-1], bound)

    def _trial(self, node: Node, inputs: tuple[Node, ...], bound: Bindings) -> bool:
        trial = dict(bound)
        for p, x in zip(self.args, inputs):
            if not p.match(x, trial):
                return False
        for key, name in self.attrs.items():
            trial[name] = node.attrs[key]
        bound.update(trial)  # (trial holds what bound held)
        return True

    def __str__(self) -> str:
        parts = [str(a) for a in self.args] + [f"{k}={v}" for k, v in self.attrs.items()]
        return f"{self.op}({', '.join(parts)})"


def op(name: str, *args: Pattern, **attrs: str) -> Op:
    """A pattern for op `name` on inputs matching `args`; `attrs` maps attr -> binding name."""
    return Op(name, args, attrs)


def ops(*names: str) -> Callable[..., Op]:
    """Pattern constructors named after ops: `add, mul = ops("add", "mul")`."""
    return tuple(lambda *args, _n=n, **attrs: op(_n, *args, **attrs) for n in names)  # type: ignore[return-value]


X, Y, Z = Var("x"), Var("y"), Var("z")
C, D = Scalar("c"), Scalar("d")
ZERO, ONE, TWO, THREE, MINUS_ONE = Uniform(0), Uniform(1), Uniform(2), Uniform(3), Uniform(-1)
