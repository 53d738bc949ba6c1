"""Errors of gc.cond / gc.scan / gc.while_loop / gc.fori_loop: each one named and explained.

Structure mistakes (branches returning different structures, a carry changing
structure, a body not returning a pair) are TracingErrors naming the function; type
mistakes (branch result types, carry types, predicates, xs lengths) come from the
ops' type rules; Python control flow on a traced value, inside a body as well as
outside, names the source line and the op that expresses it; differentiating a
while_loop says why it cannot and what to use instead.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import numpy as np
import pytest

import graphc as gc

F64 = "float64"
V3 = gc.TensorSpec((3,), F64)
M43 = gc.TensorSpec((4, 3), F64)
IF_HINT = "gc.cond(pred, true_fn, false_fn"
LOOP_HINT = "gc.scan(f, init, xs)"


def positive(x: gc.Symbol) -> gc.Symbol:
    return gc.sum(x) > 0


CASES: dict[str, tuple[Callable[..., object], list, type, str]] = {
    "branches return different structures": (
        lambda x: gc.cond(positive(x), lambda a: (a, a), lambda a: a, x),
        [V3],
        gc.TracingError,
        "the branches return different structures: (x, x) from 'true_fn', x from 'false_fn'",
    ),
    "branches return lists and tuples": (
        lambda x: gc.cond(positive(x), lambda a: [a], lambda a: (a,), x)[0],
        [V3],
        gc.TracingError,
        "[x] from 'true_fn', (x,) from 'false_fn'",
    ),
    "branches return different shapes": (
        lambda x: gc.cond(positive(x), lambda a: a, gc.sum, x),
        [V3],
        gc.ShapeError,
        "cond: the branches give results of different types: 'true_fn' gives (f64[3]), "
        "'sum' gives (f64[])",
    ),
    "branches return different dtypes": (
        lambda x: gc.cond(positive(x), lambda a: a, lambda a: gc.cast(a, "float32"), x),
        [V3],
        gc.ShapeError,
        "gives (f64[3]), 'false_fn' gives (f32[3])",
    ),
    "a non-scalar predicate": (
        lambda x: gc.cond(x > 0, lambda a: a, lambda a: -a, x),
        [V3],
        gc.ShapeError,
        "cond: the predicate must be a scalar, got shape (3,)",
    ),
    "a None predicate": (  # a number is a predicate, as in JAX (test_jax_control.py)
        lambda x: gc.cond(None, lambda a: a, lambda a: -a, x),
        [V3],
        gc.DTypeError,
        "cond: the predicate is None",
    ),
    "a branch returning a string": (
        lambda x: gc.cond(positive(x), lambda a: "a", lambda a: "b", x),
        [V3],
        gc.TracingError,
        "result 0 of 'true_fn' is str, not a tensor",
    ),
    "a carry changing structure": (
        lambda x: gc.scan(lambda c, v: ((c, c), v), x, length=2),
        [V3],
        gc.TracingError,
        "'scan_body' returns a carry of structure (x, x), but the initial carry has structure x",
    ),
    "a carry changing shape": (
        lambda x: gc.scan(lambda c, v: (gc.sum(c), v), x, length=2),
        [V3],
        gc.ShapeError,
        "the carry init enters the body 'scan_body' as f64[3] but leaves it as f64[]; each "
        "carry must keep its type: give it back in its shape",
    ),
    "a carry changing dtype": (
        lambda x: gc.scan(lambda c, v: (gc.cast(c, "float32"), v), x, length=2),
        [V3],
        gc.ShapeError,
        "as f64[3] but leaves it as f32[3]; each carry must keep its type: cast it in the "
        "body (gc.cast(..., 'float64'))",
    ),
    "a body not returning a pair": (
        lambda x: gc.scan(lambda c, v: c * 2.0, x, length=2),
        [V3],
        gc.TracingError,
        "'scan_body' must return a pair (carry, y), got Symbol",
    ),
    "a body returning a triple": (
        lambda x: gc.scan(lambda c, v: (c, c, c), x, length=2),
        [V3],
        gc.TracingError,
        "must return a pair (carry, y), got tuple",
    ),
    "xs and length disagree": (
        lambda x, xs: gc.scan(lambda c, v: (c + v, c), x, xs, length=3),
        [V3, M43],
        gc.ShapeError,
        "the xs' leading axes and length disagree: [4, 3]",
    ),
    "xs of different lengths": (
        lambda x, xs, ys: gc.scan(lambda c, v: (c + v[0] * v[1], c), x, (xs, ys)),
        [V3, M43, gc.TensorSpec((5, 3), F64)],
        gc.ShapeError,
        "the xs' leading axes and length disagree: [4, 5]",
    ),
    "a scalar x": (
        lambda x: gc.scan(lambda c, v: (c + v, c), x, gc.sum(x)),
        [V3],
        gc.ShapeError,
        "every x must have a leading axis to step along",
    ),
    "neither xs nor length": (
        lambda x: gc.scan(lambda c, v: (c, c), x),
        [V3],
        gc.GraphcError,
        "without xs, give the number of steps as length=",
    ),
    "a symbolic length no input has": (
        lambda x: gc.scan(lambda c, _: (c, c), x, length="T")[1],
        [V3],
        gc.ShapeError,
        "length='T' is a symbolic dim that no input of graph",
    ),
    "a body dim no input has": (
        lambda x: gc.scan(
            lambda c, _: (gc.sum(gc.broadcast_to(c, ("S", 3)), axis=0), c), x, length=2
        )[1],
        [V3],
        gc.ShapeError,
        "uses the symbolic dim 'S', which no input of graph",
    ),
    "a while body changing structure": (
        lambda x: gc.while_loop(lambda c: positive(c[0]), lambda c: (c[0], c[1], c[0]), (x, x)),
        [V3],
        gc.TracingError,
        "'body_fn' returns a carry of structure (x, x, x), but the initial carry has structure",
    ),
    "a while condition that is not a bool scalar": (
        lambda x: gc.while_loop(lambda c: c > 0, lambda c: c * 0.5, x),
        [V3],
        gc.ShapeError,
        "while_loop: the predicate must be a scalar",
    ),
    "a while body changing dtype": (
        lambda x: gc.while_loop(positive, lambda c: gc.cast(c, "float32"), x),
        [V3],
        gc.ShapeError,
        "each carry must keep its type",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_mistakes_are_named(name: str) -> None:
    fn, specs, error, expected = CASES[name]
    with pytest.raises(error) as info:
        gc.trace(fn, *specs)
    assert expected in str(info.value), str(info.value)


def in_scan_if(x: gc.Symbol) -> gc.Symbol:
    def step(c: gc.Symbol, v: gc.Symbol) -> tuple:
        if gc.sum(c) > 0:  # the line the error names
            return c * 2.0, v
        return c, v

    return gc.scan(step, x, x)[0]


def in_cond_while(x: gc.Symbol) -> gc.Symbol:
    def grow(a: gc.Symbol) -> gc.Symbol:
        while gc.sum(a) < 10.0:  # the line the error names
            a = a * 2.0
        return a

    return gc.cond(positive(x), grow, lambda a: a, x)


def in_scan_bool(x: gc.Symbol) -> gc.Symbol:
    return gc.scan(lambda c, v: (c * bool(v[0]), c), x, x)[0]  # the line the error names


def in_scan_len(x: gc.Symbol) -> gc.Symbol:
    def step(c: gc.Symbol, v: gc.Symbol) -> tuple:
        return c * len(v), c  # the line the error names

    return gc.scan(step, x, x)[0]


def in_while_iteration(x: gc.Symbol) -> gc.Symbol:
    def body(c: gc.Symbol) -> gc.Symbol:
        return sum(row for row in c)  # the line the error names

    return gc.while_loop(lambda c: gc.sum(c) < 1.0, body, x)


def top_level_iteration(x: gc.Symbol) -> gc.Symbol:
    total = x[0] * 0.0
    for row in x:  # the line the error names
        total = total + row
    return total


@pytest.mark.parametrize(
    ("fn", "what", "hint"),
    [
        (in_scan_if, "bool()", IF_HINT),
        (in_cond_while, "bool()", "gc.while_loop(cond_fn, body_fn, init)"),
        (in_scan_bool, "bool()", IF_HINT),
        (in_scan_len, "len()", LOOP_HINT),
        (in_while_iteration, "iteration", LOOP_HINT),
        (top_level_iteration, "iteration", "gc.fori_loop("),
    ],
    ids=["if-in-scan", "while-in-cond", "bool-in-scan", "len-in-scan", "for-in-while", "for"],
)
def test_python_control_flow_on_traced_values_names_the_line_and_the_op(
    fn: Callable[..., object], what: str, hint: str
) -> None:
    source, first = inspect.getsourcelines(fn)
    line = first + next(i for i, text in enumerate(source) if "the line the error names" in text)
    with pytest.raises(gc.TracingError) as info:
        gc.trace(fn, gc.TensorSpec((None, None), F64))
    message = str(info.value)
    assert what in message and f"{__file__}:{line}" in message, message
    assert "static graph" in message and hint in message, message


def test_differentiating_a_while_loop_says_why_and_what_to_use() -> None:
    grow = gc.trace(
        lambda x: gc.sum(gc.while_loop(lambda v: gc.sum(v) < 10.0, lambda v: v * 2.0, x)), V3
    )
    traced_bounds = gc.trace(
        lambda x, n: gc.sum(gc.fori_loop(0, n, lambda i, v: v * 2.0, x)),
        V3,
        gc.TensorSpec((), "int64"),
    )
    for g in (grow, traced_bounds):
        for differentiate in (gc.gradients, gc.split_backward):
            with pytest.raises(gc.AutodiffError) as info:
                differentiate(g, wrt=["x"])
            message = str(info.value)
            assert "while_loop cannot be differentiated" in message
            assert "trip count" in message and "gc.fori_loop" in message, message
            assert "gc.scan" in message, message


def test_a_while_loop_whose_carries_need_no_gradient_is_fine() -> None:
    def f(x: gc.Symbol, n: gc.Symbol) -> gc.Symbol:
        steps = gc.while_loop(lambda c: c < n, lambda c: c + 1, np.int64(0))
        return gc.sum(x * x) * gc.cast(steps, F64)

    g = gc.trace(f, V3, gc.TensorSpec((), "int64"))
    loss, dx = gc.gradients(g, wrt=["x"])(np.array([1.0, 2.0, 3.0]), np.int64(3))
    assert float(loss) == 42.0 and dx.tolist() == [6.0, 12.0, 18.0]


def test_a_body_returning_a_value_of_an_unrelated_graph() -> None:
    other = gc.Graph("other")
    with other:
        stray = gc.placeholder("stray", shape=(3,), dtype=F64)
    with pytest.raises(gc.TracingError, match="encloses neither this call nor"):
        gc.trace(lambda x: gc.cond(positive(x), lambda a: stray, lambda a: a, x), V3)


def test_scan_on_arrays_checks_lengths_too() -> None:
    with pytest.raises(gc.ShapeError, match=r"disagree: \[3, 4\]"):
        gc.scan(lambda c, x: (c + x, c), np.zeros(2), np.ones((3, 2)), length=4)
    with pytest.raises(gc.GraphcError, match="symbolic length"):
        gc.scan(lambda c, x: (c, c), np.zeros(2), length="T")


def test_switch_errors_name_switch_and_the_branches() -> None:
    """switch is a tree of conds; its errors name switch and branch k, not cond's
    true_fn and false_fn (which the user never wrote)."""
    x = np.float32(1)
    ragged = [lambda v: v, lambda v: v, lambda v: (v, v)]
    with pytest.raises(gc.TracingError, match=r"switch: .* from 'branch_1', .* from 'branch_2'"):
        gc.jit(lambda i, x: gc.switch(i, ragged, x))(np.int32(0), x)

    def wide(v):
        return gc.cast(v, "float64")

    typed = [lambda v: v, wide]
    with pytest.raises(
        gc.ShapeError, match=r"switch: .*'branch_0' gives \(f32\[\]\), 'wide' gives \(f64\[\]\)"
    ):
        gc.jit(lambda i, x: gc.switch(i, typed, x))(np.int32(0), x)
    with pytest.raises(gc.ShapeError, match=r"cond: .*'true_fn' gives \(f32\[\]\), 'wide' gives"):
        gc.jit(lambda p, x: gc.cond(p, lambda v: v, wide, x))(np.bool_(True), x)
