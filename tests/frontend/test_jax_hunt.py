"""Programs from JAX's own test suites (lax_control_flow_test.py, api_test.py), run side
by side in graphc and in jax (float64): values, gradients and shapes agree, and graphc
raises a named error where jax raises. Each case here was a difference once; the
message of its commit says which.

Many cases share one parametrized test, so the quick run takes the first of each.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge


@pytest.fixture
def jax() -> Iterator[Any]:
    """jax with float64 inside each test only (a global setting outlived the tests)."""
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        yield jax


def assert_trees_close(got: Any, want: Any) -> None:
    got_leaves, got_tree = gc.tree_flatten(got)
    want_leaves = [np.asarray(v) for v in gc.tree_leaves(gc.tree_map(np.asarray, want))]
    assert len(got_leaves) == len(want_leaves), (got, want)
    for g, w in zip(got_leaves, want_leaves, strict=True):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-6, atol=1e-9)


def bounded(fn: Callable[[Any], Any], steps: int = 5) -> Callable[[Any], Any]:
    """`fn`, refusing to run more than `steps` times: a loop that would never end
    fails the test instead of hanging it."""
    calls = [0]

    def once_more(value: Any) -> Any:
        calls[0] += 1
        assert calls[0] <= steps, "the loop did not stop"
        return fn(value)

    return once_more


# -- while_loop's condition ------------------------------------------------------------


# (condition, initial value): no bool scalar, which jax's while_loop refuses
NOT_A_BOOL_SCALAR = [
    (lambda c: (1.0, 1.0), 0.0),
    (lambda c: np.float32(1.0), np.float32(0.0)),
    (lambda c: c, 3),
    (lambda c: c < 3.0, np.zeros(2)),
]


@pytest.mark.parametrize("case", range(len(NOT_A_BOOL_SCALAR)))
def test_while_loop_condition_must_give_a_bool_scalar_on_every_path(jax: Any, case: int) -> None:
    cond, init = NOT_A_BOOL_SCALAR[case]
    with pytest.raises(TypeError):
        jax.lax.while_loop(cond, lambda c: c, init)
    # on the Python path (arrays, numbers) a truthy tuple or float looped for ever
    with pytest.raises(gc.GraphcError, match="must give one bool scalar"):
        gc.while_loop(cond, bounded(lambda c: c), init)
    with pytest.raises(gc.GraphcError, match="scalar"):
        gc.jit(lambda v: gc.while_loop(cond, lambda c: c, v))(init)
    with pytest.raises(gc.GraphcError, match="must give one bool scalar"):
        gc.while_loop(cond, bounded(lambda c: c), ge.tensor(np.asarray(init)))


# -- fori_loop -------------------------------------------------------------------------


@pytest.mark.parametrize("unroll", [3, True, False, 1])
def test_fori_loop_takes_unroll_as_jax(jax: Any, unroll: int | bool) -> None:
    body = lambda i, c: c * 1.5 + i  # noqa: E731
    want = jax.lax.fori_loop(0, 5, body, 1.0, unroll=unroll)
    assert_trees_close(gc.fori_loop(0, 5, body, 1.0, unroll=unroll), want)
    jitted = gc.jit(lambda c: gc.fori_loop(np.int16(0), 5, body, c, unroll=unroll))
    assert_trees_close(jitted(np.float64(1.0)), want)
    grad = gc.grad(lambda c: gc.fori_loop(0, 5, body, c, unroll=unroll))(1.0)
    assert_trees_close(grad, jax.grad(lambda c: jax.lax.fori_loop(0, 5, body, c))(1.0))


def test_fori_loop_unroll_needs_static_bounds(jax: Any) -> None:
    body = lambda i, c: c + 1.0  # noqa: E731
    with pytest.raises(ValueError, match="unroll"):
        jax.jit(lambda n: jax.lax.fori_loop(0, n, body, 0.0, unroll=2))(3)
    with pytest.raises(gc.GraphcError, match="unroll= needs bounds known when tracing"):
        gc.jit(lambda n: gc.fori_loop(0, n, body, 0.0, unroll=2))(np.int64(3))
    with pytest.raises(gc.GraphcError, match="unroll must be a positive int"):
        gc.fori_loop(0, 3, body, 0.0, unroll=0)


def test_fori_loop_carry_structure_is_checked_on_every_path(jax: Any) -> None:
    body = lambda i, x: {"T": x["t"] * 2}  # noqa: E731
    with pytest.raises(TypeError):
        jax.lax.fori_loop(0, 1, body, {"t": np.ones(1)})
    with pytest.raises(gc.TracingError, match=r"dict keys \['t'\] vs \['T'\]"):
        gc.fori_loop(0, 1, body, {"t": np.ones(1)})  # it returned {'T': ...}
    with pytest.raises(gc.TracingError, match=r"dict keys \['t'\] vs \['T'\]"):
        gc.jit(lambda v: gc.fori_loop(0, 1, body, {"t": v}))(np.ones(1))


# -- jit -------------------------------------------------------------------------------


class Scaler:
    """Hashable, so a method jitted with static_argnums=0 holds it static (JAX's rule)."""

    def __init__(self, k: float) -> None:
        self.k = k

    def __hash__(self) -> int:
        return hash(self.k)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Scaler) and other.k == self.k

    @functools.partial(gc.jit, static_argnums=0)
    def scale(self, x: Any) -> Any:
        return x * self.k

    @gc.jit
    def not_static(self, x: Any) -> Any:
        return x * self.k


