"""Edges of single ops, in every mode: 0-d inputs, empty axes, zero-size dims, symbolic
windows and concatenation, out-of-range indices, and int/bool dtypes (issue 13).

"Every mode" is the op on arrays (the numpy backend) and on eager tensors, the
reference interpreter `gc.run`, and compiled plans at O0 and O2; PyTorch's answer is
the oracle where it has one.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc.ir.registry import get_op
from graphc.ir.types import TensorType
from graphc.ops.dispatch import prepare
from graphc.runtime.backend import available_backends
from tests.budget import sample
from tests.conftest import needs_torch, torch
from tests.op_cases import all_cases
from tests.ops.test_kernels import op_node_and_inputs, type_of


def every_mode(
    build: Callable[..., Any], xs: Sequence[np.ndarray], wrt: Sequence[int] = ()
) -> dict:
    """{mode: [y, d sum(y)/d x_i for i in wrt]} for y = build(*xs), in every mode."""
    results = {"arrays": [np.asarray(build(*xs))]}
    tensors = [ge.tensor(x, requires_grad=i in wrt) for i, x in enumerate(xs)]
    y = build(*tensors)
    if wrt:
        y.sum().backward()
    results["eager"] = [y.detach().numpy()] + [tensors[i].grad.numpy() for i in wrt]
    g = gc.Graph("edge")
    with g:
        values = [gc.placeholder(f"x{i}", x.shape, x.dtype) for i, x in enumerate(xs)]
        y = build(*values)
        gc.output(y, name="y")
        if wrt:
            gc.output(gc.sum(y), name="total")
    if wrt:
        g = gc.gradients(g, wrt=[f"x{i}" for i in wrt], outputs=["total"])
    feeds = {f"x{i}": x for i, x in enumerate(xs)}
    drop_total = (lambda r: [r[0], *r[2:]]) if wrt else (lambda r: r)
    results["run"] = drop_total(list(gc.run(g, feeds)))
    for level in (0, 2):
        out = gc.compile(g, opt_level=level)(**feeds)
        results[f"O{level}"] = drop_total(list(out) if isinstance(out, tuple) else [out])
    return results


def assert_modes_agree(results: dict, want: Sequence[np.ndarray], rtol: float = 1e-6) -> None:
    for mode, got in results.items():
        expected = want[:1] if mode == "arrays" else want  # plain arrays give no gradient
        assert len(got) == len(expected), mode
        for k, (a, b) in enumerate(zip(got, expected)):
            a, b = np.asarray(a), np.asarray(b)
            assert a.shape == b.shape, f"{mode} result {k}: shape {a.shape} vs {b.shape}"
            np.testing.assert_allclose(a, b, rtol=rtol, err_msg=f"{mode} result {k}")


# -- 0-d inputs: the one axis is 0 (or -1), as in PyTorch --------------------------------

ZERO_D = [
    ("sum", lambda x, a: gc.sum(x, axis=a), lambda t, a: torch.sum(t, a)),
    ("mean", lambda x, a: gc.mean(x, axis=a), lambda t, a: torch.mean(t, a)),
    ("max", lambda x, a: gc.max(x, axis=a), lambda t, a: torch.amax(t, a)),
    ("min", lambda x, a: gc.min(x, axis=a, keepdims=True), lambda t, a: torch.amin(t, a, True)),
    ("logsumexp", lambda x, a: gc.logsumexp(x, axis=a), lambda t, a: torch.logsumexp(t, a)),
    ("var", lambda x, a: gc.var(x, axis=a, ddof=0), lambda t, a: torch.var(t, a, correction=0)),
    ("softmax", lambda x, a: gc.softmax(x, axis=a), lambda t, a: torch.softmax(t, a)),
    ("log_softmax", lambda x, a: gc.log_softmax(x, axis=a), lambda t, a: torch.log_softmax(t, a)),
]


@needs_torch
@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("name, build, torch_fn", ZERO_D, ids=[z[0] for z in ZERO_D])
def test_reducing_a_0d_input_agrees_in_every_mode_and_with_torch(
    name: str, build: Callable, torch_fn: Callable, axis: int
) -> None:
    x = np.array(1.5)
    t = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    y = torch_fn(t, axis)
    y.sum().backward()
    results = every_mode(lambda v: build(v, axis), [x], wrt=[0])
    assert_modes_agree(results, [y.detach().numpy(), t.grad.numpy()])


@needs_torch
@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("axis", [0, -1])
def test_the_index_of_a_0d_extremum_is_0_in_every_mode(name: str, axis: int) -> None:
    fn = getattr(gc, name)
    results = every_mode(lambda v: fn(v, axis=axis, keepdims=True), [np.array(-2.0)])
    want = getattr(torch, name)(torch.tensor(-2.0), axis, keepdim=True).numpy()
    assert_modes_agree(results, [want])


def test_a_0d_reduction_is_canonically_over_every_axis() -> None:
    g = gc.Graph("scalar")
    with g:
        x = gc.placeholder("x", shape=(), dtype="float32")
        for op in ("sum", "mean", "max", "min", "logsumexp", "argmax", "argmin", "softmax"):
            for axis in (0, -1, (0,)) if op not in ("argmax", "argmin", "softmax") else (0, -1):
                assert getattr(gc, op)(x, axis=axis).node.attrs["axis"] is None, (op, axis)
        gc.output(gc.sum(x, axis=-1), name="y")
    assert gc.parse(str(g)).node("sum").attrs["axis"] is None  # text round trip


@pytest.mark.parametrize("axis", [1, -2, (0, -1), (0, 0)])
@pytest.mark.parametrize("op", ["sum", "max", "logsumexp", "argmax", "softmax"])
def test_other_axes_of_a_0d_input_are_errors_naming_the_op(op: str, axis: Any) -> None:
    if op in ("argmax", "softmax") and isinstance(axis, tuple):
        return  # these take one int
    with pytest.raises(gc.ShapeError, match=rf"^{op}: .*axis"):
        getattr(gc, op)(np.array(1.0), axis=axis)


# -- empty axes -----------------------------------------------------------------------


@needs_torch
@pytest.mark.parametrize("op", ["max", "min", "argmax", "argmin"])
def test_an_extremum_over_a_symbolic_dim_fed_empty_is_a_shape_error_in_every_mode(op: str) -> None:
    g = gc.Graph("extremum")
    with g:
        x = gc.placeholder("x", shape=("B", 3))
        gc.output(getattr(gc, op)(x, axis=0), name="y")
    empty = np.ones((0, 3), np.float32)
    with pytest.raises(gc.IndexRangeError, match=f"{op}: cannot reduce an empty axis"):
        gc.run(g, {"x": empty})  # the kernel itself, not numpy's ValueError
    for level in (0, 2):
        with pytest.raises(gc.ShapeError, match=f"{op}: cannot reduce an empty axis"):
            gc.compile(g, opt_level=level)(x=empty)
    with pytest.raises(IndexError):  # torch refuses too, with an IndexError
        getattr(torch, op if op.startswith("arg") else f"a{op}")(torch.ones(0, 3), 0)


@needs_torch
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "logsumexp"])
@pytest.mark.parametrize("shape, axis", [((2, 0), 1), ((0, 3), 0), ((0,), -1)])
def test_an_empty_axis_gives_torchs_answer_and_gradient_in_every_mode(
    name: str, shape: tuple, axis: int
) -> None:
    x = np.zeros(shape, np.float32)
    t = torch.zeros(shape, requires_grad=True)
    y = getattr(torch, name)(t, axis)
    y.sum().backward()
    want = [y.detach().numpy(), t.grad.numpy()]  # -inf for logsumexp, else empty
    results = every_mode(lambda v: getattr(gc, name)(v, axis=axis), [x], wrt=[0])
    assert_modes_agree(results, want)


def test_logsumexp_of_an_empty_array_is_minus_inf_like_log_sum_exp() -> None:
    x = np.zeros((0, 3), np.float64)
    g = gc.trace(lambda v: gc.log(gc.sum(gc.exp(v))), gc.TensorSpec((0, 3), "float64"))
    # fast_math rewrites log(sum(exp(x))) into logsumexp, which used to crash here
    for level, fast_math in [(0, False), (2, False), (1, True), (2, True)]:
        with np.errstate(divide="ignore"):  # log(0) at O0
            assert gc.compile(g, opt_level=level, fast_math=fast_math)(x) == -np.inf
    assert gc.logsumexp(x) == -np.inf


@needs_torch
def test_logsumexp_of_integers_computes_in_floats_and_does_not_wrap() -> None:
    x = np.array([[2**62, -(2**62) - 5], [-(2**62), 2**62]], np.int64)
    results = every_mode(lambda v: gc.logsumexp(v, axis=1), [x])
    assert_modes_agree(results, [np.array([2.0**62, 2.0**62])])
    assert torch.logsumexp(torch.tensor(x), 1).tolist() == [2.0**62, 2.0**62]


# -- int and bool inputs: the kernel gives the type its rule declares -----------------

INT_AND_BOOL = ("bool", "int32", "int64")


def _retyped(case: Any) -> list[tuple[str, list[np.ndarray], dict]]:
    """The case's op on its own values cast to each mix of int and bool dtypes."""
    node, arrays = op_node_and_inputs(case)
    if any(isinstance(a, tuple) for a in arrays):
        return []  # `result` reads a node's results: its input has no dtype to change
    mixes = []
    for dtypes in itertools.product(INT_AND_BOOL + (None,), repeat=len(arrays)):
        if all(d is None for d in dtypes):
            continue  # the case itself: test_type_rule_matches_kernel
        with np.errstate(all="ignore"):
            args = [a if d is None else a.astype(d) for a, d in zip(arrays, dtypes)]
        mixes.append((",".join(str(a.dtype) for a in args), args, dict(node.attrs)))
    return mixes


