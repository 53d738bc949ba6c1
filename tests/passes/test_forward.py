"""gc.tangents: the forward-mode graph, derived from the VJP by transposition."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphc as gc
from graphc.ir.registry import get_op
from graphc.ir.types import finfo, is_float
from graphc.passes.forward import forward_joint, split_tangents
from tests.budget import draws
from tests.differential import check_levels
from tests.edge_graphs import edge_graphs
from tests.edge_values import edge_feeds
from tests.op_cases import BUILDER_CASES, OpCase, all_cases, build_graph
from tests.strategies import random_feeds, random_graphs


def _fd(g: gc.Graph, feeds: dict, tangents: dict, eps: float = 1e-6) -> list[np.ndarray]:
    """Central differences of g's outputs along the tangents."""
    plus = {k: v + eps * tangents.get(k, 0) for k, v in feeds.items()}
    minus = {k: v - eps * tangents.get(k, 0) for k, v in feeds.items()}
    hi, lo = g(**plus), g(**minus)
    hi, lo = (hi, lo) if isinstance(hi, tuple) else ((hi,), (lo,))
    return [(a - b) / (2 * eps) for a, b in zip(hi, lo)]


def test_text_of_a_small_example() -> None:
    g = gc.parse("""
graph f(%x: f64[3], %w: f64[3]) {
  %m: f64[3] = mul(%x, %w)
  %s: f64[3] = sin(%m)
  output %y = %s
}""")
    assert str(gc.tangents(g, wrt=["x", "w"])) == (
        "graph f_jvp(%x: f64[3], %w: f64[3], %tan_x: f64[3], %tan_w: f64[3]) {\n"
        "  %m: f64[3] = mul(%x, %w)\n"
        "  %s: f64[3] = sin(%m)\n"
        "  %cos: f64[3] = cos(%m)\n"
        "  %mul_3: f64[3] = mul(%tan_w, %x)\n"
        "  %mul_4: f64[3] = mul(%tan_x, %w)\n"
        "  %add: f64[3] = add(%mul_3, %mul_4)\n"
        "  %mul_5: f64[3] = mul(%add, %cos)\n"
        "  output %y = %s\n"
        "  output %tan_y = %mul_5\n"
        "}"
    )


def test_tangents_match_finite_differences_and_compile() -> None:
    g = gc.trace(
        lambda x, w: gc.tanh(x @ w).sum(axis=1),
        gc.TensorSpec((None, 3), "float64"),
        gc.TensorSpec((3, 2), "float64"),
    )
    tg = gc.tangents(g, wrt=["x", "w"])
    gc.verify(tg)
    assert str(tg.inputs[0].type) == "f64[x_0,3]"  # the symbolic dim is kept
    rng = np.random.default_rng(0)
    x, w, tx, tw = (rng.standard_normal(s) for s in ((4, 3), (3, 2), (4, 3), (3, 2)))
    y, ty = tg(x, w, tx, tw)
    np.testing.assert_allclose(y, g(x, w))
    np.testing.assert_allclose(ty, _fd(g, {"x": x, "w": w}, {"x": tx, "w": tw})[0], rtol=1e-6)
    np.testing.assert_allclose(gc.compile(tg, opt_level=2)(x, w, tx, tw)[1], ty, rtol=1e-12)


def test_only_the_named_inputs_get_tangents() -> None:
    g = gc.trace(lambda x, w: x * w, gc.TensorSpec((2,), "float64"), gc.TensorSpec((2,), "float64"))
    tg = gc.tangents(g, wrt="w")
    assert [p.name for p in tg.inputs] == ["x", "w", "tan_w"]
    x, w = np.array([2.0, 3.0]), np.array([5.0, 7.0])
    np.testing.assert_allclose(tg(x, w, np.ones(2))[1], x)


def test_an_output_that_does_not_vary_gets_zero_tangent() -> None:
    g = gc.trace(lambda x, w: (x * 2.0, w + 1.0), gc.TensorSpec((2,), "float64"), np.ones(3))
    tg = gc.tangents(g, wrt=["x"])
    outs = tg(np.ones(2), np.ones(3), np.ones(2))
    np.testing.assert_array_equal(outs[2], [2.0, 2.0])
    np.testing.assert_array_equal(outs[3], np.zeros(3))