def test_jit_in_a_class_body_is_a_method(jax: Any) -> None:
    x = np.array([1.0, 2.0])

    class Twin(Scaler):
        @functools.partial(jax.jit, static_argnums=0)
        def scale(self, x: Any) -> Any:
            return x * self.k

    for k in (3.0, 4.0):  # two instances, two static values: two traces
        assert_trees_close(Scaler(k).scale(x), Twin(k).scale(x))
    assert Scaler.scale(Scaler(2.0), x).tolist() == [2.0, 4.0]
    with pytest.raises(gc.DTypeError, match=r"args\[0\] is not an array .* static_argnums=0"):
        Scaler(2.0).not_static(x)  # self was dropped: "missing 1 required positional argument"


def test_jit_without_a_function_is_a_decorator(jax: Any) -> None:
    @gc.jit(static_argnums=0)
    def power(n: int, x: Any) -> Any:
        return x**n

    @jax.jit(static_argnums=0)
    def twin(n: int, x: Any) -> Any:
        return x**n

    x = np.array([1.5, 2.0])
    assert_trees_close(power(3, x), twin(3, x))
    with pytest.raises(TypeError):
        jax.jit(3)
    with pytest.raises(gc.DTypeError, match="expected a function to compile, got int"):
        gc.jit(3)


def test_jit_of_a_function_returning_no_array(jax: Any) -> None:
    x = np.array([1.0, 2.0])
    for fn in (lambda v: (), lambda v: None, lambda v: {"a": (), "b": None}, lambda v: (v, ())):
        assert_trees_close(gc.jit(fn)(x), jax.jit(fn)(x))
        assert gc.tree_structure(gc.jit(fn)(x)) == gc.tree_structure(fn(x))
    assert gc.eval_shape(lambda v: (), x) == jax.eval_shape(lambda v: (), x) == ()


def f3(a: Any, b: Any, c: Any) -> Any:
    return a


def positional_only(a: Any, /, b: Any, c: Any, *args: Any, **kwargs: Any) -> Any:
    return a


@pytest.mark.parametrize(
    "fn, how",
    [
        (f3, {"static_argnums": (0, 1, 3)}),
        (f3, {"static_argnums": 3}),
        (lambda a, /, b, *, c: a, {"static_argnums": 2}),
        (positional_only, {"static_argnames": "a"}),
        (positional_only, {"static_argnames": ("args", "c")}),
    ],
)
def test_jit_refuses_static_arguments_that_name_no_parameter(
    jax: Any, fn: Callable[..., Any], how: dict
) -> None:
    with pytest.raises(ValueError):
        jax.jit(fn, **how)
    with pytest.raises(gc.DTypeError, match="static_argn"):
        gc.jit(fn, **how)  # the number or name was accepted and held nothing static


# -- vmap of a cond whose predicate differs per example --------------------------------


