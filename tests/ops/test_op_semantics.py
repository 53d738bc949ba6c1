"""Graph building through Symbols, symbolic dims, and the delicate cases of single ops."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphc as gc
import graphc.eager as ge
from graphc.ir.registry import get_op
from tests.budget import draws, sample
from tests.op_cases import BUILDER_CASES, OpCase, all_cases, build_graph
from tests.ops.op_grads import backward_graph, forward_values, pullback

CASES = sample(all_cases())
# ops whose type rule must accept symbolic dims wherever the concrete case has sizes > 1
SYMBOLIC_OK = {"sum", "mean", "max", "min", "argmax", "logsumexp", "count", "transpose"}
SYMBOLIC_OK |= {
    "matmul",
    "softmax",
    "log_softmax",
    "one_hot",
    "take",
    "constant",
    "prod",
    "contract_rows",
}


@pytest.mark.parametrize("case", sample(BUILDER_CASES), ids=lambda c: c.id)
def test_builder_matches_numpy(case: OpCase) -> None:
    xs = case.inputs(seed=2)
    got, want = np.asarray(case.build(*xs)), np.asarray(case.reference(*xs))
    assert got.shape == want.shape and got.dtype == want.dtype
    rtol, atol = case.tolerance
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("case", CASES + sample(BUILDER_CASES), ids=lambda c: c.id)
def test_graph_runs_like_numpy(case: OpCase) -> None:
    g = build_graph(case)
    xs = case.inputs(seed=1)
    (got,) = gc.run(g, {p.name: x for p, x in zip(g.inputs, xs)})
    with np.errstate(all="ignore"):
        want = np.asarray(case.reference(*xs))
    assert g.outputs[0].type == gc.TensorType.of(want)
    rtol, atol = case.tolerance
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_symbolic_dims_agree_with_concrete_ones(case: OpCase) -> None:
    # every size > 1 becomes a symbol named after it, so equal sizes stay equal
    xs = case.inputs(0)
    shapes = [tuple(f"N{d}" if d > 1 else d for d in x.shape) for x in xs]
    bindings = {f"N{d}": d for x in xs for d in x.shape if d > 1}
    concrete = build_graph(case).outputs[0].type
    required = get_op(case.op).elementwise or case.op in SYMBOLIC_OK
    try:
        symbolic = build_graph(case, shapes).outputs[0].type
    except gc.ShapeError as exc:
        assert case.op in str(exc) or "getitem" in str(exc), f"error does not name the op: {exc}"
        if required:
            raise
        pytest.skip(f"{case.op} needs concrete sizes here: {exc}")
    assert symbolic.bind(bindings) == concrete


@pytest.mark.parametrize("op", ["add", "mul", "maximum", "pow", "lt", "where"])
def test_symbolic_broadcasting(op: str) -> None:
    fn = getattr(gc, op)
    g = gc.Graph(op)
    with g:
        x = gc.placeholder("x", shape=("B", 1, 3))
        y = gc.placeholder("y", shape=(1, 4, 1))
        c = gc.placeholder("c", shape=("B", 1, 1), dtype="bool")
        call = (lambda a, b: fn(c, a, b)) if op == "where" else fn
        assert call(x, y).shape == ("B", 4, 3)
        assert call(x, gc.placeholder("z", shape=("B", 1, 1))).shape == ("B", 1, 3)
        with pytest.raises(gc.ShapeError, match=rf"^{op}: .*'B' against 3"):
            call(x, gc.placeholder("w", shape=(3, 1, 1)))
        with pytest.raises(gc.ShapeError, match=rf"^{op}: .*'B' against 'C'"):
            call(x, gc.placeholder("v", shape=("C", 1, 1)))


def test_reshape_resolves_minus_one_against_symbolic_dims() -> None:
    g = gc.Graph("reshape")
    with g:
        x = gc.placeholder("x", shape=("B", 3, 4))
        assert gc.reshape(x, (-1, 12)).shape == ("B", 12)
        assert gc.reshape(x, ("B", -1)).shape == ("B", 12)
        assert gc.reshape(x, (-1, 3, 4)).shape == ("B", 3, 4)
        with pytest.raises(gc.ShapeError, match="reshape: cannot infer -1"):
            gc.reshape(x, (-1,))
        with pytest.raises(gc.ShapeError, match="reshape: cannot reshape"):
            gc.reshape(x, ("C", 12))
        gc.output(gc.reshape(x, (-1, 12)), name="y")
    (y,) = gc.run(g, {"x": np.arange(24, dtype=np.float32).reshape(2, 3, 4)})
    np.testing.assert_array_equal(y, np.arange(24, dtype=np.float32).reshape(2, 12))


def pull(build: object, xs: list[np.ndarray], ct: np.ndarray) -> list[np.ndarray]:
    """Gradients of sum(ct * build(xs)) for every input, by the ops' VJP rules."""
    bwd = backward_graph(build, xs, range(len(xs)))
    feeds = {**{f"x{i}": x for i, x in enumerate(xs)}, "ct": ct}
    return gc.run(bwd, feeds)