CASES = [c for c in all_cases() if c.args and c.op not in ("fused", "matmul_epilogue")]
CASES = list({(c.op, c.label): c for c in CASES}.values())  # one float dtype is enough


@pytest.mark.parametrize("case", sample(CASES, one_in=3), ids=lambda c: f"{c.op}-{c.label}")
def test_kernels_give_the_declared_type_on_int_and_bool_inputs(case: Any) -> None:
    opdef = get_op(case.op)
    for dtypes, args, attrs in _retyped(case):
        try:
            attrs, declared = prepare(opdef, [TensorType.of(a) for a in args], attrs)
        except gc.GraphcError:
            continue  # the type rule refuses these dtypes (relu of bool, log of bool ...)
        try:
            with np.errstate(all="ignore"):
                got = type_of(opdef.kernel(*args, **attrs))
        except gc.GraphcError:
            continue  # a value the kernel refuses (an int to a negative power)
        assert got == declared, f"{case.op} on ({dtypes}): rule {declared}, kernel {got}"


@needs_torch
def test_relu_of_bool_is_refused_like_torch_and_ints_keep_their_dtype() -> None:
    with pytest.raises(gc.DTypeError, match="relu.*bool"):
        gc.relu(np.array([True, False]))
    with pytest.raises(RuntimeError):
        torch.relu(torch.tensor([True]))
    x = np.array([-3, 0, 4], np.int32)
    results = every_mode(gc.relu, [x])
    for mode, (y,) in results.items():
        assert y.dtype == np.int32, mode
    assert_modes_agree(results, [torch.relu(torch.tensor(x)).numpy()])