def test_identity_and_integer_outputs() -> None:
    g = gc.trace(lambda x: (x, gc.argmax(x)), gc.TensorSpec((3,), "float64"))
    fj = forward_joint(g, ["x"])
    assert fj.differentiated == ["out"]  # the integer output has no tangent
    _, _, t = fj.graph(np.arange(3.0), np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(t, [1.0, 2.0, 3.0])


def test_through_scan_and_cond() -> None:
    def f(x, w):
        def step(c, xi):
            c = gc.tanh(c * w + xi)
            return c, c * c

        c, ys = gc.scan(step, x[0], x)
        return gc.cond(gc.sum(c) > 0, lambda a: a * 2.0, lambda a: gc.exp(a), ys)

    g = gc.trace(f, gc.TensorSpec((5, 3), "float64"), gc.TensorSpec((3,), "float64"))
    tg = gc.tangents(g, wrt=["x", "w"])
    gc.verify(tg)
    rng = np.random.default_rng(1)
    for sign in (1.0, -1.0):  # each branch
        x, w = sign * rng.uniform(0.1, 1, (5, 3)), rng.uniform(-1, 1, 3)
        tx, tw = rng.standard_normal((5, 3)), rng.standard_normal(3)
        ty = tg(x, w, tx, tw)[1]
        np.testing.assert_allclose(ty, _fd(g, {"x": x, "w": w}, {"x": tx, "w": tw})[0], rtol=1e-6)


def test_differentiable_again() -> None:
    g = gc.trace(lambda x: gc.sum(gc.sin(x) * x), gc.TensorSpec((3,), "float64"))
    tg = gc.tangents(g, wrt=["x"])
    second = gc.gradients(tg, wrt=["x"], outputs=["tan_out"])  # d/dx (J t) = H t
    x, t = np.array([0.1, 0.5, 1.0]), np.array([1.0, -2.0, 0.5])
    hessian_diag = 2 * np.cos(x) - x * np.sin(x)
    np.testing.assert_allclose(second(x, t)[2], hessian_diag * t, rtol=1e-12)


def test_printable_parsable_and_the_meta_names_forward_nodes() -> None:
    g = gc.trace(lambda x: gc.exp(x) * x, gc.TensorSpec((2,), "float64"))
    tg = gc.tangents(g, wrt=["x"])
    assert str(gc.parse(str(tg))) == str(tg)
    forward = {n.name for n in g.nodes}
    marked = [n.meta["grad_of"] for n in tg.nodes if "grad_of" in n.meta]
    assert marked and set(marked) <= forward


def _clipped_gradient() -> object:
    @gc.custom_vjp
    def clip_gradient(x):
        return x * 1.0

    clip_gradient.defvjp(lambda x: (x * 1.0, ()), lambda res, ct: (gc.clip(ct, -0.5, 0.5),))
    return clip_gradient


def test_a_user_defined_backward_is_refused_where_it_is_differentiated() -> None:
    clip_gradient = _clipped_gradient()
    spec = gc.TensorSpec((2,), "float64")
    g = gc.trace(lambda x: clip_gradient(x) * 3.0, spec)
    with pytest.raises(gc.AutodiffError, match="'custom_vjp'.*user-defined backward.*clip"):
        gc.tangents(g, wrt=["x"])

    def loop(x):
        return gc.scan(lambda c, xi: (c + clip_gradient(xi), c), np.float64(0), x)[0]

    with pytest.raises(gc.AutodiffError, match=r"in a body of node 'scan'"):
        gc.tangents(gc.trace(loop, spec), wrt=["x"])
    # off the differentiated path it is no obstacle
    g = gc.trace(lambda x, y: (clip_gradient(y), x * 2.0), spec, spec)
    tg = gc.tangents(g, wrt=["x", "y"], outputs=["out_1"])
    np.testing.assert_array_equal(tg(np.ones(2), np.ones(2), np.ones(2), np.ones(2))[2], [2.0, 2.0])


def test_a_user_backward_of_zeros_is_transposed_others_refused() -> None:
    """Zero is linear in the cotangent, so a backward giving only fills of zeros (as
    gc.stop_gradient's) takes forward mode; one that reads the cotangent stays refused."""

    @gc.custom_vjp
    def held(x):
        return x * 1.0

    held.defvjp(lambda x: (x * 1.0, ()), lambda res, ct: (gc.zeros_like(ct),))
    spec = gc.TensorSpec((2,), "float64")
    tg = gc.tangents(gc.trace(lambda x: held(x) * x, spec), wrt=["x"])
    x, t = np.array([3.0, -2.0]), np.array([1.0, 0.5])
    np.testing.assert_array_equal(tg(x, t)[1], x * t)  # held(x) is a constant to d/dx
    for ct_use in (lambda ct: ct * 0.0, lambda ct: gc.full_like(ct, 1.0)):
        other = gc.custom_vjp(lambda x: x * 1.0)
        other.defvjp(lambda x: (x * 1.0, ()), lambda res, ct, use=ct_use: (use(ct),))
        g = gc.trace(lambda x, f=other: f(x) * x, spec)
        with pytest.raises(gc.AutodiffError, match="user-defined backward"):
            gc.tangents(g, wrt=["x"])


def _damped(x, a, limit=1.0):
    """A while_loop whose trip count depends on the values: an int counter, a float
    carry, a captured float constant `a` (a body constant with a tangent)."""

    def body(c):
        i, v = c
        return i + 1, gc.sin(v) * a + v * 0.5

    more = lambda c: gc.logical_or(c[0] < 3, gc.sum(c[1] * c[1]) > limit)  # noqa: E731
    return gc.while_loop(more, body, (0, x))[1]


def _damped_np(x: np.ndarray, a: np.ndarray, limit: float = 1.0) -> np.ndarray:
    i, v = 0, x
    while i < 3 or np.sum(v * v) > limit:
        i, v = i + 1, np.sin(v) * a + v * 0.5
    return v


def test_a_while_loop_gets_a_tangent_loop_matching_finite_differences() -> None:
    """Node by node: the while_loop becomes one loop carrying the tangent of its float
    carry; the counter (int) has none; the captured `a` is a constant of the new body
    with its tangent beside it. Checked along each input and both at once."""
    x, a = np.array([0.3, -1.2, 2.0]), np.array(0.5)
    g = gc.trace(_damped, x, a)
    tg = gc.tangents(g, wrt=["x", "a"])
    assert [p.name for p in tg.inputs] == ["x", "a", "tan_x", "tan_a"]
    assert [n.op for n in tg.op_nodes].count("while_loop") == 1
    loop = next(n for n in tg.op_nodes if n.op == "while_loop")
    assert loop.attrs["num_carry"] == 3  # the counter, the carry, its tangent
    rng = np.random.default_rng(0)
    for tx, ta in [(np.ones(3), np.array(0.0)), (np.zeros(3), np.array(1.0))]:
        tx, ta = tx * rng.uniform(0.5, 1.5, 3), ta * 1.3
        value, tangent = tg(x, a, tx, ta)
        np.testing.assert_allclose(value, _damped_np(x, a), rtol=1e-12)
        eps = 1e-6
        want = (_damped_np(x + eps * tx, a + eps * ta) - _damped_np(x - eps * tx, a - eps * ta)) / (
            2 * eps
        )
        np.testing.assert_allclose(tangent, want, rtol=1e-6, atol=1e-8)
    # compiled as the reference runs it: bit for bit on numpy, on native each inexact op
    # (in the loop's body too) within its declared bound (tests/differential.py)
    check_levels(tg, [{"x": x, "a": a, "tan_x": np.ones(3), "tan_a": np.array(0.5)}], levels=(2,))


def test_nested_while_loops_and_ops_around_them() -> None:
    """A while_loop in a while_loop's body (the body's tangent graph is built the same
    way), with ops before and after the loop on the differentiated path."""

    def f(x):
        def outer(c):
            j, v = c
            inner = gc.while_loop(
                lambda d: d[0] < 2, lambda d: (d[0] + 1, gc.tanh(d[1]) * 1.1), (0, v)
            )
            return j + 1, inner[1] + 0.1 * v

        return gc.exp(gc.while_loop(lambda c: c[0] < 3, outer, (0, x * 2.0))[1]).sum()

    def f_np(x):
        v = x * 2.0
        for _ in range(3):
            w = v
            for _ in range(2):
                w = np.tanh(w) * 1.1
            v = w + 0.1 * v
        return np.exp(v).sum()

    x = np.array([0.2, -0.4])
    tg = gc.tangents(gc.trace(f, x), wrt=["x"])
    for t in np.eye(2):
        eps = 1e-6
        want = (f_np(x + eps * t) - f_np(x - eps * t)) / (2 * eps)
        np.testing.assert_allclose(tg(x, t)[1], want, rtol=1e-6)


def test_jvp_and_jacfwd_through_a_while_loop_match_jax() -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def jax_f(x, a):
        def body(c):
            i, v = c
            return i + 1, jnp.sin(v) * a + v * 0.5

        cond = lambda c: (c[0] < 3) | (jnp.sum(c[1] * c[1]) > 1.0)  # noqa: E731
        return jax.lax.while_loop(cond, body, (0, x))[1]

    x, a = np.array([0.3, -1.2, 2.0]), np.array(0.5)
    tx, ta = np.array([1.0, -0.5, 0.25]), np.array(0.75)
    got = gc.jvp(_damped, (x, a), (tx, ta))
    with jax.enable_x64(True):  # float64 here only: other tests keep jax's defaults
        want = jax.jvp(jax_f, (x, a), (tx, ta))
        jacobian = np.asarray(jax.jacfwd(jax_f)(x, a))
    for g_, w in zip(got, want):
        np.testing.assert_allclose(g_, np.asarray(w), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(gc.jacfwd(_damped)(x, a), jacobian, rtol=1e-12, atol=1e-14)


def test_what_a_while_loop_still_refuses() -> None:
    """split_tangents cuts a primal part off, which the tangent loop has not (unless
    asked to rerun the loop: linearize does, as jax's); a while_loop in a scan's body
    has a tangent rule of its own since 4bcd904 (it was refused: 'derived from the
    VJP'), checked here against central differences."""
    spec = gc.TensorSpec((2,), "float64")
    with pytest.raises(gc.AutodiffError, match="linearize: .* while_loop .* gc.jvp"):
        split_tangents(gc.trace(lambda x: _damped(x, 0.5), spec), wrt=["x"])

    def scanned(x):
        def step(c, xi):
            halved = gc.while_loop(lambda v: gc.sum(v * v) > 1.0, lambda v: v / 2, c + xi)
            return halved, halved

        return gc.scan(step, x, gc.stack([x, x * 0.5]))[0]

    f = gc.trace(scanned, spec)
    x, t, eps = np.array([0.9, 0.3]), np.array([0.25, -1.0]), 1e-6
    _, tangent = gc.jvp(scanned, (x,), (t,))
    central = (f(x + eps * t) - f(x - eps * t)) / (2 * eps)
    np.testing.assert_allclose(tangent, central, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize(
    "wrt, outputs, message",
    [
        (["nope"], None, "wrt 'nope' is not a placeholder"),
        (["i"], None, "wrt placeholder 'i' has dtype int64"),
        ([], None, "non-empty list"),
        (["x", "x"], None, "names a placeholder twice"),
        (["x"], ["nope"], "has no output 'nope'"),
        (["x"], ["k"], "output 'k' has dtype int64"),
    ],
)
def test_errors_name_the_argument(wrt: list, outputs: list | None, message: str) -> None:
    g = gc.trace(
        lambda x, i: {"y": x * 2.0, "k": i + 1},
        gc.TensorSpec((2,), "float64"),
        gc.TensorSpec((2,), "int64"),
    )
    with pytest.raises(gc.AutodiffError, match=message):
        gc.tangents(g, wrt=wrt, outputs=outputs)


@settings(max_examples=draws(60), deadline=None, derandomize=True)
@given(random_graphs(min_ops=3, max_ops=12, symbolic=True), st.integers(0, 2**16))
def test_jvp_against_the_vjp_on_random_graphs(g: gc.Graph, seed: int) -> None:
    """<u, J t> from the forward-mode graph equals <J^T u, t> from gradients."""
    wrt = [p.name for p in g.inputs]
    tg = gc.tangents(g, wrt=wrt)
    vjp = gc.gradients(g, wrt=wrt, seeds=True)
    feeds = random_feeds(g, seed)
    rng = np.random.default_rng(seed + 1)
    tans = {p.name: rng.uniform(-1, 1, feeds[p.name].shape) for p in g.inputs}
    outs = tg(*feeds.values(), *tans.values())
    n = len(g.outputs)
    ct = [rng.uniform(-1, 1, np.shape(v)) for v in outs[:n]]
    grads = vjp(*feeds.values(), *ct)[n:]
    forward = sum(np.sum(u * jt) for u, jt in zip(ct, outs[n:]))
    backward = sum(np.sum(gx * t) for gx, t in zip(grads, tans.values()))
    assert np.isclose(forward, backward, rtol=1e-9, atol=1e-9), str(g)


def test_split_tangents_into_a_primal_and_a_linear_graph() -> None:
    g = gc.trace(lambda x: gc.exp(x) * 2.0, gc.TensorSpec((2,), "float64"))
    primal, linear, _ = split_tangents(g, wrt=["x"])
    assert str(primal) == (
        "graph lambda_primal(%x: f64[2]) {\n"
        "  %exp: f64[2] = exp(%x)\n"
        "  %const: f64[] = constant(value=2.0)\n"
        "  %mul: f64[2] = mul(%exp, %const)\n"
        "  output %out = %mul\n"
        "  output %saved_exp = %exp\n"
        "}"
    )
    assert str(linear) == (
        "graph lambda_linear(%exp: f64[2], %tan_x: f64[2]) {\n"
        "  %const: f64[] = constant(value=2.0)\n"
        "  %mul_3: f64[2] = mul(%tan_x, %exp)\n"
        "  %mul_4: f64[2] = mul(%mul_3, %const)\n"
        "  output %tan_out = %mul_4\n"
        "}"
    )


def test_split_tangents_through_scan_and_cond_agrees_with_tangents() -> None:
    def f(x, w):
        def step(c, xi):
            c = gc.tanh(c * w + xi)
            return c, c * c

        c, ys = gc.scan(step, x[0], x)
        return gc.cond(gc.sum(c) > 0, lambda a: a * 2.0, gc.exp, ys), gc.argmax(c)

    g = gc.trace(f, gc.TensorSpec((5, 3), "float64"), gc.TensorSpec((3,), "float64"))
    primal, linear, fj = split_tangents(g, wrt=["x", "w"])
    gc.verify(primal)
    gc.verify(linear)
    rng = np.random.default_rng(2)
    x, w, tx, tw = (rng.uniform(-1, 1, s) for s in ((5, 3), (3,), (5, 3), (3,)))
    results = primal(x, w)
    assert [p.name for p in linear.inputs][-2:] == ["tan_x", "tan_w"]
    np.testing.assert_array_equal(linear(*results[2:], tx, tw), fj.graph(x, w, tx, tw)[2])


@settings(max_examples=draws(100), deadline=None, derandomize=True)
@given(edge_graphs(min_ops=3, max_ops=14, float_input=True), st.integers(0, 2**16))
def test_tangents_of_edge_graphs(g: gc.Graph, seed: int) -> None:
    """Any dtype, 0-d and empty shapes, symbolic dims, nan and inf: the forward-mode graph
    verifies, runs wherever g runs, and agrees with the VJP where both are finite (and
    not so large that float32 rounding decides them)."""
    # is_float, as gc.tangents asks: np.floating misses bfloat16, and its outputs' tangents
    # were then paired with the wrong cotangents
    wrt = [p.name for p in g.inputs if is_float(p.type.dtype)]
    outputs = [o for o in g.outputs if is_float(o.type.dtype)]
    if not outputs:
        return
    # float16 and bfloat16 round each product and sum at their own precision
    floats = [v.type.dtype for v in [*outputs, *g.inputs] if is_float(v.type.dtype)]
    tolerance = max(1e-3, 10 * max(float(finfo(d).eps) for d in floats))
    feeds = edge_feeds(g, seed)
    try:
        with np.errstate(all="ignore"):
            g(**feeds)
    except gc.GraphcError:
        return  # the data is out of the ops' domain (an index, an integer division by 0)
    tg = gc.tangents(g, wrt=wrt)
    gc.verify(tg)
    rng = np.random.default_rng(seed)
    tans = [rng.uniform(-1, 1, np.shape(feeds[n])).astype(g.node(n).type.dtype) for n in wrt]
    n = len(g.outputs)
    with np.errstate(all="ignore"):
        results = tg(*[feeds[p.name] for p in g.inputs], *tans)
        cts = [rng.uniform(-1, 1, np.shape(results[g.outputs.index(o)])) for o in outputs]
        cts = [ct.astype(o.type.dtype) for ct, o in zip(cts, outputs)]
        vjp = gc.gradients(g, wrt=wrt, outputs=[o.name for o in outputs], seeds=True)
        grads = vjp(*[feeds[p.name] for p in g.inputs], *cts)[n:]
        forward = sum(np.sum(np.float64(1) * u * jt) for u, jt in zip(cts, results[n:]))
        backward = sum(np.sum(np.float64(1) * gx * t) for gx, t in zip(grads, tans))
    if np.isfinite(forward) and np.isfinite(backward) and max(abs(forward), abs(backward)) < 1e4:
        assert np.isclose(forward, backward, rtol=tolerance, atol=tolerance), str(g)


GRAD_CASES = [
    case
    for case in [*all_cases(), *BUILDER_CASES]
    if case.float_dtype == "float64" and case.has_grad
]


def _bodies(op: str) -> tuple[str, ...]:
    try:
        return get_op(op).bodies
    except gc.UnknownOpError:  # a builder over primitives (BUILDER_CASES)
        return ()


@pytest.mark.parametrize("case", GRAD_CASES, ids=lambda case: case.id)
def test_every_op_with_a_gradient_has_tangents(case: OpCase) -> None:
    """Forward mode needs no rule of its own: for each op with a VJP, <u, J t> from the
    forward-mode graph equals <J^T u, t> from gradients."""
    g = build_graph(case)
    out = g.outputs[0]
    if not np.issubdtype(out.type.dtype, np.floating):
        pytest.skip(f"{case.id}: an integer result has no tangent")
    wrt = [f"x{i}" for i, d in enumerate(case.differentiable) if d]
    if "backward" in _bodies(case.op):  # a user's backward: refused by name
        with pytest.raises(gc.AutodiffError, match="user-defined backward"):
            gc.tangents(g, wrt=wrt)
        return
    tg = gc.tangents(g, wrt=wrt)
    gc.verify(tg)
    xs = case.inputs(seed=1)
    rng = np.random.default_rng(3)
    tans = [rng.standard_normal(np.shape(xs[int(name[1:])])) for name in wrt]
    y, jt = tg(*xs, *tans)
    u = rng.standard_normal(np.shape(y)).astype(out.type.dtype)
    grads = gc.gradients(g, wrt=wrt, seeds=True)(*xs, u)[1:]
    backward = sum(np.sum(gx * t) for gx, t in zip(grads, tans))
    tol = 1e-8 if out.type.dtype == np.float64 else 1e-4  # a cast to float32 rounds
    assert np.isclose(np.sum(u * jt), backward, rtol=tol, atol=tol), str(tg)