def test_max_and_min_share_the_gradient_among_ties() -> None:
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
    ct = np.array([1.0, 6.0])
    (gx,) = pull(lambda v: gc.max(v, axis=1), [x], ct)
    np.testing.assert_allclose(gx, [[0, 0.5, 0.5], [2, 2, 2]])
    (gx,) = pull(lambda v: gc.min(-v, axis=1, keepdims=True), [x], ct[:, None])
    np.testing.assert_allclose(gx, [[0, -0.5, -0.5], [-2, -2, -2]])
    gx, gy = pull(gc.maximum, [np.array([1.0, 2.0, 5.0]), np.array([1.0, 3.0, 4.0])], np.ones(3))
    np.testing.assert_allclose(gx, [0.5, 0, 1])
    np.testing.assert_allclose(gy, [0.5, 1, 0])


def test_logsumexp_of_minus_inf_rows_is_minus_inf_with_zero_gradient() -> None:
    x = np.array([[-np.inf, -np.inf], [0.0, np.log(3.0)], [-np.inf, 1.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        value = gc.logsumexp(x, axis=1)
        (gx,) = pull(lambda v: gc.logsumexp(v, axis=1), [x], np.ones(3))
    np.testing.assert_allclose(value, [-np.inf, np.log(4.0), 1.0])
    np.testing.assert_allclose(gx, [[0, 0], [0.25, 0.75], [0, 1]])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax_is_stable_on_large_logits(dtype: str) -> None:
    x = np.array([[1e4, 1e4 + 1, 1e4 - 1], [-1e4, -1e4, 3e4]], dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = gc.softmax(x)
        logp = gc.log_softmax(x)
        grads = pull(gc.log_softmax, [x], np.ones_like(x)) + pull(gc.softmax, [x], np.ones_like(x))
    shifted = (x - x.max(axis=1, keepdims=True)).astype(np.float64)
    want = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(logp, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(p, np.exp(want), rtol=1e-6, atol=1e-6)
    assert all(np.all(np.isfinite(g)) for g in grads)


def test_sum_to_undoes_broadcasting_in_every_position() -> None:
    x = np.random.default_rng(0).standard_normal((2, 3, 4))
    for shape in [(2, 3, 4), (3, 4), (1, 4), (3, 1), (2, 1, 4), (1, 1, 1), ()]:
        got = gc.sum_to(x, shape)
        axes = tuple(range(3 - len(shape))) + tuple(
            3 - len(shape) + i for i, d in enumerate(shape) if d == 1
        )
        want = x.sum(axis=axes, keepdims=True).reshape(shape)
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_sum_to_keeps_the_dtype_of_its_type_rule() -> None:
    for dtype in ("int32", "bool"):
        g = gc.trace(lambda x: gc.sum_to(x, (3,)), gc.TensorSpec((2, 3), dtype))
        got = g(np.ones((2, 3), dtype))
        assert got.dtype == g.outputs[0].type.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, np.ones((2, 3), dtype).sum(axis=0).astype(dtype))


SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, -2.0, 1e-45, -3e38]


@settings(max_examples=draws(200), deadline=None)
@given(
    dtype=st.sampled_from(["float16", "float32", "float64"]),
    values=st.lists(st.sampled_from(SPECIAL), min_size=6, max_size=6),
    cond=st.lists(st.booleans(), min_size=6, max_size=6),
    zero_side=st.sampled_from(["x", "y"]),
    zero=st.sampled_from([0, 0.0, False, "array"]),
    broadcast_cond=st.booleans(),
    in_place=st.booleans(),
)
def test_where_into_a_float_buffer_keeps_every_bit_of_np_where(
    dtype: str,
    values: list,
    cond: list,
    zero_side: str,
    zero: object,
    broadcast_cond: bool,
    in_place: bool,
) -> None:
    # a zero branch takes the kernel's bit-mask path: it must agree with np.where bit for
    # bit, nan, inf and -0.0 included, also when it writes over its own input
    with np.errstate(over="ignore"):
        arr = np.array(values, dtype).reshape(2, 3)
    c = np.array(cond).reshape(2, 3)[:1] if broadcast_cond else np.array(cond).reshape(2, 3)
    z = np.zeros((), dtype) if zero == "array" else zero
    x, y = (z, arr) if zero_side == "x" else (arr, z)
    want = np.where(c, x, y).astype(dtype)
    before = arr.copy()
    out = arr if in_place else np.full((2, 3), 7, dtype)
    got = get_op("where").kernel(c, x, y, out=out)
    assert got is out
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))
    if not in_place:
        np.testing.assert_array_equal(arr.view(f"u{arr.itemsize}"), before.view(f"u{arr.itemsize}"))
        # and without out= (eager): np.where's own dtype and bits, in a fresh array
        fresh, natural = get_op("where").kernel(c, x, y), np.where(c, x, y)
        assert fresh.dtype == natural.dtype and not np.shares_memory(fresh, arr)
        unsigned = f"u{fresh.itemsize}"
        np.testing.assert_array_equal(fresh.view(unsigned), natural.view(unsigned))


def test_where_with_a_minus_zero_or_nonzero_branch_is_np_where() -> None:
    c = np.array([True, False, True])
    x = np.array([1.0, -2.0, np.nan], np.float32)
    for other in (-0.0, np.float32(-0.0), 3, np.ones(3, np.float32)):
        for args in ((c, x, other), (c, other, x)):
            out = np.empty(3, np.float32)
            get_op("where").kernel(*args, out=out)
            want = np.where(*args).astype(np.float32)
            np.testing.assert_array_equal(out.view("u4"), want.view("u4"))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "bool"])
