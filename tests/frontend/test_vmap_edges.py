"""gc.vmap at its edges, against jax.vmap where jax is installed and expected values
always: loops on eager tensors (a traced graph with several-result nodes inlined on
tensors), batches of no examples, out_axes errors, registered pytree classes as
in_axes / out_axes prefixes, functions returning None, and a batched cond's branches.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge

RNG = np.random.default_rng(351)


@pytest.fixture
def jax() -> Iterator[Any]:
    """jax with float64 inside each test only (a global setting outlived the tests)."""
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        yield jax


# -- loops on eager tensors ------------------------------------------------------------------


def _loops(lib: Any, flow: Any) -> dict[str, Callable[[Any], Any]]:
    """Per-example functions with a loop or branch, written against graphc or jax."""
    return {
        "fori_loop": lambda v: flow.fori_loop(0, 3, lambda i, c: c * lib.sin(c) + 1.0, v),
        "scan": lambda v: flow.scan(lambda c, t: (c * t + 1.0, c * t), 0.5, v)[0],
        "scan-ys-reverse": lambda v: flow.scan(
            lambda c, t: (c * t + 1.0, c * t), 0.5, v, reverse=True
        )[1],
        "map": lambda v: flow.map(lambda r: lib.sin(r) * r, v),
        "cond": lambda v: flow.cond(lib.sum(v) > 5.0, lambda a: a * a, lambda a: lib.sin(a), v),
        "while_loop": lambda v: flow.while_loop(lambda c: lib.sum(c) < 10.0, lambda c: c * 2.0, v),
    }


LOOPS = ["fori_loop", "scan", "scan-ys-reverse", "map", "cond", "while_loop"]
X = np.array([[1.0, 1.0], [3.0, 4.0], [20.0, 0.0]])


@pytest.mark.parametrize("name", LOOPS)
def test_vmap_of_a_loop_on_eager_tensors_matches_arrays(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # on arrays the vmapped loop is compiled: on numpy, as the eager tensors run it (native's
    # sin is within its declared bound of numpy's, which a loop carries past 1e-14)
    monkeypatch.setenv("GRAPHC_BACKEND", "numpy")
    f = _loops(gc, gc)[name]
    want = gc.vmap(f)(X)
    got = gc.vmap(f)(ge.tensor(X))
    assert isinstance(got, ge.Tensor)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-14)


def test_vmap_of_loops_on_eager_tensors_expected_values() -> None:
    loops = _loops(gc, gc)
    fori = gc.vmap(lambda v: gc.fori_loop(0, 3, lambda i, c: c * 2.0, v))(ge.tensor(X))
    np.testing.assert_array_equal(fori.numpy(), X * 8)
    scan = gc.vmap(lambda v: gc.scan(lambda c, t: (c + t, c), 0.0, v)[0])(ge.tensor(X))
    np.testing.assert_array_equal(scan.numpy(), X.sum(1))
    grown = gc.vmap(loops["while_loop"])(ge.tensor(X))
    np.testing.assert_array_equal(grown.numpy(), [[8.0, 8.0], [6.0, 8.0], [20.0, 0.0]])


@pytest.mark.parametrize("name", LOOPS)
def test_vmap_of_a_loop_on_eager_tensors_agrees_with_jax(jax: Any, name: str) -> None:
    got = gc.vmap(_loops(gc, gc)[name])(ge.tensor(X))
    want = jax.vmap(_loops(jax.numpy, jax.lax)[name])(X)
    np.testing.assert_allclose(got.numpy(), np.asarray(want), rtol=1e-12)


@pytest.mark.parametrize("name", [n for n in LOOPS if n != "while_loop"])
def test_gradients_of_a_vmapped_loop_on_eager_tensors(name: str) -> None:
    """The eager tape records the loop's steps, as gc.grad differentiates the graph."""
    f = _loops(gc, gc)[name]
    x = ge.tensor(X, requires_grad=True)
    gc.vmap(f)(x).sum().backward()
    want = gc.grad(lambda a: gc.sum(gc.vmap(f)(a)))(X)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12)


@pytest.mark.parametrize("name", [n for n in LOOPS if n != "while_loop"])
def test_gradients_of_a_vmapped_loop_on_eager_tensors_agree_with_jax(jax: Any, name: str) -> None:
    x = ge.tensor(X, requires_grad=True)
    gc.vmap(_loops(gc, gc)[name])(x).sum().backward()
    f = jax.vmap(_loops(jax.numpy, jax.lax)[name])
    want = jax.grad(lambda a: f(a).sum())(X)
    np.testing.assert_allclose(x.grad.numpy(), np.asarray(want), rtol=1e-12)


