"""gc.jacfwd / gc.jacrev batch their products over the basis with vmap, as JAX does
(one vmapped JVP or VJP per argument or result), and keep a scan of one product per
basis vector where vmap refuses the function's graph (an op without a batching rule).
The name scope `<jacfwd|jacrev>_by_vmap` or `_by_scan` of the nodes says which ran.

Both ways give the same Jacobian: bit for bit where every op is exact elementwise
work, within 1e-12 in float64 where a batched matmul may sum in another order; and
they agree with finite differences and with jax.jacfwd / jax.jacrev.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import graphc as gc
from graphc.frontend import transforms
from graphc.ir.registry import get_op
from tests.edge_values import bits_differ

RNG = np.random.default_rng(3)
W1, W2 = RNG.normal(size=(6, 5)) / 2, RNG.normal(size=(5, 4)) / 2
B1 = RNG.normal(size=5)
JACOBIANS = [gc.jacfwd, gc.jacrev]
NAMES = ["jacfwd", "jacrev"]


def mlp(x: Any) -> Any:
    return gc.tanh(gc.tanh(x @ W1 + B1) @ W2)


def elementwise(x: Any) -> Any:
    return gc.sin(x) * gc.exp(x) + x * x


def two_in_two_out(x: Any, w: Any) -> Any:
    return {"h": gc.tanh(x @ w), "s": gc.sum(gc.sin(w) * 2.0)}


def fd_jacobian(f: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    eps, cols = 1e-6, []
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        cols.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * eps))
    return np.stack(cols, axis=-1).reshape(*np.shape(cols[0]), *x.shape)


def scopes(g: gc.Graph) -> set[str]:
    return {n.meta["scope"] for n in g.op_nodes if "scope" in n.meta}


def scan_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transforms, "BATCH_PRODUCTS", False)


@pytest.mark.parametrize("jac", JACOBIANS, ids=NAMES)
def test_a_jacobian_is_one_vmapped_pass_without_a_scan(jac: Any) -> None:
    name = NAMES[JACOBIANS.index(jac)]
    g = gc.trace(jac(mlp), gc.TensorSpec((6,), "float64"))
    assert scopes(g) == {f"{name}_by_vmap"}
    assert not [n for n in g.op_nodes if n.op == "scan"]
    x = RNG.normal(size=6)
    np.testing.assert_allclose(g(x), fd_jacobian(lambda v: mlp(v), x), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("jac", JACOBIANS, ids=NAMES)
def test_the_scan_path_is_the_same_jacobian(jac: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    name = NAMES[JACOBIANS.index(jac)]
    # bits compared across two compiled graphs need one backend and one tier: on arrays
    # the transforms compile for the default backend without waiting, so with
    # GRAPHC_BACKEND=native one graph may run numpy's tier while its kernels build and
    # the other native's (runtime/tiers.py), whose exp is within a bound of numpy's
    monkeypatch.setenv("GRAPHC_BACKEND", "numpy")
    x, xs, w = RNG.normal(size=6), RNG.normal(size=(3, 6)), RNG.normal(size=(6, 2))
    batched = [
        jac(elementwise)(x),
        jac(mlp)(xs),
        jac(two_in_two_out, argnums=(0, 1))(xs, w),
        gc.hessian(lambda v: gc.sum(elementwise(v)))(x),
    ]
    scan_path(monkeypatch)
    g = gc.trace(jac(mlp), gc.TensorSpec((6,), "float64"))
    assert scopes(g) == {f"{name}_by_scan"} and [n for n in g.op_nodes if n.op == "scan"]
    scanned = [
        jac(elementwise)(x),
        jac(mlp)(xs),
        jac(two_in_two_out, argnums=(0, 1))(xs, w),
        gc.hessian(lambda v: gc.sum(elementwise(v)))(x),
    ]
    assert bits_differ(batched[0], scanned[0]) is None  # elementwise work: the same bits
    for got, want in zip(gc.tree_flatten(batched[1:])[0], gc.tree_flatten(scanned[1:])[0]):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("jac", JACOBIANS, ids=NAMES)
def test_an_op_vmap_cannot_batch_keeps_the_scan(jac: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    name = NAMES[JACOBIANS.index(jac)]

    def f(x: Any) -> Any:
        return gc.cumsum(gc.sin(x), axis=0) * x

    x = RNG.normal(size=5)
    want = jac(f)(x)  # batched by cumsum's rule
    monkeypatch.delitem(get_op("cumsum").rules, "vmap")
    with pytest.raises(gc.VmapError, match="cumsum"):
        gc.vmap(f)(np.ones((2, 5)))
    g = gc.trace(jac(f), gc.TensorSpec((5,), "float64"))
    assert scopes(g) == {f"{name}_by_scan"}
    np.testing.assert_allclose(g(x), want, rtol=1e-12, atol=1e-14)
    fd = fd_jacobian(lambda v: np.cumsum(np.sin(v)) * v, x)
    np.testing.assert_allclose(jac(f)(x), fd, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("jac", JACOBIANS, ids=NAMES)
def test_a_jacobian_on_eager_tensors_and_in_a_scan_body(jac: Any) -> None:
    import graphc.eager as ge

    x = RNG.normal(size=(3, 6))
    want = jac(mlp)(x)
    np.testing.assert_allclose(jac(mlp)(ge.tensor(x)).numpy(), want, rtol=1e-12)

    def rows(xs: Any) -> Any:
        return gc.scan(lambda c, r: (c, jac(mlp)(r)), 0.0, xs)[1]

    g = gc.trace(rows, gc.TensorSpec(x.shape, "float64"))
    got = g(x)
    for i in range(3):
        np.testing.assert_allclose(got[i], jac(mlp)(x[i]), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("jac", NAMES)
def test_against_jax(jac: str) -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def j_two(x: Any, w: Any) -> Any:
        return {"h": jnp.tanh(x @ w), "s": jnp.sum(jnp.sin(w) * 2.0)}

    def j_mlp(x: Any) -> Any:
        return jnp.tanh(jnp.tanh(x @ W1 + B1) @ W2)

    xs, w = RNG.normal(size=(3, 6)), RNG.normal(size=(6, 2))
    with jax.enable_x64(True):
        got = getattr(gc, jac)(two_in_two_out, argnums=(0, 1))(xs, w)
        want = getattr(jax, jac)(j_two, argnums=(0, 1))(xs, w)
        for key in ("h", "s"):
            for a, b in zip(got[key], want[key], strict=True):
                np.testing.assert_allclose(a, np.asarray(b), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(
            getattr(gc, jac)(mlp)(xs), getattr(jax, jac)(j_mlp)(xs), rtol=1e-12, atol=1e-14
        )


def loops(x: Any) -> Any:
    y = gc.fori_loop(0, 3, lambda i, c: gc.sin(c) * x, x)
    z = gc.cond(gc.sum(x) > 0, lambda a: a * 2.0, lambda a: a * a, y)
    return gc.scan(lambda c, r: (c + r, c * r), 0.0, z)[1]


def until_large(x: Any) -> Any:
    return gc.while_loop(lambda v: gc.sum(v * v) < 50.0, lambda v: v * 1.5 + gc.sin(v), x)


@pytest.mark.parametrize(
    ("jac", "f"),
    [(gc.jacfwd, loops), (gc.jacrev, loops), (gc.jacfwd, until_large)],
    ids=["jacfwd-loops", "jacrev-loops", "jacfwd-while_loop"],
)
def test_control_flow_batches_and_agrees_with_the_scan(
    jac: Any, f: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    x = np.array([0.3, -0.2, 0.5])
    g = gc.trace(jac(f), gc.TensorSpec((3,), "float64"))
    assert scopes(g) == {f"{jac.__name__}_by_vmap"}
    batched = jac(f)(x)
    scan_path(monkeypatch)
    np.testing.assert_allclose(batched, jac(f)(x), rtol=1e-12, atol=1e-14)
    fd = fd_jacobian(lambda v: np.asarray(f(v)), x)
    np.testing.assert_allclose(batched, fd, rtol=1e-6, atol=1e-8)