def test_no_gradient_flows_into_a_branch_an_example_does_not_take() -> None:
    """testCondGradVmapNan: both branches run on every example, and sqrt's derivative at
    0 is infinite; the example that does not take the sqrt branch must send it nothing
    (0 * inf made NaN; jax gives the per-example derivative, as here)."""
    eps = 1e-3
    x = np.array([0.0, 0.5, 2.0, 0.0, 1e-4])

    def ours(x: Any) -> Any:
        return gc.vmap(lambda v: gc.cond(v < eps, lambda _: eps, lambda _: gc.sqrt(v), ()))(x)

    taken = x >= eps  # the examples taking sqrt; the others are the constant eps
    derivative = np.where(taken, 0.5 / np.sqrt(np.where(taken, x, 1.0)), 0.0)
    assert_trees_close(gc.grad(lambda x: gc.sum(ours(x)))(x), derivative)
    value = np.where(taken, np.sqrt(x), eps)
    assert_trees_close(gc.jvp(ours, (x,), (np.ones(5),)), (value, derivative))


# -- has_aux on every transformation ---------------------------------------------------


def cube_and_square(np_: Any) -> Callable[[Any], Any]:
    """(x**3 summed with a sine, its aux (x**2, a constant)), as api_test's aux tests."""
    return lambda x: (np_.sum(x**3 * np_.sin(x)), {"sq": x**2, "four": 4.0})


@pytest.mark.slow  # over a second (jax compiles each program)
@pytest.mark.parametrize(
    "how", ["jacfwd", "jacrev", "hessian", "jvp", "linearize", "value_and_grad"]
)
def test_has_aux_as_jax(jax: Any, how: str) -> None:
    x = np.array([0.5, 1.5, -2.0])
    ours, theirs = cube_and_square(gc), cube_and_square(jax.numpy)

    def run(lib: Any, f: Callable[[Any], Any], x: Any) -> Any:
        if how == "jvp":
            return lib.jvp(f, (x,), (np.ones(3),), has_aux=True)
        if how == "linearize":
            value, f_jvp, aux = lib.linearize(f, x, has_aux=True)
            return value, f_jvp(np.ones(3)), aux
        return getattr(lib, how)(f, has_aux=True)(x)

    want = run(jax, theirs, x)
    assert_trees_close(run(gc, ours, x), want)
    # inside a traced function too, where the aux is differentiable by an outer grad
    assert_trees_close(gc.jit(lambda x: run(gc, ours, x))(x), want)
    aux = lambda v: v[-1] if how != "value_and_grad" else v[0][1]  # noqa: E731
    got = gc.grad(lambda x: gc.sum(aux(run(gc, ours, x))["sq"] * x))(x)
    assert_trees_close(
        got, jax.grad(lambda x: jax.numpy.sum(aux(run(jax, theirs, x))["sq"] * x))(x)
    )


def test_f_vjp_takes_one_cotangent(jax: Any) -> None:
    pair = lambda v: (v, 2.0 * v)  # noqa: E731
    _, theirs = jax.vjp(pair, 1.0)
    with pytest.raises(TypeError):
        theirs(1.0, 1.0)
    _, ours = gc.vjp(pair, 1.0)
    with pytest.raises(gc.GraphcError, match="f_vjp takes one cotangent.* got 2 arguments"):
        ours(1.0, 1.0)  # a raw TypeError: 'f_vjp() takes 1 positional argument but 2 ...'
    with pytest.raises(gc.GraphcError, match="f_vjp takes one cotangent.* got 2 arguments"):
        gc.trace(lambda x: gc.vjp(pair, x)[1](1.0, 1.0), gc.TensorSpec(()))
    assert_trees_close(ours((1.0, 1.0)), theirs((1.0, 1.0)))


# -- vmap's arguments, eval_shape, allow_int -------------------------------------------


def test_vmap_passes_an_unbatched_function_through(jax: Any) -> None:
    """test_vmap_unbatched_object_passthrough_issue_183."""
    xs = np.arange(3.0)
    apply = lambda f, x: f(x) * 2.0  # noqa: E731
    want = jax.vmap(apply, (None, 0))(lambda x: x + 1, xs)
    assert_trees_close(gc.vmap(apply, (None, 0))(lambda x: x + 1, xs), want)
    assert_trees_close(gc.jit(lambda v: gc.vmap(apply, (None, 0))(gc.exp, v))(xs), np.exp(xs) * 2)


