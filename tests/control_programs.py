"""Programs with control flow, written once, run three ways: traced, eagerly, on arrays.

Each `Program` is a Python function of float inputs built from graphc's op functions
and `gc.cond` / `gc.scan` / `gc.fori_loop` / `gc.while_loop`. On graph values
(`gc.trace`) it records cond/scan/while_loop nodes; on eager tensors and on plain
arrays the same function runs Python control flow, so it is its own oracle: the
arrays' result is the reference value, the tensors' `.grad` the reference gradient.
The functions return a scalar loss (for gradients); the predicates sit on sums of
the inputs, so different seeds take different branches.

>>> program = PROGRAMS["rnn"]
>>> xs = program.inputs(seed=0)
>>> g = program.graph()
>>> bool(np.allclose(g(*xs), program.fn(*xs)))
True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import graphc as gc


@dataclass(frozen=True)
class Program:
    name: str
    fn: Callable[..., Any]
    shapes: tuple[tuple[int | str, ...], ...]
    differentiable: bool = True
    sizes: tuple[tuple[str, int], ...] = ()  # the sizes symbolic dims take in inputs()

    def specs(self, dtype: str = "float64") -> list[gc.TensorSpec]:
        return [gc.TensorSpec(s, dtype) for s in self.shapes]

    def graph(self, dtype: str = "float64") -> gc.Graph:
        return gc.trace(self.fn, *self.specs(dtype), name=self.name)

    def inputs(self, seed: int = 0, dtype: str = "float64") -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        size = dict(self.sizes)
        shapes = [tuple(size.get(d, d) for d in s) for s in self.shapes]
        return [rng.uniform(-1.0, 1.0, s).astype(dtype) for s in shapes]


def rnn(h: Any, xs: Any, w: Any) -> Any:
    """The tutorials' RNN: w is captured by the body; the states are the ys."""
    last, states = gc.scan(lambda c, x: (gc.tanh(c @ w + x), gc.sin(c)), h, xs)
    return gc.sum(last) + gc.sum(states * states)


def decay(a: Any, xs: Any, w: Any) -> Any:
    """Two carries as a tuple, reverse order, ys a nested pair."""

    def step(carry: Any, x: Any) -> Any:
        p, q = carry
        return (p * 0.5 + x * w, q + gc.tanh(p) * x), (p * q, (gc.sin(q), None))

    (p, q), (pq, (sq, _)) = gc.scan(step, (a, a * 2.0), xs, reverse=True)
    return gc.sum(p * q) + gc.sum(pq) + gc.sum(sq * sq)


def ys_unused(a: Any, xs: Any) -> Any:
    carry, _ = gc.scan(lambda c, x: (gc.sin(c) * x + c, c * 3.0), a, xs)
    return gc.sum(carry)


def carry_unused(a: Any, xs: Any) -> Any:
    _, ys = gc.scan(lambda c, x: (gc.sin(c) * x, gc.exp(gc.tanh(c)) * x), a, xs)
    return gc.sum(ys)


def length_only(a: Any, w: Any) -> Any:
    carry, ys = gc.scan(lambda c, _: (gc.tanh(c * w) + 0.5, c), a, length=3)
    return gc.sum(carry) + gc.sum(ys * ys)


def branches(x: Any, y: Any) -> Any:
    r = gc.cond(gc.sum(x) > 0, lambda a, b: a * b + gc.sin(a), lambda a, b: a - b * b, x, y)
    return gc.sum(r * r)


def pytree_cond(x: Any, y: Any) -> Any:
    """Operands and results as nested lists and tuples, None included; y captured."""

    def left(pair: Any, rest: Any) -> Any:
        a, b = pair
        return [a * y, (gc.exp(gc.tanh(b)), None)]

    def right(pair: Any, rest: Any) -> Any:
        a, b = pair
        return [a - rest[0], (b * b, None)]

    first, (second, _) = gc.cond(gc.sum(x * y) > 0, left, right, (x, x * 0.5), [y])
    return gc.sum(first) + gc.sum(second)