def test_mean_kernel_is_np_mean_bit_for_bit(dtype: str) -> None:
    kernel = get_op("mean").kernel
    x = (np.random.default_rng(0).standard_normal((5, 7, 3)) * 1e3).astype(dtype)
    for axis, keepdims in [(None, False), ((0, 2), True), ((1,), False), (None, True)]:
        want = np.asarray(np.mean(x, axis=axis, keepdims=keepdims))
        got = kernel(x, axis=axis, keepdims=keepdims)
        into = kernel(x, np.empty_like(want), axis=axis, keepdims=keepdims)
        for result in (got, into):
            assert result.dtype == want.dtype and result.shape == want.shape
            if dtype != "float16" or result is got:  # numpy's float16 mean rounds otherwise
                np.testing.assert_array_equal(result, want)  # with out= (sums into float16)


def test_first_order_gradients_leave_inputs_alone() -> None:
    for case in CASES:
        if not case.has_grad or case.float_dtype != "float64":
            continue
        g = build_graph(case)
        xs = case.inputs(7)
        copies = [x.copy() for x in xs]
        values = forward_values(g, {p.name: x for p, x in zip(g.inputs, xs)})
        out = g.outputs[0].inputs[0]
        pullback(g.nodes, values, {out: np.ones(out.type.shape, out.type.dtype)}, g.inputs)
        for x, before in zip(xs, copies):
            np.testing.assert_array_equal(x, before, err_msg=case.id)


def test_updating_a_graph_value_in_place_explains_that_it_is_immutable() -> None:
    def eager_style(x):
        h = x * 2
        h.add_(1)  # fine on an eager tensor, impossible on a graph value
        return h

    with pytest.raises(gc.TracingError, match=r"\.add_\(\) on graph value 'mul'.*immutable"):
        gc.trace(eager_style, gc.TensorSpec((2,)))
    with gc.Graph("setitem"):
        x = gc.placeholder("x", shape=(2,))
        with pytest.raises(gc.TracingError, match="item assignment on graph value 'x'.*gc.where"):
            x[0] = 1.0
        with pytest.raises(AttributeError, match="no attribute 'nonsense'"):
            x.nonsense  # noqa: B018 - other missing attributes stay AttributeErrors


@pytest.mark.parametrize(
    ("dtype", "bound"),
    [
        ("int16", np.float32(0.5)),  # numpy: float32, where a Python 0.5 gives float64
        ("int16", np.int64(2)),
        ("uint8", np.int8(-1)),  # int16: holds both
        ("int16", np.array(2, np.int8)),  # no promotion: stays int16
        ("float32", np.float64(0.1)),  # float64, the bound not rounded to float32
    ],
)
def test_clip_by_a_typed_scalar_promotes_as_numpy(dtype: str, bound: np.generic) -> None:
    """A numpy scalar or 0-d array bound has a dtype of its own (NEP 50), unlike a Python
    number: np.clip's result takes it into account. clip by one on arrays, tensors and
    traced graphs gives np.clip's dtype and bits, and the gradient reaches x (it used to
    treat the bound as a Python number: int16 stayed int16 by np.float32(0.5))."""
    x = np.array([-3, 0, 1, 2, 7]).astype(dtype)  # -3 wraps to 253 for uint8
    for low, high in ((bound, None), (None, bound), (bound, 5)):
        expected = np.clip(x, low, high)
        for got in (
            gc.clip(x, low, high),
            gc.clip(ge.tensor(x), low, high).numpy(),
            gc.compile(
                gc.trace(
                    lambda v, lo=low, hi=high: gc.clip(v, lo, hi), gc.TensorSpec(x.shape, dtype)
                )
            )(x),
        ):
            assert got.dtype == expected.dtype, (low, high, got.dtype, expected.dtype)
            np.testing.assert_array_equal(got, expected)
    if x.dtype.kind == "f":  # through the cast to float64: the gradient is x's dtype
        t = ge.tensor(x, requires_grad=True)
        gc.clip(t, bound, None).sum().backward()
        np.testing.assert_array_equal(t.grad.numpy(), (x >= bound).astype(x.dtype))