@pytest.mark.parametrize(
    "call, says",
    [
        (
            lambda vmap: vmap(lambda x: x, in_axes=False)(np.zeros(3)),
            r"entries are ints .* got False",
        ),
        (
            lambda vmap: vmap(lambda x: x, in_axes=(np.array([1.0, 2.0]),))(np.ones(2)),
            r"entries are ints .* \(ndarray\)",
        ),
        (
            lambda vmap: vmap(lambda a, b, c: a + b + c, in_axes=(0, 0, None))(
                a=np.ones(2), b=np.ones(2), c=0.5
            ),
            r"keyword arguments \['a', 'b', 'c'\] have no entry there: they are batched along",
        ),
    ],
)
def test_vmap_names_what_is_wrong_with_in_axes(jax: Any, call: Callable, says: str) -> None:
    with pytest.raises((TypeError, ValueError)):
        call(jax.vmap)
    with pytest.raises(gc.VmapError, match=says):
        call(gc.vmap)


class Described:
    """An object with a shape and a dtype (duck typing, as api_test's MyArgArray)."""

    def __init__(self, shape: tuple, dtype: str) -> None:
        self.shape, self.dtype = shape, np.dtype(dtype)


def test_eval_shape_takes_shape_and_dtype_objects_and_names_bad_results(jax: Any) -> None:
    args = [Described((3, 4), "float32"), Described((1, 5), "float32"), Described((4, 5), "int32")]
    fn = lambda a, b, x: a @ x + b  # noqa: E731
    got, want = gc.eval_shape(fn, *args), jax.eval_shape(fn, *args)
    assert (got.shape, got.dtype) == (want.shape, np.float64)  # numpy's int32 @ float32
    spec = jax.ShapeDtypeStruct((2, 3), np.float32)
    assert gc.eval_shape(lambda v: v.sum(0), spec).shape == (3,)

    def returns_itself(x: Any) -> Any:
        return (2.0, returns_itself)

    with pytest.raises(TypeError, match=r"output component \[1\]"):
        jax.eval_shape(returns_itself, 1.0)
    for transform in (gc.eval_shape, lambda f, x: gc.jit(f)(x)):
        with pytest.raises(gc.DTypeError, match=r"returned a function at result\[1\]"):
            transform(returns_itself, np.float32(1.0))


def test_grad_allow_int_gives_integer_arguments_zero_gradients(jax: Any) -> None:
    pick = lambda x, i: x[i] * x[0]  # noqa: E731
    x = np.array([2.0, 3.0])
    want = jax.grad(pick, argnums=(0, 1), allow_int=True)(x, 1)
    got = gc.grad(pick, argnums=(0, 1), allow_int=True)(x, 1)
    assert_trees_close(got[0], want[0])
    assert got[1] == 0 and np.asarray(got[1]).shape == ()  # jax's is a float0 zero
    value, grads = gc.value_and_grad(pick, argnums=(0, 1), allow_int=True)(x, 1)
    assert_trees_close((value, grads[0]), (x[1] * x[0], want[0]))
    with pytest.raises(gc.AutodiffError, match=r"argument 1 \('i'\) has dtype int64"):
        gc.grad(pick, argnums=(0, 1))(x, 1)


# -- x.at[...] keywords ----------------------------------------------------------------


AT_PROGRAMS = [
    lambda x, sin: x.at[5].get(mode="clip"),
    lambda x, sin: x.at[-7, 9].get(mode="clip"),
    lambda x, sin: x.at[7, -9].set(0.0, mode="clip"),
    lambda x, sin: x.at[:, np.array([0, 5, -9])].add(1.0, mode="clip", indices_are_sorted=True),
    lambda x, sin: x.at[1].multiply(2.0, mode="promise_in_bounds", unique_indices=True),
    lambda x, sin: x.at[1, 1:].apply(sin),
    lambda x, sin: x.at[np.array([2, 0])].add(x[0], unique_indices=True),
]


