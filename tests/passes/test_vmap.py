"""vmap_graph: a per-example graph batched, checked against a Python loop over examples.

Graph text in and out for a few ops; per-op cases (elementwise and shape ops bit for
bit, contractions and reductions close) with the batch on each axis and unbatched
operands; control flow (a batched cond predicate, scan carries that become batched, a
while_loop whose condition differs per example); random graphs of tests/strategies.py;
the refusals, each naming the node or argument; and gradients of a vmapped graph
against finite differences, and vmap of a gradient graph (per-example gradients).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import graphc as gc
from graphc.ir.types import finfo, is_float
from graphc.ops.batching import VmapError
from graphc.passes.vmap import vmap_graph
from tests.budget import draws
from tests.edge_graphs import edge_graphs
from tests.edge_values import edge_feeds
from tests.strategies import random_feeds, random_graphs

RNG = np.random.default_rng(35)


def _graph(fn: Callable[..., Any], *examples: np.ndarray) -> gc.Graph:
    return gc.trace(fn, *(np.asarray(e) for e in examples))


def _run(g: gc.Graph, args: Sequence[Any]) -> list:
    """`g` run by the reference interpreter on its placeholders' values, in order."""
    return gc.run(g, {p.name: a for p, a in zip(g.inputs, args)})


def _example(value: np.ndarray, axis: int | None, i: int) -> np.ndarray:
    return value if axis is None else np.asarray(np.take(value, i, axis=axis))


def _loop(g: gc.Graph, args: Sequence[np.ndarray], axes: Sequence[int | None]) -> list:
    """Each output of `g` run example by example, stacked on axis 0."""
    size = _size(args, axes)
    runs = [_run(g, [_example(a, ax, i) for a, ax in zip(args, axes)]) for i in range(size)]
    if not runs:  # no example: nothing of each output's per-example type
        return [np.empty((0, *o.type.shape), o.type.dtype) for o in g.outputs]
    return [np.stack([np.asarray(r[k]) for r in runs]) for k in range(len(g.outputs))]


def _size(args: Sequence[np.ndarray], axes: Sequence[int | None]) -> int:
    return next(a.shape[ax] for a, ax in zip(args, axes) if ax is not None)


def check(
    fn: Callable[..., Any],
    args: Sequence[np.ndarray],
    axes: Sequence[int | None],
    exact: bool = False,
) -> gc.Graph:
    """vmap_graph of `fn` traced on one example equals the loop, bit for bit if `exact`
    (the batch size known: symbolic ones are tested on their own below)."""
    examples = [
        a if ax is None else np.zeros(np.delete(a.shape, ax), a.dtype) for a, ax in zip(args, axes)
    ]
    g = _graph(fn, *examples)
    batched = vmap_graph(g, list(axes), axis_size=_size(args, axes))
    gc.verify(batched)
    with np.errstate(all="ignore"):
        got = _run(batched, list(args))
        want = _loop(g, args, axes)
    for k, (x, w) in enumerate(zip(got, want)):
        assert x.shape == w.shape and x.dtype == w.dtype, (k, x.shape, w.shape, str(batched))
        if exact:
            np.testing.assert_array_equal(x, w, err_msg=str(batched))
        else:
            np.testing.assert_allclose(x, w, rtol=1e-10, atol=1e-12, err_msg=str(batched))
    return batched


def _normal(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape)


def _indices(high: int, *shape: int) -> np.ndarray:
    return RNG.integers(0, high, shape)


# -- text in, text out -----------------------------------------------------------------


def test_an_affine_layer_gains_a_symbolic_batch_dim() -> None:
    g = gc.parse(
        """
        graph affine(%x: f32[3], %w: f32[3,2], %b: f32[2]) {
          %matmul: f32[2] = matmul(%x, %w)
          %add: f32[2] = add(%matmul, %b)
          %y: f32[2] = relu(%add)
          %sum: f32[] = sum(%y, axis=None, keepdims=False)
          output %loss = %sum
        }
        """
    )
    batched = vmap_graph(g, in_axes=(0, None, None))
    assert str(batched) == (
        "graph affine_vmap(%x: f32[vmap,3], %w: f32[3,2], %b: f32[2]) {\n"
        "  %matmul: f32[vmap,2] = matmul(%x, %w)\n"
        "  %add: f32[vmap,2] = add(%matmul, %b)\n"
        "  %y: f32[vmap,2] = relu(%add)\n"
        "  %sum: f32[vmap] = sum(%y, axis=(1,), keepdims=False)\n"
        "  output %loss = %sum\n"
        "}"
    )


