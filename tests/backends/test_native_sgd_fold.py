"""The exact SGD fold on native: `w - s * a @ b` as one gemm that matmul.py's product
computes, with the scale and the subtraction in its epilogue (native's __init__.py,
`lower_gemm`; gemm_rules.fold_exact).

The claim is bit for bit: the product's chain of fused multiply-adds (test_native_matmul's
`chain`, computed with exact rationals), then gemm's numpy kernel's operations on it; and
a folded plan gives the unfolded plan's bits, for a lone update and for a train step."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim
from graphc.backends.native import fusion, matmul
from graphc.bench import mlp
from tests.backends.test_native_matmul import chain, hostile
from tests.edge_values import bits_differ
from tests.native_checks import needs_native

pytestmark = needs_native
F32 = np.float32


def _epilogue(p: np.ndarray, c: np.ndarray | None, alpha: float) -> np.ndarray:
    """gemm's numpy kernel on the product p (ops/gemm.py): times |alpha| and taken from
    c when alpha is negative, else times alpha plus c; without c, times alpha."""
    with np.errstate(all="ignore"):
        if c is None:
            return p if alpha == 1.0 else p * F32(alpha)
        magnitude = F32(-alpha if alpha < 0 else alpha)
        scaled = p if magnitude == 1 else p * magnitude
        return c - scaled if alpha < 0 else scaled + c


def _gemm(shapes: list[tuple], **attrs: object) -> gc.Graph:
    g = gc.Graph("g")
    with g:
        xs = [gc.placeholder(f"x{k}", s, "float32") for k, s in enumerate(shapes)]
        gc.output(gc.gemm(*xs, **attrs), name="y")
    return g


@pytest.mark.parametrize("alpha", [1.0, -0.01, 0.5, -2.0, 0.0])
@pytest.mark.parametrize("c_kind", ["matrix", "row", None, "beta 0"])
@pytest.mark.parametrize("m,k,n", [(7, 5, 3), (1, 12, 40), (9, 1, 20), (13, 30, 33)])
def test_a_float32_gemm_is_the_chain_then_numpys_operations(
    alpha: float, c_kind: str | None, m: int, k: int, n: int
) -> None:
    rng = np.random.default_rng(m * 100 + k * 10 + n)
    a, b = hostile(rng, (m, k)), hostile(rng, (k, n))
    shapes = [a.shape, b.shape]
    feeds = [a, b]
    attrs: dict[str, object] = {"alpha": alpha}
    if c_kind is not None:
        c = hostile(rng, (m, n) if c_kind != "row" else (n,))
        shapes.append(c.shape)
        feeds.append(c)
        if c_kind == "beta 0":  # c is not read: a nan in it does not reach the result
            attrs["beta"] = 0.0
    exe = gc.compile(_gemm(shapes, **attrs), backend="native")
    assert matmul.PRODUCT.name in exe.source(*feeds)
    got = exe(*feeds)
    reads_c = c_kind in ("matrix", "row")
    want = _epilogue(chain(a, b, None, False), feeds[2] if reads_c else None, alpha)
    assert bits_differ(got, want) is None, bits_differ(got, want)


def test_other_gemms_stay_blas_calls() -> None:
    """Transposing flags, float64 and a beta other than 0 and 1 are BLAS's call."""
    rng = np.random.default_rng(1)
    cases = [
        ([(5, 4), (5, 3)], "float32", {"trans_a": True}),
        ([(4, 5), (5, 3), (4, 3)], "float64", {}),
        ([(4, 5), (5, 3), (4, 3)], "float32", {"beta": 2.0}),
    ]
    for shapes, dtype, attrs in cases:
        g = gc.Graph("g")
        with g:
            xs = [gc.placeholder(f"x{k}", s, dtype) for k, s in enumerate(shapes)]
            gc.output(gc.gemm(*xs, **attrs), name="y")
        feeds = [rng.standard_normal(s).astype(dtype) for s in shapes]
        exe = gc.compile(g, backend="native")
        assert matmul.PRODUCT.name not in exe.source(*feeds), (dtype, attrs)
        want = gc.compile(g, backend="numpy")(*feeds)
        np.testing.assert_allclose(exe(*feeds), want, rtol=1e-5)