def fori(x: Any, w: Any) -> Any:
    return gc.sum(gc.fori_loop(0, 4, lambda i, v: gc.tanh(v * w) + v, x))


def fori_counter(x: Any) -> Any:
    """The counter i enters the body (cast to the carry's dtype)."""
    return gc.sum(gc.fori_loop(1, 4, lambda i, v: gc.sin(v) * gc.cast(i, v.dtype), x))


def cond_in_scan(a: Any, xs: Any, w: Any) -> Any:
    def step(c: Any, x: Any) -> Any:
        c2 = gc.cond(gc.sum(x) > 0, lambda u: gc.tanh(u * w), lambda u: u * x, c)
        return c2, c2 * x

    carry, ys = gc.scan(step, a, xs)
    return gc.sum(carry) + gc.sum(gc.sin(ys))


def scan_in_scan(a: Any, xs: Any, w: Any) -> Any:
    def outer(c: Any, x: Any) -> Any:
        inner, zs = gc.scan(lambda h, v: (gc.tanh(h * w + v), h * v), c, x)
        return inner + gc.sum(zs, axis=0), gc.sum(inner)

    carry, ys = gc.scan(outer, a, xs)
    return gc.sum(carry * carry) + gc.sum(ys)


def scan_in_cond(a: Any, xs: Any, w: Any) -> Any:
    def taken(u: Any, v: Any) -> Any:
        return gc.scan(lambda c, x: (gc.sin(c * w) + x, c), u, v)[0]

    r = gc.cond(gc.sum(a) > 0, taken, lambda u, v: u * w, a, xs)
    return gc.sum(r * r)


def nested(x: Any, xs: Any, w: Any) -> Any:
    """cond in scan in cond; w is read three bodies deep."""

    def outer(c: Any, x_t: Any) -> Any:
        c2 = gc.cond(gc.sum(c) > 0, lambda a: gc.tanh(a * w + x_t), lambda a: a * w, c)
        return c2, c2 * 2.0

    def taken(v: Any) -> Any:
        return gc.scan(outer, v, xs)

    def other(v: Any) -> Any:
        return v * 0.5, xs * v

    last, ys = gc.cond(gc.sum(x) > -0.5, taken, other, x)
    return gc.sum(last) + gc.sum(ys * ys)


def batched_rnn(h: Any, xs: Any, w: Any) -> Any:
    """A symbolic batch B through the carry and the xs."""
    last, _ = gc.scan(lambda c, x: (gc.tanh(c @ w + x), None), h, xs)
    return gc.sum(last * last)


def grow(x: Any) -> Any:
    """A while_loop: forward only."""
    return gc.sum(gc.while_loop(lambda v: gc.sum(v * v) < 50.0, lambda v: v * 1.5 + 0.1, x))


PROGRAMS: dict[str, Program] = {
    p.name: p
    for p in [
        Program("rnn", rnn, ((2, 3), (4, 2, 3), (3, 3))),
        Program("decay", decay, ((3,), (5, 3), (3,))),
        Program("ys_unused", ys_unused, ((3,), (4, 3))),
        Program("carry_unused", carry_unused, ((3,), (4, 3))),
        Program("length_only", length_only, ((2,), (2,))),
        Program("branches", branches, ((3,), (3,))),
        Program("pytree_cond", pytree_cond, ((3,), (3,))),
        Program("fori", fori, ((3,), (3,))),
        Program("fori_counter", fori_counter, ((2,),)),
        Program("cond_in_scan", cond_in_scan, ((2,), (5, 2), (2,))),
        Program("scan_in_scan", scan_in_scan, ((1,), (2, 3, 1), (1,))),
        Program("scan_in_cond", scan_in_cond, ((2,), (3, 2), (2,))),
        Program("nested", nested, ((3,), (4, 3), (3,))),
        Program("batched_rnn", batched_rnn, (("B", 3), (4, "B", 3), (3, 3)), sizes=(("B", 2),)),
        Program("grow", grow, ((4,),), differentiable=False),
    ]
}
DIFFERENTIABLE = [p for p in PROGRAMS.values() if p.differentiable]
