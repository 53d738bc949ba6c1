"""numpy's and jax.numpy's function names (amax ... linspace) against jax 0.10 and torch
2.13: values and gradients where jax and numpy agree, vmap against a loop over examples,
the creation functions on arrays, in traced graphs and beside eager tensors, and the
refusals, each naming the function.

The op-case table (tests/cases/numpy_functions.py) runs the generic checks against
numpy (finite differences in float64, every engine, ONNX, edge values).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge

RNG = np.random.default_rng(53)
WITH_NANS = np.array([[0.5, np.nan, -1.5, 2.0], [np.nan, -3.0, 0.25, 1.0], [1.0, 1.0, -2.0, 0.0]])
EDGES = np.array([np.inf, -np.inf, np.inf, -np.inf, 2.0, -0.0, 3.0])
EDGES_Y = np.array([np.inf, -np.inf, 1.0, 5.0, np.inf, 0.0, 3.0])

# name -> (graphc's function, jax.numpy's, float64 inputs); gradients of a weighted sum
DIFFERENTIABLE: dict[str, tuple[Callable, Callable, list[np.ndarray]]] = {
    "nanmax": (lambda x: gc.nanmax(x, axis=1), lambda n, x: n.nanmax(x, axis=1), [WITH_NANS]),
    "nanmin": (lambda x: gc.nanmin(x, axis=0, keepdims=True),
               lambda n, x: n.nanmin(x, axis=0, keepdims=True), [WITH_NANS]),
    "amax": (lambda x: gc.amax(x, axis=(0, 2)), lambda n, x: n.amax(x, axis=(0, 2)),
             [RNG.standard_normal((2, 3, 4))]),
    "log2": (gc.log2, lambda n, x: n.log2(x), [RNG.uniform(0.1, 9.0, (3, 4))]),
    "log10": (gc.log10, lambda n, x: n.log10(x), [RNG.uniform(0.1, 9.0, (3, 4))]),
    "logaddexp": (gc.logaddexp, lambda n, x, y: n.logaddexp(x, y),
                  [RNG.standard_normal((3, 1)) * 5, RNG.standard_normal(4) * 5]),
    "nan_to_num": (lambda x: gc.nan_to_num(x, posinf=3.0, neginf=-2.0),
                   lambda n, x: n.nan_to_num(x, posinf=3.0, neginf=-2.0),
                   [np.array([np.nan, np.inf, -np.inf, 1.5, -0.0])]),
    "dot": (gc.dot, lambda n, a, b: n.dot(a, b),
            [RNG.standard_normal((2, 3, 4)), RNG.standard_normal((5, 4, 2))]),
    "tensordot": (lambda a, b: gc.tensordot(a, b, ([0, 2], [2, 0])),
                  lambda n, a, b: n.tensordot(a, b, ([0, 2], [2, 0])),
                  [RNG.standard_normal((2, 3, 4)), RNG.standard_normal((4, 5, 2))]),
    "moveaxis": (lambda x: gc.moveaxis(x, (0, -1), (1, 0)),
                 lambda n, x: n.moveaxis(x, (0, -1), (1, 0)), [RNG.standard_normal((2, 3, 4))]),
    "hstack": (lambda a, b: gc.hstack([a, b]), lambda n, a, b: n.hstack([a, b]),
               [RNG.standard_normal((2, 1)), RNG.standard_normal((2, 3))]),
    "vstack": (lambda a, b: gc.vstack([a, b]), lambda n, a, b: n.vstack([a, b]),
               [RNG.standard_normal(3), RNG.standard_normal((2, 3))]),
    "repeat": (lambda x: gc.repeat(x, [2, 0, 3], axis=1),
               lambda n, x: n.repeat(x, n.array([2, 0, 3]), axis=1, total_repeat_length=5),
               [RNG.standard_normal((2, 3))]),
    "diag": (lambda v: gc.diag(v, -2), lambda n, v: n.diag(v, -2), [RNG.standard_normal(3)]),
    "ravel": (gc.ravel, lambda n, x: n.ravel(x), [RNG.standard_normal((2, 3))]),
}  # fmt: skip


def _weights(shape: tuple) -> np.ndarray:
    return np.arange(1.0, 1.0 + int(np.prod(shape))).reshape(shape) / 7  # a cotangent each


@pytest.mark.parametrize("name", sorted(DIFFERENTIABLE))
def test_values_and_gradients_agree_with_jax(name: str) -> None:
    jax = pytest.importorskip("jax")
    fn, jax_fn, args = DIFFERENTIABLE[name]
    jnp = jax.numpy
    with jax.enable_x64(True), np.errstate(all="ignore"):
        want = np.asarray(jax_fn(jnp, *args))
        weights = _weights(want.shape)
        argnums = tuple(range(len(args)))
        want_grads = jax.grad(lambda *xs: jnp.sum(jax_fn(jnp, *xs) * weights), argnums)(*args)
        got = np.asarray(fn(*args))
        got_grads = gc.grad(lambda *xs: gc.sum(fn(*xs) * weights), argnums=argnums)(*args)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15, equal_nan=True)
    for g, w in zip(got_grads, want_grads):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12, atol=1e-15)


def test_logaddexp_gradients_beside_infinities_are_torchs() -> None:
    """jax gives e for d/dy at (inf, 1) (exp(y - out) computed as exp(1 - inf)... then
    patched); torch's sigmoid(y - x) gives 0, the limit. Both agree off the infinities."""
    torch = pytest.importorskip("torch")
    x, y = (torch.tensor(v, requires_grad=True) for v in (EDGES, EDGES_Y))
    torch.logaddexp(x, y).sum().backward()
    tx, ty = (ge.tensor(v, requires_grad=True) for v in (EDGES, EDGES_Y))
    with np.errstate(all="ignore"):
        out = ge.logaddexp(tx, ty)
        out.sum().backward()
    np.testing.assert_array_equal(out.detach().numpy(), np.logaddexp(EDGES, EDGES_Y))
    np.testing.assert_array_equal(tx.grad.numpy(), x.grad.numpy())
    np.testing.assert_array_equal(ty.grad.numpy(), y.grad.numpy())