def test_a_batch_on_another_axis_is_moved_first_and_back() -> None:
    g = gc.parse(
        """
        graph scale(%x: f64[3], %s: f64[]) {
          %mul: f64[3] = mul(%x, %s)
          output %y = %mul
        }
        """
    )
    batched = vmap_graph(g, in_axes=(1, 0), out_axes=1, axis_size=4)
    assert str(batched) == (
        "graph scale_vmap(%x: f64[3,4], %s: f64[4]) {\n"
        "  %transpose: f64[4,3] = transpose(%x, axes=(1, 0))\n"
        "  %reshape: f64[4,1] = reshape(%s, shape=(4, 1))\n"
        "  %mul: f64[4,3] = mul(%transpose, %reshape)\n"
        "  %transpose_1: f64[3,4] = transpose(%mul, axes=(1, 0))\n"
        "  output %y = %transpose_1\n"
        "}"
    )


def test_a_batched_predicate_selects_between_both_branches() -> None:
    def f(x: Any) -> Any:
        return gc.cond(gc.sum(x) > 0, lambda v: v * 2.0, lambda v: -v, x)

    batched = vmap_graph(_graph(f, np.ones(3)), axis_size=5)
    ops = [n.op for n in batched.op_nodes]
    assert "cond" not in ops and "where" in ops, str(batched)
    x = _normal(5, 3)
    np.testing.assert_array_equal(
        _run(batched, [x])[0], np.where(x.sum(1, keepdims=True) > 0, x * 2, -x)
    )


def test_nodes_no_batched_value_reaches_are_copied_with_their_names() -> None:
    g = gc.trace(lambda x, w: x * gc.tanh(w) + gc.exp(w), np.ones(3), np.ones(3))
    batched = vmap_graph(g, in_axes=(0, None))
    tanh = batched.node("tanh")
    assert tanh.type == g.node("tanh").type  # computed once, for every example


# -- per op, against the loop ----------------------------------------------------------

EXACT = [
    pytest.param(lambda x, y: x * y + 1.0, [_normal(4, 3), _normal(3)], (0, None), id="mul-add"),
    pytest.param(lambda x, y: gc.maximum(x, y), [_normal(4, 3), _normal(4)], (0, 0), id="rank-align"),
    pytest.param(lambda x, y: gc.where(x > y, x, y), [_normal(3, 4), _normal(4, 3)], (1, 0), id="where"),
    pytest.param(lambda x: x.astype("int32") * 2, [_normal(4, 3) * 5], (0,), id="cast-int"),
    pytest.param(lambda x: gc.logical_not(x), [RNG.random((4, 3)) < 0.5], (0,), id="bool"),
    pytest.param(lambda x: x * 2.0, [_normal(4)], (0,), id="0-d"),
    pytest.param(lambda x: x + 1.0, [_normal(0, 3)], (0,), id="empty-batch"),
    pytest.param(lambda x: x + 1.0, [_normal(4, 0)], (0,), id="empty-example"),
    pytest.param(lambda x: gc.reshape(x, (-1,)), [_normal(4, 3, 2)], (0,), id="reshape"),
    pytest.param(lambda x: gc.transpose(x), [_normal(4, 3, 2)], (1,), id="transpose"),
    pytest.param(lambda x: x[1:, None, ::2], [_normal(4, 3, 5)], (0,), id="slice"),
    pytest.param(lambda x: x[..., 0], [_normal(4, 3, 5)], (2,), id="slice-ellipsis"),
    pytest.param(lambda x: gc.expand_dims(x, 0), [_normal(4, 3)], (0,), id="expand_dims"),
    pytest.param(lambda x: gc.squeeze(x), [_normal(4, 1, 3)], (0,), id="squeeze"),
    pytest.param(lambda x: gc.broadcast_to(x, (2, 3)), [_normal(4, 3)], (0,), id="broadcast_to"),
    pytest.param(
        lambda x, y: gc.concatenate([x, y], axis=-1), [_normal(4, 3, 2), _normal(3, 2)], (0, None),
        id="concatenate",
    ),
    pytest.param(lambda x, y: gc.stack([x, y]), [_normal(4, 3), _normal(3)], (0, None), id="stack"),
    pytest.param(lambda x: gc.pad(x, ((1, 0), (0, 2))), [_normal(4, 3, 2)], (0,), id="pad"),
    pytest.param(lambda x: gc.flip(x), [_normal(4, 3, 2)], (0,), id="flip"),
    pytest.param(lambda x: gc.tril(x), [_normal(4, 3, 3)], (0,), id="tril"),
    pytest.param(lambda x: gc.max(x, axis=0), [_normal(4, 3, 2)], (1,), id="max"),
    pytest.param(lambda x: gc.argmax(x), [_normal(4, 3, 2)], (0,), id="argmax-flat"),
    pytest.param(
        lambda x: gc.argmin(x, axis=1, keepdims=True), [_normal(4, 3, 2)], (2,), id="argmin"
    ),
    pytest.param(lambda x: gc.argsort(x, axis=0), [_normal(4, 3, 2)], (0,), id="argsort"),
    pytest.param(
        lambda x, i: gc.take(x, i, axis=0), [_normal(4, 3, 2), _indices(3, 2)], (0, None), id="take-x"
    ),
    pytest.param(
        lambda x, i: gc.take(x, i, axis=1), [_normal(3, 2), _indices(2, 4, 2)], (None, 0), id="take-i"
    ),
    pytest.param(
        lambda x, i: gc.take(x, i, axis=0), [_normal(4, 3, 2), _indices(3, 4, 5)], (0, 0),
        id="take-both",
    ),
    pytest.param(
        lambda x, i: gc.take(x, i, axis=1), [_normal(4, 3, 2), _indices(2, 4)], (0, 0),
        id="take-both-0d",
    ),
    pytest.param(
        lambda x, i: x[i], [_normal(4, 3, 2), _indices(3, 4, 2)], (0, 0), id="getitem-array"
    ),
    pytest.param(
        lambda x, i: gc.take_along_axis(x, i, axis=0), [_normal(4, 3, 2), _indices(3, 3, 2)],
        (0, None), id="take_along_axis",
    ),
    pytest.param(
        lambda i, w: gc.embedding(i, w), [_indices(5, 4, 3), _normal(5, 2)], (0, None),
        id="embedding",
    ),
    pytest.param(lambda x: gc.one_hot(x, 4), [_indices(4, 4, 3)], (0,), id="one_hot"),
    pytest.param(lambda x: gc.max_pool2d(x, 2), [_normal(4, 2, 3, 6, 6)], (0,), id="max_pool2d"),
]  # fmt: skip


