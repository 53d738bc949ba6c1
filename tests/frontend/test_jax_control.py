"""The control-flow functions as a JAX user writes them: JAX's keyword names, pytrees
(dicts, namedtuples, registered dataclasses) as operands, carries, branch results, xs
and ys, numeric predicates, fori_loop's counter dtype, and the newer functions
`switch`, `scan(unroll=)`, `map` and `associative_scan`.

Each program runs traced (gc.trace), on plain arrays and on eager tensors, and the
three agree; where jax is installed the same program runs in jax (float64) and the
values agree. Gradients of the new functions against central finite differences in
float64, through gc.gradients on the traced graph.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from tests.edge_values import bits_differ
from tests.finite_differences import numeric_grad

F64 = "float64"


@pytest.fixture
def jax() -> Iterator[Any]:
    """jax with float64 inside each test only (a global setting outlived the tests)."""
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        yield jax


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def as_numpy(value: Any) -> Any:
    return gc.tree_map(lambda v: np.asarray(v.numpy() if hasattr(v, "numpy") else v), value)


def three_ways(fn: Callable[..., Any], xs: Sequence[np.ndarray]) -> Any:
    """fn traced, on arrays and on eager tensors: the same bits; the traced result."""
    g = gc.trace(fn, *[gc.TensorSpec(x.shape, x.dtype) for x in xs])
    static = g(*xs)
    on_arrays = fn(*xs)
    eager = fn(*[ge.tensor(x) for x in xs])
    for other in (on_arrays, eager):
        other = as_numpy(other)
        if isinstance(static, tuple):
            assert len(other) == len(static)
            for a, b in zip(other, static, strict=True):
                assert bits_differ(np.asarray(a), b) is None
        else:
            assert bits_differ(np.asarray(other), static) is None
    return static


def check_gradients(fn: Callable[..., Any], xs: Sequence[np.ndarray]) -> None:
    """gc.gradients of the traced scalar fn against finite differences of fn on arrays."""
    g = gc.trace(fn, *[gc.TensorSpec(x.shape, F64) for x in xs])
    names = [p.name for p in g.inputs]
    got = gc.run(gc.gradients(g, wrt=names), dict(zip(names, xs, strict=True)))
    for i in range(len(xs)):
        np.testing.assert_allclose(
            got[1 + i], numeric_grad(fn, xs, i), rtol=1e-6, atol=1e-8, err_msg=names[i]
        )


class Particle(NamedTuple):
    pos: Any
    vel: Any


@gc.register_dataclass
@dataclasses.dataclass
class Stats:
    total: Any
    peak: Any
    scale: float = dataclasses.field(default=1.0, metadata={"static": True})


# -- pytrees through every function ---------------------------------------------------


def test_namedtuple_and_dict_carries_through_scan_match_jax(jax: Any) -> None:
    def program(np_like: Any, scan: Callable[..., Any]) -> Callable[..., Any]:
        def fn(x: Any, xs: Any) -> Any:
            def step(p: Particle, inp: dict) -> tuple:
                vel = p.vel * 0.9 + inp["force"]
                return Particle(p.pos + vel, vel), {"pos": p.pos, "energy": vel * vel}

            final, ys = scan(step, Particle(x, x * 0.0), {"force": xs})
            return final.pos + np_like.sum(ys["energy"], axis=0), ys["pos"]

        return fn

    x, xs = rng().normal(size=3), rng(1).normal(size=(5, 3))
    got = three_ways(program(gc, gc.scan), [x, xs])
    want = program(jax.numpy, jax.lax.scan)(x, xs)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-12)


def test_a_namedtuple_carry_of_fori_loop_and_while_loop() -> None:
    # the namedtuple used to be rebuilt with kind(generator): a raw TypeError
    def fn(x: Any) -> Any:
        out = gc.fori_loop(0, 4, lambda i, p: Particle(p.pos + p.vel, p.vel * 0.5), Particle(x, x))
        done = gc.while_loop(
            lambda p: gc.sum(p.pos) < 50.0, lambda p: p._replace(pos=p.pos * 2), out
        )
        return done.pos + done.vel

    three_ways(fn, [np.array([1.0, 2.0])])


def test_dict_operands_and_results_of_cond_and_switch_match_jax(jax: Any) -> None:
    def program(np_like: Any, cond: Callable[..., Any], switch: Callable[..., Any]) -> Any:
        def fn(x: Any, i: Any) -> Any:
            ops = {"a": x, "b": (x * 2.0, None)}
            out = cond(
                np_like.sum(x) > 0,
                lambda d: {"u": d["a"] + d["b"][0], "v": [d["a"]]},
                lambda d: {"u": d["a"] - 1.0, "v": [d["b"][0]]},
                ops,
            )
            branches = [
                lambda d: Particle(d["u"], d["v"][0]),
                lambda d: Particle(d["v"][0], d["u"] * 3.0),
                lambda d: Particle(d["u"] * d["u"], d["u"]),
            ]
            p = switch(i, branches, out)
            return p.pos + p.vel

        return fn

    x = np.array([0.5, -0.25, 1.0])
    for sign in (1.0, -1.0):
        for i in range(-1, 5):
            index = np.int64(i)
            got = three_ways(program(gc, gc.cond, gc.switch), [sign * x, index])
            want = program(jax.numpy, jax.lax.cond, jax.lax.switch)(sign * x, index)
            np.testing.assert_allclose(got, np.asarray(want), rtol=1e-12, err_msg=f"{sign} {i}")


def test_a_registered_dataclass_as_carry_and_ys() -> None:
    def fn(xs: Any) -> Any:
        def step(s: Stats, x: Any) -> tuple:
            new = Stats(total=s.total + x, peak=gc.maximum(s.peak, x), scale=s.scale)
            return new, Stats(total=new.total * s.scale, peak=new.peak, scale=s.scale)

        final, ys = gc.scan(step, Stats(total=xs[0] * 0.0, peak=xs[0], scale=2.0), xs)
        assert isinstance(final, Stats) and final.scale == 2.0 and isinstance(ys, Stats)
        return final.total + final.peak + gc.sum(ys.total, axis=0) + gc.sum(ys.peak, axis=0)

    three_ways(fn, [rng().normal(size=(4, 2))])


def test_carry_structure_mismatches_name_where() -> None:
    def drops_a_key(x: Any) -> Any:
        init = {"a": x, "b": x}
        return gc.scan(lambda c, _: ({"a": c["a"]}, None), init, length=2)[0]["a"]

    want = r"they differ at carry: dict keys \['a', 'b'\] vs \['a'\], initial vs returned"
    with pytest.raises(gc.TracingError, match=want):
        gc.trace(drops_a_key, gc.TensorSpec((3,), F64))
    with pytest.raises(gc.TracingError, match=want):  # the Python loop checks it too
        drops_a_key(np.ones(3))

    def changes_a_field(x: Any) -> Any:
        return gc.while_loop(
            lambda p: gc.sum(p.pos) < 9.0, lambda p: Particle(p.pos * 2, (p.vel,)), Particle(x, x)
        ).pos

    with pytest.raises(gc.TracingError, match=r"carry\.vel: a leaf vs tuple of 1"):
        gc.trace(changes_a_field, gc.TensorSpec((3,), F64))
    with pytest.raises(gc.TracingError, match=r"carry\.vel: a leaf vs tuple of 1"):
        changes_a_field(ge.tensor(np.ones(3)))

    def branches_differ(x: Any) -> Any:
        return gc.cond(gc.sum(x) > 0, lambda v: {"a": v}, lambda v: {"b": v}, x)

    with pytest.raises(gc.TracingError, match=r"result: dict keys \['a'\] vs \['b'\]"):
        gc.trace(branches_differ, gc.TensorSpec((3,), F64))


def test_an_unregistered_container_result_says_how_to_register_it() -> None:
    @dataclasses.dataclass
    class Loose:
        v: Any

    with pytest.raises(gc.TracingError, match="gc.register_pytree_node or gc.register_dataclass"):
        gc.trace(lambda x: gc.cond(gc.sum(x) > 0, Loose, Loose, x).v, gc.TensorSpec((3,), F64))


# -- predicates -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "pred",
    [None, "yes", [True]],
    ids=["None", "str", "list"],
)
def test_a_predicate_that_is_no_scalar_number_raises_on_every_path(pred: Any) -> None:
    x = np.ones(3)
    for operand in (x, ge.tensor(x)):
        with pytest.raises(gc.DTypeError, match="cond: the predicate"):
            gc.cond(pred, lambda v: v, lambda v: -v, operand)
    with pytest.raises(gc.DTypeError, match="cond: the predicate"):
        gc.trace(lambda v: gc.cond(pred, lambda a: a, lambda a: -a, v), gc.TensorSpec((3,), F64))


def test_a_non_scalar_predicate_on_arrays_is_named() -> None:
    with pytest.raises(
        gc.ShapeError, match=r"cond: the predicate must be a scalar, got shape \(2,\)"
    ):
        gc.cond(np.array([True, False]), lambda: 1, lambda: 2)


@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64"])
def test_numeric_predicates_nonzero_is_true_as_in_jax(jax: Any, dtype: str) -> None:
    def fn(p: Any, x: Any) -> Any:
        return gc.cond(p, lambda v: v * 2.0, lambda v: v - 1.0, x)

    x = np.array([1.0, -3.0])
    values = [0, 1, -2, 7] + ([0.5, -0.0, np.nan, np.inf] if dtype.startswith("float") else [])
    for value in values:
        p = np.asarray(value, dtype)
        got = three_ways(fn, [p, x])
        want = jax.lax.cond(p, lambda v: v * 2.0, lambda v: v - 1.0, x)
        np.testing.assert_array_equal(got, np.asarray(want), err_msg=f"{dtype} {value}")
    assert gc.cond(2, lambda: "t", lambda: "f") == "t"
    assert gc.cond(0.0, lambda: "t", lambda: "f") == "f"


# -- fori_loop's counter and JAX's keyword names --------------------------------------


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_fori_loop_counter_takes_the_bounds_dtype(jax: Any, dtype: str) -> None:
    def static_bounds(v: Any) -> Any:
        return gc.fori_loop(np.asarray(1, dtype)[()], 5, lambda i, c: c * 2 + i, v)

    def graph_bounds(lo: Any, hi: Any, v: Any) -> Any:
        return gc.fori_loop(lo, hi, lambda i, c: c * 2 + i, v)

    v = np.asarray(3, dtype)
    got = three_ways(static_bounds, [v])
    assert got.dtype == np.dtype(dtype)
    want = jax.lax.fori_loop(np.asarray(1, dtype), 5, lambda i, c: c * 2 + i, v)
    assert int(got) == int(want)
    lo, hi = np.asarray(1, dtype), np.asarray(5, dtype)
    got = three_ways(graph_bounds, [lo, hi, v])
    assert got.dtype == np.dtype(dtype) and int(got) == int(want)
    seen = []
    gc.fori_loop(np.int32(0), 2, lambda i, c: seen.append(type(i)) or c, 0)
    assert seen == [np.int32, np.int32]


def test_fori_loop_bounds_must_be_integers() -> None:
    with pytest.raises(gc.DTypeError, match="fori_loop: upper must be an integer, got float64"):
        gc.fori_loop(0, 2.5, lambda i, c: c, np.ones(2))
    with pytest.raises(gc.DTypeError, match="fori_loop: lower must be an integer, got float32"):
        gc.trace(
            lambda lo, v: gc.fori_loop(lo, 3, lambda i, c: c, v),
            gc.TensorSpec((), "float32"),
            gc.TensorSpec((2,)),
        )


def test_jax_keyword_names_on_every_function(jax: Any) -> None:
    f = lambda i, v: v * 2.0  # noqa: E731
    assert gc.fori_loop(lower=0, upper=0, body_fun=f, init_val=1.0) == 1.0
    assert gc.fori_loop(lower=0, upper=3, body_fun=f, init_val=1.0) == jax.lax.fori_loop(
        lower=0, upper=3, body_fun=f, init_val=1.0
    )

    def fn(x: Any) -> Any:
        a = gc.cond(gc.sum(x) > 0, true_fun=lambda: x * 2.0, false_fun=lambda: x)
        b = gc.while_loop(
            cond_fun=lambda v: gc.sum(v) < 40.0, body_fun=lambda v: v * 2.0, init_val=a
        )
        c = gc.fori_loop(lower=0, upper=2, body_fun=lambda i, v: v + 1.0, init_val=b)
        d = gc.scan(f=lambda s, _: (s * 0.5, s), init=c, xs=None, length=2, reverse=True, unroll=2)
        e = gc.switch(index=gc.cast(gc.sum(x), "int64"), branches=[lambda: c, lambda: -c])
        return d[0] + e + gc.switch(1, [lambda v: v, lambda v: -v], c)

    three_ways(fn, [np.array([1.0, 2.0])])


def test_graphc_spellings_stay_as_aliases() -> None:
    x = np.array([1.0, 2.0])
    assert gc.cond(True, true_fn=lambda: 1, false_fn=lambda: 2) == 1
    assert gc.while_loop(cond_fn=lambda v: v < 5, body_fn=lambda v: v + 1, init=0) == 5
    np.testing.assert_array_equal(gc.fori_loop(0, 2, body_fn=lambda i, v: v + i, init=x), x + 1)
    with pytest.raises(gc.GraphcError, match="got both body_fun= and its alias body_fn="):
        gc.fori_loop(0, 2, lambda i, v: v, body_fn=lambda i, v: v, init_val=x)
    with pytest.raises(gc.GraphcError, match="while_loop: missing argument init_val"):
        gc.while_loop(lambda v: False, lambda v: v)


# -- switch ---------------------------------------------------------------------------


BRANCHES = [lambda v: gc.sin(v) * v, lambda v: v * v * v, lambda v: gc.exp(-v), lambda v: v - 1.0]


@pytest.mark.parametrize("count", [1, 2, 3, 4])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_switch_clamps_the_index_as_jax(jax: Any, count: int, dtype: str) -> None:
    jnp = jax.numpy
    jax_branches = [
        lambda v: jnp.sin(v) * v,
        lambda v: v * v * v,
        lambda v: jnp.exp(-v),
        lambda v: v - 1.0,
    ]

    def fn(i: Any, x: Any) -> Any:
        return gc.switch(i, BRANCHES[:count], x)

    x = rng().normal(size=3)
    for index in range(-3, count + 3):
        i = np.asarray(index, dtype)
        got = three_ways(fn, [i, x])
        want = jax.lax.switch(i, jax_branches[:count], x)
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-13, err_msg=str(index))


def test_switch_is_nested_conds_and_differentiates() -> None:
    g = gc.trace(
        lambda i, x: gc.switch(i, BRANCHES, x), gc.TensorSpec((), "int64"), gc.TensorSpec((3,), F64)
    )
    assert [n.op for n in g.op_nodes].count("cond") == 1  # a balanced tree: one at the top
    x = rng(2).normal(size=3)
    for index in (-1, 0, 1, 2, 3, 9):
        check_gradients(lambda v, k=index: gc.sum(gc.switch(k, BRANCHES, v) * v), [x])

        def traced_index(v: Any, k: int = index) -> Any:
            # the index a graph value: every branch traced, the one taken differentiated
            i = gc.cast(gc.sum(v * 0.0), "int64") + k
            return gc.sum(gc.switch(i, BRANCHES, v) * v)

        check_gradients(traced_index, [x])


def test_switch_mistakes_are_named() -> None:
    x = np.ones(3)
    with pytest.raises(
        gc.DTypeError, match="switch: the index must be an integer scalar, got float"
    ):
        gc.switch(1.0, BRANCHES, x)
    with pytest.raises(
        gc.DTypeError, match="switch: the index must be an integer scalar, got bool"
    ):
        gc.switch(True, BRANCHES, x)
    with pytest.raises(gc.DTypeError, match="switch: the index is None"):
        gc.switch(None, BRANCHES, x)
    with pytest.raises(gc.GraphcError, match="switch: branches must be a non-empty list"):
        gc.switch(0, [], x)
    with pytest.raises(gc.GraphcError, match=r"switch: branches\[1\] is int, not a function"):
        gc.switch(0, [gc.sin, 3], x)
    with pytest.raises(gc.DTypeError, match="got float32"):
        gc.trace(lambda i, v: gc.switch(i, BRANCHES, v), gc.TensorSpec(()), gc.TensorSpec((3,)))
    with pytest.raises(gc.TracingError, match="different structures"):
        gc.trace(
            lambda i, v: gc.switch(i, [lambda a: a, lambda a: (a, a)], v),
            gc.TensorSpec((), "int64"),
            gc.TensorSpec((3,)),
        )


# -- scan(unroll=) and map ------------------------------------------------------------


@pytest.mark.parametrize("unroll", [1, 2, 3, 5, True, False])
def test_scan_unroll_changes_nothing(jax: Any, unroll: int | bool) -> None:
    def fn(x: Any, xs: Any) -> Any:
        return gc.scan(lambda c, v: (gc.tanh(c * v + 1.0), c * c), x, xs, unroll=unroll)

    x, xs = rng().normal(size=2), rng(1).normal(size=(4, 2))
    got = three_ways(fn, [x, xs])
    plain = gc.trace(
        lambda a, b: gc.scan(lambda c, v: (gc.tanh(c * v + 1.0), c * c), a, b),
        gc.TensorSpec((2,), F64),
        gc.TensorSpec((4, 2), F64),
    )
    for a, b in zip(got, plain(x, xs), strict=True):
        assert bits_differ(a, b) is None
    jnp = jax.numpy
    want = jax.lax.scan(lambda c, v: (jnp.tanh(c * v + 1.0), c * c), x, xs, unroll=unroll)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-13)
    check_gradients(lambda a, b: gc.sum(fn(a, b)[1]) + gc.sum(fn(a, b)[0]), [x, xs])


@pytest.mark.parametrize("unroll", [0, -1, 1.5, "2"])
def test_scan_refuses_a_bad_unroll(unroll: Any) -> None:
    with pytest.raises(gc.GraphcError, match="scan: unroll must be a positive int or a bool"):
        gc.scan(lambda c, v: (c, v), 0.0, np.ones(3), unroll=unroll)


def test_map_matches_jax_on_pytrees(jax: Any) -> None:
    def program(np_like: Any, lax_map: Callable[..., Any]) -> Callable[..., Any]:
        def fn(a: Any, b: Any) -> Any:
            out = lax_map(
                lambda d: {"s": np_like.sum(d["a"] * d["b"]), "p": d["a"] - d["b"]},
                {"a": a, "b": b},
            )
            return out["s"], out["p"]

        return fn

    a, b = rng().normal(size=(5, 3)), rng(1).normal(size=(5, 3))
    got = three_ways(program(gc, gc.map), [a, b])
    want = program(jax.numpy, jax.lax.map)(a, b)
    for x, y in zip(got, want, strict=True):
        np.testing.assert_allclose(x, np.asarray(y), rtol=1e-13)
    batched = program(gc, lambda f, xs: gc.map(f, xs, batch_size=2))(a, b)
    for x, y in zip(batched, got, strict=True):
        assert bits_differ(np.asarray(x), y) is None
    check_gradients(lambda u, v: gc.sum(program(gc, gc.map)(u, v)[0] * 1.5), [a, b])
    with pytest.raises(gc.GraphcError, match="map: batch_size must be a positive int"):
        gc.map(gc.sin, a, batch_size=0)


def test_map_of_no_rows_gives_empty_ys_on_every_path() -> None:
    def fn(xs: Any) -> Any:
        return gc.map(lambda r: r * 2.0, xs)

    got = three_ways(fn, [np.zeros((0, 3))])
    assert got.shape == (0, 3)


# -- associative_scan -----------------------------------------------------------------


def sequential(
    fn: Callable[[Any, Any], Any], elems: np.ndarray, reverse: bool = False
) -> np.ndarray:
    order = range(len(elems) - 1, -1, -1) if reverse else range(len(elems))
    out: list[Any] = [None] * len(elems)
    acc = None
    for i in order:
        acc = elems[i] if acc is None else fn(acc, elems[i])
        out[i] = acc
    return np.stack(out) if out else elems


@pytest.mark.parametrize("length", [1, 2, 3, 4, 5, 7, 8, 13])
@pytest.mark.parametrize("reverse", [False, True])
def test_associative_scan_of_matrix_products_matches_a_loop_and_jax(
    jax: Any, length: int, reverse: bool
) -> None:
    elems = rng(length).normal(size=(length, 2, 2))

    def fn(e: Any) -> Any:
        return gc.associative_scan(gc.matmul, e, reverse=reverse)

    got = three_ways(fn, [elems])
    loop = sequential(lambda a, b: a @ b, elems, reverse)
    np.testing.assert_allclose(got, loop, rtol=1e-12, atol=1e-14)
    want = jax.lax.associative_scan(jax.numpy.matmul, elems, reverse=reverse)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_associative_scan_of_a_pytree_along_an_axis(jax: Any, axis: int) -> None:
    # h[t] = a[t] * h[t-1] + b[t] as the composition of affine maps (a, b)
    def compose(first: tuple, second: tuple) -> tuple:
        return (first[0] * second[0], second[0] * first[1] + second[1])

    a, b = rng().uniform(0.5, 1.5, size=(6, 5)), rng(1).normal(size=(6, 5))

    def fn(u: Any, v: Any) -> Any:
        return gc.associative_scan(compose, {"x": (u, v)}["x"], axis=axis)

    got = three_ways(fn, [a, b])
    want = jax.lax.associative_scan(compose, (a, b), axis=axis)
    for x, y in zip(got, want, strict=True):
        np.testing.assert_allclose(x, np.asarray(y), rtol=1e-12)
    moved = np.moveaxis(b, axis, 0), np.moveaxis(a, axis, 0)
    h, hs = np.zeros(moved[0].shape[1:]), []
    for t in range(len(moved[0])):
        h = moved[1][t] * h + moved[0][t]
        hs.append(h)
    np.testing.assert_allclose(got[1], np.moveaxis(np.stack(hs), 0, axis), rtol=1e-12)


def test_associative_scan_on_ints_and_its_gradient() -> None:
    ints = np.array([3, -1, 4, 1, -5, 9, 2], np.int32)
    got = three_ways(lambda e: gc.associative_scan(gc.add, e), [ints])
    assert got.dtype == np.int32 and bits_differ(got, np.cumsum(ints, dtype=np.int32)) is None
    elems = rng(3).normal(size=(7, 2, 2))
    weights = rng(4).normal(size=(7, 2, 2))
    for reverse in (False, True):
        check_gradients(
            lambda e, r=reverse: gc.sum(gc.associative_scan(gc.matmul, e, reverse=r) * weights),
            [elems],
        )


def test_associative_scan_mistakes_are_named() -> None:
    with pytest.raises(gc.ShapeError, match="the symbolic dim 'T'; the log-depth recursion"):
        gc.trace(lambda e: gc.associative_scan(gc.add, e), gc.TensorSpec(("T", 2)))
    with pytest.raises(gc.ShapeError, match=r"different lengths along axis 0: \['3', '4'\]"):
        gc.associative_scan(lambda p, q: p, (np.ones(3), np.ones(4)))
    with pytest.raises(gc.ShapeError, match="axis 2 is out of range for leaf 0"):
        gc.associative_scan(gc.add, np.ones((3, 2)), axis=2)
    with pytest.raises(gc.TracingError, match="'first' returns a different structure than elems"):

        def first(p: tuple, q: tuple) -> Any:
            return p[0]

        gc.associative_scan(first, (np.ones(3), np.ones(3)))
    with pytest.raises(gc.GraphcError, match="elems has no arrays"):
        gc.associative_scan(gc.add, ())


def test_switch_and_map_inside_a_scan_on_symbolic_dims(jax: Any) -> None:
    # the index a slice of xs each step: the switch's conds are traced inside the body
    def program(np_like: Any, lax: Any) -> Callable[..., Any]:
        def fn(x: Any, codes: Any, rows: Any) -> Any:
            def step(c: Any, inp: tuple) -> tuple:
                code, row = inp
                branches = [lambda v: v * row, lambda v: v + row, lambda v: np_like.tanh(v)]
                return lax.switch(code, branches, c), np_like.sum(c)

            final, sums = lax.scan(step, x, (codes, rows))
            squares = lax.map(lambda r: r * r, rows)
            return final + np_like.sum(squares, axis=0), sums

        return fn

    specs = [gc.TensorSpec(("B",), F64), gc.TensorSpec(("T",), "int64")]
    g = gc.trace(program(gc, gc), *specs, gc.TensorSpec(("T", "B"), F64))
    for steps, width in ((5, 3), (1, 2), (0, 4)):
        x = rng(steps).normal(size=width)
        codes = rng(steps + 1).integers(-1, 4, size=steps)
        rows = rng(steps + 2).normal(size=(steps, width))
        got = g(x, codes, rows)
        want = program(jax.numpy, jax.lax)(x, codes, rows)
        for a, b in zip(got, want, strict=True):
            np.testing.assert_allclose(a, np.asarray(b), rtol=1e-12, err_msg=f"{steps}x{width}")
        three_ways(program(gc, gc), [x, codes, rows])


def test_associative_scan_of_no_elements_and_one() -> None:
    for length in (0, 1):
        elems = np.ones((length, 2, 2))
        got = three_ways(lambda e: gc.associative_scan(gc.matmul, e), [elems])
        assert bits_differ(got, elems) is None


def test_while_loop_of_a_dict_carry_and_an_int32_fori_loop_match_jax(jax: Any) -> None:
    def program(np_like: Any, lax: Any) -> Callable[..., Any]:
        def fn(x: Any) -> Any:
            def body(d: dict) -> dict:
                return {"n": d["n"] + 1, "v": d["v"] * 1.5 + 0.25}

            done = lax.while_loop(
                lambda d: np_like.sum(d["v"]) < 30.0, body, {"v": x, "n": np.int32(0)}
            )
            lo, hi = np.int32(2), np.int32(6)
            scaled = lax.fori_loop(lo, hi, lambda i, v: v * 0.5 + v * v * 0.1, done["v"])
            return scaled, done["n"]

        return fn

    x = np.array([0.5, 1.0, 0.25])
    got = three_ways(program(gc, gc), [x])
    want = program(jax.numpy, jax.lax)(x)
    np.testing.assert_allclose(got[0], np.asarray(want[0]), rtol=1e-12)
    assert got[1].dtype == np.int32 and int(got[1]) == int(want[1])


def test_gradient_through_a_fori_loop_with_int32_bounds() -> None:
    def fn(v: Any) -> Any:
        body = lambda i, c: c * gc.cast(i, F64) * 0.3 + gc.sin(c)  # noqa: E731
        return gc.sum(gc.fori_loop(np.int32(1), np.int32(4), body, v))

    check_gradients(fn, [rng(5).normal(size=3)])