def test_log2_and_log10_are_numpys_own_bits() -> None:
    """Not log(x) / log(b): exact at the powers, numpy's values elsewhere, float32 too."""
    x = np.concatenate([2.0 ** np.arange(-20, 40), 10.0 ** np.arange(-8, 9), RNG.uniform(0, 9, 99)])
    for dtype in (np.float32, np.float64):
        v = x.astype(dtype)
        for fn, ref in ((gc.log2, np.log2), (gc.log10, np.log10)):
            np.testing.assert_array_equal(fn(v), ref(v))
            np.testing.assert_array_equal(gc.trace(fn, v)(v), ref(v))
    assert gc.log2(np.arange(1, 5)).dtype == np.float64  # ints, as numpy
    assert gc.log10(np.float32(1000.0)) == np.log10(np.float32(1000.0))  # numpy's, not 3


@pytest.mark.parametrize(
    "name", ["nanmax", "dot", "tensordot", "moveaxis", "repeat", "diag", "nan_to_num", "hstack"]
)
def test_builders_under_vmap_are_a_loop(name: str) -> None:
    fn, _, args = DIFFERENTIABLE[name]
    batches = [np.stack([a, a * 2 - 1, a[::-1].copy() if a.ndim else a]) for a in args]
    with np.errstate(all="ignore"):
        got = gc.vmap(fn)(*batches)
        want = np.stack([np.asarray(fn(*(b[i] for b in batches))) for i in range(3)])
    np.testing.assert_array_equal(got, want)


def test_reductions_take_both_spellings_on_tensors_and_graph_values() -> None:
    x = np.array([[0.0, 2.0, np.nan], [1.0, -1.0, 3.0]])
    t = ge.tensor(x)
    assert ge.all(t, dim=1).tolist() == [False, True] == gc.all(x, axis=1).tolist()
    assert ge.any(t, dim=0, keepdim=True).tolist() == [[True, True, True]]
    assert gc.nanmax(t, dim=1).tolist() == [2.0, 3.0]
    assert gc.amin(x, axis=1).tolist()[1] == -1.0
    g = gc.trace(
        lambda v: (gc.all(v, axis=0), gc.nanmin(v, dim=0)), gc.TensorSpec(("B", 3), "float64")
    )
    every, smallest = g(x)
    np.testing.assert_array_equal(every, np.all(x, axis=0))
    np.testing.assert_array_equal(smallest, np.nanmin(x, axis=0))
    with pytest.raises(gc.GraphcError, match="nanmax: give either dim="):
        gc.nanmax(x, axis=0, dim=0)