@pytest.mark.parametrize(("fn", "args", "axes"), EXACT)
def test_exact_ops_agree_with_the_loop_bit_for_bit(
    fn: Callable[..., Any], args: list, axes: tuple
) -> None:
    check(fn, args, axes, exact=True)


def _conv(x: Any, w: Any) -> Any:
    return gc.conv2d(x, w, padding=1)


CLOSE = [
    pytest.param(lambda x: gc.sum(x, axis=0), [_normal(4, 3, 2)], (0,), id="sum"),
    pytest.param(lambda x: gc.mean(x), [_normal(4, 3, 2)], (1,), id="mean-all"),
    pytest.param(lambda x: gc.logsumexp(x, axis=-1), [_normal(4, 3, 2)], (0,), id="logsumexp"),
    pytest.param(lambda x: gc.softmax(x, axis=0), [_normal(4, 3, 2)], (0,), id="softmax"),
    pytest.param(lambda x: gc.log_softmax(x), [_normal(3, 4, 2)], (1,), id="log_softmax"),
    pytest.param(lambda x: gc.cumsum(x, axis=1), [_normal(4, 3, 2)], (0,), id="cumsum"),
    pytest.param(lambda x: gc.layer_norm(x), [_normal(4, 3, 2)], (0,), id="layer_norm"),
    pytest.param(
        lambda x, w, b: gc.layer_norm(x, w, b), [_normal(4, 3, 2), _normal(4, 2), _normal(2)],
        (0, 0, None), id="layer_norm-weights",
    ),
    pytest.param(lambda x, y: gc.sum_to(x * y, (1, 2)), [_normal(4, 3, 2), _normal(2)], (0, None),
                 id="sum_to"),
    pytest.param(lambda x: gc.avg_pool2d(x, 2), [_normal(4, 2, 3, 6, 6)], (0,), id="avg_pool2d"),
    pytest.param(_conv, [_normal(4, 2, 3, 5, 5), _normal(4, 3, 3, 3)], (0, None), id="conv-x"),
    pytest.param(_conv, [_normal(4, 2, 3, 5, 5), _normal(4, 4, 3, 3, 3)], (0, 0), id="conv-both"),
    pytest.param(_conv, [_normal(2, 3, 5, 5), _normal(4, 4, 3, 3, 3)], (None, 0), id="conv-w"),
    pytest.param(
        lambda x, w: gc.conv2d(x, w, groups=2), [_normal(4, 2, 4, 5, 5), _normal(4, 6, 2, 3, 3)],
        (0, 0), id="conv-groups",
    ),
    pytest.param(
        lambda x, w: gc.conv_transpose2d(x, w, stride=2),
        [_normal(4, 2, 3, 5, 5), _normal(4, 3, 2, 3, 3)], (0, 0), id="conv_transpose-both",
    ),
    pytest.param(
        lambda x, w: gc.conv_transpose2d(x, w, stride=2),
        [_normal(4, 2, 3, 5, 5), _normal(3, 2, 3, 3)], (0, None), id="conv_transpose-x",
    ),
    pytest.param(lambda x: gc.einsum("ij,jk->ik", x, x.T), [_normal(4, 3, 2)], (0,), id="einsum"),
]  # fmt: skip