def test_logical_operators_on_graph_values_are_numpys() -> None:
    """Graph values lacked &, |, ^ and ~ (eager tensors had them): a while_loop's
    `(s < n) & (s < 10)` was a raw TypeError (the JAX hunt). They are shared by both
    kinds now (ops/operators.py): bools logically, ~ of an integer bitwise, and & | ^
    of integers refused by name, as eagerly."""
    loop = gc.jit(lambda n: gc.while_loop(lambda s: (s < n) & (s < 10), lambda s: s + 1, 0))
    assert int(loop(np.int64(3))) == 3 and int(loop(np.int64(30))) == 10
    x = np.array([-2.0, -0.5, 0.0, 1.0, np.nan])
    masks = gc.jit(lambda v: ((~(v > 0)) | (v < -1) ^ (v == 0), True & (v > 0) ^ False))
    for got, want in zip(masks(x), ((~(x > 0)) | (x < -1) ^ (x == 0), True & (x > 0) ^ False)):
        assert got.dtype == want.dtype and np.array_equal(got, want)
    for dtype in ("int8", "int32", "uint8", "uint64"):
        i = np.array([0, 5, 127], dtype)
        got = gc.jit(lambda v: ~v)(i)
        assert got.dtype == i.dtype and np.array_equal(got, ~i), dtype
    with pytest.raises(gc.DTypeError, match="integers have no bitwise ops"):
        gc.jit(lambda v: v & v)(np.array([1, 2]))
    with pytest.raises(gc.DTypeError, match="invert"):
        gc.jit(lambda v: ~v)(x)


GETITEM_MIXED = [
    (lambda i: (i, 0), np.int64(2)),  # the JAX hunt's: refused, an index array beside an int
    (lambda i: (i, 0, slice(1, 4)), np.int64(-1)),
    (lambda i: (0, slice(None), i), np.array([[1, 2], [5, 0]])),  # apart: its dims first
    (lambda i: (slice(1, 3), i, slice(None, None, 2)), np.array([0, 4, 4])),
    (lambda i: (i, slice(None), 0), np.array([[1, 2], [3, 0]])),
    (lambda i: (slice(None), 2, i), np.array([1, 5])),
    (lambda i: (-1, slice(1, None), i), np.int64(3)),
]


@pytest.mark.parametrize("case", range(len(GETITEM_MIXED)))
def test_an_index_array_beside_integers_and_slices_is_numpys(case: int) -> None:
    """x[i, 0] with i a graph value (a loop counter) or an index array, beside integers
    and slices: numpy's result, also where numpy puts the array's dims first (an integer
    apart from it is an index of the same kind), and numpy's gradient (np.add.at)."""
    index, i = GETITEM_MIXED[case]
    a = np.random.default_rng(case).normal(size=(4, 5, 6))
    want = a[index(i)]
    got = gc.jit(lambda x, j: x[index(j)])(a, i)
    assert got.shape == want.shape and np.array_equal(got, want)
    weights = np.random.default_rng(9).normal(size=want.shape)
    grad = gc.jit(gc.grad(lambda x, j: gc.sum(x[index(j)] * weights)))(a, i)
    expected = np.zeros_like(a)
    np.add.at(expected, index(i), weights)
    np.testing.assert_allclose(grad, expected, rtol=1e-12, atol=0)


def test_add_with_alpha_keeps_the_dtype_of_a_graph_value() -> None:
    """x.add(1, alpha=2) on a float32 graph value came back float64: the op made alpha *
    other an int64 array, not a weak Python number (the eager hunt). As torch's."""
    torch = pytest.importorskip("torch")
    x = np.array([1.5, -2.0], np.float32)
    got = gc.jit(lambda v: (v.add(1, alpha=2), v.sub(1, alpha=2.5), v.add(v, alpha=3)))(x)
    t = torch.tensor(x)
    for a, b in zip(got, (t.add(1, alpha=2), t.sub(1, alpha=2.5), t.add(t, alpha=3))):
        assert a.dtype == np.float32 and np.array_equal(a, b.numpy())
