"""torch's composite methods (roll, lerp, addcmul, addcdiv, trace, diff, aminmax, frac,
count_nonzero, unflatten, mT, tensor_split, type_as, scatter, scatter_add, index_add,
index_fill, index_copy) against torch: the same call on eager tensors and traced and
compiled gives torch's values and dtypes, and in float64 torch's gradients, which also
match central differences. Edge cases: negative dims, shifts past the size, empty and
0-d values, integer dtypes, and the errors of a bad index or dim.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from tests.finite_differences import numeric_grad

torch = pytest.importorskip("torch")

_rng = np.random.default_rng(7)
X = _rng.standard_normal((2, 3))
Y = _rng.standard_normal((2, 3))
Z = _rng.uniform(0.5, 2.0, (2, 3)) * np.sign(_rng.standard_normal((2, 3)))  # no zeros
SQUARE = _rng.standard_normal((3, 3))
CUBE = _rng.standard_normal((2, 3, 4))
ROW = _rng.standard_normal((1, 3))
INTS = np.array([[3, 0, -2], [0, 5, 5]], np.int32)


class Case:
    """`fn` called alike on torch tensors, eager tensors and graph values; `grads` are
    the positions of the inputs to differentiate (float64)."""

    def __init__(self, fn: Callable[..., Any], inputs: tuple, grads: tuple = ()) -> None:
        self.fn, self.inputs, self.grads = fn, inputs, grads


CASES: dict[str, Case] = {
    "roll/past_the_size": Case(lambda x: x.roll(4, 1), (X,), (0,)),
    "roll/flat_negative": Case(lambda x: x.roll(-7), (X,), (0,)),
    "roll/two_dims": Case(lambda x: x.roll((1, -1), (0, -1)), (CUBE,), (0,)),
    "roll/whole_turns": Case(lambda x: x.roll(-6, 1), (X,), (0,)),
    "roll/empty": Case(lambda x: x.roll(2, 0), (np.zeros((0, 3)),)),
    "roll/0d": Case(lambda x: x.roll(1), (np.array(2.5),), (0,)),
    "roll/ints": Case(lambda x: x.roll(1), (INTS,)),
    "lerp": Case(lambda x, y: x.lerp(y, 0.3), (X, Y), (0, 1)),
    "lerp/tensor_weight": Case(lambda x, y, w: x.lerp(y, w), (X, Y, ROW), (0, 1, 2)),
    "addcmul": Case(lambda x, a, b: x.addcmul(a, b, value=0.5), (X, Y, ROW), (0, 1, 2)),
    "addcmul/ints": Case(lambda x: x.addcmul(x, x, value=2), (INTS,)),
    "addcdiv": Case(lambda x, a, b: x.addcdiv(a, b, value=-2), (X, Y, Z), (0, 1, 2)),
    "trace": Case(lambda x: x.trace(), (SQUARE,), (0,)),
    "trace/wide": Case(lambda x: x.trace(), (X,), (0,)),
    "trace/ints": Case(lambda x: x.trace(), (INTS,)),
    "trace/empty": Case(lambda x: x.trace(), (np.zeros((0, 3)),)),
    "diff/twice": Case(lambda x: x.diff(2), (CUBE,), (0,)),
    "diff/prepend_append": Case(
        lambda x, p, a: x.diff(1, 0, prepend=p, append=a), (X, ROW, ROW * 2), (0, 1, 2)
    ),
    "diff/past_the_size": Case(lambda x: x.diff(5), (X,)),
    "diff/none": Case(lambda x: x.diff(0), (X,), (0,)),
    "diff/ints": Case(lambda x: x.diff(dim=0), (INTS,)),
    "diff/bools": Case(lambda x: (x > 0).diff(), (INTS,)),
    "aminmax": Case(lambda x: x.aminmax(), (X,), (0,)),
    "aminmax/dim": Case(lambda x: x.aminmax(dim=-1, keepdim=True), (CUBE,), (0,)),
    "aminmax/0d": Case(lambda x: x.aminmax(), (np.array(1.5),), (0,)),
    "aminmax/ints": Case(lambda x: x.aminmax(dim=0), (INTS,)),
    "frac": Case(lambda x: (x * 7).frac(), (X,), (0,)),
    "count_nonzero": Case(lambda x: x.count_nonzero(), (INTS,)),
    "count_nonzero/dims": Case(lambda x: x.count_nonzero(dim=(0, -1)), (CUBE.round(),)),
    "unflatten": Case(lambda x: x.unflatten(-1, (2, -1)), (CUBE,), (0,)),
    "mT": Case(lambda x: x.mT, (CUBE,), (0,)),
    "tensor_split/sections": Case(lambda x: x.tensor_split(4, 1), (X,), (0,)),
    "tensor_split/indices": Case(lambda x: x.tensor_split([2, 1, -1], 1), (X,), (0,)),
    "type_as/int": Case(lambda x, y: x.type_as(y), (X, INTS)),
    "type_as/float": Case(lambda y, x: y.type_as(x) * x, (INTS, X), (1,)),
    "scatter": Case(
        lambda x, i, s: x.scatter(1, i, s), (X, np.array([[2, 0], [1, 2]]), Y[:, :2]), (0, 2)
    ),
    # a src larger than index is read over index's shape (torch's backward fails there)
    "scatter/larger_src": Case(
        lambda x, i, s: x.scatter(0, i, s), (X, np.array([[1, 0]]), CUBE[0])
    ),
    "scatter/value": Case(lambda x, i: x.scatter(-1, i, 0.5), (X, np.array([[2], [0]])), (0,)),
    "scatter/0d": Case(
        lambda x, i, s: x.scatter(0, i, s), (np.array(1.0), np.array(0), np.array(3.0)), (0, 2)
    ),
    "scatter/ints": Case(lambda x, i: x.scatter(0, i, 7), (INTS, np.array([[1, 0, 1]]))),
    "scatter_add": Case(
        lambda x, i, s: x.scatter_add(1, i, s), (X, np.array([[2, 2], [0, 2]]), Y[:, :2]), (0, 2)
    ),
    "index_add": Case(
        lambda x, i, s: x.index_add(0, i, s, alpha=2),
        (SQUARE, np.array([0, 2, 0, 2]), CUBE[:, :2, :3].reshape(4, 3)),
        (0, 2),
    ),
    "index_add/dim": Case(
        lambda x, i, s: x.index_add(-1, i, s), (X, np.array([1]), X[:, :1] * 3), (0, 2)
    ),
    "index_fill": Case(lambda x, i: x.index_fill(1, i, -1.5), (X, np.array([0, 2])), (0,)),
    "index_fill/negative": Case(lambda x, i: x.index_fill(1, i, 2.0), (X, np.array([-1])), (0,)),
    "index_fill/tensor": Case(
        lambda x, i, v: x.index_fill(0, i, v), (X, np.array([1]), np.array(4.0)), (0, 2)
    ),
    "index_fill/ints": Case(lambda x, i: x.index_fill(0, i, 2.7), (INTS, np.array([0]))),
    "index_fill/0d": Case(lambda x, i: x.index_fill(0, i, 3.0), (np.array(1.0), np.array([0]))),
    "index_copy": Case(
        lambda x, i, s: x.index_copy(1, i, s), (X, np.array([2, 0]), Y[:, :2]), (0, 2)
    ),
    "index_copy/0d": Case(
        lambda x, i, s: x.index_copy(0, i, s),
        (np.array(1.0), np.array([0]), np.array([2.0])),
        (0, 2),
    ),
    # torch's extra arguments, and methods graph values lacked
    "norm/p_dim": Case(lambda x: x.norm(3, dim=1, keepdim=True), (X,), (0,)),
    "norm/inf": Case(lambda x: x.norm(float("-inf"), 0), (X,), (0,)),
    "div/floor": Case(lambda x, y: x.div(y, rounding_mode="floor"), (X * 5, Z), (1,)),
    "div/trunc_ints": Case(lambda x: x.div(-2, rounding_mode="trunc"), (INTS,)),
    "sum/dtype": Case(lambda x: x.sum(1, dtype=torch.int32 if _torch(x) else np.int32), (INTS,)),
    "masked_fill/ints": Case(lambda x: x.masked_fill(x > 0, 2.5), (INTS,)),
    "softmax/dtype": Case(
        lambda x: x.float().softmax(0, torch.float64 if _torch(x) else np.float64), (X,)
    ),
    "exp2": Case(lambda x: x.exp2(), (X,), (0,)),
    "float_power": Case(lambda x, y: x.abs().float_power(y), (X, Y), (0, 1)),
    "logit": Case(lambda x: x.sigmoid().logit(), (X,), (0,)),
    "logit/eps": Case(lambda x: x.logit(eps=0.25), (X * 0.4 + 0.5,), (0,)),
    "xlogy": Case(lambda x, y: x.xlogy(y.abs()), (X, Y), (0, 1)),
    "xlogy/zero": Case(
        lambda x, y: x.xlogy(y), (np.array([0.0, 0.0, 2.0]), np.array([0.0, np.nan, 3.0]))
    ),
    "hypot": Case(lambda x, y: x.hypot(y), (X, Y), (0, 1)),
    "fmax": Case(lambda x, y: x.fmax(y), (X, Y), (0, 1)),
    "fmin/nan": Case(
        lambda x, y: x.fmin(y), (np.array([np.nan, 1.0, np.nan]), np.array([2.0, np.nan, np.nan]))
    ),
    "heaviside": Case(
        lambda x, v: x.heaviside(v), (np.array([-1.0, 0.0, 2.0]), np.array([0.5, 0.25, 0.0]))
    ),
    "isposinf": Case(lambda x: x.isposinf(), (np.array([np.inf, -np.inf, np.nan, 1.0]),)),
    "isneginf": Case(lambda x: x.isneginf(), (np.array([np.inf, -np.inf, np.nan, 1.0]),)),
    "sgn": Case(lambda x: x.sgn(), (X,), (0,)),
    "absolute": Case(lambda x: x.absolute(), (X,), (0,)),
    "positive": Case(lambda x: x.positive() * 2, (X,), (0,)),
    "dist": Case(lambda x, y: x.dist(y, 3), (X, Y), (0, 1)),
    "dist/inf": Case(lambda x, y: x.dist(y, float("inf")), (X, Y), (0, 1)),
    "kthvalue": Case(lambda x: x.kthvalue(2, 0), (SQUARE,), (0,)),
    "kthvalue/keepdim": Case(lambda x: x.kthvalue(4, -1, True), (CUBE,), (0,)),
    "median": Case(lambda x: x.median(), (SQUARE,), (0,)),
    "median/dim": Case(lambda x: x.median(-1, keepdim=True), (CUBE,), (0,)),
    "median/nan": Case(
        lambda x: x.median(1), (np.array([[3.0, np.nan, 1.0, np.nan], [2.0, 1.0, 4.0, 0.0]]),)
    ),
    "median/ints": Case(lambda x: x.median(0), (INTS,)),
    "median/0d": Case(lambda x: x.median(-1), (np.array(1.5),), (0,)),
    "median/empty": Case(lambda x: x.median(), (np.zeros((0, 2)),)),
    "nanmedian": Case(lambda x: x.nanmedian(), (np.array([[3.0, np.nan], [1.0, 2.0]]),), (0,)),
    "nanmedian/dim": Case(
        lambda x: x.nanmedian(-1, keepdim=True),
        (np.array([[3.0, np.nan, 1.0, 0.5], [np.nan, 2.0, np.nan, 1.0], [2.0, 1.0, 4.0, 0.0]]),),
        (0,),
    ),
    "cummax": Case(lambda x: x.cummax(1), (CUBE,), (0,)),
    "cummax/ties_nan": Case(
        lambda x: x.cummax(0), (np.array([1.0, 3.0, 3.0, 2.0, np.nan, 5.0, np.nan]),)
    ),
    "cummin": Case(lambda x: x.cummin(-1), (CUBE,), (0,)),
    "cummin/ints": Case(lambda x: x.cummin(0), (INTS,)),
    "sinc": Case(lambda x: x.sinc(), (np.array([0.0, 0.5, -1.5, 2.0]),), (0,)),
    "deg2rad": Case(lambda x: x.deg2rad(), (X * 90,), (0,)),
    "rad2deg": Case(lambda x: x.rad2deg(), (X,), (0,)),
    "diag_embed": Case(lambda x: x.diag_embed(), (X,), (0,)),
    "diag_embed/offset_dims": Case(lambda x: x.diag_embed(-2, 2, 0), (X,), (0,)),
    "diagflat": Case(lambda x: x.diagflat(1), (X,), (0,)),
    "narrow_copy": Case(lambda x: x.narrow_copy(-1, -3, 2), (CUBE,), (0,)),
    "msort": Case(lambda x: x.msort(), (SQUARE,), (0,)),
    "logcumsumexp": Case(lambda x: x.logcumsumexp(1), (CUBE * 300,), (0,)),
    "rot90": Case(lambda x: x.rot90(), (X,), (0,)),
    "rot90/twice": Case(lambda x: x.rot90(2, (2, 0)), (CUBE,), (0,)),
    "rot90/back": Case(lambda x: x.rot90(-1, (1, 2)), (CUBE,), (0,)),
    "unfold": Case(lambda x: x.unfold(-1, 2, 1), (CUBE,), (0,)),
    "unfold/step": Case(lambda x: x.unfold(2, 2, 3), (CUBE,), (0,)),
    "inner": Case(lambda x, y: x.inner(y), (X, CUBE[:, :, :3]), (0, 1)),
    "matrix_power": Case(lambda x: x.matrix_power(3), (SQUARE,), (0,)),
    "matrix_power/0": Case(lambda x: x.matrix_power(0), (CUBE[:, :3, :3],)),
    "sum_to_size": Case(lambda x: x.sum_to_size(1, 3, 1), (CUBE[:, :, :2],), (0,)),
    "addmm": Case(lambda b, x, y: b.addmm(x, y, beta=0.5, alpha=2), (ROW, X, SQUARE), (0, 1, 2)),
    "addmm/beta0": Case(
        lambda b, x, y: b.addmm(x, y, beta=0), (np.full(3, np.nan), X, SQUARE), (1, 2)
    ),
    "addmv": Case(lambda b, m, v: b.addmv(m, v, alpha=-1), (Y[0, :2], X, ROW[0]), (0, 1, 2)),
    "addr": Case(lambda b, v, w: b.addr(v, w, beta=3), (X, Y[:, 0], ROW[0]), (0, 1, 2)),
    "baddbmm": Case(
        lambda b, x, y: b.baddbmm(x, y, beta=2), (ROW.T, CUBE[:, :, :3], CUBE[:, :3, :1]), (0, 1, 2)
    ),
    "addbmm": Case(
        lambda b, x, y: b.addbmm(x, y, alpha=0.5),
        (SQUARE, CUBE[:, :, :3].transpose(0, 2, 1), CUBE[:, :, :3]),
        (0, 1, 2),
    ),
}


def _torch(x: Any) -> bool:
    return isinstance(x, torch.Tensor)


def _flat(value: Any) -> list:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _torch_run(case: Case) -> tuple[list[np.ndarray], list[np.ndarray]]:
    tensors = [
        torch.tensor(a, requires_grad=k in case.grads) if a.dtype == np.float64 else torch.tensor(a)
        for k, a in enumerate(case.inputs)
    ]
    outs = _flat(case.fn(*tensors))
    grads = []
    if case.grads:
        loss = sum((o * torch.tensor(w)).sum() for o, w in zip(outs, _weights(outs)))
        grads = [
            g.numpy(force=True) for g in torch.autograd.grad(loss, [tensors[k] for k in case.grads])
        ]
    return [o.detach().numpy() for o in outs], grads


def _weights(outs: list) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    return [rng.standard_normal(tuple(o.shape)) for o in outs]


def _eager_run(case: Case) -> tuple[list[np.ndarray], list[np.ndarray]]:
    tensors = [ge.tensor(a, requires_grad=k in case.grads) for k, a in enumerate(case.inputs)]
    outs = _flat(case.fn(*tensors))
    grads = []
    if case.grads:
        loss = sum((o * ge.tensor(w)).sum() for o, w in zip(outs, _weights(outs)))
        loss.backward()
        grads = [tensors[k].grad.numpy() for k in case.grads]
    return [o.detach().numpy() for o in outs], grads


def _loss_fn(case: Case, shapes: list[tuple]) -> Callable[..., Any]:
    weights = _weights([np.zeros(s) for s in shapes])

    def loss(*values: Any) -> Any:
        outs = _flat(case.fn(*values))
        return sum(gc.sum(o * w) for o, w in zip(outs, weights))

    return loss


def _compiled_run(case: Case) -> tuple[list[np.ndarray], list[np.ndarray]]:
    g = gc.trace(case.fn, *case.inputs)
    feeds = {p.name: a for p, a in zip(g.inputs, case.inputs)}
    outs = _flat(gc.compile(g)(**feeds))
    grads = []
    if case.grads:
        lg = gc.trace(_loss_fn(case, [o.shape for o in outs]), *case.inputs)
        names = [lg.inputs[k].name for k in case.grads]
        results = gc.compile(gc.gradients(lg, wrt=names))(
            **{p.name: a for p, a in zip(lg.inputs, case.inputs)}
        )
        grads = list(results[1:])
    return [np.asarray(o) for o in outs], grads


def _same(got: list[np.ndarray], want: list[np.ndarray], what: str) -> None:
    assert len(got) == len(want), what
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (what, g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12, err_msg=what)


@pytest.mark.quick_cases(len(CASES))  # each a few ms, each a different method or edge
@pytest.mark.parametrize("name", sorted(CASES))
def test_eager_and_compiled_give_torch_values_and_gradients(name: str) -> None:
    case = CASES[name]
    values, grads = _torch_run(case)
    for run in (_eager_run, _compiled_run):
        got_values, got_grads = run(case)
        _same(got_values, values, f"{run.__name__} values")
        _same(got_grads, grads, f"{run.__name__} gradients")


@pytest.mark.quick_cases(8)
@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c.grads))
def test_gradients_match_central_differences(name: str) -> None:
    case = CASES[name]
    outs, _ = _torch_run(case)
    loss = _loss_fn(case, [o.shape for o in outs])
    g = gc.trace(loss, *case.inputs)
    exe = gc.compile(g)

    def f(*arrays: np.ndarray) -> float:
        return float(exe(**{p.name: a for p, a in zip(g.inputs, arrays)}))

    _, grads = _compiled_run(case)
    for k, grad in zip(case.grads, grads):
        np.testing.assert_allclose(grad, numeric_grad(f, case.inputs, k), rtol=1e-6, atol=1e-7)


Z2 = np.zeros((2, 3))
ERRORS: dict[str, tuple] = {
    "scatter/index_range": (
        lambda x, i: x.scatter(1, i, 1.0), (Z2, np.array([[0], [3]])), gc.IndexRangeError,
        "scatter: index 3 in `index`",
    ),
    "index_add/index_range": (
        lambda x, i: x.index_add(1, i, x[:, :1]), (Z2, np.array([3])), gc.IndexRangeError,
        "index_add: index 3 in `index`",
    ),
    "index_copy/index_range": (
        lambda x, i: x.index_copy(1, i, x[:, :1]), (Z2, np.array([3])), gc.IndexRangeError,
        "index_copy: index 3 in `index`",
    ),
    "index_fill/index_range": (
        lambda x, i: x.index_fill(1, i, 1.0), (Z2, np.array([-4])), gc.IndexRangeError,
        "index_fill: index -4 in `index`",
    ),
    "scatter_add/index_range": (
        lambda x, i: x.scatter_add(0, i, x[:1]), (Z2, np.array([[2, 0, 0]])), gc.IndexRangeError,
        "scatter_add: index 2 in `index`",
    ),
    "roll/dim": (lambda x: x.roll(1, 2), (Z2,), gc.IndexRangeError, "roll: axis 2"),
    "roll/0d_dim": (lambda x: x.roll(1, 0), (np.array(1.0),), gc.IndexRangeError, "0-d"),
    "roll/shifts": (lambda x: x.roll((1, 2), 0), (Z2,), gc.ShapeError, "2 shifts but 1 dims"),
    "diff/0d": (lambda x: x.diff(), (np.array(1.0),), gc.ShapeError, "at least one dim"),
    "diff/n": (lambda x: x.diff(-1), (Z2,), gc.ShapeError, "non-negative"),
    "lerp/ints": (lambda x: x.lerp(x, 0.5), (INTS,), gc.DTypeError, "lerp: start"),
    "addcdiv/ints": (lambda x: x.addcdiv(x, x), (INTS,), gc.DTypeError, "integer division"),
    "frac/ints": (lambda x: x.frac(), (INTS,), gc.DTypeError, "frac"),
    "trace/vector": (lambda x: x.trace(), (Z2[0],), gc.ShapeError, "expected a matrix"),
    "trace/bools": (lambda x: x.trace(), (Z2 > 0,), gc.DTypeError, "bool"),
    "unflatten/sizes": (lambda x: x.unflatten(1, (2, 2)), (Z2,), gc.ShapeError, "multiply"),
    "mT/vector": (lambda x: x.mT, (Z2[0],), gc.ShapeError, "at least 2 dims"),
    "tensor_split/zero": (lambda x: x.tensor_split(0), (Z2,), gc.ShapeError, "at least 1"),
    "index_fill/matrix_index": (
        lambda x, i: x.index_fill(1, i, 1.0), (Z2, np.array([[0]])), gc.ShapeError, "index must"
    ),
    "scatter/float_index": (
        lambda x, i: x.scatter(1, i, 1.0), (Z2, np.array([[0.0]])), gc.DTypeError, "index must"
    ),
    "scatter/rank": (
        lambda x, i: x.scatter(1, i, 1.0), (Z2, np.array([0])), gc.ShapeError, "rank of self"
    ),
    "index_copy/source": (
        lambda x, i: x.index_copy(1, i, x), (Z2, np.array([0])), gc.ShapeError, "source must"
    ),
}  # fmt: skip


@pytest.mark.quick_cases(len(ERRORS))  # each well under a millisecond
@pytest.mark.parametrize("name", sorted(ERRORS))
def test_mistakes_are_graphc_errors_naming_the_argument(name: str) -> None:
    """Eagerly the message names the method and its argument; traced, an index known only
    when the graph runs is checked then (by the op the method records)."""
    fn, inputs, error, match = ERRORS[name]
    with pytest.raises(error, match=match):
        fn(*[ge.tensor(a) for a in inputs])
    run_time = match.endswith("`index`")
    with pytest.raises(error, match=None if run_time else match):
        g = gc.trace(fn, *inputs)
        gc.compile(g)(**{p.name: a for p, a in zip(g.inputs, inputs)})


def test_op_functions_take_numpy_spellings_and_give_numpy_answers() -> None:
    """gc.roll, gc.diff, gc.count_nonzero, gc.tensor_split (np.array_split) and
    gc.matrix_trace (np.trace) on arrays and, under gc.jit, on graph values."""
    a = np.arange(24.0).reshape(4, 6) % 5

    def calls(x: Any) -> tuple:
        return (
            gc.roll(x, 8, axis=1),
            gc.diff(x, 2, axis=0, prepend=-1.0),
            gc.count_nonzero(x, axis=1, keepdims=True),
            *gc.tensor_split(x, 4, axis=1),
            gc.matrix_trace(x[:, :4]),
        )

    want = (
        np.roll(a, 8, axis=1),
        np.diff(a, 2, axis=0, prepend=-1.0),
        np.count_nonzero(a, axis=1, keepdims=True),
        *np.array_split(a, 4, axis=1),
        np.trace(a[:, :4]),
    )
    for got in (calls(a), gc.jit(calls)(a)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
            assert np.shape(g) == w.shape


def test_elementwise_and_array_functions_give_numpy_answers() -> None:
    """gc.exp2, float_power, hypot, fmax, fmin, heaviside, isposinf, isneginf, rot90,
    inner and matrix_power against numpy's functions of the same names, on arrays and
    under gc.jit (numpy's dtypes, numpy's nan handling)."""
    a = np.array([[0.5, np.nan, -np.inf], [0.0, 3.0, np.inf]])
    b = np.array([[2.0, 1.0, np.nan], [-0.0, np.nan, 1.5]])
    m = np.arange(9.0).reshape(3, 3) / 7

    def calls(x: Any, y: Any, z: Any) -> tuple:
        return (
            gc.exp2(x), gc.float_power(gc.abs(x), 3), gc.hypot(x, y), gc.fmax(x, y),
            gc.fmin(x, y), gc.heaviside(x, y), gc.isposinf(x), gc.isneginf(y),
            gc.rot90(x, 3, (1, 0)), gc.inner(z, z), gc.matrix_power(z, 4),
        )  # fmt: skip

    want = (
        np.exp2(a), np.float_power(np.abs(a), 3), np.hypot(a, b), np.fmax(a, b),
        np.fmin(a, b), np.heaviside(a, b), np.isposinf(a), np.isneginf(b),
        np.rot90(a, 3, (1, 0)), np.inner(m, m), np.linalg.matrix_power(m, 4),
    )  # fmt: skip
    for got in (calls(a, b, m), gc.jit(calls)(a, b, m)):
        for k, (g, w) in enumerate(zip(got, want)):
            assert np.asarray(g).dtype == w.dtype, k
            np.testing.assert_allclose(g, w, rtol=1e-13, err_msg=str(k))


def test_roll_along_a_symbolic_dim_matches_torch_for_every_size() -> None:
    """A trace with a symbolic dim rolls along it by a take of (i - shift) mod size, the
    size known when the graph runs: torch's values and gradients at sizes 0, 1, 4, 9."""
    spec = gc.TensorSpec((None, 3), dtype="float64")
    g = gc.trace(lambda x: x.roll((7, -1), (0, 1)), spec)
    weight = np.arange(3.0)

    def loss(x: Any) -> Any:
        return gc.sum(x.roll(-2, 0) * weight)

    exe, grad = gc.compile(g), gc.compile(gc.gradients(gc.trace(loss, spec), wrt=["x"]))
    for n in (0, 1, 4, 9):
        x = _rng.standard_normal((n, 3))
        t = torch.tensor(x, requires_grad=True)
        want = t.roll((7, -1), (0, 1))
        (t.roll(-2, 0) * torch.tensor(weight)).sum().backward()
        np.testing.assert_array_equal(exe(x), want.detach().numpy())
        np.testing.assert_array_equal(grad(x)[1], t.grad.numpy())


