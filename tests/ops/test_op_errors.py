"""Each op-level mistake raises a graphc error naming the op and expected vs actual."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import graphc as gc

X = np.arange(12.0).reshape(3, 4)

# (label, call, error type, fragments the message must contain)
MISTAKES: list[tuple[str, Callable[[], Any], type, tuple[str, ...]]] = [
    ("add shapes", lambda: gc.add(X, np.ones(3)), gc.ShapeError, ("add", "(3, 4)", "(3,)")),
    ("sub bool", lambda: gc.sub(np.ones(2, bool), np.ones(2, bool)), gc.DTypeError, ("sub", "bool")),
    ("neg bool", lambda: gc.neg(np.ones(2, bool)), gc.DTypeError, ("neg", "bool")),
    ("log bool", lambda: gc.log(np.ones(2, bool)), gc.DTypeError, ("log", "bool", "float16")),
    ("relu bool", lambda: gc.relu(np.ones(2, bool)), gc.DTypeError, ("relu", "bool")),
    ("pow int negative", lambda: gc.pow(np.array([2]), np.array([-1])), gc.DTypeError, ("pow", "float")),
    ("scalar overflow", lambda: gc.add(np.ones(1, np.int32), 2**40), gc.DTypeError, ("add", "int32")),
    ("where cond", lambda: gc.where(X, X, X), gc.DTypeError, ("where", "bool", "float64")),
    ("where shapes", lambda: gc.where(X > 1, X, np.ones(5)), gc.ShapeError, ("where", "(5,)")),
    # the clip op's bounds are scalar attrs (gc.clip and gc.clamp take arrays as maximum/minimum)
    ("clip array bound", lambda: gc.bind("clip", X, a_min=np.ones(4)), gc.GraphcError, ("clip", "a_min", "scalar")),
    ("cast dtype", lambda: gc.cast(X, "complex64"), gc.DTypeError, ("complex64",)),
    ("matmul inner", lambda: gc.matmul(X, X), gc.ShapeError, ("matmul", "(3, 4)", "4 vs 3")),
    ("matmul 0d", lambda: gc.matmul(np.ones(()), X), gc.ShapeError, ("matmul", "at least one dim")),
    ("matmul batch", lambda: gc.matmul(np.ones((2, 3, 4)), np.ones((5, 4, 2))), gc.ShapeError, ("matmul", "2", "5")),
    ("sum axis", lambda: gc.sum(X, axis=2), gc.ShapeError, ("sum", "axis 2", "rank 2")),
    ("sum 0-d axis", lambda: gc.sum(np.ones(()), axis=1), gc.ShapeError, ("sum", "axis 1", "rank 0")),
    ("mean 0-d axes", lambda: gc.mean(np.ones(()), axis=(0, -1)), gc.ShapeError, ("mean", "repeated")),
    ("softmax 0-d axis", lambda: gc.softmax(np.ones(()), axis=2), gc.ShapeError, ("softmax", "axis 2", "rank 0")),
    ("softmax axis None", lambda: gc.softmax(X, axis=None), gc.GraphcError, ("softmax", "int", "None")),
    ("mean repeated axis", lambda: gc.mean(X, axis=(0, -2)), gc.ShapeError, ("mean", "repeated")),
    ("unknown attr", lambda: gc.sum(X, axes=1), gc.GraphcError, ("sum", "axes", "axis, keepdims")),
    ("max empty", lambda: gc.max(np.ones((0, 3)), axis=0), gc.ShapeError, ("max", "empty", "(0, 3)")),
    ("argmax empty", lambda: gc.argmax(np.ones((0,))), gc.ShapeError, ("argmax", "empty")),
    ("argmax axes", lambda: gc.argmax(X, axis=(0, 1)), gc.GraphcError, ("argmax", "(0, 1)")),
    ("softmax axis", lambda: gc.softmax(X, axis=3), gc.ShapeError, ("softmax", "axis 3")),
    ("one_hot floats", lambda: gc.one_hot(X, num_classes=3), gc.DTypeError, ("one_hot", "float64")),
    ("one_hot missing", lambda: gc.one_hot(np.array([1])), gc.GraphcError, ("one_hot", "num_classes")),
    ("one_hot zero", lambda: gc.one_hot(np.array([1]), num_classes=0), gc.GraphcError, ("one_hot", "at least 1")),
    ("one_hot label range", lambda: gc.one_hot(np.array([0, 3]), num_classes=3), gc.IndexRangeError, ("one_hot", "label 3", "3 classes")),
    ("one_hot negative label", lambda: gc.one_hot(np.array([-1]), num_classes=3), gc.IndexRangeError, ("one_hot", "label -1")),
    ("cross_entropy label range", lambda: gc.cross_entropy(np.zeros((2, 3)), np.array([0, 3])), gc.ShapeError, ("one_hot", "label 3")),
    ("reshape size", lambda: gc.reshape(X, (5, 2)), gc.ShapeError, ("reshape", "(3, 4)", "(5, 2)")),
    ("reshape -1", lambda: gc.reshape(X, (5, -1)), gc.ShapeError, ("reshape", "-1", "(3, 4)")),
    ("reshape two -1", lambda: gc.reshape(X, (-1, -1)), gc.ShapeError, ("reshape", "one -1")),
    ("reshape negative", lambda: gc.reshape(X, (-2, 6)), gc.ShapeError, ("reshape", "-2")),
    ("transpose perm", lambda: gc.transpose(X, (0, 0)), gc.ShapeError, ("transpose", "(0, 0)")),
    ("broadcast_to", lambda: gc.broadcast_to(X, (4, 3)), gc.ShapeError, ("broadcast_to", "(3, 4)", "(4, 3)")),
    ("broadcast_to dim", lambda: gc.broadcast_to(X, (3, -4)), gc.ShapeError, ("broadcast_to", "-4")),
    ("sum_to", lambda: gc.sum_to(X, (5,)), gc.ShapeError, ("sum_to", "(3, 4)", "(5,)")),
    ("concat shapes", lambda: gc.concat([X, np.ones((2, 3))]), gc.ShapeError, ("concat", "(2, 3)", "axis 0")),
    ("concat empty", lambda: gc.concat([]), gc.GraphcError, ("concat", "at least one")),
    ("scatter_add range", lambda: gc.scatter_add(np.ones(2), np.array([0, 4]), shape=(4,)), gc.IndexRangeError, ("scatter_add", "index 4", "size 4")),
    ("concat axis", lambda: gc.concat([X, X], axis=2), gc.ShapeError, ("concat", "axis 2")),
    ("stack shapes", lambda: gc.stack([np.ones(2), np.ones(3)]), gc.ShapeError, ("stack", "(2,)", "(3,)")),
    ("expand new -1", lambda: gc.expand(np.ones((3, 1)), -1, 3, 4), gc.ShapeError, ("expand", "-1")),
    ("expand rank", lambda: gc.expand(np.ones((2, 3, 1)), 3, 4), gc.ShapeError, ("expand", "(2, 3, 1)")),
    ("squeeze", lambda: gc.squeeze(X, 0), gc.ShapeError, ("squeeze", "axis 0", "3")),
    ("getitem range", lambda: gc.getitem(X, 5), gc.IndexRangeError, ("getitem", "5", "dim 3")),
    ("getitem too many", lambda: gc.getitem(X, (1, 1, 1)), gc.ShapeError, ("getitem", "too many", "rank 2")),
    ("getitem ellipses", lambda: gc.getitem(X, (..., ...)), gc.ShapeError, ("getitem", "single ellipsis")),
    ("getitem step 0", lambda: gc.getitem(X, slice(None, None, 0)), gc.ShapeError, ("getitem", "zero")),
    ("getitem float", lambda: gc.getitem(X, 1.5), gc.DTypeError, ("getitem", "1.5")),
    ("getitem mask", lambda: gc.getitem(X, X > 3), gc.GraphcError, ("getitem", "gc.where")),
    ("getitem array and None", lambda: gc.getitem(X, (np.array([0]), None)), gc.GraphcError, ("getitem", "None or ...")),
    ("getitem two arrays apart", lambda: gc.getitem(X, (np.array([0, 1]), np.array([1, 2, 0]))), gc.ShapeError, ("getitem", "broadcast")),
    ("take float", lambda: gc.take(X, np.array([0.5])), gc.DTypeError, ("take", "integers", "float64")),
    ("take range", lambda: gc.take(X, np.array([0, 5])), gc.IndexRangeError, ("take", "5", "size 3")),
    ("take 0-d range", lambda: gc.take(X, np.array(-4)), gc.IndexRangeError, ("take", "-4", "size 3")),
    ("take axis", lambda: gc.take(X, np.array([0]), axis=2), gc.ShapeError, ("take", "axis 2")),
    ("unslice window", lambda: gc.unslice(np.ones((2, 3)), shape=(5,), index="1:3"), gc.ShapeError, ("unslice", "(2, 3)", "(2,)")),
    ("scatter_add shape", lambda: gc.scatter_add(np.ones((2, 3)), np.array([0, 1]), shape=(5,)), gc.ShapeError, ("scatter_add", "(2,)", "(2, 3)")),
    ("scatter_add float", lambda: gc.scatter_add(np.ones(2), np.ones(2), shape=(5,)), gc.DTypeError, ("scatter_add", "integers")),
    ("arity", lambda: gc.ops.bind("add", X), gc.GraphcError, ("add", "2 input", "got 1")),
]  # fmt: skip


@pytest.mark.parametrize(
    "call, error, fragments", [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES]
)
def test_mistake_raises_a_graphc_error_naming_the_op(
    call: Callable[[], Any], error: type, fragments: tuple[str, ...]
) -> None:
    with pytest.raises(error) as info:
        call()
    for fragment in fragments:
        assert fragment in str(info.value), f"{fragment!r} not in {str(info.value)!r}"


def test_mistakes_in_a_graph_raise_the_same_errors() -> None:
    g = gc.Graph("mistakes")
    with g:
        x = gc.placeholder("x", shape=("B", 3))
        with pytest.raises(gc.ShapeError, match="add.*'B' against 3"):
            gc.add(x, gc.placeholder("y", shape=(3, 3)))
        with pytest.raises(gc.DTypeError, match="take: indices must be integers"):
            gc.take(x, gc.placeholder("i", shape=(2,), dtype="float32"))
        with pytest.raises(gc.ShapeError, match="matmul"):
            gc.matmul(x, gc.placeholder("w", shape=(4, 2)))
