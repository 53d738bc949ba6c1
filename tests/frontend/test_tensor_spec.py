"""gc.TensorSpec as TF and JAX users write it, and the names trace gives."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc


def test_shape_none_is_no_one_dim_spec() -> None:
    # tf.TensorSpec(shape=None) is an unknown rank; graphc took it as shape (None,): a
    # rank-1 input, so a 2-d array fed later failed far from the spec
    with pytest.raises(gc.ShapeError, match=r"TensorSpec: shape None .*TensorSpec\(\(None, 3\)\)"):
        gc.TensorSpec(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("shape", [("a b", 3), (-1, 3), (2.0,), (None, True)])
def test_bad_dims_are_named_where_the_spec_is_written(shape) -> None:  # type: ignore[no-untyped-def]
    # they were refused only while tracing, as "a dim must be ...", naming neither
    # the spec nor its shape
    with pytest.raises(gc.ShapeError, match=r"TensorSpec: bad shape"):
        gc.TensorSpec(shape)


def test_good_specs_trace_as_before() -> None:
    spec = gc.TensorSpec((None, np.int64(3)))
    assert spec.shape == (None, 3) and type(spec.shape[1]) is int
    g = gc.trace(lambda x, y: x * y, spec, gc.TensorSpec(("x_0", 3)))
    assert [str(p.type) for p in g.inputs] == ["f32[x_0,3]", "f32[x_0,3]"]
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(g(xv, xv), xv * xv)


def test_trace_name_must_be_a_str() -> None:
    with pytest.raises(gc.GraphcError, match="trace: expected a str as the graph's name"):
        gc.trace(lambda x: x, gc.TensorSpec((2,)), name=3)  # type: ignore[arg-type]
