"""int64 in the native backend's elementwise kernels: numpy's wrapping arithmetic, its
comparisons, selections and casts, bit for bit (cexpr.INT64_OPS), on every operand
layout; a float cast to int64 and ops outside INT64_OPS stay on numpy by name; a plan
masking integer labels runs as one C call."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import graphc as gc
from tests.edge_values import bits_differ
from tests.native_checks import check_native, needs_native

pytestmark = needs_native

N = 40_000  # past the size below which an exact step stays on numpy's ufunc
INT64 = np.iinfo(np.int64)


def ints(seed: int, n: int = N) -> np.ndarray:
    """Random int64 over the whole range, the extremes, zero and -1 among them."""
    rng = np.random.default_rng(seed)
    a = rng.integers(INT64.min, INT64.max, n, dtype=np.int64, endpoint=True)
    edges = np.array([INT64.min, INT64.max, 0, -1, 1, INT64.min])
    a[:6] = edges[: min(n, 6)]
    a[6::7] = rng.integers(-3, 4, a[6::7].shape)  # small values: equal pairs, signs
    return a


def floats(seed: int, n: int = N) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    x[:6] = [np.nan, np.inf, -np.inf, -0.0, 1e30, 2.0**-140]
    return x


BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b * 3,
    "neg_abs": lambda a, b: -gc.abs(a) + b,
    "max_min": lambda a, b: gc.maximum(a, b) - gc.minimum(a, b),
    "where_eq": lambda a, b: gc.where(a == b, a, b * 2),
    "compares": lambda a, b: gc.cast((a < b) & (a != b) | (a >= b * 2), "int64") + (a <= b),
    "pow": lambda a, b: a**2 + b**3,
    "to_floats": lambda a, b: gc.cast(a, "float32") * 2.0 + gc.cast(b, "float64"),
    "bools": lambda a, b: gc.cast(gc.cast(a, "bool"), "int64") * 7 + gc.logical_xor(a > 0, b < 0),
    "full_like": lambda a, b: gc.full_like(a, int(INT64.min)) + b,
    "true_divide": lambda a, b: a / b + 1,
}


@pytest.mark.filterwarnings("ignore:divide by zero", "ignore:invalid value")
@pytest.mark.parametrize("name", list(BINARY))
def test_int64_ops_give_numpys_bits(name: str) -> None:
    fn = BINARY[name]
    g = gc.trace(fn, gc.TensorSpec((N,), "int64"), gc.TensorSpec((N,), "int64"))
    exe = gc.compile(g, backend="native")
    given = (ints(0), ints(1))
    assert "[numpy]" not in exe.explain(*given), exe.explain(*given)
    check_native(g, [dict(zip(("a", "b"), given)), dict(zip(("a", "b"), (ints(2), ints(2))))])


@pytest.mark.filterwarnings("ignore:invalid value")
def test_int64_beside_floats_promotes_as_numpy() -> None:
    """int64 with float32 computes in float64 (numpy's promotion): the int64 operand is
    converted, rounded to nearest, then the op; comparisons too."""

    def fn(a: Any, x: Any) -> Any:
        return a * x + 1.5, gc.cast(a > x, "int64") + a, gc.where(a == 0, x, a)

    g = gc.trace(fn, gc.TensorSpec((N,), "int64"), gc.TensorSpec((N,), "float32"))
    check_native(g, [{"a": ints(3), "x": floats(4)}, {"a": ints(5) % 7, "x": floats(6)}])


@pytest.mark.parametrize("layout", ["scalar", "row", "column", "strided"])
def test_int64_operands_of_every_layout(layout: str) -> None:
    """SCALAR, BLOCK and STRIDED operands and a transposed read, in int64."""
    shape = (200, 256)
    other = {"scalar": (), "row": (256,), "column": (200, 1), "strided": (256, 200)}[layout]

    def fn(a: Any, b: Any) -> Any:
        b = gc.transpose(b) if layout == "strided" else b
        return gc.where(a < b, a * b, a - b)

    g = gc.trace(fn, gc.TensorSpec(shape, "int64"), gc.TensorSpec(other, "int64"))
    a = ints(7, 200 * 256).reshape(shape)
    b = ints(8, int(np.prod(other, dtype=np.int64))).reshape(other)
    check_native(g, [{"a": a, "b": b}])


@pytest.mark.parametrize(
    ("fn", "why"),
    [
        (lambda x: gc.cast(x * 2.0, "int64") + 1, "a cast of floats to int64"),
        (lambda x: gc.abs(x) // 3, "no native kernel for 'floor_divide'"),
    ],
    ids=["float_to_int64", "floor_divide"],
)
def test_what_int64_has_no_c_for_stays_on_numpy_by_name(fn: Any, why: str) -> None:
    """numpy's float -> int64 of a nan, an inf or a value past the range is the
    platform's; floor_divide has no C: each stays on numpy, with the reason."""
    x = floats(9) if "cast" in why else ints(9)
    g = gc.trace(fn, gc.TensorSpec((N,), x.dtype))
    exe = gc.compile(g, backend="native")
    assert why in exe.explain(x), exe.explain(x)
    with np.errstate(all="ignore"):
        assert bits_differ(exe(x), gc.compile(g, backend="numpy")(x)) is None


def test_a_plan_masking_integer_labels_runs_as_one_c_call() -> None:
    """A padding mask on int64 labels (ne, where, a cast) and a mean: every step has a
    C kernel, so the plan's entry is one C call, with numpy's bits."""

    def masked(y: Any, scores: Any) -> Any:
        kept = y != -100
        labels = gc.where(kept, y, 0)
        return gc.sum(gc.cast(kept, "float32") * scores), labels + 1

    g = gc.trace(masked, gc.TensorSpec((64,), "int64"), gc.TensorSpec((64,), "float32"))
    y = np.random.default_rng(10).integers(0, 5, 64)
    y[::3] = -100
    scores = floats(11, 64)
    scores[:6] = 1.0
    exe = gc.compile(g, backend="native")
    want = gc.compile(g, backend="numpy")(y, scores)
    exe(y, scores)
    assert exe.wait()
    assert "stays on numpy" not in exe.explain(), exe.explain()
    if "entry: one C call" not in exe.explain():
        pytest.skip("no entry in C here (Python's headers)")
    for got, expected in zip(exe(y, scores), want):
        assert bits_differ(got, expected) is None
