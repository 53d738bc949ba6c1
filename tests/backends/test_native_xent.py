"""The cross-entropy head on the native backend: one_hot lowered (zeroed rows, a one at
each label: numpy's bits, numpy's error for a label outside the classes), the picks of
fuse_one_hot_pick, and the gradient's where in the elementwise group; every level gives
native O0's bits, close to numpy's (log_softmax and exp are libmvec's there)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import graphc as gc
from tests.edge_values import bits_differ
from tests.native_checks import check_native, needs_native, normwise

pytestmark = needs_native


def head(n: Any, classes: int, dtype: str = "float32") -> gc.Graph:
    g = gc.trace(gc.cross_entropy, gc.TensorSpec((n, classes), dtype), gc.TensorSpec((n,), "int64"))
    return gc.gradients(g, wrt=[g.inputs[0].name])


def feeds(n: int, classes: int, dtype: str, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = (3.0 * rng.standard_normal((n, classes))).astype(dtype)
    if seed % 2:  # edge values among the normal ones
        specials = np.array([np.nan, np.inf, -np.inf, -0.0, 1e30, -1e30], dtype)
        x.flat[::13] = rng.choice(specials, size=x.flat[::13].shape)
    return {"logits": x, "labels": rng.integers(0, classes, n)}


@pytest.mark.filterwarnings("ignore:Mean of empty slice")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("n", "classes"), [(64, 100), (5, 1), (0, 7), (300, 37)])
def test_the_head_agrees_with_numpy_at_every_level(n: int, classes: int, dtype: str) -> None:
    rtol = 1e-5 if dtype == "float32" else 1e-13
    sets = [feeds(n, classes, dtype, seed) for seed in (0, 1)]
    check_native(head("N", classes, dtype), sets, close=normwise(rtol), close_sets=(0,))


def test_the_4096x1000_plan_keeps_three_wide_passes_and_matches_numpy() -> None:
    graph = head(4096, 1000)
    exe = gc.compile(graph, backend="native")
    given = feeds(4096, 1000, "float32", 2)
    text = exe.explain(**given)
    line = next(line for line in text.splitlines() if "one_hot = one_hot(labels)" in line)
    assert line.endswith("[native]"), text
    assert text.count("one_hot_pick(") == 2 and " where" not in text, text
    loss, grad = exe(**given)
    want_loss, want_grad = gc.compile(graph, backend="numpy", opt_level=0)(**given)
    assert normwise(1e-5)(grad, want_grad) is None
    np.testing.assert_allclose(loss, want_loss, rtol=1e-5)


@pytest.mark.parametrize("dtype", ["bool", "float32", "float64", "int64", "uint8", "float16"])
@pytest.mark.parametrize(("labels_shape", "classes"), [((5000,), 7), ((40, 130), 7), ((), 5000)])
def test_the_native_one_hot_gives_numpys_bits(
    dtype: str, labels_shape: tuple, classes: int
) -> None:
    graph = gc.trace(
        lambda y: gc.one_hot(y, num_classes=classes, dtype=dtype),
        gc.TensorSpec(labels_shape, "int32"),
    )
    labels = np.random.default_rng(5).integers(0, classes, labels_shape).astype(np.int32)
    exe = gc.compile(graph, backend="native")
    assert "[native]" in exe.explain(labels)
    want = gc.compile(graph, backend="numpy")(labels)
    assert bits_differ(exe(labels), want) is None
    assert bits_differ(exe(labels), want) is None  # the reused buffer is zeroed again


@pytest.mark.parametrize(
    "labels_dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
)
@pytest.mark.parametrize("shape", [(0,), (4,), (3, 5)])
def test_every_integer_labels_dtype_and_small_sizes_run_the_c_kernel(
    labels_dtype: str, shape: tuple
) -> None:
    graph = gc.trace(lambda y: gc.one_hot(y, num_classes=3), gc.TensorSpec(shape, labels_dtype))
    labels = (np.arange(int(np.prod(shape))) % 3).reshape(shape).astype(labels_dtype)
    exe = gc.compile(graph, backend="native")
    assert "one_hot(y)" in exe.explain(labels) and "[numpy]" not in exe.explain(labels)
    want = gc.compile(graph, backend="numpy")(labels)
    assert bits_differ(exe(labels), want) is None


def test_a_strided_labels_view_is_read_in_its_own_order() -> None:
    graph = gc.trace(lambda y: gc.one_hot(y.T, num_classes=4), gc.TensorSpec((3, 5), "int64"))
    labels = np.random.default_rng(0).integers(0, 4, (3, 5))
    want = gc.compile(graph, backend="numpy")(labels)
    assert bits_differ(gc.compile(graph, backend="native")(labels), want) is None


@pytest.mark.parametrize("bad", [-1, 7])
def test_a_label_outside_the_classes_is_one_hots_error(bad: int) -> None:
    graph = head("N", 7)
    given = feeds(1000, 7, "float32", 0)
    given["labels"][500] = bad
    for level in (0, 2):
        exe = gc.compile(graph, backend="native", opt_level=level)
        with pytest.raises(gc.IndexRangeError, match=f"one_hot: label {bad} is out of range"):
            exe(**given)


def _labels_in(n: int, classes: int) -> gc.Graph:
    return gc.trace(
        lambda y: gc.sum(gc.one_hot(y, num_classes=classes), axis=0),
        gc.TensorSpec((n,), "int64"),
    )


@pytest.mark.parametrize("bad", [-3, 5])
def test_a_bad_label_raises_one_hots_error_from_the_entry_in_c(bad: int) -> None:
    """The C call's status reaches the entry's tape, which reads the labels back from the
    failing call's arguments (Kernel.failure) to name the label."""
    exe = gc.compile(_labels_in(8, 5), backend="native")
    good = np.arange(8) % 5
    want = exe(good)
    assert exe.wait()
    if "entry: one C call" not in exe.explain():
        pytest.skip("no entry in C here (Python's headers)")
    labels = good.copy()
    labels[6] = bad
    with pytest.raises(gc.IndexRangeError, match=f"one_hot: label {bad} is out of range for 5"):
        exe(labels)
    assert bits_differ(exe(good), want) is None  # the entry still runs


def test_a_huge_unsigned_label_is_out_of_range() -> None:
    graph = gc.trace(lambda y: gc.one_hot(y, num_classes=4), gc.TensorSpec((3,), "uint64"))
    labels = np.array([1, 2**63 + 1, 0], np.uint64)
    with pytest.raises(gc.IndexRangeError, match=f"one_hot: label {2**63 + 1} is out of range"):
        gc.compile(graph, backend="native")(labels)


def test_a_bad_label_in_a_loop_in_c_raises_one_hots_error() -> None:
    def count(total: Any, y: Any) -> Any:
        return total + gc.one_hot(y, num_classes=4), None

    graph = gc.trace(
        lambda ys: gc.scan(count, np.zeros(4, np.float32), ys)[0],
        gc.TensorSpec((6,), "int64"),
    )
    exe = gc.compile(graph, backend="native", wait=True)
    good = np.array([0, 1, 1, 3, 2, 0])
    assert "runs in C" in exe.explain(good), exe.explain(good)
    np.testing.assert_array_equal(exe(good), [2, 2, 1, 1])
    with pytest.raises(gc.IndexRangeError, match="one_hot: label 4 is out of range for 4"):
        exe(np.array([0, 1, 4, 3, 2, 0]))