# -- zero-size dims, symbolic windows and concatenation ----------------------------------


@needs_torch
@pytest.mark.parametrize(
    "x_shape, indices, axis",
    [((0, 4), [1, 3], 1), ((3, 0), [2, 0], 0), ((2, 0, 3), [[0, 2]], 2), ((3, 2), [], 0)],
)
def test_take_gradients_with_a_zero_size_dim_match_torch_in_every_mode(
    x_shape: tuple, indices: list, axis: int
) -> None:
    x = np.ones(x_shape)
    i = np.array(indices, np.int64)
    t = torch.ones(x_shape, dtype=torch.float64, requires_grad=True)
    y = torch.index_select(t, axis, torch.tensor(i.reshape(-1))).reshape(np.take(x, i, axis).shape)
    (y * 2).sum().backward()
    results = every_mode(lambda v: gc.take(v, i, axis=axis) * 2.0, [x], wrt=[0])
    assert_modes_agree(results, [y.detach().numpy() * 2, t.grad.numpy()])


@pytest.mark.parametrize("order", ["empty_first", "empty_last", "alone"])
def test_concat_along_a_symbolic_dim_differentiates_in_every_mode(order: str) -> None:
    g = gc.Graph("concat")
    with g:
        x = gc.placeholder("x", shape=(2, "B"), dtype="float64")
        z = gc.placeholder("z", shape=(2, 0), dtype="float64")
        w = gc.placeholder("w", shape=(2, "B"), dtype="float64")
        parts = {"empty_first": [z, x], "empty_last": [x, z], "alone": [x]}[order]
        joined = gc.concat(parts, axis=1)
        assert joined.shape == (2, "B")
        gc.output(gc.sum(joined * w), name="loss")
    gg = gc.gradients(g, wrt=["x", "z"] if order != "alone" else ["x"])
    feeds = {"x": np.ones((2, 3)), "z": np.ones((2, 0)), "w": np.arange(6.0).reshape(2, 3)}
    feeds = {p.name: feeds[p.name] for p in gg.inputs}
    want = [np.float64(15.0), feeds["w"]] + ([np.ones((2, 0))] if order != "alone" else [])
    for got in (gc.run(gg, feeds), gc.compile(gg, opt_level=0)(**feeds)):
        for a, b in zip(got, want):
            assert a.shape == np.shape(b)
            np.testing.assert_array_equal(a, b)


