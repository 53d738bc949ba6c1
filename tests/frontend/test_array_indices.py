"""Several integer-array indices on graph values, as numpy's advanced indexing: the
arrays broadcast together, their dims where the first stood when they (and integers)
sit side by side, else first. `logits[rows, labels]` was a GraphcError ("only one
integer-array index") on a graph value while eager tensors and numpy took it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 3, 4))

INDICES = {
    "two arrays": ([0, 1], [1, 2]),
    "apart": ([0, 1], slice(None), [1, 2]),
    "after a slice": (slice(None), [0, 2], [1, 3]),
    "an integer first": (0, [0, 2], [1, 3]),
    "an integer between": ([1], 0, [[1], [3]]),
    "broadcast, negative": (np.array([[0, 1], [1, 0]]), np.array([2, -1])),
    "three arrays": ([0, 1], [1, 2], [3, 0]),
    "a window first": (slice(1, None), [0, 2], [-1, 3]),
    "array then integer": (slice(None), [0, 2], 1),
    "array, integer, slice": ([0, 1], 1, slice(None)),
    "array, window, array": ([0, 1], slice(1, None), [0, 0]),
}


@pytest.mark.parametrize("name", list(INDICES))
def test_graph_values_index_as_numpy_and_eager_do(name: str) -> None:
    index = INDICES[name]
    want = X[index]
    traced = gc.trace(lambda v: v[index], gc.TensorSpec(X.shape, "float64"))
    got = traced(X)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(gc.jit(lambda v: v[index])(X), want)
    np.testing.assert_array_equal(ge.tensor(X)[index].numpy(), want)


def test_the_gradient_lands_where_each_pair_points_as_on_the_tape() -> None:
    """The gradient of logits[rows, labels] (a repeated pair adding up) equals the
    eager tape's and np.add.at's."""
    logits, labels = RNG.standard_normal((5, 3)), np.array([0, 2, 1, 2, 2])
    rows = np.array([0, 1, 2, 3, 3])
    weights = np.arange(1.0, 6.0)

    def loss(v: Any, y: Any) -> Any:
        return gc.sum(v[rows, y] * weights)

    g = gc.trace(loss, gc.TensorSpec((5, 3), "float64"), gc.TensorSpec((5,), "int64"))
    _, grad = gc.compile(gc.gradients(g, wrt=[g.inputs[0].name]))(logits, labels)
    want = np.zeros_like(logits)
    np.add.at(want, (rows, labels), weights)
    np.testing.assert_array_equal(grad, want)
    t = ge.tensor(logits, requires_grad=True)
    (t[rows, ge.tensor(labels)] * ge.tensor(weights)).sum().backward()
    np.testing.assert_array_equal(grad, t.grad.numpy())


def test_rows_and_labels_on_a_symbolic_batch() -> None:
    g = gc.trace(
        lambda v, r, y: v[r, y],
        gc.TensorSpec(("B", 3), "float64"),
        gc.TensorSpec(("B",), "int64"),
        gc.TensorSpec(("B",), "int64"),
    )
    assert g.outputs[0].type.shape == ("B",)
    for batch in (0, 1, 6):
        v, y = RNG.standard_normal((batch, 3)), RNG.integers(0, 3, batch)
        np.testing.assert_array_equal(g(v, np.arange(batch), y), v[np.arange(batch), y])


@pytest.mark.parametrize("labels", [[0, 3, 1, 2], [0, 1, 1, -4]])
def test_each_array_is_checked_against_its_own_axis(labels: list) -> None:
    """A label past its axis is an IndexRangeError, never another row's entry (a flat
    index would have read row 1's first entry for label 3 of row 0)."""
    v = RNG.standard_normal((4, 3))
    f = gc.jit(lambda v, y: v[np.arange(4), y])
    with pytest.raises(gc.IndexRangeError, match="out of range for axis 1 of size 3"):
        f(v, np.array(labels))