def _update(dtype: str, scaled: bool) -> gc.Graph:
    """w - c * g^T @ x, or w - g^T @ x: a weight's SGD update."""
    g = gc.Graph("update")
    with g:
        w = gc.placeholder("w", (20, 36), dtype)
        grad = gc.placeholder("g", (9, 20), dtype)
        x = gc.placeholder("x", (9, 36), dtype)
        product = gc.matmul(gc.transpose(grad), x)
        step = product * gc.constant(np.asarray(0.01, dtype)) if scaled else product
        gc.output(w - step, name="w_new")
    return g


@pytest.mark.parametrize("scaled", [True, False])
def test_the_folded_update_gives_the_unfolded_bits(
    scaled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(2)
    feeds = {"w": hostile(rng, (20, 36)), "g": hostile(rng, (9, 20)), "x": hostile(rng, (9, 36))}
    g = _update("float32", scaled)
    folded = gc.compile(g, backend="native")
    assert "= gemm(" in folded.explain(**feeds) and "[native]" in folded.explain(**feeds)
    got = folded(**feeds)
    for level in (0, 2):
        monkeypatch.setattr(fusion, "_own_product", lambda node: False)  # no fold at O2
        unfolded = gc.compile(g, opt_level=level, backend="native")
        assert "= gemm(" not in unfolded.explain(**feeds)
        monkeypatch.undo()
        want = unfolded(**feeds)
        assert bits_differ(got, want) is None, (level, bits_differ(got, want))
    assert bits_differ(feeds["w"], hostile(np.random.default_rng(2), (20, 36))) is None


def test_a_float64_update_stays_unfolded() -> None:
    """matmul.py's product is float32's: a float64 update is numpy's matmul then the
    elementwise kernel, which a BLAS gemm would not reproduce."""
    g = _update("float64", scaled=True)
    feeds = {"w": np.ones((20, 36)), "g": np.ones((9, 20)), "x": np.ones((9, 36))}
    assert "= gemm(" not in gc.compile(g, backend="native").explain(**feeds)


def _train(batch: int = 16) -> tuple[gc.TrainStep, np.ndarray, np.ndarray]:
    model = mlp.model()
    rng = np.random.default_rng(3)
    x = rng.standard_normal((batch, 784)).astype(F32)
    y = rng.integers(0, 10, batch)
    opt = optim.SGD(model.parameters(), lr=mlp.LR)
    step = gc.compile_train_step(model, nn.CrossEntropyLoss(), opt, (x, y), backend="native")
    return step, x, y


def test_an_exact_train_step_folds_its_updates_with_the_same_bits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folded, x, y = _train()
    lines = [line for line in folded.explain(x, y).splitlines() if "= gemm(" in line]
    assert len(lines) == 3 and all("written into state" in line for line in lines), lines
    monkeypatch.setattr(fusion, "_own_product", lambda node: False)
    unfolded, _, _ = _train()
    assert "= gemm(" not in unfolded.explain(x, y)
    for _ in range(4):
        assert bits_differ(folded(x, y), unfolded(x, y)) is None
    got, want = folded.parameters(), unfolded.parameters()
    for name in want:
        assert bits_differ(got[name], want[name]) is None, name


def test_a_folded_update_in_a_loop_body_in_c(monkeypatch: pytest.MonkeyPatch) -> None:
    """A scan whose carry takes a scaled product's update each step: the body's gemm runs
    in the loop in C, in place of the carry, with the unfolded body's bits."""
    rng = np.random.default_rng(4)

    def body(c, xs):
        a, b = xs
        new = c - 0.1 * (gc.transpose(a) @ b)
        return new, gc.sum(new)

    feeds = (hostile(rng, (6, 8)), hostile(rng, (5, 7, 6)), hostile(rng, (5, 7, 8)))
    g = gc.trace(lambda c0, a, b: gc.scan(body, c0, (a, b)), *feeds)
    folded = gc.compile(g, backend="native")
    text = folded.explain(*feeds)
    assert "= gemm(" in text and "runs in C" in text, text
    got = folded(*feeds)
    monkeypatch.setattr(fusion, "_own_product", lambda node: False)
    unfolded = gc.compile(g, backend="native")
    assert "= gemm(" not in unfolded.explain(*feeds)
    for x, y in zip(got, unfolded(*feeds)):
        assert bits_differ(x, y) is None, bits_differ(x, y)