def test_concat_cannot_add_symbolic_sizes_and_says_so_when_the_graph_is_built() -> None:
    with gc.Graph("concat"):
        x = gc.placeholder("x", shape=("B", 3))
        for other in (x, gc.placeholder("y", shape=(2, 3)), gc.placeholder("c", shape=("C", 3))):
            with pytest.raises(
                gc.ShapeError, match="concat: cannot add symbolic dims along axis 0"
            ):
                gc.concat([x, other])
        assert gc.concat([x, x], axis=1).shape == ("B", 6)


def _window_graph() -> gc.Graph:
    g = gc.Graph("window")
    with g:
        x = gc.placeholder("x", shape=("B", 2), dtype="float64")
        window = x[1:4]
        assert window.shape == (3, 2)  # typed by the window, whatever B
        gc.output(gc.sum(window * window), name="loss")
    return g


def test_a_symbolic_window_that_fits_runs_and_differentiates_in_every_mode() -> None:
    gg = gc.gradients(_window_graph(), wrt=["x"])
    x = np.arange(10.0).reshape(5, 2)
    want_grad = np.zeros((5, 2))
    want_grad[1:4] = 2 * x[1:4]
    for got in (gc.run(gg, {"x": x}), gc.compile(gg, opt_level=0)(x=x), gc.compile(gg)(x=x)):
        np.testing.assert_array_equal(got[0], np.sum(x[1:4] ** 2))
        np.testing.assert_array_equal(got[1], want_grad)


def test_a_symbolic_window_that_does_not_fit_is_a_shape_error_naming_the_slice() -> None:
    g = _window_graph()
    gg = gc.gradients(g, wrt=["x"])
    short = np.ones((3, 2))  # x[1:4] of 3 rows has 2, not the 3 the graph declares
    for graph in (g, gg):
        # the node is named after the variable `window` holding it, and its op is slice
        with pytest.raises(gc.ShapeError, match="'window' \\(op slice\\)"):
            gc.run(graph, {"x": short})
        for level in (0, 2):
            with pytest.raises(gc.ShapeError, match="'window'.*B=3"):
                gc.compile(graph, opt_level=level)(x=short)
    # the gradient's unslice follows the same rule as the slice it undoes
    with pytest.raises(gc.ShapeError, match="unslice"):
        get_op("unslice").infer(TensorType((3, 2)), shape=(3, 2), index="1:4")