# matmul with every combination of batched operands and 1-D ones
MATMULS = [
    ((5, 3, 2), (2, 4), (0, None)),
    ((5, 2), (2, 4), (0, None)),
    ((5, 2), (3, 2, 4), (0, None)),
    ((5, 2), (2,), (0, None)),
    ((3, 2), (5, 2), (None, 0)),
    ((2,), (5, 2), (None, 0)),
    ((3, 2), (5, 2, 4), (None, 0)),
    ((4, 3, 2), (5, 4, 2, 3), (None, 0)),
    ((5, 3, 2), (5, 2), (0, 0)),
    ((5, 2), (5, 2), (0, 0)),
    ((5, 2), (5, 2, 3), (0, 0)),
    ((5, 4, 3, 2), (5, 2, 3), (0, 0)),
    ((3, 5, 2), (2, 5), (1, 1)),
]


@pytest.mark.parametrize(("fn", "args", "axes"), CLOSE)
def test_contractions_and_reductions_agree_with_the_loop(
    fn: Callable[..., Any], args: list, axes: tuple
) -> None:
    check(fn, args, axes)


@pytest.mark.parametrize(("a", "b", "axes"), MATMULS, ids=str)
def test_matmul_agrees_with_the_loop(a: tuple, b: tuple, axes: tuple) -> None:
    check(lambda x, y: x @ y, [_normal(*a), _normal(*b)], axes)


def test_gemm_agrees_with_the_loop() -> None:
    def f(a: Any, b: Any, c: Any) -> Any:
        return gc.gemm(a, b, c, alpha=0.5, beta=2.0, trans_a=True)

    check(f, [_normal(4, 2, 3), _normal(2, 5), _normal(4, 5)], (0, None, 0))
    check(f, [_normal(2, 3), _normal(2, 5), _normal(4, 3, 5)], (None, None, 0))


# -- control flow ------------------------------------------------------------------------


def _branches(x: Any, y: Any) -> Any:
    return gc.cond(gc.sum(x) > 0, lambda a, b: a * 2 + b, lambda a, b: a - b, x, y)


def _one_sided(x: Any, y: Any) -> Any:  # only the false branch reads y
    return gc.cond(gc.sum(x) > 0, lambda a, b: a * 2, lambda a, b: b, x, y)


def _rnn(xs: Any, h: Any) -> Any:
    def step(c: Any, x: Any) -> Any:
        c = gc.tanh(c + x)
        return c, c * 2

    c, ys = gc.scan(step, h, xs)
    return c + gc.sum(ys, axis=0)


def _until(x: Any, n: Any) -> Any:
    def body(c: Any) -> Any:
        return (c[0] + 1.0, c[1] * 1.5)

    return gc.while_loop(lambda c: c[0] < n, body, (gc.zeros_like(n), x))[1]


CONTROL = [
    pytest.param(_branches, [_normal(4, 3), _normal(4, 3)], (0, 0), id="cond-batched-pred"),
    pytest.param(_one_sided, [_normal(3), _normal(4, 3)], (None, 0), id="cond-one-branch-batched"),
    pytest.param(_one_sided, [_normal(4, 3), _normal(3)], (0, None), id="cond-pred-only"),
    pytest.param(_rnn, [_normal(4, 5, 3), _normal(3)], (0, None), id="scan-carry-becomes-batched"),
    pytest.param(_rnn, [_normal(5, 3), _normal(4, 3)], (None, 0), id="scan-batched-carry"),
    pytest.param(_rnn, [_normal(5, 4, 3), _normal(4, 3)], (1, 0), id="scan-xs-axis-1"),
    pytest.param(
        _until, [_normal(4, 3), RNG.integers(0, 6, 4).astype(float)], (0, 0), id="while-per-lane"
    ),
    pytest.param(_until, [_normal(4, 3), np.array(3.0)], (0, None), id="while-shared-pred"),
]


@pytest.mark.parametrize(("fn", "args", "axes"), CONTROL)
def test_control_flow_agrees_with_the_loop(fn: Callable[..., Any], args: list, axes: tuple) -> None:
    check(fn, args, axes, exact=True)


def test_a_lane_whose_condition_stops_keeps_its_carry() -> None:
    """The loop runs while any example's condition holds; each example stops at its own
    count (0 steps for a bound of 0), as a loop over examples would."""
    g = _graph(_until, np.ones(2), np.array(1.0))
    batched = vmap_graph(g, in_axes=(None, 0))
    got = _run(batched, [np.ones(2), np.array([0.0, 1.0, 4.0])])[0]
    np.testing.assert_array_equal(got, [[1.0, 1.0], [1.5, 1.5], [1.5**4, 1.5**4]])