@pytest.mark.parametrize("case", range(len(AT_PROGRAMS)))
def test_at_takes_jax_keywords(jax: Any, case: int) -> None:
    """mode=, indices_are_sorted=, unique_indices= and apply were TypeErrors."""
    program = AT_PROGRAMS[case]
    x = np.arange(12.0).reshape(3, 4)
    want = program(jax.numpy.asarray(x), jax.numpy.sin)
    assert_trees_close(gc.jit(lambda v: program(v, gc.sin))(x), want)
    assert_trees_close(program(ge.tensor(x), gc.sin).numpy(), want)

    def squares(sin: Callable[[Any], Any]) -> Callable[[Any], Any]:
        return lambda v: (program(v, sin) ** 2).sum()

    jnp = jax.numpy
    # jax's apply has no derivative: there, that of set(sin(get()))
    twin = lambda v: (v.at[1, 1:].set(jnp.sin(v[1, 1:])) ** 2).sum()  # noqa: E731
    want_grad = jax.grad(squares(jnp.sin) if case != 5 else twin)(x)
    assert_trees_close(gc.grad(squares(gc.sin))(x), want_grad)


def test_at_refuses_the_modes_for_indices_out_of_range(jax: Any) -> None:
    x = np.arange(4.0)
    assert_trees_close(jax.numpy.asarray(x).at[9].set(1.0, mode="drop"), x)
    with pytest.raises(gc.GraphcError, match="mode='drop' is not supported: an index out of"):
        gc.at(x)[9].set(1.0, mode="drop")
    with pytest.raises(gc.GraphcError, match="mode='fill' is not supported"):
        gc.jit(lambda v: v.at[9].get(mode="fill", fill_value=0.0))(x)


# -- custom_jvp / custom_vjp: nondiff_argnums and defjvps ------------------------------


def custom_pair(lib: Any, np_: Any) -> dict[str, Callable[..., Any]]:
    """The same three custom functions in graphc and jax (custom_api_test's programs)."""

    @functools.partial(lib.custom_jvp, nondiff_argnums=(0,))
    def app(f: Callable[[Any], Any], x: Any) -> Any:
        return f(x)

    @app.defjvp
    def app_jvp(f: Callable[[Any], Any], primals: tuple, tangents: tuple) -> tuple:
        (x,), (t,) = primals, tangents
        return app(f, x), 3.0 * np_.cos(x) * t  # not f's derivative: the rule's

    @functools.partial(lib.custom_vjp, nondiff_argnums=(1,))
    def power(x: Any, n: int) -> Any:
        return x**n

    def power_fwd(x: Any, n: int) -> tuple:
        return power(x, n), x

    def power_bwd(n: int, x: Any, ct: Any) -> tuple:
        return (10.0 * n * x ** (n - 1) * ct,)

    power.defvjp(power_fwd, power_bwd)

    @lib.custom_jvp
    def sin_times(x: Any, y: Any) -> Any:
        return np_.sin(x) * y

    sin_times.defjvps(
        lambda t, out, x, y: 2.0 * np_.cos(x) * t * y, lambda t, out, x, y: np_.sin(x) * t
    )
    return {
        "app": lambda x, y: app(lambda v: v * v, x) * y,
        "power": lambda x, y: power(x, 3) + power(y, 2),
        "sin_times": sin_times,
    }


@pytest.mark.slow  # over a second (jax compiles each program)
@pytest.mark.parametrize("name", ["app", "power", "sin_times"])
def test_custom_rules_with_nondiff_argnums_and_defjvps(jax: Any, name: str) -> None:
    ours, theirs = custom_pair(gc, gc)[name], custom_pair(jax, jax.numpy)[name]
    x, y = np.array([0.5, 1.0, 2.0]), np.array([1.5, -1.0, 0.5])
    total = lambda f, lib: lambda a, b: lib.sum(f(a, b))  # noqa: E731
    both = (0, 1)
    assert_trees_close(gc.jit(ours)(x, y), theirs(x, y))
    assert_trees_close(
        gc.grad(total(ours, gc), both)(x, y), jax.grad(total(theirs, jax.numpy), both)(x, y)
    )
    assert_trees_close(gc.vmap(gc.grad(ours, both))(x, y), jax.vmap(jax.grad(theirs, both))(x, y))
    if name != "power":  # a custom_vjp has no forward mode, in jax too
        tangents = (np.ones(3), np.full(3, 2.0))
        assert_trees_close(gc.jvp(ours, (x, y), tangents), jax.jvp(theirs, (x, y), tangents))


# -- gc.random: jax.random's signatures (distributions and shapes, not bits) -----------