@pytest.mark.parametrize("name", LOOPS)
def test_a_traced_graph_with_a_loop_called_on_eager_tensors(name: str) -> None:
    """frontend/call.py's inline on several-result nodes: the loop runs in Python."""
    g = gc.trace(_loops(gc, gc)[name], X[1])
    x = ge.tensor(X[1], requires_grad=True)
    got = g(x)
    assert isinstance(got, ge.Tensor)
    np.testing.assert_allclose(got.detach().numpy(), g(X[1]), rtol=1e-14)
    if name != "while_loop":
        got.sum().backward()
        want = gc.grad(lambda a: gc.sum(_loops(gc, gc)[name](a)))(X[1])
        np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12)


def test_a_traced_scan_of_a_symbolic_length_on_eager_tensors() -> None:
    init = np.zeros(2, np.float32)
    g = gc.trace(lambda v: gc.scan(lambda c, t: (c + t, c * t), init, v), gc.TensorSpec(("T", 2)))
    for steps in (0, 3):
        xs = np.arange(steps * 2.0, dtype=np.float32).reshape(steps, 2)
        carry, ys = g(ge.tensor(xs))
        want_carry, want_ys = g(xs)
        np.testing.assert_array_equal(np.asarray(carry), want_carry)
        assert isinstance(ys, ge.Tensor) and ys.shape == (steps, 2)
        np.testing.assert_array_equal(ys.numpy(), want_ys)


# -- a batch of no examples --------------------------------------------------------------------

WEIGHT = np.ones((2, 1, 3, 3))


def _empty_cases(lib: Any, flow: Any, conv: Callable, pool: Callable) -> dict[str, Callable]:
    """Per-example functions, each batched over 0 examples (graphc's or jax's)."""
    return {
        "conv2d": lambda x: conv(x, WEIGHT),
        "max_pool2d": pool,
        "argmax": lambda x: lib.argmax(x),
        "argmax-1d": lambda x: lib.argmax(x),
        "while_loop": lambda x: flow.while_loop(lambda c: lib.sum(c) < 10.0, lambda c: c * 2.0, x),
        "fori_loop-bounds": lambda n: flow.fori_loop(0, n, lambda i, c: c * 2.0, np.ones(3)),
    }


def _ours() -> dict[str, Callable]:
    return _empty_cases(gc, gc, gc.conv2d, lambda x: gc.max_pool2d(x, 2))


# name: (one example's shape, its dtype, the shape of the batch of 0 examples' result)
EMPTY = {
    "conv2d": ((1, 1, 5, 5), "float64", (0, 1, 2, 3, 3)),
    "max_pool2d": ((1, 1, 4, 4), "float64", (0, 1, 1, 2, 2)),
    "argmax": ((3, 4), "float64", (0,)),
    "argmax-1d": ((3,), "float64", (0,)),
    "while_loop": ((3,), "float64", (0, 3)),
    "fori_loop-bounds": ((), "int64", (0, 3)),
}


@pytest.mark.parametrize("name", list(EMPTY))
def test_a_batch_of_no_examples_gives_empty_results(name: str) -> None:
    shape, dtype, want = EMPTY[name]
    f = _ours()[name]
    assert gc.vmap(f)(np.ones((0, *shape), dtype)).shape == want
    assert gc.vmap(f)(np.ones((2, *shape), dtype)).shape == (2, *want[1:])


@pytest.mark.parametrize("name", list(EMPTY))
def test_a_batch_of_no_examples_agrees_with_jax(jax: Any, name: str) -> None:
    lax, jnp = jax.lax, jax.numpy

    def conv(x: Any, w: Any) -> Any:
        return lax.conv_general_dilated(x, w, (1, 1), "VALID")

    def pool(x: Any) -> Any:
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    shape, dtype, _ = EMPTY[name]
    xs = np.ones((0, *shape), dtype)
    want = jax.vmap(_empty_cases(jnp, lax, conv, pool)[name])(xs)
    got = gc.vmap(_ours()[name])(xs)
    assert got.shape == want.shape


@pytest.mark.parametrize("name", list(EMPTY))
def test_a_symbolic_batch_dim_runs_with_no_examples(name: str) -> None:
    shape, dtype, want = EMPTY[name]
    f = _ours()[name]
    g = gc.trace(lambda xs: gc.vmap(f)(xs), gc.TensorSpec(("B", *shape), dtype))
    run = gc.compile(g)
    for size in (0, 2):
        xs = np.ones((size, *shape), dtype)
        got = run(xs)
        assert got.shape == (size, *want[1:])
        np.testing.assert_array_equal(got, g(xs))