def test_a_scan_carry_batched_by_its_body_starts_broadcast() -> None:
    batched = check(_rnn, [_normal(4, 5, 3), _normal(3)], (0, None))
    scan = next(n for n in batched.op_nodes if n.op == "scan")
    assert scan.inputs[0].op == "broadcast_to", str(batched)


# -- random graphs -----------------------------------------------------------------------


@settings(
    max_examples=draws(300),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(random_graphs(min_ops=5, max_ops=20), st.integers(0, 2**16), st.data())
def test_random_graphs_agree_with_the_loop(g: gc.Graph, seed: int, data: st.DataObject) -> None:
    axes = [data.draw(st.sampled_from([0, -1, None])) for _ in g.inputs]
    if all(a is None for a in axes):
        axes[0] = 0
    size = data.draw(st.sampled_from([1, 3]))
    per = [random_feeds(g, seed + i) for i in range(size)]
    args = _stacked(g, per, axes)
    batched = vmap_graph(g, axes, axis_size=size)
    gc.verify(batched)
    with np.errstate(all="ignore"):
        got = _run(batched, args)
        runs = [gc.run(g, feeds) for feeds in per]
    for k, x in enumerate(got):
        want = np.stack([np.asarray(r[k]) for r in runs])
        assert x.shape == want.shape, (str(g), str(batched))
        np.testing.assert_allclose(x, want, rtol=1e-9, atol=1e-12, err_msg=f"{g}\n{batched}")


@settings(max_examples=draws(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_graphs(min_ops=5, max_ops=15, dtype="float32", symbolic=True), st.integers(0, 99))
def test_random_graphs_with_symbolic_dims_and_batch(g: gc.Graph, seed: int) -> None:
    """A symbolic batch over symbolic per-example dims: what needs a product of the two
    loops over the examples."""
    batched = vmap_graph(g)
    gc.verify(batched)
    per = [random_feeds(g, seed + i) for i in range(2)]
    args = [np.stack([f[p.name] for f in per]) for p in g.inputs]
    with np.errstate(all="ignore"):
        got = _run(batched, args)
        runs = [gc.run(g, feeds) for feeds in per]
    for k, x in enumerate(got):
        want = np.stack([np.asarray(r[k]) for r in runs])
        np.testing.assert_allclose(x, want, rtol=1e-4, atol=1e-5, err_msg=f"{g}\n{batched}")


def _stacked(g: gc.Graph, per: list[dict], axes: list) -> list[np.ndarray]:
    """One batched argument per placeholder: the examples' feeds stacked on its axis (an
    unbatched placeholder is the same in every example's feeds, the first one's)."""
    for p, axis in zip(g.inputs, axes):
        if axis is None:
            for feeds in per:
                feeds[p.name] = per[0][p.name]
    return [
        per[0][p.name] if axis is None else np.stack([f[p.name] for f in per], axis=axis)
        for p, axis in zip(g.inputs, axes)
    ]


@settings(
    max_examples=draws(400),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(edge_graphs(), st.integers(0, 2**16), st.data())
def test_edge_graphs_agree_with_the_loop(g: gc.Graph, seed: int, data: st.DataObject) -> None:
    """Graphs of every dtype, 0-d and empty shapes, symbolic dims and untamed values (nan
    and inf results): the batched graph gives each example's bits (close for floats:
    reductions over a batch may sum in another order), or vmap refuses by name an
    embedding whose table and padding_idx differ per example."""
    axes = [data.draw(st.sampled_from([0, -1, None])) for _ in g.inputs]
    if all(a is None for a in axes):
        axes[0] = 0
    size = data.draw(st.sampled_from([1, 2, 3]))
    known = data.draw(st.booleans())
    per = [edge_feeds(g, seed + i) for i in range(size)]
    args = _stacked(g, per, axes)
    try:
        with np.errstate(all="ignore"):
            runs = [gc.run(g, feeds) for feeds in per]
    except gc.GraphcError:  # an example the graph refuses (an index out of range)
        return
    try:
        batched = vmap_graph(g, axes, axis_size=size if known else None)
    except VmapError as exc:
        assert "padding_idx" in str(exc) and "(op embedding)" in str(exc), exc
        return
    gc.verify(batched)
    with np.errstate(all="ignore"):
        got = _run(batched, args)
    for k, x in enumerate(got):
        want = np.stack([np.asarray(r[k]) for r in runs])
        assert (x.shape, x.dtype) == (want.shape, want.dtype), f"{g}\n{batched}"
        if is_float(want.dtype):
            atol = max(1e-6, _summation_slack(per, want.dtype))
            x, want = x.astype(np.float64), want.astype(np.float64)  # bfloat16 too
            np.testing.assert_allclose(x, want, rtol=1e-5, atol=atol, err_msg=f"{g}\n{batched}")
        else:
            np.testing.assert_array_equal(x, want, err_msg=f"{g}\n{batched}")


def _summation_slack(per: Sequence[dict], dtype: np.dtype) -> float:
    """How far two orders of one sum may drift apart: n * eps * the largest finite
    magnitude fed, n the largest feed's size (the classic bound of a sum's rounding).
    A relative tolerance alone assumed no cancellation: the mean of int64 values near
    +-9.2e18 is a few thousand, off by ulps of 9.2e18 between the batched order and
    the loop's."""
    largest, count = 0.0, 1
    for feeds in per:
        for a in feeds.values():
            values = np.asarray(a).astype(np.float64).ravel()
            values = values[np.isfinite(values)]
            if values.size:
                largest = max(largest, float(np.abs(values).max()))
            count = max(count, values.size)
    return float(finfo(np.dtype(dtype)).eps) * count * largest


# -- refusals ----------------------------------------------------------------------------


def test_a_batched_key_draws_each_examples_own_numbers() -> None:
    def f(key: Any) -> Any:
        return gc.random_normal(gc.fold_in(key, 3), (2, 3), dtype="float64")

    check(f, [np.arange(5)], (0,), exact=True)
    batched = vmap_graph(_graph(f, np.array(0)))  # a symbolic number of streams
    np.testing.assert_array_equal(
        _run(batched, [np.arange(5)])[0], _loop(_graph(f, np.array(0)), [np.arange(5)], (0,))[0]
    )


def test_a_random_op_on_a_shared_key_draws_the_same_numbers_for_each_example() -> None:
    g = gc.trace(
        lambda x, key: x + gc.random_uniform(key, (3,), dtype="float64"),
        np.zeros(3),
        np.array(0),
    )
    batched = vmap_graph(g, in_axes=(0, None))
    got = _run(batched, [np.zeros((2, 3)), np.int64(7)])[0]
    np.testing.assert_array_equal(got[0], got[1])


def test_a_fused_node_is_refused_by_name() -> None:
    g = gc.trace(lambda x: gc.relu(x * 2.0 + 1.0), np.ones(3, np.float32))
    fused = gc.fuse(g, backend="numpy")
    assert any(n.op == "fused" for n in fused.op_nodes), str(fused)
    with pytest.raises(VmapError, match=r"node '.*' \(op fused\) is a backend's fused node"):
        vmap_graph(fused)


def test_a_convolution_on_a_symbolic_batch_loops_over_the_examples() -> None:
    """(vmap*N images have no name: a scan runs the node example by example; with a
    known batch it is one convolution of merged images)."""
    x, w = _normal(3, 2, 3, 5, 5), _normal(4, 3, 3, 3)
    g = _graph(lambda x, w: gc.max_pool2d(_conv(x, w), 2), x[0], w)
    symbolic = vmap_graph(g, in_axes=(0, None))
    assert [n.op for n in symbolic.op_nodes] == ["scan", "result", "scan", "result"]
    known = vmap_graph(g, in_axes=(0, None), axis_size=3)
    assert "scan" not in [n.op for n in known.op_nodes], str(known)
    want = _loop(g, [x, w], (0, None))[0]
    np.testing.assert_array_equal(_run(symbolic, [x, w])[0], want)
    np.testing.assert_allclose(_run(known, [x, w])[0], want, rtol=1e-12)


def test_axes_that_do_not_fit_are_refused_naming_the_placeholder() -> None:
    g = gc.trace(lambda x, y: x + y, np.ones(3), np.ones(3))
    with pytest.raises(VmapError, match="in_axes has 1 entries.*2"):
        vmap_graph(g, in_axes=[0])
    with pytest.raises(VmapError, match="placeholder 'y': axis 2 is out of range for rank 2"):
        vmap_graph(g, in_axes=(0, 2))
    with pytest.raises(VmapError, match="batches no placeholder"):
        vmap_graph(g, in_axes=None)
    with pytest.raises(VmapError, match="output 'out' differs per example"):
        vmap_graph(g, in_axes=0, out_axes=None)
    with pytest.raises(VmapError, match="output 'out': axis -3 is out of range"):
        vmap_graph(g, out_axes=-3)
    with pytest.raises(VmapError, match="in_axes for 'x' must be an int or None"):
        vmap_graph(g, in_axes=("a", 0))


def test_unbatched_inputs_with_an_axis_size_broadcast_the_outputs() -> None:
    g = gc.trace(lambda x: x * 2.0, np.ones(3))
    batched = vmap_graph(g, in_axes=None, axis_size=2, out_axes=1)
    np.testing.assert_array_equal(_run(batched, [np.ones(3)])[0], np.full((3, 2), 2.0))
    kept = vmap_graph(g, in_axes=None, axis_size=2, out_axes=None)
    assert kept.outputs[0].type.shape == (3,)


# -- gradients --------------------------------------------------------------------------


def _finite_difference(
    fn: Callable[[np.ndarray], float], x: np.ndarray, eps: float = 1e-6
) -> np.ndarray:
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[i] = eps
        grad[i] = (fn(x + step) - fn(x - step)) / (2 * eps)
    return grad


def _mlp(x: Any, w: Any) -> Any:
    return gc.sum(gc.tanh(x @ w) ** 2)


def test_gradients_of_a_vmapped_graph_match_finite_differences() -> None:
    def total(x: Any, w: Any) -> Any:
        return gc.sum(_branches(gc.tanh(x @ w), x))

    x, w = _normal(3, 2), _normal(2, 2)
    per_example = _graph(total, x[0], w)
    batched = vmap_graph(per_example, in_axes=(0, None))
    with gc.Graph("loss") as outer:
        xs = gc.placeholder("x", shape=(3, 2), dtype="float64")
        ws = gc.placeholder("w", shape=(2, 2), dtype="float64")
        gc.output(gc.sum(batched(xs, ws)), name="loss")
    grads = gc.gradients(outer, wrt=["w"])
    got = gc.run(grads, {"x": x, "w": w})[1]

    def loss(wv: np.ndarray) -> float:
        return float(gc.run(outer, {"x": x, "w": wv})[0])

    np.testing.assert_allclose(got, _finite_difference(loss, w), rtol=1e-6, atol=1e-8)


def test_vmap_of_a_gradient_graph_gives_per_example_gradients() -> None:
    x, w = _normal(5, 3), _normal(3, 2)
    grads = gc.gradients(_graph(_mlp, x[0], w), wrt=["w"])
    per_example = vmap_graph(grads, in_axes=(0, None))
    loss, dw = _run(per_example, [x, w])
    one = _graph(_mlp, x[0], w)
    for i, example in enumerate(x):

        def example_loss(wv: np.ndarray, example: np.ndarray = example) -> float:
            return float(_run(one, [example, wv])[0])

        np.testing.assert_allclose(dw[i], _finite_difference(example_loss, w), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(loss, [np.sum(np.tanh(x[i] @ w) ** 2) for i in range(5)])


def test_vmap_of_the_gradient_of_a_scan_and_a_cond() -> None:
    def f(xs: Any, h: Any) -> Any:
        return gc.sum(_rnn(xs, h)) + gc.sum(_branches(h, h))

    xs, h = _normal(4, 5, 3), _normal(3)
    grads = gc.gradients(_graph(f, xs[0], h), wrt=["h"])
    check(lambda a, b: tuple(grads(a, b)), [xs, h], (0, None))


@gc.custom_vjp
def _sin_clipped(x: Any) -> Any:
    return gc.sin(x)


_sin_clipped.defvjp(
    lambda x: (gc.sin(x), x), lambda res, ct: (gc.clip(ct * gc.cos(res), -0.5, 0.5),)
)


def test_a_custom_vjp_keeps_its_backward_per_example() -> None:
    """The batched node's backward is the user's, per example; an unbatched input's
    cotangent sums every example's (here w's: each example's clipped gradient)."""

    def f(x: Any, w: Any) -> Any:
        return gc.sum(_sin_clipped(x * w) * 5.0)

    x, w = _normal(4, 3), _normal(3)
    check(f, [x, w], (0, None))
    per_example = _graph(f, x[0], w)
    grads = gc.gradients(vmap_graph(per_example, in_axes=(0, None)), wrt=["x", "w"], seeds=True)
    _, dx, dw = _run(grads, [x, w, np.ones(4)])
    one = gc.gradients(per_example, wrt=["x", "w"])
    loop = [_run(one, [xi, w])[1:] for xi in x]
    np.testing.assert_allclose(dx, np.stack([g[0] for g in loop]), rtol=1e-12)
    np.testing.assert_allclose(dw, sum(g[1] for g in loop), rtol=1e-12)
    assert np.abs(dx).max() <= 0.5 * np.abs(w).max() + 1e-12  # clipped, then times w


def test_the_batched_graph_prints_parses_and_compiles_to_the_same_values() -> None:
    def f(x: Any, h: Any) -> Any:
        return _rnn(x, h), _branches(h, h)

    g = _graph(f, _normal(5, 3), _normal(3))
    batched = vmap_graph(g, in_axes=(None, 0))
    assert str(gc.parse(str(batched))) == str(batched)
    xs, h = _normal(5, 3), _normal(4, 3)
    want = _run(batched, [xs, h])
    for level in (0, 2):
        got = gc.compile(batched, opt_level=level)(xs, h)
        for x, w in zip(got, want):
            np.testing.assert_allclose(x, w, rtol=1e-12)


def test_an_output_named_like_a_node_the_rules_make_keeps_its_name() -> None:
    with gc.Graph("named") as g:
        x = gc.placeholder("x", shape=(3,), dtype="float64")
        gc.output(gc.reshape(x, (3, 1)), name="transpose")
    batched = vmap_graph(g, in_axes=1, out_axes=1, axis_size=2)  # transposes in and out
    assert [o.name for o in batched.outputs] == ["transpose"], str(batched)
    x = _normal(3, 2)
    np.testing.assert_array_equal(_run(batched, [x])[0], x[:, :, None])


# the ops gradient graphs are made of (unslice, scatters, unpad, pooling and layer norm
# backwards, transposed convolutions), reached by per-example gradients
GRADIENTS = [
    pytest.param(lambda x: gc.sum(x[1:, ::2] ** 2), [_normal(4, 3, 5)], (0,), id="unslice"),
    pytest.param(
        lambda w, i: gc.sum(gc.take(w, i, axis=0) ** 2), [_normal(3, 2), _indices(3, 4, 5)],
        (None, 0), id="scatter_add",
    ),
    pytest.param(
        lambda w, i: gc.sum(gc.take(w, i, axis=1) ** 2), [_normal(2, 3), _indices(3, 4)],
        (None, 0), id="scatter_add-0d-index",
    ),
    pytest.param(
        lambda w, i: gc.sum(gc.embedding(i, w) ** 2), [_normal(5, 2), _indices(5, 4, 3)],
        (None, 0), id="embedding",
    ),
    pytest.param(
        lambda x, i: gc.sum(gc.take_along_axis(x, i, axis=0) ** 2),
        [_normal(4, 3, 2), _indices(3, 4, 3, 2)], (0, 0), id="scatter_add_along_axis",
    ),
    pytest.param(lambda x: gc.sum(gc.pad(x, ((1, 0), (0, 2))) ** 2), [_normal(4, 3, 2)], (0,),
                 id="unpad"),
    pytest.param(lambda x: gc.sum(gc.max_pool2d(x, 2) ** 2), [_normal(4, 2, 3, 6, 6)], (0,),
                 id="max_pool2d"),
    pytest.param(lambda x: gc.sum(gc.avg_pool2d(x, 2) ** 2), [_normal(4, 2, 3, 6, 6)], (0,),
                 id="avg_pool2d"),
    pytest.param(
        lambda x, w: gc.sum(gc.layer_norm(x, w, None) ** 3), [_normal(4, 3, 5), _normal(5)],
        (0, None), id="layer_norm",
    ),
    pytest.param(_conv, [_normal(4, 2, 3, 5, 5), _normal(4, 3, 3, 3)], (0, None), id="conv"),
]  # fmt: skip


@pytest.mark.parametrize(("fn", "args", "axes"), GRADIENTS)
def test_per_example_gradients_through_every_backward_op(
    fn: Callable[..., Any], args: list, axes: tuple
) -> None:
    examples = [a if ax is None else a[0] for a, ax in zip(args, axes)]
    g = _graph(lambda *xs: gc.sum(fn(*xs)), *examples)
    wrt = [p.name for p in g.inputs if is_float(p.type.dtype)]
    grads = gc.gradients(g, wrt=wrt)
    check(lambda *xs: tuple(grads(*xs)), args, axes)


def test_contract_rows_agrees_with_the_loop() -> None:
    def f(x: Any, y: Any) -> Any:
        return gc.bind("contract_rows", x, y)

    check(f, [_normal(4, 5, 3), _normal(4, 5, 2)], (0, 0))
    check(f, [_normal(4, 2, 5, 3), _normal(2, 5, 2)], (0, None))
    check(f, [_normal(5, 3), _normal(4, 5, 2)], (None, 0))


def test_a_batched_matmul_with_an_empty_dim_agrees_with_the_loop() -> None:
    # the examples' rows merged into one (-1, k) matrix: with no elements (k = 0, an empty
    # row axis or no examples) reshape could not infer the -1, and vmap raised ShapeError
    cases = [
        ((2, 2, 0), (0, 0)),
        ((3, 1, 0), (0, 4)),
        ((3, 0, 2), (2, 4)),
        ((0, 3, 2), (2, 4)),
        ((0, 1, 2), (2, 4)),
    ]
    for a, b in cases:
        check(lambda x, y: x @ y, [_normal(*a), _normal(*b)], (0, None), exact=True)