def test_an_unslice_into_a_symbolic_size_too_small_is_a_shape_error_in_every_mode() -> None:
    g = gc.Graph("unslice")
    with g:
        ct = gc.placeholder("ct", shape=(5,), dtype="float64")
        b = gc.placeholder("b", shape=("B",), dtype="float64")
        gc.output(gc.unslice(ct, shape=("B",), index="0:5") + b, name="y")
    ones = np.ones(5)
    np.testing.assert_array_equal(gc.run(g, {"ct": ones, "b": np.zeros(6)})[0], [1] * 5 + [0])
    with pytest.raises(gc.ShapeError, match=r"unslice: the window \[0:5\] of shape \(3,\)"):
        gc.run(g, {"ct": ones, "b": np.zeros(3)})  # numpy's broadcast ValueError before
    with pytest.raises(gc.ShapeError, match="'unslice'.*B=3"):
        gc.compile(g, opt_level=0)(ct=ones, b=np.zeros(3))


def test_windows_a_symbolic_dim_cannot_type_are_refused_when_the_graph_is_built() -> None:
    with gc.Graph("window"):
        x = gc.placeholder("x", shape=("B",))
        for index in (slice(1, None), slice(-3, None), slice(None, -1), slice(None, None, -1)):
            with pytest.raises(gc.ShapeError, match="getitem: cannot slice symbolic dim 'B'"):
                x[index]  # noqa: B018


def test_a_whole_symbolic_dim_spelled_from_0_or_by_1_is_a_plain_colon() -> None:
    # ONNX writes x[:] as Slice(0, INT64_MAX, step 1): imported, that was x[0::1], which
    # was refused on a symbolic dim (found by the ONNX round trip of the random graphs)
    with gc.Graph("whole"):
        x = gc.placeholder("x", shape=("B", 3))
        y, z = x[0:, ::1], x[0::1, 0]
        assert (y.node.attrs["index"], y.shape) == (":,:", ("B", 3))
        assert (z.node.attrs["index"], z.shape) == (":,0", ("B",))


# -- indices out of range: IndexRangeError, an IndexError as in torch ---------------------

OUT_OF_RANGE = [
    ("take", lambda: gc.take(np.ones((2, 3)), np.array([0, 3]), axis=1), "take: index 3"),
    ("take negative", lambda: gc.take(np.ones(3), np.array([-4])), "take: index -4"),
    ("take from empty", lambda: gc.take(np.ones((0, 2)), np.array([0])), "size 0"),
    ("one_hot", lambda: gc.one_hot(np.array([0, 3]), num_classes=3), "one_hot: label 3"),
    ("getitem", lambda: gc.getitem(np.ones((2, 3)), (slice(None), 3)), "getitem: index 3"),
    ("scatter_add", lambda: gc.scatter_add(np.ones(2), np.array([0, 5]), shape=(4,)), "index 5"),
    ("eager getitem", lambda: ge.tensor([1.0, 2.0])[2], "getitem: index 2"),
]


@pytest.mark.parametrize(
    "call, fragment", [o[1:] for o in OUT_OF_RANGE], ids=[o[0] for o in OUT_OF_RANGE]
)
def test_an_index_out_of_range_is_an_index_range_error(call: Callable, fragment: str) -> None:
    with pytest.raises(gc.IndexRangeError, match=fragment) as info:
        call()
    assert isinstance(info.value, IndexError)  # what PyTorch raises, so `except` keeps working


def test_an_int_index_past_a_symbolic_dim_is_a_graphc_error_in_every_mode() -> None:
    g = gc.Graph("last")
    with g:
        x = gc.placeholder("x", shape=("B", 2))
        gc.output(x[-1], name="y")
    empty = np.ones((0, 2), np.float32)
    with pytest.raises(gc.IndexRangeError, match="getitem"):
        gc.run(g, {"x": empty})
    for level in (0, 2):
        with pytest.raises(gc.ShapeError, match="getitem: index -1 is out of range"):
            gc.compile(g, opt_level=level)(x=empty)


def _method_value(x: Any) -> Any:
    """x, or an eager tensor of it for an array (whose methods are numpy's, not graphc's)."""
    return ge.tensor(x) if isinstance(x, np.ndarray) else x


# -- pow where d(x^y) has 0 * inf: JAX's and torch's values ----------------------------