def test_a_batched_weight_convolution_of_no_examples() -> None:
    images = np.ones((1, 1, 5, 5))
    got = gc.vmap(lambda w: gc.conv2d(images, w))(np.ones((0, 2, 1, 3, 3)))
    assert got.shape == (0, 1, 2, 3, 3)
    got = gc.vmap(lambda w: gc.conv2d(images, w))(np.ones((2, 2, 1, 3, 3)))
    np.testing.assert_array_equal(got, np.full((2, 1, 2, 3, 3), 9.0))


def test_a_batched_while_loop_runs_until_every_example_stops() -> None:
    """The per-example predicate is counted (any), not maxed: the same values as before."""
    xs = np.array([[1.0, 1.0, 1.0], [5.0, 5.0, 5.0], [20.0, 0.0, 0.0]])
    got = gc.vmap(lambda x: gc.while_loop(lambda c: gc.sum(c) < 10.0, lambda c: c * 2.0, x))(xs)
    np.testing.assert_array_equal(got, [[4.0, 4.0, 4.0], [5.0, 5.0, 5.0], [20.0, 0.0, 0.0]])


# -- out_axes errors, pytree prefixes, functions returning no arrays ---------------------------


def test_a_wrong_out_axes_structure_is_reported_as_out_axes() -> None:
    x = np.ones((2, 3))
    with pytest.raises(gc.VmapError) as caught:
        gc.vmap(lambda a: (a, a), out_axes=(0, 0, 0))(x)
    message = str(caught.value)
    assert "out_axes" in message and "results" in message and "in_axes" not in message
    assert "out_axes has 3 entries but the function's result has 2" in message
    with pytest.raises(gc.VmapError, match=r"results: out_axes has keys \['a'\]"):
        gc.vmap(lambda a: {"b": a}, out_axes={"a": 0})(x)
    with pytest.raises(gc.VmapError, match=r"results\[1\]: out_axes entry \(0,\) does not match"):
        gc.vmap(lambda a: (a, a), out_axes=(0, (0,)))(x)


@dataclasses.dataclass
class Params:
    w: Any
    b: Any


@dataclasses.dataclass
class Tagged:
    x: Any
    tag: str = dataclasses.field(default="a", metadata={"static": True})


gc.register_dataclass(Params)
gc.register_dataclass(Tagged)


class Box:
    """A class registered with register_pytree_node, its aux data a label."""

    def __init__(self, value: Any, label: str = "box") -> None:
        self.value, self.label = value, label


gc.register_pytree_node(Box, lambda b: ((b.value,), b.label), lambda label, c: Box(c[0], label))
Pair = collections.namedtuple("Pair", "a b")


def _scale(q: Any, x: Any) -> Params:
    return Params(q.w * x, q.b + x)


def test_a_registered_dataclass_as_in_axes_and_out_axes() -> None:
    p, x = Params(RNG.standard_normal((4, 3)), RNG.standard_normal(3)), RNG.standard_normal((4, 3))
    got = gc.vmap(_scale, in_axes=(Params(0, None), 0), out_axes=Params(0, 1))(p, x)
    assert isinstance(got, Params)
    np.testing.assert_array_equal(got.w, p.w * x)
    np.testing.assert_array_equal(got.b, (p.b + x).T)


def test_a_registered_dataclass_prefix_agrees_with_jax(jax: Any) -> None:
    with contextlib.suppress(ValueError):  # registered by an earlier run in this process
        jax.tree_util.register_dataclass(Params, data_fields=["w", "b"], meta_fields=[])
    p, x = Params(RNG.standard_normal((4, 3)), RNG.standard_normal(3)), RNG.standard_normal((4, 3))
    in_axes, out_axes = (Params(0, None), 0), Params(0, 1)
    got = gc.vmap(_scale, in_axes=in_axes, out_axes=out_axes)(p, x)
    want = jax.vmap(_scale, in_axes=in_axes, out_axes=out_axes)(p, x)
    np.testing.assert_allclose(got.w, np.asarray(want.w), rtol=1e-15)
    np.testing.assert_allclose(got.b, np.asarray(want.b), rtol=1e-15)


def test_a_pytree_class_and_a_namedtuple_as_prefixes() -> None:
    box = Box((np.ones((2, 3)), np.arange(2.0)), "k")
    got = gc.vmap(lambda b: b.value[0] * b.value[1], in_axes=(Box((1, None), "k"),))(box)
    np.testing.assert_array_equal(got, np.broadcast_to(np.arange(2.0), (3, 2)))
    pair = Pair(np.ones((4, 3)), np.arange(3.0))
    out = gc.vmap(lambda q: Pair(q.a * q.b, q.b), in_axes=(Pair(0, None),), out_axes=Pair(1, None))(
        pair
    )
    assert isinstance(out, Pair)
    np.testing.assert_array_equal(out.a, (pair.a * pair.b).T)
    np.testing.assert_array_equal(out.b, pair.b)