@pytest.mark.parametrize("inplace", [False, True])
def test_a_position_written_twice_gets_the_mean_in_place_or_not(inplace: bool) -> None:
    """torch leaves which of two writes to one position wins unspecified; graphc writes
    their mean, out of place and in place alike (scatter_ and index_copy_ kept the last
    write while scatter and index_copy wrote the mean), with the gradient split evenly."""
    src = ge.tensor([5.0, 7.0, 1.0], requires_grad=True)
    base = ge.zeros(3, requires_grad=True)
    index = ge.tensor([1, 1, 2])
    if inplace:
        out = base * 1.0
        out.scatter_(0, index, src)
    else:
        out = base.scatter(0, index, src)
    np.testing.assert_array_equal(out.detach().numpy(), [0.0, 6.0, 1.0])
    (out * ge.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_array_equal(src.grad.numpy(), [1.0, 1.0, 3.0])
    np.testing.assert_array_equal(base.grad.numpy(), [1.0, 0.0, 0.0])
    rows = ge.tensor([[1.0, 2.0], [3.0, 4.0]])
    copied = ge.zeros(3, 2)
    if inplace:
        copied.index_copy_(0, ge.tensor([0, 0]), rows)
    else:
        copied = copied.index_copy(0, ge.tensor([0, 0]), rows)
    np.testing.assert_array_equal(copied.numpy(), [[2.0, 3.0], [0.0, 0.0], [0.0, 0.0]])


@pytest.mark.parametrize("kind", ["eager", "traced"])
def test_an_argument_torch_refuses_is_an_argument_error_on_both_kinds(kind: str) -> None:
    """torch raises RuntimeError for an unknown rounding_mode or norm p; graphc raised a
    bare GraphcError on graph values (ArgumentError lived in graphc.eager)."""
    for call in (lambda x: x.div(x, rounding_mode="round"), lambda x: x.norm(p="x")):
        with pytest.raises(gc.ArgumentError) as caught:
            if kind == "eager":
                call(ge.ones(2))
            else:
                gc.trace(call, gc.TensorSpec((2,)))
        assert isinstance(caught.value, (ValueError, RuntimeError))
