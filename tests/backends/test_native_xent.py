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


def _ignoring(labels_dtype: str, shape: tuple, classes: int, ignore: int) -> gc.Graph:
    return gc.trace(
        lambda y: gc.one_hot(y, num_classes=classes, dtype="float32", ignore_index=ignore),
        gc.TensorSpec(shape, labels_dtype),
    )


@pytest.mark.parametrize(
    ("labels_dtype", "ignore"),
    [("int64", -100), ("int64", -1), ("int64", 2), ("int8", -100), ("uint8", 2), ("uint8", -1)]
    + [("uint64", 9), ("int32", 0)],
)
def test_an_ignored_label_keeps_its_row_of_zeros_with_numpys_bits(
    labels_dtype: str, ignore: int
) -> None:
    """one_hot's ignore_index (a loss's padding target): the label's row is all zeros, in
    the C kernel as in numpy's, whether the label is outside the classes or one of them
    (that class's ones are all left out); an unsigned label never equals a negative one."""
    classes, shape = 4, (6, 5)
    rng = np.random.default_rng(7)
    labels = rng.integers(0, classes, shape).astype(labels_dtype)
    if ignore >= 0 or np.dtype(labels_dtype).kind == "i":
        labels[::2, 1] = ignore
    graph = _ignoring(labels_dtype, shape, classes, ignore)
    want = np.equal(labels[..., None], np.arange(classes)) & (labels != ignore)[..., None]
    got_numpy = gc.compile(graph, backend="numpy")(labels)
    assert bits_differ(got_numpy, want.astype(np.float32)) is None
    exe = gc.compile(graph, backend="native")
    assert "[numpy]" not in exe.explain(labels)
    assert bits_differ(exe(labels), got_numpy) is None


@pytest.mark.parametrize("level", [0, 2])
def test_a_label_outside_the_classes_and_not_ignored_is_still_one_hots_error(level: int) -> None:
    graph = _ignoring("int64", (8,), 5, -100)
    exe = gc.compile(graph, backend="native", opt_level=level, wait=True)
    labels = np.array([0, -100, 4, 1, -100, 2, 3, 0])
    exe(labels)
    for bad in (-1, 5, -101):
        wrong = labels.copy()
        wrong[5] = bad
        with pytest.raises(gc.IndexRangeError, match=f"one_hot: label {bad} is out of range"):
            exe(wrong)


def test_a_bad_label_beside_ignored_ones_is_named_from_the_entry_in_c() -> None:
    """The tape's failure reads the ignore arguments back too: the label named is the bad
    one, not an ignored one before it."""
    graph = gc.trace(
        lambda y: gc.sum(gc.one_hot(y, num_classes=5, ignore_index=-100), axis=0),
        gc.TensorSpec((8,), "int64"),
    )
    exe = gc.compile(graph, backend="native")
    good = np.array([0, -100, 4, 1, -100, 2, 3, 0])
    want = exe(good)
    assert exe.wait()
    if "entry: one C call" not in exe.explain():
        pytest.skip("no entry in C here (Python's headers)")
    labels = good.copy()
    labels[6] = 9
    with pytest.raises(gc.IndexRangeError, match="one_hot: label 9 is out of range for 5"):
        exe(labels)
    assert bits_differ(exe(good), want) is None


@pytest.mark.parametrize("ignore", [-100, 3])
@pytest.mark.parametrize("fill", [0.0, -0.0])
def test_the_pick_of_ignored_labels_gives_the_unfused_chains_bits(ignore: int, fill: float) -> None:
    """fuse_one_hot_pick keeps one_hot's ignore_index: an ignored label's row sums its
    zeros (the fill's sign kept as the sum's kernel keeps it), every other row its pick."""
    n, classes = 3000, 7

    def pick(x: Any, y: Any) -> Any:
        at = gc.one_hot(y, num_classes=classes, dtype=bool, ignore_index=ignore)
        return gc.sum(gc.where(at, x, fill), axis=-1)

    graph = gc.trace(pick, gc.TensorSpec((n, classes)), gc.TensorSpec((n,), "int64"))
    rng = np.random.default_rng(8)
    x = rng.standard_normal((n, classes)).astype(np.float32)
    x[::5] = -0.0
    x[::7, 2] = np.nan
    y = rng.integers(0, classes, n)
    y[::3] = ignore
    rows = np.where(np.arange(classes) == y[:, None], x, np.float32(fill))
    rows[y == ignore] = fill
    want = rows.sum(axis=-1)
    assert "one_hot_pick" in gc.compile(graph, backend="numpy").explain(x, y)
    for backend in ("numpy", "native"):
        for level in (0, 2):
            got = gc.compile(graph, backend=backend, opt_level=level)(x, y)
            assert bits_differ(got, want) is None, (backend, level)


def test_torchs_cross_entropy_step_with_padding_labels_runs_as_one_c_call() -> None:
    """nn.CrossEntropyLoss's defaults on a compiled step leave -100 targets out of the
    mean (one_hot's ignore_index and a count of the rows kept, no comparison of the int64
    labels): every step of the MLP's native plan has a C kernel, and the plan runs as one
    C call, with the loss and the parameters of graphc's eager step."""
    from graphc import nn, optim
    from graphc.bench import mlp

    rng = np.random.default_rng(3)
    x = rng.standard_normal((16, 784)).astype(np.float32)
    y = rng.integers(0, 10, 16)
    y[::5] = -100

    def make() -> Any:
        model = mlp.model()
        return model, optim.SGD(model.parameters(), lr=mlp.LR)

    model, opt = make()
    step = gc.compile_train_step(model, nn.CrossEntropyLoss(), opt, (x, y), backend="native")
    eager, eager_opt = make()
    for k in range(4):
        loss = step(x, y)
        if k == 0:
            assert step.executable.wait()
            assert "entry: one C call" in step.explain(x, y), step.explain(x, y)
        eager_opt.zero_grad()
        want = nn.CrossEntropyLoss()(eager(gc.eager.tensor(x)), gc.eager.tensor(y))
        want.backward()
        eager_opt.step()
        np.testing.assert_allclose(loss, want.item(), rtol=1e-5)
    got = step.parameters()
    for name, p in eager.named_parameters():
        np.testing.assert_allclose(got[name], p.detach().numpy(), rtol=1e-4, atol=1e-6)


def test_torchs_loss_at_a_wide_head_keeps_the_three_wide_passes() -> None:
    """nn.CrossEntropyLoss on graph values counts the targets not ignored with a pick of
    ones: at 4096x1000 its head makes no more (N, C) arrays than gc.cross_entropy's
    (the log-probabilities, the one-hot rows, the gradient), where a cast of the rows
    to count them was a fourth pass (1.37x the plain head's time here)."""
    from graphc import nn

    def wide_steps(loss: Any) -> list[str]:
        g = gc.trace(loss, gc.TensorSpec((4096, 1000)), gc.TensorSpec((4096,), "int64"))
        exe = gc.compile(gc.gradients(g, wrt=[g.inputs[0].name]), backend="native")
        given = feeds(4096, 1000, "float32", 2)
        lines = exe.explain(*given.values()).split("\nbuffers:")[0].splitlines()
        return [line for line in lines if "[4096,1000]  ->" in line]

    torch_style, plain = wide_steps(nn.CrossEntropyLoss()), wide_steps(gc.cross_entropy)
    assert len(torch_style) == len(plain) == 3, (torch_style, plain)