def test_dot_and_tensordot_keep_a_symbolic_batch_dim() -> None:
    g = gc.trace(
        lambda a, b: gc.tensordot(a, b, 1), gc.TensorSpec(("B", 3, 4)), gc.TensorSpec((4, 2))
    )
    assert [n.op for n in g.nodes if n.kind == "op"] == ["matmul"]
    a, b = RNG.standard_normal((5, 3, 4)).astype(np.float32), np.ones((4, 2), np.float32)
    np.testing.assert_allclose(g(a, b), np.tensordot(a, b, 1), rtol=1e-6)
    with pytest.raises(gc.ShapeError, match="tensordot: axis 2 of a"):
        gc.tensordot(a, np.ones((3, 2)), 1)
    with pytest.raises(gc.ShapeError, match="dot: the last axis of a .* second-to-last axis of b"):
        gc.dot(a, np.ones((2, 3, 2)))
    torch = pytest.importorskip("torch")
    x, y = RNG.standard_normal(4), RNG.standard_normal(4)
    assert gc.dot(ge.tensor(x), ge.tensor(y)).item() == pytest.approx(
        torch.dot(torch.tensor(x), torch.tensor(y)).item(), rel=1e-14
    )


def test_repeat_is_numpys_and_tensor_repeat_stays_torchs() -> None:
    x = np.arange(6).reshape(2, 3)
    for repeats, axis in [(2, None), (3, 0), ([1, 2, 0], 1), (np.array([2, 1]), -2)]:
        np.testing.assert_array_equal(gc.repeat(x, repeats, axis), np.repeat(x, repeats, axis))
    t = ge.tensor(x)
    assert t.repeat(1, 2).shape == (2, 6)  # torch's tiling, unchanged
    np.testing.assert_array_equal(t.repeat_interleave(2, dim=1).numpy(), np.repeat(x, 2, 1))
    torch = pytest.importorskip("torch")
    want = torch.repeat_interleave(torch.tensor(x), torch.tensor([2, 0]), dim=0).numpy()
    np.testing.assert_array_equal(ge.repeat_interleave(t, [2, 0], dim=0).numpy(), want)
    np.testing.assert_array_equal(ge.movedim(t, 0, 1).numpy(), torch.movedim(torch.tensor(x), 0, 1))
    with pytest.raises(gc.ShapeError, match="repeat: 2 repeats for an axis of size 3"):
        gc.repeat(x, [1, 2], axis=1)
    with pytest.raises(gc.ShapeError, match="repeat: each of repeats must be at least 0"):
        gc.repeat(x, [1, -2, 1], axis=1)
    assert gc.repeat(x, np.int64(2), 0).shape == (4, 3)  # a numpy int is a count
    spec = (gc.TensorSpec((3,)), gc.TensorSpec((3,), "int64"))
    with pytest.raises(gc.ShapeError, match="repeat: repeats must be an int or a sequence"):
        gc.trace(lambda v, r: gc.repeat(v, r), *spec)  # counts decide the shape: not data


def test_diag_and_moveaxis_refusals_name_the_function() -> None:
    for lists in ([1, 2], [[1, 2], [3, 4]]):  # nested lists, as numpy takes them
        np.testing.assert_array_equal(gc.diag(lists, 1), np.diag(lists, 1))
    with pytest.raises(gc.ShapeError, match="diag: expects a 1-D or 2-D input"):
        gc.diag(np.zeros((2, 2, 2)))
    with pytest.raises(gc.ShapeError, match="moveaxis: repeated axis in source"):
        gc.moveaxis(np.zeros((2, 3)), (0, 0), (0, 1))
    with pytest.raises(gc.GraphcError, match="hstack: needs at least one input"):
        gc.hstack([])


# -- creation ------------------------------------------------------------------------------------