@pytest.mark.slow  # over a second (jax compiles each program)
def test_random_functions_take_jax_arguments(jax: Any) -> None:
    r, jr = gc.random, jax.random
    k, jk = r.key(0), jr.key(0)
    n = 20000
    # array bounds (a raw 'truth value of an array is ambiguous' before)
    bounded = r.uniform(k, (n, 2), minval=np.zeros(2), maxval=np.array([1.0, 10.0]))
    assert bounded.shape == jr.uniform(jk, (n, 2), minval=np.zeros(2), maxval=np.ones(2)).shape
    np.testing.assert_allclose(bounded.mean(0), [0.5, 5.0], rtol=0.03)
    assert (bounded >= 0).all() and (bounded[:, 1] < 10).all() and bounded[:, 0].max() < 1
    # shape= of categorical, a shape for split, independent= of permutation
    probs = np.array([0.2, 0.5, 0.3])
    drawn = r.categorical(k, np.log(probs), shape=(n,))
    np.testing.assert_allclose(np.bincount(drawn, minlength=3) / n, probs, atol=0.015)
    for logits, axis, shape in (((2, 5), -1, (3, 2)), ((5, 2), 0, (4, 2))):
        want = jr.categorical(jk, np.zeros(logits), axis=axis, shape=shape).shape
        assert r.categorical(k, np.zeros(logits), axis=axis, shape=shape).shape == want
    assert r.split(k, (2, 3)).shape == jr.split(jk, (2, 3)).shape[:2]
    rows = r.permutation(k, np.tile(np.arange(6), (40, 1)), axis=1, independent=True)
    assert all(sorted(row) == list(range(6)) for row in rows.tolist())
    assert len({tuple(row) for row in rows.tolist()}) > 30  # each row its own order


@pytest.mark.slow  # over a second (jax compiles each program)
@pytest.mark.parametrize("name", ["choice", "exponential", "laplace", "logistic"])
def test_random_distributions_jax_has(jax: Any, name: str) -> None:
    """These were AttributeErrors; their moments against the distributions'."""
    r, k, n = gc.random, gc.random.key(1), 20000
    if name == "choice":
        probs = np.array([0.2, 0.5, 0.3])
        drawn = r.choice(k, 3, (n,), p=probs)
        np.testing.assert_allclose(np.bincount(drawn, minlength=3) / n, probs, atol=0.015)
        table = np.arange(20.0).reshape(5, 4)
        picked = r.choice(k, table, (3,), replace=False)
        assert picked.shape == jax.random.choice(jax.random.key(1), table, (3,), False).shape
        assert len({tuple(row) for row in picked.tolist()}) == 3  # no row twice
        assert sorted(r.choice(k, 10, (10,), replace=False).tolist()) == list(range(10))
        with pytest.raises(gc.ShapeError, match="11 draws without replacement from 10"):
            r.choice(k, 10, (11,), replace=False)
        return
    drawn = getattr(r, name)(k, (n,))
    theirs = getattr(jax.random, name)(jax.random.key(1), (n,))
    assert drawn.dtype == np.float32 and drawn.shape == theirs.shape
    mean, var = {"exponential": (1, 1), "laplace": (0, 2), "logistic": (0, np.pi**2 / 3)}[name]
    np.testing.assert_allclose([drawn.mean(), drawn.var()], [mean, var], atol=0.05 * (1 + var))
    np.testing.assert_allclose(
        [np.mean(theirs), np.var(theirs)], [mean, var], atol=0.05 * (1 + var)
    )


@pytest.mark.parametrize("index", ["i, 0", "0, i", "i, 1:", "i, -i", "..., i", "-1, i"])
def test_at_get_with_a_loop_counter_beside_other_indices(jax: Any, index: str) -> None:
    """x.at[i, 0].get() with i a graph value was refused ('an integer-array index may
    only be combined with :'), as x[i, 0] still is (graphc/ops/indexing.py)."""
    program = eval(f"lambda x, i: x.at[{index}].get()")  # noqa: S307 - the index as written
    x = np.arange(24.0).reshape(4, 6)
    want = program(jax.numpy.asarray(x), 2)
    assert_trees_close(gc.jit(program)(x, np.int64(2)), want)
    grad = gc.grad(lambda x, i: (program(x, i) ** 2).sum())(x, np.int64(2))
    assert_trees_close(grad, jax.grad(lambda x, i: (program(x, i) ** 2).sum())(x, 2))