def test_a_prefix_of_another_type_or_aux_data_is_refused_as_in_jax() -> None:
    x = np.ones((2, 3))
    with pytest.raises(gc.VmapError, match=r"args\[0\]: in_axes entry Tagged.* has the aux data"):
        gc.vmap(lambda t: t.x, in_axes=(Tagged(0, "b"),))(Tagged(x, "a"))
    with pytest.raises(gc.VmapError, match=r"does not match the argument's structure \(Params\)"):
        gc.vmap(lambda p: p.w, in_axes=(Tagged(0),))(Params(x, x))
    with pytest.raises(
        gc.VmapError, match=r"args\[0\]: in_axes entry \(a Box\) has the aux data 'other'"
    ):
        gc.vmap(lambda b: b.value, in_axes=(Box(0, "other"),))(Box(x, "k"))
    got = gc.vmap(lambda t: t.x, in_axes=(Tagged(1, "a"),))(Tagged(x, "a"))
    np.testing.assert_array_equal(got, x.T)


def test_an_ordered_dict_prefix_follows_its_insertion_order() -> None:
    """Its leaves flatten in insertion order, not sorted: the axes must pair with them."""
    value = collections.OrderedDict([("z", np.ones((4, 3))), ("a", np.arange(3.0))])
    got = gc.vmap(lambda d: d["z"] * d["a"], in_axes=({"z": 0, "a": None},))(value)
    np.testing.assert_array_equal(got, value["z"] * value["a"])


@pytest.mark.parametrize("result", [None, (), {"k": None, "j": ()}])
def test_a_function_returning_no_arrays_gives_its_result_back(jax: Any, result: Any) -> None:
    x = np.ones((2, 3))
    got = gc.vmap(lambda a: result)(x)
    assert got == result == jax.vmap(lambda a: result)(x)
    inside = gc.jit(lambda v: (gc.vmap(lambda a: result)(v), v * 2))(x)
    assert inside[0] == result
    np.testing.assert_array_equal(inside[1], x * 2)
    with pytest.raises(gc.VmapError, match="out_axes"):
        gc.vmap(lambda a: None, out_axes=(0,))(x)


# -- a cond with a per-example predicate runs both branches ------------------------------------

TABLE = np.array([10.0, 20.0, 30.0])


def _lookup(i: Any) -> Any:
    return gc.cond(i < 3, lambda j: gc.take(TABLE, j, axis=0), lambda j: -1.0, i)


def _clipped_lookup(i: Any) -> Any:
    return gc.cond(i < 3, lambda j: gc.take(TABLE, gc.clip(j, 0, 2), axis=0), lambda j: -1.0, i)


@pytest.mark.parametrize("wrap", [np.asarray, ge.tensor])
def test_an_untaken_branch_that_fails_says_both_branches_run(wrap: Callable) -> None:
    """take keeps refusing an index out of range; the error explains why the branch ran."""
    assert [float(gc.jit(_lookup)(np.int64(i))) for i in (0, 2, 5)] == [10.0, 30.0, -1.0]
    with pytest.raises(gc.IndexRangeError, match="index 5 is out of range") as caught:
        gc.vmap(_lookup)(wrap(np.array([0, 2, 5])))
    assert "both branches run on every example" in str(caught.value)
    assert "cond 'cond'" in str(caught.value)


def test_a_failure_outside_a_batched_cond_has_no_branch_hint() -> None:
    with pytest.raises(gc.IndexRangeError) as caught:
        gc.vmap(lambda i: gc.take(TABLE, i, axis=0))(np.array([0, 5]))
    assert "branch" not in str(caught.value)


def test_a_guarded_branch_agrees_with_jax(jax: Any) -> None:
    jnp, lax = jax.numpy, jax.lax
    index = np.array([0, 2, 5])
    got = gc.vmap(_clipped_lookup)(index)
    np.testing.assert_array_equal(got, [10.0, 30.0, -1.0])
    want = jax.vmap(lambda i: lax.cond(i < 3, lambda j: jnp.take(TABLE, j), lambda j: -1.0, i))(
        index
    )
    np.testing.assert_array_equal(got, np.asarray(want))


def test_the_branch_hint_is_certain_when_the_runner_names_the_node() -> None:
    from graphc.frontend.vmap import _branch_hint

    certain = pytest.raises(gc.IndexRangeError, match="it comes from a branch of cond 'c'")
    with certain, _branch_hint({"take": "c"}):
        raise gc.IndexRangeError("take: index 5 is out of range", node="take")
    maybe = pytest.raises(gc.IndexRangeError, match="it may come from a branch of cond 'c'")
    with maybe, _branch_hint({"take": "c"}):
        raise gc.IndexRangeError("take: index 5 is out of range", node="other")