# x, y and the gradients torch 2.13 gives: x^0 is flat in x (0^-1 would make y x^(y-1)
# nan), 0^y is flat in y for y >= 0 (log 0 = -inf), and elsewhere the formula
POW_X = np.array([0.0, 0.0, 0.0, 1.5, -2.0, 0.0])
POW_Y = np.array([0.0, 2.0, 0.5, 0.5, 3.0, 1.0])
POW_DX = np.array([0.0, 0.0, np.inf, 0.5 * 1.5**-0.5, 12.0, 1.0])
POW_DY = np.array([0.0, 0.0, 0.0, 1.5**0.5 * np.log(1.5), np.nan, 0.0])


def test_pow_gradients_at_a_zero_base_or_exponent_in_every_mode() -> None:
    with np.errstate(all="ignore"):
        results = every_mode(lambda x, y: x**y, [POW_X, POW_Y], wrt=[0, 1])
    want = [POW_X**POW_Y, POW_DX, POW_DY]
    assert_modes_agree(results, want)
    if torch is not None:
        tx, ty = (torch.tensor(a, requires_grad=True) for a in (POW_X, POW_Y))
        (tx**ty).sum().backward()
        np.testing.assert_allclose(tx.grad.numpy(), POW_DX)
        np.testing.assert_allclose(ty.grad.numpy(), POW_DY)


def test_pow_forward_mode_at_a_zero_base_or_exponent() -> None:
    ones = np.ones_like(POW_X)
    with np.errstate(all="ignore"):
        _, dx = gc.jvp(lambda x: x**POW_Y, (POW_X,), (ones,))
        _, dy = gc.jvp(lambda y: POW_X**y, (POW_Y,), (ones,))
    np.testing.assert_allclose(dx, POW_DX)
    np.testing.assert_allclose(dy, POW_DY)


@pytest.mark.parametrize(
    "name, build",
    [
        ("norm", lambda x: _method_value(x).norm()),
        ("std", lambda x: _method_value(x).std()),
        ("gc.std", lambda x: gc.std(x, axis=1)),
        ("std of no spread", lambda x: (_method_value(x) - _method_value(x).mean()).std()),
    ],
)
def test_norm_and_std_are_flat_where_they_are_zero(name: str, build: Callable) -> None:
    """torch's norm and std backward: 0 where the result is 0 (sqrt's ct * inf * 0 was
    nan), the formula elsewhere; the values are sqrt's."""
    for x in (np.zeros((2, 3)), np.array([[3.0, 4.0, 0.0], [0.0, 0.0, 0.0]])):
        results = every_mode(build, [x], wrt=[0])
        value, grad = results["eager"]
        assert np.isfinite(grad).all(), (name, grad)
        assert_modes_agree(results, [value, grad], rtol=1e-12)
        if torch is not None:
            tx = torch.tensor(x, requires_grad=True)
            y = {"norm": lambda t: t.norm(), "std": lambda t: t.std(),
                 "gc.std": lambda t: t.std(dim=1, correction=0),
                 "std of no spread": lambda t: (t - t.mean()).std()}[name](tx)  # fmt: skip
            y.sum().backward()
            np.testing.assert_allclose(value, y.detach().numpy(), rtol=1e-12)
            np.testing.assert_allclose(grad, tx.grad.numpy(), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", ["isnan", "isinf", "isfinite"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "uint8", "bool"])
def test_nan_and_inf_tests_agree_with_numpy_in_every_mode(name: str, dtype: str) -> None:
    """gc.isnan / isinf / isfinite and the tensor methods, as numpy's, in every mode; no
    numpy warning on nan or inf (comparisons only)."""
    values = [0.0, -0.0, 1.5, -2.0, np.nan, np.inf, -np.inf, 6e-8, 65504.0, 1e308, 5e-324]
    with np.errstate(all="ignore"):
        x = np.array(values).astype(dtype)
    want = getattr(np, name)(x)
    fn = getattr(gc, name)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        results = every_mode(fn, [x])
        results["method"] = [getattr(ge.tensor(x), name)().numpy()]
        for backend in available_backends():
            g = gc.trace(fn, gc.TensorSpec(x.shape, dtype))
            results[backend] = [gc.compile(g, backend=backend, wait=True)(x)]
    for mode, (got,) in results.items():
        assert np.asarray(got).dtype == np.bool_, mode
        np.testing.assert_array_equal(got, want, err_msg=mode)