CREATION = {
    "zeros": (lambda: gc.zeros((2, 3), "float64"), lambda: np.zeros((2, 3))),
    "ones": (lambda: gc.ones(4, "int32"), lambda: np.ones(4, np.int32)),
    "full": (lambda: gc.full((2, 2), True), lambda: np.full((2, 2), True)),
    "full_array": (lambda: gc.full((2, 3), np.array([1.0, 2.0, 3.0])),
                   lambda: np.full((2, 3), np.array([1.0, 2.0, 3.0]))),
    "eye": (lambda: gc.eye(3, 4, k=-1, dtype="float64"), lambda: np.eye(3, 4, -1)),
    "linspace": (lambda: gc.linspace(-1.0, 2.0, 7, dtype="float64"),
                 lambda: np.linspace(-1.0, 2.0, 7)),
    "linspace_open": (lambda: gc.linspace(0, 1, 6, endpoint=False),
                      lambda: np.linspace(0, 1, 6, endpoint=False, dtype=np.float32)),
    "linspace_int": (lambda: gc.linspace(-3, 4, 5, dtype="int64"),
                     lambda: np.linspace(-3, 4, 5, dtype=np.int64)),
    "empty": (lambda: gc.zeros((0, 2)), lambda: np.zeros((0, 2), np.float32)),
    "0d": (lambda: gc.full((), 2.5), lambda: np.full((), 2.5, np.float32)),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CREATION))
def test_creation_gives_numpys_array_and_a_graph_constant(name: str) -> None:
    make, reference = CREATION[name]
    want = reference()
    got = make()
    assert isinstance(got, np.ndarray) and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    g = gc.trace(lambda x: (make(), x), np.zeros(1))
    assert {n.op for n in g.nodes if n.kind == "op"} <= {"constant", "broadcast_to"}
    traced = gc.compile(g)(np.zeros(1))[0]
    assert traced.dtype == want.dtype
    np.testing.assert_array_equal(traced, want)


def test_creation_defaults_follow_graphc_and_jax() -> None:
    jnp = pytest.importorskip("jax.numpy")
    for got, want in [
        (gc.zeros(3), jnp.zeros(3)),
        (gc.ones((2,)), jnp.ones((2,))),
        (gc.full(2, 0.5), jnp.full(2, 0.5)),
        (gc.eye(2), jnp.eye(2)),
        (gc.linspace(0.0, 1.0, 9), jnp.linspace(0.0, 1.0, 9)),
    ]:
        assert got.dtype == np.asarray(want).dtype
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-7)
    assert gc.full(2, 7).dtype == np.int64  # a Python int is int64, as numpy (jax: int32)
    values, step = gc.linspace(0, 1, 5, retstep=True)
    assert step == 0.25 and values.tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_creation_in_a_trace_takes_symbolic_dims_and_eager_fill_values() -> None:
    g = gc.trace(
        lambda x: x + gc.zeros(x.shape) + gc.full(x.shape[1], 2.0), gc.TensorSpec(("B", "T"))
    )
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_array_equal(g(x), x + 2.0)
    fill = ge.tensor([1.0, 2.0], requires_grad=True)
    out = gc.full((3, 2), fill)
    out.sum().backward()
    assert fill.grad.tolist() == [3.0, 3.0]  # each entry copied three times
    out.add_(1.0)  # a new tensor, not a broadcast view of the fill (jnp.full's)
    assert fill.tolist() == [1.0, 2.0] and out.tolist()[2] == [2.0, 3.0]
    m = ge.tensor(np.arange(4.0).reshape(2, 2))
    gc.diag(m).add_(10.0)  # torch.diag's copy; gc.diagonal is the view
    gc.repeat(m, 1, axis=0).add_(10.0)  # repeat_interleave's new tensor
    assert m.tolist() == [[0.0, 1.0], [2.0, 3.0]]
    ints = ge.tensor([1, 2])
    gc.nan_to_num(ints).add_(5)  # torch.nan_to_num's new tensor, ints too
    assert ints.tolist() == [1, 2]
    assert ge.zeros(2, 3).shape == (2, 3)  # graphc.eager keeps torch's signature
    with pytest.raises(gc.ShapeError, match="zeros: bad shape"):
        gc.zeros((2, -1))
    with pytest.raises(gc.GraphcError, match="linspace: stop must be a number or an array"):
        gc.linspace(0, ge.tensor(1.0), 3)
    with pytest.raises(gc.ShapeError, match="eye: N must be an int"):
        gc.eye(2.0)
