"""TensorType and broadcasting over shapes with symbolic dims."""

from __future__ import annotations

import os

import numpy as np
import pytest

from graphc.ir.errors import DTypeError, ShapeError
from graphc.ir.types import TensorType, as_dtype, broadcast_shapes, normalize_axes


def test_type_fields_and_text() -> None:
    t = TensorType(("B", 3), "float32")
    assert t.shape == ("B", 3)
    assert t.dtype == np.float32
    assert t.rank == 2
    assert t.symbols == ("B",)
    assert not t.is_concrete
    assert t.size is None and t.nbytes is None
    assert str(t) == "f32[B,3]"
    assert str(TensorType((), "bool")) == "bool[]"


def test_concrete_type_size_and_binding() -> None:
    t = TensorType(("B", 3), "float64")
    bound = t.bind({"B": 4})
    assert bound == TensorType((4, 3), "float64")
    assert bound.size == 12 and bound.nbytes == 96
    assert t.bind({}) == t


def test_types_compare_by_value_and_normalize_dtypes() -> None:
    assert TensorType((2,), "f32") == TensorType([2], np.float32)
    assert TensorType((2,), "f32") != TensorType((2,), "f64")
    assert TensorType.of(np.zeros((2, 5), np.int64)) == TensorType((2, 5), "int64")


def test_matches_arrays_with_symbols_as_wildcards() -> None:
    t = TensorType(("B", 3), "float32")
    assert t.matches(np.zeros((7, 3), np.float32))
    assert not t.matches(np.zeros((7, 4), np.float32))
    assert not t.matches(np.zeros((7, 3), np.float64))
    assert not t.matches(np.zeros((3,), np.float32))


@pytest.mark.parametrize("dim", [-1, 1.5, "3x", "", True])
def test_bad_dims_are_shape_errors(dim: object) -> None:
    with pytest.raises(ShapeError, match="dim"):
        TensorType((2, dim))


def test_unsupported_dtype_names_it() -> None:
    with pytest.raises(DTypeError, match="complex128"):
        as_dtype("complex128")
    with pytest.raises(DTypeError, match="not a dtype"):
        as_dtype(object())


@pytest.mark.parametrize(
    "shapes, expected",
    [
        ([(3, 1), (1, 4)], (3, 4)),
        ([(), (2, 3)], (2, 3)),
        ([("B", 1), (1, 4)], ("B", 4)),
        ([("B", 3), (1,)], ("B", 3)),
        ([("B", 3), ("B", 3)], ("B", 3)),
        ([(1, "B"), (5, 1)], (5, "B")),
        ([("B",), ()], ("B",)),
    ],
)
def test_broadcasting_with_symbols(shapes: list, expected: tuple) -> None:
    assert broadcast_shapes(*shapes) == expected


@pytest.mark.parametrize(
    "shapes, culprit",
    [
        ([(3,), (4,)], "3"),
        ([("B",), (3,)], "'B'"),
        ([("B",), ("C",)], "'C'"),
    ],
)
def test_broadcasting_mismatch_names_the_dims(shapes: list, culprit: str) -> None:
    with pytest.raises(ShapeError, match="myop") as info:
        broadcast_shapes(*shapes, op="myop")
    assert culprit in str(info.value)


def test_broadcasting_agrees_with_numpy_on_concrete_shapes() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        shapes = [tuple(rng.choice([1, 2, 3], rng.integers(0, 4))) for _ in range(2)]
        try:
            expected = np.broadcast_shapes(*shapes)
        except ValueError:
            with pytest.raises(ShapeError):
                broadcast_shapes(*shapes)
            continue
        assert broadcast_shapes(*shapes) == expected


def test_normalize_axes() -> None:
    assert normalize_axes(None, 3) is None
    assert normalize_axes(-1, 3) == (2,)
    assert normalize_axes((2, 0), 3) == (0, 2)
    with pytest.raises(ShapeError, match="out of range"):
        normalize_axes(3, 3)
    with pytest.raises(ShapeError, match="repeated"):
        normalize_axes((0, -3), 3)


def test_a_type_unpickled_in_another_process_hashes_there_as_its_equals() -> None:
    """A type keeps its hash (computed once: types are keys everywhere), but a symbol's
    hash, like every str's, is per process: a pickled type (dask ships graphs to its
    workers) must be rebuilt there, not carry the hash of the process that made it."""
    import pickle
    import subprocess
    import sys

    data = pickle.dumps(TensorType(("B", 3), "float32")).hex()
    check = (
        "import pickle, sys; from graphc.ir.types import TensorType as T; "
        "a = pickle.loads(bytes.fromhex(sys.argv[1])); b = T(('B', 3), 'float32'); "
        "print(a == b, hash(a) == hash(b), {b: 'found'}.get(a))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "random"}
    run = subprocess.run(
        [sys.executable, "-c", check, data], capture_output=True, text=True, env=env
    )
    assert run.stdout.split() == ["True", "True", "found"], run.stderr