def test_at_names_an_index_that_holds_no_integers(jax: Any) -> None:
    x = np.arange(6.0)
    with pytest.raises(TypeError):
        jax.jit(lambda x, i: x.at[i].set(0.0))(x, np.float32(1))
    for index in (np.float32(1), np.bool_(True)):  # 'dtype object ... (value of type slice)'
        with pytest.raises(gc.DTypeError, match=r"at\[...\].set: an index must hold integers"):
            gc.jit(lambda x, i: x.at[i].set(0.0))(x, index)


def test_vmap_of_a_cond_keeps_an_operand_both_branches_return_unbatched(jax: Any) -> None:
    """test_cond_vmap_forwarding_doesnt_promote: y passes through both branches, so it
    is the same for every example and out_axes=None may say so (graphc selected it per
    example, and the batched result was refused)."""

    def program(lib: Any) -> Callable[..., Any]:
        branch = lambda k: lambda x, y: (x * k, y)  # noqa: E731
        return lambda x, y: lib.cond(x < 3, branch(2), branch(3), x, y)

    ours, theirs = program(gc), program(jax.lax)
    x, y = np.arange(5), np.array(3.0)
    want = jax.vmap(theirs, in_axes=(0, None), out_axes=(0, None))(x, y)
    assert_trees_close(gc.vmap(ours, in_axes=(0, None), out_axes=(0, None))(x, y), want)
    swap = lambda lib: lambda x, y: lib.cond(x < 3, lambda a, b: (a, b), lambda a, b: (b, a), x, y)  # noqa: E731
    x = np.arange(5.0)
    assert_trees_close(gc.vmap(swap(gc))(x, -x), jax.vmap(swap(jax.lax))(x, -x))


def test_scan_length_that_is_a_graph_value_is_named(jax: Any) -> None:
    with pytest.raises(jax.errors.ConcretizationTypeError):
        jax.jit(lambda n, x: jax.lax.scan(lambda c, z: (c, z), x, (), n))(3, 1.0)
    with pytest.raises(gc.ShapeError, match="scan: length must be known when tracing"):
        gc.jit(lambda n, x: gc.scan(lambda c, z: (c, z), x, (), n))(np.int64(3), 1.0)


def test_jit_accepts_donate_arguments(jax: Any) -> None:
    """donate_argnums/donate_argnames were TypeErrors; graphc never writes into a
    caller's array, so they change nothing, and are checked as jax checks them."""
    x = np.ones(3)
    want = jax.jit(lambda x, y: x + 2 * y, donate_argnums=0)(x, x)
    assert_trees_close(gc.jit(lambda x, y: x + 2 * y, donate_argnums=0)(x, x), want)
    assert_trees_close(gc.jit(lambda x, y: x + 2 * y, donate_argnames="y")(x, y=x), want)
    assert x.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError):
        jax.jit(lambda x: x, donate_argnums=2)
    with pytest.raises(gc.DTypeError, match="donate_argnums 2 is past the 1 positional"):
        gc.jit(lambda x: x, donate_argnums=2)


def test_a_differentiated_argument_that_is_no_array_is_named(jax: Any) -> None:
    with pytest.raises(TypeError, match="is not a valid JAX type"):
        jax.grad(lambda x: x)("foo")
    with pytest.raises(gc.DTypeError, match="grad_f: argument 0 holds a str, which is no array"):
        gc.grad(lambda x: x)("foo")  # 'dtype <U3 is not supported'
    # not differentiated, it passes through as before
    assert gc.grad(lambda x, s: gc.sum(x) * len(s))(np.ones(2), "abc").tolist() == [3.0, 3.0]


def test_vmap_axes_that_do_not_fit_a_single_array_say_it_is_a_leaf(jax: Any) -> None:
    with pytest.raises(ValueError, match="out_axes specification must be a tree prefix"):
        jax.vmap(lambda x: x, in_axes=0, out_axes=(2, 3))(np.ones(2))
    with pytest.raises(gc.VmapError, match=r"result's structure \(a leaf\)"):  # it said (int)
        gc.vmap(lambda x: x, in_axes=0, out_axes=(2, 3))(np.ones(2))
